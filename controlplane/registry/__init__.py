"""The Schema Registry: Confluent's REST API, one registry per managed cluster, stored in Postgres (decision 0026)."""
