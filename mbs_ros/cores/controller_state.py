"""The controller's state path without ROS: the parts of a state (odom's base, joint_states' joints; with
``state_source: estimate`` the estimator's output as estimate/odom and estimate/joint_states carry it) in, the
controller's ``(t, q, v)`` out, its time base moved on and, for the first state, the start-up holds.

The controller node (:mod:`mbs_ros.nodes.controller_inputs`) calls these with the parts of its messages, the
estimator node (:mod:`mbs_ros.nodes.estimator_node`) publishes :func:`estimate_pose`, and the headless run
(:mod:`mbs_ros.headless.run`) calls the same functions with the dynamics node's state and the estimator's output,
so the conversion exists once. Bounds and time base: docs/controller_node.md.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from mbs_ros.controllers import reference_input as ri
from mbs_ros.cores.controller import hold_references
from mbs_ros.cores.rotations import quaternion_from_matrix

__all__ = ["estimate_pose", "estimate_parts", "commit_state"]


def estimate_pose(out) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What estimate/odom carries of an estimator ``Output``: position, quaternion ``xyzw`` of ``out.R`` and the
    body twist ``[v; ω]``."""
    return out.p, quaternion_from_matrix(out.R), out.V


def estimate_parts(out, joint_names: Sequence[str], est_joint_names: Sequence[str], floating: bool,
                   publishes_joints: bool):
    """The base and joint parts the controller (its ``joint_names``; ``floating`` base) takes from estimate/odom and
    estimate/joint_states carrying ``out`` (the estimator's ``est_joint_names``; ``publishes_joints``: it has an
    encoders role). RuntimeError for a part the estimator does not publish (the controller would wait for it)."""
    base = joints = None
    if floating:
        if out.p is None:
            raise RuntimeError("the estimator gives no base state")
        p, quat, V = estimate_pose(out)
        base = ri.base_state(np.array([float(x) for x in p]), np.array([float(x) for x in quat]),
                             np.array([float(x) for x in V]))
    if joint_names:
        if not publishes_joints or out.joint_positions is None:
            raise RuntimeError("the estimator publishes no joint states (no encoders role)")
        joints = ri.joint_state(tuple(joint_names), est_joint_names, [float(x) for x in out.joint_positions],
                                [float(x) for x in out.joint_velocities])
    return base, joints


def commit_state(timebase, model, t: int, jump: Optional[int], q: np.ndarray, first: bool):
    """An accepted state at ``t`` (``jump``: the new time base's, from ``timebase.step``): the time base moved to
    it; for the ``first`` state the references that hold it until one arrives, ``(base_ref, joint_ref)`` (None
    otherwise)."""
    timebase.commit(t, jump)
    return hold_references(model, q, t - timebase.offset) if first else None
