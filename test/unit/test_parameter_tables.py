"""The nodes' parameter tables are the one source of their documentation: each docs/<node>.md carries the table
generated from mbs_ros.cores.parameters, and ``--help`` lists every parameter of it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mbs_ros.cores.parameters import ROLES, markdown_table, names, table

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- parameters: begin -->\n(.*?)<!-- parameters: end -->", flags=re.S)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_docs_page_carries_the_table_of_its_node(role):
    found = BLOCK.search((ROOT / "docs" / f"{role}_node.md").read_text(encoding="utf-8"))
    assert found, f"docs/{role}_node.md has no generated parameter table"
    assert found.group(1) == markdown_table(table(role)), f"regenerate the table in docs/{role}_node.md"
    rows = [line.split("|")[1].strip().strip("`") for line in found.group(1).splitlines()[2:]]
    assert rows == list(table(role)) and len(rows) >= 10


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_parameter_has_a_description_and_the_names_add_use_sim_time(role):
    params = table(role)
    assert all(p.name == n and len(p.description) >= 10 for n, p in params.items())
    assert names(role) == tuple(params) + ("use_sim_time",)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_help_states_each_parameter_with_its_type_default_and_rules(role):
    import importlib
    import types

    from mbs_ros.cores.parameters import kind, rules_text
    from mbs_ros.nodes.runtime import help_text

    module = f"mbs_ros.nodes.{role}_node"
    importlib.import_module(module)
    text = help_text(types.SimpleNamespace(__module__=module))
    lines = {line.split()[0]: line for line in text.split("parameters:\n", 1)[1].splitlines()}
    assert list(lines) == list(table(role))
    for name, p in table(role).items():
        assert f"  {name} ({kind(p)}; default " in lines[name], lines[name]
        assert rules_text(p) in lines[name] and lines[name].endswith(": " + p.description)
