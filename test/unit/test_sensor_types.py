"""The sensor types besides the IMU (issue 18): magnetometer, pressure/depth, DVL, joint encoders — their models
against closed forms built here by hand, through :class:`~mbs_ros.sensors.suite.SensorSuite` on real simulator
states wherever the motion of the mount matters, and their YAML keys' refusals.

The expected values never come from the code under test: link poses and twists of a single body are the state
itself (se3 base: q = [p; quaternion xyzw], v = body twist [v; ω]), mounts are turned into matrices with scipy's
Rotation (R = Rz(yaw) Ry(pitch) Rx(roll), URDF rpy), the DVL's Janus geometry and least-squares covariance are the
textbook closed forms. Statistical checks use fixed seeds; each states its margin. The figures (worst errors):
``python -m pytest -q -s test/unit/test_sensor_types.py``.
"""
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.sensors.frames import SensorFrame
from mbs_ros.sensors.spec import SensorConfigError, parse_sensors
from mbs_ros.sensors.suite import SensorSuite

import urdf_text as U

DT = 0.01
FILE = "robots/auv.yaml"
P_ATM, RHO = 101325.0, 1025.0
FIGURES = {}


def _figure(name, value):
    FIGURES[name] = max(FIGURES.get(name, 0.0), float(value))


def _sensors(items, model, environment=None, current=(0.0, 0.0, 0.0)):
    doc = {"sensors": items}
    if environment is not None:
        doc["environment"] = environment
    return parse_sensors(doc, FILE, model, DT, current=current)


def _state(p, rpy, v, w):
    """q of an se3 rigid body at position p, orientation rpy (scipy, extrinsic xyz), body twist [v; ω]."""
    quat = Rotation.from_euler("xyz", rpy).as_quat()  # x, y, z, w
    return np.concatenate([p, quat]), np.concatenate([v, w])


def _read(model, sset, q, v, efforts=None):
    """Every sensor's reading at state (q, v): one suite sample at step 0, by sensor name."""
    sim = Simulator(model, q, v, DT)
    if efforts is not None:
        sim.set_joint_efforts(efforts)
    suite = SensorSuite(model, sset, DT)
    suite.sample(sim)
    return {r.name: r for r in suite.due(sim.k)}


def _measure_many(sset, T, v, n, model):
    """``n`` readings of the first sensor of ``sset`` at one fixed pose ``T`` and velocity ``v`` (sensor axes):
    its noise alone, without simulating."""
    sensor = SensorSuite(model, sset, DT).sensors[0]
    return [sensor.measure(SensorFrame(k, k * 10_000_000, T, np.asarray(v, dtype=float), np.zeros(3),
                                       dt_ns=10_000_000)) for k in range(n)]


def _mount(xyz, rpy):
    """(R_ls, r_ls) of a mount, by scipy."""
    return Rotation.from_euler("xyz", rpy).as_matrix(), np.asarray(xyz, dtype=float)


# ------------------------------------------------------------------------------------------------------- DVL
WET = {"fluid_density": RHO, "seabed_z": -60.0}
MOUNT = {"xyz": [0.4, -0.1, -0.25], "rpy": [0.05, -0.1, 0.6]}


def _dvl(**keys):
    return {"name": "dvl", "type": "dvl", "link": "base_link", "rate": 10, **keys}


def test_dvl_velocity_noise_off_is_the_mount_points_velocity_in_sensor_axes():
    """v_s = R_lsᵀ (v_l + ω_l × r_ls) on a tilted, moving, spinning body with an offset and rotated mount."""
    model = Model.rigid_body(gravity=(0, 0, 0))
    sset = _sensors([_dvl(pose=MOUNT, noise={"velocity_std": 0, "range_std": 0})], model, WET)
    worst = 0.0
    for p, rpy, v, w in [([3.0, -2.0, -20.0], [0.1, -0.05, 1.2], [0.8, -0.3, 0.2], [0.1, -0.2, 0.3]),
                         ([0.0, 0.0, -40.0], [-0.2, 0.15, -2.5], [-1.5, 0.4, -0.6], [-0.4, 0.3, -0.9])]:
        q, vel = _state(p, rpy, v, w)
        r = _read(model, sset, q, vel)["dvl"]
        R, rr = _mount(MOUNT["xyz"], MOUNT["rpy"])
        expected = R.T @ (np.asarray(v) + np.cross(w, rr))
        assert r.valid and r.values["mode"] == "bottom" and r.reason is None
        worst = max(worst, np.abs(r.values["velocity"] - expected).max())
    _figure("dvl velocity vs R^T(v + w x r) [m/s]", worst)
    assert worst < 1e-12


