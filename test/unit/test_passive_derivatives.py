"""The analytical derivatives of the passive forces (mbs_ros/dynamics/algorithms/passive_derivatives.py) against central
differences on the group written here, and against closed forms.

Central differences: ``(τ_p(q ⊕ hε) − τ_p(q ⊕ −hε)) / 2h`` along ``model.integrate`` and along v, h = 1e-6 (error
~1e-10 of the scale), on the marine robot files (bluerov2_heavy on SE(3), bluerov2_heavy_alpha5: a tree on SE(3)
with quadratic damping on every link and joint damping and friction, vessel_3dof on SE(2)), in a current with a
rate; on uvms_6dof and asv_2link given random added mass, damping (with an offset, rotated element frame) and
buoyancy on every link and springs, dampers and friction on every joint; on every base group (fixed, SE(3),
SO(3)×R³, SO(3), SE(2), Schönflies); on a tree with mimic joints and a continuous joint.

Closed forms (hand-derived here): linear damping alone, ``∂τ/∂v = −D``, ``∂τ/∂q = 0``; the same in a current U,
``∂τ/∂δ_ω = D[:, :3] û`` with ``u = Rᵀ U`` (R from the quaternion by scipy); quadratic damping,
``∂τ/∂v = −diag(2 d |v|)``; joints, ``−k``, ``−d``, ``−(f/v_f) sech²(θ̇/v_f)`` on the diagonal. Buoyancy is part of
g(q), not τ_p: its derivative (Fossen's restoring g(η): ``∂g/∂δ_ω = −[(m − ρ∇) ĝ_b; (m r_g − ρ∇ r_b)^ ĝ_b]``,
and at rest with W = B the metacentric ``diag(0, 0, 0, W·BG, W·BG, 0)``) is checked on ``Model.rnea_derivatives``.
"""
from __future__ import annotations

import math
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model, ModelWarning
from mbs_ros.dynamics.algorithms.passive_derivatives import passive_derivatives
from urdf_text import joint, link, robot

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
H = 1e-6
RTOL = 1e-7  # of the largest entry; central differences reach ~1e-10 here
CURRENT = ((0.4, -0.25, 0.15), (0.05, 0.02, -0.03))  # world velocity [m/s] and rate [m/s²]


def central(model, q, v, springs=True, h=H):
    """``(∂τ_p/∂q, ∂τ_p/∂v)`` by central differences on the group (q ⊕ δ = model.integrate(q, δ))."""
    nv = model.nv
    dq, dv = np.zeros((nv, nv)), np.zeros((nv, nv))
    P = model.passive_forces
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        dq[:, i] = (P(model.integrate(q, e), v, springs) - P(model.integrate(q, -e), v, springs)) / (2 * h)
        dv[:, i] = (P(q, v + e, springs) - P(q, v - e, springs)) / (2 * h)
    return dq, dv


def assert_agree(model, q, v, springs=True):
    """Both backends' analytical derivatives (the compiled kernel and the numpy reference) against central
    differences of the model's passive forces."""
    rq, rv = central(model, q, v, springs)
    scale = max(1.0, np.abs(rq).max(), np.abs(rv).max())
    for m in (model.with_backend("compiled"), model.with_backend("numpy")):
        dq, dv = passive_derivatives(m, q, v, springs)
        err_q, err_v = np.abs(dq - rq).max() / scale, np.abs(dv - rv).max() / scale
        assert err_q < RTOL and err_v < RTOL, (m.backend, err_q, err_v)


def _numbers(a):
    return " ".join(repr(float(x)) for x in np.ravel(a))


