"""Multibody Model (floating or fixed base + kinematic tree) against Pinocchio built from the same URDF text.

Random trees (up to 12 joints, random parents, random unit axes, origins, masses, c.o.m. offsets and full inertias,
mixes of revolute/prismatic/continuous/fixed joints) on every base Pinocchio can express: fixed, free-flyer (se3),
planar (se2), Schönflies as a composite joint (translation + revolute-unbounded z), spherical (so3) and SO(3)×R³
(translation + spherical). The Schönflies composite's velocity is ``[ṗ_world; θ̇]`` while ours is the body-frame
``[Rᵀṗ; θ̇]``: ``v_ours = D v_pin`` with ``D = diag(Rᵀ, 1, I)``, so ``τ_pin = Dᵀ τ_ours`` and
``a_ours = D a_pin + Ḋ v_pin``. Every other base has Pinocchio's coordinates exactly.
"""
import math
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, simulate
from mbs_ros.dynamics.algorithms import multibody as alg

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")

ROOT = Path(__file__).resolve().parents[2]
ROBOTS = ROOT / "config" / "robots"
BASES_PIN = ("fixed", "se3", "se2", "schoenflies", "so3", "so3xr3")
REL = 1e-9
#: The comparisons with Pinocchio, gated 10-100x over the worst relative error measured over every case here:
#: M 1.2e-15, g 1.0e-14, C v 2.8e-15, C v + g 7.1e-15, RNEA 2.0e-15, forward dynamics 1.8e-15, joint wrenches
#: 1.8e-15, with external wrenches 6.6e-16 (RNEA) and 5.3e-16 (forward dynamics).
REL_PIN = 1e-13
REL_PIN_GRAVITY = 3e-13


# ------------------------------------------------------------------------------------------- random URDF trees
def _f(x):
    return " ".join(repr(float(a)) for a in x)


def _random_inertia(rng):
    """Physically valid: principal moments from second moments of a mass distribution, rotated."""
    s = rng.uniform(0.02, 0.5, size=3)
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return R @ np.diag([s[1] + s[2], s[0] + s[2], s[0] + s[1]]) @ R.T


def _inertial(rng):
    J = _random_inertia(rng)
    return (f'<inertial><origin xyz="{_f(0.15 * rng.normal(size=3))}" rpy="{_f(rng.uniform(-3, 3, 3))}"/>'
            f'<mass value="{float(rng.uniform(0.3, 3.0))!r}"/>'
            f'<inertia ixx="{float(J[0, 0])!r}" ixy="{float(J[0, 1])!r}" ixz="{float(J[0, 2])!r}" iyy="{float(J[1, 1])!r}" iyz="{float(J[1, 2])!r}" '
            f'izz="{float(J[2, 2])!r}"/></inertial>')


def random_urdf(rng, n_joints, types=("revolute", "continuous", "prismatic", "fixed"), frame_link=True):
    """A random tree: link k > 0 hangs from a random earlier link through joint k; joint names are a random
    permutation of j0..j{n-1} so that Pinocchio's name-sorted depth-first order differs from the XML order."""
    names = [f"j{i}" for i in rng.permutation(n_joints)]
    links = ['<link name="base_link">' + _inertial(rng) + "</link>"]
    joints = []
    for k in range(1, n_joints + 1):
        jtype = types[rng.integers(len(types))]
        if k == 1 and jtype == "fixed":
            jtype = "revolute"  # at least one movable joint
        parent = "base_link" if k == 1 else ("base_link" if rng.random() < 0.2 else f"l{rng.integers(1, k)}")
        axis = rng.normal(size=3)
        if rng.random() < 0.25:  # sometimes axis-aligned (Pinocchio then uses its specialised joints)
            axis = np.eye(3)[rng.integers(3)] * rng.choice([-1, 1])
        axis /= np.linalg.norm(axis)
        limit = '<limit lower="-3" upper="3" effort="10" velocity="10"/>' if jtype in ("revolute", "prismatic") else ""
        links.append(f'<link name="l{k}">' + _inertial(rng) + "</link>")
        joints.append(f'<joint name="{names[k - 1]}" type="{jtype}"><parent link="{parent}"/><child link="l{k}"/>'
                      f'<origin xyz="{_f(0.4 * rng.normal(size=3))}" rpy="{_f(rng.uniform(-3, 3, 3))}"/>'
                      f'<axis xyz="{_f(axis)}"/>{limit}</joint>')
    if frame_link:  # a massless frame on a fixed joint (a tool frame)
        links.append('<link name="tool0"/>')
        joints.append(f'<joint name="tool_joint" type="fixed"><parent link="l{n_joints}"/><child link="tool0"/>'
                      f'<origin xyz="{_f(rng.normal(size=3))}" rpy="{_f(rng.uniform(-3, 3, 3))}"/></joint>')
    return '<robot name="random">' + "".join(links) + "".join(joints) + "</robot>"


