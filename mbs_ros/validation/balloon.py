"""Seed 002 §4 (Alazard et al., TITOP), Table 1: balloon + slider + double pendulum, 9 DOF, gravity and buoyancy.

Built from the package's multibody model: an inline URDF read by :meth:`mbs_ros.dynamics.Model.from_urdf` with a
floating SE(3) base (the balloon, frame at its centre of mass B), a prismatic joint at C (the slider, a point mass)
and two revolute joints about z (point-mass pendulums; S = C). Gravity (0, −9.81, 0) by the model; the buoyancy
+m_total·9.81 along world +y at B as a base wrench ``[Rᵀ F; 0]`` mapped to generalised forces through the base
velocity map (``Model.wrench_to_generalized``; ``Model.forward_dynamics`` takes no external wrench, and for a force on
the base body this mapping is exact); spring and dampers as joint forces. RKMK4 (our integrator) for the motion.

The reference is independent of our equations: Pinocchio's ABA (``pin``) on the same URDF, the buoyancy as
Pinocchio's ``fext`` on the free-flyer, integrated by scipy's DOP853 on a quaternion embedding
(:mod:`mbs_ros.validation.pin_reference`), run at ``--ref-tol`` and at a 10× tighter one to show it agrees with
itself.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.integrate import cumulative_simpson

from mbs_ros.dynamics import Model, simulate
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.validation import pin_reference as pr
from mbs_ros.validation._study import Study, fmt, table

G = 9.81
GRAVITY = np.array([0.0, -G, 0.0])
MASSES = {"balloon": 10.0, "slider": 1.0, "pendulum1": 2.0, "pendulum2": 3.0}
M_TOTAL = sum(MASSES.values())
J_B = np.array([[5.0, 0.0, 0.0], [0.0, 10.0, -7.0], [0.0, -7.0, 10.0]])  # about B, balloon axes (Table 1)
CB = np.array([0.0, 2.0, 0.0])  # [CB]_b: C is 2 m below B
AXIS_T = np.array([1.0, 0.0, -1.0]) / np.sqrt(2.0)  # slider axis (Table 1), normalised
SP1 = np.array([0.0, -1.2, 0.0])
P1P2 = np.array([0.0, -1.6, 0.0])
THETA0 = (np.deg2rad(170.0), np.deg2rad(-170.0))  # relative joint angles (TITOP's revolute blocks)
BUOYANCY = -M_TOTAL * GRAVITY  # world frame, at B: +156.96 N along y
COMS = {"balloon": np.zeros(3), "slider": np.zeros(3), "pendulum1": SP1, "pendulum2": P1P2}

#: Documented assumptions for what the paper leaves out.
DEFAULTS = dict(k=100.0, d_slider=5.0, d_pendulum=0.5, t_end=10.0, dt=1e-3, point_inertia=0.0)

# Closed forms at t = 0 (S = C, identity joint frames): the point masses sit at C = (0, −2, 0),
# P1 = C + Rz(θ1)(0, −1.2, 0) = C + 1.2 (sin θ1, −cos θ1, 0) and P2 = P1 + (0, −1.6, 0) (θ1 + θ2 = 0), relative to B.
J_R1, J_R2 = 2.0 * 1.2 ** 2, 3.0 * 1.6 ** 2  # 2.88, 7.68 kg·m²: m l² of each pendulum about its own joint
_S1, _C1 = np.sin(THETA0[0]), np.cos(THETA0[0])
#: net gravity + buoyancy torque about B (buoyancy acts at B): Σ m_i x_i g_y about z
TORQUE_B0 = np.array([0.0, 0.0, -G * (MASSES["pendulum1"] + MASSES["pendulum2"]) * 1.2 * _S1])
#: system centre of mass relative to B
COM0 = np.array([(MASSES["pendulum1"] + MASSES["pendulum2"]) * 1.2 * _S1,
                 MASSES["slider"] * -2.0 + MASSES["pendulum1"] * (-2.0 - 1.2 * _C1)
                 + MASSES["pendulum2"] * (-2.0 - 1.2 * _C1 - 1.6), 0.0]) / M_TOTAL
#: the same values worked out by hand from the paper's Table 1 when the study was written (rounded; the
#: "notes" below): the closed forms above must round to them
NOTES_T0 = {"J_r1": 2.88, "J_r2": 7.68, "torque_about_B_z": -10.2209, "com": (0.065118, -0.680697, 0.0)}


def _f(x) -> str:
    return repr(float(x))  # shortest round-trip decimal: the URDF carries the exact doubles


def _inertial(name, mass, com, inertia):
    i = inertia
    return (f'<link name="{name}"><inertial><origin xyz="{_f(com[0])} {_f(com[1])} {_f(com[2])}" rpy="0 0 0"/>'
            f'<mass value="{_f(mass)}"/><inertia ixx="{_f(i[0, 0])}" ixy="{_f(i[0, 1])}" ixz="{_f(i[0, 2])}" '
            f'iyy="{_f(i[1, 1])}" iyz="{_f(i[1, 2])}" izz="{_f(i[2, 2])}"/></inertial></link>')


def _joint(name, kind, parent, child, xyz, axis):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{_f(xyz[0])} {_f(xyz[1])} {_f(xyz[2])}" rpy="0 0 0"/>'
            f'<axis xyz="{_f(axis[0])} {_f(axis[1])} {_f(axis[2])}"/>'
            f'<limit lower="-1000" upper="1000" effort="1000" velocity="1000"/></joint>')


def urdf(point_inertia: float = 0.0) -> str:
    """The balloon system as URDF text; ``point_inertia`` (kg·m², default 0) gives the point masses a tiny
    isotropic inertia if a consumer needs positive-definite link inertias."""
    pi = point_inertia * np.eye(3)
    links = [_inertial("balloon", MASSES["balloon"], np.zeros(3), J_B),
             _inertial("slider", MASSES["slider"], np.zeros(3), pi),
             _inertial("pendulum1", MASSES["pendulum1"], SP1, pi),
             _inertial("pendulum2", MASSES["pendulum2"], P1P2, pi)]
    joints = [_joint("slider_joint", "prismatic", "balloon", "slider", -CB, AXIS_T),
              _joint("pendulum1_joint", "revolute", "slider", "pendulum1", np.zeros(3), (0.0, 0.0, 1.0)),
              _joint("pendulum2_joint", "revolute", "pendulum1", "pendulum2", SP1, (0.0, 0.0, 1.0))]
    return '<?xml version="1.0"?>\n<robot name="titop_balloon">' + "".join(links + joints) + "</robot>"


def build_model(point_inertia: float = 0.0) -> Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # J_B's principal moments 3, 5, 17 violate the triangle inequality
        return Model.from_urdf(urdf(point_inertia), base="se3", gravity=GRAVITY)


def initial_state(model: Model):
    q0 = model.neutral()
    q0[8], q0[9] = THETA0
    return q0, np.zeros(model.nv)


def joint_forces(v, k, d_slider, d_pendulum, q) -> np.ndarray:
    """(3,) spring/damper forces on the prismatic and the two revolute joints."""
    return np.array([-k * q[7] - d_slider * v[6], -d_pendulum * v[7], -d_pendulum * v[8]])


def _rotation(q):
    from mbs_ros.dynamics.lie import SE3

    return SE3.as_matrix(q[:7])[:3, :3]


def generalized_forces(model, q, v, k, d_slider, d_pendulum) -> np.ndarray:
    """τ (nv,): buoyancy through the base velocity map, then the joint forces."""
    tau = model.wrench_to_generalized(q, np.concatenate([_rotation(q).T @ BUOYANCY, np.zeros(3)]))[0]
    tau[6:] += joint_forces(v, k, d_slider, d_pendulum, q)
    return tau


def buoyancy_f_ext(q) -> np.ndarray:
    """(n_bodies, 6) external wrenches for inverse dynamics: the buoyancy on the base, in its frame at B."""
    f = np.zeros((4, 6))
    f[0, :3] = _rotation(q).T @ BUOYANCY
    return f


def system_com(model, q) -> np.ndarray:
    T = dict(zip(model.link_names, model.link_poses(q)))
    return sum(MASSES[n] * (T[n][:3, :3] @ COMS[n] + T[n][:3, 3]) for n in MASSES) / M_TOTAL


def energy(model, q, v, k) -> float:
    """T + V_gravity + V_buoyancy + V_spring, with V_buoyancy = −F_b · p_B (constant world force)."""
    return (model.kinetic_energy(q, v) + model.potential_energy(q) - BUOYANCY @ q[:3] + 0.5 * k * q[7] ** 2)


def initial_checks(model) -> dict:
    """The notes' closed-form values at t = 0 against the model."""
    q0, _ = initial_state(model)
    kin = alg.kinematics(model, q0)

    def apparent(col, body):  # 2 × kinetic energy of one body for a unit rate of one joint
        e = np.zeros(model.nv)
        e[col] = 1.0
        V = alg.body_twists(model, q0, e, kin)[body]
        return float(V @ kin.I[body] @ V)

    g = model.gravity_forces(q0)
    W_b = np.concatenate([BUOYANCY, np.zeros(3)])  # R(0) = I, B is the base origin
    net = -g[:6] + W_b
    com = system_com(model, q0)
    out = {"J_r1": apparent(7, 2), "J_r2": apparent(8, 3), "J_r2_crba": float(model.mass_matrix(q0)[8, 8]),
           "torque_about_B": net[3:].tolist(), "net_force": net[:3].tolist(), "com": com.tolist()}
    out["closed_form"] = {"J_r1": J_R1, "J_r2": J_R2, "torque_about_B_z": float(TORQUE_B0[2]), "com": COM0.tolist()}
    # the closed forms reproduce the notes' printed (rounded) values to their last digit
    out["notes_values_match"] = bool(abs(J_R1 - NOTES_T0["J_r1"]) < 1e-12 and abs(J_R2 - NOTES_T0["J_r2"]) < 1e-12
                                     and abs(TORQUE_B0[2] - NOTES_T0["torque_about_B_z"]) <= 5e-5
                                     and np.abs(COM0 - NOTES_T0["com"]).max() <= 5e-7)
    out["errors"] = {"J_r1": abs(out["J_r1"] - J_R1), "J_r2": abs(out["J_r2"] - J_R2),
                     "J_r2_crba": abs(out["J_r2_crba"] - J_R2),
                     "torque_about_B": float(np.abs(net[3:] - TORQUE_B0).max()),
                     "net_force": float(np.abs(net[:3]).max()), "com": float(np.abs(com - COM0).max())}
    return out


