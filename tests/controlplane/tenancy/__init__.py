"""Tests of controlplane.tenancy."""
