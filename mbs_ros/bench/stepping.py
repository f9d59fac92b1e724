"""Sections 2 and 3: one integration step against MuJoCo's ``mj_step``, and how the step time scales with N.

MuJoCo loads the same URDF text (``MjSpec.from_string``; visuals and collisions stripped, static bodies fused,
its URDF default; a floating base gets a free joint on its root body) and then: contacts and joint limits
disabled (``mjDSBL_CONTACT | mjDSBL_LIMIT``, ``jnt_limited = 0``), no damping, armature or friction loss,
``opt.gravity`` = ours, ``opt.timestep`` = dt. Ours is ``integrators.step(model, q, v, tau, dt, method)``.

State maps: hinge joints by name. MuJoCo's free joint has qpos = [p; quaternion w x y z] and qvel = [world-frame
linear velocity; body angular velocity], ours q = [p; x y z w], v = [body linear; body angular]: v_mj = [R v; ω],
a generalised force τ_mj = [R F; τ], and q̈_mj = [R (v̇ + ω × v); ω̇].

Agreement (each row):

- ``qacc``: MuJoCo's ``mj_forward`` q̈ against our ``forward_dynamics`` at the same state and forces (a base
  wrench included);
- ``step``: one ``mj_step`` against MuJoCo's own scheme replayed with our forward dynamics (its RK4 in its
  coordinates: stage positions ``mj_integratePos(q0, h Σ a_ij v_j)``; its Euler: semi-implicit, v1 = v0 + h q̈,
  q1 = integratePos(q0, h v1)). It checks that the two simulate the same system, not that the methods agree.
- ``Δ ours``: our step against MuJoCo's step, information only: on a fixed base both RK4s are the same classic
  RK4 in joint coordinates (equal to round-off), on a free joint MuJoCo integrates the quaternion with the
  stage-averaged angular velocity where ours is Munthe-Kaas RK4 on SE(3) (they differ at O(h³)); our Euler is
  the explicit Lie–Euler step (q1 = q0 exp(h v0)), MuJoCo's semi-implicit (O(h²) apart).

The steps compared and timed apply joint torques only (no base force: MuJoCo would hold its linear part fixed in
world axes, ours in body axes).
"""
from __future__ import annotations

import numpy as np

from mbs_ros.dynamics.simulation.integrators import step as our_step

from mbs_ros.bench import timing
from mbs_ros.bench.models import strip_urdf
from mbs_ros.bench.timing import rel_err

