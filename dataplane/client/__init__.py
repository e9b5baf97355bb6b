"""Library code that talks to a cluster as a Kafka client (the control plane and console use it)."""
