"""The rule language's syntax: a rule's ``when`` text -> a tree of named nodes.

A ``when`` is one Spark SQL boolean expression. This reads the part of Spark SQL's
expression grammar a rule can use, with Spark's precedence (``OR`` < ``AND`` < ``NOT`` <
predicates < comparisons < ``|`` < ``^`` < ``&`` < shifts < ``+ - ||`` < ``* / % DIV`` <
unary < postfix ``[] . ::``), its literals (suffixes ``L S Y D F BD``, exponents, escapes,
typed literals ``DATE '...'``) and its case-insensitive keywords, so that ``appliance rules
check`` can judge a rule in microseconds and without a JVM.

Why not a general SQL parser: the one used before (sqlglot) accepted what Spark refuses
(``value > > 1`` read as a shift) and refused what it does not know with its own internals
("Required keyword: 'expression' missing for <class ...And>"). Errors here name the column
and what was expected, in the rule's own words. Anything this grammar does not know is an
error; Spark's analyzer (at start-up and reload) has the last word on what it accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# -- tokens -------------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(
    r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?:BD|[LSYDF])?(?![A-Za-z0-9_])", re.I)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Longest first.
_OPERATORS = ("<=>", "<>", "!=", "==", "<=", ">=", "->", "::", "||", "<<", ">>>", ">>",
              "=", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^", "~", "(", ")", "[", "]",
              ",", ".", "!", ";")
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a",
            "%": "\\%", "_": "\\_"}


class SyntaxProblem(Exception):
    """A ``when`` that does not read as an expression: the message says where and why."""


@dataclass(frozen=True)
class Token:
    kind: str   # "number" | "string" | "ident" | "quoted" | "op" | "end"
    text: str   # the source text (for a string, its value once unescaped)
    pos: int    # 0-based offset in the ``when``

    def is_word(self, *words: str) -> bool:
        return self.kind == "ident" and self.text.upper() in words

    def describe(self) -> str:
        if self.kind == "end":
            return "the end of the expression"
        if self.kind == "string":
            return "a string"
        return f"'{self.text}'"


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            i = _skip_comment(text, i)
            continue
        if c in "'\"" or (c in "rR" and i + 1 < n and text[i + 1] in "'\""):
            raw = c in "rR"
            value, end = _string(text, i + 1 if raw else i, raw)
            tokens.append(Token("string", value, i))
            i = end
            continue
        if c == "`":
            end = i + 1
            parts: list[str] = []
            while True:
                close = text.find("`", end)
                if close < 0:
                    raise SyntaxProblem(f"column {i + 1}: a `quoted name` is not closed")
                parts.append(text[end:close])
                if text.startswith("``", close):
                    parts.append("`")
                    end = close + 2
                    continue
                break
            tokens.append(Token("quoted", "".join(parts), i))
            i = close + 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            match = _NUMBER.match(text, i)
            if match is None:
                raise SyntaxProblem(f"column {i + 1}: {_word_at(text, i)!r} is not a number")
            tokens.append(Token("number", match.group(0), i))
            i = match.end()
            continue
        match = _IDENT.match(text, i)
        if match is not None:
            tokens.append(Token("ident", match.group(0), i))
            i = match.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                tokens.append(Token("op", op, i))
                i += len(op)
                break
        else:
            raise SyntaxProblem(f"column {i + 1}: unexpected character {c!r}")
    tokens.append(Token("end", "", n))
    return tokens


def _skip_comment(text: str, start: int) -> int:
    depth, i = 0, start
    while i < len(text):
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SyntaxProblem(f"column {start + 1}: a /* comment */ is not closed")


def _string(text: str, start: int, raw: bool) -> tuple[str, int]:
    quote, i = text[start], start + 1
    out: list[str] = []
    while i < len(text):
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\" and not raw and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise SyntaxProblem(f"column {start + 1}: a string is not closed (missing {quote})")


def _word_at(text: str, i: int) -> str:
    end = i
    while end < len(text) and (text[end].isalnum() or text[end] in "._"):
        end += 1
    return text[i:end]


# -- the tree -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    pos: int


@dataclass(frozen=True)
class Literal(Node):
    kind: str        # null | boolean | int | bigint | smallint | tinyint | double | float
    #                  | decimal | string | date | timestamp | interval | binary
    text: str        # as written (a string's value unescaped)


@dataclass(frozen=True)
class Column(Node):
    name: str        # as written (Spark resolves names case-insensitively)


@dataclass(frozen=True)
class Field(Node):
    base: Node
    name: str        # ``base.name``: a struct field, or a map entry by key


@dataclass(frozen=True)
class Subscript(Node):
    base: Node
    index: Node      # ``base[index]``


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple[Node, ...]
    distinct: bool = False
    window: bool = False   # an OVER (...) clause followed it
    star: bool = False     # ``count(*)``


@dataclass(frozen=True)
class Lambda(Node):
    params: tuple[str, ...]
    body: Node


@dataclass(frozen=True)
class Unary(Node):
    op: str          # - + ~
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    op: str          # comparison, arithmetic, bitwise, || ; and the words AND OR DIV
    left: Node
    right: Node


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class Between(Node):
    value: Node
    low: Node
    high: Node
    negated: bool


@dataclass(frozen=True)
class InList(Node):
    value: Node
    items: tuple[Node, ...]
    negated: bool


@dataclass(frozen=True)
class Like(Node):
    op: str          # LIKE | ILIKE | RLIKE (REGEXP is RLIKE)
    value: Node
    pattern: Node
    negated: bool
    escape: str | None = None


@dataclass(frozen=True)
class Is(Node):
    value: Node
    test: str        # NULL | TRUE | FALSE | UNKNOWN | DISTINCT
    negated: bool
    other: Node | None = None   # IS [NOT] DISTINCT FROM other


@dataclass(frozen=True)
class Case(Node):
    operand: Node | None
    whens: tuple[tuple[Node, Node], ...]
    otherwise: Node | None


@dataclass(frozen=True)
class Cast(Node):
    value: Node
    type_name: str   # lower case, as Spark writes types (``int``, ``decimal(10,2)``)
    lenient: bool    # TRY_CAST


@dataclass(frozen=True)
class Collate(Node):
    value: Node
    collation: str   # as written (``UTF8_LCASE``, ``unicode_ci``, ``system.builtin.X``)


@dataclass(frozen=True)
class Subquery(Node):
    """``(SELECT ...)`` or ``EXISTS (...)``: never allowed in a rule, kept to say so."""


@dataclass(frozen=True)
class Window(Node):
    """``expr OVER (...)`` on something that is not a function call."""


@dataclass(frozen=True)
class Parsed:
    """One ``when``, read: its tree, and its source text."""

    tree: Node
    text: str
    lambdas: tuple[str, ...] = field(default=())


# -- the parser ---------------------------------------------------------------------------

_COMPARISONS = ("=", "==", "<=>", "<>", "!=", "<", "<=", ">", ">=")
# valueExpression levels, loosest first (Spark's grammar); comparisons are the loosest.
_LEVELS: tuple[tuple[str, ...], ...] = (
    _COMPARISONS, ("|",), ("^",), ("&",), ("<<", ">>", ">>>"), ("+", "-", "||"),
    ("*", "/", "%", "DIV"))
_RESERVED = {"AND", "OR", "NOT", "IS", "IN", "BETWEEN", "LIKE", "ILIKE", "RLIKE", "REGEXP",
             "THEN", "ELSE", "END", "WHEN", "AS", "ESCAPE", "FROM", "SELECT", "OVER", "DIV"}
_TYPED_LITERALS = {"DATE": "date", "TIMESTAMP": "timestamp", "TIMESTAMP_LTZ": "timestamp",
                   "TIMESTAMP_NTZ": "timestamp", "X": "binary"}
_SUFFIXES = {"L": "bigint", "S": "smallint", "Y": "tinyint", "D": "double", "F": "float",
             "BD": "decimal"}


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    # -- token helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def word(self, *words: str) -> bool:
        return self.tok.is_word(*words)

    def expect_op(self, op: str, what: str) -> Token:
        if not self.op(op):
            self.fail(f"expected {what}")
        return self.take()

    def expect_word(self, word: str, what: str) -> Token:
        if not self.word(word):
            self.fail(f"expected {what}")
        return self.take()

    def fail(self, expected: str, at: Token | None = None):
        t = at or self.tok
        raise SyntaxProblem(f"column {t.pos + 1}: {expected}, found {t.describe()}")

    # -- grammar
    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise SyntaxProblem("empty expression")
        if self.word("SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "DROP", "CREATE"):
            raise SyntaxProblem("must be a boolean expression, not a statement")
        tree = self.expression()
        if self.op(";"):
            raise SyntaxProblem("must be exactly one expression")
        if self.tok.kind != "end":
            t = self.tok
            if t.kind in ("ident", "quoted") and t.text.upper() not in _RESERVED \
                    or t.is_word("AS"):
                raise SyntaxProblem(
                    f"column {t.pos + 1}: a rule is one expression, not a named column "
                    f"(remove {t.describe()})")
            self.fail("expected an operator or the end of the expression")
        return tree

    def expression(self) -> Node:
        left = self.conjunction()
        while self.word("OR"):
            t = self.take()
            left = Binary(t.pos, "OR", left, self.operand_of(t, self.conjunction))
        return left

    def conjunction(self) -> Node:
        left = self.negation()
        while self.word("AND"):
            t = self.take()
            left = Binary(t.pos, "AND", left, self.operand_of(t, self.negation))
        return left

    def operand_of(self, operator: Token, parse) -> Node:
        if self.tok.kind == "end" or self.op(")", ",") or self.word("AND", "OR", "THEN",
                                                                     "ELSE", "END", "WHEN"):
            self.fail(f"{operator.text.upper()} needs an expression on its right")
        return parse()

    def negation(self) -> Node:
        if self.word("NOT") or self.op("!"):
            t = self.take()
            return Not(t.pos, self.operand_of(t, self.negation))
        if self.word("EXISTS") and self.peek().text == "(" and self.peek(2).is_word("SELECT",
                                                                                   "WITH"):
            t = self.take()
            self.skip_parenthesized()
            return Subquery(t.pos)
        return self.predicated()

    def predicated(self) -> Node:
        value = self.value(0)
        start = self.tok
        negated = False
        if self.word("NOT") and self.peek().is_word("BETWEEN", "IN", "LIKE", "ILIKE", "RLIKE",
                                                     "REGEXP"):
            self.take()
            negated = True
        if self.word("BETWEEN"):
            self.take()
            low = self.value(0)
            self.expect_word("AND", "AND between the two bounds of BETWEEN")
            return Between(start.pos, value, low, self.value(0), negated)
        if self.word("IN"):
            self.take()
            self.expect_op("(", "( after IN")
            if self.word("SELECT", "WITH"):
                self.i -= 1
                self.skip_parenthesized()
                return Subquery(start.pos)
            items = [self.expression()]
            while self.op(","):
                self.take()
                items.append(self.expression())
            self.expect_op(")", ") to close the IN list")
            return InList(start.pos, value, tuple(items), negated)
        if self.word("LIKE", "ILIKE", "RLIKE", "REGEXP"):
            op = self.take().text.upper()
            op = "RLIKE" if op == "REGEXP" else op
            if self.word("ANY", "SOME", "ALL") and op != "RLIKE":
                self.fail("a single pattern (LIKE ANY/ALL is not supported in rules)")
            pattern = self.value(0)
            escape = None
            if self.word("ESCAPE") and op != "RLIKE":
                self.take()
                if self.tok.kind != "string" or len(self.tok.text) != 1:
                    self.fail("a one-character string after ESCAPE")
                escape = self.take().text
            return Like(start.pos, op, value, pattern, negated, escape)
        if negated:
            self.fail("BETWEEN, IN, LIKE or RLIKE after NOT")
        if self.word("IS"):
            self.take()
            negated = self.word("NOT")
            if negated:
                self.take()
            if self.word("NULL", "TRUE", "FALSE", "UNKNOWN"):
                return Is(start.pos, value, self.take().text.upper(), negated)
            if self.word("DISTINCT"):
                self.take()
                self.expect_word("FROM", "FROM after IS DISTINCT")
                return Is(start.pos, value, "DISTINCT", negated, self.value(0))
            self.fail("NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS")
        return value

    def value(self, level: int) -> Node:
        if level == len(_LEVELS):
            return self.unary()
        left = self.value(level + 1)
        ops = _LEVELS[level]
        while (self.tok.kind == "op" and self.tok.text in ops) or (
                "DIV" in ops and self.word("DIV")):
            t = self.take()
            if self.tok.kind == "end" or self.op(")", ","):
                self.fail(f"an expression after {t.text.upper()!r}")
            left = Binary(t.pos, t.text.upper() if t.kind == "ident" else t.text, left,
                          self.value(level + 1))
        return left

    def unary(self) -> Node:
        if self.op("-", "+", "~"):
            t = self.take()
            if self.tok.kind == "end":
                self.fail(f"an expression after {t.text!r}")
            return Unary(t.pos, t.text, self.unary())
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while True:
            if self.op("["):
                t = self.take()
                index = self.expression()
                self.expect_op("]", "] to close the subscript")
                node = Subscript(t.pos, node, index)
            elif self.op(".") and self.peek().kind in ("ident", "quoted"):
                t = self.take()
                node = Field(t.pos, node, self.take().text)
            elif self.op("::"):
                t = self.take()
                node = Cast(t.pos, node, self.type_name(), lenient=False)
            elif self.word("COLLATE"):
                t = self.take()
                node = Collate(t.pos, node, self.collation_name())
            elif self.word("OVER"):
                t = self.take()
                self.skip_parenthesized()
                node = Call(node.pos, node.name, node.args, node.distinct, True, node.star) \
                    if isinstance(node, Call) else Window(t.pos)
            else:
                return node

    def primary(self) -> Node:
        t = self.tok
        if t.kind == "number":
            self.take()
            return _number(t)
        if t.kind == "string":
            self.take()
            text = t.text
            while self.tok.kind == "string":  # adjacent strings are one: 'a' 'b' = 'ab'
                text += self.take().text
            return Literal(t.pos, "string", text)
        if self.op("("):
            self.take()
            if self.word("SELECT", "WITH"):
                self.i -= 1
                self.skip_parenthesized()
                return Subquery(t.pos)
            if self.tok.kind in ("ident", "quoted") and self.lambda_ahead():
                return self.lambda_()
            inner = self.expression()
            if self.op(","):
                self.fail("')': a rule has no tuples")
            self.expect_op(")", ") to close the (")
            return inner
        if t.kind == "quoted":
            self.take()
            if self.op("->"):
                return self.lambda_body(t, (t.text,))
            return Column(t.pos, t.text)
        if t.kind != "ident":
            self.fail("expected a value, a field or a function")
        word = t.text.upper()
        if word in ("AND", "OR", "THEN", "ELSE", "END", "WHEN", "IS", "IN", "BETWEEN",
                    "LIKE", "ILIKE", "RLIKE", "REGEXP", "DIV", "AS", "FROM"):
            self.fail("expected a value, a field or a function")
        if word == "NULL":
            self.take()
            return Literal(t.pos, "null", "NULL")
        if word in ("TRUE", "FALSE"):
            self.take()
            return Literal(t.pos, "boolean", word)
        if word == "CASE":
            return self.case()
        if word in ("CAST", "TRY_CAST") and self.peek().text == "(":
            self.take()
            self.take()
            value = self.expression()
            self.expect_word("AS", "AS and a type in CAST")
            type_name = self.type_name()
            self.expect_op(")", ") to close CAST")
            return Cast(t.pos, value, type_name, lenient=word == "TRY_CAST")
        if word == "INTERVAL":
            return self.interval()
        if word in _TYPED_LITERALS and self.peek().kind == "string":
            self.take()
            return Literal(t.pos, _TYPED_LITERALS[word], self.take().text)
        self.take()
        if self.op("->"):
            return self.lambda_body(t, (t.text,))
        if self.op("("):
            return self.call(t)
        return Column(t.pos, t.text)

    def call(self, name: Token) -> Node:
        self.take()  # (
        args: list[Node] = []
        distinct = star = False
        if self.word("DISTINCT", "ALL"):
            distinct = self.take().text.upper() == "DISTINCT"
        if self.op("*") and self.peek().kind == "op" and self.peek().text == ")":
            self.take()
            star = True
        elif not self.op(")"):
            args.append(self.argument())
            while self.op(","):
                self.take()
                args.append(self.argument())
        self.expect_op(")", f") to close {name.text}(")
        if self.word("FILTER") and self.peek().text == "(":
            self.take()
            self.skip_parenthesized()
        return Call(name.pos, name.text.lower(), tuple(args), distinct, False, star)

    def argument(self) -> Node:
        if self.tok.kind in ("ident", "quoted") and self.peek().kind == "op" \
                and self.peek().text == "->":
            t = self.take()
            return self.lambda_body(t, (t.text,))
        return self.expression()

    def lambda_ahead(self) -> bool:
        """After '(': ``a, b) ->`` or ``a) ->``."""
        j = self.i
        while self.tokens[j].kind in ("ident", "quoted"):
            nxt = self.tokens[j + 1]
            if nxt.kind == "op" and nxt.text == ",":
                j += 2
                continue
            return (nxt.kind == "op" and nxt.text == ")" and self.tokens[j + 2].kind == "op"
                    and self.tokens[j + 2].text == "->")
        return False

    def lambda_(self) -> Node:
        start = self.tok
        params = [self.take().text]
        while self.op(","):
            self.take()
            params.append(self.take().text)
        self.expect_op(")", ")")
        return self.lambda_body(start, tuple(params))

    def lambda_body(self, start: Token, params: tuple[str, ...]) -> Node:
        self.expect_op("->", "->")
        return Lambda(start.pos, params, self.expression())

    def case(self) -> Node:
        start = self.take()
        operand = None if self.word("WHEN") else self.expression()
        whens: list[tuple[Node, Node]] = []
        while self.word("WHEN"):
            self.take()
            condition = self.expression()
            self.expect_word("THEN", "THEN after the WHEN condition")
            whens.append((condition, self.expression()))
        if not whens:
            self.fail("WHEN after CASE")
        otherwise = None
        if self.word("ELSE"):
            self.take()
            otherwise = self.expression()
        self.expect_word("END", "END to close CASE")
        return Case(start.pos, operand, tuple(whens), otherwise)

    def interval(self) -> Node:
        start = self.take()
        parts: list[str] = []
        while self.tok.kind in ("number", "string") or self.op("-", "+"):
            parts.append(self.take().text)
            if self.tok.kind == "ident" and not self.word("AND", "OR", "TO"):
                parts.append(self.take().text)
            if self.word("TO"):
                parts.append(self.take().text)
                parts.append(self.take().text)
        if not parts:
            self.fail("a quantity after INTERVAL (e.g. INTERVAL 5 MINUTES)")
        return Literal(start.pos, "interval", " ".join(parts))

    def collation_name(self) -> str:
        """``UTF8_LCASE``, ``system.builtin.UNICODE_CI``: an identifier, dotted or not."""
        if self.tok.kind not in ("ident", "quoted"):
            self.fail("a collation name after COLLATE (e.g. COLLATE UTF8_LCASE)")
        parts = [self.take().text]
        while self.op(".") and self.peek().kind in ("ident", "quoted"):
            self.take()
            parts.append(self.take().text)
        return ".".join(parts)

    def interval_type(self) -> str:
        """After INTERVAL as a type: ``YEAR [TO MONTH]`` or ``DAY|HOUR|MINUTE [TO ...]``, as
        Spark spells the type (``interval day to second``); plain ``interval`` without."""
        units = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")
        if not self.word(*units):
            return "interval"
        start = self.take()
        first = start.text.upper()
        if not self.word("TO"):
            return f"interval {first.lower()}"
        self.take()
        if not self.word(*units):
            self.fail("a unit after TO (YEAR, MONTH, DAY, HOUR, MINUTE or SECOND)")
        end = self.take()
        last = end.text.upper()
        year_month = ("YEAR", "MONTH")
        same_family = (first in year_month) == (last in year_month)
        if not same_family or units.index(last) <= units.index(first):
            self.fail("an interval type from a larger unit to a smaller one of its kind "
                      "(YEAR TO MONTH, DAY TO SECOND...)", start)
        return f"interval {first.lower()} to {last.lower()}"

    def type_name(self) -> str:
        if self.tok.kind != "ident":
            self.fail("expected a type name")
        if self.word("INTERVAL"):
            self.take()
            return self.interval_type()
        name = self.take().text.lower()
        if self.op("<"):
            depth, parts = 0, [name]
            while True:
                t = self.take()
                if t.kind == "end":
                    self.fail("> to close the type", t)
                parts.append(t.text.lower())
                if t.text == "<":
                    depth += 1
                elif t.text == ">":
                    if depth == 0:
                        break
                    depth -= 1
                elif t.text == ">>":
                    if depth <= 1:
                        break
                    depth -= 2
            return "".join(parts)
        if self.op("("):
            self.take()
            args = [self.take().text]
            while self.op(","):
                self.take()
                args.append(self.take().text)
            self.expect_op(")", ") to close the type's parameters")
            return f"{name}({','.join(args)})"
        return name

    def skip_parenthesized(self) -> None:
        self.expect_op("(", "(")
        depth = 1
        while depth:
            t = self.take()
            if t.kind == "end":
                self.fail(") to close the (", t)
            if t.kind == "op" and t.text == "(":
                depth += 1
            elif t.kind == "op" and t.text == ")":
                depth -= 1


def _number(t: Token) -> Literal:
    text = t.text
    upper = text.upper()
    for suffix in ("BD", "L", "S", "Y", "D", "F"):
        if upper.endswith(suffix):
            return Literal(t.pos, _SUFFIXES[suffix], text[:-len(suffix)])
    if "E" in upper:
        return Literal(t.pos, "double", text)
    if "." in text:
        return Literal(t.pos, "decimal", text)
    return Literal(t.pos, "int", text)


def parse(text: str) -> Parsed:
    """Read one ``when``; raises ``SyntaxProblem`` saying where and what was expected."""
    return Parsed(_Parser(text).parse(), text)
