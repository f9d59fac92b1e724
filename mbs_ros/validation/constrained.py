"""Seed 001 (Müller & Terze): constrained multibody systems integrated on SE(3) and on SO(3)×R³.

Three studies on :class:`mbs_ros.dynamics.algorithms.constraints.ConstrainedSystem` (index-1 KKT system, Munthe-Kaas steps):
``heavy-top`` (§5.1), ``double-pendulum`` (§5.2) and ``floating-pair`` (§5.3). The paper's angular-first
twists ``(ω, v)`` are ours ``[v; ω]``; its examples use body frames at the centres of mass, as here.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.integrate import solve_ivp

from mbs_ros.dynamics import TABLEAUS
from mbs_ros.dynamics.algorithms.constraints import SPACES, Body, ConstrainedSystem, spherical
from mbs_ros.dynamics.lie import hat3
from mbs_ros.validation._study import Study, fmt, order_fit, table

# ----------------------------------------------------------------------------------------------- the examples
TOP_MASS = 21.6
TOP_INERTIA = np.diag([0.36, 0.306, 0.09])  # box 0.1 × 0.2 × 0.4 m, aluminium (paper)
TOP_R0 = np.array([0.5, 0.0, 0.0])  # c.o.m. from the pivot, body axes (paper)
TOP_OMEGA0 = np.array([0.0, 20 * np.pi, 10 * np.pi])
TOP_T0 = 13972.4  # J, paper 13.97 kJ; = π² (0.5 (0.306·400 + 0.09·100) + 0.5·21.6·125)

LINK_A = 0.2  # boxes 0.2 × 0.1 × 0.05 m (paper)
LINK_MASS = 2.7  # assumption: aluminium, 2700 kg/m³ (the paper gives no mass)
LINK_INERTIA = np.diag([2.8125e-3, 9.5625e-3, 11.25e-3])  # m/12 (b²+c², a²+c², a²+b²)
PENDULUM_OMEGA = (np.array([10.0, 0.0, 0.0]), np.array([10 * np.pi, 10 * np.pi, 20 * np.pi]))
PAIR_OMEGA = (np.array([0.0, 0.0, -10.0]), np.array([1.0, -1.0, 2 * np.pi]))
G = 9.81  # assumption for §5.2 (not given)

EXAMPLES = ("heavy-top", "double-pendulum", "floating-pair")


def _initial(system, positions, omegas):
    """q0 with identity rotations; v0 with the given angular velocities and linear velocities from the
    kinetic-energy-metric projection onto J v = 0 (angular velocities kept)."""
    q0 = system.configuration([(p, np.eye(3)) for p in positions])
    v0 = system.velocity_from_twists(q0, [np.concatenate([np.zeros(3), w]) for w in omegas])
    keep = np.tile(np.r_[False, False, False, True, True, True], len(positions))
    return q0, system.project_velocity(q0, v0, keep=keep)


def build(example: str, spaces, gravity=None, stabilization=None):
    """``(system, q0, v0)`` of one of :data:`EXAMPLES` with the bodies on ``spaces`` (one per body)."""
    if example == "heavy-top":
        g = 0.0 if gravity is None else gravity
        system = ConstrainedSystem([Body("top", TOP_MASS, TOP_INERTIA, space=spaces[0])],
                                   [spherical("pivot", 0, -TOP_R0)], gravity=(0.0, 0.0, -g),
                                   stabilization=stabilization)
        q0, v0 = _initial(system, [TOP_R0], [TOP_OMEGA0])
        return system, q0, v0
    half = np.array([LINK_A / 2, 0.0, 0.0])
    bodies = [Body("link1", LINK_MASS, LINK_INERTIA, space=spaces[0]),
              Body("link2", LINK_MASS, LINK_INERTIA, space=spaces[1])]
    joint2 = spherical("joint2", 0, half, 1, -half)
    if example == "double-pendulum":
        g = G if gravity is None else gravity
        system = ConstrainedSystem(bodies, [spherical("ground", 0, -half), joint2], gravity=(0.0, 0.0, -g),
                                   stabilization=stabilization)
        q0, v0 = _initial(system, [half, 3 * half], PENDULUM_OMEGA)
        return system, q0, v0
    if example == "floating-pair":
        g = 0.0 if gravity is None else gravity
        system = ConstrainedSystem(bodies, [joint2], gravity=(0.0, 0.0, -g), stabilization=stabilization)
        q0, v0 = _initial(system, [half, 3 * half], PAIR_OMEGA)
        return system, q0, v0
    raise ValueError(f"unknown example {example!r}; choose one of {', '.join(EXAMPLES)}")


def n_bodies(example: str) -> int:
    return 1 if example == "heavy-top" else 2


# ------------------------------------------------------------------------------------------------ references
def top_reference(t_eval, gravity: float = 0.0):
    """Heavy top as a body rotating about the pivot: Euler's equations ``J_O ω̇ = −ω × J_O ω + r₀ × Rᵀ m g`` with
    ``J_O = Θ + m(|r₀|² 1 − r₀ r₀ᵀ)``, ``Ṙ = R ω̂``, integrated by DOP853 (rtol = atol = 1e-13) on (R, ω) ∈ R¹².
    Returns (R (n, 3, 3), c.o.m. = R r₀ (n, 3))."""
    J = TOP_INERTIA + TOP_MASS * (TOP_R0 @ TOP_R0 * np.eye(3) - np.outer(TOP_R0, TOP_R0))
    Ji = np.linalg.inv(J)
    g = np.array([0.0, 0.0, -gravity])

    def rhs(t, x):
        R, w = x[:9].reshape(3, 3), x[9:]
        tq = np.cross(TOP_R0, R.T @ (TOP_MASS * g))
        return np.concatenate([(R @ hat3(w)).ravel(), Ji @ (tq - np.cross(w, J @ w))])

    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), np.concatenate([np.eye(3).ravel(), TOP_OMEGA0]),
                    method="DOP853", rtol=1e-13, atol=1e-13, t_eval=t_eval)
    R = sol.y[:9].T.reshape(-1, 3, 3)
    return R, R @ TOP_R0


def pinocchio_reference(example: str, system, q0, v0, t_eval, gravity: float):
    """Double pendulum / floating pair as a Pinocchio tree (spherical joints; a free-flyer for the floating pair),
    ABA integrated by DOP853 at 1e-12 on a quaternion embedding. Returns per body (R (n, 3, 3), c.o.m. (n, 3))."""
    from mbs_ros.validation import pin_reference as pr

    pin = pr.require_pinocchio()
    model = pin.Model()
    model.gravity = pin.Motion(np.array([0.0, 0.0, -gravity, 0.0, 0.0, 0.0]))
    half = np.array([LINK_A / 2, 0.0, 0.0])
    inertia = pin.Inertia(LINK_MASS, half, LINK_INERTIA)
    (R1, r1), (R2, r2) = system.poses(q0)
    w1, w2 = v0[3:6], v0[9:12]  # body angular velocities (both spaces)
    if example == "double-pendulum":
        j1 = model.addJoint(0, pin.JointModelSpherical(), pin.SE3.Identity(), "ground")
        model.appendBodyToJoint(j1, inertia, pin.SE3.Identity())
        q_ref = list(system.configuration([(np.zeros(3), R1)])[3:])
        v_ref = [w1]
    else:
        j1 = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "free")
        model.appendBodyToJoint(j1, inertia, pin.SE3.Identity())
        p1 = r1 - R1 @ half  # joint-1 frame at body 1's far end, so both bodies have the same layout
        q_ref = list(system.configuration([(p1, R1)]))
        V1 = system.models[0].twist(q0[:7], v0[:6])  # body twist at the c.o.m.
        v_ref = [V1[:3] - np.cross(w1, half), w1]  # body velocity of the point −half
    j2 = model.addJoint(j1, pin.JointModelSpherical(), pin.SE3(np.eye(3), 2 * half), "joint2")
    model.appendBodyToJoint(j2, inertia, pin.SE3.Identity())
    R12 = R1.T @ R2
    q_ref += list(system.configuration([(np.zeros(3), R12)])[3:])
    v_ref.append(w2 - R12.T @ w1)
    q, v = pr.integrate(model, np.array(q_ref), np.concatenate(v_ref), t_eval, rtol=1e-12, atol=1e-12)
    data = model.createData()
    out = [([], []), ([], [])]
    for qk in q:
        pin.forwardKinematics(model, data, qk)
        for b, jid in enumerate((j1, j2)):
            M = data.oMi[jid]
            out[b][0].append(M.rotation.copy())
            out[b][1].append(M.rotation @ half + M.translation)
    return [(np.array(R), np.array(c)) for R, c in out]


# -------------------------------------------------------------------------------------------------- the runs
def run_once(example: str, spaces, method: str = "rk4", dt: float = 1e-3, t_end: float = 1.0, gravity=None,
             stabilization=None, reference: bool = True, sample: float = 0.01) -> dict:
    """One integration; metrics as documented in the study's ``--help``."""
    system, q0, v0 = build(example, spaces, gravity=gravity, stabilization=stabilization)
    steps = int(round(t_end / dt))
    start = time.perf_counter()
    t, q, v = system.simulate(q0, v0, None, dt, steps, method=method, stop_on_divergence=True)
    wall = time.perf_counter() - start
    diverged = t.size < steps + 1
    viol = np.array([system.violations(qk) for qk in q])
    T0 = system.kinetic_energy(q0, v0)
    with np.errstate(over="ignore", invalid="ignore"):
        E = np.array([system.energy(a, b) for a, b in zip(q, v)])
    out = {
        "space": ",".join(spaces) if len(set(spaces)) > 1 else spaces[0],
        "method": method, "dt": dt, "t_end": float(t[-1]), "steps": int(t.size - 1),
        "diverged_at": float(t[-1] + dt) if diverged else None,
        "stabilization": stabilization or "none",
        "kinetic_energy_initial": T0,
        "violation_max": {j.name: float(viol[:, k].max()) for k, j in enumerate(system.joints)},
        "energy_drift_rel": float(np.abs(E - E[0]).max() / T0),
        "us_per_step": 1e6 * wall / max(1, t.size - 1),
    }
    if example == "floating-pair":
        h = np.array([system.spatial_momentum(a, b) for a, b in zip(q, v)])
        out["momentum_drift"] = float(np.abs(h - h[0]).max())
    if reference and not diverged:
        out["reference_error"] = _reference_error(example, system, q0, v0, t, q, gravity, sample)
    return out


