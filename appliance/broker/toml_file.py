"""Reading an operator's TOML file (the broker's users file, ``appliance.toml``) with the
two errors an operator can act on, each one line naming the file; the caller picks the
exception class its CLI turns into exit 2. In the broker package, at its bottom, because
the broker reads its users file and may not import the appliance above it."""

from __future__ import annotations

import os
import tomllib
from typing import Any


def read_toml(path: str | os.PathLike, error: type[Exception]) -> dict[str, Any]:
    """The parsed file; ``error("<path>: not valid TOML: ...")`` or
    ``error("<path>: cannot read: <reason>")``."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None
