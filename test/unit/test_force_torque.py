"""The force/torque sensor (issue 18: "F/T sensor (noise off) equals Pinocchio's joint wrench (data.f) on a real
robot to 1e-9"): UR5 and Panda from example-robot-data, on a fixed base and on a free-flying (se3) base, with
sensors at several joints, each mounted off its joint (offset and rotated, so the transform matters).

The reference is Pinocchio (PyPI ``pin``): ``aba`` gives the acceleration under the applied efforts, ``rnea`` at
that acceleration fills ``data.f[j]``, the wrench the parent transmits to joint j's child in the joint frame,
gravity included. The test moves it to the sensor by hand, F_s = Rᵀ F, τ_s = Rᵀ (τ − r × F), with (R, r) the mount
(scipy's Rotation for the rpy). Ours comes through the whole path: the YAML declaration, the SensorSuite (forward
dynamics of the simulator's generalised force, Model.joint_wrenches, the mount) and the sensor model. The figure
(worst error relative to the largest wrench entry): ``python -m pytest -q -s test/unit/test_force_torque.py``.
"""
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.sensors.frames import SensorFrame
from mbs_ros.sensors.spec import SensorConfigError, parse_sensors
from mbs_ros.sensors.suite import SensorSuite

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")


def _robots_dir():
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if str(f).endswith(".urdf") and "robots" in parts:
            path = Path(dist.locate_file(f))
            return path.parents[len(parts) - parts.index("robots") - 2]
    return None


ROBOTS = _robots_dir()
if ROBOTS is None:
    pytest.skip("example-robot-data (PyPI example-robot-data, in requirements-dev.txt) is not installed",
                allow_module_level=True)

DT = 0.001
#: (file, {sensor name: (joint, xyz, rpy)})
CASES = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", {
        "ft_shoulder": ("shoulder_pan_joint", [0.02, -0.03, 0.05], [0.3, -0.2, 1.0]),
        "ft_elbow": ("elbow_joint", [-0.1, 0.04, 0.2], [-1.2, 0.4, 0.1]),
        "ft_wrist": ("wrist_3_joint", [0.0, 0.0, 0.08], [0.0, 0.0, 0.7]),
    }),
    "go2": ("go2_description/urdf/go2.urdf", {
        "ft_hip": ("FL_hip_joint", [0.05, 0.1, -0.02], [0.5, 0.5, -0.5]),
        "ft_calf": ("RR_calf_joint", [0.0, 0.01, -0.2], [3.0, 0.0, -0.785]),
    }),
}
#: Pinocchio's free-flyer and our se3 base share q (position, quaternion xyzw) and v (body twist, linear first),
#: and the base's generalised force is the body-frame wrench at the base origin in both.
RUNS = [("ur5", "fixed"), ("go2", "fixed"), ("go2", "se3")]
FIGURES = {}


def _pin_model(path, base):
    if base == "fixed":
        return pin.buildModelFromUrdf(str(path))
    return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())


@pytest.mark.parametrize("robot, base", RUNS)
def test_noise_off_reading_equals_pinocchios_joint_wrench_moved_to_the_sensor(robot, base):
    relpath, mounts = CASES[robot]
    path = ROBOTS / relpath
    model = Model.from_urdf(str(path), base=base)
    assert not model.passive_active  # no joint damping/friction: Pinocchio's aba sees the same forces
    items = [{"name": name, "type": "force_torque", "joint": joint, "rate": 1000,
              "pose": {"xyz": xyz, "rpy": rpy}, "noise": {"force_std": 0, "torque_std": 0}}
             for name, (joint, xyz, rpy) in mounts.items()]
    sset = parse_sensors({"sensors": items}, f"robots/{robot}.yaml", model, DT)
    pm = _pin_model(path, base)
    pd = pm.createData()
    assert pm.nq == model.nq and pm.nv == model.nv
    rng = np.random.default_rng(11)
    nvb = model.nv - len(model.joint_names)
    worst = 0.0
    for _ in range(4):
        efforts = rng.uniform(-5.0, 5.0, len(model.joint_names))
        wrench = rng.uniform(-20.0, 20.0, nvb)
        sim = Simulator(model, model.random_configuration(rng), rng.normal(size=model.nv), DT)
        sim.set_joint_efforts(efforts)  # held from the next step on: applied at the state after one step
        if nvb:
            sim.set_wrench(wrench, "body")
        sim.advance(1)
        suite = SensorSuite(model, sset, DT)
        suite.sample(sim)
        out = {r.name: r for r in suite.due(sim.k)}
        q, v = sim.q.copy(), sim.v.copy()
        tau = np.concatenate([wrench, efforts])
        a = pin.aba(pm, pd, q, v, tau).copy()
        pin.rnea(pm, pd, q, v, a)
        for name, (joint, xyz, rpy) in mounts.items():
            f = pd.f[pm.getJointId(joint)]
            R, r = Rotation.from_euler("xyz", rpy).as_matrix(), np.asarray(xyz)
            expected = np.concatenate([R.T @ f.linear, R.T @ (f.angular - np.cross(r, f.linear))])
            got = np.concatenate([out[name].values["force"], out[name].values["torque"]])
            err = np.abs(got - expected).max() / max(1.0, np.abs(expected).max())
            worst = max(worst, err)
            assert err < 1e-9, (name, got, expected)
    FIGURES[(robot, base)] = worst


