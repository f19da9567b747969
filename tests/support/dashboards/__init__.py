"""Helpers for tests/dashboards/ (``support.dashboards.<module>``), not tests."""
