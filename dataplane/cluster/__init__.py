"""Cluster metadata in PostgreSQL, in the dataplane's own schema (no Django)."""
