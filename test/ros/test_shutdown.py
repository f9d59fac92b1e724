"""A stopped node ends even when the middleware's teardown hangs, and a node that has to be killed says where it hung.

:class:`mbs_ros.nodes.runtime.TeardownGuard` bounds the release of a stopped node's ROS entities: a hang there (a
CI run once saw a dynamics node ignore SIGINT and SIGTERM until SIGKILL, with nothing in its log) becomes one warning
with every thread's stack and the node's own exit code. A process that ignores its stop signals altogether gets
SIGUSR1 before SIGKILL (:meth:`mbs_ros.process.NodeProcess.dump_stacks`), so its log shows where it was stuck.
The hangs here are staged in child processes: a sleep (the GIL free), a regular expression that never ends (the GIL
held, so only native threads can act: the guard's POSIX timers and faulthandler's) and signals ignored; and a real
node whose ``destroy_node`` blocks either way exits with its own status within the runner's deadline.
"""

import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("rclpy")

from mbs_ros.bringup import runner as bringup_runner  # noqa: E402
from mbs_ros.process import NodeProcess  # noqa: E402
from ros_helpers import ros_env_defaults  # noqa: E402

DEADLINE_S = 120  # generous: the children end within seconds, or are killed by the deadline and the test fails


def run_child(code: str):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=DEADLINE_S)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_hung_teardown_ends_with_the_nodes_exit_code_and_its_stacks():
    for rc in (0, 2):
        code, out = run_child(f"""
            import time
            from mbs_ros.process import TeardownGuard

            guard = TeardownGuard("ns.stuck_node", {rc}, timeout=0.5)

            def release_entities_that_never_returns():
                time.sleep(600)

            release_entities_that_never_returns()
            guard.done()
            """)
        assert code == rc, out
        warning = [line for line in out.splitlines() if line.startswith("[WARN]")]
        assert len(warning) == 1, out
        m = bringup_runner._LOG_LINE.match(warning[0])  # as the runner's warning summary reads node logs
        assert m and m.group(1) == "WARN" and "[ns.stuck_node]" in warning[0], warning
        assert m.group(3).startswith("stopping: the release of the ROS entities did not finish within 0.5 s")
        assert f"exiting with code {rc} anyway" in m.group(3)
        assert "release_entities_that_never_returns" in out, out  # the stack of the main thread


def test_a_teardown_that_finishes_leaves_the_exit_code_alone():
    code, out = run_child("""
        import sys
        from mbs_ros.process import TeardownGuard

        guard = TeardownGuard("ns.node", 0, timeout=60)
        guard.done()
        guard._thread.join()  # the guard's thread ends at once when done() came first
        print("finished")
        sys.exit(5)
        """)
    assert code == 5, out
    assert "finished" in out and "did not finish" not in out


def test_a_teardown_stuck_holding_the_gil_ends_with_the_nodes_exit_code():
    """The guard's Python thread cannot run while the main thread holds the GIL: its native timers (threads outside
    Python) write the warning line, faulthandler's C thread the stacks, and the process ends with the node's code."""
    for rc in (0, 2):
        code, out = run_child(f"""
            import re
            from mbs_ros.process import TeardownGuard

            guard = TeardownGuard("ns.node", {rc}, timeout=0.5)

            def holds_the_gil_forever():
                re.match(r"(a+)+$", "a" * 64 + "b")  # exponential backtracking in C, without releasing the GIL

            holds_the_gil_forever()
            """)
        assert code == rc, out
        warning = [line for line in out.splitlines() if line.startswith("[WARN]")]
        assert len(warning) == 1, out
        m = bringup_runner._LOG_LINE.match(warning[0])  # as the runner's warning summary reads node logs
        assert m and "[ns.node]" in warning[0] and f"exiting with code {rc} anyway" in m.group(3), warning
        assert "holding the GIL" in m.group(3), warning
        assert "Timeout" in out and "holds_the_gil_forever" in out, out


STUCK_NODE = """
    import re, sys, time
    from rclpy.node import Node
    from mbs_ros import process
    from mbs_ros.nodes import runtime

    process.TEARDOWN_TIMEOUT_S = 1.0  # the guard's deadline for this test (7 s in a node)


    class NodeWhoseDestroyBlocks(Node):
        def __init__(self):
            super().__init__("stuck_teardown_node")

        def configure(self):
            self.create_timer(0.05, self.tick)
            self.ticks = 0

        def tick(self):
            self.ticks += 1
            if self.ticks == 2:
                print("spinning", flush=True)

        def destroy_node(self):
            {block}


    def blocked_in_destroy_node_holding_the_gil():
        re.match(r"(a+)+$", "a" * 64 + "b")  # exponential backtracking in C, without releasing the GIL


    def blocked_in_destroy_node_with_the_gil_free():
        time.sleep(600)


    sys.exit(runtime.run_node(NodeWhoseDestroyBlocks))
    """


def sigint_once_logged(code: str, label: str, line: str, tmp_path):
    """Run ``code`` as a node process, send SIGINT once its log shows ``line``: ``(process, exit code, log)``."""
    ros_env_defaults()
    proc = NodeProcess([sys.executable, "-c", code], label=label, log_file=tmp_path / "node.log").start()
    try:
        assert proc.wait_for_log(line, timeout=DEADLINE_S), proc.log_text()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=DEADLINE_S)
    finally:
        proc.stop(sigint_timeout=1.0, sigterm_timeout=1.0)
    return proc, rc, proc.log_text()


