"""The LQR law (mbs_ros.controllers.lqr): its gain against the Riccati equation solved by hand, the base error on
the group (log map, attitude errors near π), the reference force, the design cache and the refusals."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.controllers.lqr import LQR
from mbs_ros.dynamics import Model, simulate


def _quat(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.concatenate([math.sin(angle / 2) * axis, [math.cos(angle / 2)]])


def _double_integrator_gain(b, qp, qv, r):
    """2x2 CARE of ẍ = b u by hand: A = [[0, 1], [0, 0]], B = [0, b]. Entries (1,1) and (2,2) of
    AᵀP + PA − PBBᵀP/r + Q = 0 give p12 = √(qp r)/b and p22 = √(r (2 p12 + qv))/b; K = (b/r) [p12, p22]."""
    p12 = math.sqrt(qp * r) / b
    p22 = math.sqrt(r * (2 * p12 + qv)) / b
    return b / r * p12, b / r * p22


def _pendulum_gain(b, alpha, qp, qv, r):
    """2x2 CARE of θ̈ = α θ + b u by hand: (1,1): 2α p12 − b² p12²/r + qp = 0 → p12 = r(α + √(α² + b² qp/r))/b²;
    (2,2): 2 p12 − b² p22²/r + qv = 0 → p22 = √(r (2 p12 + qv))/b; K = (b/r) [p12, p22]."""
    p12 = r * (alpha + math.sqrt(alpha ** 2 + b ** 2 * qp / r)) / b ** 2
    p22 = math.sqrt(r * (2 * p12 + qv)) / b
    return b / r * p12, b / r * p22


MASS, INERTIA = 2.0, np.array([0.1, 0.2, 0.3])


def _free_body():
    return Model.rigid_body(base="se3", mass=MASS, inertia=np.diag(INERTIA), gravity=(0.0, 0.0, 0.0))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e7])
def test_gain_of_a_free_body_is_the_double_integrators_closed_form(scale):
    """At rest, a free body is six decoupled double integrators (ẍ = F/m, θ̈ = τ/I_ii): K is theirs, per DOF; for
    a light, a unit and a ship-heavy body (mass and inertia times ``scale``)."""
    model = Model.rigid_body(base="se3", mass=MASS * scale, inertia=np.diag(INERTIA) * scale, gravity=(0, 0, 0))
    qp = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    qv = np.array([0.5, 0.4, 0.3, 0.2, 0.1, 0.7])
    r = np.array([0.5, 1.0, 2.0, 0.3, 0.2, 0.1])
    law = LQR(model, q_weight=qp, v_weight=qv, r=r)
    q_d = np.concatenate([[1.0, -2.0, 0.5], _quat([1, 2, 3], 0.7)])
    K, lin = law.design(q_d)
    masses = np.concatenate([[MASS] * 3, INERTIA]) * scale
    expected = np.zeros((6, 12))
    for i in range(6):
        expected[i, i], expected[i, 6 + i] = _double_integrator_gain(1 / masses[i], qp[i], qv[i], r[i])
    np.testing.assert_allclose(K, expected, rtol=1e-7, atol=1e-7)  # 4e-9 couplings: the central differences


PENDULUM = ('<robot name="p"><link name="base"/><link name="arm"><inertial><origin xyz="0.4 0 0" rpy="0 0 0"/>'
            '<mass value="1.5"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.01"/></inertial>'
            '</link><joint name="j" type="revolute"><parent link="base"/><child link="arm"/>'
            '<origin xyz="0 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>'
            '<limit lower="-3" upper="3" effort="100" velocity="10"/></joint></robot>')


def test_pendulum_holding_force_and_gain_are_the_hand_derivation():
    """A pendulum (mass m at l on a y-axis joint, z up): the com sits at (l cos θ, 0, −l sin θ), V = −m g l sin θ,
    so the holding torque is τ_d = −m g l cos θ and θ̈ = (τ + m g l cos θ)/J linearises to α = −m g l sin θ / J,
    b = 1/J (J = I_yy + m l²); the law's output at the reference is τ_d and its gain the 2x2 CARE's."""
    g, m, l, J = 9.81, 1.5, 0.4, 0.02 + 1.5 * 0.4 ** 2
    model = Model.from_urdf(PENDULUM, base="fixed", gravity=(0.0, 0.0, -g))
    th = 0.7
    law = LQR(model, q_weight=3.0, v_weight=0.5, r=0.2)
    q_d = np.array([th])
    np.testing.assert_allclose(law(q_d, [0.0], q_d), [-m * g * l * math.cos(th)], rtol=1e-10)
    k1, k2 = _pendulum_gain(1 / J, -m * g * l * math.sin(th) / J, 3.0, 0.5, 0.2)
    np.testing.assert_allclose(law.K, [[k1, k2]], rtol=1e-6)
    # off the reference: u = τ_d − K x with x = (θ − θ_d, θ̇)
    np.testing.assert_allclose(law([th + 0.1], [0.3], q_d), [-m * g * l * math.cos(th) - 0.1 * k1 - 0.3 * k2],
                               rtol=1e-9)


@pytest.mark.parametrize("angle", [3.0, 3.4])
def test_base_error_is_the_log_map_near_pi(angle):
    """A pure rotation of the body by ``angle`` about a unit axis n from the setpoint: x = (log(q_d⁻¹ q), v − v_d)
    has zero translation and rotation vector θ n with θ wrapped into [−π, π] (3.4 rad is −(2π − 3.4) about n)."""
    model = _free_body()
    law = LQR(model)
    n = np.array([1.0, -2.0, 2.0]) / 3.0
    q_d = np.concatenate([[0.3, 0.2, 0.1], _quat([0, 0, 1], 0.4)])
    # q = q_d · (R(n, angle), 0): the rotation in the body frame, a Hamilton product of quaternions (x y z w)
    q = np.concatenate([[0.3, 0.2, 0.1], _qmul(_quat([0, 0, 1], 0.4), _quat(n, angle))])
    v = np.arange(6.0)
    err = law.state_error(q, v, q_d, np.ones(6))
    wrapped = angle if angle <= math.pi else angle - 2 * math.pi
    np.testing.assert_allclose(err[:3], 0.0, atol=1e-12)
    np.testing.assert_allclose(err[3:6], wrapped * n, atol=1e-9)
    np.testing.assert_allclose(err[6:], v - 1.0)


def _qmul(p, q):
    """Hamilton product of quaternions stored (x, y, z, w)."""
    pv, pw, qv, qw = p[:3], p[3], q[:3], q[3]
    return np.concatenate([pw * qv + qw * pv + np.cross(pv, qv), [pw * qw - pv @ qv]])


def test_regulates_a_body_from_an_attitude_error_near_pi():
    """The nonlinear closed loop from 2.9 rad of attitude error and an offset converges to the setpoint."""
    model = _free_body()
    law = LQR(model, q_weight=4.0, v_weight=1.0, r=[1.0, 1.0, 1.0, 0.05, 0.05, 0.05])
    q_d = np.concatenate([[0.0, 0.0, 0.0], _quat([0, 0, 1], 0.3)])
    q0 = np.concatenate([[0.5, -0.4, 0.2], _quat([1, 1, 0], 2.9)])
    ref = lambda t: (q_d, np.zeros(6), np.zeros(6))  # noqa: E731
    _t, qs, vs = simulate(model, q0, np.zeros(6), law.feedback(ref), 0.01, 1200)
    final = np.concatenate([model.difference(q_d, qs[-1]), vs[-1]])
    assert np.abs(final).max() < 1e-3
    assert law.designs == 1  # one setpoint, one design


def test_constant_setpoint_designs_once_and_a_moving_one_redesigns_beyond_the_threshold():
    model = _free_body()
    law = LQR(model, redesign_threshold=0.1)
    q_d = model.neutral()
    for _ in range(5):
        law(q_d, np.zeros(6), q_d)
    assert law.designs == 1
    near = model.integrate(q_d, np.full(6, 0.05))
    law(q_d, np.zeros(6), near)
    assert law.designs == 1  # within the threshold: the held design
    far = model.integrate(q_d, np.full(6, 0.2))
    law(q_d, np.zeros(6), far)
    assert law.designs == 2
    law(q_d, np.zeros(6), q_d)  # back to the first setpoint: its design is cached
    assert law.designs == 2
    law(q_d, np.zeros(6), q_d, np.full(6, 0.2))  # a desired velocity beyond the threshold
    assert law.designs == 3


def test_reference_force_includes_the_passive_forces_it_must_overcome():
    """τ_d = ID − τ_p: a body in water moving at v_d needs the drag's opposite; with passive=False it is ID."""
    model = Model.from_urdf(PENDULUM, base="fixed", gravity=(0.0, 0.0, -9.81))
    law = LQR(model)
    np.testing.assert_allclose(law.reference_force([0.3], [0.5], [0.2]), model.inverse_dynamics([0.3], [0.5], [0.2]))