def wet(urdf, base, rng, joints=True, density=None):
    """The URDF with random hydrodynamics on every link with an inertial (added mass, linear and quadratic damping
    in a rotated, offset element frame, buoyancy) and, with ``joints``, damping, friction and a spring on every
    movable joint (no spring on a continuous one)."""
    root = ET.fromstring(urdf)
    for el in root.findall("link"):
        if el.find("inertial") is None:
            continue
        A, B = rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
        h = ET.SubElement(el, "hydrodynamics")
        ET.SubElement(h, "origin", xyz=_numbers(rng.normal(size=3) * 0.1), rpy=_numbers(rng.normal(size=3)))
        ET.SubElement(h, "added_mass").text = _numbers(0.3 * A @ A.T)
        ET.SubElement(h, "linear_damping").text = _numbers(B @ B.T)
        ET.SubElement(h, "quadratic_damping").text = _numbers(rng.uniform(0.0, 3.0, 6))
        ET.SubElement(h, "buoyancy", volume="0.002", xyz=_numbers(rng.normal(size=3) * 0.05))
    if joints:
        for el in root.findall("joint"):
            kind = el.get("type")
            if kind == "fixed":
                continue
            for old in el.findall("dynamics"):
                el.remove(old)
            attrs = dict(damping=repr(float(rng.uniform(0.1, 2))), friction=repr(float(rng.uniform(0.1, 1))),
                         friction_velocity=repr(float(rng.uniform(0.2, 1))))
            if kind != "continuous":
                attrs.update(spring_stiffness=repr(float(rng.uniform(1, 20))),
                             spring_reference=repr(float(rng.uniform(-0.5, 0.5))))
            ET.SubElement(el, "dynamics", **attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        return Model.from_urdf(ET.tostring(root, encoding="unicode"), base=base, max_mass_ratio=None,
                               fluid_density=density)


def state(model, rng):
    return model.random_configuration(rng, 1.2), rng.normal(size=model.nv)


# ------------------------------------------------------------------------------------------ central differences
@pytest.mark.parametrize("name", ["bluerov2_heavy.yaml", "bluerov2_heavy_alpha5.yaml", "vessel_3dof.yaml"])
@pytest.mark.parametrize("current", [False, True])
def test_marine_robot_files(name, current):
    model = Model.from_yaml(ROBOTS / name)
    assert model.passive_active
    if current:
        model = model.with_current(*CURRENT)
    rng = np.random.default_rng(1)
    for _ in range(3):
        assert_agree(model, *state(model, rng))


@pytest.mark.parametrize("name", ["uvms_6dof.yaml", "asv_2link.yaml"])
def test_robots_made_wet(name):
    rng = np.random.default_rng(2)
    dry = Model.from_yaml(ROBOTS / name)
    model = wet(dry.urdf, dry.base, rng).with_current(*CURRENT)
    for springs in (True, False):
        assert_agree(model, *state(model, rng), springs=springs)


@pytest.mark.parametrize("base", ["fixed", "se3", "so3xr3", "so3", "se2", "schoenflies"])
def test_every_base_group(base):
    rng = np.random.default_rng(3)
    model = wet(Model.from_yaml(ROBOTS / "uvms_6dof.yaml").urdf, base, rng)
    for m in (model, model.with_current(*CURRENT)):
        assert_agree(m, *state(m, rng))


def test_single_bodies_on_every_group():
    """One link (no joints): the rigid-body backends."""
    rng = np.random.default_rng(4)
    for base in ("se3", "so3xr3", "so3", "se2", "schoenflies"):
        model = wet(robot(link("hull", 20.0, xyz="0.05 -0.02 0.03")), base, rng).with_current(*CURRENT)
        assert_agree(model, *state(model, rng))


def test_mimic_joints_and_a_continuous_joint():
    """Chain rule through the mimic reduction (v_full = G v): a mimic chain with multipliers and offsets, and a
    continuous joint (damping and friction; no spring)."""
    rng = np.random.default_rng(5)

    def mimic(j, master, m, o):
        return j.replace("</joint>", f'<mimic joint="{master}" multiplier="{m!r}" offset="{o!r}"/></joint>')

    parts = [link("l0", 3.0), link("l1", 1.0, xyz="0.1 0 0"), link("l2", 0.8, xyz="0 0.1 0"),
             link("l3", 0.6, xyz="0 0 0.1"), link("l4", 0.5, xyz="0.05 0.05 0"),
             joint("j1", "l0", "l1", axis="0 1 0", xyz="0.2 0 0"),
             mimic(joint("j2", "l1", "l2", axis="1 0 0", xyz="0.3 0 0"), "j1", -1.5, 0.2),
             mimic(joint("j3", "l2", "l3", jtype="prismatic", axis="0 0 1", xyz="0 0.2 0"), "j2", 0.4, -0.1),
             joint("j4", "l0", "l4", jtype="continuous", axis="0.6 0 0.8", xyz="0 0 0.2", limit="")]
    model = wet(robot(*parts), "se3", rng)
    assert set(model.mimic_joints) == {"j2", "j3"}
    for m in (model, model.with_current(*CURRENT)):
        for _ in range(2):
            assert_agree(m, *state(m, rng))


# ------------------------------------------------------------------------------------------------ closed forms
BACKENDS = pytest.mark.parametrize("backend", ["compiled", "numpy"])


def hull(hydro, base="se3", density=None):
    urdf = robot(f'<link name="hull"><inertial><origin xyz="0.01 0 -0.02"/><mass value="12.0"/>'
                 f'<inertia ixx="0.3" ixy="0" ixz="0" iyy="0.4" iyz="0" izz="0.5"/></inertial>'
                 f'<hydrodynamics>{hydro}</hydrodynamics></link>')
    return Model.from_urdf(urdf, base=base, fluid_density=density)


D_LIN = np.array([[4.0, 0.5, 0, 0, 0.1, 0], [0.5, 6.0, 0, 0, 0, 0.2], [0, 0, 8.0, 0.3, 0, 0],
                  [0, 0, 0.3, 1.0, 0, 0], [0.1, 0, 0, 0, 1.5, 0], [0, 0.2, 0, 0, 0, 2.0]])


@BACKENDS
def test_linear_damping_is_minus_D(backend):
    model = hull(f"<linear_damping>{_numbers(D_LIN)}</linear_damping>").with_backend(backend)
    rng = np.random.default_rng(7)
    q, v = state(model, rng)
    dq, dv = passive_derivatives(model, q, v)
    np.testing.assert_allclose(dv, -D_LIN, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(dq, 0.0)


@BACKENDS
def test_linear_damping_in_a_current(backend):
    """τ = −D(V − [Rᵀ U; 0]): Rᵀ U turns with the body, d(Rᵀ U) = (Rᵀ U) × δω, so ∂τ/∂δ = [0, D[:, :3] û]."""
    U = np.array([0.5, -0.3, 0.2])
    model = hull(f"<linear_damping>{_numbers(D_LIN)}</linear_damping>").with_current(U).with_backend(backend)
    rng = np.random.default_rng(8)
    q, v = state(model, rng)
    u = Rotation.from_quat(q[3:7]).as_matrix().T @ U
    u_hat = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    expected = np.zeros((6, 6))
    expected[:, 3:] = D_LIN[:, :3] @ u_hat
    dq, dv = passive_derivatives(model, q, v)
    np.testing.assert_allclose(dq, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dv, -D_LIN, rtol=0, atol=1e-12)


@BACKENDS
def test_quadratic_damping(backend):
    d = np.array([10.0, 20.0, 30.0, 1.0, 2.0, 3.0])
    model = hull(f"<quadratic_damping>{_numbers(d)}</quadratic_damping>").with_backend(backend)
    v = np.array([0.3, -0.2, 0.1, -0.5, 0.4, 0.0])  # a zero component: ∂(|x|x)/∂x = 2|x| = 0 there
    q = model.random_configuration(np.random.default_rng(9))
    dq, dv = passive_derivatives(model, q, v)
    np.testing.assert_allclose(dv, -np.diag(2 * d * np.abs(v)), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(dq, 0.0)


@BACKENDS
def test_joint_springs_dampers_and_friction(backend):
    k, rest, d, f, vf = [2.5, 40.0], [0.3, -0.05], [0.7, 1.1], [0.4, 0.9], [0.2, 0.05]
    dyn = [f'<dynamics damping="{d[i]!r}" friction="{f[i]!r}" friction_velocity="{vf[i]!r}" '
           f'spring_stiffness="{k[i]!r}" spring_reference="{rest[i]!r}"/>' for i in range(2)]
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 0.5, xyz="0 0 0.1"),
                 joint("j1", "base", "a", axis="0 1 0").replace("</joint>", dyn[0] + "</joint>"),
                 joint("j2", "a", "b", jtype="prismatic", axis="1 0 0", xyz="0.3 0 0")
                 .replace("</joint>", dyn[1] + "</joint>"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        model = Model.from_urdf(urdf).with_backend(backend)
    q, v = np.array([0.9, -0.2]), np.array([0.15, -0.04])
    dq, dv = passive_derivatives(model, q, v)
    np.testing.assert_allclose(dq, -np.diag(k), rtol=1e-14)
    sech2 = [1.0 / math.cosh(v[i] / vf[i]) ** 2 for i in range(2)]
    np.testing.assert_allclose(dv, -np.diag([d[i] + f[i] / vf[i] * sech2[i] for i in range(2)]), rtol=1e-13)
    dq0, dv0 = passive_derivatives(model, q, v, springs=False)
    np.testing.assert_array_equal(dq0, 0.0)
    np.testing.assert_array_equal(dv0, dv)


def test_without_passive_elements_zeros():
    """No passive elements at all, and a hull with a thruster and buoyancy but nothing in τ_p."""
    only_thruster = Model.from_urdf(robot(
        '<link name="hull"><inertial><mass value="5"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
        '</inertial><hydrodynamics><buoyancy volume="0.005"/></hydrodynamics></link>',
        '<thruster name="t" link="hull"><axis xyz="1 0 0"/></thruster>'), base="se3")
    assert only_thruster.passive is not None and not only_thruster.passive_active
    for model in (Model.from_yaml(ROBOTS / "uvms_6dof.yaml"), only_thruster):
        q, v = state(model, np.random.default_rng(10))
        for m in (model, model.with_backend("numpy")):
            for x in passive_derivatives(m, q, v):
                assert x.shape == (m.nv, m.nv) and not x.any()


def test_bad_input_names_the_argument():
    model = Model.from_yaml(ROBOTS / "bluerov2_heavy.yaml")
    q, v = model.neutral(), np.zeros(6)
    with pytest.raises(ValueError, match=r"^q must"):
        passive_derivatives(model, q[:6], v)
    with pytest.raises(ValueError, match=r"^v must"):
        passive_derivatives(model, q, np.full(6, np.nan))


# ------------------------------------------------------------------------------ restoring (buoyancy is in g)
@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_restoring_derivative_fossen(backend):
    """g(q) = −[(m − ρ∇) g_b; (m r_g − ρ∇ r_b) × g_b], g_b = Rᵀ g⃗ (Fossen 2021 eq. 4.6 without Euler angles),
    added mass included (it must not weigh); d g_b = g_b × δω, so ∂g/∂δ_ω = −[(m − ρ∇) ĝ_b; ĉ ĝ_b] with
    c = m r_g − ρ∇ r_b, and ∂g/∂δ_lin = 0. At rest with W = B: Fossen's diag(0, 0, 0, W·BG, W·BG, 0)."""
    m, r_g, rho, vol, r_b = 12.0, np.array([0.01, 0.0, -0.02]), 1000.0, 0.009, np.array([0.0, 0.01, 0.03])
    MA = np.diag([3.0, 4.0, 5.0, 0.2, 0.3, 0.1])
    model = hull(f"<added_mass>{_numbers(MA)}</added_mass><buoyancy volume=\"{vol!r}\" xyz=\"{_numbers(r_b)}\"/>")
    model = model.with_backend(backend)
    hat = lambda x: np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])  # noqa: E731
    rng = np.random.default_rng(11)
    z6 = np.zeros(6)
    for _ in range(3):
        q = model.random_configuration(rng)
        g_b = Rotation.from_quat(q[3:7]).as_matrix().T @ np.array([0.0, 0.0, -9.81])
        expected = np.zeros((6, 6))
        expected[:3, 3:] = -(m - rho * vol) * hat(g_b)
        expected[3:, 3:] = -hat(m * r_g - rho * vol * r_b) @ hat(g_b)
        dq = model.rnea_derivatives(q, z6, z6)[0]
        np.testing.assert_allclose(dq, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    # neutrally buoyant (ρ∇ = m), centres on the z axis, at rest: the metacentric stiffness W·BG
    z_g, z_b = -0.04, 0.02
    neutral = Model.from_urdf(robot(
        f'<link name="hull"><inertial><origin xyz="0 0 {z_g!r}"/><mass value="{m!r}"/>'
        f'<inertia ixx="0.3" ixy="0" ixz="0" iyy="0.4" iyz="0" izz="0.5"/></inertial>'
        f'<hydrodynamics><buoyancy volume="{m / rho!r}" xyz="0 0 {z_b!r}"/></hydrodynamics></link>'), base="se3")
    neutral = neutral.with_backend(backend)
    W = m * 9.81
    dq = neutral.rnea_derivatives(neutral.neutral(), z6, z6)[0]
    np.testing.assert_allclose(dq, np.diag([0, 0, 0, W * (z_b - z_g), W * (z_b - z_g), 0]), rtol=0, atol=1e-6)
