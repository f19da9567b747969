"""Helpers for tests/deploy/ (``support.deploy.<module>``), not tests."""
