"""Tests of controlplane.agent."""
