"""What Spark's analyzer would say of a rule, said without Spark: names, types and kinds.

``appliance rules check`` answers in milliseconds per thousand rules because it does not
start a JVM. To answer as the running appliance would, this walks a rule's tree
(``appliance.rules.rule_syntax``) the way Spark's analyzer resolves it, with the
appliance's SQL settings (ANSI mode off, so strings cast to numbers and a bad cast is
null): event fields by name (case-insensitive), functions by Spark's own table
(``appliance.rules.spark_functions``: names, argument counts, groups, determinism),
and the types each operator accepts. Kinds of value are coarse (``numeric`` for every
number type, ``map``, ``array``...) because that is what decides Spark's verdicts here.

Where this cannot know (a function whose result depends on its arguments and that is not
in ``SIGNATURES``), it says nothing rather than guess, and the appliance's Spark analysis
at start-up and reload has the last word. ``tests/appliance/test_rule_check_corpus.py``
runs a corpus of broken and tricky rules through both and requires the same verdict on
every one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from appliance.events import FIELD_NAMES, FIELDS
from appliance.rules import rule_syntax as s
from appliance.rules.never_match import contradiction, is_number_text, number_literal, text_field
from appliance.rules.spark_collations import BUILT_IN, LOCALES
from appliance.rules.spark_functions import ANY_MORE, FUNCTIONS
from appliance.rules.sql_types import (
    ANY,
    ARRAY,
    BINARY,
    BOOLEAN,
    DATE,
    INTERVAL,
    LAMBDA,
    MAP,
    NULL,
    NUMERIC,
    OTHER,
    STRING,
    STRUCT,
    T_ANY,
    T_BIGINT,
    T_BOOLEAN,
    T_DOUBLE,
    T_INT,
    T_NULL,
    T_STRING,
    TEXTUAL,
    TIMESTAMP,
    VARIANT,
    SqlType,
    parse_type,
    probe_kind,
)
from appliance.rules.sql_types import of_kind as _t

FIELD_TYPES: dict[str, SqlType] = {f.name: parse_type(f.spark_type) for f in FIELDS}

# -- function facts beyond Spark's table --------------------------------------------------

#: Functions that read the clock (continuous mode refuses them; so do rules), and
#: ``unix_timestamp()`` without arguments (the current time; with one, it parses it).
CLOCK_FUNCS = frozenset({"now", "current_timestamp", "current_date", "curdate",
                         "current_time", "localtimestamp", "current_timezone"})
CLOCK_WITHOUT_ARGUMENTS = frozenset({"unix_timestamp"})
#: What each kind of argument a signature names accepts.
_ACCEPTS: dict[str, tuple[str, ...]] = {
    "text": TEXTUAL,
    "number": (NUMERIC, STRING, NULL, ANY),
    "boolean": (BOOLEAN, NULL, ANY),
    "map": (MAP, NULL, ANY),
    "array": (ARRAY, NULL, ANY),
    "collection": (MAP, ARRAY, NULL, ANY),
    "datetime": (DATE, TIMESTAMP, STRING, NULL, ANY),
    "anything": (),  # no check
    "lambda": (LAMBDA,),
}
_ARG_WORDS = {"text": "text", "number": "a number", "boolean": "true/false",
              "map": "a map", "array": "an array", "collection": "a map or an array",
              "datetime": "a date or a timestamp", "lambda": "a lambda (x -> ...)"}


@dataclass(frozen=True)
class Signature:
    """The arguments a function accepts (by position; the last repeats when ``repeats``) and
    what it returns: a kind, or how the result follows from the arguments."""

    args: tuple[str, ...]
    returns: str                   # a kind, or one of the rules below
    repeats: bool = False

    # ``returns`` rules: the common type of all / of arguments after the first, the map's
    # value or the collection's element.


COMMON, COMMON_AFTER_FIRST, ELEMENT = "=common", "=common-after-first", "=element"
#: ``concat``: arrays joined into an array, anything else into a string.
JOINED = "=joined"


def _sig(args: str, returns: str, repeats: bool = False) -> Signature:
    return Signature(tuple(args.split()) if args else (), returns, repeats)


#: The functions rules use most, with their argument kinds (Spark ANSI off).
SIGNATURES: dict[str, Signature] = {
    **{n: _sig("text", STRING) for n in ("upper", "lower", "ucase", "lcase", "trim",
                                          "ltrim", "rtrim", "initcap", "md5", "sha1")},
    **{n: _sig("text", NUMERIC) for n in ("length", "char_length", "character_length",
                                           "octet_length", "bit_length", "ascii")},
    **{n: _sig("text text", BOOLEAN) for n in ("startswith", "endswith", "contains",
                                                "regexp_like", "rlike", "regexp")},
    "substring": _sig("text number number", STRING),
    "substr": _sig("text number number", STRING),
    "left": _sig("text number", STRING),
    "right": _sig("text number", STRING),
    "concat_ws": _sig("text text", STRING, repeats=True),
    "concat": _sig("anything", JOINED, repeats=True),
    "split": _sig("text text number", ARRAY),
    "regexp_extract": _sig("text text number", STRING),
    "regexp_replace": _sig("text text text number", STRING),
    **{n: _sig("number", NUMERIC) for n in ("abs", "ceil", "ceiling", "floor", "sqrt",
                                             "exp", "ln", "log10", "log2", "sign", "signum",
                                             "cbrt", "negative", "positive")},
    "round": _sig("number number", NUMERIC),
    "bround": _sig("number number", NUMERIC),
    "pow": _sig("number number", NUMERIC),
    "power": _sig("number number", NUMERIC),
    "mod": _sig("number number", NUMERIC),
    "pmod": _sig("number number", NUMERIC),
    "log": _sig("number number", NUMERIC),
    "greatest": _sig("anything", COMMON, repeats=True),
    "least": _sig("anything", COMMON, repeats=True),
    "coalesce": _sig("anything", COMMON, repeats=True),
    "nvl": _sig("anything anything", COMMON),
    "ifnull": _sig("anything anything", COMMON),
    "nullif": _sig("anything anything", COMMON),
    "nvl2": _sig("anything anything anything", COMMON_AFTER_FIRST),
    "if": _sig("boolean anything anything", COMMON_AFTER_FIRST),
    "iff": _sig("boolean anything anything", COMMON_AFTER_FIRST),
    "size": _sig("collection", NUMERIC),
    "cardinality": _sig("collection", NUMERIC),
    "map_keys": _sig("map", ARRAY),
    "map_values": _sig("map", ARRAY),
    "map_contains_key": _sig("map anything", BOOLEAN),
    "array_contains": _sig("array anything", BOOLEAN),
    "element_at": _sig("collection anything", ELEMENT),
    "try_element_at": _sig("collection anything", ELEMENT),
    "isnull": _sig("anything", BOOLEAN),
    "isnotnull": _sig("anything", BOOLEAN),
    "isnan": _sig("number", BOOLEAN),
    "aggregate": _sig("array anything lambda lambda", ANY),  # the accumulator's type
    "reduce": _sig("array anything lambda lambda", ANY),
    "exists": _sig("array lambda", BOOLEAN),
    "forall": _sig("array lambda", BOOLEAN),
    "filter": _sig("array lambda", ARRAY),
    "transform": _sig("array lambda", ARRAY),
    "timestamp_millis": _sig("number", TIMESTAMP),
    "timestamp_seconds": _sig("number", TIMESTAMP),
    "timestamp_micros": _sig("number", TIMESTAMP),
    "from_unixtime": _sig("number text", STRING),
    "date_format": _sig("datetime text", STRING),
    **{n: _sig("datetime", NUMERIC) for n in ("hour", "minute", "second", "dayofweek",
                                               "dayofmonth", "dayofyear", "weekday",
                                               "month", "year", "quarter")},
}

# -- the check ----------------------------------------------------------------------------


@dataclass
class _Checker:
    problems: list[str]

    def add(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)

    # -- entry
    def check(self, tree: s.Node) -> None:
        found = self.infer(tree, frozenset())
        if found.kind not in (BOOLEAN, ANY) and not self.problems:
            self.add(f"must be a boolean expression (it is {found.name})")

    # -- one node
    def infer(self, node: s.Node, scope: frozenset[str]) -> SqlType:
        handler: Callable[[s.Node, frozenset[str]], SqlType] = getattr(
            self, f"_{type(node).__name__.lower()}")
        return handler(node, scope)

    def _literal(self, node: s.Literal, scope: frozenset[str]) -> SqlType:
        kind, text = node.kind, node.text
        if kind == "null":
            return T_NULL
        if kind == "boolean":
            return T_BOOLEAN
        if kind == "string":
            return T_STRING
        if kind in (DATE, TIMESTAMP, INTERVAL, BINARY):
            return _t(kind)
        if kind == "int":
            value = int(text)
            if value <= 2 ** 31 - 1:
                return T_INT
            if value <= 2 ** 63 - 1:
                return T_BIGINT
            return self._decimal(text)
        if kind in ("bigint", "smallint", "tinyint"):
            bits = {"bigint": 63, "smallint": 15, "tinyint": 7}[kind]
            if not text.isdigit() or int(text) > 2 ** bits - 1:
                self.add(f"the number {text} does not fit a {kind}")
            return _t(NUMERIC, kind)
        if kind == "decimal":
            return self._decimal(text)
        if float(text) in (float("inf"), float("-inf")) or (
                kind == "float" and abs(float(text)) > 3.4028235e38):
            self.add(f"the number {text} is out of range for a {kind}")
        return _t(NUMERIC, kind)

    def _decimal(self, text: str) -> SqlType:
        digits = text.replace(".", "").lstrip("0") or "0"
        scale = len(text.split(".")[1]) if "." in text else 0
        if max(len(digits), scale) > 38:
            self.add(f"the number {text} has more than 38 digits (Spark's decimals hold 38)")
        return _t(NUMERIC, "decimal")

    def _column(self, node: s.Column, scope: frozenset[str]) -> SqlType:
        name = node.name.lower()
        if name in scope:
            return T_ANY
        if name in FIELD_TYPES:
            return FIELD_TYPES[name]
        if name in ("current_date", "current_timestamp", "current_time", "localtimestamp",
                    "current_timezone"):
            self.add(f"current-time functions are not allowed ({name})")
            return T_ANY
        self.add(f"unknown field {name!r} (event fields: {', '.join(FIELD_NAMES)})")
        return T_ANY

    def _field(self, node: s.Field, scope: frozenset[str]) -> SqlType:
        base = self.infer(node.base, scope)
        if base.kind == MAP:
            return base.value or T_ANY
        if base.kind in (STRUCT, ANY):
            return T_ANY
        self.add(f"'.{node.name}' reads a struct's field or a map's entry, and "
                 f"{_say(node.base)} is {_a(base)}")
        return T_ANY

    def _subscript(self, node: s.Subscript, scope: frozenset[str]) -> SqlType:
        base = self.infer(node.base, scope)
        index = self.infer(node.index, scope)
        if base.kind == MAP:
            return base.value or T_ANY
        if base.kind == ARRAY:
            if index.kind not in (NUMERIC, NULL, ANY, STRING):
                self.add(f"an array's [index] is a number, not {_a(index)}")
            return base.element or T_ANY
        if base.kind in (ANY, NULL):
            return T_ANY
        self.add(f"[...] reads a map's entry or an array's element, and {_say(node.base)} "
                 f"is {_a(base)}")
        return T_ANY

    def _lambda(self, node: s.Lambda, scope: frozenset[str]) -> SqlType:
        self.infer(node.body, scope | {p.lower() for p in node.params})
        return _t(LAMBDA)

    def _unary(self, node: s.Unary, scope: frozenset[str]) -> SqlType:
        operand = self.infer(node.operand, scope)
        if node.op == "~":
            self._integral(operand, node.operand, "~")
            return operand if operand.kind == NUMERIC else T_BIGINT
        if operand.kind in (NUMERIC, INTERVAL, NULL, ANY):
            return operand
        if operand.kind == STRING:
            return T_DOUBLE
        self.add(f"'{node.op}' needs a number, and {_say(node.operand)} is {_a(operand)}")
        return T_ANY

    def _not(self, node: s.Not, scope: frozenset[str]) -> SqlType:
        operand = self.infer(node.operand, scope)
        if operand.kind not in (BOOLEAN, NULL, ANY):
            self.add(f"NOT needs true/false, and {_say(node.operand)} is {_a(operand)}")
        return T_BOOLEAN

    def _binary(self, node: s.Binary, scope: frozenset[str]) -> SqlType:
        left = self.infer(node.left, scope)
        right = self.infer(node.right, scope)
        op = node.op
        if op in ("AND", "OR"):
            for side, found in ((node.left, left), (node.right, right)):
                if found.kind not in (BOOLEAN, NULL, ANY):
                    self.add(f"{op} needs true/false on both sides, and {_say(side)} is "
                             f"{_a(found)}")
            return T_BOOLEAN
        if op in ("=", "==", "<=>", "<>", "!=", "<", "<=", ">", ">="):
            self._comparable(node, left, right)
            self._matchable(node.left, left, node.right, right, scope)
            return T_BOOLEAN
        if op == "||":
            if left.kind == ARRAY or right.kind == ARRAY:
                return left if left.kind == ARRAY else right
            for side, found in ((node.left, left), (node.right, right)):
                if found.kind not in TEXTUAL:
                    self.add(f"'||' joins text, and {_say(side)} is {_a(found)}")
            return T_STRING
        if op in ("&", "|", "^", "<<", ">>", ">>>", "DIV"):
            word = "DIV" if op == "DIV" else f"'{op}'"
            self._integral(left, node.left, word)
            self._integral(right, node.right, word)
            return T_BIGINT
        # + - * / %
        kinds = {left.kind, right.kind}
        if kinds & {DATE, TIMESTAMP, INTERVAL}:
            return T_ANY  # date and interval arithmetic: Spark decides
        for side, found in ((node.left, left), (node.right, right)):
            if found.kind not in (NUMERIC, STRING, NULL, ANY):
                self.add(f"'{op}' needs numbers, and {_say(side)} is {_a(found)}")
        return T_DOUBLE

    def _integral(self, found: SqlType, node: s.Node, word: str) -> None:
        if found.kind in (NULL, ANY) or (found.kind == NUMERIC and found.integral):
            return
        if found.kind == NUMERIC:
            self.add(f"{word} needs whole numbers, and {_say(node)} is {_a(found)} "
                     f"(cast it: CAST({_say(node, quote=False)} AS BIGINT))")
        else:
            self.add(f"{word} needs whole numbers, and {_say(node)} is {_a(found)}")

    def _comparable(self, node: s.Node, left: SqlType, right: SqlType,
                    what: str = "compare") -> None:
        if left.kind in (NULL, ANY) or right.kind in (NULL, ANY):
            return
        if left.collation and right.collation and left.collation != right.collation:
            self.add(f"cannot {what} text in two collations ({left.collation.upper()} and "
                     f"{right.collation.upper()})")
            return
        for found in (left, right):
            if found.kind in (MAP, VARIANT):
                hint = " (compare one entry instead, e.g. tags['env'] = 'prod')" \
                    if found.kind == MAP else ""
                self.add(f"cannot {what} {_a(found)}{hint}")
                return
        if (left.kind in (ARRAY, STRUCT) or right.kind in (ARRAY, STRUCT)) \
                and left.kind != right.kind:
            self.add(f"cannot {what} {_a(left)} with {_a(right)}")

    def _between(self, node: s.Between, scope: frozenset[str]) -> SqlType:
        value = self.infer(node.value, scope)
        for bound in (node.low, node.high):
            found = self.infer(bound, scope)
            self._comparable(node, value, found)
            self._matchable(node.value, value, bound, found, scope)
        return T_BOOLEAN

    def _matchable(self, a: s.Node, a_type: SqlType, b: s.Node, b_type: SqlType,
                   scope: frozenset[str]) -> None:
        """A comparison Spark makes NULL for every event, or for every text that is not a
        number: text that is not a number compared with a number (Spark casts it to NULL);
        a text field compared with a number (Spark casts the field to a number)."""
        for this, other, other_type in ((a, b, b_type), (b, a, a_type)):
            if isinstance(this, s.Literal) and this.kind == "string" \
                    and other_type.kind == NUMERIC and not is_number_text(this.text):
                self.add(f"can never match: {this.text!r} is not a number, and "
                         f"{_say(other, quote=False)} is {_a(other_type)}")
                return
            name = text_field(this, scope)
            if name and number_literal(other) is not None:
                self.add(f"compares the text field {name} (a string) with the number "
                         f"{_say(other, quote=False)} ({_a(other_type)}): Spark compares them "
                         f"as numbers, so it matches no {name} that is not a number; write "
                         f"'{_say(other, quote=False)}' to compare text")
                return

    def _inlist(self, node: s.InList, scope: frozenset[str]) -> SqlType:
        value = self.infer(node.value, scope)
        mixed = None
        for item in node.items:
            found = self.infer(item, scope)
            self._comparable(node, value, found)
            if mixed is None and {value.kind, found.kind} == {NUMERIC, STRING}:
                mixed = (item, found)
        if mixed is not None:
            item, found = mixed
            self.add(f"IN of two types: {_say(node.value, quote=False)} is {_a(value)} and "
                     f"{_say(item, quote=False)} is {_a(found)}; Spark compares them as text, "
                     f"where the number 1 reads '1.0': make them one type")
        return T_BOOLEAN

    def _like(self, node: s.Like, scope: frozenset[str]) -> SqlType:
        for part in (node.value, node.pattern):
            found = self.infer(part, scope)
            if part is node.value and found.kind == NUMERIC:
                self.add(f"{node.op} on a number: {_say(part, quote=False)} is {_a(found)}, and "
                         f"{node.op} matches its text (95.0 is '95.0'); write "
                         f"CAST({_say(part, quote=False)} AS STRING) {node.op} ... if that is "
                         f"meant")
            elif found.kind not in TEXTUAL:
                self.add(f"{node.op} matches text, and {_say(part)} is {_a(found)}")
            elif node.op == "RLIKE" and found.collation \
                    and not found.collation.startswith("utf8_"):
                self.add(f"RLIKE matches text in the UTF8_BINARY or UTF8_LCASE collation, and "
                         f"{_say(part)} is in {found.collation.upper()}")
        return T_BOOLEAN

    def _is(self, node: s.Is, scope: frozenset[str]) -> SqlType:
        value = self.infer(node.value, scope)
        if node.test in ("TRUE", "FALSE") and value.kind not in (BOOLEAN, NULL, ANY):
            self.add(f"IS {node.test} needs true/false, and {_say(node.value)} is {_a(value)}")
        if node.other is not None:
            other = self.infer(node.other, scope)
            self._comparable(node, value, other)
            self._matchable(node.value, value, node.other, other, scope)
        return T_BOOLEAN

    def _case(self, node: s.Case, scope: frozenset[str]) -> SqlType:
        operand = self.infer(node.operand, scope) if node.operand is not None else None
        results: list[SqlType] = []
        for condition, result in node.whens:
            found = self.infer(condition, scope)
            if operand is not None and node.operand is not None:
                self._comparable(condition, operand, found)
                self._matchable(node.operand, operand, condition, found, scope)
            elif found.kind not in (BOOLEAN, NULL, ANY):
                self.add(f"CASE WHEN needs a true/false condition, and {_say(condition)} "
                         f"is {_a(found)}")
            results.append(self.infer(result, scope))
        if node.otherwise is not None:
            results.append(self.infer(node.otherwise, scope))
        return self._common(results, "CASE's results")

    def _cast(self, node: s.Cast, scope: frozenset[str]) -> SqlType:
        value = self.infer(node.value, scope)
        target = parse_type(node.type_name)
        if target.kind == OTHER:
            self.add(f"unknown type {node.type_name!r} in CAST")
            return T_ANY
        if value.kind in (MAP, ARRAY, STRUCT) and target.kind not in (STRING, value.kind):
            self.add(f"cannot cast {_a(value)} to {target.name}")
        elif target.interval_family is not None:
            self._interval_cast(node, value, target)
        return target

    def _collate(self, node: s.Collate, scope: frozenset[str]) -> SqlType:
        value = self.infer(node.value, scope)
        if value.kind not in (STRING, NULL, ANY):
            self.add(f"COLLATE applies to text, and {_say(node.value)} is {_a(value)}")
        key = collation_key(node.collation)
        if key is None:
            self.add(f"unknown collation {node.collation!r} (e.g. UTF8_LCASE, UNICODE_CI, "
                     f"en_CI_AI)")
            return T_STRING
        return SqlType(STRING, "string", collation=key)

    def _interval_cast(self, node: s.Cast, value: SqlType, target: SqlType) -> None:
        """What Spark casts to an ANSI interval (``CAST(x AS INTERVAL DAY)``): text, whole
        numbers, decimals, an interval of the same family."""
        if value.kind in (STRING, NULL, ANY):
            return
        exact = isinstance(node.value, (s.Column, s.Literal, s.Cast))
        if value.kind == NUMERIC and not (exact and value.name in ("double", "float")):
            return
        if value.kind == INTERVAL and value.interval_family in (None,
                                                                target.interval_family):
            return
        self.add(f"cannot cast {_a(value)} to {target.name} (intervals are cast from text, "
                 f"whole numbers or decimals)")

    def _subquery(self, node: s.Subquery, scope: frozenset[str]) -> SqlType:
        self.add("subqueries are not allowed")
        return T_ANY

    def _window(self, node: s.Window, scope: frozenset[str]) -> SqlType:
        self.add("window functions are not allowed")
        return T_ANY

    def _call(self, node: s.Call, scope: frozenset[str]) -> SqlType:
        name = node.name
        args = [self.infer(a, scope) for a in node.args]
        fn = FUNCTIONS.get(name)
        if fn is None or fn.group is None:
            close = difflib.get_close_matches(name, [n for n, f in FUNCTIONS.items() if f.group],
                                              n=1)
            self.add(f"unknown function {name!r}"
                     + (f" (did you mean {close[0]!r}?)" if close else ""))
            return T_ANY
        if node.window or fn.group == "window_funcs":
            self.add("window functions are not allowed")
            return T_ANY
        if fn.group == "agg_funcs":
            self.add(f"aggregate functions are not allowed ({name})")
            return T_ANY
        if fn.group == "generator_funcs":
            self.add(f"generators are not allowed ({name} makes rows, a rule judges one)")
            return T_ANY
        if name in CLOCK_FUNCS or (name in CLOCK_WITHOUT_ARGUMENTS and not node.args):
            self.add(f"current-time functions are not allowed ({name})")
            return T_ANY
        if not fn.deterministic:
            self.add(f"must be deterministic ({name} is not)")
            return T_ANY
        count = 1 if node.star else len(node.args)
        listed = [a for a in fn.arities if a != ANY_MORE]
        if count not in listed and not (ANY_MORE in fn.arities and count > max(listed)):
            self.add(f"{name} takes {_counts(fn.arities)} argument"
                     f"{'' if fn.arities == (1,) else 's'}, not {count}")
            return T_ANY
        self._probed(node, fn.accepts.get(count), args)
        signature = SIGNATURES.get(name)
        if signature is None:
            return _t(fn.returns) if fn.returns else T_ANY
        return self._signed(node, signature, args)

    def _probed(self, node: s.Call, accepted: tuple[tuple[str, ...], ...] | None,
                args: list[SqlType]) -> None:
        """The argument kinds Spark took at each position when it was probed (the function
        table), where an argument's kind is one the probes tried."""
        if accepted is None:
            return
        for i, (arg, found) in enumerate(zip(node.args, args, strict=True)):
            kind = probe_kind(found)
            if kind is not None and kind not in accepted[i]:
                takes = ", ".join(k for k in accepted[i] if k not in ("null", "constant"))
                self.add(f"{node.name}'s argument {i + 1} cannot be {_a(found)} ({_say(arg)}); "
                         f"Spark takes {takes or 'only NULL'} there")
            elif "constant" in accepted[i] and not _constant(arg):
                self.add(f"{node.name}'s argument {i + 1} must be a constant, not "
                         f"{_say(arg)}")

    def _signed(self, node: s.Call, signature: Signature, args: list[SqlType]) -> SqlType:
        for i, (arg, found) in enumerate(zip(node.args, args, strict=True)):
            wanted = signature.args[min(i, len(signature.args) - 1)] \
                if signature.repeats or i < len(signature.args) else "anything"
            accepts = _ACCEPTS[wanted]
            if accepts and found.kind not in accepts:
                self.add(f"{node.name}'s argument {i + 1} is {_ARG_WORDS[wanted]}, and "
                         f"{_say(arg)} is {_a(found)}")
        returns = signature.returns
        if returns == COMMON:
            return self._common(args, f"{node.name}'s arguments")
        if returns == COMMON_AFTER_FIRST:
            return self._common(args[1:], f"{node.name}'s results")
        if returns == JOINED:
            arrays = [a for a in args if a.kind == ARRAY]
            if arrays:
                return arrays[0]
            for arg, found in zip(node.args, args, strict=True):
                if found.kind not in TEXTUAL:
                    self.add(f"concat joins text or arrays, and {_say(arg)} is {_a(found)}")
            return T_STRING
        if returns == ELEMENT:
            first = args[0] if args else T_ANY
            return (first.value if first.kind == MAP else first.element) or T_ANY
        return _t(returns, "double" if returns == NUMERIC else None)

    def _common(self, types: list[SqlType], what: str) -> SqlType:
        """The type Spark widens ``types`` to (ANSI off), or a problem."""
        known = [t for t in types if t.kind not in (NULL,)]
        if not known:
            return T_NULL
        if any(t.kind == ANY for t in known):
            return T_ANY
        kinds = {t.kind for t in known}
        if len(kinds) == 1:
            return known[0]
        if STRING in kinds and kinds <= {STRING, NUMERIC, BOOLEAN, DATE, TIMESTAMP, BINARY}:
            return T_STRING
        if kinds == {DATE, TIMESTAMP}:
            return _t(TIMESTAMP)
        self.add(f"{what} have no common type ({' and '.join(sorted(t.name for t in known))})")
        return T_ANY