@pytest.mark.parametrize("angle", [None, 30.0])
def test_dvl_ranges_on_a_level_vehicle_are_the_height_over_cos_of_the_beam_angle(angle):
    model = Model.rigid_body(gravity=(0, 0, 0))
    keys = {"pose": {"xyz": [0.2, 0.0, -0.3], "rpy": [0.0, 0.0, 0.7]}, "noise": {"range_std": 0}}
    if angle is not None:
        keys["beam_angle"] = angle
    sset = _sensors([_dvl(**keys)], model, WET)
    q, vel = _state([5.0, 1.0, -32.0], [0.0, 0.0, 2.0], [0.5, 0, 0], [0, 0, 0.2])
    r = _read(model, sset, q, vel)["dvl"]
    h = -32.0 - 0.3 - (-60.0)  # sensor z minus seabed z
    theta = math.radians(25.0 if angle is None else angle)
    assert np.allclose(r.values["ranges"], h / math.cos(theta), rtol=0, atol=1e-12)
    # Janus: 90° apart, all at theta from the sensor's -z axis
    B = r.values["beam_directions"]
    assert np.allclose(B @ [0, 0, -1], math.cos(theta), atol=1e-15)
    assert np.allclose(np.linalg.norm(B, axis=1), 1.0, atol=1e-15)
    assert np.allclose(np.degrees(np.arctan2(B[:, 1], B[:, 0])) % 360, [45, 135, 225, 315], atol=1e-12)


def test_dvl_loses_lock_beyond_max_range_and_regains_it():
    """A body rising at 2 m/s from 20 m over the seabed, then a second run sinking back from 70 m (zero gravity,
    no fluid forces: the height is h0 + vz t exactly): lock exactly while h / cos 25° <= max_range 50 m, i.e.
    h <= 45.315 m; no sample falls within 1 cm of that height. The seabed is 100 m deep: always submerged."""
    model = Model.rigid_body(gravity=(0, 0, 0))
    sset = _sensors([_dvl(noise={"velocity_std": 0, "range_std": 0})], model, {"fluid_density": RHO,
                                                                                "seabed_z": -100.0})
    h_max = 50.0 * math.cos(math.radians(25.0))
    for h0, vz in ((20.0, 2.0), (70.0, -2.0)):
        q, vel = _state([0, 0, -100.0 + h0], [0, 0, 0], [0, 0, vz], [0, 0, 0])
        sim = Simulator(model, q, vel, DT)
        readings = SensorSuite(model, sset, DT).run(sim, 2500)
        assert len(readings) == 251  # k = 0, 10, ..., 2500
        flags = []
        for r in readings:
            h = h0 + vz * r.k * DT
            assert abs(h - h_max) > 0.01
            assert r.valid == (h <= h_max), (h, r.reason)
            if r.valid:
                assert np.abs(r.values["velocity"] - [0, 0, vz]).max() < 1e-12
            else:
                assert r.values["velocity"] is None and r.values["mode"] is None
                assert "max_range 50 m" in r.reason and np.isnan(r.values["ranges"]).all()
            flags.append(r.valid)
        assert (True in flags) and (False in flags)  # both states reached, in the run's order:
        assert flags == sorted(flags, reverse=vz > 0)


