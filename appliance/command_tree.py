"""The command tree of ``appliance`` (and ``loadgen``): subcommands whose flags are defined
only when they are used, and help that shows every flag's default.

``appliance --help`` must answer at once, but some subcommands' flags live in modules
that pull in a lot (the broker's, the dashboards' and the demo's). So a subcommand is
declared as a ``Command``: its name, its one-line help, and where its ``build(parser)``
function is (``"module:function"``). Only the name and help are needed to list it; the
module is imported when the subcommand is chosen on the command line, or when something
walks the whole tree (``build_all``: the tests that check every command's help and exit
codes). ``build`` adds the flags, a description and an examples epilog, and
``set_defaults(func=...)``; the function imports what the command needs when it runs.

Plugins above the appliance (``demo``, ``dashboards``, ``watch``) are ``Command`` objects
named by entry points of the group ``appliance.commands``, in modules as light as this.

Standard library only: this is imported before anything else on every invocation.
"""

from __future__ import annotations

import argparse
import importlib
import math
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass

#: Exit codes, the same for every command (README, "Exit codes").
EXIT_OK = 0
EXIT_FAILURE = 1  # a runtime failure: something the command needed did not work
EXIT_USAGE = 2  # bad usage, config or rules, or a missing extra: fix, then run again
EXIT_LOST = 3  # a load test that lost alerts (loadgen), or a thing not there yet
EXIT_INTERRUPTED = 130  # Ctrl-C ended a command that ends on its own (128 + SIGINT)

Builder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """A subcommand: listed by ``name`` and ``help``; its flags defined by ``build``."""

    name: str
    help: str
    build: str | Builder  # "package.module:function", imported only when needed
    #: The ``appliance[...]`` extra whose packages the command needs (appliance.extras).
    extra: str | None = None

    def builder(self) -> Builder:
        if callable(self.build):
            return self.build
        module, _, attr = self.build.partition(":")
        return getattr(importlib.import_module(module), attr)


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions and epilogs wrapped line by line, but an indented line (an example
    command, a table row) kept as written; each flag's default appended to its help
    unless the help already names it, or there is none to show (an unset option, a
    switch that is off)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if not line.strip() or line[0].isspace():
                lines.append(indent + line)
            else:
                lines.append(textwrap.fill(line, width, initial_indent=indent,
                                           subsequent_indent=indent))
        return "\n".join(lines)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False
                or default == argparse.SUPPRESS or default in ((), [], {}, "")
                or not action.option_strings or action.nargs == 0):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose subcommand parsers (this class again, which
    ``add_subparsers`` keeps) show defaults and keep their examples' lines."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", LazySubcommands)

    def error(self, message: str):
        """argparse's convention (exit 2, ``prog: error: argument --rate: ...``), in one
        line with a pointer to the help instead of a usage summary that can bury it."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class LazySubcommands(argparse._SubParsersAction):
    """``add_subparsers()`` of a ``Parser``: ``add_command`` lists a ``Command`` at once
    and defines its flags only when it is chosen (or ``build_all`` walks the tree)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, Command] = {}
        self._pending: dict[str, Command] = {}

    def add_command(self, command: Command) -> argparse.ArgumentParser:
        parser = self.add_parser(command.name, help=command.help, description=command.help)
        self.commands[command.name] = command
        self._pending[command.name] = command
        return parser

    def build(self, name: str) -> argparse.ArgumentParser:
        parser = self._name_parser_map[name]
        command = self._pending.pop(name, None)
        if command is not None:
            command.builder()(parser)
        return parser

    def build_all(self) -> None:
        for name in list(self._pending):
            self.build(name)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values and values[0] in self._pending:
            self.build(values[0])
        super().__call__(parser, namespace, values, option_string)


def lazy_subcommands(parser: Parser, **kwargs) -> LazySubcommands:
    """``parser.add_subparsers(**kwargs)``, typed as what a ``Parser`` makes."""
    action = parser.add_subparsers(**kwargs)
    if not isinstance(action, LazySubcommands):
        raise TypeError(f"{parser.prog}: subcommands are not lazy: {type(action)}")
    return action


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The parser's subcommands action, if it has one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def walk(parser: argparse.ArgumentParser,
         path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree with its command path (``("broker-user", "acl", "add")``),
    building the lazy ones on the way."""
    yield path, parser
    action = subcommands(parser)
    if action is None:
        return
    if isinstance(action, LazySubcommands):
        action.build_all()
    for name, child in action.choices.items():
        yield from walk(child, (*path, name))


class LazyVersion(argparse.Action):
    """``--version`` whose text is made only when it is asked for (``text()`` may read
    package metadata or import a client library; ``--help`` must not pay for that)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, text: Callable[[], str] = str,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help=help)
        self.text = text

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(self.text())  # stdout, as argparse's own version action
        parser.exit()


def hidden_alias(parser: argparse.ArgumentParser, old: str, dest: str, **kwargs) -> None:
    """An old spelling of a flag, still accepted, left out of ``--help``."""
    parser.add_argument(old, dest=dest, help=argparse.SUPPRESS, default=argparse.SUPPRESS,
                        **kwargs)


def number_arg(minimum: float = 0.0, above: bool = False, maximum: float | None = None,
               unit: str = ""):
    """An argparse ``type=`` for a finite number in range; its error, which argparse
    prints naming the flag (``argument --rate: must be more than 0, got -5``), says the
    range."""
    low = f"more than {minimum:g}" if above else f"at least {minimum:g}"
    bound = low if maximum is None else f"{low} and at most {maximum:g}"
    suffix = f" {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        too_low = value <= minimum if above else value < minimum
        if not math.isfinite(value) or too_low or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {bound}{suffix}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def count_arg(minimum: int = 0, meaning: str = ""):
    """An argparse ``type=`` for an integer of at least ``minimum``; ``meaning`` says what
    the smallest value means when it is special (``-1: no limit``)."""
    extra = f" ({meaning})" if meaning else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be at least {minimum}{extra}, got {value}")
        return value

    parse.__name__ = "count"
    return parse


def port_arg():
    """An argparse ``type=`` for a TCP port to listen on, 0 for any free one."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
        if not 0 <= value <= 65535:
            raise argparse.ArgumentTypeError(
                f"must be 0..65535 (0: any free port), got {value}")
        return value

    parse.__name__ = "port"
    return parse
