"""Structured logging shared by every appliance process: JSON for machines, structlog's
console renderer for people.

Event names are stable identifiers (``broker.ready``, ``query.started``...) that operators
grep and alert on; human wording goes into fields, never into the event name. Both views
carry the same events: only the rendering differs (``LogFormat``).

Which view: JSON unless stderr is a terminal (a supervisor, a test, a pipe reads it), or
whatever ``--log-format`` says. With a log file (``configure(file=...)``) every line also
goes there as JSON, and the process's file descriptor 2 is pointed at the file, so what
others write to it (the Spark JVM a process launches, a child's stray output) lands in the
file and not on the terminal; Python's own ``sys.stderr`` keeps the terminal.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import structlog

# The flags and formats live in log_options (no structlog: --help needs them); the
# commands that configure logging find them here too.
from appliance.log_options import LOG_FORMAT_CHOICES as LOG_FORMAT_CHOICES
from appliance.log_options import LogFormat as LogFormat
from appliance.log_options import add_log_options as add_log_options


def choose_format(requested: str | LogFormat | None = None, stream=None) -> LogFormat:
    """``requested`` as a LogFormat; ``None``/``"auto"``: console when ``stream`` (default
    stderr) is a terminal."""
    if isinstance(requested, LogFormat):
        return requested
    if requested in (None, "auto"):
        stream = sys.stderr if stream is None else stream
        try:
            return LogFormat.CONSOLE if stream.isatty() else LogFormat.JSON
        except (AttributeError, ValueError):  # closed or not a real stream
            return LogFormat.JSON
    return LogFormat(requested)


@dataclass(frozen=True)
class LogOutput:
    """How this process logs (``configure``'s result, ``output()``)."""

    format: LogFormat
    file: Path | None = None  # every line (JSON) and whatever else was written to fd 2
    terminal: str | None = None  # the terminal's device when fd 2 went to ``file``


_output: LogOutput | None = None


# Third-party loggers that chatter at INFO (connection set-up, py4j callbacks): operators
# only need their warnings.
QUIET_LIBRARIES = ("kafka", "py4j")


@dataclass(frozen=True)
class ForeignEvent:
    """A library's log line that gets an event name of its own (see FOREIGN_EVENTS)."""
    logger: str           # the library's logger, or a parent of it
    pattern: re.Pattern   # searched in the line's text; named groups become float fields
    event: str
    why: str
    # An expected line the library logs as an error with a traceback: reported at this
    # level instead, without the traceback (None: as the library logged it).
    level: str | None = None


# A library's line (stdlib logging) has text that changes with every call (object
# addresses, durations), so it cannot be its event name: it becomes ``library.log`` with
# the text in ``message``, or a named event for the lines operators meet in practice.
FOREIGN_EVENTS = (
    ForeignEvent("kafka.net.selector",
                 re.compile(r"ran for (?P<seconds>\d+(?:\.\d+)?)s \(>(?P<threshold_s>[\d.]+)s"),
                 "kafka.io_step_slow",
                 "kafka-python's I/O thread took longer than its threshold (0.1 s) for one "
                 "step. The library blames a tight loop; here it is a CPU-starved process "
                 "(saturated cores, a steal-heavy VM), and the client's fetches wait meanwhile"),
    ForeignEvent("root", re.compile(r"^KeyboardInterrupt while sending command\.$"),
                 "py4j.call_interrupted",
                 "py4j's note (an error with a traceback, on the root logger) that Ctrl-C "
                 "interrupted a call into the JVM: what stopping during the start-up does",
                 level="info"),
)
FOREIGN_DEFAULT_EVENT = "library.log"


class ForeignMatch(NamedTuple):
    """A library's line that a FOREIGN_EVENTS rule names, with the fields from its text."""

    rule: ForeignEvent
    fields: dict[str, float]


def _foreign_rule(logger_name: str, text: str) -> ForeignMatch | None:
    for rule in FOREIGN_EVENTS:
        if logger_name == rule.logger or logger_name.startswith(rule.logger + "."):
            match = rule.pattern.search(text)
            if match:
                return ForeignMatch(rule, {k: float(v) for k, v in match.groupdict().items()})
    return None


def foreign_event(logger_name: str, text: str) -> tuple[str, dict[str, float]]:
    """The stable event name of a library's line and the fields taken from its text."""
    found = _foreign_rule(logger_name, text)
    if found is None:
        return FOREIGN_DEFAULT_EVENT, {}
    return found.rule.event, found.fields


def _stdlib_component(logger, method_name, event_dict):
    """Name a foreign (stdlib logging) line's source the way our own lines do, and give it
    a stable event name (FOREIGN_EVENTS), its text in ``message``."""
    record = event_dict.get("_record")
    if record is not None:
        event_dict.setdefault("component", record.name)
        text = str(event_dict.get("event", ""))
        found = _foreign_rule(record.name, text)
        event_dict["event"] = found.rule.event if found is not None else FOREIGN_DEFAULT_EVENT
        event_dict["message"] = text
        if found is not None:
            for key, value in found.fields.items():
                event_dict.setdefault(key, value)
            if found.rule.level is not None:  # an expected line
                event_dict["level"] = found.rule.level
                event_dict.pop("exc_info", None)
    return event_dict


_SHARED = (structlog.processors.add_log_level,
           structlog.processors.TimeStamper(fmt="iso", utc=True))


def _formatter(renderer, *before) -> structlog.stdlib.ProcessorFormatter:
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_SHARED, _stdlib_component],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *before,
                    renderer])