def test_dvl_water_tracks_relative_to_the_current_when_the_bottom_is_out_of_range():
    model = Model.rigid_body(gravity=(0, 0, 0))
    current = (0.3, -0.2, 0.05)
    env = {"fluid_density": RHO, "seabed_z": -500.0}
    sset = _sensors([_dvl(pose=MOUNT, water_track=True, noise={"velocity_std": 0}),
                     {**_dvl(pose=MOUNT, noise={"velocity_std": 0}), "name": "bottom_only"}], model, env,
                    current=current)
    p, rpy, v, w = [1.0, 2.0, -10.0], [0.1, 0.2, -0.8], [0.6, 0.1, -0.2], [0.05, -0.1, 0.2]
    q, vel = _state(p, rpy, v, w)
    out = _read(model, sset, q, vel)
    R_wl = Rotation.from_euler("xyz", rpy).as_matrix()
    R, rr = _mount(MOUNT["xyz"], MOUNT["rpy"])
    expected = R.T @ (np.asarray(v) + np.cross(w, rr)) - (R_wl @ R).T @ np.asarray(current)
    r = out["dvl"]
    assert r.valid and r.values["mode"] == "water" and r.reason is None
    assert np.abs(r.values["velocity"] - expected).max() < 1e-12
    assert not out["bottom_only"].valid and "max_range" in out["bottom_only"].reason


def test_dvl_three_beam_solution_and_min_beams_four():
    """Tilted by 0.3 rad about the horizontal axis across beam 0 (azimuth −45°) at 40 m over the seabed: beam 0's
    slant range (54.0 m) passes max_range while the others (46.2, 40.4, 46.2 m) stay in range: a 3-beam solution
    (exact with noise off) by default, no lock with min_beams 4."""
    model = Model.rigid_body(gravity=(0, 0, 0))
    sset = _sensors([_dvl(noise={"velocity_std": 0, "range_std": 0}),
                     {**_dvl(min_beams=4), "name": "dvl4"}], model, WET)
    rpy = Rotation.from_rotvec(0.3 * np.array([1.0, -1.0, 0.0]) / math.sqrt(2)).as_euler("xyz")
    q, vel = _state([0, 0, -60.0 + 40.0], rpy, [0.4, -0.2, 0.1], [0.0, 0.0, 0.0])
    out = _read(model, sset, q, vel)
    r = out["dvl"]
    assert r.valid and r.values["mode"] == "bottom"
    assert np.isnan(r.values["ranges"][0]) and np.isfinite(r.values["ranges"][1:]).all()
    assert np.abs(r.values["velocity"] - [0.4, -0.2, 0.1]).max() < 1e-12
    assert not out["dvl4"].valid and "beam 0 range 54 m > max_range 50 m" in out["dvl4"].reason
    assert "min_beams 4" in out["dvl4"].reason


def test_dvl_without_a_seabed_or_out_of_the_water_says_why():
    model = Model.rigid_body(gravity=(0, 0, 0))
    sset = _sensors([_dvl()], model, {"fluid_density": RHO})
    q, vel = _state([0, 0, -5.0], [0, 0, 0], [0, 0, 0], [0, 0, 0])
    r = _read(model, sset, q, vel)["dvl"]
    assert not r.valid and "no seabed configured" in r.reason
    q, vel = _state([0, 0, 0.5], [0, 0, 0], [0, 0, 0], [0, 0, 0])
    sset = _sensors([_dvl(water_track=True)], model, WET)
    r = _read(model, sset, q, vel)["dvl"]
    assert not r.valid and "out of the water" in r.reason


def test_dvl_velocity_noise_and_its_covariance_follow_the_janus_least_squares():
    """Janus: BᵀB = diag(2 sin²θ, 2 sin²θ, 4 cos²θ), so cov = σ² diag(1/(2 sin²θ), 1/(2 sin²θ), 1/(4 cos²θ));
    the reported covariance equals it, and 20 000 seeded samples' std matches its square root within 3 % (the
    sample std's relative std is 1/√(2N) = 0.5 %: 6 sigma)."""
    model = Model.rigid_body(gravity=(0, 0, 0))
    sigma, theta = 0.01, math.radians(25.0)
    sset = _sensors([_dvl(rate=100, noise={"velocity_std": sigma})], model, WET)
    T = np.eye(4)
    T[2, 3] = -30.0
    readings = _measure_many(sset, T, [1.0, 0.0, 0.0], 20_000, model)
    V = np.array([r.values["velocity"] for r in readings])
    expected = sigma * np.sqrt([1 / (2 * math.sin(theta) ** 2), 1 / (2 * math.sin(theta) ** 2),
                                1 / (4 * math.cos(theta) ** 2)])
    assert np.allclose(readings[0].values["velocity_cov"].reshape(3, 3), np.diag(expected ** 2), rtol=1e-12)
    std = V.std(axis=0)
    _figure("dvl velocity std / closed form - 1", np.abs(std / expected - 1).max())
    assert np.allclose(std, expected, rtol=0.03), std / expected
    assert np.all(np.abs(V.mean(axis=0) - [1.0, 0, 0]) < 5 * expected / math.sqrt(len(V)))


