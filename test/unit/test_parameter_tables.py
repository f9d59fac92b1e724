"""The nodes' parameter tables are the one source of their documentation: each docs/<node>.md carries the table
generated from mbs_ros.nodes.parameters, and ``--help`` lists every parameter of it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mbs_ros.nodes.parameters import ROLES, markdown_table, names, table

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
