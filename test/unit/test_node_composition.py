"""The nodes are composed, not mixed (issue 29, item 3): each node class in ``mbs_ros/nodes/*_node.py`` derives
from rclpy's ``Node`` alone and holds its parts as attributes; no module of ``mbs_ros/nodes`` chains a private
hook through ``super()`` (the mixins' ``super()._on_reset(...)``, ``super()._create_publishers()``) or documents a
"Needs, from the node" contract. Read from the source (no rclpy import)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

NODES = Path(__file__).resolve().parents[2] / "mbs_ros" / "nodes"


def _node_classes(tree: ast.Module):
    return [c for c in tree.body if isinstance(c, ast.ClassDef) and c.name.endswith("Node")]


def _base_names(cls: ast.ClassDef):
    return [ast.unparse(b) for b in cls.bases]


def _private_super_calls(tree: ast.Module):
    """``super().<private>(...)`` calls: a hook chained through the method resolution order."""
    out = []
    for n in ast.walk(tree):
        if (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                and n.value.func.id == "super"):
            out.append(f"line {n.lineno}: super().{n.attr}")
    return out


def problems(root: Path):
    out = []
    for path in sorted(root.glob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        if path.name.endswith("_node.py"):
            for cls in _node_classes(tree):
                if _base_names(cls) != ["Node"]:
                    out.append(f"{path.name}: class {cls.name}({', '.join(_base_names(cls))}) mixes in parts")
        out += [f"{path.name}: {p}" for p in _private_super_calls(tree)]
        if "Needs, from the node" in text:
            out.append(f"{path.name}: a part with a 'Needs, from the node' contract")
    return out


def test_the_nodes_hold_their_parts_instead_of_mixing_them_in():
    assert problems(NODES) == []


@pytest.mark.parametrize("source, expected", [
    ("class DynamicsNode(SensorPublishing, Node):\n    pass\n",
     "x_node.py: class DynamicsNode(SensorPublishing, Node) mixes in parts"),
    ("class P:\n    def _on_reset(self, a, b):\n        return super()._on_reset(a, b)\n",
     "x_node.py: line 3: super()._on_reset"),
    ('class P:\n    """Needs, from the node: sim."""\n', "x_node.py: a part with a 'Needs, from the node' contract"),
])
def test_the_rule_sees_a_mixin(tmp_path, source, expected):
    (tmp_path / "x_node.py").write_text(source)
    assert problems(tmp_path) == [expected]


def test_the_rule_lets_composition_and_super_init_pass(tmp_path):
    (tmp_path / "x_node.py").write_text(
        "class XNode(Node):\n    def __init__(self):\n        super().__init__('x')\n        self.part = Part(self)\n")
    assert problems(tmp_path) == []


def test_the_callback_guard_counts_and_answers_instead_of_raising():
    """CallbackGuard (the dynamics node's part that keeps callbacks from stopping it): a failing message callback
    is counted and logged as an error, a failing service answers with the reason, a rejection is counted."""
    import types

    from mbs_ros.nodes.runtime import CallbackGuard

    logged = []
    logs = types.SimpleNamespace(warning=lambda key, text: logged.append(("warning", key, text)),
                                 error=lambda key, text: logged.append(("error", key, text)))
    node = types.SimpleNamespace(context=types.SimpleNamespace(ok=lambda: True))
    counts = {"callback_errors": 0, "rejected_cmd_wrench": 0}
    guard = CallbackGuard(node, counts, logs)

    def fails(*_args):
        raise ValueError("boom")

    assert guard.callback(fails, "cmd_wrench")(object()) is None
    assert guard.callback(fails, "timer")() is None  # a timer callback takes no argument
    response = guard.service(fails, "reset")(object(), types.SimpleNamespace(success=True, message=""))
    guard.reject("cmd_wrench", "frame", "unknown frame 'x'")
    assert counts == {"callback_errors": 3, "rejected_cmd_wrench": 1}
    assert (response.success, response.message) == (False, "reset failed: ValueError: boom")
    assert logged == [("error", "error_cmd_wrench", "cmd_wrench callback failed: ValueError: boom"),
                      ("error", "error_timer", "timer callback failed: ValueError: boom"),
                      ("error", "error_reset", "reset failed: ValueError: boom"),
                      ("warning", "cmd_wrench:frame", "cmd_wrench rejected: unknown frame 'x'")]


def test_the_callback_guard_times_every_callback(monkeypatch):
    """CallbackGuard times each guarded callback (messages, timers, services; one that fails too) on the
    monotonic clock: ``timing()`` gives the longest since the start and since the last call, with its name, in ms;
    the clock here is a counter each callback advances by a known amount (no wall clock)."""
    import types

    from mbs_ros.nodes import runtime
    from mbs_ros.nodes.runtime import CallbackGuard

    now, cpu, reads = [0], [0], []
    monkeypatch.setattr(runtime.time, "monotonic_ns", lambda: now[0])
    monkeypatch.setattr(runtime.time, "thread_time_ns", lambda: reads.append(1) or cpu[0])
    monkeypatch.setattr(runtime, "run_delay_ns", lambda path: None)  # the scheduler's waits: the next tests
    logs = types.SimpleNamespace(warning=lambda *a: None, error=lambda *a: None)
    node = types.SimpleNamespace(context=types.SimpleNamespace(ok=lambda: True))
    guard = CallbackGuard(node, {"callback_errors": 0}, logs)

    def takes(ns, fail=False, cpu_ns=None):  # wall ns, and CPU ns (less: preempted)
        def fn(*_args):
            now[0] += ns
            cpu[0] += ns if cpu_ns is None else cpu_ns
            if fail:
                raise ValueError("boom")
        return fn

    assert guard.timing() == {"longest_callback_ms": 0.0, "longest_callback": "", "longest_callback_recent_ms": 0.0,
                              "longest_callback_recent": "", "longest_callback_cpu_ms": 0.0,
                              "longest_callback_recent_cpu_ms": 0.0}
    guard.callback(takes(2_500_000, cpu_ns=2_000_000), "joint_command")(object())
    assert len(reads) == 2
    guard.callback(takes(1_000_000), "timer")()
    # its 1 ms of wall time cannot hold more CPU time than the 2 ms seen: the CPU clock (a system call) is read
    # at its start only
    assert len(reads) == 3
    guard.service(takes(4_000_000, fail=True, cpu_ns=500_000), "step")(object(),
                                                                       types.SimpleNamespace(success=True, message=""))
    # the longest on the wall clock (step, preempted) is not the one that took the most CPU time (joint_command)
    assert guard.timing() == {"longest_callback_ms": 4.0, "longest_callback": "step",
                              "longest_callback_recent_ms": 4.0, "longest_callback_recent": "step",
                              "longest_callback_cpu_ms": 2.0, "longest_callback_recent_cpu_ms": 2.0}
    guard.callback(takes(3_000_000, fail=True), "cmd_wrench")(object())
    guard.callback(takes(500_000), "timer")()
    assert guard.timing() == {"longest_callback_ms": 4.0, "longest_callback": "step",
                              "longest_callback_recent_ms": 3.0, "longest_callback_recent": "cmd_wrench",
                              "longest_callback_cpu_ms": 3.0, "longest_callback_recent_cpu_ms": 3.0}
    guard.callback(takes(5_000_000), "step timer")()  # any "... timer" takes no argument (rclpy's TimerInfo)
    # started at 11 ms: after the 2.5 + 1 + 4 + 3 + 0.5 ms of the callbacks before it
    assert guard.timing()["longest_callback"] == "step timer" and guard.started_ns == 11_000_000
    assert guard.timing()["longest_callback_recent_ms"] == 0.0  # nothing ran since


def test_the_callback_guard_reports_the_schedulers_waits(monkeypatch, tmp_path):
    """``timing()`` adds the share of the wall clock the node's thread waited for a core, since the guard was made
    (``scheduler_wait_share``) and since the last report (``scheduler_wait_share_recent``): the second field of
    the thread's schedstat over the monotonic clock, both counters here under the test's control."""
    import types

    from mbs_ros.nodes import runtime
    from mbs_ros.nodes.runtime import CallbackGuard, run_delay_ns

    stat = tmp_path / "schedstat"
    stat.write_text("987654321 4000000 77\n")  # on a CPU, waiting on a run queue, time slices
    assert run_delay_ns(str(stat)) == 4_000_000
    assert run_delay_ns(str(tmp_path / "none")) is None
    stat.write_text("garbage\n")
    assert run_delay_ns(str(stat)) is None

    now, waits = [1_000_000_000], [500_000_000]
    monkeypatch.setattr(runtime.time, "monotonic_ns", lambda: now[0])
    monkeypatch.setattr(runtime, "run_delay_ns", lambda path: waits[0])
    logs = types.SimpleNamespace(warning=lambda *a: None, error=lambda *a: None)
    guard = CallbackGuard(types.SimpleNamespace(context=types.SimpleNamespace(ok=lambda: True)), {}, logs)
    now[0] += 10_000_000
    waits[0] += 4_000_000
    t = guard.timing()
    assert t["scheduler_wait_share"] == pytest.approx(0.4) and t["scheduler_wait_share_recent"] == pytest.approx(0.4)
    now[0] += 10_000_000
    waits[0] += 1_000_000
    t = guard.timing()
    assert t["scheduler_wait_share"] == pytest.approx(0.25)
    assert t["scheduler_wait_share_recent"] == pytest.approx(0.1)
    monkeypatch.setattr(runtime, "run_delay_ns", lambda path: None)  # the file gone: no figures, no error
    assert "scheduler_wait_share" not in guard.timing()


_SHARED_CORE = r"""
import json, os, sys, time, types
cpu = int(sys.argv[1])
os.sched_setaffinity(0, {cpu})
children = []
for _ in range(2):  # two busy processes on the same core, spinning from the fork on
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    children.append(pid)
try:
    from mbs_ros.nodes.runtime import CallbackGuard
    logs = types.SimpleNamespace(warning=lambda *a: None, error=lambda *a: None)
    guard = CallbackGuard(types.SimpleNamespace(context=types.SimpleNamespace(ok=lambda: True)), {}, logs)
    t0, c0 = time.monotonic_ns(), time.thread_time_ns()
    while time.monotonic_ns() - t0 < 600_000_000:  # this thread spins too: always on the core or waiting for it
        pass
    t = guard.timing()
    t["cpu_share"] = (time.thread_time_ns() - c0) / (time.monotonic_ns() - t0)
    print(json.dumps(t))
finally:
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
"""


@pytest.mark.e2e  # starts a process
def test_the_schedulers_waits_of_a_thread_that_shares_its_core():
    """A real thread spinning on one core beside two busy processes gets about a third of it: it waits for the
    core about two thirds of the wall clock (more on a busy machine), and being always on the core or waiting for
    it, its CPU share and its wait share add up to about one; the kernel's accounting, not ours, is the
    reference."""
    import json
    import os
    import subprocess
    import sys
    import threading

    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"):
        pytest.skip("no /proc/<pid>/task/<tid>/schedstat on this system (Linux with CONFIG_SCHED_INFO)")
    cpu = min(os.sched_getaffinity(0))
    run = subprocess.run([sys.executable, "-c", _SHARED_CORE, str(cpu)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    t = json.loads(run.stdout.strip().splitlines()[-1])
    assert t["scheduler_wait_share"] >= 0.45, t
    assert t["scheduler_wait_share_recent"] == pytest.approx(t["scheduler_wait_share"], abs=0.05), t
    assert 0.75 <= t["cpu_share"] + t["scheduler_wait_share"] <= 1.1, t


def test_realtime_scheduling_asks_the_system_and_reports_its_refusal(monkeypatch):
    """``realtime_scheduling(priority)``: 0 asks nothing; otherwise SCHED_FIFO at that priority for the calling
    thread, or the system's reason for refusing it (here a refusal the test makes), or that there is no SCHED_FIFO."""
    import errno

    from mbs_ros.nodes import runtime

    asked = []

    def refuse(pid, policy, param):
        asked.append((pid, policy, param.sched_priority))
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(runtime.os, "sched_setscheduler", refuse, raising=False)
    monkeypatch.setattr(runtime.os, "SCHED_FIFO", 1, raising=False)
    assert runtime.realtime_scheduling(0) is None and asked == []
    assert runtime.realtime_scheduling(50) == "Operation not permitted"
    assert asked == [(0, 1, 50)]  # the calling thread, SCHED_FIFO, the priority given
    monkeypatch.delattr(runtime.os, "sched_setscheduler")
    assert runtime.realtime_scheduling(50) == "this system has no SCHED_FIFO"


_FIFO_SHARED_CORE = _SHARED_CORE.replace(
    "    from mbs_ros.nodes.runtime import CallbackGuard\n",
    "    from mbs_ros.nodes.runtime import CallbackGuard, realtime_scheduling\n"
    "    problem = realtime_scheduling(10)\n"
    "    if problem is not None:\n"
    "        print(json.dumps({'refused': problem}))\n"
    "        sys.exit(0)\n"
    "    assert os.sched_getscheduler(0) == os.SCHED_FIFO and os.sched_getparam(0).sched_priority == 10\n")


@pytest.mark.e2e  # starts a process
def test_a_thread_with_sched_fifo_does_not_wait_for_the_processes_beside_it():
    """The same spinning thread with ``realtime_scheduling(10)`` beside the same two busy processes on its core:
    the kernel no longer makes it wait (its share of waiting near 0, of CPU near 1, where it waited two thirds
    without). Where the system refuses SCHED_FIFO the test skips with the refusal (the refusal's handling runs in
    the test above)."""
    import json
    import os
    import subprocess
    import sys
    import threading

    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"):
        pytest.skip("no /proc/<pid>/task/<tid>/schedstat on this system (Linux with CONFIG_SCHED_INFO)")
    assert _FIFO_SHARED_CORE != _SHARED_CORE
    cpu = min(os.sched_getaffinity(0))
    run = subprocess.run([sys.executable, "-c", _FIFO_SHARED_CORE, str(cpu)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    t = json.loads(run.stdout.strip().splitlines()[-1])
    if "refused" in t:
        pytest.skip(f"SCHED_FIFO refused here: {t['refused']}")
    assert t["scheduler_wait_share"] <= 0.1, t
    assert t["cpu_share"] >= 0.8, t


def test_thread_priority_logs_what_the_system_answered(monkeypatch):
    """The node's ``thread_priority``: 0 asks nothing; set, an info line (and a warning when the node will step
    back to back); refused, a warning with the system's reason; the return value says whether it is set."""
    import types

    from mbs_ros.nodes import runtime

    lines, answers, asked = [], [None], []
    logger = types.SimpleNamespace(info=lambda m: lines.append(("info", m)), warning=lambda m: lines.append(("warn", m)))
    monkeypatch.setattr(runtime, "realtime_scheduling", lambda p: asked.append(p) or answers[0])
    monkeypatch.setenv("RMW_FASTRTPS_PUBLICATION_MODE", "ASYNCHRONOUS")
    fast = "rmw_fastrtps_cpp"
    assert runtime.thread_priority(logger, 0, busy=True, rmw=fast) is False and asked == [] and lines == []
    assert runtime.thread_priority(logger, 50, rmw=fast) is True and asked == [50]
    assert lines == [("info", "thread_priority 50: the node's threads run with SCHED_FIFO")]
    lines.clear()
    assert runtime.thread_priority(logger, 50, busy=True, rmw=fast) is True
    assert [k for k, _ in lines] == ["info", "warn"] and "real_time_factor 0" in lines[1][1]
    lines.clear()
    answers[0] = "Operation not permitted"
    assert runtime.thread_priority(logger, 7, busy=True, rmw=fast) is False
    assert lines == [("warn", "thread_priority 7: SCHED_FIFO refused (Operation not permitted; it needs root, "
                              "CAP_SYS_NICE or an rtprio limit): running with the default scheduler")]
    # publications sent in the callbacks (Fast DDS's default): said so, with what to set; another middleware: not
    answers[0] = None
    monkeypatch.delenv("RMW_FASTRTPS_PUBLICATION_MODE")
    lines.clear()
    assert runtime.thread_priority(logger, 50, rmw=fast) is True
    assert [k for k, _ in lines] == ["warn", "info"]
    assert lines[0][1].startswith("thread_priority 50: RMW_FASTRTPS_PUBLICATION_MODE is not set")
    assert "start the node with RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS" in lines[0][1]
    lines.clear()
    assert runtime.thread_priority(logger, 50, rmw="rmw_cyclonedds_cpp") is True and [k for k, _ in lines] == ["info"]
    lines.clear()
    assert runtime.thread_priority(logger, 0, rmw=fast) is False and lines == []
