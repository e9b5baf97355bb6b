"""Tests of controlplane.clusters."""
