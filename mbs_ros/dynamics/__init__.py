"""ROS-free numerics: Lie groups, rigid-body models and Lie-group integrators.

Nothing here imports rclpy. Public API::

    from mbs_ros.dynamics import Model, simulate, step
    model = Model.rigid_body(base="se3", mass=2.0, inertia=[[...]], com=[0, 0, 0.1])
    t, q, v = simulate(model, model.neutral(), v0, tau, dt=1e-3, steps=1000, method="rk4")
"""
from .integrators import TABLEAUS, simulate, step
from .model import BASES, TREE_BASES, Model, spatial_inertia

__all__ = ["Model", "BASES", "TREE_BASES", "spatial_inertia", "simulate", "step", "TABLEAUS"]