TWO_LINK = ('<robot name="t"><link name="b"><inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="2"/>'
            '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>'
            '<link name="a"><inertial><origin xyz="0.3 0 0" rpy="0 0 0"/><mass value="1"/>'
            '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>'
            '<joint name="j" type="revolute"><parent link="b"/><child link="a"/><origin xyz="0.2 0 0" rpy="0 0 0"/>'
            '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="10"/></joint></robot>')


def test_a_floating_base_driven_by_joint_efforts_only_is_refused():
    model = Model.from_urdf(TWO_LINK, base="se3", gravity=(0.0, 0.0, 0.0))
    law = LQR(model, inputs="efforts")
    q = model.neutral()
    with pytest.raises(ValueError, match="cannot stabilise"):
        law(q, np.zeros(model.nv), q)
    # with the base wrench too it designs
    law = LQR(model, inputs=["wrench", "efforts"])
    assert np.isfinite(law(q, np.zeros(model.nv), q)).all() and law.K.shape == (7, 14)


@pytest.mark.parametrize("kwargs, match", [
    (dict(q_weight=-1.0), "q_weight"),
    (dict(v_weight=[1.0, 2.0]), "v_weight"),
    (dict(r=[1.0] * 5), "r"),
    (dict(r=float("nan")), "r"),
    (dict(redesign_threshold=0.0), "redesign_threshold"),
    (dict(inputs="rotors"), "inputs"),
    (dict(scaling="inertia"), "scaling"),
    (dict(scaling="mass", inputs="wrench"), "scaling"),
])
def test_bad_arguments_are_refused_with_the_reason(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LQR(_free_body(), **kwargs)


def test_mass_scaled_weights_give_the_computed_torque_gains_on_a_free_body():
    """scaling="mass" with q = kp², q_v = kd² − 2 kp, r = 1: on each decoupled DOF m ẍ = u the gain is
    m [kp, kd] (the hand solution above with b = 1/m, q → q m, q_v → q_v m, r → r/m)."""
    model = _free_body()
    kp, kd = 9.0, 6.0
    law = LQR(model, q_weight=kp ** 2, v_weight=kd ** 2 - 2 * kp, r=1.0, scaling="mass")
    K, _ = law.design(model.neutral())
    masses = np.concatenate([[MASS] * 3, INERTIA])
    np.testing.assert_allclose(K, np.hstack([np.diag(kp * masses), np.diag(kd * masses)]), rtol=1e-7, atol=1e-9)
    for i, m in enumerate(masses):
        assert np.allclose(_double_integrator_gain(1 / m, kp ** 2 * m, (kd ** 2 - 2 * kp) * m, 1 / m),
                           (kp * m, kd * m))


# ---------------------------------------------------------------------- the controller node's law lqr
def _settings_values(**changes):
    from mbs_ros.cores.parameters import table

    values = {n: p.default for n, p in table("controller").items()}
    values.update(changes)
    return values


def test_node_defaults_are_the_documented_ones():
    from mbs_ros.cores.parameters import table

    params = table("controller")
    assert "lqr" in params["law"].description
    assert {n: params[n].default for n in ("lqr_q_position", "lqr_q_velocity", "lqr_r", "lqr_scaling",
                                           "lqr_redesign_threshold")} == {
        "lqr_q_position": 81.0, "lqr_q_velocity": 18.0, "lqr_r": 1.0, "lqr_scaling": "mass",
        "lqr_redesign_threshold": 0.05}


@pytest.mark.parametrize("compensate", [True, False])
def test_node_law_lqr_is_built_from_the_parameters(compensate):
    """law lqr on the node's weightless single body: the default weights give computed torque's kp 9, kd 6 times
    the mass on each decoupled DOF, with or without compensate_passive (a dry body has no passive forces to design
    with; the ROV test below checks them)."""
    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.cores.controller_settings import build_model, make_law, settings_from_values

    source = ms.load_source("", "")
    s = settings_from_values(_settings_values(law="lqr", compensate_passive=compensate, mass=2.0,
                                              gravity=(0.0, 0.0, 0.0)), source)
    model = build_model(s, source)
    law = make_law(model, s)
    assert isinstance(law, LQR) and law.scaling == "mass"
    assert law.passive is False  # a dry body: nothing to include either way
    q = model.neutral()
    np.testing.assert_allclose(law(q, np.zeros(6), q), 0.0, atol=1e-12)  # at rest, weightless: no force
    masses = np.array([2.0, 2.0, 2.0, 0.01, 0.01, 0.01])
    np.testing.assert_allclose(law.K, np.hstack([np.diag(9 * masses), np.diag(6 * masses)]), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name, value, match", [
    ("lqr_r", [1.0, 2.0], "lqr_r as a per-DOF vector needs 6"),
    ("lqr_q_position", -1.0, "lqr_q_position must be positive"),
    ("lqr_q_velocity", "fast", "lqr_q_velocity must be a positive number"),
    ("lqr_scaling", "inertia", "lqr_scaling"),
    ("lqr_redesign_threshold", 0.0, "lqr_redesign_threshold"),
    # poles 1e12 apart (s² + 1e12 s + 1e6 on the 1e-6 kg body): no double-precision Riccati solution
    ("lqr_q_velocity", 1e6, "lqr gains: LQR design at the reference: no stabilising solution"),
])
def test_node_refuses_bad_lqr_parameters_with_the_reason(name, value, match):
    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.cores.controller_settings import ParameterError, build_model, make_law, settings_from_values

    source = ms.load_source("", "")
    extra = dict(mass=1e-6, lqr_q_position=1e-6, lqr_r=1e-6, lqr_scaling="none") if value == 1e6 else {}
    with pytest.raises(ParameterError, match=match):
        s = settings_from_values(_settings_values(law="lqr", **{name: value}, **extra), source)
        make_law(build_model(s, source), s)


