"""What a bring-up run starts and checks, ROS-free: the nodes' specs as the runner starts them (a paused start's
parameters, the end stamp), the topics it waits for, the distinct warnings of the children's logs, the
recorder's counts and the message for a damaged recording. Used by :mod:`mbs_ros.bringup.runner`."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from mbs_ros.scenario.schema import NodeSpec, Scenario, node_specs


@dataclass
class LogWarning:
    """One distinct warning (or error) of a child's log: the numbers in its text do not make it distinct."""

    node: str  # the child's label (arm/dynamics_node, recorder)
    level: str  # WARN | ERROR | FATAL
    first: str  # the message of the first occurrence
    first_time: Optional[float]  # its wall time (s since the epoch), from the log line
    lines: int = 0  # log lines
    count: int = 0  # occurrences: the lines, and those a rate-limited line says it held back

    def describe(self, since: Optional[float] = None, width: int = 240) -> str:
        when = (f", first at +{self.first_time - since:.1f} s" if since is not None and self.first_time is not None
                else "")
        text = self.first if len(self.first) <= width else self.first[: width - 3] + "..."
        return f"{self.node}: {self.count} x {self.level}{when}: {text}"


# a node's log line at WARN or above (rcutils' default format), and the count a rate-limited line appends
_LOG_LINE = re.compile(r"^\[(WARN|ERROR|FATAL)\] \[(\d+(?:\.\d+)?)\] \[[^\]]*\]: (.*)$")
_HELD_BACK = re.compile(r" \((\d+) more like this since the last one\)$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def warning_summary(logs: Dict[str, str]) -> List[LogWarning]:
    """The distinct warnings and errors of node logs (``{label: log text}``), in order of first occurrence: lines
    at WARN, ERROR or FATAL whose messages agree once every number is replaced (``falling behind the wall clock by
    0.061 s`` and ``... by 0.2 s`` are one warning), counted with the occurrences a rate-limited line says it held
    back (``(N more like this since the last one)``)."""
    found: Dict[tuple, LogWarning] = {}
    for label, text in logs.items():
        for line in text.splitlines():
            m = _LOG_LINE.match(line)
            if m is None:
                continue
            level, stamp, message = m.groups()
            held = _HELD_BACK.search(message)
            if held is not None:
                message = message[: held.start()]
            key = (label, level, _NUMBER.sub("#", message))
            w = found.get(key)
            if w is None:
                w = found[key] = LogWarning(label, level, message, float(stamp))
            w.lines += 1
            w.count += 1 + (int(held.group(1)) if held is not None else 0)
    return sorted(found.values(), key=lambda w: (w.first_time is None, w.first_time or 0.0))


def _session_command(module: str) -> object:
    """``python -m module`` in a new session (``setsid``), so that a terminal's Ctrl-C, which goes to the whole
    foreground process group, reaches the runner only: a second SIGINT, the runner's, would kill an rclpy node
    that is shutting down. Without ``setsid`` (not Linux), plain ``python -m``."""
    setsid = shutil.which("setsid")
    return [setsid, sys.executable, "-m", module] if setsid else module


def paused_start(scenario: Scenario) -> bool:
    """Whether the runner starts this scenario paused at t = 0: a lockstep run on simulation time, which two runs
    record bit-identically (docs/bringup.md, "Reproducible runs")."""
    return scenario.lockstep and scenario.sim_time


def runner_specs(scenario: Scenario, *, reference_subscribers: int = 1,
                 duration: Optional[float] = None) -> List[NodeSpec]:
    """The node specs the runner starts: :func:`mbs_ros.bringup.node_specs` (what the launch files start), and for
    a :func:`paused_start` scenario every dynamics node with ``start_paused: true`` and, given the run's
    ``duration`` (default: the scenario's), ``pause_at: duration``, where the run ends (t0 = 0), and every reference
    node with ``start_time: 0.0``."""
    specs = node_specs(scenario, reference_subscribers=reference_subscribers)
    if not paused_start(scenario):
        return specs
    duration = scenario.duration if duration is None else duration
    dynamics = {"start_paused": True, **({"pause_at": float(duration)} if duration is not None else {})}
    extra = {"dynamics": dynamics, "reference": {"start_time": 0.0}}
    return [replace(s, parameters={**s.parameters, **extra.get(s.role, {})}) for s in specs]


def end_stamp(specs: Sequence[NodeSpec]) -> Optional[int]:
    """The stamp [ns] at which a run of these specs ends, when its dynamics nodes pause themselves there
    (``pause_at`` on simulation time from t0 = 0: :func:`runner_specs`), else None."""
    ends = {sp.parameters.get("pause_at") for sp in specs if sp.role == "dynamics"}
    if len(ends) != 1 or not isinstance(next(iter(ends)), float) or not next(iter(ends)) > 0:
        return None
    return int(round(next(iter(ends)) * 1e9))


def state_topics(scenario: Scenario, topics: Optional[Sequence[str]]) -> List[str]:
    """The robots' state topics among the recorded ``topics`` (None: all): every robot's odom, and joint_states when
    it has joints; with an estimator in the loop also its estimate/odom and estimate/joint_states. Each is
    published once per control period in lockstep, stamped."""
    out = []
    for robot in scenario.robots:
        ns = "/" + robot.namespace.strip("/")
        kinds = ["odom"] + (["joint_states"] if robot.joint_names else [])
        if robot.estimator:
            kinds += (["estimate/odom"] if robot.floating else []) + (["estimate/joint_states"]
                                                                       if robot.joint_names else [])
        out += [f"{ns}/{k}" for k in kinds]
    return [t for t in out if topics is None or t in topics]


def params_file_name(spec: NodeSpec) -> str:
    """The name of a node's parameter file in the log directory (``uvms_dynamics_node.params.yaml``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.label).strip("_") + ".params.yaml"


def _reference_paths(reference: NodeSpec) -> List[str]:
    """The absolute names of a reference node's topics."""
    return [f"{reference.namespace.rstrip('/')}/{t}" for t in reference_topics(reference)]


def reference_topics(reference: NodeSpec) -> List[str]:
    """The reference topics a reference node's parameters give: ``joint_reference`` with ``joint_times``,
    ``base_reference`` with ``base_times``."""
    return [t for t, key in (("joint_reference", "joint_times"), ("base_reference", "base_times"))
            if key in reference.parameters]


def holds_references(values: Dict[str, object], topics: Sequence[str]) -> bool:
    """Whether a controller's ``~/diagnostics`` values (``{key: value}``) count every topic of ``topics`` as
    installed: ``installed_<topic>`` >= 1 (a reference the controller received but did not install yet, or a
    status without the counter, does not count)."""
    def counted(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1

    return all(counted(values.get(f"installed_{t}")) for t in topics)


def _pause_service(dynamics: NodeSpec) -> str:
    return f"{dynamics.namespace.rstrip('/')}/{dynamics.name}/pause"


def recording_damage_message(path: Path, report) -> str:
    """The runner's error for a damaged recording (a :class:`mbs_ros.recording.FileReport`)."""
    target = path.with_name(f"{path.stem}.recovered{path.suffix or '.mcap'}")
    return (f"the recording {path} is DAMAGED: {report.describe()}. ros2 bag, mcap and rosbags will not read it "
            f"as it is; its {report.message_count} complete messages on {len(report.counts)} topics can be "
            f"recovered with:\n    python -m mbs_ros.recording recover {path} {target}")


def _seconds(ns: int) -> str:
    """A stamp [ns] as seconds, exactly: ``2.500000000``."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _recorded_counts(log: str) -> Dict[str, int]:
    """topic -> count from the recorder's closing summary (``wrote N messages on M topics to F`` + lines)."""
    counts: Dict[str, int] = {}
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("wrote ") and " messages on " in line:
            for follow in lines[i + 1:]:
                m = re.match(r"^\s+(/\S+): (\d+)$", follow)
                if not m:
                    break
                counts[m.group(1)] = int(m.group(2))
    return counts
