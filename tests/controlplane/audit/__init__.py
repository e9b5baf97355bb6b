"""Tests of controlplane.audit."""