def _reference_error(example, system, q0, v0, t, q, gravity, sample):
    stride = max(1, int(round(sample / (t[1] - t[0])))) if t.size > 1 else 1
    idx = np.arange(0, t.size, stride)
    if idx[-1] != t.size - 1:
        idx = np.append(idx, t.size - 1)
    if example == "heavy-top":
        R, c = top_reference(t[idx], 0.0 if gravity is None else gravity)
        refs = [(R, c)]
    else:
        g = (G if example == "double-pendulum" else 0.0) if gravity is None else gravity
        try:
            refs = pinocchio_reference(example, system, q0, v0, t[idx], g)
        except RuntimeError as exc:
            return {"reference": None, "message": str(exc)}
    rot = pos = 0.0
    for k, i in enumerate(idx):
        for b, (R, r) in enumerate(system.poses(q[i])):
            rot = max(rot, float(np.abs(R - refs[b][0][k]).max()))
            pos = max(pos, float(np.abs(r - refs[b][1][k]).max()))
    name = {"heavy-top": "Euler's equations about the pivot, DOP853 1e-13",
            "double-pendulum": "Pinocchio ABA (two spherical joints), DOP853 1e-12",
            "floating-pair": "Pinocchio ABA (free-flyer + spherical joint), DOP853 1e-12"}[example]
    return {"reference": name, "rotation_max": rot, "com_position_max": pos}