def pin_root_joint(base):
    if base == "fixed":
        return None
    if base == "se3":
        return pin.JointModelFreeFlyer()
    if base == "se2":
        return pin.JointModelPlanar()
    if base == "so3":
        return pin.JointModelSpherical()
    c = pin.JointModelComposite()
    c.addJoint(pin.JointModelTranslation())
    c.addJoint(pin.JointModelRUBZ() if base == "schoenflies" else pin.JointModelSpherical())
    return c


def pin_model(urdf, base, gravity):
    root = pin_root_joint(base)
    m = pin.buildModelFromXML(urdf, root) if root is not None else pin.buildModelFromXML(urdf)
    m.gravity = pin.Motion(np.concatenate([gravity, np.zeros(3)]))
    return m


class Pair:
    """Our model and Pinocchio's of one URDF, with the velocity conversion v_ours = D(q) v_pin."""

    def __init__(self, urdf, base, gravity=(0.0, 0.0, -9.81)):
        self.base = base
        # Pinocchio's model without mimic support: every <mimic> joint (TALOS's grippers) moves on its own in both
        self.ours = Model.from_urdf(urdf, base=base, gravity=gravity, mimic="independent")
        self.pm = pin_model(urdf, base, np.asarray(gravity, dtype=float))
        self.pd = self.pm.createData()
        assert (self.ours.nq, self.ours.nv) == (self.pm.nq, self.pm.nv)
        first = 2 if base != "fixed" else 1
        assert self.ours.joint_names == tuple(self.pm.names[first:])

    def D(self, q):
        D = np.eye(self.ours.nv)
        if self.base == "schoenflies":
            c, s = q[3], q[4]
            D[:3, :3] = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])  # Rzᵀ
        return D

    def Ddot(self, q, v_ours):
        Dd = np.zeros((self.ours.nv, self.ours.nv))
        if self.base == "schoenflies":
            w = v_ours[3]
            Rt = self.D(q)[:3, :3]
            Dd[:3, :3] = -np.array([[0.0, -w, 0.0], [w, 0.0, 0.0], [0.0, 0.0, 0.0]]) @ Rt
        return Dd

    def to_pin(self, q, v, a=None):
        D = self.D(q)
        vp = D.T @ v
        if a is None:
            return vp
        return vp, D.T @ (a - self.Ddot(q, v) @ vp)

    def rnea(self, q, v, a):
        """Our-coordinates inverse dynamics from pin.rnea: τ_ours = D⁻ᵀ τ_pin = D τ_pin."""
        vp, ap = self.to_pin(q, v, a)
        return self.D(q) @ pin.rnea(self.pm, self.pd, q, vp, ap)

    def mass_matrix(self, q):
        D = self.D(q)
        M = pin.crba(self.pm, self.pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        return D @ M @ D.T

    def gravity(self, q):
        return self.D(q) @ pin.computeGeneralizedGravity(self.pm, self.pd, q)

    def coriolis_times_v(self, q, v):
        """C_ours v from Pinocchio: τ(a = 0) − g."""
        return self.rnea(q, v, np.zeros_like(v)) - self.gravity(q)

    def forward(self, q, v, tau):
        D = self.D(q)
        vp = D.T @ v
        ap = pin.aba(self.pm, self.pd, q, vp, D.T @ tau)
        return D @ ap + self.Ddot(q, v) @ vp


def random_state(model, rng, vscale=1.0):
    return model.random_configuration(rng), vscale * rng.normal(size=model.nv)


def rel_err(x, ref, scale=0.0):
    """max |x − ref| relative to max |ref| (or to ``scale`` when larger: a quantity that may vanish, e.g. C v of
    a single joint, is compared on the scale of the terms it is made of)."""
    x, ref = np.asarray(x), np.asarray(ref)
    return float(np.abs(x - ref).max() / max(1e-300, np.abs(ref).max(), scale))


def _cases():
    out = []
    for i, base in enumerate(BASES_PIN):
        for k, n in enumerate((1, 5, 12)):
            out.append(pytest.param(base, n, 100 * i + k, id=f"{base}-{n}"))
    return out


# ------------------------------------------------------------------------------------- agreement with Pinocchio
@pytest.mark.parametrize("base,n,seed", _cases())
def test_dynamics_agree_with_pinocchio(base, n, seed):
    rng = np.random.default_rng(seed)
    pair = Pair(random_urdf(rng, n), base)
    ours = pair.ours
    for _ in range(3):
        q, v = random_state(ours, rng)
        a = rng.normal(size=ours.nv)
        tau = rng.normal(size=ours.nv)
        M = ours.mass_matrix(q)
        assert rel_err(M, pair.mass_matrix(q)) < REL_PIN
        np.testing.assert_array_equal(M, M.T)
        assert rel_err(ours.gravity_forces(q), pair.gravity(q)) < REL_PIN_GRAVITY
        Cv = ours.coriolis_matrix(q, v) @ v
        assert rel_err(Cv, pair.coriolis_times_v(q, v), np.abs(M).max() * np.abs(v).max() ** 2) < REL_PIN
        assert rel_err(ours.nonlinear_effects(q, v), pair.rnea(q, v, np.zeros(ours.nv))) < REL_PIN
        assert rel_err(ours.inverse_dynamics(q, v, a), pair.rnea(q, v, a)) < REL_PIN
        assert rel_err(ours.forward_dynamics(q, v, tau), pair.forward(q, v, tau)) < REL_PIN


# ------------------------------------------------------------------------------------------ structure of C
def _mdot(model, q, v, h=1e-3):
    """Ṁ along q·exp(t v), Richardson-extrapolated central differences (error O(h⁴))."""
    def D(e):
        return (model.mass_matrix(model.integrate(q, v, e)) - model.mass_matrix(model.integrate(q, v, -e))) / (2 * e)
    return (4 * D(h / 2) - D(h)) / 3


@pytest.mark.parametrize("base", BASES_PIN)
def test_mdot_minus_2c_is_skew(base):
    rng = np.random.default_rng(7 + BASES_PIN.index(base))
    model = Model.from_urdf(random_urdf(rng, 8), base=base)
    for _ in range(3):
        q, v = random_state(model, rng)
        C = model.coriolis_matrix(q, v)
        N = _mdot(model, q, v) - 2 * C
        scale = np.abs(model.mass_matrix(q)).max() * np.abs(v).max()
        assert np.abs(C).max() > 1e-2 * scale  # not trivially zero
        assert np.abs(N + N.T).max() < REL * scale


@pytest.mark.parametrize("base", BASES_PIN)
def test_inverse_forward_round_trip(base):
    rng = np.random.default_rng(20 + BASES_PIN.index(base))
    model = Model.from_urdf(random_urdf(rng, 12), base=base)
    for _ in range(3):
        q, v = random_state(model, rng)
        tau = rng.normal(size=model.nv)
        a = model.forward_dynamics(q, v, tau)
        assert rel_err(model.inverse_dynamics(q, v, a), tau) < 1e-10
        a2 = rng.normal(size=model.nv)
        assert rel_err(model.forward_dynamics(q, v, model.inverse_dynamics(q, v, a2)), a2) < 1e-10


def _simpson(y, dt):
    assert (len(y) - 1) % 2 == 0
    return dt / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())


