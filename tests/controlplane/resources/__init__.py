"""Tests of controlplane.resources."""