_MODIFIERS = {"cs": "case", "ci": "case", "as": "accent", "ai": "accent", "rtrim": "pad"}
_LOCALES = {name.lower() for name in LOCALES}
_BUILT_IN = {name.lower() for name in BUILT_IN}


def collation_key(name: str) -> str | None:
    """A ``COLLATE`` name as Spark resolves it (``system.builtin.`` optional, any case,
    modifiers in any order), canonical (``unicode_ci_ai``: the defaults CS and AS dropped,
    the rest in one order); None where Spark knows no such collation."""
    text = name.lower()
    if text.startswith("system.builtin."):
        text = text[len("system.builtin."):]
    parts = text.split("_")
    for cut in range(len(parts), 0, -1):
        locale, modifiers = "_".join(parts[:cut]), parts[cut:]
        kinds = [_MODIFIERS.get(m) for m in modifiers]
        if None in kinds or len(set(kinds)) != len(kinds):
            continue
        if locale in _BUILT_IN and set(modifiers) <= {"rtrim"}:
            return "_".join([locale, *modifiers])
        if locale in _LOCALES:
            kept = sorted((m for m in modifiers if m not in ("cs", "as")),
                          key=["ci", "ai", "rtrim"].index)
            return "_".join([locale, *kept])
    return None


def _constant(node: s.Node) -> bool:
    """No field or lambda variable anywhere under ``node`` (Spark folds it to a value)."""
    if isinstance(node, (s.Column, s.Lambda, s.Subquery)):
        return False
    for value in vars(node).values():
        children = value if isinstance(value, tuple) else (value,)
        for child in children:
            items = child if isinstance(child, tuple) else (child,)
            if any(isinstance(item, s.Node) and not _constant(item) for item in items):
                return False
    return True


