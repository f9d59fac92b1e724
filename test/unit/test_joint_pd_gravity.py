"""The legged robots' stand law (JointPDGravity) against closed forms: a one-joint arm whose link's centre of mass
sits 0.5 m out along x, rotating about y, has ``g(q) = −m g L cos q``; the law gives ``k_p (q_d − q) + k_d (v_d −
v) + g(q)`` on the joint and nothing on a floating base, whatever the base's pose and twist."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.controllers import JointPDGravity
from mbs_ros.dynamics import Model

G, L, MASS = 9.81, 0.5, 1.0
ARM = """<robot name="one"><link name="base"><inertial><mass value="3"/><inertia ixx="0.1" iyy="0.1" izz="0.1"
  ixy="0" ixz="0" iyz="0"/></inertial></link><link name="arm"><inertial><origin xyz="0.5 0 0"/>
  <mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
  <limit lower="-2" upper="2" effort="100" velocity="10"/></joint></robot>"""


def _closed_form(q, v, q_d, v_d, kp, kd):
    return kp * (q_d - q) + kd * (v_d - v) - MASS * G * L * math.cos(q)


@pytest.mark.parametrize("q, v, q_d, v_d", [(0.2, 0.1, 0.5, 0.0), (-1.1, -0.7, 0.3, 0.4), (0.0, 0.0, 0.0, 0.0)])
def test_fixed_base_arm(q, v, q_d, v_d):
    model = Model.from_urdf(ARM, base="fixed", gravity=(0.0, 0.0, -G))
    law = JointPDGravity(model, kp=10.0, kd=2.0)
    tau = law(np.array([q]), np.array([v]), np.array([q_d]), np.array([v_d]))
    assert tau == pytest.approx([_closed_form(q, v, q_d, v_d, 10.0, 2.0)], abs=1e-12)


def test_floating_base_the_base_is_not_actuated_and_the_joint_is_the_closed_form():
    model = Model.from_urdf(ARM, base="se3", gravity=(0.0, 0.0, -G))
    q, v, q_d, v_d = 0.4, -0.3, -0.2, 0.1
    # the base at a height, level, moving: its pose and twist enter neither row
    base = np.array([1.0, -2.0, 0.3, 0.0, 0.0, math.sin(0.35), math.cos(0.35)])  # yawed 0.7 rad about z
    qq = np.concatenate([base, [q]])
    qd = np.concatenate([np.array([5.0, 5.0, 5.0, 0.0, 0.0, 0.0, 1.0]), [q_d]])  # a base reference: ignored
    vv = np.array([0.2, 0.1, -0.3, 0.0, 0.0, 0.5, v])
    vd = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, v_d])
    law = JointPDGravity(model, kp=[9.0] * 6 + [10.0], kd=2.0)  # nv gains: the base entries ignored
    tau = law(qq, vv, qd, vd)
    assert np.all(tau[:6] == 0.0)
    assert tau[6] == pytest.approx(_closed_form(q, v, q_d, v_d, 10.0, 2.0), abs=1e-12)


def test_gains_per_joint_and_bad_gains_refused():
    model = Model.from_urdf(ARM, base="se3", gravity=(0.0, 0.0, -G))
    assert JointPDGravity(model, kp=[10.0], kd=[2.0]).kp[0, 0] == 10.0
    with pytest.raises(ValueError, match="kp"):
        JointPDGravity(model, kp=-1.0, kd=2.0)
    with pytest.raises(ValueError, match="kd"):
        JointPDGravity(model, kp=1.0, kd=[1.0, 2.0])
    with pytest.raises(ValueError, match="joints"):
        JointPDGravity(Model.rigid_body("se3", 1.0, np.eye(3)), kp=1.0, kd=1.0)