@pytest.mark.slow
@pytest.mark.parametrize("base", BASES_PIN)
def test_energy_balance_with_random_torques(base):
    """One simulated second (RKMK4, 1 ms) under gravity with smooth random torques: E(T) − E(0) = ∫ vᵀτ dt
    (Simpson's rule on the steps)."""
    rng = np.random.default_rng(30 + BASES_PIN.index(base))
    model = Model.from_urdf(random_urdf(rng, 5), base=base)
    amp, freq, phase = rng.normal(size=(3, model.nv))

    def tau(t, q, v):
        return 2.0 * amp * np.sin(3.0 * freq * t + phase)

    q0, v0 = random_state(model, rng, vscale=0.5)
    dt, steps = 1e-3, 1000
    t, Q, Vs = simulate(model, q0, v0, tau, dt=dt, steps=steps, method="rk4")
    E = np.array([model.kinetic_energy(q, v) + model.potential_energy(q) for q, v in zip(Q, Vs)])
    power = np.array([v @ tau(tk, q, v) for tk, q, v in zip(t, Q, Vs)])
    work = _simpson(power, dt)
    assert abs(work) > 1e-2  # the torques really work
    assert abs(E[-1] - E[0] - work) < 1e-8 * max(1.0, np.abs(E - E[0]).max())


