"""Contact and joint limits against the closed forms of ``../shared/notes/contact.md``.

Each expected value is the textbook formula, computed here from the scene's numbers; the tolerances are what the
quantity allows: the time-stepping scheme keeps velocities exact for constant forces (its only approximation is
in positions, O(h)), so velocities and forces are checked to rounding (a few hundred ulps of the value after the
many steps), positions to what the step's discretisation gives, stated per test.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.geometry import box, cylinder, find_contacts, halfspace, sphere
from mbs_ros.dynamics.contact.step import step

G = 9.81
#: Free objects live on SO(3)×R³ (velocity [ṙ_world; ω_body]): a turning body's centre then moves straight over a
#: step, as the closed forms' does; on SE(3) the body-fixed velocity turns with the body over the step, an O(h)
#: departure measured in ``test_contact_refinement``.
BASE = "so3xr3"
#: Coal's signed distance of a box face touching a plane exactly: -1.0e-11 m (its boxes are that much larger).
BOX_OFFSET = 1.1e-11


def _box_model(m, size):
    a, b, c = size
    inertia = np.diag([m * (b * b + c * c), m * (a * a + c * c), m * (a * a + b * b)]) / 12.0
    return Model.rigid_body(BASE, m, inertia, gravity=(0.0, 0.0, -G))


def _sphere_model(m, r):
    return Model.rigid_body(BASE, m, np.eye(3) * 0.4 * m * r * r, gravity=(0.0, 0.0, -G))


def _world_velocity(q, v):
    """(linear, angular) world velocities of an so3xr3 body: ṙ is v[:3], ω is in the body."""
    return v[:3], Rotation.from_quat(q[3:]).as_matrix() @ v[3:]


def _simulate(models, qs, vs, shapes, T, h, record=None):
    """Run ``T`` seconds of contact steps; ``record(k, qs, vs, info)`` after each."""
    qs, vs = list(qs), list(vs)
    taus = [np.zeros(m.nv) for m in models]
    info = None
    for k in range(int(round(T / h))):
        poses = [alg.body_placements(m, q) for m, q in zip(models, qs)]
        # a gap closes within the step only when the step sees it: the margin covers what a body moves in it
        margin = 1e-3 + 2.0 * h * max(float(np.linalg.norm(v)) for v in vs) * 0.5
        contacts = find_contacts(poses, shapes, margin=margin)
        qs, vs, info = step(models, qs, vs, taus, h, contacts, warm=info, margin=margin)
        assert info.result is None or info.result.converged, info.result
        if record is not None:
            record(k, qs, vs, info)
    return qs, vs, info


def _on_incline(theta, size_z):
    """Pose of a body of half-height size_z/2 resting on the plane through 0 tilted by theta about x."""
    n = np.array([0.0, -math.sin(theta), math.cos(theta)])
    q = np.zeros(7)
    q[:3] = 0.5 * size_z * n
    q[3:] = Rotation.from_rotvec([theta, 0.0, 0.0]).as_quat()
    return q, n, np.array([0.0, -math.cos(theta), -math.sin(theta)])  # pose, normal, downslope


@pytest.mark.parametrize("theta_deg,mu", [(30.0, 0.3), (45.0, 0.9), (20.0, 0.5), (26.0, 0.5)])
def test_block_on_an_incline_sticks_or_slides_with_the_coulomb_acceleration(theta_deg, mu):
    theta = math.radians(theta_deg)
    s, m, T, h = 0.2, 2.0, 2.0, 1e-3
    model = _box_model(m, (s, s, s))
    q, n, down = _on_incline(theta, s)
    shapes = [halfspace("ground", n, 0.0, mu), box("block", (s, s, s), (0, 0), mu=mu)]
    (q1,), (v1,), info = _simulate([model], [q], [np.zeros(6)], shapes, T, h)
    v_world, _ = _world_velocity(q1, v1)
    drift = (q1[:3] - q[:3]) @ down
    if math.tan(theta) <= mu:
        assert abs(drift) < 1e-6 and np.linalg.norm(v_world) < 1e-9
    else:
        a = G * (math.sin(theta) - mu * math.cos(theta))
        assert v_world @ down == pytest.approx(a * T, rel=1e-6)
        # semi-implicit Euler: x_N = h² a N(N+1)/2 exactly for a constant acceleration
        N = int(round(T / h))
        assert drift == pytest.approx(h * h * a * N * (N + 1) / 2, rel=1e-6)
    assert info.n_contacts == 4 and abs((q1[:3] @ n) - 0.5 * s) < 1e-9


def test_a_sliding_box_stops_after_v0_over_mu_g_having_gone_v0_squared_over_2_mu_g():
    s, m, mu, v0, h = 0.2, 1.5, 0.4, 2.0, 1e-3
    model = _box_model(m, (s, s, s))
    q = np.array([0.0, 0.0, 0.5 * s, 0.0, 0.0, 0.0, 1.0])
    shapes = [halfspace("ground", (0, 0, 1), 0.0, mu), box("box", (s, s, s), (0, 0), mu=mu)]
    stopped = []

    def record(k, qs, vs, info):
        if not stopped and abs(vs[0][0]) < 1e-12:
            stopped.append(((k + 1) * h, qs[0][0]))

    (q1,), (v1,), _ = _simulate([model], [q], [np.array([v0, 0, 0, 0, 0, 0.0])], shapes, 1.0, h, record)
    t_stop, x_stop = stopped[0]
    assert t_stop == pytest.approx(v0 / (mu * G), abs=h)  # the step in which it stops
    # the distance of the discrete scheme: sum of h v_k with v_k = v0 - k h mu g up to the stop
    assert x_stop == pytest.approx(v0 ** 2 / (2 * mu * G), abs=v0 * h)
    assert q1[0] == x_stop and np.all(np.abs(v1) < 1e-12)


def test_a_bowling_ball_slides_then_rolls_from_2v0_over_7_mu_g_at_five_sevenths_v0():
    r, m, mu, v0, h = 0.11, 7.0, 0.2, 3.0, 1e-4
    model = _sphere_model(m, r)
    q = np.array([0.0, 0.0, r, 0.0, 0.0, 0.0, 1.0])
    shapes = [halfspace("lane", (0, 0, 1), 0.0, mu), sphere("ball", r, (0, 0), mu=mu)]
    rolling = []

    def record(k, qs, vs, info):
        v, w = _world_velocity(qs[0], vs[0])
        if not rolling and abs(v[0] - w[1] * r) < 1e-12:
            rolling.append(((k + 1) * h, v[0], w[1]))

    t_roll = 2 * v0 / (7 * mu * G)
    _simulate([model], [q], [np.array([v0, 0, 0, 0, 0, 0.0])], shapes, t_roll + 0.05, h, record)
    t, v, w = rolling[0]
    assert t == pytest.approx(t_roll, abs=h)
    assert v == pytest.approx(5 * v0 / 7, rel=1e-12)  # angular momentum about the contact point is kept
    assert w == pytest.approx(5 * v0 / (7 * r), rel=1e-12)


@pytest.mark.parametrize("shape,factor,mu", [("sphere", 5 / 7, 0.5), ("cylinder", 2 / 3, 0.5),
                                             ("sphere", None, 0.05)])
def test_rolling_down_an_incline(shape, factor, mu):
    theta, r, m, T, h = math.radians(25.0), 0.1, 1.0, 0.5, 1e-3
    if shape == "sphere":
        model = _sphere_model(m, r)
        geom = sphere("body", r, (0, 0), mu=mu)
    else:  # axis along body z, turned to lie along the world x (across the slope)
        L = 0.3
        model = Model.rigid_body(BASE, m, np.diag([m * (3 * r * r + L * L) / 12] * 2 + [0.5 * m * r * r]),
                                 gravity=(0.0, 0.0, -G))
        geom = cylinder("body", r, L, (0, 0), mu=mu)
    q, n, down = _on_incline(theta, 2 * r)
    if shape == "cylinder":
        q[3:] = (Rotation.from_rotvec([theta, 0.0, 0.0]) * Rotation.from_rotvec([0.0, math.pi / 2, 0.0])).as_quat()
    shapes = [halfspace("slope", n, 0.0, mu), geom]
    (q1,), (v1,), _ = _simulate([model], [q], [np.zeros(6)], shapes, T, h)
    v_world, _ = _world_velocity(q1, v1)
    if factor is not None and mu >= (1 - factor) * math.tan(theta):
        a = factor * G * math.sin(theta)
    else:
        a = G * (math.sin(theta) - mu * math.cos(theta))
    assert v_world @ down == pytest.approx(a * T, rel=1e-9)


def test_a_stack_of_five_boxes_stands_and_the_ground_carries_five_weights():
    n, s, m, mu, T, h = 5, 0.2, 1.0, 0.6, 10.0, 2e-3
    models = [_box_model(m, (s, s, s)) for _ in range(n)]
    qs = [np.array([0.0, 0.0, (k + 0.5) * s, 0.0, 0.0, 0.0, 1.0]) for k in range(n)]
    shapes = [halfspace("ground", (0, 0, 1), 0.0, mu)] + [box(f"box{k}", (s, s, s), (k, 0), mu=mu)
                                                          for k in range(n)]
    q_end, v_end, info = _simulate(models, qs, [np.zeros(6)] * n, shapes, T, h)
    drift = max(float(np.linalg.norm(a[:3] - b[:3])) for a, b in zip(q_end, qs))
    assert drift < 1e-3, drift
    lam = info.result.lam
    for k in range(n):  # the contacts under box k carry the n - k boxes above them (k = 0: the ground's)
        under = (lambda c: c.a == (0, 0) and c.b is None) if k == 0 else (lambda c: c.b == (k, 0))
        rows = [3 * i for i, c in enumerate(info.contacts) if under(c)]
        assert len(rows) == 4
        # Coal's box distances carry ~1e-11 m (a box at rest reads -1.1e-11); a gap error e changes an impulse
        # by m e / h, so the force by m e / h²: relative e / (g h²) = 2.6e-7 here
        assert lam[rows].sum() / h == pytest.approx((n - k) * m * G, rel=1e-11 / (G * h * h))


def test_a_joint_driven_into_its_limit_stops_there_and_the_limit_takes_drive_plus_gravity():
    m, L, tau, T, h, lo, hi = 1.0, 0.5, 2.0, 2.0, 1e-3, -0.5, 0.5
    urdf = f"""<robot name="one"><link name="base"/>
      <link name="arm"><inertial><origin xyz="{L} 0 0"/><mass value="{m}"/>
        <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
        <limit lower="{lo}" upper="{hi}" effort="100" velocity="10"/></joint></robot>"""
    model = Model.from_urdf(urdf, gravity=(0.0, 0.0, -G))
    q, v, info = np.zeros(1), np.zeros(1), None
    for _ in range(int(round(T / h))):
        (q,), (v,), info = step([model], [q], [v], [np.array([tau])], h, warm=info)
    assert hi - 1e-3 <= q[0] <= hi + 1e-3 and abs(v[0]) < 1e-12
    assert info.n_limits == 1
    # gravity's torque about +y of the weight at (L cos q, 0, -L sin q): L m g cos q, pushing the same way
    assert info.result.lam[0] / h == pytest.approx(tau + L * m * G * math.cos(q[0]), rel=1e-9)


def test_a_body_resting_on_the_seabed_presses_with_its_weight_less_its_buoyancy():
    s, m, rho, T, h = 0.2, 20.0, 1025.0, 1.0, 1e-3
    volume = s ** 3
    I = m * s * s / 6.0
    urdf = f"""<robot name="crate"><link name="crate">
      <inertial><mass value="{m}"/><inertia ixx="{I}" iyy="{I}" izz="{I}" ixy="0" ixz="0" iyz="0"/></inertial>
      <hydrodynamics density="{rho}"><buoyancy volume="{volume}" xyz="0 0 0"/></hydrodynamics></link></robot>"""
    model = Model.from_urdf(urdf, base=BASE, gravity=(0.0, 0.0, -G))
    q = np.array([0.0, 0.0, 0.5 * s - 20.0, 0.0, 0.0, 0.0, 1.0])  # the seabed 20 m down
    shapes = [halfspace("seabed", (0, 0, 1), -20.0, 0.8), box("crate", (s, s, s), (0, 0), mu=0.8)]
    (q1,), (v1,), info = _simulate([model], [q], [np.zeros(6)], shapes, T, h)
    rows = [3 * i for i in range(info.n_contacts)]
    assert info.n_contacts == 4
    assert info.result.lam[rows].sum() / h == pytest.approx((m - rho * volume) * G, rel=1e-11 / (G * h * h))
    assert np.linalg.norm(q1[:3] - q[:3]) < 1e-9


def test_a_dropped_box_lands_within_the_step_that_reaches_the_ground_and_stays():
    s, m, mu, H, h = 0.2, 1.0, 0.5, 0.3, 1e-3
    model = _box_model(m, (s, s, s))
    q = np.array([0.0, 0.0, 0.5 * s + H, 0.0, 0.0, 0.0, 1.0])
    shapes = [halfspace("ground", (0, 0, 1), 0.0, mu), box("box", (s, s, s), (0, 0), mu=mu)]
    log = []
    _simulate([model], [q], [np.zeros(6)], shapes, 0.5, h,
              lambda k, qs, vs, info: log.append((info.n_contacts, qs[0][2] - 0.5 * s, vs[0][2])))
    k0 = next(k for k, (n, _, _) in enumerate(log) if n)
    # the free fall up to the step before (semi-implicit Euler: z_k = H - h² g k(k+1)/2)
    assert log[k0 - 1][1] == pytest.approx(H - h * h * G * k0 * (k0 + 1) / 2, rel=1e-12)
    # the contact step lands it exactly (the gap closes at speed gap/h), and from then on it rests; "exactly" is
    # to Coal's box distance, which reads -1.0e-11 m at a touching face (BOX_OFFSET)
    assert abs(log[k0][1]) < 2 * BOX_OFFSET and log[k0][2] < 0.0
    assert all(abs(z) < 2 * BOX_OFFSET and abs(v) < 1e-12 for _, z, v in log[k0 + 1:])


def test_the_contact_power_is_the_friction_work_of_the_sliding_block_and_never_positive():
    """Energy port (seed 000): the impulses' work over each step, ``λᵀJ(v_f + v⁺)/2``. On the sliding block,
    friction's impulse ``μ m g cos θ h`` acts against the mean of the slope speed before (``v⁺ + μ g cos θ h``)
    and after (``v⁺``) it, and the normal impulse ``m g cos θ h`` takes the approach speed gravity gave within
    the step (``g cos θ h`` → 0, mean ``g cos θ h/2``): summed over N steps, ``μ m g cos θ`` times the distance
    slid (``h Σ v⁺``, the semi-implicit position update) plus ``N μ² m g² cos²θ h²/2`` plus ``N m g² cos²θ
    h²/2`` (the scheme's O(h) loss at a resting contact)."""
    theta, mu, s, m, T, h = math.radians(30.0), 0.3, 0.2, 2.0, 1.0, 1e-3
    model = _box_model(m, (s, s, s))
    q, n, down = _on_incline(theta, s)
    shapes = [halfspace("ground", n, 0.0, mu), box("block", (s, s, s), (0, 0), mu=mu)]
    powers = []
    (q1,), _, _ = _simulate([model], [q], [np.zeros(6)], shapes, T, h,
                            lambda k, qs, vs, info: powers.append(info.power))
    slid = (q1[:3] - q[:3]) @ down
    work = h * sum(powers)
    friction = mu * m * G * math.cos(theta)
    N, gc = len(powers), G * math.cos(theta)
    expected = -friction * (slid + N * mu * gc * h * h / 2) - N * m * gc * gc * h * h / 2
    assert work == pytest.approx(expected, rel=1e-9)
    assert max(powers) < 0.0


@pytest.mark.parametrize("scene", ["bowling", "drop", "limit"])
def test_contact_power_is_never_positive(scene):
    h = 1e-3
    powers = []
    record = lambda k, qs, vs, info: powers.append(info.power)  # noqa: E731
    if scene == "bowling":
        r, m = 0.11, 7.0
        _simulate([_sphere_model(m, r)], [np.array([0, 0, r, 0, 0, 0, 1.0])], [np.array([3.0, 0, 0, 0, 0, 0])],
                  [halfspace("lane", (0, 0, 1), 0.0, 0.2), sphere("ball", r, (0, 0), mu=0.2)], 0.6, h, record)
    elif scene == "drop":
        s = 0.2
        _simulate([_box_model(1.0, (s, s, s))], [np.array([0, 0, 0.5 * s + 0.3, 0, 0, 0, 1.0])], [np.zeros(6)],
                  [halfspace("ground", (0, 0, 1), 0.0, 0.5), box("box", (s, s, s), (0, 0), mu=0.5)], 0.5, h, record)
    else:
        urdf = """<robot name="one"><link name="base"/><link name="arm"><inertial><origin xyz="0.5 0 0"/>
          <mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
          <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
          <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint></robot>"""
        model = Model.from_urdf(urdf, gravity=(0.0, 0.0, -G))
        q, v, info = np.zeros(1), np.zeros(1), None
        for _ in range(1000):
            (q,), (v,), info = step([model], [q], [v], [np.array([2.0])], h, warm=info)
            powers.append(info.power)
    # at rest the work is zero in exact arithmetic: rounding relative to the scene's largest loss
    scale = max(abs(p) for p in powers)
    assert scale > 0.0 and max(powers) <= 1e-12 * scale, (max(powers), scale)


def _mujoco_elliptic():
    """tools.contact_vs_mujoco's MuJoCo settings with elliptic cones: solref 0.02 (default) and 0.002 (stiff), each
    at impratio 1 and 100."""
    pytest.importorskip("mujoco")
    import tools.contact_vs_mujoco as cvm

    return cvm, [st for st in cvm.SETTINGS if st[1] == "elliptic"]


def test_against_mujoco_the_closed_form_supports_ours_on_the_incline():
    """The same incline scenes in MuJoCo (elliptic cones; its default and a stiff solref): where the two differ,
    the closed form is with ours — MuJoCo's soft contact slides a little too fast and creeps where the block
    must stick (tools/contact_vs_mujoco.py prints the table)."""
    cvm, settings = _mujoco_elliptic()
    s, m, T, h = 0.2, 2.0, 2.0, 1e-3
    for theta_deg, mu in ((30.0, 0.3), (26.0, 0.5)):
        theta = math.radians(theta_deg)
        a = max(G * (math.sin(theta) - mu * math.cos(theta)), 0.0)
        model = _box_model(m, (s, s, s))
        q, n, down = _on_incline(theta, s)
        shapes = [halfspace("ground", n, 0.0, mu), box("block", (s, s, s), (0, 0), mu=mu)]
        (q1,), (v1,), _ = _simulate([model], [q], [np.zeros(6)], shapes, T, h)
        ours = abs(_world_velocity(q1, v1)[0] @ down - a * T)
        for setting in settings:
            theirs = abs(cvm.incline(theta_deg, mu, setting, T=T, h=h).values["v(T)"] - a * T)
            assert theirs > 1e-6 and ours < 1e-3 * theirs, (theta_deg, setting, ours, theirs)


def test_against_mujoco_the_closed_form_supports_ours_on_the_bowling_ball():
    """Slip → roll: MuJoCo's soft friction takes the slip out along its reference trajectory (time constant
    solref), not at once, so its ball rolls late (25 ms at the default, 2.7 ms stiff) and a little slow; ours
    rolls within the step of 2v₀/(7μg) at 5v₀/7 (tools/contact_vs_mujoco.py, scene bowling)."""
    cvm, settings = _mujoco_elliptic()
    r, m, mu, v0, h = 0.11, 7.0, 0.2, 3.0, 1e-4
    t_roll, v_roll = 2 * v0 / (7 * mu * G), 5 * v0 / 7
    shapes = [halfspace("lane", (0, 0, 1), 0.0, mu), sphere("ball", r, (0, 0), mu=mu)]
    log = []

    def record(k, qs, vs, info):
        v, w = _world_velocity(qs[0], vs[0])
        log.append(((k + 1) * h, v[0], v[0] - w[1] * r))

    _simulate([_sphere_model(m, r)], [np.array([0.0, 0.0, r, 0.0, 0.0, 0.0, 1.0])],
              [np.array([v0, 0, 0, 0, 0, 0.0])], shapes, t_roll + 0.05, h, record)
    ours_t = abs(next(t for t, _, slip in log if abs(slip) < 1e-4) - t_roll)  # the tool's threshold
    ours_v = abs(log[-1][1] - v_roll)
    for setting in settings:
        run = cvm.bowling(setting)
        theirs_t, theirs_v = abs(run.values["t_roll"] - t_roll), abs(run.values["v_roll"] - v_roll)
        # measured: MuJoCo 2.7e-3..2.6e-2 s and 1.6e-5..8e-4 m/s; ours 2.8e-5 s (< h) and 4e-14 m/s
        assert ours_t < h and ours_t < 0.1 * theirs_t, (setting, ours_t, theirs_t)
        assert ours_v < 1e-6 * theirs_v, (setting, ours_v, theirs_v)


def test_against_mujoco_the_closed_form_supports_ours_on_the_sliding_stop():
    """A box sliding to a stop: MuJoCo stops late (its soft friction decays the last of the speed with the
    solref time constant) and, sliding, its block lifts off the ground (the convex relaxation lets a sliding
    contact separate, up to μ‖c_t‖; 0.5–0.7 mm at the default solref, 26 mm stiff) where ours stays on it. The stop
    distance is a wash: both step semi-implicit Euler, whose distance is v₀²/(2μg) − v₀h/2 (ours, to rounding);
    MuJoCo's late stop adds a little distance that partly cancels the −v₀h/2."""
    cvm, settings = _mujoco_elliptic()
    s, m, mu, v0, h = 0.2, 1.5, 0.4, 2.0, 1e-3
    t_stop, x_stop = v0 / (mu * G), v0 ** 2 / (2 * mu * G)
    shapes = [halfspace("ground", (0, 0, 1), 0.0, mu), box("box", (s, s, s), (0, 0), mu=mu)]
    log = []
    _simulate([_box_model(m, (s, s, s))], [np.array([0.0, 0.0, 0.5 * s, 0.0, 0.0, 0.0, 1.0])],
              [np.array([v0, 0, 0, 0, 0, 0.0])], shapes, 1.0, h,
              lambda k, qs, vs, info: log.append(((k + 1) * h, qs[0][0], vs[0][0], qs[0][2] - 0.5 * s)))
    ours_t = abs(next(t for t, _, v, _ in log if abs(v) < 1e-4) - t_stop)
    ours_lift = max(z for *_, z in log)
    assert log[-1][1] == pytest.approx(x_stop - v0 * h / 2, abs=2 * h * h * mu * G)  # the scheme's distance
    for setting in settings:
        run = cvm.slide_stop(setting)
        theirs_t = abs(run.values["t_stop"] - t_stop)
        # measured: MuJoCo 1.3e-3..2.9e-2 s late, lifting 5e-4..2.6e-2 m; ours 3.2e-4 s (< h), no lift
        assert ours_t < h and ours_t < 0.5 * theirs_t, (setting, ours_t, theirs_t)
        assert ours_lift < 1e-9 and run.values["max lift"] > 1e-4, (setting, ours_lift, run.values["max lift"])


def test_against_mujoco_the_closed_form_supports_ours_on_the_sphere_sliding_down_an_incline():
    """A solid sphere on 25° with μ = 0.05 < (2/7) tan θ slides down at g(sin θ − μ cos θ): ours to rounding,
    MuJoCo 4.7e-4..6.8e-3 m/s² off (tools/contact_vs_mujoco.py, scene roll_sphere_mu0.05)."""
    cvm, settings = _mujoco_elliptic()
    theta, r, m, mu, T, h = math.radians(25.0), 0.1, 1.0, 0.05, 0.5, 1e-3
    a = G * (math.sin(theta) - mu * math.cos(theta))
    q, n, down = _on_incline(theta, 2 * r)
    (q1,), (v1,), _ = _simulate([_sphere_model(m, r)], [q], [np.zeros(6)],
                                [halfspace("slope", n, 0.0, mu), sphere("body", r, (0, 0), mu=mu)], T, h)
    ours = abs(_world_velocity(q1, v1)[0] @ down / T - a)
    for setting in settings:
        theirs = abs(cvm.rolling("sphere", mu, setting).values["a = v(T)/T"] - a)
        assert theirs > 1e-4 and ours < 1e-6 * theirs, (setting, ours, theirs)


def test_against_mujoco_the_closed_form_supports_ours_at_a_joint_limit():
    """A joint driven into its limit: MuJoCo's soft limit lets it past (6.5e-4 rad at the default solref, 1.1e-5
    stiff) and its reaction is drive plus gravity's torque there, not at the limit; ours stops at the limit
    (within the 1e-9 stabilisation slop) with the closed form's reaction."""
    cvm, settings = _mujoco_elliptic()
    tau, hi, m, L = 2.0, 0.5, 1.0, 0.5
    ours = cvm.joint_limit(None)  # the same model, torque and step as the limit test above
    reaction = tau + L * m * G * math.cos(hi)
    ours_q, ours_r = abs(ours.values["q(T) - upper"]), abs(ours.values["reaction"] - reaction)
    for setting in settings:
        run = cvm.joint_limit(setting)
        theirs_q, theirs_r = abs(run.values["q(T) - upper"]), abs(run.values["reaction"] - reaction)
        # measured: MuJoCo 1.1e-5..6.5e-4 rad past, reaction 2.6e-5..1.5e-3 N m off; ours 1e-9 rad, 2.4e-9 N m
        assert ours_q < 1e-3 * theirs_q and ours_r < 1e-3 * theirs_r, (setting, ours_q, theirs_q, ours_r, theirs_r)
