"""Helpers for tests/appliance/ (``support.appliance.<module>``), not tests."""
