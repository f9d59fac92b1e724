"""Multibody kernels, the numpy reference: forward kinematics, RNEA, CRBA, the structured Coriolis matrix, forward
dynamics, energies and momentum.

Free functions taking ``(model, q, v, ...)`` as in Pinocchio (:class:`~mbs_ros.dynamics.kernels.backends.TreeBackend` calls
them), Featherstone 2008 ch. 5–6 and seed 004 in body-velocity form, written so that every step is one numpy call
over all bodies (a per-body Python recursion costs ~1 µs per small operation). Spatial quantities are in the base
frame (base axes at the base origin), so the base's world pose enters only through gravity ``Rᵀg`` and the
SO(3)×R³ velocity map. ``C = Σ_i J_iᵀ [I_i (J̇_i − ad_{V_i} J_i) + ad~_{I_i V_i} J_i]`` (seed 004 eq. 57 per body).
The formulation step by step: ``docs/dynamics.md``.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from mbs_ros.dynamics.kernels.compiled import PIVOT_TOLERANCE, SingularMassMatrix

__all__ = [
    "Kinematics", "kinematics", "body_placements", "joint_coordinates", "link_poses", "rnea", "crba", "coriolis_matrix",
    "nonlinear_effects", "gravity_forces", "forward_dynamics", "joint_wrenches", "kinetic_energy",
    "potential_energy", "spatial_momentum", "body_twists", "project", "link_motion", "body_accelerations",
]


# ------------------------------------------------------------------------------------------ batched small algebra
def _scatter(blocks):
    """Index arrays to write hat matrices of 3-vectors into batched matrices: ``blocks`` lists
    (row offset, column offset, source offset, sign)."""
    rows, cols, src, sgn = [], [], [], []
    pattern = ((0, 1, 2, -1.0), (0, 2, 1, 1.0), (1, 0, 2, 1.0), (1, 2, 0, -1.0), (2, 0, 1, -1.0), (2, 1, 0, 1.0))
    for r0, c0, s0, sign in blocks:
        for r, c, s, g in pattern:
            rows.append(r0 + r)
            cols.append(c0 + c)
            src.append(s0 + s)
            sgn.append(sign * g)
    return np.array(rows), np.array(cols), np.array(src), np.array(sgn)


_HAT = _scatter([(0, 0, 0, 1.0)])
# ad_V = [[ω̂, v̂], [0, ω̂]] for V = [v; ω]
_AD = _scatter([(0, 0, 3, 1.0), (0, 3, 0, 1.0), (3, 3, 3, 1.0)])
# ad~_p = [[0, −p̂_l], [−p̂_l, −p̂_a]] for p = [p_l; p_a]  (seed 004 eq. 73)
_ADT = _scatter([(0, 3, 0, -1.0), (3, 0, 0, -1.0), (3, 3, 3, -1.0)])


_EYE6 = np.eye(6)  # B = H of the SE(3) subgroups: rows of the identity


def _batch(spec, x, size):
    rows, cols, src, sgn = spec
    out = np.zeros((x.shape[0], size, size))
    out[:, rows, cols] = x[:, src] * sgn
    return out


def _mv(A, x):
    """Batched matrix-vector product (n, a, b) @ (n, b) -> (n, a)."""
    return (A @ x[..., None])[..., 0]


# ------------------------------------------------------------------------------------------------- kinematics
class Kinematics:
    """Configuration-dependent quantities shared by the kernels, in the base frame (module docstring): body poses
    relative to the base ``T`` (nb, 4, 4) (``T[0] = 1``), adjoints ``Ad`` (nb, 6, 6), motion columns ``S``
    (nv, 6) and spatial inertias ``I`` (nb, 6, 6); with the base's world pose ``T_base`` (4, 4) and the gravity
    in base axes ``gravity`` (3,)."""

    __slots__ = ("T", "Ad", "S", "I", "T_base", "gravity")

    def __init__(self, T, Ad, S, I, T_base, gravity):
        self.T, self.Ad, self.S, self.I, self.T_base, self.gravity = T, Ad, S, I, T_base, gravity


def _joint_transforms(tree, q):
    """(nj, 4, 4) poses of each joint frame in its parent body frame at q."""
    X = tree.X0.copy()
    nj = tree.nj
    if tree.rev.size or tree.cont.size:
        if tree.rev.size == nj:
            th = q[tree.q_rev]
            s, c1 = np.sin(th), 1.0 - np.cos(th)
        else:
            s, c1 = np.zeros(nj), np.zeros(nj)
            if tree.rev.size:
                th = q[tree.q_rev]
                s[tree.rev], c1[tree.rev] = np.sin(th), 1.0 - np.cos(th)
            if tree.cont.size:
                s[tree.cont], c1[tree.cont] = q[tree.q_cont + 1], 1.0 - q[tree.q_cont]
        X[:, :3, :3] += s[:, None, None] * tree.PA + c1[:, None, None] * tree.PA2
    if tree.pris.size:
        X[tree.pris, :3, 3] += q[tree.q_pris][:, None] * tree.Pa[tree.pris]
    return X


def _relative_placements(tree, q) -> np.ndarray:
    """Poses (nb, 4, 4) of the bodies in the base body's frame (``T_base,k``; the base's is the identity)."""
    T = np.empty((tree.nb, 4, 4))
    T[0] = np.eye(4)
    if tree.nj:
        X = _joint_transforms(tree, q)
        matmul = np.matmul
        for k, p, j in tree.chain:
            matmul(T[p], X[j], out=T[k])
    return T


def body_placements(model, q) -> np.ndarray:
    """World poses (nb, 4, 4) of the bodies (base first, then the child body of each joint); with mimic joints
    those of the full tree (``model.tree``) at ``E(q)``."""
    q = np.asarray(q, dtype=float)
    mm = getattr(model, "mimic_reduction", None)
    if mm is not None:
        model, q = mm.full, mm.q_full(q)
    return model.base_pose_matrix(q) @ _relative_placements(model.tree, q)


def joint_coordinates(model):
    """``(iq, iv)`` (each (n_joints,), ``model.joint_names`` order): where each joint's first coordinate sits in
    the model's own q and v (with mimic joints the reduced ones: ``model.tree`` indexes the full tree's)."""
    tree = model.tree
    mm = getattr(model, "mimic_reduction", None)
    if mm is None:
        return np.asarray(tree.iq, dtype=np.intp), np.asarray(tree.iv, dtype=np.intp)
    iq_full = np.asarray(tree.iq, dtype=np.intp)[mm.keep_joints]
    iv_full = np.asarray(tree.iv, dtype=np.intp)[mm.keep_joints]
    where_q = {int(i): k for k, i in enumerate(mm.keep_q)}
    where_v = {int(i): k for k, i in enumerate(mm.keep_v)}
    return (np.array([where_q[int(i)] for i in iq_full], dtype=np.intp),
            np.array([where_v[int(i)] for i in iv_full], dtype=np.intp))


def kinematics(model, q, inertia: bool = True) -> Kinematics:
    """Poses, adjoints, motion columns and (if ``inertia``) spatial inertias at q, in the base frame."""
    tree = model.tree
    q = np.asarray(q, dtype=float)
    T_base = model.base_pose_matrix(q)
    T = _relative_placements(tree, q)
    nb = tree.nb
    R = T[:, :3, :3]
    B = _batch(_HAT, T[:, :3, 3], 3) @ R  # p̂ R
    Ad = np.zeros((nb, 6, 6))
    Ad[:, :3, :3] = R
    Ad[:, 3:, 3:] = R
    Ad[:, :3, 3:] = B
    S = np.empty((tree.nv, 6))
    nvb = tree.nvb
    if nvb:
        if tree.base_cols is not None:  # B = H: columns of the identity
            S[:nvb] = _EYE6[tree.base_cols]
        else:  # SO(3)×R³: B = diag(Rᵀ, I), column k < 3 is [Rᵀ e_k; 0], i.e. row k of R
            S[:nvb] = 0.0
            S[:3, :3] = T_base[:3, :3]
            S[3:6, 3:] = np.eye(3)
    if tree.nj:
        S[nvb:] = _mv(Ad[1:], tree.s_joint)
    I = None
    if inertia:
        AdiT = np.zeros((nb, 6, 6))  # Ad⁻ᵀ = [[R, 0], [p̂R, R]]
        AdiT[:, :3, :3] = R
        AdiT[:, 3:, 3:] = R
        AdiT[:, 3:, :3] = B
        I = AdiT @ tree.body_inertia @ AdiT.transpose(0, 2, 1)
    return Kinematics(T, Ad, S, I, T_base, T_base[:3, :3].T @ model.gravity)


def link_poses(model, q, kin: Kinematics | None = None) -> np.ndarray:
    """World poses (n_links, 4, 4) of every URDF link, in ``model.link_names`` order."""
    tree = model.tree
    if kin is None:
        q = np.asarray(q, dtype=float)
        T_base, T = model.base_pose_matrix(q), _relative_placements(tree, q)
    else:
        T_base, T = kin.T_base, kin.T
    return T_base @ (T[tree.link_body] @ tree.T_body_link)


def _base_rate_columns(V0, S):
    """(3, 6) rows: the columns of Ḃ of the SO(3)×R³ base, ``[−ω × Rᵀe_k; 0]`` (``d/dt Rᵀ = −ω̂ Rᵀ``), with ω the
    base's body angular velocity ``V0[3:]`` and ``Rᵀe_k`` the linear part of its column ``S[k]``."""
    out = np.zeros((3, 6))
    out[:, :3] = S[:3, :3] @ _batch(_HAT, V0[None, 3:], 3)[0]  # row k: (Rᵀe_k)ᵀ ω̂ = −(ω × Rᵀe_k)ᵀ
    return out


