"""The simulation loop without ROS: the simulator, its sensor suite and the step grids it stops at.

:class:`SimulationLoop` is the one place a run advances: the dynamics node (:mod:`mbs_ros.nodes.dynamics_node`,
from its timer, a lockstep period or ``~/step``) and the headless run (:mod:`mbs_ros.headless.run`, one lockstep
period at a time) both iterate :meth:`SimulationLoop.stops`, which takes the physics steps to the next stop (a
publication grid the caller names, ``pause_at``, a sensor's sample or a delayed reading falling due, the end),
samples the sensors there and hands each reading due to ``on_reading`` (the node publishes it, the headless run
feeds the estimator) before the caller does what falls due at that step. :meth:`SimulationLoop.period` is a lockstep
control period: the commands taken, then its ``lockstep_steps`` steps. Stepping and publication order:
docs/dynamics_node.md, "Sensors" and "Lockstep".
"""
from __future__ import annotations

import time
from typing import Callable, Iterator, Optional, Sequence

__all__ = ["SimulationLoop", "on_grid", "crossed"]


def on_grid(k: int, every: int) -> bool:
    """Is step ``k`` on the grid of ``every`` steps (0: never)?"""
    return bool(every) and k % every == 0


def crossed(k0: int, k1: int, every: int) -> bool:
    """Did the steps from ``k0`` to ``k1`` cross the grid of ``every`` steps (0: never)?"""
    return bool(every) and k1 // every > k0 // every


def _no_grids() -> Sequence[int]:
    return ()


class SimulationLoop:
    """``sim`` a :class:`~mbs_ros.dynamics.simulation.simulator.Simulator`; ``suite`` its
    :class:`~mbs_ros.sensors.suite.SensorSuite` (None: no sensors), sampled on each sensor's own grid whatever the
    caller publishes (so the random streams are the same in every run of the same seeds); ``on_reading(reading)``
    receives each reading as it falls due, in (step, sensor) order."""

    def __init__(self, sim, suite=None, on_reading: Optional[Callable] = None):
        self.sim = sim
        self.suite = suite
        self.on_reading = on_reading

    def sensors_step(self) -> None:
        """At the current step: sample the sensors whose grid it is on (once per step: the suite remembers the step
        it sampled), then hand over every reading due by now."""
        suite, sim = self.suite, self.sim
        if suite is None:
            return
        suite.sample(sim)
        readings = suite.due(sim.k)
        if self.on_reading is not None:
            for reading in readings:
                self.on_reading(reading)

    def next_stop(self, k: int, end: int, grids: Sequence[int] = (), pause_k: Optional[int] = None) -> int:
        """The first step after ``k``, at most ``end``, on one of ``grids`` (steps between stops), at ``pause_k``,
        or where a sensor samples or a delayed reading falls due."""
        nxt = min([end] + [(k // every + 1) * every for every in grids])
        if pause_k is not None and k < pause_k < nxt:
            nxt = pause_k
        if self.suite is not None:
            nxt = min(nxt, self.suite.next_stop(k))
        return nxt

    def stops(self, steps: int, grids: Callable[[], Sequence[int]] = _no_grids, pause_k: Optional[int] = None,
              deadline_ns: Optional[int] = None) -> Iterator[int]:
        """Take up to ``steps`` physics steps, yielding the step ``k`` of each stop once its readings are handed
        over (the caller then publishes what falls due at ``k``). ``grids()`` is asked before each stretch (the
        caller's publication grids may change with its subscribers). Ends early when the simulation pauses, at a
        new fault (the caller reads ``sim.fault``: nothing of that step is handed over), or after a stop past
        ``deadline_ns`` (monotonic clock; :meth:`Simulator.advance` may also return early there)."""
        sim = self.sim
        end = sim.k + steps
        if self.suite is not None and sim.k < end and not sim.paused:
            self.sensors_step()  # the state the steps start from (the first after start-up or a reset)
        while sim.k < end and not sim.paused:
            k = sim.k
            fault = sim.fault
            sim.advance(self.next_stop(k, end, grids(), pause_k) - k, deadline_ns)
            if sim.fault is not None and sim.fault is not fault:
                return
            self.sensors_step()  # readings due now, before the state of the same step
            yield sim.k
            if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
                return

    def run(self, steps: int, **kwargs) -> int:
        """:meth:`stops` with nothing to do at them; the steps taken."""
        k0 = self.sim.k
        for _k in self.stops(steps, **kwargs):
            pass
        return self.sim.k - k0

    def period(self, grids: Callable[[], Sequence[int]] = _no_grids, pause_k: Optional[int] = None) -> Iterator[int]:
        """Lockstep: the control period whose commands are all here (``Simulator.start_period``), its
        ``lockstep_steps`` steps as :meth:`stops`; nothing when the period cannot start (paused, a command
        missing: see ``sim.missing()``)."""
        if not self.sim.start_period():
            return iter(())
        return self.stops(self.sim.lockstep_steps, grids, pause_k)
