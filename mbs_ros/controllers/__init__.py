"""ROS-free control laws (computed torque, passivity-based, PD + gravity, LQR) and waypoint references.

Nothing here imports rclpy. Every law works on any model exposing the generic API (a rigid body on any base group,
or a multibody tree on a floating or fixed base)::

    from mbs_ros.controllers import ComputedTorque, Reference
    law = ComputedTorque(model, kp=4.0, kd=4.0)
    ref = Reference(model, times=[0, 2], positions=[q0, q1])
    tau = law(q, v, *ref(t))                    # or law.feedback(ref) -> tau(t, q, v)

The controller node's rules, ROS-free too: :mod:`.reference_input` (input bounds, reference decoding),
:mod:`.timebase` (state pairing, time base), :mod:`.goals` and :mod:`.tolerances` (FollowJointTrajectory),
:mod:`.command` and :mod:`.allocation` (saturation, thrusts).
"""
from .laws import ComputedTorque, PassivityBased, PDGravity, gain_matrix
from .lqr import LQR
from .reference import Reference, stack
from .space import ConfigurationSpace

__all__ = ["ComputedTorque", "PassivityBased", "PDGravity", "LQR", "gain_matrix", "Reference", "stack",
           "ConfigurationSpace"]
