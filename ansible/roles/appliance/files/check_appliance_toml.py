"""Preflight: load a rendered appliance.toml (on stdin) with the appliance's own validation.

The appliance role's validate tasks run this on the controller, with the Python that has
the `appliance` package, before any host changes: the same `appliance.config.load_config`
that `appliance run` starts with checks the file the role is about to install (a trigger
with an interval it refuses, a bad Kafka security setting, a typo in appliance_spark_conf).
The rendering and the service's secret environment (appliance.env: the Kafka password)
arrive on stdin as one JSON document, the file lands in a private temporary directory,
and the error line names fields, never their secret values.

    python check_appliance_toml.py LABEL < {"toml": "...", "environ": {"NAME": "value"}}

Exit 0 valid; 2 with the appliance's one-line error, the temporary file named LABEL.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

from appliance.config import ConfigError, load_config


def main(argv: list[str]) -> int:
    label = argv[1] if len(argv) > 1 else "appliance.toml"
    document = json.loads(sys.stdin.read())
    text, environ = document["toml"], dict(document.get("environ") or {})
    with tempfile.TemporaryDirectory(prefix="appliance-preflight-") as tmp:
        path = Path(tmp) / "appliance.toml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        try:
            # The file and the service's own environment file: the controller's own
            # APPLIANCE_* variables are not the host's.
            load_config(path, environ=environ)
        except ConfigError as exc:
            print(str(exc).replace(str(path), label), file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
