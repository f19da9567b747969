"""Helpers for tests/connector/ (``support.connector.<module>``), not tests."""
