"""Helpers the suites share, imported as ``support.<module>`` (tests/ is on
sys.path: its conftest.py is the rootdir's); one suite's own helpers live in
its sub-package. Programs the tests run by path stay beside their tests."""