def test_torque_free_floating_system_keeps_its_spatial_momentum():
    """No gravity, no torque, se3 base: the whole system's spatial momentum is constant — checks C v
    including its base/arm coupling, which energy alone would not."""
    rng = np.random.default_rng(40)
    model = Model.from_urdf(random_urdf(rng, 6), base="se3", gravity=(0, 0, 0))
    q0, v0 = random_state(model, rng)
    _, Q, Vs = simulate(model, q0, v0, np.zeros(model.nv), dt=1e-3, steps=1000)
    h0 = model.spatial_momentum(q0, v0)
    drift = max(np.abs(model.spatial_momentum(q, v) - h0).max() for q, v in zip(Q[::100], Vs[::100]))
    assert np.abs(Vs[-1] - v0).max() > 1e-2
    assert drift < 1e-9 * max(1.0, np.abs(h0).max())
    # energy too
    assert abs(model.kinetic_energy(Q[-1], Vs[-1]) - model.kinetic_energy(q0, v0)) < 1e-9 * model.kinetic_energy(q0, v0)


@pytest.mark.parametrize("base", BASES_PIN)
@pytest.mark.parametrize("backend", ("compiled", "numpy"))
def test_spatial_momentum_equals_pinocchio(base, backend):
    """Σ_i I_i V_i in world axes about the world origin against Pinocchio's bodies' momenta: each body's spatial
    velocity in its own frame (data.v) times its inertia, moved to the world by data.oMi (``act`` of a Force)."""
    rng = np.random.default_rng(45 + BASES_PIN.index(base))
    pair = Pair(random_urdf(rng, 8), base)
    ours = pair.ours if backend == "compiled" else pair.ours.with_backend("numpy")
    assert ours.backend == backend
    for _ in range(3):
        q, v = random_state(ours, rng)
        pin.forwardKinematics(pair.pm, pair.pd, q, pair.to_pin(q, v))
        h = sum(pair.pd.oMi[i].act(pair.pm.inertias[i] * pair.pd.v[i]).vector for i in range(1, pair.pm.njoints))
        np.testing.assert_allclose(ours.spatial_momentum(q, v), h, rtol=0, atol=1e-12 * max(1.0, np.abs(h).max()))


# ----------------------------------------------------------------------------------- joint wrenches, link poses
@pytest.mark.parametrize("base", BASES_PIN)
def test_joint_wrenches_equal_pinocchio_internal_forces(base):
    """pin.rnea leaves in data.f[i] the wrench joint i transmits to its subtree, in the joint's frame."""
    rng = np.random.default_rng(50 + BASES_PIN.index(base))
    pair = Pair(random_urdf(rng, 10), base)
    ours = pair.ours
    for _ in range(2):
        q, v = random_state(ours, rng)
        a = rng.normal(size=ours.nv)
        vp, ap = pair.to_pin(q, v, a)
        pin.rnea(pair.pm, pair.pd, q, vp, ap)
        ref = np.array([pair.pd.f[pair.pm.getJointId(name)].vector for name in ours.joint_names])
        assert rel_err(ours.joint_wrenches(q, v, a), ref) < REL_PIN


@pytest.mark.parametrize("base", ["fixed", "se3"])
def test_armature_agrees_with_pinocchios_and_enters_energy_and_joint_wrenches(base):
    """``armature`` (rotor inertia) against Pinocchio's ``model.armature`` (M + diag(armature), in its RNEA and ABA
    too), both backends; the kinetic energy gains ½ Σ armature v², and the joint wrenches with ``tau`` leave no
    component along a joint's motion when a is the forward dynamics of tau (the rotor takes armature · a)."""
    rng = np.random.default_rng(70 + (base == "se3"))
    urdf = random_urdf(rng, 7)
    pair = Pair(urdf, base)
    names = pair.ours.joint_names
    armature = dict(zip(names, rng.uniform(0.05, 2.0, size=len(names))))
    model = Model.from_urdf(urdf, base=base, mimic="independent", armature=armature)
    arm = np.zeros(pair.pm.nv)
    for name, x in armature.items():
        arm[pair.pm.idx_vs[pair.pm.getJointId(name)]] = x
    pair.pm.armature = arm
    for m in (model, model.with_backend("numpy")):
        for _ in range(2):
            q, v = random_state(m, rng)
            a, tau = rng.normal(size=(2, m.nv))
            assert rel_err(m.mass_matrix(q), pair.mass_matrix(q)) < REL_PIN
            assert rel_err(m.inverse_dynamics(q, v, a), pair.rnea(q, v, a)) < REL_PIN
            assert rel_err(m.forward_dynamics(q, v, tau), pair.forward(q, v, tau)) < REL_PIN
            plain = pair.ours.kinetic_energy(q, v) + 0.5 * float(arm @ (v * v))
            assert m.kinetic_energy(q, v) == pytest.approx(plain, rel=1e-13)
            acc = m.forward_dynamics(q, v, tau)
            reaction = m.joint_wrenches(q, v, acc, tau=tau)
            along = np.einsum("jx,jx->j", np.asarray(m.tree.s_joint), reaction)
            np.testing.assert_allclose(along, 0.0, atol=1e-9 * np.abs(tau).max())


