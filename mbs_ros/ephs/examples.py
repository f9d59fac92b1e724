"""The paper's examples built by composition (seed 000 §2 Figs. 5–7, §4 Fig. 2, §5.2.5–5.2.6).

Twists, momenta and wrenches are linear first here, u = [υ; ω], p = [p_υ; p_ω], as everywhere in mbs_ros; the
paper orders (ω, υ), and its eqs. (14), (15), (18), (22) are transcribed with the halves swapped
(:func:`paper_order` converts)."""
from __future__ import annotations

import numpy as np

from mbs_ros.dynamics.lie import SE3, hat3
from mbs_ros.ephs.components import Dirac, Environment, Onsager, Storage
from mbs_ros.ephs.pattern import Pattern
from mbs_ros.ephs.ports import Port

__all__ = ["paper_order", "coadjoint_matrix", "spatial_momentum", "canonical_coupling", "spring", "point_mass",
           "mechanical_friction", "harmonic_oscillator", "damped_oscillator", "linear_spring", "linear_damper",
           "body_spring_damper", "rigid_body"]

THETA0 = 300.0  # K, default environment temperature


def paper_order(x) -> np.ndarray:
    """Swap the halves of a 6-vector: our linear-first [υ; ω] ↔ the paper's (ω, υ) (an involution)."""
    x = np.asarray(x, dtype=float)
    return np.concatenate([x[3:], x[:3]])


def coadjoint_matrix(p) -> np.ndarray:
    """K(p) with ad*_u(p) = K(p) u on SE(3) = SO(3)⋉R³ (eq. 15, linear first):
    ad*_u p = [p_υ×ω; p_ω×ω + p_υ×υ]. K is skew, so the Lie–Poisson structure f = −K(p) e (eq. 19) is power-neutral."""
    pv, pw = hat3(p[:3]), hat3(p[3:])
    return np.block([[np.zeros((3, 3)), pv], [pv, pw]])


def spatial_momentum(q, p) -> np.ndarray:
    """Ad*_{q⁻¹}(p) (eq. 14): the world-frame momentum [R p_υ; R p_ω + r × R p_υ] of body momentum p at pose q
    (SE3 layout [x y z qx qy qz qw])."""
    T = SE3.as_matrix(q)
    R, r = T[:3, :3], T[:3, 3]
    return np.concatenate([R @ p[:3], R @ p[3:] + np.cross(r, R @ p[:3])])


def canonical_coupling(q: Port, p: Port) -> Dirac:
    """Potential–kinetic coupling (eqs. 3, 21): q.f = −p.e, p.f = q.e. For a group-valued q the maps T_eL_q of
    eq. (21) are the identity in left-trivialised variables."""
    n = q.dim
    return Dirac([q, p], np.block([[np.zeros((n, n)), -np.eye(n)], [np.eye(n), np.zeros((n, n))]]))


def spring(k: float, q0: float = 0.0) -> Storage:
    """Hookean spring (eq. 1): E(q) = ½k(q − q₀)²."""
    return Storage(Port("q", "displacement"), lambda q: 0.5 * k * (q[0] - q0) ** 2, lambda q: k * (q - q0))


def point_mass(m: float) -> Storage:
    """Kinetic energy on a line (eq. 2): E(p) = p²/2m, effort υ = p/m."""
    return Storage(Port("p", "momentum"), lambda p: 0.5 * p[0] ** 2 / m, lambda p: p / m)


def mechanical_friction(mu, theta0: float = THETA0, dim: int = 1, kind: str = "momentum") -> Onsager:
    """Mechanical friction (eqs. 6, 29), μ symmetric ≥ 0 (scalar d for dim 1): with υ = p.e, θ = θ₀ + s.e,
    M = [[θμ, −μυ], [−(μυ)ᵀ, υᵀμυ/θ]] = Bᵀ μ B / θ with B = [θ 1, −υ]; M [υ; θ] = 0, so energy is conserved;
    p.f = μυ (friction force), s.f = −υᵀμυ/θ (entropy leaves through the port)."""
    mu = np.atleast_2d(np.asarray(mu, dtype=float))

    def M(states, efforts):
        u, theta = efforts[0], theta0 + efforts[1][0]
        mu_u = mu @ u
        return np.block([[theta * mu, -mu_u[:, None]], [-mu_u[None, :], np.array([[u @ mu_u / theta]])]])

    return Onsager([Port("p", kind, dim), Port("s", "entropy")], M, theta0)


