"""Helpers for tests/faults/ (``support.faults.<module>``), not tests."""
