"""The query's plan: warmed up on synthetic records, then started on the rule book.

The warm-up (``appliance.query.warmup``) runs the same plan as the query, with the same
connector options (``RunSettings``), so the code it compiles and the producer it connects
are the query's. The query evaluates the rule book's rules, whatever version the book
holds when each epoch or batch begins. Before each start, what a crash left in the
checkpoint is moved aside (``appliance.query.checkpoint``), and a query on a fresh
checkpoint is a new lineage of the book (its generations past the last query's).

A pair's standby plans its takeover's query while it waits (``prepare``): where that
query starts is known only once Kafka elects it, so the start goes through the fresh
checkpoint (``seed_starting_offsets``) instead of the planned ``startingOffsets``, and
the takeover pays only Spark's ``start()``.

This module imports pyspark: the runner imports it only once the checks that need no JVM
have passed (``appliance.process.runner``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter

from appliance import logs
from appliance.process.query_probes import QueryProbes
from appliance.process.run_settings import RunSettings
from appliance.query.checkpoint import is_fresh, seed_starting_offsets
from appliance.query.checkpoint import repair as repair_checkpoint
from appliance.query.stream_query import StreamSpec, stream_writer
from appliance.query.warmup import START, StreamWarmup, WarmupResult, warm_up
from appliance.rules.rule_book import CompiledRules, RuleBook
from appliance.rules.rules_file import RuleSet

log = logs.get_logger("appliance")


@dataclass(frozen=True)
class PlannedQuery:
    """A query planned ahead (``QueryStart.prepare``), for the rules it was planned on."""

    writer: DataStreamWriter
    rules_version: str


def exact_offsets(starting_offsets: str | None) -> str | None:
    """``starting_offsets`` if it names an offset for every partition (the pair's offsets
    in Kafka), else None (``earliest``/``latest``, or a partition with none committed)."""
    if not starting_offsets or not starting_offsets.lstrip().startswith("{"):
        return None
    try:
        topics = json.loads(starting_offsets)
        exact = all(int(o) >= 0 for parts in topics.values() for o in parts.values())
    except (ValueError, TypeError, AttributeError):
        return None
    return starting_offsets if exact and topics else None


class QueryStart:
    """Warm-ups and starts of the appliance's query in one session."""

    def __init__(self, settings: RunSettings, spark: SparkSession, probes: QueryProbes):
        self.settings = settings
        self.spark = spark
        self.probes = probes
        self.planned: PlannedQuery | None = None  # ``prepare``'s, until a start takes it

    def warm_up(self, compiled: CompiledRules, topic: str | None) -> WarmupResult:
        """Run the query's plan on synthetic records (``topic``: the warm-up topic, None
        for a plan-only warm-up)."""
        settings = self.settings
        mode, query = settings.mode, settings.config.query
        plan = START
        if mode.plans_every_batch and query.warmup_batches > 0:
            # The streaming batches run the exact plan's records too: no rounds beyond the
            # minimum before them, so they cost the start-up less.
            plan = replace(START, budget_s=0.0, stream=StreamWarmup(
                mode.eager_trigger_kwargs(), mode.output_mode, settings.tuning.query_options,
                batches=query.warmup_batches))
        return warm_up(self.spark, compiled, topic, settings.client(),
                       dict(settings.source_options), dict(settings.sink_options),
                       latency_headers=settings.config.metrics.alert_latency, plan=plan)

    def _writer(self, book: RuleBook, starting_offsets: str | None) -> DataStreamWriter:
        settings = self.settings
        config, mode = settings.config, settings.mode
        return stream_writer(self.spark, book, StreamSpec(
            name="appliance",
            reader_options=settings.reader_options(starting_offsets),
            writer_options=settings.writer_options(),
            checkpoint=config.query.checkpoint_dir, output_mode=mode.output_mode,
            trigger=mode.trigger_kwargs(config.query.trigger_interval),
            topics=config.topics, latency_headers=config.metrics.alert_latency))

    def prepare(self, book: RuleBook, rules: RuleSet) -> float:
        """Plan the next start's query now (a standby, before it waits): a start from
        exact offsets on these rules then skips the planning; its seconds. Such a start
        is on a fresh checkpoint (the seeded one), so the plan is a new lineage of the
        book (``RuleBook.new_lineage``)."""
        began = time.monotonic()
        book.new_lineage()
        self.planned = PlannedQuery(self._writer(book, None), rules.version)
        return time.monotonic() - began

    def start(self, book: RuleBook, rules: RuleSet, starting_offsets: str | None) -> bool:
        """Start the query on ``book`` (at start-up, after a failure, after a takeover);
        True if it resumes from an existing checkpoint. A query ``prepare`` planned on
        the same rules is started when ``starting_offsets`` are exact: they are seeded
        into its fresh checkpoint, which the connector reads before the option."""
        began = time.monotonic()
        config, mode = self.settings.config, self.settings.mode
        planned, self.planned = self.planned, None
        seed = exact_offsets(starting_offsets)
        ahead = planned is not None and seed is not None \
            and planned.rules_version == rules.version
        self.repair_checkpoint()
        Path(config.query.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        if not ahead and is_fresh(config.query.checkpoint_dir):
            # Its generations restart at 0, under the ones this book's last query asked
            # for: it gets a base past them (a resumed checkpoint keeps its own numbers,
            # so a replayed epoch sees the version it saw).
            book.new_lineage()
        writer = planned.writer if ahead and planned is not None \
            else self._writer(book, starting_offsets)
        planned_at = time.monotonic()
        if ahead and seed is not None:
            seed_starting_offsets(config.query.checkpoint_dir, seed)
        recovered = self.probes.starting()
        query = writer.start()
        self.probes.started(query, self.spark)
        log.info("query.started", id=str(query.id), trigger=mode.name,
                 interval=config.query.interval, checkpoint=config.query.checkpoint_dir,
                 rules_version=rules.version, planned_ahead=ahead,
                 planned_s=round(planned_at - began, 3),
                 start_s=round(time.monotonic() - planned_at, 3))
        return recovered

    def repair_checkpoint(self) -> None:
        """Move aside what a crash left in the checkpoint (``appliance.query.checkpoint``)."""
        for fix in repair_checkpoint(self.settings.config.query.checkpoint_dir):
            log.warning("checkpoint.repaired", path=fix.path, moved_to=fix.moved_to,
                        reason=fix.reason)
