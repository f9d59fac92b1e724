"""Locked joints (issue 10), as Pinocchio's ``buildReducedModel``: ``Model.from_urdf(..., locked_joints={name:
position})`` makes each named joint a fixed joint at that position, before the singular-mass-matrix checks, so a
robot with a massless hand loads once the hand is locked; the nodes take it as two parallel parameters.

Checked here: against ``pinocchio.buildReducedModel`` on TALOS (grippers locked, fixed and free-flying base),
Panda (fingers locked), Romeo (refused for its massless hands until the joints its error names are locked) and
iCub (neck locked) — M, C v + g, RNEA and forward dynamics at random states to 1e-9 relative, both backends; a
two-link arm whose locked elbow gives M in closed form; the ModelErrors of bad locks; the singular-joint error's
``locked_joints`` suggestion; and the dynamics and controller nodes started with the parameters in real processes.
The agreement figures, printed by each case: ``python -m pytest -q -s test/ros/test_locked_joints.py -k pinocchio``.
"""
import ast
import math
import re
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, ModelError
from mbs_ros.dynamics.model import source as ms

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # test/unit's shared helpers
from process_helpers import run_to_exit  # noqa: E402
import urdf_text  # noqa: E402
from urdf_text import joint, robot  # noqa: E402


def link(name, mass=None, izz=0.02, xyz="0 0 0"):
    return urdf_text.link(name, mass, f'ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="{izz!r}"', xyz)


# Two links on z axes: l1 (m1, c.o.m. a out, izz1) at j1, l2 (m2, c.o.m. b out, izz2) at j2, L out on l1.
M1, A, IZZ1, L, M2, B, IZZ2 = 1.5, 0.25, 0.03, 0.6, 0.8, 0.2, 0.01


def two_link(j2_type="revolute", j2_axis="0 0 1", j2_limit='lower="-2" upper="2" effort="10" velocity="3"'):
    return robot(link("base_link", 5.0), link("l1", M1, IZZ1, xyz=f"{A} 0 0"), link("l2", M2, IZZ2, xyz=f"{B} 0 0"),
                 joint("j1", "base_link", "l1"),
                 joint("j2", "l1", "l2", j2_type, axis=j2_axis, xyz=f"{L} 0 0", limit=j2_limit))


def massless_hand():
    """An arm (j1 -> l1, 1 kg) carrying a 'hand' whose two joints move links without <inertial>."""
    return robot(link("base_link", 5.0), link("l1", 1.0, xyz="0.25 0 0"), link("palm"), link("finger"),
                 joint("j1", "base_link", "l1"),
                 joint("wrist", "l1", "palm", axis="1 0 0", xyz="0.5 0 0", limit='lower="0.2" upper="1" '
                       'effort="1" velocity="1"'),
                 joint("finger_joint", "palm", "finger", xyz="0.05 0 0"))


# --------------------------------------------------------------------------- closed form
@pytest.mark.parametrize("theta", [0.0, 0.7, -1.9])
def test_a_locked_elbow_gives_the_closed_form_mass_matrix(theta):
    """j2 locked at θ: one rigid body about j1, M = izz1 + m1 a² + izz2 + m2 |(L + b cos θ, b sin θ)|², which is
    also M₁₁ of the unlocked arm with j2 at θ; gravity along z acts on no joint of z axes, so tilt the arm."""
    model = Model.from_urdf(two_link(), locked_joints={"j2": theta})
    assert (model.joint_names, model.nq, model.nv) == (("j1",), 1, 1)
    assert dict(model.locked_joints) == {"j2": theta}
    expected = IZZ1 + M1 * A**2 + IZZ2 + M2 * (L**2 + B**2 + 2 * L * B * math.cos(theta))
    full = Model.from_urdf(two_link())
    for m in (model, model.with_backend("numpy")):
        for q1 in (0.0, 1.1):
            assert m.mass_matrix(np.array([q1]))[0, 0] == pytest.approx(expected, rel=1e-14)
            assert m.mass_matrix(np.array([q1]))[0, 0] == pytest.approx(
                full.mass_matrix(np.array([q1, theta]))[0, 0], rel=1e-14)
    # the locked child's frame moved with the lock: l2 at the elbow, rotated by θ about z
    pose = model.link_pose_dict(np.array([0.0]))["l2"]
    np.testing.assert_allclose(pose, full.link_pose_dict(np.array([0.0, theta]))["l2"], atol=1e-15)
    # sideways gravity: the locked arm's g is the first entry of the full arm's
    side = Model.from_urdf(two_link(), gravity=(0.0, -9.81, 0.0), locked_joints={"j2": theta})
    side_full = Model.from_urdf(two_link(), gravity=(0.0, -9.81, 0.0))
    assert side.gravity_forces(np.array([0.3]))[0] == pytest.approx(
        side_full.gravity_forces(np.array([0.3, theta]))[0], rel=1e-13)


