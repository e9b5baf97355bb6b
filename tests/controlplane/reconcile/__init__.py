"""Tests of controlplane.reconcile."""