def _column_rates(model, kin, V):
    """Ṡ_c (nv, 6): ad_{V_b(c)} S_c, plus Ḃ for the SO(3)×R³ base."""
    tree = model.tree
    AD = _batch(_AD, V, 6)
    P = _mv(AD[tree.col_body], kin.S)
    if tree.nvb and tree.base_cols is None:
        P[:3] += _base_rate_columns(V[0], kin.S)
    return AD, P


def body_twists(model, q, v, kin: Kinematics | None = None) -> np.ndarray:
    """Twists (nb, 6) of the bodies in the base frame: base axes, at the base origin, linear first (the frame of
    :func:`kinematics`; ``Ad_{T_base}`` takes them to world axes at the world origin). A body's own body-frame
    twist is ``Ad_k⁻¹ V_k``."""
    kin = kin or kinematics(model, q, inertia=False)
    return model.tree.support @ (kin.S * np.asarray(v, dtype=float)[:, None])


# ---------------------------------------------------------------------------------------------------- dynamics
def _wrenches(model, kin, v, a, gravity=True, f_ext=None):
    """Subtree wrenches F (nb, 6) in the base frame: ``F_k`` is the wrench body k's parent transmits to its
    subtree."""
    tree = model.tree
    S, I = kin.S, kin.I
    if v is None:
        A = tree.support @ (S * a[:, None]) if a is not None else np.zeros((tree.nb, 6))
        f = None
    else:
        Vc = S * v[:, None]
        V = tree.support @ Vc
        AD = _batch(_AD, V, 6)
        Sdv = _mv(AD[tree.col_body], Vc)  # ad_{V_b(c)} S_c v_c
        if tree.nvb and tree.base_cols is None:
            Sdv[:3] += _base_rate_columns(V[0], S) * v[:3, None]
        acc = Sdv if a is None else Sdv + S * a[:, None]
        A = tree.support @ acc
        f = -_mv(AD.transpose(0, 2, 1), _mv(I, V))
    if gravity:
        A[:, :3] -= kin.gravity
    fa = _mv(I, A)
    f = fa if f is None else f + fa
    P = model.passive
    fluid = gravity and P is not None and P.has_fluid
    if f_ext is not None or fluid:
        AdiT = wrench_transforms(kin)
    if fluid:  # D g_i: gravity off the added mass, buoyancy on (passive.py); g_i in body i's axes
        g_i = np.einsum("nba,b->na", kin.T[:, :3, :3], kin.gravity)
        f = f + _mv(AdiT, _mv(P.D, g_i))
    if f_ext is not None:
        W = np.asarray(f_ext, dtype=float).reshape(tree.nb, 6)
        f = f - _mv(AdiT, W)
    return tree.subtree @ f


