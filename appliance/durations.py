"""One way to write a duration, for every command-line flag and every config key.

Users met five spellings (``--seconds 20``, ``--duration 20``, Locust's ``-t 20s``,
``--range 15m``, ``"1 second"`` in TOML); now each of them takes all of these:

=================================  ===========================================
``20s``  ``5m``  ``1h``  ``250ms``  Prometheus, Go and Locust style
``7d``  ``2w``                      Prometheus style, for retention
``1 second``  ``5 minutes``         Spark style (what ``[query] interval`` had)
``20``  ``1.5``                     a plain number: seconds, or the unit a flag's
                                    name says (``--retention-ms 5000``: ms)
=================================  ===========================================

Units, any case: ``ms`` / ``msec(s)`` / ``millisecond(s)``, ``s`` / ``sec(s)`` /
``second(s)``, ``m`` / ``min(s)`` / ``minute(s)``, ``h`` / ``hr(s)`` / ``hour(s)``, ``d`` /
``day(s)``, ``w`` / ``week(s)``. ``m`` is minutes, as in Prometheus and Go.

Spark's own interval parser takes only whole unit words (``"20 seconds"``, not ``"20s"``),
so what goes to Spark is ``spark_interval(text)``, the same length in its spelling.

A leaf: the standard library only, so every CLI and the config model use it before
anything heavy is imported.
"""

from __future__ import annotations

import argparse
import math
import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.I)
_UNIT_MS = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 1.0),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000.0),
    **dict.fromkeys(("d", "day", "days"), 86_400_000.0),
    **dict.fromkeys(("w", "week", "weeks"), 604_800_000.0),
}
#: The unit a plain number is in, in words (for errors and help).
_BARE_WORDS = {"ms": "milliseconds", "s": "seconds", "m": "minutes"}
#: What an error shows as the accepted forms.
EXAMPLES = "20s, 5m, 1h, 250ms, '1 second' or plain seconds"


def examples(bare_unit: str = "s") -> str:
    """The accepted forms, as an error shows them, a plain number in ``bare_unit``."""
    return f"20s, 5m, 1h, 250ms, '1 second' or plain {_BARE_WORDS[bare_unit]}"


def parse_ms(text: str | int | float, bare_unit: str = "s") -> float:
    """Milliseconds in ``text``; a number without a unit is in ``bare_unit``.

    ValueError (its message: ``must look like ... (got ...)``) on anything else, negative,
    infinite or NaN included."""
    if isinstance(text, bool):
        raise ValueError(f"must look like {examples(bare_unit)} (got {text!r})")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError(f"must be a duration >= 0, like {examples(bare_unit)} "
                             f"(got {text!r})")
        return float(text) * _UNIT_MS[bare_unit]
    match = _DURATION.match(text) if isinstance(text, str) else None
    unit = match.group(2).lower() if match else ""
    if not match or (unit and unit not in _UNIT_MS):
        raise ValueError(f"must look like {examples(bare_unit)} (got {text!r})")
    return float(match.group(1)) * _UNIT_MS[unit or bare_unit]


def parse_seconds(text: str | int | float) -> float:
    """Seconds in ``text`` (``"5m"`` -> 300.0, ``"20"`` -> 20.0)."""
    return parse_ms(text) / 1000.0


def spark_interval(text: str | int | float) -> str:
    """The same duration in the words Spark's interval parser takes (``"20s"`` ->
    ``"20 seconds"``, ``"1 second"`` -> ``"1 second"``, ``"250ms"`` -> ``"250
    milliseconds"``)."""
    ms = parse_ms(text)
    for unit, size in (("minute", 60_000.0), ("second", 1000.0), ("millisecond", 1.0)):
        if ms >= size and ms % size == 0:
            count = int(ms // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    if ms == 0:
        return "0 seconds"
    return f"{ms / 1000.0:.6f}".rstrip("0") + " seconds"  # only seconds take a fraction


def format_seconds(seconds: float) -> str:
    """``300`` -> ``"5m"``, ``20`` -> ``"20s"``, ``0.25`` -> ``"250ms"``: how help texts
    show a default so that it can be typed back as written."""
    ms = seconds * 1000.0
    for suffix, size in (("h", 3_600_000.0), ("m", 60_000.0), ("s", 1000.0)):
        if ms >= size and ms % size == 0:
            return f"{int(ms // size)}{suffix}"
    return f"{ms:g}ms"


def format_ms(ms: float) -> str:
    """``604800000`` -> ``"7d"``, ``1500`` -> ``"1500ms"``: a length in milliseconds in the
    largest unit that writes it whole (Prometheus takes every one of these)."""
    for suffix, size in (("w", 604_800_000.0), ("d", 86_400_000.0), ("h", 3_600_000.0),
                         ("m", 60_000.0), ("s", 1000.0)):
        if ms >= size and ms % size == 0:
            return f"{int(ms // size)}{suffix}"
    return f"{ms:g}ms"


def ms_arg(bare_unit: str = "ms", positive: bool = False, no_limit: str | None = None,
           whole: bool = True):
    """An argparse ``type=`` for a flag whose name says its unit (``--retention-ms``,
    ``--offsets-retention-minutes``): any duration, a plain number in ``bare_unit`` as
    before. Milliseconds (an int when ``whole``), or -1 when ``no_limit`` (what -1 means)
    allows it; ``positive``: 0 refused. An error in words naming the forms (argparse names
    the flag)."""

    def parse(text: str) -> float | int:
        if no_limit is not None and text.strip() == "-1":
            return -1
        try:
            ms = parse_ms(text, bare_unit)
        except ValueError as exc:
            extra = f", or -1 ({no_limit})" if no_limit is not None else ""
            raise argparse.ArgumentTypeError(f"{exc}{extra}") from None
        if positive and ms == 0:
            raise argparse.ArgumentTypeError(f"must be more than 0 (got {text!r})")
        if not whole:
            return ms
        if ms != int(ms):
            raise argparse.ArgumentTypeError(f"must be whole milliseconds (got {text!r})")
        return int(ms)

    parse.__name__ = "duration"
    return parse


def duration_arg(minimum_s: float = 0.0, allow_zero: bool = True):
    """An argparse ``type=``: seconds as a float, or an error argparse prints naming the
    flag (``argument --duration: must be ...``) before it exits 2."""

    def parse(text: str) -> float:
        try:
            seconds = parse_seconds(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if seconds == 0 and allow_zero:
            return seconds
        if seconds < minimum_s or (seconds == 0 and not allow_zero):
            bound = f"at least {format_seconds(minimum_s)}" if minimum_s else "more than 0"
            raise argparse.ArgumentTypeError(f"must be {bound} (got {text!r})")
        return seconds

    parse.__name__ = "duration"  # argparse's "invalid duration value" if it ever shows
    return parse