def convergence(example: str, spaces, method: str, dts, t_end: float, gravity=None) -> dict:
    """Max violation of each joint over [0, t_end] for each step in ``dts``, and the fitted order."""
    out = {"dt": list(dts), "t_end": t_end, "method": method, "violation_max": {}, "order": {}}
    for dt in dts:
        r = run_once(example, spaces, method, dt, t_end, gravity=gravity, reference=False)
        for name, val in r["violation_max"].items():
            out["violation_max"].setdefault(name, []).append(val)
    out["order"] = {k: order_fit(dts, v) for k, v in out["violation_max"].items()}
    return out


# --------------------------------------------------------------------------------------------------- the CLI
def _parse_spaces(text: str, n: int):
    if text in ("both", "all"):
        return [(s,) * n for s in SPACES]
    parts = [p.strip() for p in text.split(",")]
    for p in parts:
        if p not in SPACES:
            raise SystemExit(f"--space: {p!r} is not one of {', '.join(SPACES)} (or 'both')")
    if len(parts) == 1:
        return [(parts[0],) * n]
    if len(parts) != n:
        raise SystemExit(f"--space: give one space or one per body ({n})")
    return [tuple(parts)]


def _parse_methods(text: str):
    if text == "all":
        return list(TABLEAUS)
    parts = [p.strip() for p in text.split(",")]
    for p in parts:
        if p not in TABLEAUS:
            raise SystemExit(f"--method: {p!r} is not one of {', '.join(TABLEAUS)} (or 'all')")
    return parts


