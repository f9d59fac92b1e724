"""The kinematic tree of a :class:`~mbs_ros.dynamics.Model`: bodies, joints and link frames as read-only arrays.

Built once from a :class:`~mbs_ros.dynamics.model.urdf.RobotSpec` (or for a single body), used by every kernel in
:mod:`mbs_ros.dynamics.algorithms.multibody`.

Bodies are Pinocchio's: body 0 is the base (the URDF root link with every link attached to it through fixed
joints merged into it), and each movable joint ``j`` (0-based, Pinocchio's depth-first order: children visited by
joint name, as Pinocchio's URDF reader does) moves body ``j + 1``, whose frame is the joint's child link frame.
Links joined by fixed joints are merged into their parent's body (inertias summed at the body frame) and keep a
constant frame on that body (``link_body``, ``T_body_link``).

Velocity columns: the base's ``nvb`` columns first (its group's tangent coordinates), then one column per joint;
``col_body[c]`` is the body a column moves, ``support[i, c] = 1`` when column c moves body i.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from mbs_ros.dynamics.lie import GROUPS, hat3
from mbs_ros.dynamics.model.urdf import ModelError

__all__ = ["Tree", "build_tree", "single_body_tree", "REVOLUTE", "PRISMATIC", "CONTINUOUS", "spatial_inertia",
           "inertia_pivots"]

REVOLUTE, PRISMATIC, CONTINUOUS = 0, 1, 2
_TYPE_CODE = {"revolute": REVOLUTE, "prismatic": PRISMATIC, "continuous": CONTINUOUS}
_TYPE_NAME = {v: k for k, v in _TYPE_CODE.items()}


def _ro(a, dtype=float):
    a = np.array(a, dtype=dtype)
    a.setflags(write=False)
    return a


def spatial_inertia(mass: float, inertia_com: np.ndarray, com: np.ndarray) -> np.ndarray:
    """Spatial inertia at the body origin, linear first (seed 004 §2; Featherstone 2008 eq. 2.63).

    ``I_b = [[m·1, −m ĉ], [m ĉ, J_c − m ĉ²]]`` with ``J_c`` about the centre of mass and ``c`` the c.o.m. in the body
    frame, so that ``I_b V`` is ``[linear momentum; angular momentum about the body origin]`` in body axes.
    """
    c_hat = hat3(np.asarray(com, dtype=float))
    out = np.empty((6, 6))
    out[:3, :3] = mass * np.eye(3)
    out[:3, 3:] = -mass * c_hat
    out[3:, :3] = mass * c_hat
    out[3:, 3:] = np.asarray(inertia_com, dtype=float) - mass * (c_hat @ c_hat)
    return out


_EPS = np.zeros((3, 3, 3))  # Levi-Civita symbol: hat(x)[a, b] = −ε[a, b, k] x[k]
_EPS[0, 1, 2] = _EPS[1, 2, 0] = _EPS[2, 0, 1] = 1.0
_EPS[0, 2, 1] = _EPS[2, 1, 0] = _EPS[1, 0, 2] = -1.0


def _hats(x) -> np.ndarray:
    """(n, 3, 3) hat matrices of (n, 3) vectors."""
    return -np.einsum("abk,nk->nab", _EPS, np.asarray(x, dtype=float).reshape(-1, 3))


def _spatial_inertias(mass, inertia_com, com) -> np.ndarray:
    """:func:`spatial_inertia` of n bodies at once: (n,), (n, 3, 3), (n, 3) -> (n, 6, 6)."""
    mass = np.asarray(mass, dtype=float)
    c_hat = _hats(com)
    m = mass[:, None, None]
    out = np.zeros((mass.size, 6, 6))
    out[:, :3, :3] = m * np.eye(3)
    out[:, :3, 3:] = -m * c_hat
    out[:, 3:, :3] = m * c_hat
    out[:, 3:, 3:] = np.asarray(inertia_com, dtype=float) - m * (c_hat @ c_hat)
    return out


def _transform_inertias(I, T) -> np.ndarray:
    """Spatial inertias ``I`` (n, 6, 6) given in frames F, expressed in frames B where ``T = T_B_F`` (n, 4, 4):
    ``Ad⁻ᵀ I Ad⁻¹`` with ``Ad⁻ᵀ = [[R, 0], [p̂R, R]]``."""
    R, p = T[:, :3, :3], T[:, :3, 3]
    X = np.zeros((len(T), 6, 6))
    X[:, :3, :3] = R
    X[:, 3:, 3:] = R
    X[:, 3:, :3] = _hats(p) @ R
    return X @ I @ X.transpose(0, 2, 1)


@dataclass(frozen=True, eq=False)
class Tree:
    """Arrays of the tree (all read-only); see the module docstring for the numbering."""

    nb: int  # bodies, base included
    nj: int  # movable joints = nb - 1
    nqb: int  # base configuration size (0 for a fixed base)
    nvb: int  # base velocity size
    nq: int
    nv: int
    parent: np.ndarray  # (nb,) parent body, -1 for the base
    jtype: np.ndarray  # (nj,) REVOLUTE / PRISMATIC / CONTINUOUS
    axis: np.ndarray  # (nj, 3) unit axis in the joint (child body) frame
    iq: np.ndarray  # (nj,) first configuration index of each joint
    iv: np.ndarray  # (nj,) velocity index of each joint
    placement: np.ndarray  # (nj, 4, 4) joint frame in the parent body frame at q = 0
    body_inertia: np.ndarray  # (nb, 6, 6) spatial inertia of each body at its frame
    body_mass: np.ndarray  # (nb,)
    body_first_moment: np.ndarray  # (nb, 3) m c in the body frame
    # derived constants used by the kernels
    X0: np.ndarray = field(repr=False)  # (nj, 4, 4) = placement
    PA: np.ndarray = field(repr=False)  # (nj, 3, 3) R_P hat(a)        (rotation about a: R = I + s â + (1−c) â²)
    PA2: np.ndarray = field(repr=False)  # (nj, 3, 3) R_P hat(a)²
    Pa: np.ndarray = field(repr=False)  # (nj, 3) R_P a                (prismatic translation)
    s_joint: np.ndarray = field(repr=False)  # (nj, 6) joint motion axis in the child frame ([0; a] or [a; 0])
    rev: np.ndarray = field(repr=False)  # joint indices by type, and their q indices
    q_rev: np.ndarray = field(repr=False)
    cont: np.ndarray = field(repr=False)
    q_cont: np.ndarray = field(repr=False)
    pris: np.ndarray = field(repr=False)
    q_pris: np.ndarray = field(repr=False)
    q_lin: np.ndarray = field(repr=False)  # q and v indices of the revolute and prismatic joints
    v_lin: np.ndarray = field(repr=False)
    chain: tuple = field(repr=False)  # ((child body, parent body, joint), ...) in tree order
    col_body: np.ndarray = field(repr=False)  # (nv,)
    support: np.ndarray = field(repr=False)  # (nb, nv) float 0/1
    subtree: np.ndarray = field(repr=False)  # (nb, nb) float 0/1: subtree[a, b] = b is a or a descendant of a
    related: np.ndarray = field(repr=False)  # (nv, nv) bool: c <= d and col_body[c] is (an ancestor of) col_body[d]
    base_cols: np.ndarray | None = field(repr=False)  # which se(3) directions the base moves (H = I6[:, cols])
    link_names: tuple = ()
    link_body: np.ndarray = field(default=None, repr=False)  # (n_links,)
    T_body_link: np.ndarray = field(default=None, repr=False)  # (n_links, 4, 4)
    joint_names: tuple = ()
    joint_types: tuple = ()
    body_names: tuple = ()  # link name of each body's frame
    armature: np.ndarray = field(default=None, repr=False)  # (nj,) rotor inertia added to M's joint diagonal

    def with_armature(self, armature) -> "Tree":
        """This tree with ``armature`` ((nj,), kg m² or kg, finite, ≥ 0): each joint's rotor inertia, added to the
        diagonal of M (MuJoCo's ``armature``, Pinocchio's ``model.armature``)."""
        return dataclasses.replace(self, armature=_ro(np.asarray(armature, dtype=float).reshape(self.nj)))

    def joint_type_name(self, j: int) -> str:
        return _TYPE_NAME[int(self.jtype[j])]


def _base_sizes(base: str):
    if base == "fixed":
        return 0, 0, np.zeros(0, dtype=int)
    group = GROUPS[base]
    cols = None if group.H is None else np.flatnonzero(np.abs(np.asarray(group.H)).sum(axis=1) > 0.5)
    return group.nq, group.dim, cols


def _make_tree(base, parent, jtypes, axes, placements, inertias, link_names, link_body, T_body_link, joint_names,
               body_names) -> Tree:
    nqb, nvb, base_cols = _base_sizes(base)
    nb = len(parent)
    nj = nb - 1
    jtype = np.array([_TYPE_CODE[t] for t in jtypes], dtype=int)
    width = np.where(jtype == CONTINUOUS, 2, 1)  # configuration entries of each joint
    iq = nqb + np.cumsum(width) - width
    iv = nvb + np.arange(nj)
    nq, nv = nqb + int(width.sum()), nvb + nj
    axes = np.asarray(axes, dtype=float).reshape(nj, 3)
    placements = np.asarray(placements, dtype=float).reshape(nj, 4, 4)
    hats = _hats(axes)
    rot = np.array([t != PRISMATIC for t in jtype], dtype=bool)
    PA = np.where(rot[:, None, None], placements[:, :3, :3] @ hats, 0.0)
    PA2 = np.where(rot[:, None, None], placements[:, :3, :3] @ hats @ hats, 0.0)
    Pa = np.where(rot[:, None], 0.0, np.einsum("jab,jb->ja", placements[:, :3, :3], axes))
    s_joint = np.where(rot[:, None], np.hstack([np.zeros((nj, 3)), axes]), np.hstack([axes, np.zeros((nj, 3))]))

    col_body = np.concatenate([np.zeros(nvb, dtype=int), np.arange(1, nb)])
    # anc[i, a] = 1 when body a is on the path base..i (i included). Parents come before their children, so each
    # row is its parent's row plus one entry: n row copies, no set arithmetic.
    anc = np.zeros((nb, nb))
    for i in range(nb):
        p = parent[i]
        if p >= 0:
            if not 0 <= p < i:
                raise ValueError(f"body {i}'s parent {p} must come before it")
            anc[i] = anc[p]
        anc[i, i] = 1.0
    subtree = np.ascontiguousarray(anc.T)
    support = np.ones((nb, nv))
    support[:, nvb:] = anc[:, 1:]  # column nvb + b − 1 moves body b
    cols = np.arange(nv)
    related = (anc[np.ix_(col_body, col_body)].T > 0.5) & (cols[:, None] <= cols[None, :])

    inertias = np.asarray(inertias, dtype=float).reshape(nb, 6, 6)
    masses = inertias[:, 0, 0].copy()
    first = np.stack([inertias[:, 5, 1], inertias[:, 3, 2], inertias[:, 4, 0]], axis=-1).reshape(nb, 3)  # m ĉ lower-left

    def idx(t):
        return np.flatnonzero(jtype == t)

    rev, cont, pris = idx(REVOLUTE), idx(CONTINUOUS), idx(PRISMATIC)
    lin = np.sort(np.concatenate([rev, pris])).astype(int)
    return Tree(
        nb=nb, nj=nj, nqb=nqb, nvb=nvb, nq=nq, nv=nv,
        parent=_ro(parent, int), jtype=_ro(jtype, int), axis=_ro(axes), iq=_ro(iq, int), iv=_ro(iv, int),
        placement=_ro(placements), body_inertia=_ro(inertias), body_mass=_ro(masses), body_first_moment=_ro(first),
        X0=_ro(placements), PA=_ro(PA), PA2=_ro(PA2), Pa=_ro(Pa), s_joint=_ro(s_joint),
        rev=_ro(rev, int), q_rev=_ro(iq[rev], int), cont=_ro(cont, int), q_cont=_ro(iq[cont], int),
        pris=_ro(pris, int), q_pris=_ro(iq[pris], int),
        q_lin=_ro(iq[lin], int), v_lin=_ro(np.asarray(iv, dtype=int)[lin], int),
        chain=tuple((k, int(parent[k]), k - 1) for k in range(1, nb)),
        col_body=_ro(col_body, int), support=_ro(support), subtree=_ro(subtree), related=_ro(related, bool),
        base_cols=None if base_cols is None else _ro(base_cols, int),
        link_names=tuple(link_names), link_body=_ro(link_body, int), T_body_link=_ro(T_body_link),
        joint_names=tuple(joint_names), joint_types=tuple(jtypes), body_names=tuple(body_names),
        armature=_ro(np.zeros(nj)),
    )


def single_body_tree(base: str, I_b: np.ndarray, link_name: str = "base_link") -> Tree:
    """The tree of one rigid body on ``base`` (no joint)."""
    return _make_tree(base, [-1], [], np.zeros((0, 3)), np.zeros((0, 4, 4)), [I_b], [link_name], [0],
                      [np.eye(4)], [], [link_name])


def build_tree(spec, base: str) -> Tree:
    """Tree of a :class:`~mbs_ros.dynamics.model.urdf.RobotSpec` on ``base`` (``fixed`` or a group name).

    A root link named ``world`` is the world itself: allowed with a fixed base only (its fixed joints then place
    the robot in the world); its frame is listed in ``link_names``.
    """
    children = {}
    for j in spec.joints:
        children.setdefault(j.parent, []).append(j)
    for lst in children.values():
        lst.sort(key=lambda j: j.name)  # Pinocchio's URDF reader visits children in joint-name order

    if spec.root == "world" and base != "fixed":
        raise ModelError("the URDF's root link is 'world': a floating base cannot be attached to the world; "
                         "remove the world link or use base='fixed'")

    parent = [-1]
    body_names = [spec.root]
    jtypes, axes, placements, joint_names = [], [], [], []
    link_names, link_body, T_body_link = [], [], []

    # Depth-first walk with an explicit stack (a recursion would hit Python's limit on a chain of ~1000 links).
    # An entry is (joint reaching the link or None for the root, the link, the body of the joint's parent link,
    # the parent link's pose in that body); children are pushed in reverse name order so that they are popped,
    # and numbered, in name order, as Pinocchio's recursive reader does.
    stack = [(None, spec.root, 0, np.eye(4))]
    while stack:
        joint, link_name, body, T_parent = stack.pop()
        if joint is None:
            T_body = T_parent
        elif joint.type == "fixed":  # merged into the parent's body
            T_body = T_parent @ joint.origin
        else:  # a movable joint starts a new body whose frame is the child link's
            parent.append(body)
            body_names.append(link_name)
            jtypes.append(joint.type)
            axes.append(joint.axis)
            placements.append(T_parent @ joint.origin)
            joint_names.append(joint.name)
            body, T_body = len(parent) - 1, np.eye(4)
        link_names.append(link_name)
        link_body.append(body)
        T_body_link.append(T_body)
        for j in reversed(children.get(link_name, ())):
            stack.append((j, j.child, body, T_body))

    if len(link_names) != len(spec.links):
        missing = sorted(set(spec.links) - set(link_names))
        raise ModelError(f"links not connected to the root {spec.root!r}: {missing}", link=missing[0])
    # each link's inertia, moved to its body's frame and summed there (links without mass or inertia add nothing;
    # a massless link with a rotational inertia keeps it, as the file says and Pinocchio reads it)
    links = [spec.links[name] for name in link_names]
    heavy = np.flatnonzero([link.mass > 0.0 or np.any(link.inertia) for link in links])
    inertias = np.zeros((len(parent), 6, 6))
    if heavy.size:
        I_link = _spatial_inertias([links[i].mass for i in heavy], [links[i].inertia for i in heavy],
                                   [links[i].com for i in heavy])
        T = np.array(T_body_link)[heavy]
        np.add.at(inertias, np.asarray(link_body)[heavy], _transform_inertias(I_link, T))
    return _make_tree(base, parent, jtypes, axes, placements, inertias, link_names, link_body, T_body_link,
                      joint_names, body_names)


def joint_placements(tree: Tree, angles) -> np.ndarray:
    """(nj, 4, 4): each joint's child frame in its parent body's frame with the joints at ``angles`` ((nj,): rad
    about, or m along, each joint's axis; continuous joints by their angle)."""
    angles = np.asarray(angles, dtype=float).reshape(tree.nj)
    motion = np.tile(np.eye(4), (tree.nj, 1, 1))
    hats = _hats(tree.axis)
    rot = np.asarray(tree.jtype) != PRISMATIC
    s, c = np.sin(angles)[:, None, None], np.cos(angles)[:, None, None]
    R = np.eye(3) + s * hats + (1.0 - c) * (hats @ hats)
    motion[rot, :3, :3] = R[rot]
    motion[~rot, :3, 3] = tree.axis[~rot] * angles[~rot, None]
    return np.asarray(tree.placement) @ motion


def inertia_pivots(tree: Tree, angles=None):
    """What the mass matrix at a configuration (``angles``, see :func:`joint_placements`; default every joint at
    0, the neutral configuration) needs to be positive definite, in one pass from the leaves to the base
    (Featherstone's articulated-body recursion, 2008 §7.2), O(n). The base's own pose does not matter.

    Returns ``(D, M_diag, IA_base, IC_base, subtree_mass)``: for each joint ``j`` the articulated pivot
    ``D[j] = sᵀ IA s + armature[j]`` — the inertia its child body presents along the joint's motion when every
    joint beyond it is free — and the diagonal entry ``M_diag[j] = sᵀ IC s + armature[j]`` of M (every joint
    beyond it locked); the base body's articulated and composite spatial inertias (6×6, base frame); and each
    body's subtree mass. With positive semi-definite link inertias, M at that configuration is positive definite
    exactly when every ``D[j] > 0`` and, for a floating base, the base's directions of ``IA_base`` are (the ABA's
    pivots are the factorisation ``M = Lᵀ D L``). A ``D[j]`` of (next to) zero is returned as is: the recursion
    then continues with that joint locked, so the pivots of the joints nearer the base stay meaningful."""
    nb = tree.nb
    IA = np.array(tree.body_inertia, dtype=float)
    IC = IA.copy()
    D = np.zeros(tree.nj)
    M_diag = np.zeros(tree.nj)
    armature = np.zeros(tree.nj) if tree.armature is None else np.asarray(tree.armature)
    placement = tree.placement if angles is None else joint_placements(tree, angles)
    for k in range(nb - 1, 0, -1):
        j, p = k - 1, int(tree.parent[k])
        s = tree.s_joint[j]
        U = IA[k] @ s
        D[j] = float(s @ U) + armature[j]
        M_diag[j] = float(s @ IC[k] @ s) + armature[j]
        Ia = IA[k]
        scale = max(M_diag[j], 0.0)
        if D[j] > 1e-12 * scale and D[j] > 0.0:
            Ia = Ia - np.outer(U, U) / D[j]
        T = placement[j][None]
        IA[p] += _transform_inertias(Ia[None], T)[0]
        IC[p] += _transform_inertias(IC[k][None], T)[0]
    subtree_mass = np.asarray(tree.subtree) @ np.asarray(tree.body_mass)
    return D, M_diag, IA[0], IC[0], subtree_mass