# -------------------------------------------------------------------------------------------------- pressure
def _pressure(**keys):
    return {"name": "depth", "type": "pressure", "link": "base_link", "rate": 100, **keys}


def test_pressure_noise_off_is_hydrostatic_at_the_mount_point_and_depth_follows():
    model = Model.rigid_body(gravity=(0, 0, -9.81))
    mount = {"xyz": [0.5, -0.2, 0.3], "rpy": [0.2, 0.0, 0.0]}
    sset = _sensors([_pressure(pose=mount, resolution=0, noise={"std": 0})], model,
                    {"fluid_density": RHO, "water_surface": 1.5})
    rpy = [0.3, -0.4, 1.0]
    q, vel = _state([2.0, 3.0, -12.0], rpy, [0.1, 0, 0], [0, 0.1, 0])
    r = _read(model, sset, q, vel)["depth"]
    z = -12.0 + (Rotation.from_euler("xyz", rpy).as_matrix() @ mount["xyz"])[2]
    depth = 1.5 - z
    assert abs(r.values["fluid_pressure"] - (P_ATM + RHO * 9.81 * depth)) < 1e-9
    assert abs(r.values["depth"] - depth) < 1e-12 * P_ATM
    assert r.values["variance"] == 0.0
    # in air: the atmosphere, depth 0
    q, vel = _state([0, 0, 3.0], [0, 0, 0], [0, 0, 0], [0, 0, 0])
    r = _read(model, sset, q, vel)["depth"]
    assert r.values["fluid_pressure"] == P_ATM and r.values["depth"] == 0.0


def test_pressure_to_depth_within_the_noise_level():
    """20 000 seeded samples at 12.3 m with σ = 50 Pa and 20 Pa quantisation: the depth error's mean is within 5
    sigma of its standard error, its std equals √(σ² + res²/12)/(ρg) within 3 % (6 sigma of the sample std), and
    the reported variances are that."""
    model = Model.rigid_body(gravity=(0, 0, -9.81))
    sset = _sensors([_pressure(resolution=20.0, noise={"std": 50.0})], model, {"fluid_density": RHO})
    T = np.eye(4)
    T[2, 3] = -12.3
    out = _measure_many(sset, T, np.zeros(3), 20_000, model)
    err = np.array([r.values["depth"] for r in out]) - 12.3
    sd = math.sqrt(50.0 ** 2 + 20.0 ** 2 / 12) / (RHO * 9.81)
    _figure("pressure depth std / closed form - 1", abs(err.std() / sd - 1))
    assert abs(err.mean()) < 5 * sd / math.sqrt(len(err))
    assert abs(err.std() / sd - 1) < 0.03
    assert out[0].values["variance"] == pytest.approx(50.0 ** 2 + 20.0 ** 2 / 12, rel=1e-12)
    assert out[0].values["depth_variance"] == pytest.approx(sd ** 2, rel=1e-12)
    p = np.array([r.values["fluid_pressure"] for r in out])
    assert np.allclose(p / 20.0, np.round(p / 20.0), rtol=0, atol=1e-9)  # on the 20 Pa grid


def test_pressure_quantisation_rounds_to_the_nearest_step():
    """100 Pa steps, noise off, 40 seeded depths: each reading on the grid and within half a step of the truth
    (truncation would be up to a whole step off)."""
    model = Model.rigid_body(gravity=(0, 0, -9.81))
    sset = _sensors([_pressure(resolution=100.0, noise={"std": 0})], model, {"fluid_density": 1000.0})
    for z in np.random.default_rng(5).uniform(-30.0, -0.1, 40):
        T = np.eye(4)
        T[2, 3] = z
        p = _measure_many(sset, T, np.zeros(3), 1, model)[0].values["fluid_pressure"]
        true = P_ATM - 1000.0 * 9.81 * z
        assert p % 100.0 == 0.0 and abs(p - true) <= 50.0 + 1e-9, (z, p, true)


