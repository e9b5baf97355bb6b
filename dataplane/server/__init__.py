"""The broker process: asyncio TCP server speaking the Kafka protocol."""