@pytest.mark.parametrize("compensate", [True, False])
def test_node_law_lqr_designs_with_the_water_exactly_when_it_is_not_cancelled(compensate):
    """The ROV in water: with compensate_passive the node subtracts τ_p after the law, so the law must hold the
    rigid τ_d = ID; without it the law itself supplies τ_d = ID − τ_p (the drag at v_d)."""
    from pathlib import Path

    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.cores.controller_settings import build_model, make_law, settings_from_values

    path = str(Path(__file__).resolve().parents[2] / "config" / "robots" / "bluerov2_heavy_alpha5.yaml")
    source = ms.load_source("", path)
    s = settings_from_values(_settings_values(law="lqr", compensate_passive=compensate, model_file=path,
                                              base_frame=ms.base_link(source)), source)
    model = build_model(s, source)
    law = make_law(model, s)
    assert law.passive is (not compensate)
    q, v_d, a_d = model.neutral(), np.linspace(0.1, 0.5, model.nv), np.zeros(model.nv)
    rigid = model.inverse_dynamics(q, v_d, a_d)
    expected = rigid if compensate else rigid - model.passive_forces(q, v_d)
    assert np.abs(model.passive_forces(q, v_d)).max() > 1.0
    np.testing.assert_allclose(law.reference_force(q, v_d, a_d), expected, rtol=1e-12, atol=1e-12)