# ---------------------------------------------------------------------------------------------- magnetometer
def test_magnetometer_reads_the_world_field_rotated_into_the_sensor_plus_its_bias():
    model = Model.rigid_body(gravity=(0, 0, -9.81))
    field = [1e-5, 2.2e-5, -4.1e-5]
    mount = {"xyz": [0.1, 0.2, 0.3], "rpy": [0.0, 0.3, -1.1]}
    bias = [1e-6, -2e-6, 5e-7]
    sset = _sensors([{"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 50, "pose": mount,
                      "bias": bias, "noise": {"std": 0}}], model, {"magnetic_field": field})
    rpy = [0.4, -0.2, 2.5]
    q, vel = _state([0, 0, -3.0], rpy, [0, 0, 0], [0.3, 0, 0])
    r = _read(model, sset, q, vel)["mag"]
    R_ws = Rotation.from_euler("xyz", rpy).as_matrix() @ Rotation.from_euler("xyz", mount["rpy"]).as_matrix()
    expected = R_ws.T @ field + bias
    assert np.abs(r.values["magnetic_field"] - expected).max() < 1e-18
    # yaw only, no bias, the default field (20 µT north, 45 µT down): heading from atan2 is the yaw
    sset = _sensors([{"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 50,
                      "noise": {"std": 0}}], model)
    for yaw in (-2.0, 0.3, 1.4):
        q, vel = _state([0, 0, 0], [0, 0, yaw], [0, 0, 0], [0, 0, 0])
        m = _read(model, sset, q, vel)["mag"].values["magnetic_field"]
        # north (+y world) seen from a body turned by yaw: [sin yaw, cos yaw] * 20 µT
        assert np.allclose(m, [2e-5 * math.sin(yaw), 2e-5 * math.cos(yaw), -4.5e-5], rtol=0, atol=1e-18)


def test_magnetometer_noise_std_and_covariance():
    model = Model.rigid_body(gravity=(0, 0, -9.81))
    sset = _sensors([{"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 100,
                      "noise": {"std": 2e-7}}], model)
    readings = _measure_many(sset, np.eye(4), np.zeros(3), 20_000, model)
    M = np.array([r.values["magnetic_field"] for r in readings]) - [0, 2e-5, -4.5e-5]
    assert np.allclose(M.std(axis=0), 2e-7, rtol=0.03)  # 6 sigma of the sample std (N = 20 000)
    assert np.allclose(readings[0].values["magnetic_field_cov"], np.diag([4e-14] * 3).ravel(), rtol=1e-12)


# -------------------------------------------------------------------------------------------------- encoders
ARM = U.robot(U.link("base", 1.0), U.link("l1", 1.0, xyz="0.2 0 0"), U.link("l2", 0.5, xyz="0.2 0 0"),
              U.link("l3", 0.3),
              U.joint("shoulder", "base", "l1", "revolute", "0 0 1", "0 0 0.1"),
              U.joint("elbow", "l1", "l2", "continuous", "0 1 0", "0.4 0 0", limit='effort="10" velocity="3"'),
              U.joint("slide", "l2", "l3", "prismatic", "1 0 0", "0.4 0 0"), name="arm")


def _arm():
    return Model.from_urdf(ARM, base="fixed", gravity=(0, 0, 0))


def _joint_q(model, angles):
    """q of the arm from one position per joint: revolute/prismatic as is, continuous as (cos, sin)."""
    out = []
    for a, t in zip(angles, model.joint_types):
        out += [math.cos(a), math.sin(a)] if t == "continuous" else [a]
    return np.array(out)


def test_encoders_noise_off_without_quantisation_read_the_joints():
    model = _arm()
    assert model.joint_types == ("revolute", "continuous", "prismatic")
    sset = _sensors([{"name": "enc", "type": "encoders", "link": "base", "rate": 100, "resolution": 0,
                      "linear_resolution": 0, "noise": {"velocity_std": 0}}], model)
    angles, rates = [0.7, -2.9, 0.12], [0.3, -1.2, 0.05]
    r = _read(model, sset, _joint_q(model, angles), np.array(rates))["enc"]
    assert r.values["names"] == ("shoulder", "elbow", "slide")
    assert np.allclose(r.values["position"], angles, rtol=0, atol=1e-15)
    assert np.array_equal(r.values["velocity"], rates)


