"""Tests that cross every app: isolation, validation, limits and serving, found by walking the API."""