def test_a_locked_prismatic_joint_moves_its_child_along_the_axis():
    d = 0.15
    model = Model.from_urdf(two_link("prismatic", "1 0 0", 'lower="0" upper="0.3" effort="10" velocity="1"'),
                            locked_joints={"j2": d})
    expected = IZZ1 + M1 * A**2 + IZZ2 + M2 * (L + d + B) ** 2
    assert model.mass_matrix(np.zeros(1))[0, 0] == pytest.approx(expected, rel=1e-14)


def test_a_continuous_joint_locks_at_any_angle_and_xacro_yaml_take_the_argument(tmp_path):
    urdf = two_link("continuous", j2_limit='effort="1" velocity="1"')
    model = Model.from_urdf(urdf, locked_joints={"j2": 7.0})
    expected = IZZ1 + M1 * A**2 + IZZ2 + M2 * (L**2 + B**2 + 2 * L * B * math.cos(7.0))
    assert model.mass_matrix(np.zeros(1))[0, 0] == pytest.approx(expected, rel=1e-13)
    path = tmp_path / "arm.urdf.xacro"
    path.write_text(urdf)
    assert Model.from_xacro(path, locked_joints={"j2": 7.0}).joint_names == ("j1",)
    assert Model.from_urdf(urdf).locked_joints == {}  # nothing locked: empty
    yaml_path = tmp_path / "arm.yaml"
    yaml_path.write_text("robot:\n  links:\n    - {name: base_link, mass: 1.0, inertia: [1, 0, 0, 1, 0, 1]}\n"
                         "    - {name: l1, mass: 1.0, inertia: [1, 0, 0, 1, 0, 1]}\n    - {name: tip}\n  joints:\n"
                         "    - {name: j1, type: revolute, parent: base_link, child: l1, axis: [0, 0, 1]}\n"
                         "    - {name: j2, type: revolute, parent: l1, child: tip, axis: [0, 0, 1]}\n")
    with pytest.raises(ModelError, match="locked_joints=\\{'j2'"):
        Model.from_yaml(yaml_path)
    assert Model.from_yaml(yaml_path, locked_joints={"j2": 0.1}).joint_names == ("j1",)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("locked,match", [
    ({"nope": 0.0}, r"no joint 'nope'.*'j1', 'j2'"),
    ({"fixed_tip": 0.0}, r"joint 'fixed_tip' is a fixed joint already"),
    ({"j2": math.nan}, r"position of joint 'j2' must be finite"),
    ({"j2": math.inf}, r"position of joint 'j2' must be finite"),
    ({"j2": "x"}, r"position of joint 'j2' is not a number"),
    ({"j2": 2.5}, r"position 2.5 rad of joint 'j2' is outside its <limit> range \[-2.0, 2.0\]"),
    ({"j1": -2.01}, r"joint 'j1' is outside"),
])
def test_bad_locks_are_model_errors_naming_the_joint(locked, match, tmp_path):
    urdf = two_link().replace("</robot>", link("tip", 0.1) + joint("fixed_tip", "l2", "tip", "fixed") + "</robot>")
    with pytest.raises(ModelError, match=match) as info:
        Model.from_urdf(urdf, locked_joints=locked)
    assert info.value.joint == next(iter(locked))
    path = tmp_path / "arm.urdf"
    path.write_text(urdf)
    with pytest.raises(ModelError) as info:
        Model.from_urdf(path, locked_joints=locked)
    assert str(info.value).startswith(f"{path}: ")
    with pytest.raises(ModelError, match="must be a mapping"):
        Model.from_urdf(urdf, locked_joints=["j2"])


def test_the_singular_joint_error_suggests_the_locks_that_load_the_robot():
    """A massless hand: the error names every joint of it in a locked_joints dict (at 0, or the end of the
    range nearer 0: the wrist's range is [0.2, 1]), and that dict loads the robot."""
    urdf = massless_hand()
    with pytest.raises(ModelError) as info:
        Model.from_urdf(urdf)
    message = str(info.value)
    assert info.value.joint == "finger_joint"
    assert "locked_joints={'finger_joint': 0.0, 'wrist': 0.2}" in message or \
        "locked_joints={'wrist': 0.2, 'finger_joint': 0.0}" in message, message
    assert "Model.from_urdf" in message and "locked_joints parameter" in message
    locked = ast.literal_eval(re.search(r"locked_joints=(\{.*?\})", message).group(1))
    model = Model.from_urdf(urdf, locked_joints=locked)
    assert model.joint_names == ("j1",) and set(model.locked_joints) == {"wrist", "finger_joint"}
    # a lock of one hand joint only still refuses, naming the other
    with pytest.raises(ModelError, match="locked_joints=\\{'wrist': 0.2\\}"):
        Model.from_urdf(urdf, locked_joints={"finger_joint": 0.3})


