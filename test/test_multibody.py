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
from mbs_ros.dynamics import algorithms as alg

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = ROOT / "config" / "robots"
BASES_PIN = ("fixed", "se3", "se2", "schoenflies", "so3", "so3xr3")
REL = 1e-9


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
        self.ours = Model.from_urdf(urdf, base=base, gravity=gravity)
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
        assert rel_err(M, pair.mass_matrix(q)) < REL
        np.testing.assert_array_equal(M, M.T)
        assert rel_err(ours.gravity_forces(q), pair.gravity(q)) < REL
        Cv = ours.coriolis_matrix(q, v) @ v
        assert rel_err(Cv, pair.coriolis_times_v(q, v), np.abs(M).max() * np.abs(v).max() ** 2) < REL
        assert rel_err(ours.nonlinear_effects(q, v), pair.rnea(q, v, np.zeros(ours.nv))) < REL
        assert rel_err(ours.inverse_dynamics(q, v, a), pair.rnea(q, v, a)) < REL
        assert rel_err(ours.forward_dynamics(q, v, tau), pair.forward(q, v, tau)) < REL
