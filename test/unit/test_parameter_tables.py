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


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_descriptor_range_is_the_range_the_checks_and_help_hold(role):
    """issue 31 item 24: ``mass:=-1.0`` got rclpy's "out of range Min: 0.0" while ``--help`` said >= 1e-6 (a closed
    ``minimum`` tighter than the table's ``floating_point_range``; publish_rate likewise, 0.001 against 0.1). For
    every number parameter with a range, the ROS descriptor's FloatingPointRange is the table's range, ``--help``
    prints exactly it, and the settings' check (:func:`check_parameter`) accepts both ends (the low one unless the
    minimum is open, which ROS cannot say) and refuses the next double beyond each."""
    import importlib
    import math
    import types

    from mbs_ros.cores.params import ParameterError, check_parameter
    from mbs_ros.nodes.runtime import descriptor, help_text

    module = f"mbs_ros.nodes.{role}_node"
    importlib.import_module(module)
    text = help_text(types.SimpleNamespace(__module__=module))
    lines = {line.split()[0]: line for line in text.split("parameters:\n", 1)[1].splitlines()}
    ranged = 0
    for name, p in table(role).items():
        d = descriptor(p, p.default)
        if p.range is None:
            assert not d.floating_point_range, name
            continue
        ranged += 1
        (r,) = d.floating_point_range
        assert (r.from_value, r.to_value, r.step) == (p.range[0], p.range[1], 0.0), name
        assert f"; [{r.from_value:g}, {r.to_value:g}]" in lines[name].split("):", 1)[0], lines[name]
        for value, accepted in ((r.from_value, not p.minimum_open), (r.to_value, True),
                                (math.nextafter(r.from_value, -math.inf), False),
                                (math.nextafter(r.to_value, math.inf), False)):
            try:
                check_parameter({name: value}, p)
            except ParameterError as e:
                assert not accepted, f"{name}: {value!r} inside the descriptor's range refused: {e}"
            else:
                assert accepted, f"{name}: {value!r} outside the descriptor's range accepted"
    assert ranged >= 1


def test_a_closed_minimum_beside_a_range_is_refused_in_a_table():
    from mbs_ros.cores.parameters import from_pairs

    with pytest.raises(ValueError, match="x: a closed minimum .* make it the range's low end"):
        from_pairs({"x": ("a number", {"default": 1.0, "minimum": 1e-6, "floating_point_range": (0.0, 1.0)})})
    with pytest.raises(ValueError, match="open minimum 0.5 is not the range's low end 0"):
        from_pairs({"x": ("a number", {"default": 1.0, "minimum": 0.5, "minimum_open": True,
                                       "floating_point_range": (0.0, 1.0)})})
    assert from_pairs({"x": ("a number", {"default": 1.0, "minimum": 0.0, "minimum_open": True,
                                          "floating_point_range": (0.0, 1.0)})})["x"].range == (0.0, 1.0)


@pytest.mark.e2e  # starts a process
def test_the_docs_generator_answers_help_and_names_an_unreadable_page(tmp_path):
    """``python -m mbs_ros.cores.parameters --help`` took '--help' for the docs folder and ended in a traceback."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mbs_ros.cores.parameters", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m mbs_ros.cores.parameters")
    out = subprocess.run([sys.executable, "-m", "mbs_ros.cores.parameters", "--check", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().endswith("dynamics_node.md: cannot be read (FileNotFoundError)")