def test_encoder_positions_are_quantised_to_the_counts():
    """4096 counts per revolution: rotary positions on the 2π/4096 grid and within half a count of the truth; the
    prismatic joint on its own 10 µm grid; a ``joints`` list picks and orders the joints."""
    model = _arm()
    sset = _sensors([{"name": "enc", "type": "encoders", "link": "base", "rate": 100, "counts_per_revolution": 4096,
                      "linear_resolution": 1e-5, "joints": ["slide", "shoulder", "elbow"]}], model)
    step = 2 * math.pi / 4096
    rng = np.random.default_rng(3)
    for _ in range(50):
        angles = [rng.uniform(-2, 2), rng.uniform(-3.1, 3.1), rng.uniform(-0.3, 0.3)]
        r = _read(model, sset, _joint_q(model, angles), np.zeros(3))["enc"]
        pos = r.values["position"]
        assert r.values["names"] == ("slide", "shoulder", "elbow")
        truth = [angles[2], angles[0], angles[1]]
        grid = [1e-5, step, step]
        for x, t, g in zip(pos, truth, grid):
            assert abs(x / g - round(x / g)) < 1e-6
            assert abs(x - t) <= g / 2 + 1e-12


def test_encoder_velocity_by_finite_difference_of_the_counts():
    """``velocity: difference``: (count_k − count_(k−1)) × res / T. A joint turning at a constant 1.234 rad/s read
    at 50 Hz (T = 2 physics steps) with 1000 counts per revolution: every reading is a whole number of counts per
    period, the first is 0, and over 2 s the mean is the true rate within one count per 2 s (the counts
    telescope: the sum is the last count minus the first, each within half a count); a sample one step after the
    previous (after a reset) is divided by that one step."""
    model = _arm()
    sset = _sensors([{"name": "enc", "type": "encoders", "link": "base", "rate": 50, "counts_per_revolution": 1000,
                      "velocity": "difference", "joints": ["shoulder"]}], model)
    sensor = SensorSuite(model, sset, DT).sensors[0]
    res, rate, T = 2 * math.pi / 1000, 1.234, 2 * DT
    vel = []
    for k in range(0, 202, 2):
        frame = SensorFrame(k, k * 10_000_000, np.eye(4), np.zeros(3), np.zeros(3), q=_joint_q(model, [
            -1.0 + rate * k * DT, 0.0, 0.0]), v_gen=np.array([rate, 0, 0]), dt_ns=10_000_000)
        vel.append(sensor.measure(frame).values["velocity"][0])
    vel = np.array(vel)
    assert vel[0] == 0.0
    counts = vel[1:] * T / res
    assert np.allclose(counts, np.round(counts), atol=1e-9)
    assert abs(vel[1:].mean() - rate) <= res / (len(vel[1:]) * T) + 1e-12
    # one step after a sample (a simulator reset moves k on by one): divided by that step, not by a period; a
    # 2^20-count encoder, so that one difference is the rate within a count per step (6e-4 rad/s)
    fine = _sensors([{"name": "enc", "type": "encoders", "link": "base", "rate": 50, "joints": ["shoulder"],
                      "counts_per_revolution": 2 ** 20, "velocity": "difference"}], model)
    sensor = SensorSuite(model, fine, DT).sensors[0]
    for k in (200, 201):
        last = sensor.measure(SensorFrame(k, k * 10_000_000, np.eye(4), np.zeros(3), np.zeros(3), q=_joint_q(
            model, [-1.0 + rate * k * DT, 0.0, 0.0]), v_gen=np.array([rate, 0, 0]), dt_ns=10_000_000))
    assert abs(last.values["velocity"][0] - rate) <= 2 * math.pi / 2 ** 20 / DT + 1e-12