def test_joint_wrench_of_a_leaf_balances_its_body():
    """Free-body diagram of a leaf body, independent of RNEA: the wrench its joint transmits equals
    d/dt(I V) − ad_Vᵀ I V − W_gravity, with V its body twist from the link pose by finite differences."""
    rng = np.random.default_rng(60)
    urdf = random_urdf(rng, 7, types=("revolute", "prismatic", "continuous"), frame_link=False)
    model = Model.from_urdf(urdf, base="se3")
    tree = model.tree
    leaf = next(k for k in range(tree.nb - 1, 0, -1) if k not in tree.parent)
    link = model.link_names.index(tree.body_names[leaf])
    q, v = random_state(model, rng)
    a = rng.normal(size=model.nv)

    def pose(e):
        return model.link_poses(model.integrate(q, v * e + 0.5 * a * e * e))[link]

    def body_twist(e, h=1e-5):
        T = pose(e)
        Td = (pose(e + h) - pose(e - h)) / (2 * h)
        X = np.linalg.inv(T) @ Td
        return np.array([X[0, 3], X[1, 3], X[2, 3], X[2, 1], X[0, 2], X[1, 0]])

    h = 1e-3
    V = body_twist(0.0)
    Vd = (body_twist(h) - body_twist(-h)) / (2 * h)
    I = tree.body_inertia[leaf]
    w, u = V[3:], V[:3]
    p = I @ V
    coriolis = np.concatenate([np.cross(w, p[:3]), np.cross(w, p[3:]) + np.cross(u, p[:3])])  # −ad_Vᵀ p
    R = pose(0.0)[:3, :3]
    m, c = tree.body_mass[leaf], tree.body_first_moment[leaf] / tree.body_mass[leaf]
    Fg = m * R.T @ model.gravity
    W_expected = I @ Vd + coriolis - np.concatenate([Fg, np.cross(c, Fg)])
    W = model.joint_wrenches(q, v, a)[leaf - 1]
    assert rel_err(W, W_expected) < 1e-6


def test_joint_wrenches_with_tau_leave_the_reaction_only():
    rng = np.random.default_rng(61)
    model = Model.from_urdf(random_urdf(rng, 8), base="se2")
    q, v = random_state(model, rng)
    tau = rng.normal(size=model.nv)
    a = model.forward_dynamics(q, v, tau)
    s = model.tree.s_joint
    total = model.joint_wrenches(q, v, a)
    reaction = model.joint_wrenches(q, v, a, tau=tau)
    np.testing.assert_allclose(np.einsum("jx,jx->j", s, total), tau[model.tree.nvb:], atol=1e-10)
    np.testing.assert_allclose(np.einsum("jx,jx->j", s, reaction), 0.0, atol=1e-10)
    np.testing.assert_allclose(total - reaction, s * tau[model.tree.nvb:, None], atol=1e-12)


def test_external_wrenches_match_pinocchio_fext():
    rng = np.random.default_rng(62)
    pair = Pair(random_urdf(rng, 6), "se3")
    ours = pair.ours
    q, v = random_state(ours, rng)
    a = rng.normal(size=ours.nv)
    f_ext = rng.normal(size=(ours.tree.nb, 6))
    fext_pin = [pin.Force.Zero()] + [pin.Force(f) for f in f_ext]
    ref = pin.rnea(pair.pm, pair.pd, q, v, a, fext_pin)
    assert rel_err(ours.inverse_dynamics(q, v, a, f_ext=f_ext), ref) < REL_PIN
    tau = rng.normal(size=ours.nv)
    assert rel_err(ours.forward_dynamics(q, v, tau, f_ext=f_ext),
                   pin.aba(pair.pm, pair.pd, q, v, tau, fext_pin)) < REL_PIN


