"""ROS-free numerics: Lie groups, rigid-body models and Lie-group integrators.

Nothing here imports rclpy. Public API::

    from mbs_ros.dynamics import Model, simulate, step
    model = Model.rigid_body(base="se3", mass=2.0, inertia=[[...]], com=[0, 0, 0.1])
    t, q, v = simulate(model, model.neutral(), v0, tau, dt=1e-3, steps=1000, method="rk4")

    arm = Model.from_urdf("config/robots/arm_2link_planar.urdf", base="se2")   # or from_xacro / from_yaml
    M, C, g = arm.mass_matrix(q), arm.coriolis_matrix(q, v), arm.gravity_forces(q)
    T_world_links = arm.link_poses(q)                  # (n_links, 4, 4) in arm.link_names order
    W_joints = arm.joint_wrenches(q, v, a)             # (n_joints, 6) [F; τ] in each joint frame

The multibody kernels (RNEA, CRBA, structured Coriolis, forward dynamics) are free functions in
``mbs_ros.dynamics.algorithms.multibody`` taking ``(model, q, v, ...)`` and an optional precomputed ``kin=kinematics(model, q)``
to share one kinematics pass between several kernels at the same q. :class:`Simulator` is the dynamics node's
loop without ROS (held commands and their timeouts, lockstep periods, work and energy).
"""
from mbs_ros.dynamics.simulation.integrators import TABLEAUS, simulate, step
from mbs_ros.dynamics.model.model import BASES, TREE_BASES, Model, ModelError, ModelWarning, spatial_inertia
from mbs_ros.dynamics.simulation.simulator import Simulator

__all__ = ["Model", "ModelError", "ModelWarning", "BASES", "TREE_BASES", "spatial_inertia", "simulate", "step", "TABLEAUS", "Simulator"]