def test_on_the_rov_with_its_arm_water_comes_from_the_model_and_encoders_skip_the_base():
    """BlueROV2 Heavy with the Alpha 5 arm (config/robots/bluerov2_heavy_alpha5.yaml, se3 base, sea water 1025
    kg/m³ in its hydrodynamics): a pressure sensor and a DVL need no environment.fluid_density, the pressure uses
    the model's density; the encoders read the arm's joints after the base's 7 configuration / 6 velocity entries."""
    model = Model.from_yaml("config/robots/bluerov2_heavy_alpha5.yaml")
    sset = _sensors([_pressure(resolution=0, noise={"std": 0}), _dvl(noise={"range_std": 0}),
                     {"name": "enc", "type": "encoders", "link": "base_link", "rate": 100, "resolution": 0,
                      "noise": {"velocity_std": 0}}], model, {"seabed_depth": 40.0})
    assert sset.environment.fluid_density == 1025.0
    joints = [0.3, -0.4, 0.5, -0.6]
    rates = [0.1, 0.2, -0.3, 0.4]
    q = model.configuration_from_pose([1.0, 2.0, -7.5], [0, 0, 0, 1], joints)
    v = np.concatenate([[0.2, 0, 0, 0, 0, 0.1], rates])
    out = _read(model, sset, q, v)
    assert out["depth"].values["fluid_pressure"] == pytest.approx(P_ATM + 1025.0 * 9.81 * 7.5, rel=1e-14)
    assert out["dvl"].valid and np.allclose(out["dvl"].values["ranges"], 32.5 / math.cos(math.radians(25)), rtol=1e-14)
    assert np.allclose(out["enc"].values["position"], joints, rtol=0, atol=1e-15)
    assert np.array_equal(out["enc"].values["velocity"], rates)
    assert out["enc"].values["names"] == model.joint_names


