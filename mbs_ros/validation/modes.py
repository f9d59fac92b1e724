"""Modal frequencies of the hanging balloon chain (seed 002 §4, Table 1) from our linearisation, against
independent ones (issue 20).

    python -m mbs_ros.validation modes [--k 100] [--json]

Ours: the equilibrium by :func:`mbs_ros.dynamics.algorithms.equilibrium.find_equilibrium` (gravity, the buoyancy held in world
axes at B, the slider spring; dampers off), then ``A`` of :meth:`Model.linearize` with the applied force's
q-derivative (the buoyancy turning with the balloon, the spring) added, ``∂a/∂q += M⁻¹ ∂τ/∂q``; the oscillatory
modes are the eigenvalues ±iω of A. Reference: Pinocchio's ``aba`` on the same URDF with the buoyancy as ``fext``
and the spring as a joint force, differentiated by central differences along ``pin.integrate`` (no code of ours),
its A's eigenvalues; and a closed form, a fixed-base double pendulum of equal point masses m and lengths l, whose
det(K − ω²M) = 0 gives ω² = (2 ∓ √2) g/l.
"""
from __future__ import annotations

import warnings

import numpy as np

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms.equilibrium import find_equilibrium
from mbs_ros.validation import balloon as bl
from mbs_ros.validation import pin_reference as pr
from mbs_ros.validation._study import Study, fmt, table

FREE_Q = [3, 5, 6, 7, 8]  # balloon roll and pitch about its x and z axes, slider, pendulums; position and yaw held
OSCILLATORY = 1e-4  # rad/s: eigenvalues with |Im λ| above it are modes, below it the free directions (λ ≈ 0)


def _spring(k, nv):
    def f(q, v):
        out = np.zeros(nv)
        out[6] = -k * q[7]
        return out

    def jac(q, v):
        d = np.zeros((nv, nv))
        d[6, 6] = -k
        return d, np.zeros((nv, nv))

    return f, jac


def balloon_equilibrium(model, k: float = bl.DEFAULTS["k"]):
    """The chain hanging below the balloon, from a perturbed start (see the module docstring)."""
    q0 = model.neutral()
    q0[8], q0[9] = 0.4, -0.3
    q0 = model.integrate(q0, np.array([0.0, 0.0, 0.0, 0.2, 0.0, -0.15, 0.05, 0.0, 0.0]))
    f, jac = _spring(k, model.nv)
    return find_equilibrium(model, q0, free_q=FREE_Q, wrench_world=np.concatenate([bl.BUOYANCY, np.zeros(3)]),
                            forces=f, forces_jacobian=jac)


def state_matrix(model, eq) -> np.ndarray:
    """A of :meth:`Model.linearize` at the equilibrium, with ``M⁻¹ ∂τ/∂(q, v)`` of the applied forces added
    (:meth:`~mbs_ros.dynamics.algorithms.equilibrium.Equilibrium.linearize`)."""
    return np.array(eq.linearize(model).A)


COORDINATES = ("x", "y", "z", "roll (x_b)", "yaw (y_b)", "pitch (z_b)", "slider", "θ1", "θ2")


def frequencies(A) -> np.ndarray:
    """The oscillation frequencies (rad/s, ascending) of A: |λ| of the eigenvalues with Im λ > OSCILLATORY."""
    lam = np.linalg.eigvals(A)
    return np.sort(np.abs(lam[lam.imag > OSCILLATORY]))


def dominant_coordinates(A) -> list:
    """For each oscillatory mode (ascending ω), the attitude or joint coordinate with the largest share of its
    eigenvector's δq (a label; the base translates with every swing, the system's centre of mass staying put)."""
    lam, vec = np.linalg.eig(A)
    keep = np.flatnonzero(lam.imag > OSCILLATORY)
    keep = keep[np.argsort(np.abs(lam[keep]))]
    return [COORDINATES[3 + int(np.argmax(np.abs(vec[3:9, i])))] for i in keep]


def pinocchio_state_matrix(q, k: float = bl.DEFAULTS["k"], h: float = 1e-6) -> tuple:
    """``(A, a)`` at (q, v = 0) from Pinocchio's aba: A by central differences of step h along ``pin.integrate``
    and v, a the acceleration there (0 at an equilibrium)."""
    pin = pr.require_pinocchio()
    pm = bl.pinocchio_model()
    data = pm.createData()
    nv = pm.nv

    def acc(qq, vv):
        R = pr.quat_matrix(qq[3:7])
        fext = [pin.Force.Zero() for _ in range(pm.njoints)]
        fext[1] = pin.Force(R.T @ bl.BUOYANCY, np.zeros(3))
        tau = np.zeros(nv)
        tau[6] = -k * qq[7]
        return np.array(pin.aba(pm, data, qq, vv, tau, fext))

    v = np.zeros(nv)
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    for i, e in enumerate(np.eye(nv) * h):
        A[nv:, i] = (acc(pin.integrate(pm, q, e), v) - acc(pin.integrate(pm, q, -e), v)) / (2 * h)
        A[nv:, nv + i] = (acc(q, v + e) - acc(q, v - e)) / (2 * h)
    return A, acc(q, v)


DOUBLE_PENDULUM = dict(m=1.0, l=0.8, g=9.81)