@pytest.mark.parametrize("base", BASES_PIN)
def test_link_poses_equal_pinocchio_frames(base):
    rng = np.random.default_rng(70 + BASES_PIN.index(base))
    pair = Pair(random_urdf(rng, 9), base)
    ours = pair.ours
    assert ours.link_names[0] == "base_link" and "tool0" in ours.link_names
    assert sorted(ours.link_names) == sorted(f.name for f in pair.pm.frames if f.type == pin.FrameType.BODY)
    for _ in range(2):
        q = ours.random_configuration(rng)
        pin.framesForwardKinematics(pair.pm, pair.pd, q)
        ref = np.array([pair.pd.oMf[pair.pm.getFrameId(n, pin.FrameType.BODY)].homogeneous for n in ours.link_names])
        np.testing.assert_allclose(ours.link_poses(q), ref, rtol=0, atol=1e-12)
        assert set(ours.link_pose_dict(q)) == set(ours.link_names)


@pytest.mark.parametrize("base", [b for b in BASES_PIN if b != "schoenflies"])
def test_integrate_and_difference_equal_pinocchio(base):
    """Same coordinates as Pinocchio for these bases (Schönflies' velocity differs by D, see the module doc)."""
    rng = np.random.default_rng(80 + BASES_PIN.index(base))
    pair = Pair(random_urdf(rng, 8), base)
    ours = pair.ours
    q0, v = random_state(ours, rng)
    q1 = ours.integrate(q0, v, 0.3)
    np.testing.assert_allclose(q1, pin.integrate(pair.pm, q0, 0.3 * v), atol=1e-12)
    np.testing.assert_allclose(ours.difference(q0, q1), pin.difference(pair.pm, q0, q1), atol=1e-10)
    np.testing.assert_allclose(ours.neutral(), pin.neutral(pair.pm), atol=0)
    d = ours.dexp_inv(0.1 * v)
    nvb = ours.tree.nvb
    np.testing.assert_array_equal(d[nvb:, nvb:], np.eye(ours.nv - nvb))
    np.testing.assert_array_equal(d[:nvb, nvb:], 0.0)
    if nvb:
        np.testing.assert_allclose(d[:nvb, :nvb], ours.group.dexp_inv(0.1 * v[:nvb]), atol=0)


# ----------------------------------------------------------------------------------------- single rigid body
def _one_link_urdf(mass, inertia, com):
    J = [[float(x) for x in row] for row in inertia]
    mass = float(mass)
    return (f'<robot name="body"><link name="body"><inertial><origin xyz="{_f(com)}" rpy="0 0 0"/>'
            f'<mass value="{mass!r}"/><inertia ixx="{J[0][0]!r}" ixy="{J[0][1]!r}" ixz="{J[0][2]!r}" '
            f'iyy="{J[1][1]!r}" iyz="{J[1][2]!r}" izz="{J[2][2]!r}"/></inertial></link></robot>')


