"""Bodies in water, joint springs and friction, thrusters: what acts on a model besides its commands and gravity.

Seed 003 (Kirchhoff's equations with added mass) and Fossen's *Handbook of Marine Craft Hydrodynamics* (2021) for
the parameters; seed 000 (EPHS) for the energy ports. ``M v̇ + C(q, v) v + g(q) = τ + τ_p(q, v)``: added mass
joins each body's inertia (so ``M``, ``C`` with the Munk moment, RNEA and ABA carry it), buoyancy joins ``g``,
and ``τ_p`` holds joint springs, dampers and friction, hydrodynamic damping and the current's loads. Hydrodynamic
parameters are positive numbers. The URDF extension elements (``<hydrodynamics>``, joint ``<dynamics>``,
``<thruster>``), where each effect goes and the energy ports: ``docs/dynamics.md``.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from mbs_ros.dynamics.lie import hat3
from mbs_ros.dynamics.model.urdf import ModelError, origin_matrix

__all__ = ["LinkHydro", "JointDynamics", "ThrusterSpec", "Passive", "parse_extensions", "build_passive",
           "FRICTION_VELOCITY", "WATER_DENSITY", "ENVIRONMENT_TEMPERATURE", "passive_forces", "passive_terms",
           "energy_ports",
           "thrust_response"]

#: Default smoothing speed of Coulomb friction, ``f tanh(θ̇ / v_f)`` [rad/s or m/s].
FRICTION_VELOCITY = 0.01
#: Default fluid density [kg/m³] (fresh water; sea water is ~1025).
WATER_DENSITY = 1000.0
#: Default environment temperature θ₀ [K] of the entropy production (15 °C).
ENVIRONMENT_TEMPERATURE = 288.15


def _ro(a):
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class LinkHydro:
    """A link's hydrodynamics in its frame ``T_link_F``: ``added_mass`` (6×6), ``linear_damping`` (6×6),
    ``quadratic_damping`` (6,), ``volume`` [m³], ``center_of_buoyancy`` (3,) in F, ``density`` [kg/m³] or None
    (the model's)."""

    link: str
    T_link_F: np.ndarray
    added_mass: np.ndarray
    linear_damping: np.ndarray
    quadratic_damping: np.ndarray
    volume: float = 0.0
    center_of_buoyancy: np.ndarray = field(default_factory=lambda: np.zeros(3))
    density: float | None = None


@dataclass(frozen=True)
class JointDynamics:
    """A joint's passive elements: viscous ``damping``, Coulomb ``friction`` smoothed over ``friction_velocity``,
    a spring of ``stiffness`` about ``rest``."""

    damping: float = 0.0
    friction: float = 0.0
    friction_velocity: float = FRICTION_VELOCITY
    stiffness: float = 0.0
    rest: float = 0.0

    @property
    def empty(self) -> bool:
        return self.damping == 0.0 and self.friction == 0.0 and self.stiffness == 0.0


@dataclass(frozen=True)
class ThrusterSpec:
    """A thruster on ``link``: position (3,) and unit ``direction`` (3,) in the link frame, thrust limits [N],
    first-order ``time_constant`` [s]."""

    name: str
    link: str
    position: np.ndarray
    direction: np.ndarray
    lower: float = -math.inf
    upper: float = math.inf
    time_constant: float = 0.0


def _numbers(text, what, sizes, fail):
    try:
        values = [float(x) for x in (text or "").replace(",", " ").split()]
    except ValueError:
        fail(f"{what}: expected numbers, got {text!r}")
    if len(values) not in sizes:
        fail(f"{what}: expected {' or '.join(map(str, sizes))} numbers, got {len(values)}")
    if not all(math.isfinite(x) for x in values):
        fail(f"{what}: values must be finite")
    return values


def _matrix6(values, what, fail, psd=True):
    M = np.diag(values) if len(values) == 6 else np.array(values).reshape(6, 6)
    if not np.allclose(M, M.T, rtol=0.0, atol=1e-9 * max(1.0, np.abs(M).max())):
        fail(f"{what}: must be symmetric")
    M = 0.5 * (M + M.T)
    if psd and np.linalg.eigvalsh(M)[0] < -1e-9 * max(1.0, np.abs(M).max()):
        fail(f"{what}: must be positive semi-definite (Fossen's −X_u̇ …, −X_u … are positive), "
             f"eigenvalues {np.round(np.linalg.eigvalsh(M), 9).tolist()}")
    return M


def _attr(element, name, default, fail, what, lower=None):
    text = element.get(name)
    if text is None:
        return default
    try:
        x = float(text)
    except ValueError:
        fail(f"{what} {name}={text!r}: not a number")
    if not math.isfinite(x) or (lower is not None and x < lower):
        fail(f"{what} {name}={text!r}: must be finite" + (f" and >= {lower:g}" if lower is not None else ""))
    return x


def _link_hydro(link_el) -> LinkHydro | None:
    el = link_el.find("hydrodynamics")
    name = link_el.get("name")
    if el is None:
        return None

    def fail(msg):
        raise ModelError(f"link {name!r}: <hydrodynamics> {msg}", link=name)

    origin = el.find("origin")
    T = np.eye(4)
    if origin is not None:
        xyz = _numbers(origin.get("xyz", "0 0 0"), "<origin xyz>", (3,), fail)
        rpy = _numbers(origin.get("rpy", "0 0 0"), "<origin rpy>", (3,), fail)
        T = origin_matrix(xyz, rpy)
    zero6 = np.zeros((6, 6))
    M_A = _matrix6(_numbers(el.findtext("added_mass"), "<added_mass>", (6, 36), fail), "<added_mass>", fail) \
        if el.find("added_mass") is not None else zero6
    D_L = _matrix6(_numbers(el.findtext("linear_damping"), "<linear_damping>", (6, 36), fail), "<linear_damping>",
                   fail) if el.find("linear_damping") is not None else zero6
    D_Q = np.zeros(6)
    if el.find("quadratic_damping") is not None:
        D_Q = np.array(_numbers(el.findtext("quadratic_damping"), "<quadratic_damping>", (6,), fail))
        if (D_Q < 0).any():
            fail("<quadratic_damping>: values must be >= 0 (Fossen's −X_u|u| …)")
    volume, cob = 0.0, np.zeros(3)
    b = el.find("buoyancy")
    if b is not None:
        volume = _attr(b, "volume", 0.0, fail, "<buoyancy>", lower=0.0)
        cob = np.array(_numbers(b.get("xyz", "0 0 0"), "<buoyancy xyz>", (3,), fail))
    density = _attr(el, "density", None, fail, "<hydrodynamics>", lower=0.0)
    return LinkHydro(name, _ro(T), _ro(M_A), _ro(D_L), _ro(D_Q), volume, _ro(cob), density)


def _joint_dynamics(joint_el) -> JointDynamics | None:
    el = joint_el.find("dynamics")
    name = joint_el.get("name")
    if el is None or joint_el.get("type") == "fixed":
        return None

    def fail(msg):
        raise ModelError(f"joint {name!r}: <dynamics> {msg}", joint=name)

    jd = JointDynamics(
        damping=_attr(el, "damping", 0.0, fail, "<dynamics>", lower=0.0),
        friction=_attr(el, "friction", 0.0, fail, "<dynamics>", lower=0.0),
        friction_velocity=_attr(el, "friction_velocity", FRICTION_VELOCITY, fail, "<dynamics>", lower=0.0),
        stiffness=_attr(el, "spring_stiffness", 0.0, fail, "<dynamics>", lower=0.0),
        rest=_attr(el, "spring_reference", 0.0, fail, "<dynamics>"),
    )
    if jd.friction > 0.0 and jd.friction_velocity <= 0.0:
        fail("friction_velocity must be > 0 with friction (the smoothing of Coulomb friction)")
    if jd.stiffness > 0.0 and joint_el.get("type") == "continuous":
        fail("spring_stiffness on a continuous joint: its angle wraps, so a spring has no single rest position "
             "(make it revolute with limits)")
    return None if jd.empty else jd


def _thruster(el, links) -> ThrusterSpec:
    name = el.get("name") or ""
    link = el.get("link") or ""

    def fail(msg):
        raise ModelError(f"thruster {name!r}: {msg}", link=link or None)

    if not name:
        fail("has no name")
    if link not in links:
        fail(f"link {link!r} is not a link of the robot")
    origin = el.find("origin")
    pos = np.zeros(3)
    R = np.eye(3)
    if origin is not None:
        pos = np.array(_numbers(origin.get("xyz", "0 0 0"), "<origin xyz>", (3,), fail))
        R = origin_matrix(pos, _numbers(origin.get("rpy", "0 0 0"), "<origin rpy>", (3,), fail))[:3, :3]
    axis = el.find("axis")
    d = np.array(_numbers(axis.get("xyz"), "<axis xyz>", (3,), fail)) if axis is not None else np.array([1., 0, 0])
    n = float(np.linalg.norm(d))
    if n < 1e-12:
        fail("<axis> must be a non-zero vector")
    lo, hi = -math.inf, math.inf
    lim = el.find("limit")
    if lim is not None:
        lo = _attr(lim, "lower", -math.inf, fail, "<limit>")
        hi = _attr(lim, "upper", math.inf, fail, "<limit>")
        if lo > hi:
            fail(f"<limit> lower {lo:g} > upper {hi:g}")
    tc = el.find("time_constant")
    tau = _attr(tc, "value", 0.0, fail, "<time_constant>", lower=0.0) if tc is not None else 0.0
    return ThrusterSpec(name, link, _ro(pos), _ro(R @ (d / n)), lo, hi, tau)


def parse_extensions(xml: str) -> tuple:
    """``(hydro {link: LinkHydro}, joints {joint: JointDynamics}, thrusters [ThrusterSpec])`` of a URDF's mbs_ros
    extensions (module docstring); ModelError naming the link, joint or thruster for a bad value."""
    root = ET.fromstring(xml)
    hydro = {}
    for link in root.findall("link"):
        h = _link_hydro(link)
        if h is not None:
            hydro[link.get("name")] = h
    joints = {}
    for joint in root.findall("joint"):
        jd = _joint_dynamics(joint)
        if jd is not None:
            joints[joint.get("name")] = jd
    links = {link.get("name") for link in root.findall("link")}
    thrusters = [_thruster(el, links) for el in root.findall("thruster")]
    names = [t.name for t in thrusters]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ModelError(f"thruster {dup[0]!r} defined twice")
    return hydro, joints, thrusters


# --------------------------------------------------------------------------------------------------- the model
def ad_inv_T(T):
    """Ad_T⁻ᵀ = [[R, 0], [p̂R, R]]: wrenches from frame F to frame B for ``T = T_B_F``."""
    R, p = T[:3, :3], T[:3, 3]
    X = np.zeros((6, 6))
    X[:3, :3] = R
    X[3:, 3:] = R
    X[3:, :3] = hat3(p) @ R
    return X


@dataclass(frozen=True, eq=False)
class Passive:
    """The passive elements of a model, per body of its tree (arrays read-only). Bodies: ``added_mass`` (nb, 6, 6)
    and ``D`` (nb, 6, 3) at each body frame, ``displaced`` (nb,) ρ∇ [kg] and ``displaced_moment`` (nb, 3) ρ∇ c_b
    [kg m]. Damping elements (one per link with damping): ``elem_body`` (ne,), ``T_body_elem`` (ne, 4, 4),
    ``D_lin`` (ne, 6, 6), ``D_quad`` (ne, 6), ``elem_links``. Joints (tree order, (nj,)): ``stiffness``, ``rest``,
    ``damping``, ``friction``, ``friction_velocity``. Thrusters: ``thruster_names``, ``B_thrust`` (6, nt) base
    wrench per newton, ``thrust_lower``/``thrust_upper``/``time_constants`` (nt,). The current: ``current``
    (3,) and ``current_rate`` (3,) in world axes."""

    added_mass: np.ndarray
    D: np.ndarray
    displaced: np.ndarray
    displaced_moment: np.ndarray
    elem_body: np.ndarray
    T_body_elem: np.ndarray
    D_lin: np.ndarray
    D_quad: np.ndarray
    elem_links: tuple
    hydro_links: tuple
    stiffness: np.ndarray
    rest: np.ndarray
    damping: np.ndarray
    friction: np.ndarray
    friction_velocity: np.ndarray
    thruster_names: tuple
    B_thrust: np.ndarray
    thrust_lower: np.ndarray
    thrust_upper: np.ndarray
    time_constants: np.ndarray
    current: np.ndarray
    current_rate: np.ndarray
    density: float = WATER_DENSITY

    @property
    def has_fluid(self) -> bool:
        return bool(self.hydro_links)

    @property
    def has_springs(self) -> bool:
        return bool((self.stiffness > 0).any())

    @property
    def has_loads(self) -> bool:
        """Velocity-dependent or current loads: damping elements, joint damping/friction, or a current."""
        return (self.elem_body.size > 0 or bool((self.damping > 0).any()) or bool((self.friction > 0).any())
                or self.has_current)

    @property
    def has_current(self) -> bool:
        return self.has_fluid and bool(np.any(self.current) or np.any(self.current_rate))

    @property
    def active(self) -> bool:
        """Anything that makes τ_p non-zero."""
        return self.has_loads or self.has_springs

    def with_current(self, velocity, rate=(0.0, 0.0, 0.0)) -> "Passive":
        import dataclasses

        U, Ud = np.array(velocity, dtype=float).reshape(3), np.array(rate, dtype=float).reshape(3)
        if not (np.isfinite(U).all() and np.isfinite(Ud).all()):
            raise ValueError("the current must be finite")
        return dataclasses.replace(self, current=_ro(U), current_rate=_ro(Ud))


def build_passive(tree, hydro: dict, joints: dict, thrusters: list, density: float = WATER_DENSITY,
                  current=(0.0, 0.0, 0.0)) -> Passive | None:
    """The :class:`Passive` of a tree (see :mod:`~mbs_ros.dynamics.model.tree`) from the parsed extensions, or None when
    there are none. Links fixed together merge: added mass and buoyancy move to the body frame (as inertias do);
    each link keeps its own damping element. ModelError for a thruster not on the base body."""
    if not (hydro or joints or thrusters):
        return None
    density = float(density)
    if not (math.isfinite(density) and density > 0.0):
        raise ValueError(f"fluid density must be a finite positive number, got {density!r}")
    nb = tree.nb
    link_index = {name: i for i, name in enumerate(tree.link_names)}
    MA = np.zeros((nb, 6, 6))
    disp = np.zeros(nb)
    disp_m = np.zeros((nb, 3))
    eb, eT, eDL, eDQ, elinks = [], [], [], [], []
    for name, h in hydro.items():
        if name not in link_index:  # a link the tree does not have (cannot happen for a parsed spec)
            continue
        li = link_index[name]
        body = int(tree.link_body[li])
        T = tree.T_body_link[li] @ h.T_link_F  # T_body_F
        X = ad_inv_T(T)
        MA[body] += X @ h.added_mass @ X.T
        rho = h.density if h.density is not None else density
        m = rho * h.volume
        disp[body] += m
        disp_m[body] += m * (T[:3, :3] @ h.center_of_buoyancy + T[:3, 3])
        if np.any(h.linear_damping) or np.any(h.quadratic_damping):
            eb.append(body)
            eT.append(T)
            eDL.append(h.linear_damping)
            eDQ.append(h.quadratic_damping)
            elinks.append(name)
    MA = 0.5 * (MA + MA.transpose(0, 2, 1))
    D = MA[:, :, :3].copy()
    D[:, :3, :3] += disp[:, None, None] * np.eye(3)
    D[:, 3:, :3] += np.array([hat3(x) for x in disp_m]) if nb else 0.0

    nj = tree.nj
    k, rest, d, f, vf = (np.zeros(nj) for _ in range(5))
    vf[:] = FRICTION_VELOCITY
    for j, name in enumerate(tree.joint_names):
        jd = joints.get(name)
        if jd is not None:
            k[j], rest[j], d[j], f[j], vf[j] = jd.stiffness, jd.rest, jd.damping, jd.friction, jd.friction_velocity

    nt = len(thrusters)
    B = np.zeros((6, nt))
    lo, hi, tc = np.zeros(nt), np.zeros(nt), np.zeros(nt)
    for i, t in enumerate(thrusters):
        li = link_index[t.link]
        if int(tree.link_body[li]) != 0:
            raise ModelError(f"thruster {t.name!r}: link {t.link!r} moves relative to the base (a joint between): "
                             "thrusters act on the base body (the root link and links fixed to it)", link=t.link)
        T = tree.T_body_link[li]
        r = T[:3, :3] @ t.position + T[:3, 3]
        dvec = T[:3, :3] @ t.direction
        B[:3, i] = dvec
        B[3:, i] = np.cross(r, dvec)
        lo[i], hi[i], tc[i] = t.lower, t.upper, t.time_constant
    ne = len(eb)
    return Passive(
        added_mass=_ro(MA), D=_ro(D), displaced=_ro(disp), displaced_moment=_ro(disp_m),
        elem_body=np.array(eb, dtype=int), T_body_elem=_ro(np.array(eT).reshape(ne, 4, 4)),
        D_lin=_ro(np.array(eDL).reshape(ne, 6, 6)), D_quad=_ro(np.array(eDQ).reshape(ne, 6)),
        elem_links=tuple(elinks), hydro_links=tuple(hydro), stiffness=_ro(k), rest=_ro(rest), damping=_ro(d),
        friction=_ro(f), friction_velocity=_ro(vf), thruster_names=tuple(t.name for t in thrusters),
        B_thrust=_ro(B), thrust_lower=_ro(lo), thrust_upper=_ro(hi), time_constants=_ro(tc),
        current=_ro(np.array(current, dtype=float).reshape(3)), current_rate=_ro(np.zeros(3)), density=density)


# ------------------------------------------------------------------------------------------ numpy reference
def _neg_adT(V, h):
    """−ad_Vᵀ h = [ω × h_l; v × h_l + ω × h_a] (rows of (n, 6))."""
    v, w = V[..., :3], V[..., 3:]
    hl, ha = h[..., :3], h[..., 3:]
    return np.concatenate([np.cross(w, hl), np.cross(v, hl) + np.cross(w, ha)], axis=-1)


def _joint_angles(tree, q):
    th = np.zeros(tree.nj)
    lin = np.concatenate([tree.rev, tree.pris]).astype(int)
    th[lin] = q[tree.iq[lin]]
    if tree.cont.size:
        th[tree.cont] = np.arctan2(q[tree.q_cont + 1], q[tree.q_cont])
    return th


def _body_terms(model, q, v):
    """Base-frame kinematics and each body's own-frame twist (nb, 6), world rotation (nb, 3, 3)."""
    from mbs_ros.dynamics.algorithms import multibody as alg

    kin = alg.kinematics(model, q, inertia=False)
    V_base = alg.body_twists(model, q, v, kin)  # base frame
    T = kin.T
    R, p = T[:, :3, :3], T[:, :3, 3]
    # own frame: Ad_T⁻¹ V = [Rᵀ(v − p × ω); Rᵀ ω]
    w = V_base[:, 3:]
    lin = V_base[:, :3] - np.cross(p, w)
    V = np.concatenate([np.einsum("nba,nb->na", R, lin), np.einsum("nba,nb->na", R, w)], axis=1)
    R_world = kin.T_base[:3, :3] @ R
    return kin, V, R_world


def _loads(model, q, v):
    """Per-body loads ON each body, own frame at its origin (nb, 6), the damping element wrenches and relative
    twists (own element frames), and the current added-mass/acceleration loads, for :func:`passive_forces` and
    :func:`energy_ports`."""
    P = model.passive
    kin, V, R_world = _body_terms(model, q, v)
    nb = V.shape[0]
    W = np.zeros((nb, 6))
    u = np.einsum("nba,b->na", R_world, P.current)  # current in body axes
    ud = np.einsum("nba,b->na", R_world, P.current_rate)
    Vc = np.concatenate([u, np.zeros((nb, 3))], axis=1)
    Vr = V - Vc
    W_cur = np.zeros((nb, 6))
    if P.has_current:
        MA = P.added_mass
        W_cur = (np.einsum("nab,nb->na", MA[:, :, :3], -np.cross(V[:, 3:], u))
                 - _neg_adT(Vr, np.einsum("nab,nb->na", MA, Vr)) + _neg_adT(V, np.einsum("nab,nb->na", MA, V))
                 + np.einsum("nab,nb->na", P.D, ud))
    W += W_cur
    ne = P.elem_body.size
    w_el = np.zeros((ne, 6))
    Vr_el = np.zeros((ne, 6))
    for e in range(ne):
        i = P.elem_body[e]
        T = P.T_body_elem[e]
        R, p = T[:3, :3], T[:3, 3]
        Ve = np.concatenate([R.T @ (V[i, :3] - np.cross(p, V[i, 3:])), R.T @ V[i, 3:]])
        Vr_el[e] = Ve - np.concatenate([R.T @ u[i], np.zeros(3)])
        w_el[e] = P.D_lin[e] @ Vr_el[e] + P.D_quad[e] * np.abs(Vr_el[e]) * Vr_el[e]  # resistive
        W[i] -= ad_inv_T(T) @ w_el[e]
    return kin, V, W, W_cur, w_el, Vr_el


def _joint_terms(model, q, v):
    """(spring, damper, friction) generalised forces on the joints (nj,) each, and the joint rates (nj,)."""
    P, tree = model.passive, model.tree
    th = _joint_angles(tree, np.asarray(q, dtype=float))
    rates = np.asarray(v, dtype=float)[tree.nvb:]
    spring = -P.stiffness * (th - P.rest)
    damper = -P.damping * rates
    vf = np.where(P.friction_velocity > 0, P.friction_velocity, 1.0)
    friction = -P.friction * np.tanh(rates / vf)
    return spring, damper, friction, rates


def passive_terms(model, q, v, springs: bool = True):
    """``(τ_p (nv,), dissipated power [W])`` of the full tree, numpy reference (module docstring): joint springs
    (unless ``springs`` is False), dampers and friction, hydrodynamic damping and the current's loads;
    ``τ_p = Σ_i J_iᵀ W_i`` with the loads ``W_i`` on each body."""
    from mbs_ros.dynamics.algorithms import multibody as alg

    P, tree = model.passive, model.tree
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    tau = np.zeros(tree.nv)
    p_diss = 0.0
    if P.has_fluid and (P.elem_body.size or P.has_current):
        kin, _V, W, _W_cur, w_el, Vr_el = _loads(model, q, v)
        W_base = np.einsum("nab,nb->na", alg.wrench_transforms(kin), W)
        tau += alg.project(model, kin, tree.subtree @ W_base)
        p_diss += float(np.einsum("ea,ea->", w_el, Vr_el))
    if tree.nj:
        spring, damper, friction, rates = _joint_terms(model, q, v)
        tau[tree.nvb:] += damper + friction + (spring if springs else 0.0)
        p_diss -= float((damper + friction) @ rates)
    return tau, p_diss


def body_loads(model, q, v):
    """The water's loads ON each body of the full tree (damping and the current's), own frame at its origin (nb, 6):
    the ``f_ext`` under which inverse dynamics and joint wrenches are those of the simulated motion; None when the
    model has none (the joints' springs, dampers and friction act along the joint axes, like efforts)."""
    P = model.passive
    if P is None or not (P.has_fluid and (P.elem_body.size or P.has_current)):
        return None
    return _loads(model, np.asarray(q, dtype=float), np.asarray(v, dtype=float))[2]


def passive_forces(model, q, v, springs: bool = True) -> np.ndarray:
    """τ_p (nv,) of :func:`passive_terms`."""
    return passive_terms(model, q, v, springs)[0]


def spring_energy(model, q) -> float:
    """Σ ½ k (θ − θ₀)² of the joint springs [J]."""
    P = model.passive
    if P is None or not P.has_springs:
        return 0.0
    th = _joint_angles(model.tree, np.asarray(q, dtype=float))
    return 0.5 * float(P.stiffness @ (th - P.rest) ** 2)


def buoyancy_energy(model, q) -> float:
    """The potential of buoyancy, ``+gᵀ Σ ρ∇ c_b`` (world centres of buoyancy) [J]."""
    P = model.passive
    if P is None or not P.displaced.any():
        return 0.0
    from mbs_ros.dynamics.algorithms import multibody as alg

    T = alg.body_placements(model, q)
    c = np.einsum("nab,nb->na", T[:, :3, :3], P.displaced_moment) + P.displaced[:, None] * T[:, :3, 3]
    return float(model.gravity @ c.sum(axis=0))


def thrust_response(thrust, command, time_constants, dt):
    """Exact first-order response over a step held at ``command``: ``(thrust at the end, mean thrust over the
    step)`` (``Ṫ = (u − T)/τ``; τ = 0 follows at once)."""
    T0 = np.asarray(thrust, dtype=float)
    u = np.asarray(command, dtype=float)
    tc = np.asarray(time_constants, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(tc > 0, dt / np.where(tc > 0, tc, 1.0), np.inf)
        decay = np.exp(-x)
        mean_factor = np.where(tc > 0, -np.expm1(-x) / np.where(np.isfinite(x), x, 1.0), 0.0)
    end = u + (T0 - u) * decay
    mean = u + (T0 - u) * mean_factor
    return end, mean


def energy_storages(model, q, v) -> dict:
    """The stored energies of :func:`energy_ports` at a state, ``{name: J}`` in its order: ``kinetic`` (bodies and
    entrained fluid), ``gravity``, ``buoyancy`` (with a fluid), ``spring/<joint>`` (½k(θ − θ₀)²); their sum is
    the total energy of the balance ``E − E₀ − supplied + dissipated`` (what a run records each period)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    P = model.passive
    mm = model.mimic_reduction
    full = model if mm is None else mm.full
    qf, vf = (q, v) if mm is None else (mm.q_full(q), mm.v_full(v))
    storages = {"kinetic": model.kinetic_energy(q, v), "gravity": full.gravity_energy(qf)}
    if P is not None and P.has_fluid:
        storages["buoyancy"] = buoyancy_energy(full, qf)
    if P is not None and full.tree.nj and np.any(P.stiffness > 0):
        spring = _joint_terms(full, qf, vf)[0]
        for j, name in enumerate(full.tree.joint_names):
            if P.stiffness[j] > 0:
                storages[f"spring/{name}"] = 0.5 * P.stiffness[j] * (spring[j] / P.stiffness[j]) ** 2
    return {k: float(x) for k, x in storages.items()}


def energy_ports(model, q, v, efforts=None, wrench=None, thrust=None, temperature=ENVIRONMENT_TEMPERATURE) -> dict:
    """Port-level bookkeeping at a state (seed 000): ``{"storages": {name: J}, "ports": {name: W into the system},
    "dissipators": {name: W ≥ 0}, "entropy_production": W/K}``.

    ``efforts`` (n_joints,) applied joint efforts; ``wrench`` the base wrench ``[F; τ]`` in BASE (body) axes at
    its origin; ``thrust`` (nt,) the thrust each thruster gives now. Storages: ``kinetic`` (bodies and entrained
    fluid), ``gravity``, ``buoyancy`` (with a fluid), ``spring/<joint>``. Ports: ``effort/<joint>``, ``wrench``,
    ``thruster/<name>``, ``current`` (the power the moving water gives: the current's loads plus what the
    relative-velocity damping takes from it). Dissipators: ``damper/<joint>``, ``friction/<joint>``,
    ``hydrodynamic_damping/<link>``. With mimic joints: the independent joints' (ports of the reduced model)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    P = model.passive
    mm = model.mimic_reduction
    full = model if mm is None else mm.full
    qf, vf = (q, v) if mm is None else (mm.q_full(q), mm.v_full(v))
    storages = energy_storages(model, q, v)
    ports, diss = {}, {}
    nj = len(model.joint_names)
    nvb = model.nv - nj
    if efforts is not None and nj:
        for name, e, r in zip(model.joint_names, np.asarray(efforts, dtype=float), v[nvb:]):
            ports[f"effort/{name}"] = float(e * r)
    V0 = model.twist(q, v)
    if wrench is not None and model.group is not None:
        W = np.asarray(wrench, dtype=float).reshape(6)
        ports["wrench"] = float(model.wrench_to_generalized(q, W)[0][:nvb] @ v[:nvb]) if nvb else 0.0
    if P is not None and len(P.thruster_names) and thrust is not None:
        VT = P.B_thrust.T @ V0
        for name, T, vel in zip(P.thruster_names, np.asarray(thrust, dtype=float), VT):
            ports[f"thruster/{name}"] = float(T * vel)
    if P is not None:
        ftree = full.tree
        if ftree.nj:
            spring, damper, friction, rates = _joint_terms(full, qf, vf)
            for j, name in enumerate(ftree.joint_names):
                if P.damping[j] > 0:
                    diss[f"damper/{name}"] = float(-damper[j] * rates[j])
                if P.friction[j] > 0:
                    diss[f"friction/{name}"] = float(-friction[j] * rates[j])
        if P.has_fluid and (P.elem_body.size or P.has_current):
            _, V, W, W_cur, w_el, Vr_el = _loads(full, qf, vf)
            p_hydro = 0.0
            for e, link in enumerate(P.elem_links):
                d = float(w_el[e] @ Vr_el[e])
                diss[f"hydrodynamic_damping/{link}"] = d
                p_hydro += d
            # the loads' power on the bodies is −Σ dissipated + what the current supplies
            ports["current"] = float(np.einsum("na,na->", W, V)) + p_hydro
    return {"storages": storages, "ports": ports, "dissipators": diss,
            "entropy_production": sum(diss.values()) / float(temperature), "temperature": float(temperature)}
