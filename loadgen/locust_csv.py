"""Locust's CSV writer must not print a Traceback when the run ends (imported by the
locustfile for its effect, as ``loadgen.locust_args`` is).

Locust (2.47) writes ``--csv`` files from a greenlet that loops until the process ends;
at shutdown it closes the files but leaves that greenlet alive, and when gevent's hub
runs it once more while the interpreter exits, its next write raises ``ValueError: I/O
operation on closed file`` and Locust prints the Traceback (the exit code and the files
are unaffected: the last rows were written before). Seen once in ``make test``'s README
run. The loop now ends quietly once Locust has closed its files; any other error still
raises.
"""

from __future__ import annotations

from locust.stats import StatsCSVFileWriter

_write_forever = StatsCSVFileWriter.stats_writer


def _stats_writer(self: StatsCSVFileWriter) -> None:
    try:
        _write_forever(self)
    except ValueError:
        if not self.requests_csv_filehandle.closed:
            raise


if getattr(StatsCSVFileWriter.stats_writer, "__name__", "") != _stats_writer.__name__:
    StatsCSVFileWriter.stats_writer = _stats_writer  # type: ignore[method-assign]
