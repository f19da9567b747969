"""Helpers for tests/cluster/ (``support.cluster.<module>``), not tests."""
