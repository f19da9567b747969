"""``appliance broker-user add --file users.toml --user NAME``: add or replace a broker user
(and ``broker-user acl ...``: the broker's ACLs, ``acl.cli``).

The password is read from stdin (``--password-stdin``, for scripts and Ansible), else from
the environment variable ``APPLIANCE_BROKER_USER_PASSWORD``, else prompted for without
echo; never from the command line, where every local user could read it in
``/proc/*/cmdline``. Only salted SCRAM credentials are written (credentials.py).
Registered as an ``appliance.commands`` entry point; also ``python -m
appliance.broker.users_cli``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from appliance.broker.acl import cli as acl_cli
from appliance.broker.security.credentials import CredentialsError, add_user
from appliance.broker.security.scram import DEFAULT_ITERATIONS, MECHANISMS, MIN_ITERATIONS

PASSWORD_ENV = "APPLIANCE_BROKER_USER_PASSWORD"


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    first = getpass.getpass(f"password for {args.user}: ")
    if getpass.getpass("again: ") != first:
        raise CredentialsError("the two passwords differ")
    return first


def _mechanisms(value: str) -> tuple[str, ...]:
    out = tuple(m.strip().upper() for m in value.split(",") if m.strip())
    for m in out:
        if m not in MECHANISMS:
            raise argparse.ArgumentTypeError(f"unknown mechanism {m!r} "
                                             f"(want {', '.join(MECHANISMS)})")
    return out


def _add(args: argparse.Namespace) -> int:
    try:
        password = _read_password(args)
        written = add_user(args.file, args.user, password, args.mechanisms, args.iterations,
                           only_if_changed=args.only_if_changed)
    except CredentialsError as exc:
        print(f"broker-user: {exc}", file=sys.stderr)
        return 2
    except (EOFError, KeyboardInterrupt):
        print("broker-user: no password given", file=sys.stderr)
        return 2
    # stdout: one word a script can branch on (Ansible's changed_when).
    print("saved" if written else "unchanged")
    if written:
        print(f"broker-user: {args.user} saved in {args.file} "
              f"({', '.join(args.mechanisms)}; PLAIN checks against these)", file=sys.stderr)
    else:
        print(f"broker-user: {args.user} in {args.file} already has this password "
              f"({', '.join(args.mechanisms)}); file left unchanged", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Entry point of the ``appliance.commands`` group."""
    parser = subparsers.add_parser("broker-user", help="manage the embedded broker's users")
    sub = parser.add_subparsers(dest="broker_user_command", required=True)
    add = sub.add_parser("add", help="add or replace a user (password never on argv)")
    add.add_argument("--file", required=True, help="users file (created with mode 0600)")
    add.add_argument("--user", required=True)
    add.add_argument("--mechanisms", type=_mechanisms, default=tuple(MECHANISMS),
                     help="comma-separated (default: both SCRAM mechanisms)")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help=f"PBKDF2 iterations (>= {MIN_ITERATIONS})")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from the first line of stdin")
    add.add_argument("--only-if-changed", action="store_true",
                     help="leave the file alone when the user already has this password, "
                          "these mechanisms and iterations (prints 'unchanged', else "
                          "'saved'): for configuration management")
    add.set_defaults(func=_add)
    acl_cli.register(sub.add_parser("acl", help="the broker's ACLs (DATA_DIR/acls.json)"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="appliance")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