def test_noise_and_bias():
    """Bias added as configured; white noise per axis with the configured std (20 000 seeded samples, within 3 %:
    6 sigma of the sample std); six independent draws (the force/torque sample correlation under 0.05, 7
    sigma of 1/√N)."""
    model = Model.from_urdf(str(ROBOTS / CASES["ur5"][0]), base="fixed")
    item = {"name": "ft", "type": "force_torque", "joint": "wrist_3_joint", "rate": 1000,
            "noise": {"force_std": 0.5, "torque_std": 0.02}, "force_bias": [1.0, -2.0, 3.0],
            "torque_bias": [0.1, 0.2, -0.3]}
    sset = parse_sensors({"sensors": [item]}, "robots/ur5.yaml", model, DT)
    sensor = SensorSuite(model, sset, DT).sensors[0]
    W0 = np.array([5.0, -1.0, 20.0, 0.5, 0.0, -0.2])
    out = np.array([np.concatenate([(r := sensor.measure(SensorFrame(k, k * 1_000_000, np.eye(4), np.zeros(3),
                                                                     np.zeros(3), joint_wrench=W0,
                                                                     dt_ns=1_000_000))).values["force"],
                                    r.values["torque"]]) for k in range(20_000)])
    err = out - W0 - [1.0, -2.0, 3.0, 0.1, 0.2, -0.3]
    assert np.allclose(err.std(axis=0), [0.5] * 3 + [0.02] * 3, rtol=0.03)
    assert np.all(np.abs(err.mean(axis=0)) < 5 * np.array([0.5] * 3 + [0.02] * 3) / np.sqrt(len(err)))
    assert np.abs(np.corrcoef(err.T) - np.eye(6)).max() < 0.05


@pytest.mark.parametrize("keys, key, what", [
    ({"noise": {"force_std": -0.1}}, "noise.force_std", "expected a number >= 0"),
    ({"noise": {"torque_std": "0.01 Nm"}}, "noise.torque_std", "expected a finite number"),
    ({"noise": {"std": 0.1}}, "noise.std", "unknown key"),
    ({"force_bias": [1, 2]}, "force_bias", "expected 3 numbers"),
    ({"torque_bias": [0, 0, "x"]}, "torque_bias[2]", "expected a finite number"),
    ({"bias": [0] * 6}, "bias", "unknown key"),
])
def test_bad_force_torque_keys_are_refused_naming_file_sensor_and_key(keys, key, what):
    model = Model.from_urdf(str(ROBOTS / CASES["ur5"][0]), base="fixed")
    item = {"name": "ft", "type": "force_torque", "joint": "elbow_joint", "rate": 100, **keys}
    with pytest.raises(SensorConfigError) as exc:
        parse_sensors({"sensors": [item]}, "robots/ur5.yaml", model, DT)
    msg = str(exc.value)
    assert msg.startswith(f"robots/ur5.yaml: sensors[0] (ft): {key}: "), msg
    assert what in msg, msg


def test_a_frame_without_the_joint_wrench_is_an_error_not_a_zero():
    model = Model.from_urdf(str(ROBOTS / CASES["ur5"][0]), base="fixed")
    item = {"name": "ft", "type": "force_torque", "joint": "elbow_joint", "rate": 100}
    sensor = SensorSuite(model, parse_sensors({"sensors": [item]}, "robots/ur5.yaml", model, DT), DT).sensors[0]
    with pytest.raises(ValueError, match="ft: the frame has no joint wrench"):
        sensor.measure(SensorFrame(0, 0, np.eye(4), np.zeros(3), np.zeros(3)))


def test_figures():
    """Prints the worst relative errors measured above (run with -s after them)."""
    print("\nF/T vs Pinocchio data.f (relative to the largest entry):",
          {f"{r} {b}": f"{e:.1e}" for (r, b), e in sorted(FIGURES.items())})
