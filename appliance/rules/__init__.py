"""The rule language and the rule book: what a rule may say, and the rules as data.

A room of its own because the rules are a language with its own grammar, types, function
table and limits, and a rules file is checked, compiled, indexed and published whatever
query evaluates it. The Java side is the same room (``io.appliance.rules`` in the
connector; its layout: ``docs/rules-engine.md``).

From the file to the running query: ``rules_file`` reads a rules file within its limits
and checks each ``when`` without a JVM (``rule_syntax`` reads it, ``rule_types`` judges
names and types as Spark's analyzer would, over ``spark_functions``, ``spark_collations``
and ``sql_types``; ``never_match`` refuses what can never be true); ``rule_book`` has
Spark compile the rules and publishes them into the running query; ``book_stats`` reads
back what each rule did; ``naive_rules`` is the plan-compiled reference evaluation the
book is held to. Nothing here imports the streaming query (``appliance.query``) or the
process (``appliance.process``): they import this room downward.
"""