def wrench_transforms(kin) -> np.ndarray:
    """(nb, 6, 6) ``Ad⁻ᵀ = [[R, 0], [p̂R, R]]`` of each body: its own-frame wrenches into the base frame."""
    AdiT = kin.Ad.copy()
    AdiT[:, 3:, :3] = kin.Ad[:, :3, 3:]
    AdiT[:, :3, 3:] = 0.0
    return AdiT


def project(model, kin, F):
    """``τ_c = S_cᵀ F_b(c)``: generalised forces of the subtree wrenches ``F`` (nb, 6, base frame)."""
    return (kin.S * F[model.tree.col_body]).sum(axis=1)


def rnea(model, q, v, a, f_ext=None, kin: Kinematics | None = None) -> np.ndarray:
    """Inverse dynamics τ = M(q) a + C(q, v) v + g(q) − Σ J_iᵀ f_ext,i by the recursive Newton–Euler algorithm.

    ``f_ext`` (optional, (nb, 6)): a wrench on each body, in that body's frame at its origin, linear first (body 0
    = base, body k = child of joint k − 1; Pinocchio's ``fext`` without the universe entry)."""
    kin = kin or kinematics(model, q)
    v = np.asarray(v, dtype=float)
    a = np.asarray(a, dtype=float)
    tau = project(model, kin, _wrenches(model, kin, v, a, True, f_ext))
    tree = model.tree
    if tree.armature is not None and tree.armature.any():
        tau[tree.nvb:] += tree.armature * a[tree.nvb:]
    return tau