DT = 1e-3
METHODS = (("rk4", "mjINT_RK4"), ("euler", "mjINT_EULER"))
TARGET_RK4 = 2.0
TARGET_KEYS = ("uvms", "ur5_ff")  # the RK4 rows with a target
RK4_A = ((0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


def _quat_wxyz_to_R(w, x, y, z):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _quat_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def mujoco_model(case, dt=DT):
    import mujoco

    model = case.model
    xml = strip_urdf(case.urdf)
    xml = xml[: xml.rindex("</robot>")] + ('<mujoco><compiler discardvisual="true" fusestatic="true" '
                                           'balanceinertia="false"/></mujoco></robot>')
    spec = mujoco.MjSpec.from_string(xml)
    if model.base == "se3":
        spec.worldbody.first_body().add_freejoint()
    elif model.base != "fixed":
        raise ValueError(f"no MuJoCo joint for base {model.base!r} here")
    m = spec.compile()
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
    m.jnt_limited[:] = 0
    m.dof_damping[:] = 0.0
    m.dof_armature[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    m.opt.gravity[:] = model.gravity
    m.opt.timestep = dt
    if (m.nq, m.nv) != (model.nq, model.nv):
        raise AssertionError(f"{case.key}: MuJoCo has nq, nv = {m.nq}, {m.nv}, ours {model.nq}, {model.nv}")
    return m


class StateMap:
    """Ours <-> MuJoCo coordinates (module docstring)."""

    def __init__(self, model, m):
        import mujoco

        self.model = model
        self.free = model.base == "se3"
        if any(t not in ("revolute", "prismatic") for t in model.joint_types):
            raise ValueError("only revolute and prismatic joints are mapped here")
        if self.free and m.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
            raise AssertionError("MuJoCo's first joint is not the free joint")
        self.nqb, self.nvb = (7, 6) if self.free else (0, 0)
        self.qadr = np.array([m.joint(n).qposadr[0] for n in model.joint_names], dtype=int)
        self.vadr = np.array([m.joint(n).dofadr[0] for n in model.joint_names], dtype=int)

    def R(self, q):
        return _quat_wxyz_to_R(q[6], q[3], q[4], q[5]) if self.free else None

    def to_mj(self, q, v):
        qm, vm = np.zeros(self.model.nq), np.zeros(self.model.nv)
        if self.free:
            qm[:3] = q[:3]
            qm[3:7] = (q[6], q[3], q[4], q[5])
            vm[:3] = self.R(q) @ v[:3]
            vm[3:6] = v[3:6]
        qm[self.qadr], vm[self.vadr] = q[self.nqb:], v[self.nvb:]
        return qm, vm

    def to_ours(self, qm, vm):
        q, v = np.zeros(self.model.nq), np.zeros(self.model.nv)
        if self.free:
            q[:3] = qm[:3]
            quat = qm[3:7] / np.linalg.norm(qm[3:7])
            q[3:7] = (quat[1], quat[2], quat[3], quat[0])
            v[:3] = self.R(q).T @ vm[:3]
            v[3:6] = vm[3:6]
        q[self.nqb:], v[self.nvb:] = qm[self.qadr], vm[self.vadr]
        return q, v

    def force_to_mj(self, q, tau):
        t = np.zeros(self.model.nv)
        if self.free:
            t[:3] = self.R(q) @ tau[:3]
            t[3:6] = tau[3:6]
        t[self.vadr] = tau[self.nvb:]
        return t

    def force_to_ours(self, q, tm):
        t = np.zeros(self.model.nv)
        if self.free:
            t[:3] = self.R(q).T @ tm[:3]
            t[3:6] = tm[3:6]
        t[self.nvb:] = tm[self.vadr]
        return t

    def acc_to_mj(self, q, v, a):
        am = np.zeros(self.model.nv)
        if self.free:
            am[:3] = self.R(q) @ (a[:3] + np.cross(v[3:6], v[:3]))
            am[3:6] = a[3:6]
        am[self.vadr] = a[self.nvb:]
        return am

    # MuJoCo's scheme with our forward dynamics -------------------------------------------------------
    def qacc(self, qm, vm, tm):
        q, v = self.to_ours(qm, vm)
        return self.acc_to_mj(q, v, self.model.forward_dynamics(q, v, self.force_to_ours(q, tm)))

    def integrate_pos(self, qm, vm, h):
        """``mj_integratePos`` for hinge/slide joints and one free joint."""
        out = qm.copy()
        if self.free:
            out[:3] += h * vm[:3]
            w = vm[3:6]
            n = np.linalg.norm(w)
            if n > 0:
                half = 0.5 * n * h
                dq = np.concatenate([[np.cos(half)], np.sin(half) * w / n])
                quat = _quat_mul(qm[3:7] / np.linalg.norm(qm[3:7]), dq)
                out[3:7] = quat / np.linalg.norm(quat)
        out[self.qadr] += h * vm[self.vadr]
        return out

    def mj_scheme(self, method, qm, vm, tm, h):
        if method == "euler":
            v1 = vm + h * self.qacc(qm, vm, tm)
            return self.integrate_pos(qm, v1, h), v1
        V, A = [vm], [self.qacc(qm, vm, tm)]
        for row in RK4_A:
            dv = sum(c * x for c, x in zip(row, V))
            da = sum(c * x for c, x in zip(row, A))
            qi, vi = self.integrate_pos(qm, dv, h), vm + h * da
            V.append(vi)
            A.append(self.qacc(qi, vi, tm))
        dv = sum(b * x for b, x in zip(RK4_B, V))
        da = sum(b * x for b, x in zip(RK4_B, A))
        return self.integrate_pos(qm, dv, h), vm + h * da


def _state_err(qm, vm, qref, vref):
    return max(rel_err(qm, qref), rel_err(vm, vref))


def _align_quat(map_, qm, qref):
    if map_.free and np.dot(qm[3:7], qref[3:7]) < 0:
        qm = qm.copy()
        qm[3:7] *= -1
    return qm


class StepCase:
    """One model on both sides: the state, the forces and the agreement checks."""

    def __init__(self, case, seed=0, dt=DT):
        import mujoco

        self.case, self.dt = case, dt
        self.model = model = case.model
        self.m = mujoco_model(case, dt)
        self.d = mujoco.MjData(self.m)
        self.map = StateMap(model, self.m)
        rng = np.random.default_rng(seed)
        self.q = model.random_configuration(rng)
        self.v = 0.5 * rng.normal(size=model.nv)
        self.tau = rng.normal(size=model.nv)
        self.tau[: self.map.nvb] = 0.0  # joint torques only in the steps (module docstring)
        self.qm0, self.vm0 = self.map.to_mj(self.q, self.v)
        self.tm = self.map.force_to_mj(self.q, self.tau)
        # forward dynamics, with a base wrench too
        tau_w = self.tau.copy()
        tau_w[: self.map.nvb] = rng.normal(size=self.map.nvb)
        self.d.qpos[:], self.d.qvel[:] = self.qm0, self.vm0
        self.d.qfrc_applied[:] = self.map.force_to_mj(self.q, tau_w)
        mujoco.mj_forward(self.m, self.d)
        a = model.forward_dynamics(self.q, self.v, tau_w)
        self.qacc_err = rel_err(self.d.qacc, self.map.acc_to_mj(self.q, self.v, a))

    def reset(self):
        d = self.d
        d.time = 0.0
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = self.qm0, self.vm0, self.tm

    def set_integrator(self, mj_name):
        import mujoco

        self.m.opt.integrator = getattr(mujoco.mjtIntegrator, mj_name)

    def check_step(self, method):
        """(step err: mj_step vs MuJoCo's scheme with our dynamics, Δ ours: our step vs mj_step)."""
        import mujoco

        self.reset()
        mujoco.mj_step(self.m, self.d)
        qm, vm = self.d.qpos.copy(), self.d.qvel.copy()
        qr, vr = self.map.mj_scheme(method, self.qm0, self.vm0, self.tm, self.dt)
        err = _state_err(_align_quat(self.map, qm, qr), vm, qr, vr)
        q1, v1 = our_step(self.model, self.q, self.v, self.tau, self.dt, method=method)
        qo, vo = self.map.to_mj(q1, v1)
        delta = _state_err(_align_quat(self.map, qo, qm), vo, qm, vm)
        return err, delta

    def time(self, method, plan):
        import mujoco

        m, d, model, q, v, tau, dt = self.m, self.d, self.model, self.q, self.v, self.tau, self.dt

        def peer():
            mujoco.mj_step(m, d)

        return timing.compare(lambda: our_step(model, q, v, tau, dt, method=method), peer, plan,
                              reset_peer=self.reset)


def run(case, plan: timing.Plan, tol: float, methods=("rk4", "euler"), cache=None, seed=0):
    """One row per integrator. ``cache`` (a dict) keeps the rows by (model, method) for section 3."""
    sc = StepCase(case, seed=seed)
    rows = []
    for method, mj_name in METHODS:
        if method not in methods:
            continue
        sc.set_integrator(mj_name)
        step_err, delta = sc.check_step(method)
        err = max(sc.qacc_err, step_err)
        pair = sc.time(method, plan)
        has_target = method == "rk4" and case.key in TARGET_KEYS
        row = dict(section="step", model=case.key, label=case.label, nv=case.model.nv, nbodies=case.nbodies,
                   kernel=method, **pair.as_dict(), qacc_err=sc.qacc_err, step_err=step_err, delta_ours=delta,
                   err=err, tol=tol, agree=bool(err <= tol),
                   target=f"<= {TARGET_RK4:g}x" if has_target else "", target_ratio=TARGET_RK4 if has_target else None,
                   met=bool(pair.ratio <= TARGET_RK4) if has_target else None)
        rows.append(row)
        if cache is not None:
            cache[(case.key, method)] = row
    return rows


def fit_exponent(ns, ts):
    """p of t ≈ c N^p, least squares on log t vs log N."""
    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])