def harmonic_oscillator(m: float, k: float, q0: float = 0.0) -> Pattern:
    """Fig. 5: spring pe, mass ke, coupling pkc; outer port p. Flattens to eq. (5): q̇ = p/m, ṗ = −k q + p.f."""
    pe, ke = spring(k, q0), point_mass(m)
    return Pattern({"pe": pe, "ke": ke, "pkc": canonical_coupling(pe.port, ke.port)},
                   {"q": ["pe.q", "pkc.q"], "p": ["ke.p", "pkc.p"]}, outer={"p": "p"})


def damped_oscillator(m: float, k: float, d: float, theta0: float = THETA0) -> Pattern:
    """Fig. 6: the oscillator of Fig. 5 (nested), friction mf and environment env. Flattens to eq. (8):
    q̇ = υ, ṗ = −kq − dυ, ṡ = dυ²/θ₀ (υ = p/m); E + θ₀ s is conserved."""
    return Pattern({"osc": harmonic_oscillator(m, k), "mf": mechanical_friction(d, theta0),
                    "env": Environment(theta0)}, {"p": ["osc.p", "mf.p"], "s": ["mf.s", "env.s"]})


def linear_spring(k: float, q0: float = 0.0) -> Pattern:
    """A prismatic joint's displacement with a spring (storage, eq. 1, rest position q₀) and its coupling to the
    kinetic domain (eq. 3); outer port p (momentum). Holds no kinetic storage: a body fills that junction."""
    pe = spring(k, q0)
    p = Port("p", "momentum")
    return Pattern({"pe": pe, "pkc": canonical_coupling(pe.port, p)}, {"q": ["pe.q", "pkc.q"], "p": ["pkc.p"]},
                   outer={"p": "p"})


def linear_damper(d: float, theta0: float = THETA0) -> Pattern:
    """Viscous damper d with the environment absorbing its heat (eqs. 6, 7); outer port p (momentum)."""
    return Pattern({"mf": mechanical_friction(d, theta0), "env": Environment(theta0)},
                   {"p": ["mf.p"], "s": ["mf.s", "env.s"]}, outer={"p": "p"})


def body_spring_damper(m: float, k: float, d: float, q0: float = 0.0, theta0: float = THETA0) -> Pattern:
    """Mass m on a prismatic joint with spring k (rest position q₀) and viscous damper d, three subsystems sharing
    the body's kinetic energy domain: mẍ = −k(x − q₀) − dẋ, ṡ = dẋ²/θ₀. State layout: body (p), spring.pe (x),
    damper.env (s)."""
    return Pattern({"body": point_mass(m), "spring": linear_spring(k, q0),
                    "damper": linear_damper(d, theta0)}, {"p": ["body.p", "spring.p", "damper.p"]})


def rigid_body(m: float, J, g=None) -> Pattern:
    """Fig. 2 (§4.2) on G = SE(3): kinetic storage ke (eq. 18, E = ½p_ωᵀJ⁻¹p_ω + |p_υ|²/2m), Lie–Poisson
    structure lp (eq. 19), potential storage pe on the pose (eqs. 17, 20; V = m g·r, ``g`` the gravity covector,
    (0, 0, 9.81) for z up, i.e. minus the acceleration of gravity; None: V = 0) and coupling pkc (eq. 21).
    Outer port p.
    Flattens to eq. (22): q̇ = T_eL_q(u), ṗ = ad*_u(p) − T*_eL_q(dV) + p.f with u = dE(p) = [p_υ/m; J⁻¹p_ω].
    State layout: pe (pose, [x y z qx qy qz qw]), ke (body momentum [p_υ; p_ω])."""
    J_inv = np.linalg.inv(np.asarray(J, dtype=float))
    g = np.zeros(3) if g is None else np.asarray(g, dtype=float)
    P, Q = Port("p", "rigid_body_momentum", 6), Port("q", "pose", 6, group=SE3)
    ke = Storage(P, lambda p: 0.5 * p[3:] @ J_inv @ p[3:] + 0.5 * p[:3] @ p[:3] / m,
                 lambda p: np.concatenate([p[:3] / m, J_inv @ p[3:]]))
    pe = Storage(Q, lambda q: m * g @ q[:3],
                 lambda q: np.concatenate([m * SE3.as_matrix(q)[:3, :3].T @ g, np.zeros(3)]))
    lp = Dirac([P], lambda p: -coadjoint_matrix(p))
    return Pattern({"pe": pe, "ke": ke, "lp": lp, "pkc": canonical_coupling(Q, P)},
                   {"q": ["pe.q", "pkc.q"], "p": ["ke.p", "lp.p", "pkc.p"]}, outer={"p": "p"})
