"""The benchmark command as CI's smoke test: ``python -m mbs_ros.bench --quick --json`` in a subprocess.

Asserts that every agreement check passed (ours against Pinocchio's kernels and MuJoCo's forward dynamics and
step, on the same URDF text and state) and that the document has the expected rows. Never asserts on time: the
timings of a shared machine are the benchmark's business, not a test's. The MuJoCo rows are skipped (with the
reason) when ``mujoco`` is not importable, the UR5 rows when example-robot-data is not installed; the Pinocchio
rows always run.
"""
from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ("rnea", "crba", "computeCoriolisMatrix", "aba", "computeAllTerms")
TIMEOUT = 600


def _have(module):
    return importlib.util.find_spec(module) is not None


def _ur5():
    from mbs_ros.bench.models import ur5_path

    return ur5_path()


HAVE_MUJOCO = _have("mujoco")
NO_MUJOCO = "mujoco is not importable (pip install mujoco; requirements-dev.txt has it)"


def _bench(*args):
    return subprocess.run([sys.executable, "-m", "mbs_ros.bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT)


@pytest.fixture(scope="module")
def quick():
    pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the kernels' reference; make setup installs it")
    proc = _bench("--quick", "--json")
    assert proc.stdout.strip(), f"no JSON on stdout; stderr:\n{proc.stderr[-3000:]}"
    doc = json.loads(proc.stdout)
    return proc, doc


def _rows(doc, section):
    return {(r["model"], r["kernel"]): r for r in doc["rows"] if r["section"] == section}


def test_quick_run_passes_and_reports(quick):
    proc, doc = quick
    assert proc.returncode == 0, (doc["errors"], [r for r in doc["rows"] if not r["agree"]], proc.stderr[-3000:])
    assert doc["ok"] and doc["agreement_ok"] and not doc["errors"]
    assert doc["quick"] and "node" not in doc["sections"] and doc["node"] is None
    env = doc["environment"]
    assert env["numpy"] and env["pin"] and env["mbs_ros_backend"]
    for r in doc["rows"]:
        assert r["agree"] and r["err"] <= r["tol"] <= 1e-8, r
        assert r["ours_us"] > 0 and (r["peer_us"] is None or r["peer_us"] > 0)


def test_kernels_agree_with_pinocchio(quick):
    _, doc = quick
    rows = _rows(doc, "kernels")
    for model in ("arm6", "uvms", "chain12", "tree30"):
        for k in KERNELS:
            r = rows[(model, k)]
            assert r["reference"] == "Pinocchio" and r["agree"], r
            assert r["ratio"] > 0 and r["target_ratio"] == (3.0 if k == "aba" else 5.0)
    assert rows[("uvms", "rnea")]["nv"] == 12


def test_derivatives_agree_with_pinocchio(quick):
    _, doc = quick
    rows = _rows(doc, "derivatives")
    for model in ("arm6", "uvms", "chain12", "tree30"):
        for k in ("computeRNEADerivatives", "computeABADerivatives"):
            r = rows[(model, k)]
            assert r["reference"] == "Pinocchio" and r["agree"] and r["err"] <= 1e-8, r
            assert r["ratio"] > 0 and r["kernel_ratio"] > 0 and r["target_ratio"] == 2.0


def test_ur5_agrees(quick):
    path, why = _ur5()
    if path is None:
        pytest.skip(why)
    _, doc = quick
    kernels = _rows(doc, "kernels")
    for model, nv in (("ur5", 6), ("ur5_ff", 12)):
        for k in KERNELS:
            assert kernels[(model, k)]["agree"] and kernels[(model, k)]["nv"] == nv
    if HAVE_MUJOCO:
        step = _rows(doc, "step")
        assert step[("ur5_ff", "rk4")]["agree"] and step[("ur5_ff", "rk4")]["target_ratio"] == 2.0


def test_step_agrees_with_mujoco(quick):
    if not HAVE_MUJOCO:
        pytest.skip(NO_MUJOCO)
    _, doc = quick
    rows = _rows(doc, "step")
    for model in ("uvms", "chain12", "tree30"):
        for method in ("rk4", "euler"):
            r = rows[(model, method)]
            assert r["agree"] and r["qacc_err"] <= 1e-8 and r["step_err"] <= 1e-8, r
    assert rows[("uvms", "rk4")]["target_ratio"] == 2.0
    # on a fixed base MuJoCo's RK4 and ours are the same classic RK4 in joint coordinates
    assert rows[("chain12", "rk4")]["delta_ours"] < 1e-10


def test_scaling_fits_both(quick):
    if not HAVE_MUJOCO:
        pytest.skip(NO_MUJOCO)
    _, doc = quick
    for family in ("chain", "tree"):
        s = doc["scaling"][family]
        assert [p["n"] for p in s["points"]] == [12, 30, 100]
        assert all(p["agree"] for p in s["points"])
        assert s["exponent_ours"] is not None and s["exponent_mujoco"] is not None


def test_a_disagreement_fails_the_run():
    """An impossible tolerance makes every check fail: exit code 1, and the rows say so."""
    pytest.importorskip("pinocchio")
    proc = _bench("--quick", "--json", "--only", "kernels", "--tol", "1e-300")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and not doc["agreement_ok"]
    assert doc["rows"] and not any(r["agree"] for r in doc["rows"] if r["err"] > 0)


@pytest.mark.parametrize("single", [False, True], ids=["EventsExecutor", "SingleThreadedExecutor"])
def test_the_floor_echo_answers_every_message(single, tmp_path):
    """The node section's floor: the echo process (mbs_ros.bench.echo) answers each of 30 messages, one at a time,
    and stops cleanly; the figures are well-formed (a count and an order of the quantiles, never a time bound)."""
    pytest.importorskip("rclpy")
    from mbs_ros.bench import node

    probe = node.Probe("test_floor_probe")
    try:
        out = node.floor(probe, "/floor_test", tmp_path, 30, single=single)
    finally:
        probe.close()
    assert out["exit_code"] == 0 and out["messages"] == 27
    assert out["executor"] == ("SingleThreadedExecutor" if single else "EventsExecutor")
    assert 0 < out["median_ms"] <= out["p99_ms"] and out["lockstep_rtf_bound"] > 0


def test_contact_rows_are_produced_and_finite():
    """``--only contact``: a row per scene (Solo12 standing, the 5-box stack) against MuJoCo, with its target,
    contacts on both sides, the per-contact cost and the split of our step; finite figures, never a time bound."""
    if not HAVE_MUJOCO:
        pytest.skip(NO_MUJOCO)
    pytest.importorskip("coal", reason="coal (Pinocchio's collision library) finds the contacts")
    proc = _bench("--quick", "--json", "--only", "contact")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["ok"], (doc["errors"], proc.stderr[-3000:])
    rows = _rows(doc, "contact")
    scenes = {"stack5"} | ({"solo12"} if _have_erd_solo12() else set())
    assert set(m for m, _ in rows) == scenes and all(k == "step" for _, k in rows)
    for (model, _), r in rows.items():
        assert r["agree"] and r["err"] <= r["tol"] <= 1e-8, r
        assert r["target_ratio"] == 2.0 and r["met"] in (True, False)
        assert r["n_contacts"] >= 4 and r["mujoco_contacts"] >= 4 and r["converged"], r
        for k in ("ours_us", "peer_us", "ratio", "us_per_contact", "solve_us_per_contact"):
            assert r[k] is not None and math.isfinite(r[k]) and r[k] > 0, (k, r)
        assert r["weight_err"] < 1e-3, r  # the settled scene stands on its contacts
        parts = [s["part"] for s in r["split"]]
        for part in ("geometry (find_contacts: Coal and its Python)", "solve", "Delassus G, g"):
            assert part in parts
        assert all(math.isfinite(s["us"]) and s["us"] >= 0 for s in r["split"])
    assert any(t["what"] == "contact stack5 step" for t in doc["targets"])


def _have_erd_solo12():
    from mbs_ros.bench.contact import SOLO12_IN_ERD
    from mbs_ros.bench.models import erd_path

    return erd_path(SOLO12_IN_ERD)[0] is not None


def _finite_positive(doc, keys):
    for k in keys:
        assert doc.get(k) is not None and math.isfinite(doc[k]) and doc[k] > 0, (k, doc)


def test_headless_section_reports_finite_figures(quick):
    """The headless section (in every --quick run): its real-time factor and per-period cost, finite."""
    _, doc = quick
    h = doc["headless"]
    assert h is not None and h["met"] in (True, False), h
    _finite_positive(h, ("real_time_factor", "us_per_period", "wall_real_time_factor"))


def test_node_section_runs_every_part():
    """``--only node --quick``: the dynamics node free-running at 1 kHz (it must not wait for a command: no
    controller runs there), the rclpy floor, lockstep with the controller and the round trip each report finite
    figures, never an error; no bound on any of them."""
    pytest.importorskip("rclpy")
    proc = _bench("--quick", "--json", "--only", "node")
    doc = json.loads(proc.stdout)
    n = doc["node"]
    assert proc.returncode == 0 and doc["ok"], (doc["errors"], proc.stderr[-3000:])
    _finite_positive(n["realtime"], ("physics_rate_hz", "cpu_share", "sim_s"))
    assert n["realtime"]["exit_code"] == 0, n["realtime"]
    assert len(n["floor"]) == 2 and all("error" not in f for f in n["floor"]), n["floor"]
    _finite_positive(n["lockstep"], ("real_time_factor", "cpu_share_dynamics", "cpu_share_controller"))
    _finite_positive(n["round_trip"], ("median_ms", "p99_ms"))
    assert n["round_trip"]["periods"] > 0
    assert {t["what"] for t in doc["targets"]} >= {"node realtime", "node lockstep", "node round_trip"}


def test_contact_node_section_reports_the_standing_quadruped():
    """``--only contact_node --quick``: solo12_stand's nodes free-running in real time; once landed its four feet
    touch (at least 4 contacts), the simulated time advanced, and the share of real time, the CPU share, the mean
    and longest contact step and the longest callback are finite (no bound on any: the benchmark's business)."""
    pytest.importorskip("rclpy")
    pytest.importorskip("coal", reason="coal (Pinocchio's collision library) finds the contacts")
    if not _have_erd_solo12():
        pytest.skip("example-robot-data's Solo12 is not installed")
    proc = _bench("--quick", "--json", "--only", "contact_node")
    doc = json.loads(proc.stdout)
    c = doc["contact_node"]
    assert proc.returncode == 0 and doc["ok"] and "error" not in c, (doc["errors"], proc.stderr[-3000:])
    assert c["scenario"] == "solo12_stand" and c["physics_rate_hz"] == 1000.0 and c["contacts"] >= 4, c
    _finite_positive(c, ("real_time_factor", "cpu_share", "sim_s", "contact_step_mean_ms", "contact_step_longest_ms",
                         "longest_callback_ms"))
    assert c["contact_steps_in_window"] > 0 and c["met"] in (True, False)
    assert c["contact_step_mean_ms"] <= c["contact_step_longest_ms"], c
    if importlib.util.find_spec("mujoco") is not None:  # the host's speed beside the figures
        _finite_positive(c, ("host_mujoco_us",))
    assert all(code == 0 for code in c["exit_codes"].values()), c["exit_codes"]
    assert any(t["what"] == "contact_node real time" for t in doc["targets"])
