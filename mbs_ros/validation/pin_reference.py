"""Independent references built on Pinocchio (``pin``, a test-only dependency) and scipy's DOP853.

Pinocchio's articulated-body algorithm shares no code with ours; its configuration is integrated here on an
embedding — positions and quaternion components as plain coordinates, ``q̇`` from the quaternion kinematics
``d/dt q = ½ q ⊗ (ω, 0)`` (ω body-fixed, Pinocchio's local velocities), the quaternions re-normalised whenever the
right-hand side is evaluated — so no exponential map or dexp of ours enters either.
"""
from __future__ import annotations

import importlib

import numpy as np
from scipy.integrate import solve_ivp

__all__ = ["require_pinocchio", "PINOCCHIO_MISSING", "quat_matrix", "qdot", "integrate"]

PINOCCHIO_MISSING = ("this reference needs Pinocchio (pip package 'pin', a test-only dependency of mbs_ros; "
                     "`make setup` installs it into .venv)")


def require_pinocchio():
    """The ``pinocchio`` module, or RuntimeError with :data:`PINOCCHIO_MISSING`.

    Pinocchio is an optional, test-only dependency (package.xml ``<test_depend>``): it is imported here by name, at
    run time, only when a study asks for its reference; everything else in mbs_ros runs without it."""
    try:
        return importlib.import_module("pinocchio")
    except ImportError as exc:
        raise RuntimeError(PINOCCHIO_MISSING) from exc


def _layout(model):
    """[(kind, idx_q, idx_v), ...] with kind 'free', 'sphere' or 'scalar'."""
    out = []
    for j in list(model.joints)[1:]:
        name = j.shortname()
        if name == "JointModelFreeFlyer":
            kind = "free"
        elif name == "JointModelSpherical":
            kind = "sphere"
        elif j.nq == 1 and j.nv == 1:
            kind = "scalar"
        else:
            raise ValueError(f"reference integrator: joint type {name} not supported")
        out.append((kind, j.idx_q, j.idx_v))
    return out


def _quat_rate(qv, w):
    """½ q ⊗ (ω, 0) for q = (x, y, z, w)."""
    x, y, z, s = qv
    vec = s * w + np.cross([x, y, z], w)
    return 0.5 * np.array([vec[0], vec[1], vec[2], -(x * w[0] + y * w[1] + z * w[2])])


def quat_matrix(qv):
    """Rotation matrix of a quaternion (x, y, z, w), normalised first."""
    x, y, z, w = qv / np.linalg.norm(qv)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def normalized(layout, q):
    q = np.array(q, dtype=float)
    for kind, iq, _ in layout:
        s = slice(iq + 3, iq + 7) if kind == "free" else slice(iq, iq + 4) if kind == "sphere" else None
        if s is not None:
            q[s] /= np.linalg.norm(q[s])
    return q


def qdot(layout, q, v):
    """q̇ on the embedding for Pinocchio's local velocities v."""
    out = np.zeros(q.size)
    for kind, iq, iv in layout:
        if kind == "free":
            out[iq: iq + 3] = quat_matrix(q[iq + 3: iq + 7]) @ v[iv: iv + 3]
            out[iq + 3: iq + 7] = _quat_rate(q[iq + 3: iq + 7], v[iv + 3: iv + 6])
        elif kind == "sphere":
            out[iq: iq + 4] = _quat_rate(q[iq: iq + 4], v[iv: iv + 3])
        else:
            out[iq] = v[iv]
    return out


def integrate(model, q0, v0, t_eval, tau=None, fext=None, rtol: float = 1e-11, atol: float = 1e-11):
    """Pinocchio ABA integrated by DOP853 from (q0, v0); returns (q (n, nq) normalised, v (n, nv)) at ``t_eval``.

    ``tau(t, q, v)`` -> (nv,) joint forces (default 0); ``fext(t, q, v)`` -> list of ``pin.Force`` (one per
    joint, universe first, each in its joint's local frame) or None."""
    pin = require_pinocchio()
    data = model.createData()
    layout = _layout(model)
    nq = model.nq

    def rhs(t, x):
        q = normalized(layout, x[:nq])
        v = x[nq:]
        tq = np.zeros(model.nv) if tau is None else tau(t, q, v)
        if fext is None:
            a = pin.aba(model, data, q, v, tq)
        else:
            a = pin.aba(model, data, q, v, tq, fext(t, q, v))
        return np.concatenate([qdot(layout, q, v), a])

    t_eval = np.asarray(t_eval, dtype=float)
    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), np.concatenate([q0, v0]), method="DOP853", t_eval=t_eval,
                    rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    q = np.array([normalized(layout, x) for x in sol.y[:nq].T])
    return q, sol.y[nq:].T.copy()
