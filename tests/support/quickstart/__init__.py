"""Helpers for tests/quickstart/ (``support.quickstart.<module>``), not tests."""