def _add_arguments(example, default_t_end):
    def add(p):
        p.add_argument("--space", default="both",
                       help="se3 | so3xr3 | both (default: both, side by side) | one per body, e.g. se3,so3xr3")
        p.add_argument("--method", default="rk4", help="euler | heun | rk3 | rk4 | all | a comma list (rk4)")
        p.add_argument("--dt", type=float, default=1e-3, help="step (s), default 1e-3 as in the paper")
        p.add_argument("--t-end", type=float, default=default_t_end, help=f"horizon (s), default {default_t_end}")
        p.add_argument("--gravity", type=float, default=None, help="g (m/s², along −z); default: the paper's case")
        p.add_argument("--stabilization", choices=("none", "baumgarte", "projection"), default="none",
                       help="constraint stabilisation (default none, as in the paper)")
        p.add_argument("--convergence", action="store_true",
                       help="also the violation over --dt 4, 2, 1, 0.5 ms (horizon min(t-end, 1 s)) and its order")
        p.add_argument("--no-reference", action="store_true", help="skip the independent reference")
    return add


def _run(example):
    def run(args) -> dict:
        n = n_bodies(example)
        spaces = _parse_spaces(args.space, n)
        methods = _parse_methods(args.method)
        stab = None if args.stabilization == "none" else args.stabilization
        runs = [run_once(example, sp, m, args.dt, args.t_end, gravity=args.gravity, stabilization=stab,
                         reference=not args.no_reference) for sp in spaces for m in methods]
        result = {"study": example, "runs": runs}
        if example == "heavy-top":
            result["kinetic_energy_initial_paper"] = TOP_T0
        if args.convergence:
            result["convergence"] = {",".join(sp): convergence(example, sp, methods[-1], (4e-3, 2e-3, 1e-3, 5e-4),
                                                               min(args.t_end, 1.0), gravity=args.gravity)
                                     for sp in spaces}
        return result
    return run


def _report(result: dict) -> str:
    runs = result["runs"]
    joints = list(runs[0]["violation_max"])
    header = ["space", "method", "dt", "T0 (J)"] + [f"max viol {j} (m)" for j in joints] + \
        ["energy drift", "us/step", "ref: R err", "ref: c.o.m. err"]
    rows = []
    for r in runs:
        ref = r.get("reference_error") or {}
        rows.append([r["space"], r["method"], fmt(r["dt"], "g"), fmt(r["kinetic_energy_initial"], ".4f")]
                    + [fmt(r["violation_max"][j]) for j in joints]
                    + [fmt(r["energy_drift_rel"]), fmt(r["us_per_step"], ".0f"),
                       fmt(ref.get("rotation_max")), fmt(ref.get("com_position_max"))])
    r0 = runs[0]
    lines = [f"{result['study']}: t_end = {r0['t_end']:g} s, stabilization {r0['stabilization']}",
             table(header, rows)]
    for r in runs:
        if r.get("diverged_at") is not None:
            lines.append(f"{r['space']} {r['method']}: diverged at t = {r['diverged_at']:g} s (metrics up to then)")
    if "kinetic_energy_initial_paper" in result:
        lines.append(f"paper: T0 = 13.97 kJ ({result['kinetic_energy_initial_paper']} J to 6 digits)")
    refs = {(r.get("reference_error") or {}).get("reference") for r in runs} - {None}
    for name in sorted(refs):
        lines.append(f"reference: {name}; its error is the step's integration error (RK4: ∝ h⁴, see --dt)")
    for r in runs:
        msg = (r.get("reference_error") or {}).get("message")
        if msg:
            lines.append(f"reference skipped: {msg}")
            break
    if "convergence" in result:
        for sp, c in result["convergence"].items():
            lines.append(f"\nconvergence of the violation, {sp}, {c['method']}, horizon {c['t_end']:g} s")
            rows = [[name] + [fmt(x) for x in vals] + [fmt(c["order"][name], ".2f")]
                    for name, vals in c["violation_max"].items()]
            lines.append(table(["joint"] + [f"h={d:g}" for d in c["dt"]] + ["order"], rows))
    return "\n".join(lines)


_COMMON = """
Metrics (--json: {{"study", "runs": [...], "convergence"?}}; one run per space × method):
  kinetic_energy_initial   T0 (J) after the consistent-velocity projection
  violation_max            {{joint: max over all steps of |p_a − p_b| (m)}}
  energy_drift_rel         max |E(t) − E(0)| / T0, E = T + V
  us_per_step              wall time per step (µs), this machine
  reference_error          {{reference, rotation_max (max |R − R_ref|), com_position_max (m)}}, every 10 ms,
                           against {ref}
  diverged_at              t at which the state stopped being finite (the metrics cover the run before), or null
  space, method, dt, t_end (reached), steps, stabilization
  convergence (--convergence): {{space: {{dt, violation_max: {{joint: [...]}}, order: {{joint: slope}}}}}}
{extra}Initial velocities: the given angular velocities; the linear ones from the kinetic-energy-metric projection
onto J v = 0 (ConstrainedSystem.project_velocity with the angular velocities kept).
Bodies on SE(3) use body twists; on SO(3)×R³ hybrid velocities [ṙ_world; ω_body]. No stabilisation by default.
"""