@pytest.mark.parametrize("block", ["blocked_in_destroy_node_holding_the_gil",
                                   "blocked_in_destroy_node_with_the_gil_free"])
def test_a_node_whose_destroy_node_blocks_exits_with_its_status_within_the_deadline(tmp_path, block):
    """A real node (run_node: rclpy.init, spin, SIGINT) whose ``destroy_node`` never returns, holding the GIL or not:
    it exits 0 (a clean stop) within the runner's SIGINT deadline, and its log says why it took the guard."""
    # the guard's deadline (1 s) and its native grace (1 s) are far below the runner's 10 s; DEADLINE_S is only a
    # bound for a busy machine (a node stuck for good would have needed SIGKILL and fails below)
    proc, rc, log = sigint_once_logged(textwrap.dedent(STUCK_NODE).replace("{block}", block + "()"),
                                       "stuck_teardown_node", "spinning", tmp_path)
    assert rc == 0 and proc.stop_signal is None, log
    warning = [line for line in log.splitlines() if line.startswith("[WARN]") and "release of the ROS" in line]
    assert len(warning) == 1 and "exiting with code 0 anyway" in warning[0], log
    assert block in log, log  # the stacks show where it was stuck


def start_stubborn(tmp_path, label: str, stuck_in: str) -> NodeProcess:
    """A process that registers the stack dump, ignores SIGINT and SIGTERM, and loops forever in a function named
    ``stuck_in``; returned once it ignores them."""
    proc = NodeProcess([sys.executable, "-c", textwrap.dedent(f"""
        import signal, time
        from mbs_ros.process import dump_stacks_on_sigusr1

        dump_stacks_on_sigusr1()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring SIGINT and SIGTERM", flush=True)

        def {stuck_in}():
            while True:
                time.sleep(0.05)

        {stuck_in}()
        """)], label=label, log_file=tmp_path / "stubborn.log").start()
    assert proc.wait_for_log("ignoring SIGINT and SIGTERM", timeout=DEADLINE_S)
    return proc


def test_a_process_that_ignores_its_stop_signals_shows_its_stacks_before_sigkill(tmp_path):
    proc = start_stubborn(tmp_path, "stubborn", "stuck_in_a_callback")
    assert proc.stop(sigint_timeout=1.0, sigterm_timeout=1.0) == -signal.SIGKILL
    assert proc.stop_signal == "SIGKILL"
    log = proc.log_text()
    assert "stuck_in_a_callback" in log and "Current thread" in log, log


def test_a_process_that_dies_of_a_fatal_signal_shows_where(tmp_path):
    """A crash in native code (here a read of address 0) leaves the stacks in the log, not only the exit code."""
    proc = NodeProcess([sys.executable, "-c", textwrap.dedent("""
        import ctypes
        from mbs_ros.process import dump_stacks_on_sigusr1

        dump_stacks_on_sigusr1()

        def crashing_in_native_code():
            ctypes.string_at(0)

        crashing_in_native_code()
        """)], label="crashing", log_file=tmp_path / "crashing.log").start()
    assert proc.wait(timeout=DEADLINE_S) == -signal.SIGSEGV, proc.log_text()
    log = proc.log_text()
    assert "Segmentation fault" in log and "crashing_in_native_code" in log, log


def test_the_runner_shows_where_a_child_it_had_to_kill_was_stuck(tmp_path, capsys):
    """The bringup runner's stop: SIGINT, SIGTERM, then SIGUSR1 and SIGKILL; the error names the child, the signal
    it needed and shows the end of its log with the stacks."""
    from mbs_ros.bringup import load_scenario
    from mbs_ros.bringup.runner import Child, Runner

    runner = Runner(load_scenario("manipulator"), stop_timeout=1.0, log_dir=tmp_path, quiet=True)
    child = Child("arm/stubborn_node", start_stubborn(tmp_path, "arm/stubborn_node",
                                                      "spin_loop_that_never_checks_its_flag"))
    runner.children.append(child)
    runner._stop_all()
    assert child.returncode == -signal.SIGKILL and child.first_signal == "SIGINT" and child.stop_signal == "SIGKILL"
    result = runner._finish(None)
    assert result.returncode != 0
    err = capsys.readouterr().err
    assert "arm/stubborn_node needed SIGKILL when stopped" in err, err
    assert "spin_loop_that_never_checks_its_flag" in err, err


FROZEN_NODE = """
import gc
import sys

from rclpy.node import Node

from mbs_ros.nodes import runtime


class NodeThatLooksAtTheCollector(Node):
    def __init__(self):
        super().__init__("gc_node")

    def configure(self):
        self.made_in_configure = [[i] for i in range(1000)]  # container objects the collector tracks
        self.create_timer(0.05, self.tick)

    def tick(self):
        print(f"frozen {gc.get_freeze_count()}", flush=True)


sys.exit(runtime.run_node(NodeThatLooksAtTheCollector))
"""


def test_a_spinning_node_keeps_what_its_set_up_made_out_of_the_collectors_reach(tmp_path):
    """run_node freezes the objects the set-up made (gc.freeze) before spinning: a full collection over a node's
    modules, models and compiled kernels took 66 ms inside whichever callback allocated at the time. Here the
    node's own configure made 1001 tracked containers: all of them, and everything imported, are frozen."""
    _, rc, log = sigint_once_logged(FROZEN_NODE, "gc_node", "frozen", tmp_path)
    assert rc == 0, log
    frozen = int(next(line for line in log.splitlines() if line.startswith("frozen")).split()[1])
    assert frozen > 1001, log