# ----------------------------------------------------------------------------------------------- determinism
def test_same_seed_same_stream_other_seed_other_stream():
    model = Model.rigid_body(gravity=(0, 0, -9.81))
    items = lambda seed: [_dvl(seed=seed), _pressure(seed=seed),  # noqa: E731
                          {"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 20, "seed": seed},
                          {"name": "gps", "type": "gnss", "link": "base_link", "rate": 5, "seed": seed,
                           "pose": {"xyz": [0, 0, 25.0]}}]  # on a mast: above the water, a fix
    q, vel = _state([0, 0, -20.0], [0.1, 0, 0], [0.5, 0, 0], [0, 0, 0.1])

    def stream(seed, chunks):
        sset = _sensors(items(seed), model, WET)
        suite, sim = SensorSuite(model, sset, DT), Simulator(model, q, vel, DT)
        out = []
        for n in chunks:
            out += suite.run(sim, n)
        return [(r.name, r.k, repr({k: np.asarray(v).tolist() if v is not None else None
                                    for k, v in r.values.items()})) for r in out]

    a, b, c = stream(4, [300]), stream(4, [7, 93, 200]), stream(5, [300])
    assert a == b and len(a) > 50
    assert a != c


def test_noise_streams_do_not_depend_on_lock_or_fix():
    """A DVL that loses lock on every third sample and a GNSS that loses its fix on every third sample draw the same
    noise on the other samples as twins that never lose them: a fixed number of draws per sample, whatever the
    state (so an outage does not shift the rest of a seeded run)."""
    model = Model.rigid_body(gravity=(0, 0, 0))
    env = {"fluid_density": RHO, "seabed_z": -60.0}
    dvl = _sensors([_dvl()], model, env)
    gps = _sensors([{"name": "gps", "type": "gnss", "link": "base_link", "rate": 10}], model, env)

    def frame(k, z):
        T = np.eye(4)
        T[2, 3] = z
        return SensorFrame(k, k * 10_000_000, T, np.array([0.5, 0.0, 0.0]), np.zeros(3), dt_ns=10_000_000)

    for sset, ok_z, out_z, field in ((dvl, -20.0, -1.0, "velocity"), (gps, 1.0, -1.0, "latitude")):
        a, b = (SensorSuite(model, sset, DT).sensors[0] for _ in range(2))
        for k in range(30):
            ra = a.measure(frame(k, out_z if k % 3 == 2 else ok_z))
            rb = b.measure(frame(k, ok_z))
            assert rb.valid and ra.valid == (k % 3 != 2)
            if ra.valid:
                assert np.array_equal(ra.values[field], rb.values[field])


# ----------------------------------------------------------------------------------------------- refusals
REFUSALS = [
    (_dvl(noise={"velocity_std": -1}), "noise.velocity_std", "expected a number >= 0, got -1"),
    (_dvl(noise={"velocity_std": "0.01 m/s"}), "noise.velocity_std", "expected a finite number"),
    (_dvl(noise={"std": 0.01}), "noise.std", "unknown key"),
    (_dvl(noise=[0.01]), "noise", "expected a mapping"),
    (_dvl(beam_angle=95), "beam_angle", "expected degrees in [1, 80]"),
    (_dvl(beam_angle=-5), "beam_angle", "expected a positive number"),
    (_dvl(min_range=10, max_range=5), "max_range", "expected more than min_range"),
    (_dvl(min_beams=2), "min_beams", "expected a whole number >= 3"),
    (_dvl(min_beams=5), "min_beams", "expected 3 or 4"),
    (_dvl(water_track="yes"), "water_track", "expected true or false"),
    (_pressure(noise={"std": -3}), "noise.std", "expected a number >= 0"),
    (_pressure(resolution=[1, 2]), "resolution", "expected a finite number"),
    (_pressure(bias="1 hPa"), "bias", "expected a finite number"),
    ({"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 10, "bias": [0, 0]}, "bias",
     "expected 3 numbers"),
    ({"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 10, "noise": {"std": -1e-7}},
     "noise.std", "expected a number >= 0"),
    ({"name": "mag", "type": "magnetometer", "link": "base_link", "rate": 10, "noise": {"density": 1e-7}},
     "noise.density", "unknown key"),
]


@pytest.mark.parametrize("item, key, what", REFUSALS)
def test_bad_keys_are_refused_naming_file_sensor_and_key(item, key, what):
    with pytest.raises(SensorConfigError) as exc:
        _sensors([item], Model.rigid_body(), {"fluid_density": RHO})
    msg = str(exc.value)
    assert msg.startswith(f"{FILE}: sensors[0] ({item['name']}): {key}: "), msg
    assert what in msg, msg


ENCODER_REFUSALS = [
    ({"joints": ["shoulder", "wrist"]}, "joints[1]", "no movable joint named 'wrist'"),
    ({"joints": ["elbow", "elbow"]}, "joints[1]", "listed twice"),
    ({"joints": "elbow"}, "joints", "expected a non-empty list"),
    ({"resolution": 0.001, "counts_per_revolution": 4096}, "resolution", "not both"),
    ({"counts_per_revolution": 40.5}, "counts_per_revolution", "expected a whole number"),
    ({"resolution": -0.001}, "resolution", "expected a number >= 0"),
    ({"velocity": "estimated"}, "velocity", "expected one of model, difference"),
    ({"noise": {"position_std": [0.1]}}, "noise.position_std", "expected a finite number"),
]


@pytest.mark.parametrize("keys, key, what", ENCODER_REFUSALS)
def test_bad_encoder_keys_are_refused_naming_file_sensor_and_key(keys, key, what):
    item = {"name": "enc", "type": "encoders", "link": "base", "rate": 100, **keys}
    with pytest.raises(SensorConfigError) as exc:
        _sensors([item], _arm())
    msg = str(exc.value)
    assert msg.startswith(f"{FILE}: sensors[0] (enc): {key}: "), msg
    assert what in msg, msg


@pytest.mark.parametrize("item", [_dvl(), _pressure()])
def test_water_sensors_on_a_robot_without_water_are_refused(item):
    with pytest.raises(SensorConfigError) as exc:
        _sensors([item], Model.rigid_body())  # no hydrodynamics, no environment.fluid_density
    msg = str(exc.value)
    assert msg.startswith(f"{FILE}: sensors[0] ({item['name']}): type: no water: "), msg


def test_encoders_on_a_model_without_joints_are_refused():
    with pytest.raises(SensorConfigError, match=r"sensors\[0\] \(enc\): type: the model has no movable joints"):
        _sensors([{"name": "enc", "type": "encoders", "link": "base_link", "rate": 10}], Model.rigid_body())


def test_figures():
    """Prints the worst figures the tests above measured (run with -s after them)."""
    print("\nsensor type figures:", {k: f"{v:.2e}" for k, v in FIGURES.items()})
