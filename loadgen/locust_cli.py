"""``python -m loadgen.locust_cli [LOCUST FLAGS]``: Locust with the project's locustfile,
whose ``--help`` lists the project's flags with Locust's own.

``locust -f loadgen/locustfile.py`` runs the same test, but Locust prints ``--help``
before it loads the file, so its help cannot name a locustfile's flags. This imports
``loadgen.locust_args`` (which registers them) and then runs Locust's own ``main`` with
``-f loadgen/locustfile.py`` unless ``-f`` is given; every Locust flag, exit code and
environment variable is Locust's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from locust.main import main as locust_main

from loadgen import locust_args  # noqa: F401 - registers the project's flags with Locust

LOCUSTFILE = Path(__file__).resolve().with_name("locustfile.py")


def _names_a_file(args: list[str]) -> bool:
    return any(a in ("-f", "--locustfile") or a.startswith(("-f=", "--locustfile="))
               for a in args)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not _names_a_file(args):
        args = ["-f", str(LOCUSTFILE), *args]
    sys.argv = ["locust", *args]
    locust_main()


if __name__ == "__main__":
    main()
