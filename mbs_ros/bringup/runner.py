"""Run a scenario without ``launch``: ``python -m mbs_ros.bringup SCENARIO [--duration S] [--record FILE]
[--plot DIR]``.

Starts the nodes the launch files start (:func:`runner_specs`) as real processes, each once what it needs is
there (a controller listening, the recorder recording, a paused start's reference installed), records and plots
the run, and stops every child cleanly. Readiness comes from the ROS graph and the controllers' ``~/diagnostics``
counters, never from log wording. Life cycle, reproducible (paused) starts and exit codes: docs/bringup.md.
What a run starts and checks, ROS-free, is :mod:`mbs_ros.bringup.runner_plan`; the runner's view of the ROS graph
:mod:`mbs_ros.bringup.runner_graph`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, TextIO


from mbs_ros.scenario.schema import (
    NodeSpec,
    Scenario,
    ScenarioError,
    load_scenario,
    record_topics,
)
from mbs_ros.bringup.record_groups import expand_record
from mbs_ros.bringup.runner_graph import _Graph
from mbs_ros.bringup.runner_plan import (  # noqa: F401 - the plan's names are the runner's too
    _LOG_LINE,
    LogWarning,
    _indent,
    _pause_service,
    _recorded_counts,
    _reference_paths,
    _seconds,
    _session_command,
    end_stamp,
    holds_references,
    params_file_name,
    paused_start,
    recording_damage_message,
    reference_topics,
    runner_specs,
    state_topics,
    warning_summary,
)
from mbs_ros.cores.parameters.controller import STATE_TOPICS
from mbs_ros.dds import dds_defaults, node_environment
from mbs_ros.process import NodeProcess, NodeProcessError

__all__ = ["Runner", "RunResult", "main"]

RECORDER_NAME = "bringup_recorder"  # the recorder's node name (in /), by which the ROS graph shows its subscriptions
RECORDER_CLOSE_TIMEOUT = 30.0  # s the recorder gets at least, after its stop signal, to complete its file
RECORDER_FINISH_TIMEOUT = 60.0  # s a finishing recorder waits at most for the robots' states at the run's end
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: The longest --duration and timeouts [s]: stamps are int64 nanoseconds (9.2e9 s); inf was an OverflowError.
MAX_SECONDS = 1e8


@dataclass
class Child:
    label: str
    process: NodeProcess
    spec: Optional[NodeSpec] = None  # None: the recorder
    early_exit: Optional[int] = None  # exit code if it exited before the stop
    returncode: Optional[int] = None
    first_signal: Optional[str] = None  # the signal the runner stopped it with
    stop_signal: Optional[str] = None  # the last signal the runner had to send
    dumped: bool = False  # asked for its stacks (SIGUSR1) before SIGKILL

    @property
    def clean(self) -> bool:
        if self.early_exit is not None:
            return False
        if self.returncode == 0:
            return True
        # killed by the first signal we sent, before it could install its handler (still importing): it did stop
        # on it, with nothing to clean up
        return (self.first_signal is not None and self.stop_signal == self.first_signal
                and self.returncode == -signal.Signals[self.first_signal])


@dataclass
class RunResult:
    returncode: int
    reason: str  # why it stopped: "duration", "SIGINT", "SIGTERM", "failure: …"
    children: Dict[str, Optional[int]] = field(default_factory=dict)  # label -> exit code
    recording: Optional[Path] = None
    recorded: Dict[str, int] = field(default_factory=dict)  # topic -> messages
    plots: List[Path] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    log_dir: Optional[Path] = None
    started_at_ns: Optional[int] = None  # simulation or wall time the run proper started
    warnings: List["LogWarning"] = field(default_factory=list)  # what the children's logs warned of


class Runner:
    """Runs one scenario (docs/bringup.md); :meth:`run` returns a :class:`RunResult`."""

    def __init__(self, scenario: Scenario, *, duration: Optional[float] = None, record: Optional[os.PathLike] = None,
                 plot: Optional[os.PathLike] = None, log_dir: Optional[os.PathLike] = None,
                 startup_timeout: float = 60.0, stop_timeout: float = 10.0, out: TextIO = sys.stdout,
                 quiet: bool = False, foxglove: Optional[int] = None):
        self.scenario = scenario
        self.foxglove = foxglove  # port of the Foxglove WebSocket bridge (mbs_ros.bringup.foxglove_bridge), or None
        self.duration = duration if duration is not None else scenario.duration
        self.plot_dir = Path(plot) if plot is not None else None
        if record is None and self.plot_dir is not None:
            record = self.plot_dir / "recording.mcap"
        self.record = Path(record) if record is not None else None
        self.keep_logs = log_dir is not None
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.out = out
        self.quiet = quiet
        self.children: List[Child] = []
        self.recorder: Optional[Child] = None
        self._stop_request: Optional[str] = None
        self._failure: Optional[str] = None
        self.topics = expand_record(scenario, record_topics(scenario)) if self.record is not None else None
        # the reference node waits for every subscriber of its references: the controller, the runner (which learns
        # from them that they are out, and when they start), and the recorder when it records them
        records_refs = self.record is not None and (self.topics is None or any(
            t.endswith(("/joint_reference", "/base_reference")) for t in self.topics))
        self.specs = runner_specs(scenario, reference_subscribers=3 if records_refs else 2, duration=self.duration)
        #: the run's end [ns] when its dynamics nodes pause themselves there (pause_at), and the recorded state topics
        #: a finishing recorder waits for at that stamp (docs/bringup.md, "Life cycle")
        self.end_ns = end_stamp(self.specs) if paused_start(scenario) and self.duration is not None else None
        self.end_topics = (state_topics(scenario, self.topics) if self.end_ns is not None and self.record is not None
                           else [])
        self._finished: Optional[bool] = None  # the recorder finished at the end (True), or was stopped meanwhile
        #: dynamics nodes that start paused (a paused_start scenario, or start_paused in the scenario): resumed once
        #: their controller holds the reference
        self.paused = [sp for sp in self.specs if sp.role == "dynamics" and sp.parameters.get("start_paused") is True]

    # ------------------------------------------------------------------------------------ output

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"bringup: {text}", file=self.out, flush=True)

    # --------------------------------------------------------------------------------------- run

    def run(self) -> RunResult:
        self._t0_wall = time.time()
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"mbs_ros_bringup-{self.scenario.name}-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        previous = self._install_handlers()
        graph = None
        started_at = None
        sim_clock = self.scenario.sim_time and self.duration is not None
        try:
            self.say(f"scenario {self.scenario.name} ({self.scenario.path}): {len(self.scenario.robots)} robot(s), "
                     f"{len(self.specs)} node(s); logs and parameter files in {self.log_dir}")
            graph = _Graph(watch_clock=sim_clock, pause=[_pause_service(sp) for sp in self.paused],
                           references=[t for sp in self.specs if sp.role == "reference" for t in _reference_paths(sp)],
                           diagnostics=[f"{c.namespace}/{c.name}/diagnostics" for c in self.specs
                                        if c.role == "controller" and any(d.robot == c.robot for d in self.paused)])
            if self.record is not None:
                self._start_recorder()
            if self.foxglove is not None:
                self._start_foxglove(self.foxglove)
            # controllers first; each dynamics node once its controller listens (a robot under gravity must not
            # fall while its controller still imports numpy); each reference node once the recorder records its
            # robot's state (so that the recording holds the whole reference)
            for spec in self.specs:
                if spec.role in ("controller", "estimator"):
                    self._start_node(spec)
            for role, ready in (("dynamics", self._wait_for_controller), ("reference", self._wait_for_recorder)):
                for spec in self.specs:
                    if spec.role == role and self._failure is None and self._stop_request is None:
                        if ready(graph, spec):
                            self._start_node(spec)
            if sum(c.spec is not None for c in self.children) == len(self.specs):
                started_at = self._wait_until_running(graph if sim_clock else None, graph)
            if started_at is not None:
                self._run_for(graph if sim_clock else None, started_at)
        except NodeProcessError as e:
            self._fail(str(e))
        finally:
            if graph is not None:
                graph.close()
            self._stop_all()
            self._restore_handlers(previous)
        return self._finish(started_at)

    def _wait(self, ready, what: str) -> bool:
        """Wait until ``ready()``; False if stopped or failed first (a timeout is a failure naming ``what``)."""
        deadline = time.monotonic() + self.startup_timeout
        while not ready():
            self._check_children()
            if self._failure is not None or self._stop_request is not None:
                return False
            if time.monotonic() > deadline:
                self._fail(f"{what} within {self.startup_timeout:g} s")
                return False
            time.sleep(0.05)
        return True

    def _wait_for_controller(self, graph: "_Graph", dynamics: NodeSpec) -> bool:
        """Wait until the robot's controller (if any) subscribes its state (estimate/odom with state_source
        estimate) and its estimator (if any) its IMU (else its encoders)."""
        est = next((s for s in self.specs if s.role == "estimator" and s.robot == dynamics.robot), None)
        if est is not None:
            sensor = est.parameters.get("imu") or est.parameters.get("encoders")
            topic = f"{est.namespace}/sensors/{sensor}"
            if sensor and not self._wait(lambda: graph.subscribed(topic, est.name, est.namespace),
                                         f"{est.label} did not subscribe {topic}"):
                return False
        ctl = next((s for s in self.specs if s.role == "controller" and s.robot == dynamics.robot), None)
        if ctl is None:
            return True
        floating = ctl.parameters.get("base_group", "fixed") != "fixed"
        odom, joints = STATE_TOPICS[ctl.parameters.get("state_source", "truth")]
        topic = f"{ctl.namespace}/{odom}" if floating else f"{ctl.namespace}/{joints}"
        return self._wait(lambda: graph.subscribed(topic, ctl.name, ctl.namespace),
                          f"{ctl.label} did not subscribe {topic}")

    def _wait_for_recorder(self, graph: "_Graph", reference: NodeSpec) -> bool:
        """Wait until the recorder (if any) subscribes the robot's odom and joint_states (those it was asked for),
        as the ROS graph shows."""
        if self.recorder is None:
            return True
        wanted = [f"{reference.namespace}/odom"]
        if reference.parameters.get("joint_names"):
            wanted.append(f"{reference.namespace}/joint_states")
        wanted = [t for t in wanted if self.topics is None or t in self.topics]
        return self._wait(lambda: all(graph.subscribed(t, RECORDER_NAME, "/") for t in wanted),
                          f"the recorder did not record {', '.join(wanted)}")

    def _install_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum, _frame):
            name = signal.Signals(signum).name
            if self._stop_request is None:
                self._stop_request = name
            elif self._stop_request != "escalate":  # a second Ctrl-C: stop harder
                self._stop_request = "escalate"

        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_handlers(previous) -> None:
        for s, h in (previous or {}).items():
            signal.signal(s, h)

    def _start_recorder(self) -> None:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        args = [str(self.record)] + (["--all"] if self.topics is None else ["--topics", *self.topics])
        if self.end_topics:  # asked to finish (SIGUSR2) at the end, it records every state up to the end's stamp
            args += ["--end-time", _seconds(self.end_ns), "--end-topics", *self.end_topics,
                     "--finish-timeout", f"{RECORDER_FINISH_TIMEOUT:g}"]
        proc = NodeProcess(_session_command("mbs_ros.recording"), args=args, name=RECORDER_NAME,
                           log_file=self.log_dir / "recorder.log", label="recorder")
        self.recorder = Child("recorder", proc)
        self.children.append(self.recorder)
        proc.start()
        self.say(f"started recorder (pid {proc.pid}) into {self.record}: "
                 + ("all topics" if self.topics is None else " ".join(self.topics)))

    def _start_foxglove(self, port: int) -> None:
        """The Foxglove WebSocket bridge (:mod:`mbs_ros.bringup.foxglove_bridge`) for the scenario's topics, with
        simulation time under ``sim_time``; it is stopped with the nodes."""
        from mbs_ros.bringup.foxglove_bridge import foxglove_topics

        topics = foxglove_topics(self.scenario)
        params = {"use_sim_time": True} if self.scenario.sim_time else None
        proc = NodeProcess(_session_command("mbs_ros.bringup.foxglove_bridge"), name="foxglove_bridge",
                           args=["--port", str(port), "--topics", *topics], parameters=params,
                           log_file=self.log_dir / "foxglove_bridge.log", label="foxglove_bridge")
        self.children.append(Child("foxglove_bridge", proc))
        proc.start()
        self.say(f"started foxglove_bridge (pid {proc.pid}): ws://localhost:{port} for {len(topics)} topics; in "
                 f"Foxglove or Lichtblick: Open connection > Foxglove WebSocket, layout "
                 f"config/foxglove/{self.scenario.name}.json")

    def _start_node(self, spec: NodeSpec) -> None:
        params = self.log_dir / params_file_name(spec)
        safe = params.name[: -len(".params.yaml")]
        params.write_text(spec.params_yaml())
        env = node_environment(spec.environment)  # those the user has not set (a thread_priority's: mbs_ros.dds)
        proc = NodeProcess(_session_command(spec.module), name=spec.name, namespace=spec.namespace,
                           params_file=params, remappings=dict(spec.remappings),
                           log_file=self.log_dir / f"{safe}.log", label=spec.label, env=env)
        child = Child(spec.label, proc, spec)
        self.children.append(child)
        proc.start()
        self.say(f"started {spec.label} (pid {proc.pid}): "
                 f"{' '.join([f'{k}={v}' for k, v in env.items()] + spec.command(params))}")

    def _check_children(self) -> None:
        for c in self.children:
            rc = c.process.returncode
            if rc is not None and c.early_exit is None:
                c.early_exit = rc
                self._fail(f"{c.label} exited with code {rc} while the scenario was running; the end of its log "
                           f"({c.process.log_path}):\n" + _indent(c.process.log_tail(15)))

    def _fail(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason.splitlines()[0]
        print(f"bringup: error: {reason}", file=sys.stderr, flush=True)

    def _wait_until_running(self, clock: Optional["_Graph"], graph: "_Graph") -> Optional[int]:
        """Wait until the runner has received every reference node's references (and resume the paused dynamics nodes once their
        controllers hold the references); the start time of the run (ns: simulation time with a clock watcher, else
        monotonic wall time), or None if stopped/failed first."""
        refs = [c for c in self.children if c.spec is not None and c.spec.role == "reference"]
        deadline = time.monotonic() + self.startup_timeout

        def waiting() -> List[Child]:
            return [c for c in refs if any(t not in graph.references for t in _reference_paths(c.spec))]

        while True:
            self._check_children()
            if self._failure is not None or self._stop_request is not None:
                return None
            if not waiting():
                break
            if time.monotonic() > deadline:
                late = waiting()
                self._fail(f"no reference received within {self.startup_timeout:g} s from "
                           f"{', '.join(c.label for c in late)}; the end of its log:\n"
                           + _indent(late[0].process.log_tail(10)))
                return None
            time.sleep(0.05)
        if clock is not None:
            while clock.now_ns is None:
                self._check_children()
                if self._failure is not None or self._stop_request is not None:
                    return None
                if time.monotonic() > deadline:
                    self._fail(f"no /clock within {self.startup_timeout:g} s (sim_time: the dynamics node should "
                               "publish it)")
                    return None
                time.sleep(0.02)
            # from the references' own start: the /clock value seen here can lag the state a reference node
            # answered (a backlog of /clock messages when the simulation runs far faster than real time)
            start = max([clock.now_ns] + [graph.references[t] for c in refs for t in _reference_paths(c.spec)])
        if self.paused and not self._resume_paused(graph):
            return None
        if clock is None:
            start = time.monotonic_ns()
        what = "references sent" if refs else "nodes started"
        if self.duration is None:
            self.say(f"running: {what}; Ctrl-C stops")
        else:
            self.say(f"running: {what}; for {self.duration:g} s of "
                     + ("simulation time (/clock)" if clock is not None else "wall-clock time")
                     + (f", to t = {_seconds(self.end_ns)} s where the dynamics nodes pause (pause_at)"
                        if clock is not None and self.end_ns is not None else ""))
        return start

    def _holds_reference(self, dynamics: NodeSpec, graph: "_Graph"):
        """A predicate: the robot's controller holds its reference (or the robot has none), from its
        ``~/diagnostics`` counters: ``installed_<topic>`` >= 1 for each reference topic the scenario gives, and
        ``rejected_<topic>`` 0 (a rejection fails the run)."""
        ctl = next((c for c in self.children if c.spec is not None and c.spec.role == "controller"
                    and c.spec.robot == dynamics.robot), None)
        ref = next((sp for sp in self.specs if sp.role == "reference" and sp.robot == dynamics.robot), None)
        if ctl is None or ref is None:
            return lambda: True
        topics = reference_topics(ref)
        diagnostics = f"{ctl.spec.namespace}/{ctl.spec.name}/diagnostics"

        def held() -> bool:
            values = graph.diagnostics.get(diagnostics, (0, {}))[1]
            rejected = [t for t in topics if values.get(f"rejected_{t}", 0) > 0]
            if rejected:
                self._fail(f"{ctl.label} rejected its {' and '.join(rejected)}; the end of its log "
                           f"({ctl.process.log_path}):\n" + _indent(ctl.process.log_tail(10)))
                return False
            return holds_references(values, topics)

        return held

    def _resume_paused(self, graph: "_Graph") -> bool:
        """Resume every paused dynamics node (``~/pause`` false) once its controller holds the reference; False if
        stopped or failed first."""
        for dyn in self.paused:
            if not self._wait(self._holds_reference(dyn, graph),
                              f"{dyn.namespace.strip('/')}/controller_node did not report holding the reference"):
                return False
        for dyn in self.paused:
            service = _pause_service(dyn)
            future = []

            def resumed() -> bool:
                if not future:
                    f = graph.call_pause(service, False)
                    if f is None:
                        return False
                    future.append(f)
                return future[0].done()

            if not self._wait(resumed, f"no reply of {service}"):
                return False
            response = future[0].result()
            if response is None or not response.success:
                self._fail(f"{service} refused to resume: {getattr(response, 'message', 'no response')}")
                return False
            self.say(f"{dyn.label}: {response.message} (started paused; the controller holds the reference)")
        return True

    def _run_for(self, clock: Optional["_Graph"], start_ns: int) -> None:
        end_ns = None if self.duration is None else start_ns + int(round(self.duration * 1e9))
        if clock is not None and self.end_ns is not None:
            end_ns = self.end_ns  # where the dynamics nodes pause: the /clock stops there (a paused start: t0 = 0)
        while True:
            self._check_children()
            if self._failure is not None or self._stop_request is not None:
                return
            now = clock.now_ns if clock is not None else time.monotonic_ns()
            if end_ns is not None and now is not None and now >= end_ns:
                self._stop_request = "duration"
                return
            time.sleep(0.02)

    # -------------------------------------------------------------------------------------- stop

    def _stop_all(self) -> None:
        reason = self._failure and "failure" or self._stop_request or "end"
        running = [c for c in self.children if c.process.running]
        if running:
            self.say(f"stopping ({reason}): " + ", ".join(c.label for c in running))
        if self.recorder is not None:  # first: its file ends while everything still runs
            if self.end_topics and self._stop_request == "duration" and self._failure is None:
                self._finished = self._finish_recorder()
            sig = signal.SIGTERM if self._stop_request == "SIGTERM" else signal.SIGINT
            self._stop_group([self.recorder], ((sig, max(self.stop_timeout, RECORDER_CLOSE_TIMEOUT)),
                                               (signal.SIGKILL, 5.0)))
        self._stop_group([c for c in self.children if c is not self.recorder])
        for c in self.children:
            c.process.stop()  # closes the log (a no-op signal-wise: it has exited)

    def _finish_recorder(self) -> bool:
        """The run ended at ``end_ns`` (its dynamics nodes paused there): ask the recorder to finish (SIGUSR2), i.e.
        to record on until it has every robot's state stamped ``end_ns`` and then write what its subscriptions hold,
        and wait for it to exit (bounded: its own finish timeout, then the time to close). True when it exited by
        itself; False when a Ctrl-C or SIGTERM came first (it is then stopped at once, as usual) or it did not exit
        in time (a failure naming it)."""
        rec = self.recorder
        if not rec.process.running:
            return False
        self.say(f"recorder: finishing, up to t = {_seconds(self.end_ns)} s on {', '.join(self.end_topics)}")
        rec.process.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + RECORDER_FINISH_TIMEOUT + RECORDER_CLOSE_TIMEOUT
        while rec.process.running:
            if self._stop_request != "duration":  # Ctrl-C or SIGTERM meanwhile: no more waiting for the end
                self.say("recorder: stopped before it finished")
                return False
            if time.monotonic() > deadline:
                self._fail(f"the recorder did not finish within {RECORDER_FINISH_TIMEOUT + RECORDER_CLOSE_TIMEOUT:g} "
                           f"s; the end of its log ({rec.process.log_path}):\n" + _indent(rec.process.log_tail(15)))
                return False
            rec.process.wait(timeout=0.1)
        return True

    def _stop_group(self, group: Sequence[Child], escalation=None) -> None:
        """Stop children at once: the signal the runner got (SIGTERM) or SIGINT, then SIGTERM, then SIGKILL (or
        ``escalation``: (signal, seconds to wait for the exit) pairs)."""
        if escalation is None:
            if self._stop_request == "SIGTERM":
                escalation = ((signal.SIGTERM, self.stop_timeout), (signal.SIGKILL, 5.0))
            elif self._stop_request == "escalate":  # a second Ctrl-C: no more patience
                escalation = ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0))
            else:
                escalation = ((signal.SIGINT, self.stop_timeout), (signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0))
        pending = [c for c in group if c.process.running]
        for sig, timeout in escalation:
            if not pending:
                break
            if sig == signal.SIGKILL:  # where they are stuck, in their logs
                for c in pending:
                    c.process.dump_stacks(wait=0.0)
                    c.dumped = True
                time.sleep(1.0)
            for c in pending:
                c.first_signal = c.first_signal or sig.name
                c.stop_signal = sig.name
                c.process.send_signal(sig)
            deadline = time.monotonic() + timeout
            for c in pending:
                c.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            pending = [c for c in pending if c.process.running]
        for c in group:
            c.returncode = c.process.returncode

    # ------------------------------------------------------------------------------------ result

    def _finish(self, started_at: Optional[int]) -> RunResult:
        result = RunResult(returncode=EXIT_OK, reason=self._failure and f"failure: {self._failure}"
                           or self._stop_request or "end", log_dir=self.log_dir, started_at_ns=started_at)
        failed = []
        for c in self.children:
            result.children[c.label] = c.early_exit if c.early_exit is not None else c.returncode
            if not c.clean:
                failed.append(c)
        for c in failed:
            if c.early_exit is None:  # early exits were reported when they happened
                how = (f"needed {c.stop_signal}" if c.stop_signal != c.first_signal
                       else f"exited with code {c.returncode}")
                self._fail(f"{c.label} {how} when stopped; the end of its log ({c.process.log_path}):\n"
                           + _indent(c.process.log_tail(60 if c.dumped else 15)))
        self.say("exit codes: " + ", ".join(f"{k} {v}" for k, v in result.children.items()))
        self._summarise_warnings(result)
        if self.record is not None:
            result.recording = self.record
            if not self._check_recording(result):
                failed.append(None)
        if self.plot_dir is not None and self.record is not None and self.record.is_file():
            try:
                result.plots, result.notes, warnings = self._plot()
                for warning in warnings:
                    self.say(f"plot: warning: {warning}")
                self.say(f"wrote {len(result.plots)} plots to {self.plot_dir}: "
                         + ", ".join(p.name for p in result.plots))
            except Exception as e:  # noqa: BLE001 - reported, and the run counts as failed
                self._fail(f"plotting {self.record} failed: {type(e).__name__}: {e}")
                failed.append(None)
        if failed or self._failure is not None:
            result.returncode = EXIT_FAILED
            result.reason = f"failure: {self._failure}" if self._failure else result.reason
            print(f"bringup: logs kept in {self.log_dir}", file=sys.stderr, flush=True)
        elif not self.keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            result.log_dir = None
        return result

    def _summarise_warnings(self, result: RunResult) -> None:
        """The children's warnings and errors, one line per distinct one (count, first occurrence, node): the logs
        themselves are deleted after a successful run."""
        result.warnings = warning_summary({c.label: c.process.log_text() for c in self.children})
        if not result.warnings:
            self.say("no warnings in the node logs")
            return
        kept = "kept" if self.keep_logs else "deleted after a successful run (--log-dir keeps them)"
        self.say(f"warnings in the node logs ({kept}): {len(result.warnings)} distinct, "
                 f"{sum(w.count for w in result.warnings)} in all:")
        for w in result.warnings:
            self.say("  " + w.describe(since=getattr(self, "_t0_wall", None)))

    def _plot(self):
        from mbs_ros import plot

        rec = plot.load(self.record, progress="never")
        group = "so3xr3" if any(r.base_group == "so3xr3" for r in self.scenario.robots) else "se3"
        written = plot.plot_recording(rec, self.plot_dir, base_group=group)
        return list(written), list(rec.notes), list(rec.warnings)

    def _check_recording(self, result: RunResult) -> bool:
        """Read the recording back (every record, then its index): report the file's true message count, or
        its damage, loudly, with the command that recovers it. False if it is missing or damaged."""
        from mbs_ros.analysis.mcapfile import NotMcapError, check_file

        if not self.record.is_file():
            self._fail(f"no recording was written to {self.record}")
            return False
        try:
            report = check_file(self.record)
        except NotMcapError as e:
            self._fail(f"the recording {self.record} is unreadable: {e}")
            return False
        result.recorded = dict(report.counts)
        logged = _recorded_counts(self.recorder.process.log_text()) if self.recorder is not None else {}
        if report.damaged:
            self._fail(recording_damage_message(self.record, report))
            return False
        self.say(f"recorded {report.message_count} messages on {len(report.counts)} topics to {self.record} "
                 "(read back: complete)")
        if self._finished:  # the run ended at end_ns: the file must hold every robot's state up to it
            short = {t: report.last_stamps.get(t) for t in self.end_topics
                     if report.last_stamps.get(t, -1) < self.end_ns}
            if short:
                self._fail(f"the recording {self.record} ends before the run's end at t = {_seconds(self.end_ns)} s: "
                           + ", ".join(f"{t} {'has no message' if n is None else 'ends at ' + _seconds(n) + ' s'}"
                                       for t, n in short.items()) + "; the recorder's log says why")
                return False
            self.say(f"the recording reaches the run's end, t = {_seconds(self.end_ns)} s, on "
                     f"{', '.join(self.end_topics)}")
        if logged and sum(logged.values()) != report.message_count:
            self.say(f"note: the recorder reported {sum(logged.values())} messages, the file holds "
                     f"{report.message_count}")
        return True


# ----------------------------------------------------------------------------------------------- CLI


def print_commands(scenario: Scenario, log_dir: Optional[os.PathLike] = None, out: Optional[TextIO] = None,
                   duration: Optional[float] = None) -> Path:
    """``--print``: write the parameter files the runner would write into ``log_dir`` (default: the temporary
    directory's ``mbs_ros_bringup-<scenario>-<hash of the files>``, so the same files land in the same place and
    printing again leaves nothing new behind), and print each node's command line with their absolute paths
    (pasteable, one shell per node, from any directory), each file's content as comments, and for a paused start
    how to resume it. ``duration``: the run's (``--duration``; default the scenario's). Returns the directory."""
    out = sys.stdout if out is None else out
    order = {"controller": 0, "dynamics": 1, "reference": 2}  # the runner's start order
    specs = sorted(runner_specs(scenario, duration=duration), key=lambda sp: order.get(sp.role, 3))
    if log_dir is not None:
        folder = Path(log_dir)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        digest = hashlib.sha256("".join(params_file_name(sp) + sp.params_yaml() for sp in specs).encode())
        folder = Path(tempfile.gettempdir()) / f"mbs_ros_bringup-{scenario.name}-{digest.hexdigest()[:12]}"
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            if folder.is_symlink() or folder.stat().st_uid != os.getuid():
                raise OSError("not ours")
        except OSError:  # someone else's: a fresh one
            folder = Path(tempfile.mkdtemp(prefix=f"mbs_ros_bringup-{scenario.name}-"))
    folder = folder.resolve()
    print(f"# scenario {scenario.name} ({scenario.path}): {len(specs)} node(s); the parameter files are written to "
          f"{folder}; each command below is complete (run each in a shell of its own, in this order)", file=out)
    for spec in specs:
        params = folder / params_file_name(spec)
        params.write_text(spec.params_yaml())
        print(f"\n# {spec.label} ({spec.package} {spec.executable}), parameters in {params}:", file=out)
        for line in spec.params_yaml().splitlines():
            print(f"#   {line}", file=out)
        print(" ".join(spec.command(params)), file=out)
    paused = [sp for sp in specs if sp.role == "dynamics" and sp.parameters.get("start_paused") is True]
    for spec in paused:
        print(f"\n# {spec.label} starts paused at t = 0 (start_paused; lockstep on simulation time: the reference "
              "starts at t = 0, start_time); the runner resumes it once the controller holds the reference "
              "(installed_joint_reference/installed_base_reference on its ~/diagnostics)"
              + (f", and it pauses itself at the run's end, t = {spec.parameters['pause_at']:g} s (pause_at)"
                 if "pause_at" in spec.parameters else "") + ". By hand:", file=out)
        print(f"#   ros2 service call {_pause_service(spec)} std_srvs/srv/SetBool '{{data: false}}'", file=out)
        print(f"#   {sys.executable} -c \"import rclpy; from std_srvs.srv import SetBool; rclpy.init(); "
              f"n = rclpy.create_node('resume'); c = n.create_client(SetBool, '{_pause_service(spec)}'); "
              "c.wait_for_service(); f = c.call_async(SetBool.Request(data=False)); "
              "rclpy.spin_until_future_complete(n, f); print(f.result().message)\"", file=out)
    return folder


def _parse_set(text: str):
    """``KEY=VALUE`` as ``(key, value)`` (:func:`mbs_ros.scenario.overrides.parse_set`); argparse's error otherwise."""
    from mbs_ros.scenario.overrides import parse_set

    try:
        return parse_set(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mbs_ros.bringup",
        description="Run a scenario (config/scenarios/*.yaml) as node processes, without launch: the nodes the "
                    "launch files start, stopped cleanly on Ctrl-C, SIGTERM or --duration; exit code 0 when every "
                    "node ran and stopped cleanly.")
    p.add_argument("scenario", help="a scenario file, or the name of one in config/scenarios (e.g. "
                                    "vehicle_manipulator)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="run S seconds once the references are sent (simulation seconds with sim_time; a lockstep "
                        "run on simulation time ends at exactly t = S, recorded to there); default: the scenario's "
                        "duration, else until Ctrl-C")
    p.add_argument("--record", type=Path, default=None, metavar="FILE",
                   help="record the scenario's topics into this MCAP file (rosbag2 format)")
    p.add_argument("--plot", type=Path, default=None, metavar="DIR",
                   help="afterwards, write PNG plots of the recording into DIR (records into DIR/recording.mcap "
                        "without --record)")
    p.add_argument("--foxglove", type=int, nargs="?", const=8765, default=None, metavar="PORT",
                   help="serve the run live over the Foxglove WebSocket protocol (Foxglove, Lichtblick) on "
                        "ws://localhost:PORT (default 8765); layouts in config/foxglove/")
    p.add_argument("--count", type=int, default=None, metavar="N", help="fleet scenarios: this many robots per "
                                                                        "fleet template")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario setting by key or path, VALUE as YAML, e.g. --set sim_time=true "
                        "--set real_time_factor=2 --set 'robots[0].controller.kp=[4,4,4,4,4,4,16,16,16,16]' "
                        "--set robots[0].dynamics.mass_scale=1.2 (docs/bringup.md)")
    p.add_argument("--log-dir", type=Path, default=None, metavar="DIR",
                   help="keep the nodes' logs and parameter files here (default: a temporary directory, kept only "
                        "on failure)")
    p.add_argument("--startup-timeout", type=float, default=60.0, metavar="S",
                   help="fail if the references are not sent within S seconds (default 60)")
    p.add_argument("--stop-timeout", type=float, default=10.0, metavar="S",
                   help="seconds a child gets to exit after SIGINT before SIGTERM (default 10)")
    p.add_argument("--print", dest="dry_run", action="store_true",
                   help="write the parameter files (into --log-dir, else a directory in the system's temporary "
                        "directory named by the scenario and the files' hash) and print the node command lines with "
                        "their absolute paths; start nothing")
    p.add_argument("--quiet", action="store_true", help="print errors only")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("duration", "startup_timeout", "stop_timeout"):
        v = getattr(args, name)
        if v is not None and not (v > 0 and v <= MAX_SECONDS):
            print(f"bringup: --{name.replace('_', '-')} must be a number of seconds in (0, {MAX_SECONDS:g}], got "
                  f"{v}", file=sys.stderr)
            return EXIT_USAGE
    try:
        sets = dict(_parse_set(item) for item in args.set)
    except argparse.ArgumentTypeError as e:
        print(f"bringup: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        scenario = load_scenario(args.scenario, count=args.count, overrides=sets)
    except ScenarioError as e:
        print(f"bringup: scenario error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.dry_run:
        print_commands(scenario, args.log_dir, duration=args.duration)
        return EXIT_OK
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    dds_defaults()
    runner = Runner(scenario, duration=args.duration, record=args.record, plot=args.plot, log_dir=args.log_dir,
                    startup_timeout=args.startup_timeout, stop_timeout=args.stop_timeout, quiet=args.quiet,
                    foxglove=args.foxglove)
    result = runner.run()
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