def _json_formatter() -> structlog.stdlib.ProcessorFormatter:
    return _formatter(structlog.processors.JSONRenderer(),
                      structlog.processors.format_exc_info)


def _take_fd2(file: Path) -> tuple[io.TextIOWrapper, str | None]:
    """Open ``file`` for appending and point fd 2 at it; ``sys.stderr`` keeps what fd 2 was
    (the terminal). Returns the file and the terminal's device name."""
    file.parent.mkdir(parents=True, exist_ok=True)
    # Open until the process exits: the JVM and children write to it through fd 2.
    sink = open(file, "a", buffering=1, encoding="utf-8", errors="backslashreplace")
    sys.stderr.flush()
    kept = os.dup(2)
    try:
        terminal = os.ttyname(kept)
    except OSError:
        terminal = None
    sys.stderr = os.fdopen(kept, "w", buffering=1, encoding=sys.stderr.encoding or "utf-8",
                           errors="backslashreplace")
    os.dup2(sink.fileno(), 2)
    return sink, terminal


def configure(level: str = "INFO", fmt: str | LogFormat | None = None,
              file: str | os.PathLike | None = None) -> LogOutput:
    """Log to stderr in ``fmt`` (``choose_format``), stdlib logging included; with
    ``file``, every line also to that file as JSON, and fd 2 with it (module docstring).
    Safe to call twice: the first call decides."""
    global _output
    if _output is not None:
        return _output
    chosen = choose_format(fmt)
    handlers: list[logging.Handler] = []
    sink = terminal = None
    if file is not None:
        sink, terminal = _take_fd2(Path(file))
        to_file = logging.StreamHandler(sink)
        to_file.setFormatter(_json_formatter())
        handlers.append(to_file)
    to_stderr = logging.StreamHandler(sys.stderr)
    # Plain tracebacks: the default (rich's, when installed) prints every frame's locals,
    # which may hold a credential.
    to_stderr.setFormatter(_json_formatter() if chosen is LogFormat.JSON else _formatter(
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(),
                                      exception_formatter=structlog.dev.plain_traceback)))
    handlers.append(to_stderr)
    root = logging.getLogger()
    root.handlers = handlers
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *_SHARED,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    _output = LogOutput(chosen, Path(file) if file is not None else None, terminal)
    return _output


def output() -> LogOutput | None:
    """How this process logs, None before ``configure``."""
    return _output


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A lazy logger whose every line carries ``component=<name>``.

    Lazy (nothing is bound until the first log call) so module-level loggers created
    before :func:`configure` still emit JSON. The key is ``component`` because
    ``logger`` is a reserved argument name of ``structlog.get_logger``.
    """
    return structlog.get_logger(component=name)


class LogFileError(ValueError):
    """The log file cannot be written; ``str()`` is one line naming it."""


def configure_from_args(args, default_file: str | None, level: str = "INFO") -> LogOutput:
    """``configure`` as ``add_log_options``' flags ask: on the console view the log file
    is the default one unless ``--log-file`` names another."""
    chosen = choose_format(args.log_format)
    file = args.log_file or (default_file if chosen is LogFormat.CONSOLE else None)
    try:
        return configure(level, chosen, file)
    except OSError as exc:
        raise LogFileError(f"--log-file {file}: cannot write it ({exc.strerror or exc}); "
                           f"name another with --log-file") from None
