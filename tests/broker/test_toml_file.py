"""``read_toml``: the one reader of operators' TOML files (users file, appliance.toml)."""

from __future__ import annotations

import os

import pytest

from appliance.broker.security.credentials import CredentialsError, load_users
from appliance.broker.toml_file import read_toml
from appliance.config import ConfigError, load_config


class Refused(Exception):
    pass


def test_reads_the_file(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text('[x]\n"a.b" = 1\n')
    assert read_toml(path, Refused) == {"x": {"a.b": 1}}


def test_bad_toml_and_unreadable_files_are_one_line_naming_the_file(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text("[x\n")
    with pytest.raises(Refused, match=rf"^{path}: not valid TOML: "):
        read_toml(path, Refused)
    with pytest.raises(Refused, match=rf"^{tmp_path}: cannot read: Is a directory$"):
        read_toml(tmp_path, Refused)


def test_users_file_and_config_say_it_the_same_way(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text("[x\n")
    os.chmod(path, 0o600)
    with pytest.raises(CredentialsError, match=rf"^{path}: not valid TOML: "):
        load_users(path)
    with pytest.raises(ConfigError, match=rf"^{path}: not valid TOML: "):
        load_config(path, environ={})
