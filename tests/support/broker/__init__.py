"""Helpers for tests/broker/ (``support.broker.<module>``), not tests."""
