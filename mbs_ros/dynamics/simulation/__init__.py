"""Simulation without ROS: the :class:`~mbs_ros.dynamics.simulation.simulator.Simulator` (held commands, lockstep
periods in :mod:`~mbs_ros.dynamics.simulation.lockstep`, outputs of a state, the physics-rate check, faults, work
and energy), the Lie-group integrators (:mod:`~mbs_ros.dynamics.simulation.integrators`) and the actuator limits
(:mod:`~mbs_ros.dynamics.simulation.actuators`).
"""
from mbs_ros.dynamics.simulation.simulator import Simulator, WrenchCommand  # noqa: F401

__all__ = ["Simulator", "WrenchCommand"]