def double_pendulum_urdf(m: float, l: float) -> str:
    """Two revolute joints about y, point masses m at l below each joint (fixed base)."""
    link = ('<link name="{n}"><inertial><origin xyz="0 0 {z}"/><mass value="{m}"/><inertia ixx="0" ixy="0" '
            'ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>')
    joint = ('<joint name="{n}" type="revolute"><parent link="{p}"/><child link="{c}"/><origin xyz="0 0 {z}"/>'
             '<axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="100" velocity="10"/></joint>')
    return ('<robot name="double_pendulum"><link name="base"/>' + link.format(n="l1", z=-l, m=m)
            + link.format(n="l2", z=-l, m=m) + joint.format(n="j1", p="base", c="l1", z=0.0)
            + joint.format(n="j2", p="l1", c="l2", z=-l) + "</robot>")


def double_pendulum() -> dict:
    """Our linearisation of the hanging double pendulum against ω² = (2 ∓ √2) g / l."""
    p = DOUBLE_PENDULUM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # point masses: zero rotational inertia
        model = Model.from_urdf(double_pendulum_urdf(p["m"], p["l"]), base="fixed", gravity=(0.0, 0.0, -p["g"]))
    q = model.neutral()
    ours = frequencies(model.linearize(q, np.zeros(2), model.gravity_forces(q)).A)
    closed = np.sqrt(np.array([2.0 - np.sqrt(2.0), 2.0 + np.sqrt(2.0)]) * p["g"] / p["l"])
    return {"ours": ours.tolist(), "closed_form": closed.tolist(),
            "rel_diff": (np.abs(ours - closed) / closed).tolist() if ours.size == 2 else None}


def run(k: float = bl.DEFAULTS["k"], use_reference: bool = True) -> dict:
    model = bl.build_model()
    eq = balloon_equilibrium(model, k)
    out = {"study": "modes", "k": k, "equilibrium": {"success": eq.success, "residual": eq.residual,
                                                     "q": eq.q.tolist(), "message": eq.message}}
    A = state_matrix(model, eq)
    ours = frequencies(A)
    lam = np.linalg.eigvals(A)
    out["ours"] = ours.tolist()
    out["dominant"] = dominant_coordinates(A)
    out["max_abs_real_part"] = float(np.abs(lam.real).max())
    out["zero_modes"] = int(np.sum(np.abs(lam.imag) <= OSCILLATORY))
    if use_reference:
        try:
            A_ref, a_ref = pinocchio_state_matrix(eq.q, k)
            ref = frequencies(A_ref)
            out["reference"] = ref.tolist()
            out["rel_diff"] = (np.abs(ours - ref) / ref).tolist() if ref.size == ours.size else None
            out["pinocchio_residual"] = float(np.abs(a_ref).max())
        except RuntimeError as exc:
            out["reference"], out["rel_diff"] = None, None
            out["reference_message"] = str(exc)
    out["double_pendulum"] = double_pendulum()
    return out


def _add_arguments(p):
    p.add_argument("--k", type=float, default=bl.DEFAULTS["k"], help="slider spring (N/m), default 100")
    p.add_argument("--no-reference", action="store_true", help="skip the Pinocchio reference")


def _run(args) -> dict:
    return run(args.k, not args.no_reference)


def _report(r) -> str:
    e = r["equilibrium"]
    lines = [f"balloon chain hanging (TITOP §4, k = {r['k']:g} N/m, dampers off): equilibrium "
             f"{'found' if e['success'] else 'NOT found'}, max |a| = {fmt(e['residual'])}",
             f"  {r['zero_modes']} eigenvalues with |Im| ≤ {OSCILLATORY:g} (free directions: base position, yaw); "
             f"max |Re λ| = {fmt(r['max_abs_real_part'])}"]
    ref = r.get("reference")
    rows = []
    for i, w in enumerate(r["ours"]):
        wr = ref[i] if ref is not None and i < len(ref) else None
        d = r["rel_diff"][i] if r.get("rel_diff") else None
        rows.append([str(i + 1), fmt(w, ".9f"), fmt(wr, ".9f"), fmt(d), fmt(w / (2 * np.pi), ".6f"),
                     r["dominant"][i]])
    lines.append(table(["mode", "ω ours (rad/s)", "ω Pinocchio FD (rad/s)", "rel. diff", "f ours (Hz)",
                        "largest δθ/joint"], rows))
    if ref is None:
        lines.append(f"reference: {r.get('reference_message')}")
    else:
        lines.append(f"Pinocchio's aba at our equilibrium: max |a| = {fmt(r['pinocchio_residual'])}")
    dp = r["double_pendulum"]
    p = DOUBLE_PENDULUM
    lines += ["", f"double pendulum, fixed base, m = {p['m']:g} kg, l = {p['l']:g} m: ω² = (2 ∓ √2) g/l",
              table(["mode", "ω ours (rad/s)", "ω closed form", "rel. diff"],
                    [[str(i + 1), fmt(a, ".9f"), fmt(b, ".9f"), fmt(d)]
                     for i, (a, b, d) in enumerate(zip(dp["ours"], dp["closed_form"], dp["rel_diff"] or []))])]
    return "\n".join(lines)


HELP = __doc__ + """
Metrics (--json): equilibrium {success, residual (max |a|), q, message}; ours (ω, rad/s, ascending); dominant
(each mode's largest attitude/joint δq coordinate, a label);
reference (Pinocchio's, same order) and rel_diff; pinocchio_residual (max |aba| at our equilibrium);
zero_modes, max_abs_real_part (0 with the dampers off);
double_pendulum {ours, closed_form, rel_diff}.
"""

STUDY = Study("modes", "modal frequencies of the hanging balloon chain vs Pinocchio and a closed form", HELP,
              _add_arguments, _run, _report, ("002",), "§4")