def test_a_node_source_builds_with_locked_joints_and_refuses_unknown_ones():
    source = ms.load_source(massless_hand(), "")
    model = ms.build_multibody(source, "fixed", (0, 0, -9.81), locked_joints={"wrist": 0.5, "finger_joint": 0.0})
    assert model.joint_names == ("j1",)
    with pytest.raises(ms.ParameterError, match="'thumb'"):
        ms.build_multibody(source, "fixed", (0, 0, -9.81), locked_joints={"thumb": 0.0})
    with pytest.raises(ms.ParameterError, match="locked_joints"):
        ms.build_multibody(source, "fixed", (0, 0, -9.81))


# --------------------------------------------------------------------------- against Pinocchio
pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference")
REL = 1e-9


def _robot(relpath):
    from test_example_robot_data import ROBOTS  # noqa: PLC0415 - skips the module when not installed

    return ROBOTS / relpath


def _suggested(path):
    """The locked_joints the refusal of ``path`` suggests."""
    with pytest.raises(ModelError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Model.from_urdf(str(path))
    return ast.literal_eval(re.search(r"locked_joints=(\{.*?\})", str(info.value)).group(1))


def _random_locks(path, pattern, rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = Model.from_urdf(str(path), mimic="independent")  # every movable joint, mimic ones too
    lower, upper = full.position_limits
    out = {}
    for name, lo, hi in zip(full.joint_names, lower, upper):
        if re.search(pattern, name):
            lo, hi = max(lo, -math.pi), min(hi, math.pi)
            out[name] = float(rng.uniform(lo, hi))
    assert out, pattern
    return out


CASES = {
    "talos grippers": ("talos_data/robots/talos_full_v2.urdf", "gripper"),
    "panda fingers": ("panda_description/urdf/panda.urdf", "finger"),
    "romeo hands (suggested)": ("romeo_description/urdf/romeo.urdf", None),
    "icub neck": ("icub_description/robots/icub.urdf", "neck"),
}


@pytest.mark.parametrize("base", ["fixed", "se3"])
@pytest.mark.parametrize("case", list(CASES))
def test_agrees_with_pinocchio_build_reduced_model(case, base):
    relpath, pattern = CASES[case]
    path = _robot(relpath)
    rng = np.random.default_rng(zlib.crc32(f"{case} {base}".encode()))
    locked = _suggested(path) if pattern is None else _random_locks(path, pattern, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = Model.from_urdf(str(path), base=base, locked_joints=locked)
    pm = pin.buildModelFromUrdf(str(path)) if base == "fixed" else \
        pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    q_ref = pin.neutral(pm)
    for name, x in locked.items():
        j = pm.joints[pm.getJointId(name)]
        if j.nq == 2:
            q_ref[j.idx_q:j.idx_q + 2] = math.cos(x), math.sin(x)
        else:
            q_ref[j.idx_q] = x
    rm = pin.buildReducedModel(pm, [pm.getJointId(n) for n in locked], q_ref)
    rd = rm.createData()
    first = 1 if base == "fixed" else 2
    assert ours.joint_names == tuple(rm.names[first:]) and (ours.nq, ours.nv) == (rm.nq, rm.nv)
    assert dict(ours.locked_joints) == locked
    worst = {}
    for _ in range(2):
        q = ours.random_configuration(rng)
        v, a, tau = rng.normal(size=(3, ours.nv))
        M_pin = pin.crba(rm, rd, q)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        ref = {"M": M_pin, "C v + g": pin.nonLinearEffects(rm, rd, q, v).copy(),
               "RNEA": pin.rnea(rm, rd, q, v, a).copy(), "forward dynamics": pin.aba(rm, rd, q, v, tau).copy()}
        for model in (ours, ours.with_backend("numpy")):
            got = {"M": model.mass_matrix(q), "C v + g": model.nonlinear_effects(q, v),
                   "RNEA": model.inverse_dynamics(q, v, a), "forward dynamics": model.forward_dynamics(q, v, tau)}
            for quantity, x in got.items():
                err = float(np.abs(x - ref[quantity]).max() / np.abs(ref[quantity]).max())
                worst[quantity] = max(worst.get(quantity, 0.0), err)
                assert err < REL, (case, base, model.backend, quantity, err)
    print(f"\nlocked joints vs buildReducedModel, {case}, {base}, worst relative error: "
          + ", ".join(f"{quantity} {err:.2g}" for quantity, err in worst.items()))


# --------------------------------------------------------------------------- nodes
def _start(module, path, *params):
    args = [sys.executable, "-m", module, "--ros-args", "-p", f"model_file:={path}"]
    for p in params:
        args += ["-p", p]
    return run_to_exit(args, cwd=ROOT)


def test_the_nodes_refuse_a_massless_hand_and_bad_locks_with_one_line(tmp_path):
    path = tmp_path / "hand.urdf"
    path.write_text(massless_hand())
    cases = [
        ("mbs_ros.nodes.dynamics_node", (), ["'finger_joint'", "locked_joints"]),
        ("mbs_ros.nodes.dynamics_node", ("locked_joints:=[wrist, finger_joint]", "locked_joint_positions:=[0.5]"),
         ["locked_joint_positions", "2"]),
        ("mbs_ros.nodes.controller_node", ("locked_joints:=[thumb, wrist]",), ["'thumb'", "no joint"]),
        ("mbs_ros.nodes.controller_node", ("locked_joints:=[wrist, finger_joint]",
                                           "locked_joint_positions:=[1.5, 0.0]"), ["'wrist'", "outside"]),
    ]
    for module, params, needles in cases:
        rc, out = _start(module, path, *params)
        fatal = [line for line in out.splitlines() if "FATAL" in line]
        assert rc == 2, out
        assert len(fatal) == 1 and all(n in fatal[0] for n in needles), out


def test_the_dynamics_node_runs_a_massless_hand_locked_by_its_parameters(tmp_path):
    from mbs_ros.process import NodeProcess

    path = tmp_path / "hand.urdf"
    path.write_text(massless_hand())
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="locked_node", namespace="locked",
                       parameters=dict(model_file=str(path), physics_rate=100.0,
                                       locked_joints=["wrist", "finger_joint"], locked_joint_positions=[0.5, 0.0]),
                       log_file=tmp_path / "locked.log")
    pytest.importorskip("rclpy")
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    from ros_helpers import Probe, Recorder

    proc.start()
    try:
        assert proc.wait_for_log("rk4 at 100 Hz", timeout=120), proc.log_text()
        with Probe("test_locked_probe", 60.0) as probe:
            joints = Recorder(probe, JointState, "/locked/joint_states")
            tf = Recorder(probe, TFMessage, "/tf")
            probe.spin_until(lambda: len(joints) > 0 and any(
                t.child_frame_id == "locked/palm" for m in tf.messages for t in m.transforms),
                what="/locked/joint_states and the palm's /tf", alive=[proc])
            palm = [t.transform for m in tf.messages for t in m.transforms if t.child_frame_id == "locked/palm"]
    finally:
        rc = proc.stop()
    assert rc == 0, proc.log_text()
    # the locked joints follow the moving one at their lock, still, with no effort (a JointState consumer such
    # as robot_state_publisher sees every joint of the URDF)
    m = joints.messages[-1]
    assert list(m.name) == ["j1", "wrist", "finger_joint"]
    assert list(m.position[1:]) == [0.5, 0.0] and list(m.velocity[1:]) == [0.0, 0.0]
    assert list(m.effort[1:]) == [0.0, 0.0] and len(m.effort) == 3
    # and /tf carries the locked wrist at its lock: locked/l1 -> locked/palm is 0.5 m along x, rotated 0.5 rad about x
    r = palm[-1].rotation
    assert (palm[-1].translation.x, palm[-1].translation.y, palm[-1].translation.z) == pytest.approx((0.5, 0, 0))
    assert (r.x, r.y, r.z, r.w) == pytest.approx((math.sin(0.25), 0.0, 0.0, math.cos(0.25)), abs=1e-12)


def test_a_locked_mimic_joint_leaves_the_mimic_note():
    """With mimic="independent" the load report's <mimic> note names the joints that move on their own: a locked
    one does not."""
    def gripper(*locks):
        text = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                     link("c", 1.0, xyz="0.1 0 0"), joint("ja", "base", "a"),
                     joint("jb", "base", "b", jtype="prismatic").replace("</joint>", '<mimic joint="ja"/></joint>'),
                     joint("jc", "base", "c", jtype="prismatic").replace("</joint>", '<mimic joint="ja"/></joint>'))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = Model.from_urdf(text, locked_joints={name: 0.0 for name in locks}, mimic="independent")
        return model.load_report, len(caught)

    assert gripper() == (("joints 'jb', 'jc': <mimic> not simulated (each moves independently)",), 1)
    assert gripper("jb") == (("joint 'jc': <mimic> not simulated (each moves independently)",), 1)
    assert gripper("jb", "jc") == ((), 0)
    assert gripper("ja") == (("joints 'jb', 'jc': <mimic> not simulated (each moves independently)",), 1)
