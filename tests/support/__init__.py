"""Helpers shared by every test package (one copy of each, instead of one per module)."""
