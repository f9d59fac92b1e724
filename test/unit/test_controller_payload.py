"""The payload in the controller's model (controller parameters payload_mass, payload_inertia, payload_com,
payload_link; mbs_ros.cores.controller.law_for): computed torque at the reference state is the inverse dynamics
``τ = RNEA(q, v, a_d)`` of the robot holding the payload, against Pinocchio's with the payload appended to the
link's joint as its own body (pin.appendBodyToJoint); in the model only while the gripper holds it."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.cores.controller import controller_setup, law_command, law_for
from mbs_ros.cores.parameters import table
from mbs_ros.dynamics.model import source as ms

pin = pytest.importorskip("pinocchio")

INERTIAL = '<inertial><origin xyz="{c} 0 0"/><mass value="{m}"/><inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ' \
           'ixz="0" iyz="0"/></inertial>'
URDF = f"""<robot name="two"><link name="base"/>
  <link name="upper">{INERTIAL.format(c=0.2, m=1.5, i=0.02)}</link>
  <link name="lower">{INERTIAL.format(c=0.15, m=0.8, i=0.01)}</link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="100" velocity="10"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="0.4 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="100" velocity="10"/></joint>
</robot>"""
MASS, COM, PRINCIPAL = 0.7, (0.3, 0.01, -0.02), (1e-3, 2e-3, 3e-3)


def _setup(tmp_path, **changes):
    path = tmp_path / "two.urdf"
    path.write_text(URDF)
    source = ms.load_source("", str(path))
    values = {n: p.default for n, p in table("controller").items()}
    values.update(base_group="fixed", base_frame="base", gravity=(0.0, 0.0, -9.81), payload_mass=MASS, payload_link="lower",
                  payload_com=COM, payload_inertia=PRINCIPAL, kp=9.0, kd=6.0, compensate_passive=False)
    values.update(changes)
    return controller_setup(values, source)


def _pinocchio_with_payload():
    model = pin.buildModelFromXML(URDF)
    model.gravity.linear = np.array([0.0, 0.0, -9.81])
    joint = model.getJointId("elbow")
    placement = pin.SE3(np.eye(3), np.array(COM))
    model.appendBodyToJoint(joint, pin.Inertia(MASS, np.zeros(3), np.diag(PRINCIPAL)), placement)
    return model


def test_computed_torque_with_the_payload_is_the_inverse_dynamics_of_the_arm_holding_it(tmp_path):
    setup = _setup(tmp_path)
    model, law = law_for(setup, 0)  # no gripper: the payload is always in the model
    assert model is setup.payload[0]
    pm = _pinocchio_with_payload()
    data = pm.createData()
    rng = np.random.default_rng(7)
    for _ in range(5):
        q, v, a = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
        tau = law_command(law, model, False, q, v, q, v, a)
        expected = pin.rnea(pm, data, q, v, a)
        np.testing.assert_allclose(tau, expected, rtol=1e-12, atol=1e-12)
        bare = law_command(setup.law, setup.model, False, q, v, q, v, a)
        assert np.abs(bare - expected).max() > 0.1  # the robot's own model does not hold it


def test_the_payload_is_in_the_model_only_while_the_gripper_holds_it(tmp_path):
    setup = _setup(tmp_path, gripper_joints=("elbow",), gripper_times=(0.0, 1.0, 3.0),
                   gripper_positions=(0.5, -0.5, 0.5), gripper_speed=1.0)
    assert law_for(setup, int(0.5e9))[0] is setup.model          # open
    assert law_for(setup, int(1.5e9))[0] is setup.model          # closing: the target on its way (1 s to -0.5)
    assert law_for(setup, int(2.5e9))[0] is setup.payload[0]     # closed: the target arrived below the open one
    assert law_for(setup, int(3.5e9))[0] is setup.model          # opening
    assert law_for(setup, int(5.0e9))[0] is setup.model          # open again


def test_a_payload_without_its_link_is_refused(tmp_path):
    from mbs_ros.cores.controller_settings import ParameterError

    with pytest.raises(ParameterError, match="payload_link"):
        _setup(tmp_path, payload_link="")
    with pytest.raises(ParameterError, match="payload_link"):
        _setup(tmp_path, payload_link="hand")
