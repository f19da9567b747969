"""``appliance broker-user add --file users.toml --user NAME``: add or replace a broker user
(and ``broker-user acl ...``: the broker's ACLs, ``acl.cli``).

The password is read from stdin (``--password-stdin``, for scripts and Ansible), else from
the environment variable ``APPLIANCE_BROKER_USER_PASSWORD``, else prompted for without
echo; never from the command line, where every local user could read it in
``/proc/*/cmdline``. Only salted SCRAM credentials are written (credentials.py).
``appliance broker-user`` (``build``, listed by appliance.cli); also ``python -m
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
from appliance.broker.settings import DATA_DIR_USERS

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
    if args.file is None:
        args.file = os.path.join(args.data_dir, DATA_DIR_USERS)
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


def build(parser: argparse.ArgumentParser) -> None:
    """``appliance broker-user``'s flags and subcommands (its ``Command`` in appliance.cli)."""
    parser.description = (
        "The embedded broker's users file and ACL file, edited offline (a running broker "
        "applies them on SIGHUP or restart). Passwords never on the command line.")
    parser.epilog = (
        "examples:\n"
        "  appliance broker-user add --file users.toml --user appliance\n"
        "  printf '%s\\n' \"$PASSWORD\" | appliance broker-user add --file users.toml "
        "--user appliance --password-stdin\n"
        "  appliance broker-user acl add --data-dir var/broker --allow-principal "
        "User:appliance --operation READ --topic events")
    sub = parser.add_subparsers(dest="broker_user_command", required=True, metavar="COMMAND")
    add = sub.add_parser(
        "add", help="add or replace a user (password never on argv)",
        description="Add or replace a user in the users file. The password comes from stdin "
                    f"(--password-stdin), else ${PASSWORD_ENV}, else a prompt. Prints "
                    "'saved' or 'unchanged'; exit 0, or 2 with one line.",
        epilog="examples:\n  appliance broker-user add --file users.toml --user alice\n"
               "  appliance broker-user add --file users.toml --user alice "
               "--mechanisms SCRAM-SHA-512 --password-stdin < password.txt")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument("--file", help="users file (created with mode 0600): --sasl-users")
    where.add_argument("--data-dir", help="the broker's data directory: its users.toml, "
                                          "for a broker started without --sasl-users")
    add.add_argument("--user", required=True, help="the user name clients log in with")
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


def register(subparsers) -> None:
    """``broker-user`` on a parser of one's own (``python -m appliance.broker.users_cli``)."""
    build(subparsers.add_parser("broker-user", help="manage the embedded broker's users"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="appliance")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