@pytest.mark.parametrize("base", ("se3", "schoenflies", "se2", "so3", "so3xr3"))
def test_one_link_urdf_is_the_rigid_body_and_the_tree_kernels_agree(base):
    rng = np.random.default_rng(90)
    mass, J, com = 1.7, np.array(_random_inertia(rng).tolist()), 0.2 * rng.normal(size=3)
    body = Model.rigid_body(base, mass=mass, inertia=J, com=com)
    urdf = Model.from_urdf(_one_link_urdf(mass, J, com), base=base)
    assert (urdf.nq, urdf.nv, urdf.joint_names, urdf.link_names) == (body.nq, body.nv, (), ("body",))
    np.testing.assert_allclose(urdf.I_b, body.I_b, atol=1e-15)
    assert urdf.mass == body.mass
    np.testing.assert_allclose(urdf.com, body.com, atol=1e-15)
    np.testing.assert_allclose(urdf.inertia, body.inertia, atol=1e-14)
    for _ in range(3):
        q, v = random_state(body, rng)
        a, tau = rng.normal(size=(2, body.nv))
        for name, ours, general in (
            ("M", body.mass_matrix(q), alg.crba(body, q)),
            ("C", body.coriolis_matrix(q, v), alg.coriolis_matrix(body, q, v)),
            ("g", body.gravity_forces(q), alg.gravity_forces(body, q)),
            ("nle", body.nonlinear_effects(q, v), alg.nonlinear_effects(body, q, v)),
            ("id", body.inverse_dynamics(q, v, a), alg.rnea(body, q, v, a)),
            ("fd", body.forward_dynamics(q, v, tau), alg.forward_dynamics(body, q, v, tau)),
            ("ke", body.kinetic_energy(q, v), alg.kinetic_energy(body, q, v)),
            ("pe", body.potential_energy(q), alg.potential_energy(body, q)),
            ("h", body.spatial_momentum(q, v), alg.spatial_momentum(body, q, v)),
        ):
            np.testing.assert_allclose(general, ours, rtol=1e-12, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(urdf.forward_dynamics(q, v, tau), body.forward_dynamics(q, v, tau), atol=1e-12)


# ------------------------------------------------------------------------------------------- base helpers
@pytest.mark.parametrize("base", ("se3", "schoenflies", "se2", "so3", "so3xr3", "fixed"))
def test_base_helpers_on_a_multibody_model(base):
    rng = np.random.default_rng(100)
    model = Model.from_urdf(random_urdf(rng, 4), base=base)
    q, v = random_state(model, rng)
    pos, quat = model.pose(q)
    q2 = model.configuration_from_pose(pos, quat, joints=q[model.tree.nqb:])
    np.testing.assert_allclose(model.link_poses(q2)[0], model.link_poses(q)[0], atol=1e-12)
    V = model.twist(q, v)
    vb = model.velocity_from_twist(q, V)
    assert vb.shape == (model.nv,) and not vb[model.tree.nvb:].any()
    np.testing.assert_allclose(model.twist(q, vb), V, atol=1e-12)
    W = rng.normal(size=6)
    tau, applied, dropped = model.wrench_to_generalized(q, W)
    assert tau.shape == (model.nv,) and not tau[model.tree.nvb:].any()
    assert tau @ v == pytest.approx(applied @ V, abs=1e-12)  # power of the base wrench
    np.testing.assert_allclose(applied + dropped, W)
    # the base wrench as an external wrench on body 0 gives the same generalised force
    f_ext = np.zeros((model.tree.nb, 6))
    f_ext[0] = W
    zero = np.zeros(model.nv)
    np.testing.assert_allclose(model.inverse_dynamics(q, zero, zero) - model.inverse_dynamics(q, zero, zero, f_ext),
                               tau, atol=1e-12)
    if base == "fixed":
        assert model.nv == model.tree.nj and not applied.any()
        with pytest.raises(ValueError, match="fixed base"):
            model.configuration_from_pose([1, 0, 0], [0, 0, 0, 1])


def test_model_is_immutable():
    model = Model.from_urdf(random_urdf(np.random.default_rng(0), 3), base="se3")
    with pytest.raises(Exception):
        model.base = "se2"
    for name in ("support", "body_inertia", "placement", "axis"):
        with pytest.raises(ValueError):
            getattr(model.tree, name).flat[0] = 1.0


# ------------------------------------------------------------------------------- robots in config/, URDF, YAML
def test_config_robots_load_and_agree():
    planar = Model.from_urdf(ROBOTS / "arm_2link_planar.urdf", base="se2")
    inline = Model.from_yaml(ROBOTS / "arm_2link_planar.yaml")
    assert inline.base == "se2" and inline.name == "arm_2link_planar"
    assert inline.joint_names == planar.joint_names == ("joint1", "joint2")
    assert inline.link_names == planar.link_names
    rng = np.random.default_rng(110)
    for _ in range(3):
        q, v = random_state(planar, rng)
        np.testing.assert_allclose(inline.mass_matrix(q), planar.mass_matrix(q), rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(inline.nonlinear_effects(q, v), planar.nonlinear_effects(q, v), atol=1e-12)
    arm = Model.from_yaml(ROBOTS / "arm_6dof.yaml")
    assert (arm.base, arm.nq, arm.nv, arm.link_names[0]) == ("se3", 13, 12, "vehicle")
    fixed = Model.from_xacro(ROBOTS / "arm_6dof.urdf.xacro", {"prefix": "r1_"})
    assert fixed.joint_names == tuple(f"r1_joint{i}" for i in range(1, 7))
    assert fixed.nq == 6 and fixed.link_names[-1] == "r1_tool0"


def test_world_root_places_a_fixed_base():
    urdf = ('<robot name="w"><link name="world"/><joint name="mount" type="fixed"><parent link="world"/>'
            '<child link="base_link"/><origin xyz="1 2 3" rpy="0 0 1.5707963267948966"/></joint>'
            + random_urdf(np.random.default_rng(120), 3).split('<robot name="random">')[1])
    model = Model.from_urdf(urdf, base="fixed")
    pair_pm = pin.buildModelFromXML(urdf)
    assert model.link_names[:2] == ("world", "base_link")
    q = model.random_configuration(np.random.default_rng(121))
    T = model.link_pose_dict(q)
    np.testing.assert_allclose(T["world"], np.eye(4))
    np.testing.assert_allclose(T["base_link"][:3, 3], [1, 2, 3])
    pd = pair_pm.createData()
    np.testing.assert_allclose(model.gravity_forces(q), pin.computeGeneralizedGravity(pair_pm, pd, q), rtol=1e-12,
                               atol=1e-12)
    with pytest.raises(ValueError, match="world"):
        Model.from_urdf(urdf, base="se3")


@pytest.mark.parametrize("bad,message", [
    ("joint type=\"floating\"", "type 'floating' is not supported"),
    ("axis xyz=\"0 0 0\"", "axis must be a non-zero vector"),
])
def test_bad_urdf_is_refused_with_the_joint_named(bad, message):
    urdf = ('<robot name="b"><link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" '
            'iyz="0" izz="1"/></inertial></link><link name="b"/>'
            '<joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="1 0 0"/>'
            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    urdf = urdf.replace('joint name="j" type="revolute"', 'joint name="j" type="floating"') if "floating" in bad \
        else urdf.replace('axis xyz="1 0 0"', bad)
    with pytest.raises(ValueError, match=message):
        Model.from_urdf(urdf)


_GOOD_YAML = """\
robot:
  name: arm
  base: fixed
  links:
    - {name: base_link, mass: 2.0, inertia: [0.1, 0, 0, 0.1, 0, 0.1]}
    - {name: l1, mass: 1.0, com: [0.1, 0, 0], inertia: [0.01, 0, 0, 0.02, 0, 0.02], visual: {box: [0.2, 0.05, 0.05]}}
    - {name: l2, mass: 1.0, inertia: [[0.01, 0, 0], [0, 0.02, 0], [0, 0, 0.02]]}
    - {name: l3, mass: 0.5, inertia: [0.01, 0, 0, 0.01, 0, 0.01], visual: {sphere: {radius: 0.05}}}
  joints:
    - {name: j1, type: revolute, parent: base_link, child: l1, axis: [0, 0, 1]}
    - {name: j2, type: continuous, parent: l1, child: l2, origin: {xyz: [0.2, 0, 0]}, axis: [0, 1, 0]}
    - {name: j3, type: prismatic, parent: l2, child: l3, origin: {xyz: [0.2, 0, 0], rpy: [0, 0, 0.3]}, axis: [1, 0, 0]}
"""


@pytest.mark.parametrize("old,new,key,message", [
    ("axis: [1, 0, 0]", "axis: [1, 0]", "robot.joints[2].axis", "expected 3 numbers"),
    ("type: continuous", "type: ball", "robot.joints[1].type", "expected one of"),
    ("parent: l1", "parent: nowhere", "robot.joints[1].parent", "no link named 'nowhere'"),
    ("mass: 2.0", "mass: -2.0", "robot.links[0].mass", "expected a number >= 0"),
    ("inertia: [0.1, 0, 0, 0.1, 0, 0.1]", "inertia: [0.1, 0.1]", "robot.links[0].inertia", "expected 6 numbers"),
    ("base: fixed", "base: se4", "robot.base", "expected one of"),
    ("{box: [0.2, 0.05, 0.05]}", "{box: [0.2, 0.05, 0.05], sphere: {radius: 1}}", "robot.links[1].visual",
     "exactly one of"),
    ("origin: {xyz: [0.2, 0, 0]}", "origin: {xyz: [0.2, 0, 0], ryp: [0, 0, 0]}", "robot.joints[1].origin.ryp",
     "unknown key"),
    ("name: j1, ", "", "robot.joints[0].name", "missing"),
    ("child: l3", "child: l2", "robot.joints[2].child", "already the child"),
])
def test_yaml_errors_name_the_file_and_the_key(tmp_path, old, new, key, message):
    good = tmp_path / "good.yaml"
    good.write_text(_GOOD_YAML)
    model = Model.from_yaml(good)
    assert model.joint_names == ("j1", "j2", "j3") and model.nq == 4 and model.nv == 3
    assert _GOOD_YAML.count(old) == 1
    bad = tmp_path / "arm.yaml"
    bad.write_text(_GOOD_YAML.replace(old, new))
    with pytest.raises(ValueError) as info:
        Model.from_yaml(bad)
    text = str(info.value)
    assert text.startswith(f"{bad}: {key}: "), text
    assert message in text


def test_yaml_urdf_reference_errors(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("robot:\n  base: se3\n  urdf: missing.urdf\n")
    with pytest.raises(ValueError, match=r"r\.yaml: robot\.urdf: file not found"):
        Model.from_yaml(path)
    path.write_text("robot:\n  base: se3\n  urdf: x.urdf\n  links: []\n")
    with pytest.raises(ValueError, match=r"r\.yaml: robot: give either"):
        Model.from_yaml(path)
    path.write_text("robot: [1, 2]\n")
    with pytest.raises(ValueError, match=r"r\.yaml: robot: expected a mapping"):
        Model.from_yaml(path)