def _counts(arities: tuple[int, ...]) -> str:
    listed = [str(a) for a in arities if a != ANY_MORE]
    if ANY_MORE in arities:
        return f"{listed[0]} or more"
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} or {listed[-1]}"


def _a(t: SqlType) -> str:
    article = "an" if t.name[:1] in "aeiou" else "a"
    return f"{article} {t.name}"


def _say(node: s.Node, quote: bool = True) -> str:
    text = _sql(node)
    return f"'{text}'" if quote else text


def _sql(node: s.Node) -> str:
    """A short rendering of ``node`` for messages."""
    if isinstance(node, s.Column):
        return node.name
    if isinstance(node, s.Literal):
        return repr(node.text) if node.kind == "string" else node.text
    if isinstance(node, s.Field):
        return f"{_sql(node.base)}.{node.name}"
    if isinstance(node, s.Subscript):
        return f"{_sql(node.base)}[{_sql(node.index)}]"
    if isinstance(node, s.Call):
        return f"{node.name}({', '.join(_sql(a) for a in node.args)})"
    if isinstance(node, s.Binary):
        return f"{_sql(node.left)} {node.op} {_sql(node.right)}"
    if isinstance(node, s.Unary):
        return f"{node.op}{_sql(node.operand)}"
    if isinstance(node, s.Cast):
        return f"CAST({_sql(node.value)} AS {node.type_name.upper()})"
    if isinstance(node, s.Collate):
        return f"{_sql(node.value)} COLLATE {node.collation}"
    return "the expression"


def check(text: str) -> list[str]:
    """Every problem Spark's analyzer would have with ``text`` as a rule's ``when``."""
    try:
        parsed = s.parse(text)
    except s.SyntaxProblem as exc:
        return [str(exc)]
    checker = _Checker([])
    checker.check(parsed.tree)
    if not checker.problems:
        never = contradiction(parsed.tree)
        if never:
            checker.add(never)
    return checker.problems