def nonlinear_effects(model, q, v, kin: Kinematics | None = None) -> np.ndarray:
    """C(q, v) v + g(q) (RNEA with a = 0)."""
    kin = kin or kinematics(model, q)
    return project(model, kin, _wrenches(model, kin, np.asarray(v, dtype=float), None, True))


def gravity_forces(model, q, kin: Kinematics | None = None) -> np.ndarray:
    """g(q) (RNEA with v = a = 0)."""
    kin = kin or kinematics(model, q)
    return project(model, kin, _wrenches(model, kin, None, None, True))


def crba(model, q, kin: Kinematics | None = None) -> np.ndarray:
    """Joint-space inertia M(q) from composite-body inertias."""
    tree = model.tree
    kin = kin or kinematics(model, q)
    nb = tree.nb
    Ic = (tree.subtree @ kin.I.reshape(nb, 36)).reshape(nb, 6, 6)
    F = _mv(Ic[tree.col_body], kin.S)
    G = kin.S @ F.T  # G[c, d] = S_cᵀ Ic_b(d) S_d, valid where b(c) is an ancestor of b(d)
    M = np.where(tree.related, G, np.where(tree.related.T, G.T, 0.0))
    if tree.armature is not None and tree.armature.any():  # rotor inertias on the joints' diagonal
        M[np.arange(tree.nvb, tree.nv), np.arange(tree.nvb, tree.nv)] += tree.armature
    return M


def coriolis_matrix(model, q, v, kin: Kinematics | None = None) -> np.ndarray:
    """The structured Coriolis matrix ``C = Σ_i J_iᵀ (I_i J̇_i + ad~_{I_i V_i} J_i)`` (body frame; see the module
    docstring for its spatial form)."""
    tree = model.tree
    kin = kin or kinematics(model, q)
    v = np.asarray(v, dtype=float)
    S, I = kin.S, kin.I
    V = tree.support @ (S * v[:, None])
    AD, P = _column_rates(model, kin, V)
    h = _mv(I, V)
    N = _batch(_ADT, h, 6) - I @ AD
    K = (I @ P.T + N @ S.T) * tree.support[:, None, :]  # (nb, 6, nv): column d of I_i(J̇_i − ad J_i) + ad~ J_i
    nb, nv = tree.nb, tree.nv
    # C[c, d] = Σ_i support[i, c] S_cᵀ K[i, :, d]  (two plain products: einsum's path search costs ~30 µs)
    SK = (tree.support.T @ K.reshape(nb, 6 * nv)).reshape(nv, 6, nv)
    return (S[:, None, :] @ SK)[:, 0, :]