def test_riccati_solution_agrees_with_scipys_generalised_eigenvalue_solver_on_a_vehicle_manipulator():
    """The Schur-method CARE (mbs_ros.controllers.lqr.care) against scipy.linalg.solve_continuous_are (QZ of the
    extended pencil, an independent algorithm) on the 24-state linearisation of the UVMS with its arm under
    gravity, mass-scaled weights; and its residual."""
    from pathlib import Path

    from scipy.linalg import solve_continuous_are

    from mbs_ros.controllers.lqr import care

    path = Path(__file__).resolve().parents[2] / "config" / "robots" / "uvms_6dof.yaml"
    model = Model.from_yaml(path)
    law = LQR(model, q_weight=81.0, v_weight=18.0, r=1.0, scaling="mass")
    q = model.integrate(model.neutral(), np.linspace(-0.3, 0.4, model.nv))
    K, lin = law.design(q, np.linspace(0.1, -0.2, model.nv))
    Q, R = law.weights(q)  # the weights the design used
    P = care(lin.A, lin.B, Q, R)
    P_ref = solve_continuous_are(lin.A, lin.B, Q, R)
    np.testing.assert_allclose(P, P_ref, rtol=1e-7, atol=1e-9 * np.abs(P_ref).max())
    res = lin.A.T @ P + P @ lin.A - P @ lin.B @ np.linalg.solve(R, lin.B.T @ P) + Q
    assert np.abs(res).max() < 1e-8 * np.abs(P).max() * max(1.0, np.abs(lin.A).max())
    np.testing.assert_allclose(K, np.linalg.solve(R, lin.B.T @ P_ref), rtol=1e-6, atol=1e-9 * np.abs(K).max())


