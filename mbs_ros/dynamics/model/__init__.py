"""The model and where it comes from: :class:`Model` (:mod:`~mbs_ros.dynamics.model.model`, its build checks in
:mod:`~mbs_ros.dynamics.model.checks`), the kinematic tree (:mod:`~mbs_ros.dynamics.model.tree`), URDF/xacro
(:mod:`~mbs_ros.dynamics.model.urdf`), the robot YAML (:mod:`~mbs_ros.dynamics.model.robot_yaml`), mimic joints
(:mod:`~mbs_ros.dynamics.model.mimic`), the passive elements (:mod:`~mbs_ros.dynamics.model.passive`: water,
springs, friction, thrusters) and a node's model source (:mod:`~mbs_ros.dynamics.model.source`).
"""
from mbs_ros.dynamics.model.model import (BASES, TREE_BASES, Model, ModelError, ModelWarning,  # noqa: F401
                                          spatial_inertia)

__all__ = ["Model", "ModelError", "ModelWarning", "BASES", "TREE_BASES", "spatial_inertia"]