def forward_dynamics(model, q, v, tau, kin: Kinematics | None = None) -> np.ndarray:
    """a = M⁻¹ (τ − C v − g): CRBA and RNEA share the kinematics, then one dense solve (faster in numpy than a
    Python-level articulated-body recursion at these sizes; the compiled backend runs the O(n) articulated-body
    algorithm, CompiledModel.aba in compiled.py)."""
    kin = kin or kinematics(model, q)
    rhs = np.asarray(tau, dtype=float) - nonlinear_effects(model, q, v, kin)
    M = crba(model, q, kin)
    return scipy.linalg.cho_solve((check_pivots(model, M), True), rhs, check_finite=False)


def check_pivots(model, M) -> np.ndarray:
    """M's lower Cholesky factor, which the forward dynamics solves with; :class:`~mbs_ros.dynamics.kernels.compiled.SingularMassMatrix`
    naming the joint where a pivot of it is at most :data:`~mbs_ros.dynamics.kernels.compiled.PIVOT_TOLERANCE` of M's largest diagonal
    entry (singular to within rounding), as the compiled articulated-body algorithm does with its pivots."""
    try:
        L = np.linalg.cholesky(M)
        pivots = np.diag(L) ** 2
    except np.linalg.LinAlgError:
        L, pivots = None, np.zeros(1)
    if M.size == 0 or pivots.min() > PIVOT_TOLERANCE * float(np.diag(M).max()):
        return L
    tree = model.tree
    i = int(np.argmin(pivots)) if pivots.size == len(M) else tree.nvb
    what = f"joint {tree.joint_names[i - tree.nvb]!r}" if i >= tree.nvb else f"base velocity component {i}"
    raise SingularMassMatrix(f"the joint-space mass matrix is singular at this configuration (at {what}); no "
                             "acceleration is defined: start from, or reset to, another pose, or give the joint an "
                             "armature")


def joint_wrenches(model, q, v, a, tau=None, f_ext=None, kin: Kinematics | None = None) -> np.ndarray:
    """(nj, 6): the wrench each movable joint transmits from its parent to its child, in the joint (child link)
    frame at its origin, linear first ``[F; τ]``, gravity included. Without ``tau`` it is the total wrench (the
    actuation along the joint axis included, as TITOP's joint blocks output); with ``tau`` (the generalised forces
    actually applied, (nv,)) the actuation ``s_j τ_j`` is subtracted, leaving the reaction the joint's bearings
    carry, whose component along the joint's free direction vanishes when ``a`` is the forward dynamics of tau."""
    tree = model.tree
    kin = kin or kinematics(model, q)
    F = _wrenches(model, kin, np.asarray(v, dtype=float), np.asarray(a, dtype=float), True, f_ext)
    W = _mv(kin.Ad[1:].transpose(0, 2, 1), F[1:])
    if tau is not None:  # what reaches the link: the effort less what accelerates the rotor (armature)
        tau = np.asarray(tau, dtype=float).reshape(tree.nv)[tree.nvb:]
        if tree.armature is not None and tree.armature.any():
            tau = tau - tree.armature * np.asarray(a, dtype=float)[tree.nvb:]
        W = W - tree.s_joint * tau[:, None]
    return W


# ------------------------------------------------------------------------------------------ energy, momentum
def kinetic_energy(model, q, v, kin: Kinematics | None = None) -> float:
    kin = kin or kinematics(model, q)
    V = body_twists(model, q, v, kin)
    T = 0.5 * float(np.einsum("ix,ix->", V, _mv(kin.I, V)))
    tree = model.tree
    if tree.armature is not None and tree.armature.any():  # the rotors' ½ armature v²
        vj = np.asarray(v, dtype=float)[tree.nvb:]
        T += 0.5 * float(tree.armature @ (vj * vj))
    return T


