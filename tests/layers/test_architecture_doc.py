"""docs/architecture.md and the broker's package docstring describe the import-linter
contracts (pyproject.toml ``[tool.importlinter]``) as they are.

The page has one table per contract, after a ``<!-- contract: ID -->`` marker: its rows
are the contract's layers, high to low, the second column naming each layer's modules.
A contract's module missing from its table, a module the contract does not have, a
layer out of order or a contract without its table fails here; so does a broker module
the package docstring does not name, or a room it names out of order.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BROKER_INIT = ROOT / "appliance" / "broker" / "__init__.py"
CONTRACTS = {c["id"]: c for c in
             tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
                 "contracts"]}
_MARKER = re.compile(r"<!-- contract: ([\w-]+) -->")
_NAME = re.compile(r"`([A-Za-z_][\w]*)/?`")


def contract_layers(contract: dict) -> list[frozenset[str]]:
    """Each layer's modules (siblings split on ``|`` or ``:``, an optional layer's
    parentheses dropped)."""
    return [frozenset(name.strip().strip("()") for name in re.split(r"[|:]", layer))
            for layer in contract["layers"]]


def doc_tables(text: str) -> dict[str, list[frozenset[str]]]:
    """contract id -> the layers its table names, in the table's order."""
    tables: dict[str, list[frozenset[str]]] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        marker = _MARKER.search(line)
        if not marker:
            continue
        rows = []
        for row in lines[number + 1:]:
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
            if len(cells) < 2 or set(cells[0]) <= {"-", " "} or cells[0] == "layer":
                continue
            rows.append(frozenset(_NAME.findall(cells[1])))
        tables[marker.group(1)] = rows
    return tables


def mismatches(text: str) -> list[str]:
    """What the page gets wrong against the contracts (empty: nothing)."""
    tables = doc_tables(text)
    problems = [f"{cid}: no table" for cid in CONTRACTS if cid not in tables]
    problems += [f"{cid}: a table for no contract" for cid in tables if cid not in CONTRACTS]
    for cid, contract in CONTRACTS.items():
        if contract["type"] != "layers":
            problems.append(f"{cid}: a {contract['type']} contract, which no table describes")
            continue
        if cid not in tables:
            continue
        want, got = contract_layers(contract), tables[cid]
        missing = sorted(set().union(*want) - set().union(*got))
        unknown = sorted(set().union(*got) - set().union(*want))
        if missing:
            problems.append(f"{cid}: {', '.join(missing)} not in the table")
        if unknown:
            problems.append(f"{cid}: {', '.join(unknown)} in the table, not in the contract")
        if not missing and not unknown and got != want:
            problems.append(f"{cid}: layers described as {[sorted(g) for g in got]}, the "
                            f"contract has {[sorted(w) for w in want]}")
    return problems


def test_the_page_describes_every_contract_layer_by_layer():
    assert mismatches(DOC.read_text()) == []


def test_the_check_finds_a_missing_module_and_a_layer_out_of_order():
    text = DOC.read_text()
    assert mismatches(text.replace("| `rules_swap` |", "| `nothing` |")) == [
        "process: rules_swap not in the table",
        "process: nothing in the table, not in the contract"]
    swapped = text.replace("| 7 | `storage/` |", "| 7 | `WIRE` |").replace(
        "| 8 | `wire/` |", "| 8 | `storage/` |").replace("`WIRE`", "`wire/`")
    (problem,) = mismatches(swapped)
    assert problem.startswith("broker: layers described as")
    assert mismatches(text.replace("<!-- contract: query -->", "")) == ["query: no table"]


def _broker_modules() -> dict[str, list[frozenset[str]]]:
    return {cid: contract_layers(c) for cid, c in CONTRACTS.items()
            if cid == "broker" or cid.startswith("broker-")}


def test_the_broker_docstring_names_every_module_and_its_rooms_in_order():
    docstring = ast.get_docstring(ast.parse(BROKER_INIT.read_text()))
    assert docstring
    named = [m.group(1) for m in re.finditer(r"``([A-Za-z_]\w*)/?``", docstring)]
    contracts = _broker_modules()
    assert len(contracts) > 5
    every = set().union(*(set().union(*layers) for layers in contracts.values()))
    assert sorted(every - set(named)) == []
    first = {name: named.index(name) for name in set().union(*contracts["broker"])}
    order = [min(first[name] for name in layer) for layer in contracts["broker"]]
    assert order == sorted(order), "the docstring lists the broker's rooms out of order"