# ------------------------------------------------------------------------------------------------ reference
def pinocchio_model(point_inertia: float = 0.0):
    pin = pr.require_pinocchio()
    model = pin.buildModelFromXML(urdf(point_inertia), pin.JointModelFreeFlyer())
    model.gravity = pin.Motion(np.concatenate([GRAVITY, np.zeros(3)]))
    return model


def reference(q0, v0, t_eval, k, d_slider, d_pendulum, tol, point_inertia=0.0):
    """Pinocchio ABA + DOP853 at rtol = atol = tol: (q, v) at t_eval."""
    pin = pr.require_pinocchio()
    model = pinocchio_model(point_inertia)

    def tau(t, q, v):
        return np.concatenate([np.zeros(6), joint_forces(v, k, d_slider, d_pendulum, q)])

    def fext(t, q, v):
        f = [pin.Force.Zero() for _ in range(model.njoints)]
        R = pr.quat_matrix(q[3:7])
        f[1] = pin.Force(R.T @ BUOYANCY, np.zeros(3))
        return f

    return pr.integrate(model, q0, v0, t_eval, tau=tau, fext=fext, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------------------- the run
def simulate_ours(model, k, d_slider, d_pendulum, dt, t_end):
    q0, v0 = initial_state(model)
    steps = int(round(t_end / dt))

    def tau(t, q, v):
        return generalized_forces(model, q, v, k, d_slider, d_pendulum)

    start = time.perf_counter()
    t, q, v = simulate(model, q0, v0, tau, dt, steps, method="rk4")
    return t, q, v, (time.perf_counter() - start) / steps


def run(k=DEFAULTS["k"], d_slider=DEFAULTS["d_slider"], d_pendulum=DEFAULTS["d_pendulum"], t_end=DEFAULTS["t_end"],
        dt=DEFAULTS["dt"], ref_tol=1e-10, sample=0.01, point_inertia=DEFAULTS["point_inertia"],
        use_reference=True) -> dict:
    """Metrics as documented in the study's ``--help``."""
    model = build_model(point_inertia)
    out = {"study": "balloon", "parameters": {"k": k, "d_slider": d_slider, "d_pendulum": d_pendulum, "t_end": t_end,
                                              "dt": dt, "point_inertia": point_inertia},
           "initial": initial_checks(model)}
    # dampers on: the main run
    t, q, v, wall = simulate_ours(model, k, d_slider, d_pendulum, dt, t_end)
    out["us_per_step"] = 1e6 * wall
    E = np.array([energy(model, a, b, k) for a, b in zip(q, v)])
    T = np.array([model.kinetic_energy(a, b) for a, b in zip(q, v)])
    P = d_slider * v[:, 6] ** 2 + d_pendulum * (v[:, 7] ** 2 + v[:, 8] ** 2)
    D = cumulative_simpson(P, dx=dt, initial=0.0)
    out["energy_balance_rel"] = float(np.abs(E - E[0] + D).max() / T.max())
    out["energy_dissipated"] = float(D[-1])
    com = np.array([system_com(model, a) for a in q])
    out["com_drift"] = float(np.abs(com - com[0]).max())
    out["inverse_dynamics"] = _inverse_dynamics(model, t, q, v, k, d_slider, d_pendulum, use_reference)

    # dampers off: energy must stay constant
    _, q_off, v_off, _ = simulate_ours(model, k, 0.0, 0.0, dt, t_end)
    E_off = np.array([energy(model, a, b, k) for a, b in zip(q_off, v_off)])
    T_off = max(model.kinetic_energy(a, b) for a, b in zip(q_off, v_off))
    out["energy_drift_rel_undamped"] = float(np.abs(E_off - E_off[0]).max() / T_off)
    out["com_drift_undamped"] = float(np.abs(np.array([system_com(model, a) for a in q_off]) - com[0]).max())

    if use_reference:
        try:
            out["reference"] = _compare_reference(model, t, q, v, k, d_slider, d_pendulum, ref_tol, sample,
                                                  point_inertia)
        except RuntimeError as exc:
            out["reference"] = {"name": None, "message": str(exc)}
    else:
        out["reference"] = {"name": None, "message": "skipped (--no-reference)"}
    return out


def _compare_reference(model, t, q, v, k, d_slider, d_pendulum, tol, sample, point_inertia) -> dict:
    stride = max(1, int(round(sample / (t[1] - t[0]))))
    idx = np.arange(0, t.size, stride)
    q0, v0 = q[0], v[0]
    start = time.perf_counter()
    q_ref, v_ref = reference(q0, v0, t[idx], k, d_slider, d_pendulum, tol / 10, point_inertia)
    wall = time.perf_counter() - start
    q_loose, v_loose = reference(q0, v0, t[idx], k, d_slider, d_pendulum, tol, point_inertia)

    def links(qs):
        return np.array([model.link_poses(x) for x in qs])

    L, L_ref, L_loose = links(q[idx]), links(q_ref), links(q_loose)
    pin = pr.require_pinocchio()
    pmodel = pinocchio_model(point_inertia)
    pdata = pmodel.createData()
    com_ref = np.array([pin.centerOfMass(pmodel, pdata, x) for x in q_ref])
    return {
        "name": f"Pinocchio {pin.__version__} ABA on the same URDF (free-flyer), buoyancy as fext, DOP853 on a "
                f"quaternion embedding at rtol = atol = {tol / 10:g}",
        "base_position_error": float(np.abs(L[:, 0, :3, 3] - L_ref[:, 0, :3, 3]).max()),
        "base_attitude_error": float(np.abs(L[:, 0, :3, :3] - L_ref[:, 0, :3, :3]).max()),
        "link_position_error": float(np.abs(L[:, :, :3, 3] - L_ref[:, :, :3, 3]).max()),
        "joint_error": float(np.abs(q[idx][:, 7:] - q_ref[:, 7:]).max()),
        "velocity_error": float(np.abs(v[idx] - v_ref).max()),
        "self_position_error": float(np.abs(L_loose[:, :, :3, 3] - L_ref[:, :, :3, 3]).max()),
        "self_attitude_error": float(np.abs(L_loose[:, 0, :3, :3] - L_ref[:, 0, :3, :3]).max()),
        "com_drift_reference": float(np.abs(com_ref - com_ref[0]).max()),
        "wall_s": wall,
    }


def _inverse_dynamics(model, t, q, v, k, d_slider, d_pendulum, use_reference) -> dict:
    """Joint forces recovered from the simulated motion by inverse dynamics (RNEA, the buoyancy as f_ext):
    with accelerations by 5-point central differences of the simulated velocities (O(h⁴)), and with the forward-dynamics
    accelerations (round trip to round-off); and our RNEA / joint wrenches against Pinocchio's at the same state."""
    dt = t[1] - t[0]
    ks = np.arange(2, t.size - 2, max(1, (t.size - 4) // 200))
    err_fd = err_fd_base = err_exact = err_exact_base = 0.0
    err_pin = err_wrench = None
    pin = pmodel = pdata = None
    if use_reference:
        try:
            pin = pr.require_pinocchio()
            pmodel = pinocchio_model()
            pdata = pmodel.createData()
            err_pin = err_wrench = 0.0
        except RuntimeError:
            pass
    tau_scale = 0.0
    for k_ in ks:
        qk, vk = q[k_], v[k_]
        f_ext = buoyancy_f_ext(qk)
        applied = joint_forces(vk, k, d_slider, d_pendulum, qk)
        tau_scale = max(tau_scale, float(np.abs(applied).max()))
        a_fd = (v[k_ - 2] - 8 * v[k_ - 1] + 8 * v[k_ + 1] - v[k_ + 2]) / (12 * dt)  # O(h⁴)
        r = model.inverse_dynamics(qk, vk, a_fd, f_ext=f_ext)
        err_fd = max(err_fd, float(np.abs(r[6:] - applied).max()))
        err_fd_base = max(err_fd_base, float(np.abs(r[:6]).max()))
        a = model.forward_dynamics(qk, vk, generalized_forces(model, qk, vk, k, d_slider, d_pendulum))
        r = model.inverse_dynamics(qk, vk, a, f_ext=f_ext)
        err_exact = max(err_exact, float(np.abs(r[6:] - applied).max()))
        err_exact_base = max(err_exact_base, float(np.abs(r[:6]).max()))
        if pmodel is not None:
            fe = [pin.Force.Zero() for _ in range(pmodel.njoints)]
            fe[1] = pin.Force(f_ext[0, :3], np.zeros(3))
            r_pin = pin.rnea(pmodel, pdata, qk, vk, a, fe)
            err_pin = max(err_pin, float(np.abs(r_pin - r).max()))
            W = model.joint_wrenches(qk, vk, a, f_ext=f_ext)
            W_pin = np.array([np.asarray(pdata.f[j].vector) for j in range(2, pmodel.njoints)])
            err_wrench = max(err_wrench, float(np.abs(W - W_pin).max()))
    return {"samples": int(ks.size), "joint_force_error_fd": err_fd, "base_residual_fd": err_fd_base,
            "joint_force_error_exact": err_exact, "base_residual_exact": err_exact_base,
            "joint_force_scale": tau_scale, "rnea_vs_pinocchio": err_pin, "joint_wrench_vs_pinocchio": err_wrench}


# --------------------------------------------------------------------------------------------------------- CLI
def _add_arguments(p):
    p.add_argument("--t-end", type=float, default=DEFAULTS["t_end"], help="horizon (s), default 10 (assumption)")
    p.add_argument("--dt", type=float, default=DEFAULTS["dt"], help="RKMK4 step (s), default 1e-3")
    p.add_argument("--k", type=float, default=DEFAULTS["k"], help="slider spring (N/m), default 100 (assumption)")
    p.add_argument("--d-slider", type=float, default=DEFAULTS["d_slider"],
                   help="slider damper (N·s/m), default 5 (assumption)")
    p.add_argument("--d-pendulum", type=float, default=DEFAULTS["d_pendulum"],
                   help="pendulum dampers d_p1 = d_p2 (N·m·s/rad), default 0.5 (assumption)")
    p.add_argument("--ref-tol", type=float, default=1e-10,
                   help="reference DOP853 tolerance; compared at tol/10, self-check against tol (default 1e-10)")
    p.add_argument("--point-inertia", type=float, default=0.0,
                   help="isotropic inertia of the point masses (kg·m²), default 0")
    p.add_argument("--no-reference", action="store_true", help="skip the Pinocchio reference")


def _run(args) -> dict:
    return run(args.k, args.d_slider, args.d_pendulum, args.t_end, args.dt, args.ref_tol,
               point_inertia=args.point_inertia, use_reference=not args.no_reference)


def _report(r) -> str:
    i = r["initial"]
    p = r["parameters"]
    c = i["closed_form"]
    rows = [["J_r1 (kg·m²)", fmt(i["J_r1"], ".8f"), fmt(c["J_r1"], ".8f"), "2.88", fmt(i["errors"]["J_r1"])],
            ["J_r2 (kg·m²)", fmt(i["J_r2"], ".8f"), fmt(c["J_r2"], ".8f"), "7.68", fmt(i["errors"]["J_r2"])],
            ["J_r2 = M[θ2, θ2] (CRBA)", fmt(i["J_r2_crba"], ".8f"), fmt(c["J_r2"], ".8f"), "7.68",
             fmt(i["errors"]["J_r2_crba"])],
            ["torque about B, z (N·m)", fmt(i["torque_about_B"][2], ".8f"), fmt(c["torque_about_B_z"], ".8f"),
             "-10.2209", fmt(i["errors"]["torque_about_B"])],
            ["net external force (N)", fmt(max(abs(x) for x in i["net_force"])), "0", "0", fmt(i["errors"]["net_force"])],
            ["system c.o.m. x (m)", fmt(i["com"][0], ".8f"), fmt(c["com"][0], ".8f"), "0.065118", fmt(i["errors"]["com"])],
            ["system c.o.m. y (m)", fmt(i["com"][1], ".8f"), fmt(c["com"][1], ".8f"), "-0.680697", ""]]
    lines = [f"balloon (TITOP §4), t_end {p['t_end']:g} s, RKMK4 h = {p['dt']:g} s, k = {p['k']:g} N/m, "
             f"d_s = {p['d_slider']:g}, d_p = {p['d_pendulum']:g}", "t = 0 against the closed forms",
             table(["quantity", "model", "closed form", "notes", "|model − closed form|"], rows),
             f"closed forms round to the notes' printed values: {i['notes_values_match']}", ""]
    ref = r["reference"]
    if ref.get("name"):
        rows = [["base position (m)", fmt(ref["base_position_error"])],
                ["base attitude (rotation matrix)", fmt(ref["base_attitude_error"])],
                ["link positions (m)", fmt(ref["link_position_error"])],
                ["joint coordinates", fmt(ref["joint_error"])],
                ["velocities", fmt(ref["velocity_error"])],
                ["reference vs itself at 10x looser tol: positions", fmt(ref["self_position_error"])],
                ["reference vs itself: attitude", fmt(ref["self_attitude_error"])],
                ["reference: c.o.m. drift (m)", fmt(ref["com_drift_reference"])]]
        lines += [f"against the reference: {ref['name']}", table(["max error", "value"], rows), ""]
    else:
        lines += [f"reference: {ref.get('message')}", ""]
    d = r["inverse_dynamics"]
    rows = [["system c.o.m. drift, dampers on (m)", fmt(r["com_drift"])],
            ["system c.o.m. drift, dampers off (m)", fmt(r["com_drift_undamped"])],
            ["energy drift, dampers off: max|ΔE| / max T", fmt(r["energy_drift_rel_undamped"])],
            ["energy balance, dampers on: max|ΔE + D| / max T", fmt(r["energy_balance_rel"])],
            ["energy dissipated (J)", fmt(r["energy_dissipated"], ".4f")],
            ["inverse dynamics, a by 5-point differences: joint forces", fmt(d["joint_force_error_fd"])],
            ["  base residual", fmt(d["base_residual_fd"])],
            ["inverse dynamics, a from forward dynamics: joint forces", fmt(d["joint_force_error_exact"])],
            ["  base residual", fmt(d["base_residual_exact"])],
            ["  largest applied joint force", fmt(d["joint_force_scale"], ".3f")],
            ["our RNEA vs Pinocchio's rnea", fmt(d["rnea_vs_pinocchio"])],
            ["our joint wrenches vs Pinocchio's data.f", fmt(d["joint_wrench_vs_pinocchio"])],
            ["µs per step (ours)", fmt(r["us_per_step"], ".0f")]]
    lines.append(table(["invariant / round trip", "value"], rows))
    return "\n".join(lines)


HELP = """Seed 002 §4 (TITOP), Table 1: balloon (floating SE(3) base, m = 10 kg, J_B = [[5,0,0],[0,10,−7],[0,−7,10]]
kg·m² about its c.o.m. B) + slider (1 kg point mass, prismatic at C, [CB]_b = (0, 2, 0) m, axis t = (1, 0, −1)/√2)
+ pendulum 1 (2 kg point mass, revolute about z at S, SP1 = (0, −1.2, 0) m, θ1(0) = 170°) + pendulum 2 (3 kg point
mass, revolute about z at P1, P1P2 = (0, −1.6, 0) m, θ2(0) = −170°, relative, so it hangs straight down), all at rest,
g = (0, −9.81, 0), buoyancy +156.96 N along world y at B, F_m = −k p − d_s ṗ, C_mi = −d_p θ̇_i.
Built as an inline URDF through Model.from_urdf (base se3); the buoyancy enters forward dynamics through the base
velocity map (Model.forward_dynamics takes no external wrench) and inverse dynamics as f_ext.
Reference: Pinocchio's ABA on the same URDF (pin is a test-only dependency: without it the reference metrics are
skipped with a message), DOP853 on a quaternion embedding at --ref-tol/10, and at --ref-tol to show that it agrees
with itself.

Assumptions for what the paper leaves out: k = 100 N/m (with k = 0 the slider and pendulums
fall along the slider axis once it tilts), d_s = 5 N·s/m, d_p1 = d_p2 = 0.5 N·m·s/rad, 10 s, S = C, point masses with
zero inertia, identity joint frames. Table 1's axis t = (1, 0, −1) is used although the text says the slider works in
the (x_b, y_b) plane. J_B violates the triangle inequality (principal moments 3, 5, 17): accepted, the warning is
silenced. Attitudes are compared as rotation matrices (no Euler angles).

Metrics (--json: one object):
  initial                  t = 0: J_r1, J_r2 (one body's apparent inertia about its joint axis), J_r2_crba
                           (M[θ2, θ2]), torque_about_B (net gravity + buoyancy), net_force, com (from the model);
                           closed_form (m l², −g (m1 + m2) 1.2 sin θ1, point-mass c.o.m.), errors (model vs closed
                           form), notes_values_match (closed forms round to the hand-worked 2.88, 7.68, −10.2209 N·m,
                           (0.065118, −0.680697, 0) m)
  reference                {name, base_position_error (m), base_attitude_error, link_position_error (m), joint_error,
                           velocity_error, self_position_error / self_attitude_error (reference at tol vs tol/10),
                           com_drift_reference, wall_s}; max over samples every 10 ms
  com_drift                max |c(t) − c(0)| of the system centre of mass (net external force is zero)
  com_drift_undamped       the same with the dampers off
  energy_drift_rel_undamped  dampers off: max |E − E(0)| / max T, E = T + V_g + V_buoyancy + ½ k p²
  energy_balance_rel       dampers on: max |E(t) − E(0) + D(t)| / max T, D = ∫ d_s ṗ² + d_p (θ̇1² + θ̇2²) (Simpson)
  energy_dissipated        D(t_end) (J)
  inverse_dynamics         {joint_force_error_fd: max |τ_RNEA − τ_applied| on the joints with accelerations from central
                           differences (5-point) of the simulated velocities, base_residual_fd: max |τ_RNEA| on the (unactuated)
                           base, *_exact: the same with the forward-dynamics accelerations, joint_force_scale,
                           rnea_vs_pinocchio, joint_wrench_vs_pinocchio (Model.joint_wrenches vs data.f), samples}
  us_per_step, parameters
"""

STUDY = Study("balloon", "a balloon carrying a slider and a double pendulum (9 DOF) against Pinocchio", HELP, _add_arguments, _run, _report, ("002",), "§4")
