"""ROS-free control laws (computed torque, passivity-based, PD + gravity, joint-space PD + gravity, LQR) and waypoint
references.

Nothing here imports rclpy. Every law works on any model exposing the generic API (a rigid body on any base group,
or a multibody tree on a floating or fixed base)::

    from mbs_ros.controllers import ComputedTorque, Reference
    law = ComputedTorque(model, kp=4.0, kd=4.0)
    ref = Reference(model, times=[0, 2], positions=[q0, q1])
    tau = law(q, v, *ref(t))                    # or law.feedback(ref) -> tau(t, q, v)

The controller node's rules, ROS-free too: :mod:`mbs_ros.controllers.reference_input` (input bounds, reference decoding),
:mod:`mbs_ros.controllers.timebase` (state pairing, time base), :mod:`mbs_ros.controllers.goals` and :mod:`mbs_ros.controllers.tolerances` (FollowJointTrajectory),
:mod:`mbs_ros.controllers.command` and :mod:`mbs_ros.controllers.allocation` (saturation, thrusts).
"""
from mbs_ros.controllers.laws import ComputedTorque, JointPDGravity, PassivityBased, PDGravity, gain_matrix
from mbs_ros.controllers.lqr import LQR
from mbs_ros.controllers.reference import Reference, stack
from mbs_ros.controllers.space import ConfigurationSpace

__all__ = ["ComputedTorque", "PassivityBased", "PDGravity", "JointPDGravity", "LQR", "gain_matrix", "Reference",
           "stack", "ConfigurationSpace"]
