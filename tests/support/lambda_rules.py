"""Higher-order rules over events made in Spark: what two tasks evaluating the same rule at
once must not get wrong.

Each rule's lambda variable holds the element being tested while the lambda runs, so tasks
that shared one variable would test each other's elements. The events alternate a hot one
(``tags: {env: prod}``, every rule matches) and a cold one (``tags: {dc: a}``, none does),
in every partition, so each rule matches exactly half of them. Used by
``tests/appliance/test_rules_differential.py`` (local[2]) and, as a script run against a
standalone cluster's master, by ``tests/cluster/test_cluster_rules.py``::

    python tests/support/lambda_rules.py spark://127.0.0.1:7077 EVENTS_PER_PARTITION PARTITIONS
"""

from __future__ import annotations

import datetime
import json
import sys

LAMBDA_RULES = (
    "exists(map_keys(tags), k -> k = 'env')",
    "forall(map_keys(tags), k -> k != 'dc')",
    "exists(transform(map_values(tags), v -> upper(v)), v -> v = 'PROD')",
    "aggregate(map_keys(tags), 0, (acc, k) -> acc + if(k = 'env', 1, 0)) = 1",
    "metric = 'm' AND size(filter(map_keys(tags), k -> k LIKE 'e%')) > 0",
    "size(map_filter(tags, (k, v) -> v = 'prod')) = 1",
)


def lambda_rule_set():
    from appliance.rules.rules_file import Rule, RuleSet

    return RuleSet.of([Rule(f"l{i}", "info", when, "m") for i, when in enumerate(LAMBDA_RULES)])


def alternating_records(spark, per_partition: int, partitions: int = 2):
    """Kafka-shaped records made in Spark (no Python rows), hot and cold alternating."""
    from pyspark.sql import functions as F

    i = F.col("id")
    hot = i % 2 == 0
    event = F.struct(
        F.concat(F.lit("e-"), i.cast("string")).alias("event_id"),
        i.cast("double").alias("ts"), F.lit("s").alias("source"), F.lit("m").alias("metric"),
        (i % 100).cast("double").alias("value"),
        F.when(hot, F.create_map(F.lit("env"), F.lit("prod")))
        .otherwise(F.create_map(F.lit("dc"), F.lit("a"))).alias("tags"))
    return spark.range(0, partitions * per_partition, 1, partitions).select(
        F.lit(None).cast("binary").alias("key"), F.to_json(event).cast("binary").alias("value"),
        F.lit("events").alias("topic"), F.spark_partition_id().alias("partition"),
        i.alias("offset"), F.lit(datetime.datetime(2026, 1, 1)).alias("timestamp"),
        F.lit(0).alias("timestampType"))


def matches_by_rule(df) -> dict[str, int]:
    """Alerts per rule id in ``transform``'s output."""
    from pyspark.sql import functions as F

    ids = F.from_json("value", "struct<rules: array<struct<id: string>>>").rules.id
    rows = (df.where(F.col("topic") == "alerts").select(F.explode(ids).alias("rule"))
            .groupBy("rule").count().collect())
    return {r.rule: r["count"] for r in rows}


def book_and_naive(spark, per_partition: int, partitions: int) -> dict[str, dict[str, int]]:
    """Matches per rule through the rule book and through the plan-compiled reference."""
    from appliance.config import TopicsConfig
    from appliance.query.pipeline import transform
    from appliance.rules.naive_rules import NaiveRules
    from appliance.rules.rule_book import RuleBook

    rule_set = lambda_rule_set()
    records = alternating_records(spark, per_partition, partitions)
    book = RuleBook.holding(spark, rule_set)
    try:
        indexed = matches_by_rule(transform(records, book, TopicsConfig()))
    finally:
        book.close()
    naive = matches_by_rule(transform(records, NaiveRules(rule_set), TopicsConfig()))
    return {"book": indexed, "naive": naive}


def main(master: str, per_partition: int, partitions: int) -> None:
    """On a cluster: one executor of 2 cores, so 2 tasks share its JVM's copy of the rules
    (fetched from the driver's book over Spark RPC); the appliance's SQL settings."""
    from pyspark.sql import SparkSession

    from appliance.connector import spark_jars_conf
    from appliance.trigger import MODES
    from appliance.tuning import tuning_for

    builder = (SparkSession.builder.master(master).appName("lambda-rules")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.executor.cores", "2").config("spark.cores.max", "2")
               .config("spark.executor.memory", "512m"))
    for key, value in {**spark_jars_conf(), **tuning_for(MODES["continuous"]).spark_conf}.items():
        if key.startswith(("spark.sql.", "spark.jars")):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        print(json.dumps(book_and_naive(spark, per_partition, partitions)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