def potential_energy(model, q, kin: Kinematics | None = None) -> float:
    """−gᵀ Σ m_i c_i (world centres of mass), every body included (a fixed base's too: a constant)."""
    tree = model.tree
    if kin is None:
        q = np.asarray(q, dtype=float)
        T_base, T = model.base_pose_matrix(q), _relative_placements(tree, q)
    else:
        T_base, T = kin.T_base, kin.T
    first = tree.body_mass[:, None] * T[:, :3, 3] + _mv(T[:, :3, :3], tree.body_first_moment)  # m c, base frame
    first_world = T_base[:3, :3] @ first.sum(axis=0) + tree.body_mass.sum() * T_base[:3, 3]
    return -float(model.gravity @ first_world)


def spatial_momentum(model, q, v, kin: Kinematics | None = None) -> np.ndarray:
    """Σ_i I_i V_i: world-frame spatial momentum ``[linear; angular about the world origin]`` (summed in the base
    frame, then ``Ad_{T_base}⁻ᵀ``)."""
    kin = kin or kinematics(model, q)
    V = body_twists(model, q, v, kin)
    h = _mv(kin.I, V).sum(axis=0)
    R, p = kin.T_base[:3, :3], kin.T_base[:3, 3]
    lin = R @ h[:3]
    return np.concatenate([lin, R @ h[3:] + np.cross(p, lin)])


# ------------------------------------------------------------------------------------------ link motion (sensors)
def _inverse_adjoint_apply(T, X):
    """``Ad_T⁻¹ X`` for T (n, 4, 4) and twists X (n, 6) ``[x_l; x_a]``: ``[Rᵀ(x_l − p × x_a); Rᵀ x_a]``."""
    Rt = T[:, :3, :3].transpose(0, 2, 1)
    lin = X[:, :3] - np.cross(T[:, :3, 3], X[:, 3:])
    return np.concatenate([_mv(Rt, lin), _mv(Rt, X[:, 3:])], axis=1)


def link_motion(model, q, v, a=None):
    """``(T, V, A)`` of every URDF link (``model.link_names`` order): world poses T (nl, 4, 4), body-frame twists
    V (nl, 6) ``[v; ω]`` (the link origin's velocity and the angular velocity, in link axes) and, with ``a``, the
    body-frame accelerations A (nl, 6) ``[v̇; ω̇]``, the time derivatives of V's components (else None); the
    acceleration of the link origin in link axes is ``v̇ + ω × v``.

    A is the RNEA's forward pass without gravity: in the base frame ``Â_k = Σ_c∈support(k) ad_{V_b(c)} S_c v_c +
    S_c a_c`` (+ Ḃ v for an SO(3)×R³ base), and ``A_k = Ad_k⁻¹ Â_k`` because ``d/dt Ad_k⁻¹ = Ad_k⁻¹ ad_{V_0 − V_k}``
    (Featherstone 2008 eq. 5.7 in body-velocity form; Murray, Li & Sastry 1994 §2.4). Mimic joints: the full
    tree's, with ``a`` mapped like ``v``."""
    mm = model.mimic_reduction
    if mm is not None:
        full = mm.full
        return link_motion(full, mm.q_full(np.asarray(q, dtype=float)), mm.v_full(v),
                           None if a is None else mm.v_full(a))
    tree = model.tree
    kin = kinematics(model, q, inertia=False)
    v = np.asarray(v, dtype=float)
    S = kin.S
    Vc = S * v[:, None]
    V = tree.support @ Vc
    Tl = kin.T[tree.link_body] @ tree.T_body_link  # link poses in the base frame
    Vl = _inverse_adjoint_apply(Tl, V[tree.link_body])
    Al = None
    if a is not None:
        AD = _batch(_AD, V, 6)
        acc = _mv(AD[tree.col_body], Vc) + S * np.asarray(a, dtype=float)[:, None]
        if tree.nvb and tree.base_cols is None:
            acc[:3] += _base_rate_columns(V[0], S) * v[:3, None]
        Al = _inverse_adjoint_apply(Tl, (tree.support @ acc)[tree.link_body])
    return kin.T_base @ Tl, Vl, Al


def body_accelerations(model, q, v, a) -> np.ndarray:
    """(nl, 6): each link's body-frame spatial acceleration ``[v̇; ω̇]``, the derivative of its body twist's
    components (:func:`link_motion`); Pinocchio's classical acceleration of the link frame is ``[v̇ + ω × v; ω̇]``."""
    return link_motion(model, q, v, a)[2]
