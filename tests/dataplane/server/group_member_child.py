"""A consumer-group member in its own process, so a test can SIGKILL it.

Usage: group_member_child.py BOOTSTRAP TOPIC GROUP. Prints ``got <partition> <value>`` for each
record after processing it and commits synchronously after each one (manual commits),
so every record it did not print was never committed by it.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer


def main(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
                         "client.id": "child"})
    consumer.subscribe([topic])
    while True:
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        print(f"got {message.partition()} {message.value().decode()}", flush=True)
        consumer.commit(message=message, asynchronous=False)


if __name__ == "__main__":
    main(*sys.argv[1:4])
