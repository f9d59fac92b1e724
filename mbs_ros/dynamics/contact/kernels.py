"""The contact step's compiled helpers (:mod:`mbs_ros.dynamics.contact.step`): contact frames, the contacts'
velocity rows from the bodies' world poses, and the warm start's matching of contacts (``docs/contact.md``).

Each is one compiled call over all contacts where the numpy version took a dozen small numpy calls (a few
microseconds each at a dozen contacts); :mod:`mbs_ros.dynamics.kernels.jit` compiles them (cached on disk) or
leaves them plain Python where numba is missing. The arithmetic is the numpy version's, in world axes.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.kernels.jit import jit

__all__ = ["contact_frames", "model_rows", "match_contacts", "copy_matched", "limits_clear", "BASE_NONE",
           "BASE_COLUMNS", "BASE_SO3XR3"]

#: How a model's base columns move a point (``side_rows``): no base velocity, body-frame twist components
#: (the identity's columns ``base_cols`` of ``[v; ω]``), or SO(3)×R³ (world linear velocity, body angular).
BASE_NONE, BASE_COLUMNS, BASE_SO3XR3 = 0, 1, 2


@jit
def contact_frames(normals, out):
    """``out`` (n, 3, 3): rows normal, tangent 1, tangent 2 of each unit normal (n, 3), a right-handed
    orthonormal basis; tangent 1 is ``n × e`` normalised, ``e`` the axis along the normal's smallest component
    (the first of equal ones)."""
    for i in range(normals.shape[0]):
        n0, n1, n2 = normals[i, 0], normals[i, 1], normals[i, 2]
        a0, a1, a2 = abs(n0), abs(n1), abs(n2)
        k = 0
        if a1 < a0:
            k = 1
        if a2 < (a1 if k == 1 else a0):
            k = 2
        e0, e1, e2 = (1.0 if k == 0 else 0.0), (1.0 if k == 1 else 0.0), (1.0 if k == 2 else 0.0)
        t0 = n1 * e2 - n2 * e1
        t1 = n2 * e0 - n0 * e2
        t2 = n0 * e1 - n1 * e0
        s = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        t0, t1, t2 = t0 / s, t1 / s, t2 / s
        out[i, 0, 0], out[i, 0, 1], out[i, 0, 2] = n0, n1, n2
        out[i, 1, 0], out[i, 1, 1], out[i, 1, 2] = t0, t1, t2
        out[i, 2, 0] = n1 * t2 - n2 * t1
        out[i, 2, 1] = n2 * t0 - n0 * t2
        out[i, 2, 2] = n0 * t1 - n1 * t0


@jit
def model_rows(J, sides, model, points, frames, T, s_joint, support, nvb, base_kind, base_cols, col0):
    """Add the contact-frame velocity rows of one model's material points to ``J[i, :, col0:col0 + nv]`` (J (n, 3,
    nv_scene)): ``sides[i]`` = (model of side a, its body, model of side b, its body; −1 for the world), side a
    with +, side b with − (a before b). ``T`` (nb, 4, 4): the model's body poses in the world; column ``nvb + j``
    turns or slides body ``j + 1`` along ``s_joint[j]`` (its own axes, ``[linear; angular]``); ``support[b, c]``
    1 where column c moves body b; the base columns as ``base_kind`` says (:data:`BASE_NONE`...). A column moves
    the point x at ``a + b × (x − o)`` (world)."""
    for i in range(sides.shape[0]):
        for side in range(2):
            if sides[i, 2 * side] != model:
                continue
            _point_rows(J, i, sides[i, 2 * side + 1], 1.0 if side == 0 else -1.0, points, frames, T, s_joint,
                        support, nvb, base_kind, base_cols, col0)


@jit
def _point_rows(J, i, body, sign, points, frames, T, s_joint, support, nvb, base_kind, base_cols, col0):
    """``J[i, :, col0 + c] += sign ×`` frame rows × the velocity column c gives the material point ``points[i]``
    of ``body`` (:func:`model_rows`)."""
    nv = support.shape[1]
    x0, x1, x2 = points[i, 0], points[i, 1], points[i, 2]
    for c in range(nv):
        w = support[body, c]
        if w == 0.0:
            continue
        a0 = a1 = a2 = 0.0
        b0 = b1 = b2 = 0.0
        o0 = o1 = o2 = 0.0
        if c >= nvb:  # joint j moves its child body j + 1: its axis in the world
            j = c - nvb
            k = j + 1
            sl0, sl1, sl2 = s_joint[j, 0], s_joint[j, 1], s_joint[j, 2]
            sa0, sa1, sa2 = s_joint[j, 3], s_joint[j, 4], s_joint[j, 5]
            a0 = T[k, 0, 0] * sl0 + T[k, 0, 1] * sl1 + T[k, 0, 2] * sl2
            a1 = T[k, 1, 0] * sl0 + T[k, 1, 1] * sl1 + T[k, 1, 2] * sl2
            a2 = T[k, 2, 0] * sl0 + T[k, 2, 1] * sl1 + T[k, 2, 2] * sl2
            b0 = T[k, 0, 0] * sa0 + T[k, 0, 1] * sa1 + T[k, 0, 2] * sa2
            b1 = T[k, 1, 0] * sa0 + T[k, 1, 1] * sa1 + T[k, 1, 2] * sa2
            b2 = T[k, 2, 0] * sa0 + T[k, 2, 1] * sa1 + T[k, 2, 2] * sa2
            o0, o1, o2 = T[k, 0, 3], T[k, 1, 3], T[k, 2, 3]
        elif base_kind == BASE_COLUMNS:  # component base_cols[c] of the base's body twist [v; ω]
            e = base_cols[c]
            if e < 3:
                a0, a1, a2 = T[0, 0, e], T[0, 1, e], T[0, 2, e]
            else:
                b0, b1, b2 = T[0, 0, e - 3], T[0, 1, e - 3], T[0, 2, e - 3]
                o0, o1, o2 = T[0, 0, 3], T[0, 1, 3], T[0, 2, 3]
        else:  # SO(3)×R³: the world linear velocity, then the body angular velocity
            if c < 3:
                if c == 0:
                    a0 = 1.0
                elif c == 1:
                    a1 = 1.0
                else:
                    a2 = 1.0
            else:
                b0, b1, b2 = T[0, 0, c - 3], T[0, 1, c - 3], T[0, 2, c - 3]
                o0, o1, o2 = T[0, 0, 3], T[0, 1, 3], T[0, 2, 3]
        d0, d1, d2 = x0 - o0, x1 - o1, x2 - o2
        l0 = w * (a0 + b1 * d2 - b2 * d1)
        l1 = w * (a1 + b2 * d0 - b0 * d2)
        l2 = w * (a2 + b0 * d1 - b1 * d0)
        for row in range(3):
            J[i, row, col0 + c] += sign * (frames[i, row, 0] * l0 + frames[i, row, 1] * l1 + frames[i, row, 2] * l2)


@jit
def match_contacts(new_ids, new_points, old_ids, old_points, tolerance, out):
    """``out[i]``: the old contact of the same pair (``old_ids[j] == new_ids[i]``, ids ≥ 0) whose point is nearest
    to ``new_points[i]`` within ``tolerance`` (the last of equally near ones), −1 for none."""
    for i in range(new_ids.shape[0]):
        best, best_d = -1, tolerance
        if new_ids[i] >= 0:
            for j in range(old_ids.shape[0]):
                if old_ids[j] != new_ids[i]:
                    continue
                d0 = old_points[j, 0] - new_points[i, 0]
                d1 = old_points[j, 1] - new_points[i, 1]
                d2 = old_points[j, 2] - new_points[i, 2]
                d = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
                if d <= best_d:
                    best, best_d = j, d
        out[i] = best


@jit
def copy_matched(best, old, lam):
    """``lam[3i:3i + 3] = old[3j:3j + 3]`` for each contact i matched to the old contact ``j = best[i]`` (≥ 0):
    the warm start's copy of the old impulses (:func:`match_contacts`' result), one call."""
    for i in range(best.shape[0]):
        j = best[i]
        if j >= 0:
            for r in range(3):
                lam[3 * i + r] = old[3 * j + r]


@jit
def limits_clear(q, iq, lower, upper, margin):
    """Whether every limited joint ``q[iq]`` is farther than ``margin`` from both its limits (``q − lower`` and
    ``upper − q`` > margin; a NaN is not: :func:`~mbs_ros.dynamics.contact.step.limit_rows` then looks closer)."""
    for k in range(iq.shape[0]):
        x = q[iq[k]]
        if not (x - lower[k] > margin and upper[k] - x > margin):
            return False
    return True


def warm_up() -> None:
    """Call each kernel once on a tiny problem: numba loads them from its cache (or compiles them) at the first
    call, milliseconds a node pays at start-up instead of inside its first contact step."""
    normals = np.array([[0.0, 0.0, 1.0]])
    frames = np.empty((1, 3, 3))
    contact_frames(normals, frames)
    J = np.zeros((1, 3, 7))
    T = np.broadcast_to(np.eye(4), (2, 4, 4)).copy()
    sides = np.array([[0, 1, -1, -1]], dtype=np.int64)
    s_joint = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    support = np.ones((2, 7))
    for kind, cols in ((BASE_COLUMNS, np.arange(6, dtype=np.int64)), (BASE_SO3XR3, np.zeros(0, dtype=np.int64))):
        model_rows(J, sides, 0, normals, frames, T, s_joint, support, 6, kind, cols, 0)
    out = np.empty(1, dtype=np.int64)
    match_contacts(np.zeros(1, dtype=np.int64), normals, np.zeros(1, dtype=np.int64), normals, 1.0, out)
    copy_matched(out, np.zeros(3), np.zeros(3))
    limits_clear(np.zeros(1), np.zeros(1, dtype=np.int64), np.full(1, -1.0), np.ones(1), 1e-3)
    from mbs_ros.dynamics.model import Model  # the compiled body poses the step's rows read (any model's types)

    body = Model.rigid_body("se3", 1.0, np.eye(3))
    if body.compiled_kernels is not None:
        body.compiled_kernels.body_poses(body.neutral())