# ---------------------------------------------------------------------- the comparison study
def test_study_overrides_give_lqr_the_scenarios_computed_torque_poles():
    """q = kp², q_v = kd² − 2 kp, r = 1 from the rov_alpha5 scenario's per-DOF kp, kd (4 and 4 on the base, 16 and
    8 on the joints, as config/scenarios/rov_alpha5.yaml writes them)."""
    from mbs_ros.validation.lqr_vs_ct import lqr_overrides

    o = lqr_overrides("rov_alpha5")
    assert o["robots[0].controller.law"] == "lqr" and o["robots[0].controller.lqr_scaling"] == "mass"
    assert o["robots[0].controller.lqr_q_position"] == [16.0] * 6 + [256.0] * 4
    assert o["robots[0].controller.lqr_q_velocity"] == [8.0] * 6 + [32.0] * 4


def test_study_metrics_of_a_known_record():
    """Position error 0.3 m (3-4-0 triangle /10), attitude 0.2 rad about z, joints 0.1 and −0.25 rad, a force of
    5 N: the metrics are these numbers."""
    from types import SimpleNamespace

    from mbs_ros.validation.lqr_vs_ct import metrics

    n = 4
    q_d = np.tile(np.concatenate([[1.0, 2.0, 3.0], _quat([0, 0, 1], 0.1), [0.5, -0.5]]), (n, 1))
    q = q_d.copy()
    q[:, :3] += [0.3 * 0.6, 0.3 * 0.8, 0.0]
    q[:, 3:7] = _quat([0, 0, 1], 0.3)
    q[:, 7:] += [0.1, -0.25]
    tau = np.zeros((n, 8))
    tau[:, :3] = [3.0, 4.0, 0.0]
    tau[:, 6:] = [0.0, 2.0]
    rec = SimpleNamespace(q=q, q_d=q_d, tau_applied=tau, nq_base=7, nv_base=6, saturated=np.zeros(n, bool),
                          control_errors=0, t=np.arange(n) * 0.01)
    m = metrics(rec)
    assert m["position_rms"] == pytest.approx(0.3) and m["position_max"] == pytest.approx(0.3)
    assert m["attitude_rms"] == pytest.approx(0.2) and m["joints_max"] == pytest.approx(0.25)
    assert m["force_peak"] == pytest.approx(5.0) and m["torque_peak"] == 0.0 and m["effort_rms"] == pytest.approx(2.0)