HEAVY_TOP_HELP = """Heavy top (seed 001 §5.1): a box 0.1 × 0.2 × 0.4 m, m = 21.6 kg, Θ = diag(0.36, 0.306, 0.09) kg·m²
about its c.o.m., tied to the ground by a spherical joint at r₀ = (0.5, 0, 0) m from the c.o.m. in body axes;
R(0) = I, ω₀ = (0, 20π, 10π) rad/s, v₀ = ω₀ × r₀ = (0, 5π, −10π) m/s: T₀ = 13 972.4 J (paper: 13.97 kJ).
Expected: on SE(3) the pivot violation stays at round-off (< 1e-10 m) for every tableau and step; on SO(3)×R³ it
drifts O(hᵖ) (see --convergence).
Paper values used as printed: no gravity (M = F = 0 despite the title; --gravity to add it), h = 1e-3 s.
Assumption: the final time is not given; default 1 s. (Lie–Euler, --method euler, is unstable for this fast top at
h = 1e-3: T triples within 1 s and the state overflows near 1.7 s; its SE(3) violation stays at round-off while
the energy is bounded and grows with the blown-up velocities after that.)
""" + _COMMON.format(ref="Euler's equations about the pivot (inertia about the pivot in closed form),\n"
                     "                           DOP853 1e-13", extra="")

DOUBLE_PENDULUM_HELP = """Spherical double pendulum (seed 001 §5.2): two boxes 0.2 × 0.1 × 0.05 m, spherical joints to the
ground at the end of link 1 and between the links; initially along +x (c.o.m. at 0.1 and 0.3 m), ω₁₀ = (10, 0, 0),
ω₂₀ = (10π, 10π, 20π) rad/s, consistent v₁ = 0, v₂ = (0, 2π, −π) m/s; h = 1e-3 s.
Expected: ground joint exact on SE(3) and drifting on SO(3)×R³; joint 2 (body to body) comparable in both.
Assumptions (the paper gives no mass, g or final time): aluminium, m = 2.7 kg, Θ = diag(2.8125, 9.5625,
11.25)e-3 kg·m²; g = 9.81 m/s² along −z, gravity m g on each body (the paper's F = Rᵀg misses the m); 2 s.
""" + _COMMON.format(ref="Pinocchio's ABA on the same bodies as a tree of spherical joints, DOP853\n"
                     "                           1e-12 (skipped, with a message, if pin is not installed)", extra="")

FLOATING_PAIR_HELP = """Two floating bodies (seed 001 §5.3): the double pendulum's links joined by joint 2 only, no gravity,
initially along +x, ω₁₀ = (0, 0, −10), ω₂₀ = (1, −1, 2π) rad/s.
Expected: both spaces comparable (no body is tied to the ground); total momentum conserved.
Assumptions: linear velocities are not given; the projection keeping the angular velocities gives the
smallest kinetic energy, i.e. the system's centre of mass at rest. Bodies as in double-pendulum; 2 s.
""" + _COMMON.format(ref="Pinocchio's ABA (free-flyer + spherical joint), DOP853 1e-12 (skipped, with\n"
                     "                           a message, if pin is not installed)",
                     extra="  momentum_drift           max |h(t) − h(0)| of the world spatial momentum "
                           "(no external force)\n")

STUDIES = [
    Study("heavy-top", "a heavy top on a spherical joint integrated on SE(3) and SO(3)×R³: joint drift, energy", HEAVY_TOP_HELP,
          _add_arguments("heavy-top", 1.0), _run("heavy-top"), _report, ("001",), "§5.1"),
    Study("double-pendulum", "a spherical double pendulum on SE(3) and SO(3)×R³ against Pinocchio", DOUBLE_PENDULUM_HELP, _add_arguments("double-pendulum", 2.0),
          _run("double-pendulum"), _report, ("001",), "§5.2"),
    Study("floating-pair", "two floating bodies joined by a spherical joint: momentum, joint drift", FLOATING_PAIR_HELP, _add_arguments("floating-pair", 2.0), _run("floating-pair"), _report,
          ("001",), "§5.3"),
]
