"""Helpers for tests/docs/ (``support.docs.<module>``), not tests."""