def test_headless_lqr_tracks_the_vehicle_manipulator_as_computed_torque_with_the_same_poles():
    """law lqr through the controller core in a headless run (the node's code path): 1.5 s of the UVMS scenario's
    reference step; with the same nominal poles, LQR's base errors stay within 25 % of computed torque's and both
    have decayed from the 0.2 m / 0.2 rad step by the designed factor (1 + 3t) e^{−3t} ≈ 0.06, give or take."""
    from mbs_ros.headless import run_scenario
    from mbs_ros.validation.lqr_vs_ct import lqr_overrides, metrics

    out = {}
    for law, over in (("ct", {}), ("lqr", lqr_overrides("vehicle_manipulator"))):
        run = run_scenario("vehicle_manipulator", duration=1.5, overrides=over, energy=False)
        assert run.fault is None
        rec = next(iter(run.robots.values()))
        assert rec.control_errors == 0
        out[law] = metrics(rec)["series"]
    for key in ("position", "attitude"):
        ct, lqr = out["ct"][key][-1], out["lqr"][key][-1]
        assert lqr == pytest.approx(ct, rel=0.25), (key, ct, lqr)
        assert lqr < 0.2 * out["lqr"][key][1], (key, out["lqr"][key][1], lqr)


@pytest.mark.slow
def test_study_writes_its_figure_under_out_unless_asked(tmp_path, monkeypatch):
    """issue 31 item 21: ``python -m mbs_ros.validation lqr-vs-ct`` overwrote the tracked docs/img/lqr_vs_ct.png by
    default. A short run (0.05 s) from a scratch working directory writes out/lqr_vs_ct.png there and leaves the
    repository's figure byte for byte and time for time as it was; ``--output`` (and the old ``--plot``) choose."""
    import hashlib
    from pathlib import Path

    from mbs_ros.validation import cli, lqr_vs_ct

    tracked = Path(lqr_vs_ct.__file__).resolve().parents[2] / "docs" / "img" / "lqr_vs_ct.png"
    before = (hashlib.sha256(tracked.read_bytes()).hexdigest(), tracked.stat().st_mtime_ns)
    monkeypatch.chdir(tmp_path)
    args = ["lqr-vs-ct", "--duration", "0.05", "--no-water", "--json"]
    assert cli.main(args) == 0
    assert (tmp_path / "out" / "lqr_vs_ct.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (hashlib.sha256(tracked.read_bytes()).hexdigest(), tracked.stat().st_mtime_ns) == before
    parser = cli.parser(cli.studies())
    assert parser.parse_args(["lqr-vs-ct"]).plot == "out/lqr_vs_ct.png"
    for flag in ("--output", "--plot"):
        assert parser.parse_args(["lqr-vs-ct", flag, "docs/img/lqr_vs_ct.png"]).plot == "docs/img/lqr_vs_ct.png"


# ---------------------------------------------------------------------- gain schedule over an LPV family
def _pendulum_family(thetas):
    """The pendulum's linear models by hand at each θ (A = [[0, 1], [α(θ), 0]], B = [0, 1/J]), with an
    LPVFamily's fields."""
    from types import SimpleNamespace

    g, m, l, J = 9.81, 1.5, 0.4, 0.02 + 1.5 * 0.4 ** 2
    A = np.array([[[0.0, 1.0], [-m * g * l * math.sin(t) / J, 0.0]] for t in thetas])
    B = np.array([[[0.0], [1.0 / J]] for _ in thetas])
    return SimpleNamespace(grid=np.array(thetas), A=A, B=B, state_names=("dq[0]", "dv[0]")), (g, m, l, J)


def test_scheduled_gain_is_the_hand_gain_at_grid_points_and_interpolated_between():
    from mbs_ros.controllers.lqr import ScheduledLQR

    family, (g, m, l, J) = _pendulum_family([0.3, 0.7, 1.1])
    model = Model.from_urdf(PENDULUM, base="fixed", gravity=(0.0, 0.0, -g))
    law = ScheduledLQR(model, family, lambda q_d, v_d: q_d[0], q_weight=3.0, v_weight=0.5, r=0.2)
    hand = {t: np.array(_pendulum_gain(1 / J, -m * g * l * math.sin(t) / J, 3.0, 0.5, 0.2)) for t in (0.3, 0.7)}
    np.testing.assert_allclose(law.gain(0.7)[0], hand[0.7], rtol=1e-8)
    np.testing.assert_allclose(law.gain(0.5)[0], 0.5 * (hand[0.3] + hand[0.7]), rtol=1e-8)
    # the command at θ_d = 0.5 off the reference: τ_d by hand minus the interpolated gain times x
    K = 0.5 * (hand[0.3] + hand[0.7])
    np.testing.assert_allclose(law([0.6], [0.2], [0.5]), [-m * g * l * math.cos(0.5) - K @ [0.1, 0.2]], rtol=1e-9)
    with pytest.raises(ValueError, match="outside the family's grid"):
        law([0.0], [0.0], [1.3])


def test_scheduled_lqr_refuses_a_family_of_the_wrong_shape():
    from mbs_ros.controllers.lqr import ScheduledLQR

    family, _ = _pendulum_family([0.3, 0.7])
    model = Model.from_urdf(TWO_LINK, base="se3", gravity=(0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="family: A and B must be stacks"):
        ScheduledLQR(model, family, lambda q_d, v_d: 0.5)
    family, _ = _pendulum_family([0.7, 0.3])
    with pytest.raises(ValueError, match="strictly increasing"):
        ScheduledLQR(Model.from_urdf(PENDULUM, base="fixed"), family, lambda q_d, v_d: 0.5)


def test_scheduled_lqr_on_an_lpv_family_from_lpv_family():
    """With mbs_ros.dynamics.algorithms.lpv (issue 20's LPV families): the pendulum's family over θ from lpv_family; the
    schedule's gain at each grid point is the hand-derived one."""
    lpv = pytest.importorskip("mbs_ros.dynamics.algorithms.lpv")
    from mbs_ros.controllers.lqr import ScheduledLQR

    g, m, l, J = 9.81, 1.5, 0.4, 0.02 + 1.5 * 0.4 ** 2
    model = Model.from_urdf(PENDULUM, base="fixed", gravity=(0.0, 0.0, -g))
    grid = [0.2, 0.6, 1.0]

    def build(th):
        return model, np.array([th]), np.zeros(1), np.array([-m * g * l * math.cos(th)])

    family = lpv.lpv_family(build, grid, "theta")
    law = ScheduledLQR(model, family, lambda q_d, v_d: q_d[0], q_weight=3.0, v_weight=0.5, r=0.2)
    for th in grid:
        hand = _pendulum_gain(1 / J, -m * g * l * math.sin(th) / J, 3.0, 0.5, 0.2)
        np.testing.assert_allclose(law.gain(th)[0], hand, rtol=1e-6)
