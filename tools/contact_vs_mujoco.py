"""The closed-form scenes of test/unit/test_contact_closed_forms.py in ours and in MuJoCo, against the closed form:
``python -m tools.contact_vs_mujoco [--out DIR] [--scene NAME ...]``. A bench/test-only comparison (MuJoCo is not
a runtime dependency).

Ours: ``mbs_ros.dynamics.contact`` (``find_contacts`` + ``step``) with the tests' setup (free bodies on SO(3)×R³,
the same sizes, masses, μ, h and durations). MuJoCo: the same scene as MJCF built here, ``implicitfast``, the same
timestep, condim 3 (sliding friction only: no rolling or torsional friction, which the closed forms do not have),
in the settings of ``SETTINGS``: elliptic cones with MuJoCo's default ``solref="0.02 1"`` and a stiff ``"0.002 1"``
(its ``refsafe`` raises a time constant below 2h to 2h: the stack's h = 2 ms turns 0.002 into 0.004), each at
``impratio`` 1 and 100; and the pyramidal cone at the default for reference. ``solimp`` is MuJoCo's default.

Per scene a table of the closed form's quantities (value and absolute error of ours and of each MuJoCo setting),
the verdict (the closed form supports ours where our error is below every MuJoCo setting's), and a plot of the
trajectories side by side (``--out``, default /tmp/contact_vs_mujoco)."""
from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass, field

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.geometry import box, cylinder, find_contacts, halfspace, sphere
from mbs_ros.dynamics.contact.step import step

G = 9.81
BASE = "so3xr3"

#: (label, cone, solref, impratio)
SETTINGS = (
    ("MJ 0.02/1", "elliptic", (0.02, 1.0), 1.0),
    ("MJ 0.02/100", "elliptic", (0.02, 1.0), 100.0),
    ("MJ 0.002/1", "elliptic", (0.002, 1.0), 1.0),
    ("MJ 0.002/100", "elliptic", (0.002, 1.0), 100.0),
    ("MJ pyr 0.02/1", "pyramidal", (0.02, 1.0), 1.0),
)


# ---------------------------------------------------------------------------------------------------- ours


def _box_model(m, s):
    return Model.rigid_body(BASE, m, np.eye(3) * m * s * s / 6.0, gravity=(0.0, 0.0, -G))


def _sphere_model(m, r):
    return Model.rigid_body(BASE, m, np.eye(3) * 0.4 * m * r * r, gravity=(0.0, 0.0, -G))


def _world_velocity(q, v):
    """(linear, angular) world velocities of an so3xr3 body: ṙ is v[:3], ω is in the body."""
    return v[:3], Rotation.from_quat(q[3:]).as_matrix() @ v[3:]


def _ours(models, qs, vs, shapes, T, h, record):
    """``T`` seconds of contact steps as the tests run them; ``record(t, qs, vs, info)`` after each."""
    qs, vs = list(qs), list(vs)
    taus = [np.zeros(m.nv) for m in models]
    info = None
    for k in range(int(round(T / h))):
        poses = [alg.body_placements(m, q) for m, q in zip(models, qs)]
        margin = 1e-3 + h * max(float(np.linalg.norm(v)) for v in vs)
        contacts = find_contacts(poses, shapes, margin=margin)
        qs, vs, info = step(models, qs, vs, taus, h, contacts, warm=info, margin=margin)
        record((k + 1) * h, qs, vs, info)
    return qs, vs, info


def _on_incline(theta, half):
    """Pose of a body whose lowest point is ``half`` below its centre resting on the plane through 0 tilted by
    theta about x; the normal and the downslope direction."""
    n = np.array([0.0, -math.sin(theta), math.cos(theta)])
    q = np.zeros(7)
    q[:3] = half * n
    q[3:] = Rotation.from_rotvec([theta, 0.0, 0.0]).as_quat()
    return q, n, np.array([0.0, -math.cos(theta), -math.sin(theta)])


# ---------------------------------------------------------------------------------------------------- MuJoCo


def _mjcf(h, setting, world, bodies, option=""):
    _, cone, solref, impratio = setting
    return mujoco.MjModel.from_xml_string(f"""<mujoco><option timestep="{h}" cone="{cone}" impratio="{impratio}"
      gravity="0 0 -{G}" integrator="implicitfast" {option}/>
      <default><geom condim="3" solref="{solref[0]} {solref[1]}"/><joint solreflimit="{solref[0]} {solref[1]}"/>
      </default><worldbody>{world}{bodies}</worldbody></mujoco>""")


def _mj_run(m, T, record, setup=None):
    d = mujoco.MjData(m)
    if setup is not None:
        setup(d)
    mujoco.mj_forward(m, d)
    for k in range(int(round(T / m.opt.timestep))):
        mujoco.mj_step(m, d)
        record((k + 1) * m.opt.timestep, d)
    return d


def _mj_normal_forces(m, d, body_pairs):
    """Sum of the contact normal forces between each (body, body) pair (world: 0)."""
    out = {p: 0.0 for p in body_pairs}
    f = np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        pair = tuple(sorted((int(m.geom_bodyid[c.geom1]), int(m.geom_bodyid[c.geom2]))))
        if pair in out:
            mujoco.mj_contactForce(m, d, i, f)
            out[pair] += f[0]
    return out


def _quat_wxyz(rot):
    x, y, z, w = (float(c) for c in rot.as_quat())
    return f"{w!r} {x!r} {y!r} {z!r}"


# ---------------------------------------------------------------------------------------------------- scenes


@dataclass
class Run:
    label: str
    t: list = field(default_factory=list)
    series: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)

    def add(self, t, **series):
        self.t.append(t)
        for k, v in series.items():
            self.series.setdefault(k, []).append(v)


@dataclass
class Scene:
    name: str
    title: str
    closed: dict            # quantity -> closed-form value
    runs: list              # ours first, then one per MuJoCo setting
    closed_series: dict     # series -> function of t (the closed form's trajectory), where there is one
    notes: str = ""


def incline(theta_deg, mu, setting, T=2.0, h=1e-3, s=0.2, m=2.0):
    """A 2 kg, 0.2 m box placed at rest on the incline. ``setting`` None: ours."""
    theta = math.radians(theta_deg)
    run = Run("ours" if setting is None else setting[0])
    if setting is None:
        q, n, down = _on_incline(theta, 0.5 * s)
        shapes = [halfspace("ground", n, 0.0, mu), box("block", (s, s, s), (0, 0), mu=mu)]
        _ours([_box_model(m, s)], [q], [np.zeros(6)], shapes, T, h,
              lambda t, qs, vs, info: run.add(t, x=(qs[0][:3] - q[:3]) @ down, v=vs[0][:3] @ down,
                                              lift=qs[0][:3] @ n - 0.5 * s))
    else:
        _, n, down = _on_incline(theta, 0.5 * s)
        mm = _mjcf(h, setting, f'<geom type="plane" size="5 5 0.1" euler="{theta_deg} 0 0" friction="{mu} 0 0"/>',
                   f'<body pos="0 {-0.5 * s * math.sin(theta)!r} {0.5 * s * math.cos(theta)!r}" '
                   f'euler="{theta_deg} 0 0"><freejoint/><geom type="box" size="{s / 2} {s / 2} {s / 2}" '
                   f'mass="{m}" friction="{mu} 0 0"/></body>')
        q0 = []
        _mj_run(mm, T, lambda t, d: run.add(t, x=(d.qpos[:3] - q0[0]) @ down, v=d.qvel[:3] @ down,
                                            lift=d.qpos[:3] @ n - 0.5 * s),
                lambda d: (mujoco.mj_forward(mm, d), q0.append(d.qpos[:3].copy())))
    run.values = {"v(T)": run.series["v"][-1], "x(T)": run.series["x"][-1], "max lift": max(run.series["lift"])}
    return run


def slide_stop(setting, s=0.2, m=1.5, mu=0.4, v0=2.0, T=1.0, h=1e-3, still=1e-4):
    """A box launched along the ground at v0. The stop: the first time its speed is below ``still`` m/s."""
    run = Run("ours" if setting is None else setting[0])
    if setting is None:
        shapes = [halfspace("ground", (0, 0, 1), 0.0, mu), box("box", (s, s, s), (0, 0), mu=mu)]
        _ours([_box_model(m, s)], [np.array([0.0, 0, 0.5 * s, 0, 0, 0, 1])], [np.array([v0, 0, 0, 0, 0, 0.0])],
              shapes, T, h, lambda t, qs, vs, info: run.add(t, x=qs[0][0], v=vs[0][0], lift=qs[0][2] - 0.5 * s))
    else:
        mm = _mjcf(h, setting, f'<geom type="plane" size="5 5 0.1" friction="{mu} 0 0"/>',
                   f'<body pos="0 0 {0.5 * s}"><freejoint/><geom type="box" size="{s / 2} {s / 2} {s / 2}" '
                   f'mass="{m}" friction="{mu} 0 0"/></body>')

        def setup(d):
            d.qvel[0] = v0
        _mj_run(mm, T, lambda t, d: run.add(t, x=d.qpos[0], v=d.qvel[0], lift=d.qpos[2] - 0.5 * s), setup)
    v = np.abs(run.series["v"])
    k = int(np.argmax(v < still)) if np.any(v < still) else len(v) - 1
    run.values = {"t_stop": run.t[k], "x_stop": run.series["x"][-1], "max lift": max(run.series["lift"])}
    return run


def bowling(setting, r=0.11, m=7.0, mu=0.2, v0=3.0, h=1e-4, roll=1e-4):
    """A bowling ball launched at v0 without spin; it rolls when its slip |v − ω r| is below ``roll`` m/s."""
    T = 2 * v0 / (7 * mu * G) + 0.05
    run = Run("ours" if setting is None else setting[0])
    if setting is None:
        shapes = [halfspace("lane", (0, 0, 1), 0.0, mu), sphere("ball", r, (0, 0), mu=mu)]

        def rec(t, qs, vs, info):
            v, w = _world_velocity(qs[0], vs[0])
            run.add(t, v=v[0], slip=v[0] - w[1] * r, lift=qs[0][2] - r)
        _ours([_sphere_model(m, r)], [np.array([0.0, 0, r, 0, 0, 0, 1])], [np.array([v0, 0, 0, 0, 0, 0.0])],
              shapes, T, h, rec)
    else:
        mm = _mjcf(h, setting, f'<geom type="plane" size="5 5 0.1" friction="{mu} 0 0"/>',
                   f'<body pos="0 0 {r}"><freejoint/><geom type="sphere" size="{r}" mass="{m}" '
                   f'friction="{mu} 0 0"/></body>')

        def setup(d):
            d.qvel[0] = v0
        # MuJoCo's free joint: qvel[3:] is the angular velocity in the body frame
        _mj_run(mm, T, lambda t, d: run.add(
            t, v=d.qvel[0], slip=d.qvel[0] - (d.xmat[1].reshape(3, 3) @ d.qvel[3:6])[1] * r,
            lift=d.qpos[2] - r), setup)
    slip = np.abs(run.series["slip"])
    k = int(np.argmax(slip < roll)) if np.any(slip < roll) else len(slip) - 1
    run.values = {"t_roll": run.t[k], "v_roll": run.series["v"][-1], "max lift": max(run.series["lift"])}
    return run


def rolling(shape, mu, setting, theta_deg=25.0, r=0.1, m=1.0, L=0.3, T=0.5, h=1e-3):
    """A solid sphere or cylinder (length L, axis across the slope) released at rest on the incline."""
    theta = math.radians(theta_deg)
    run = Run("ours" if setting is None else setting[0])
    rot = Rotation.from_rotvec([theta, 0.0, 0.0])
    if shape == "cylinder":
        rot = rot * Rotation.from_rotvec([0.0, math.pi / 2, 0.0])
    q, n, down = _on_incline(theta, r)
    if setting is None:
        if shape == "sphere":
            model, geom = _sphere_model(m, r), sphere("body", r, (0, 0), mu=mu)
        else:
            model = Model.rigid_body(BASE, m, np.diag([m * (3 * r * r + L * L) / 12] * 2 + [0.5 * m * r * r]),
                                     gravity=(0.0, 0.0, -G))
            geom = cylinder("body", r, L, (0, 0), mu=mu)
        q[3:] = rot.as_quat()
        _ours([model], [q], [np.zeros(6)], [halfspace("slope", n, 0.0, mu), geom], T, h,
              lambda t, qs, vs, info: run.add(t, x=(qs[0][:3] - q[:3]) @ down, v=vs[0][:3] @ down,
                                              lift=qs[0][:3] @ n - r))
    else:
        size = f"{r}" if shape == "sphere" else f"{r} {L / 2}"
        mm = _mjcf(h, setting, f'<geom type="plane" size="5 5 0.1" euler="{theta_deg} 0 0" friction="{mu} 0 0"/>',
                   f'<body pos="{" ".join(repr(float(x)) for x in q[:3])}" quat="{_quat_wxyz(rot)}"><freejoint/>'
                   f'<geom type="{shape}" size="{size}" mass="{m}" friction="{mu} 0 0"/></body>')
        _mj_run(mm, T, lambda t, d: run.add(t, x=(d.qpos[:3] - q[:3]) @ down, v=d.qvel[:3] @ down,
                                            lift=d.qpos[:3] @ n - r))
    run.values = {"a = v(T)/T": run.series["v"][-1] / T, "max lift": max(run.series["lift"])}
    return run


def stack(setting, n=5, s=0.2, m=1.0, mu=0.6, T=10.0, h=2e-3):
    """n equal boxes stacked on the ground for T: the largest displacement of a box, and each level's load."""
    run = Run("ours" if setting is None else setting[0])
    q0 = [np.array([0.0, 0.0, (k + 0.5) * s, 0.0, 0.0, 0.0, 1.0]) for k in range(n)]
    if setting is None:
        shapes = [halfspace("ground", (0, 0, 1), 0.0, mu)] + [box(f"box{k}", (s, s, s), (k, 0), mu=mu)
                                                              for k in range(n)]

        def rec(t, qs, vs, info):
            loads = np.zeros(n)
            lam = info.result.lam
            for i, c in enumerate(info.contacts):  # the contacts under box k: (k, 0) on the world or on k - 1
                k = c.a[0] if c.b is None else max(c.a[0], c.b[0])
                loads[k] += lam[3 * i] / h
            run.add(t, drift=max(float(np.linalg.norm(a[:3] - b[:3])) for a, b in zip(qs, q0)),
                    ground=loads[0], loads=loads)
        _ours([_box_model(m, s) for _ in range(n)], q0, [np.zeros(6)] * n, shapes, T, h, rec)
    else:
        bodies = "".join(f'<body pos="0 0 {(k + 0.5) * s!r}"><freejoint/><geom type="box" '
                         f'size="{s / 2} {s / 2} {s / 2}" mass="{m}" friction="{mu} 0 0"/></body>' for k in range(n))
        mm = _mjcf(h, setting, f'<geom type="plane" size="5 5 0.1" friction="{mu} 0 0"/>', bodies)

        def rec(t, d):
            f = _mj_normal_forces(mm, d, [(k, k + 1) for k in range(n)])
            loads = np.array([f[(k, k + 1)] for k in range(n)])
            drift = max(float(np.linalg.norm(d.qpos[7 * k:7 * k + 3] - q0[k][:3])) for k in range(n))
            run.add(t, drift=drift, ground=loads[0], loads=loads)
        _mj_run(mm, T, rec)
    loads = np.mean(run.series["loads"][-int(round(1.0 / h)):], axis=0)  # over the last second
    run.values = {"max drift": max(run.series["drift"]), "ground load": loads[0],
                  "worst level load error": max(abs(loads[k] - (n - k) * m * G) for k in range(n))}
    return run


def seabed(setting, s=0.2, m=20.0, rho=1025.0, T=1.0, h=1e-3, depth=20.0):
    """A 20 kg, 0.2 m crate resting on the seabed: the seabed carries its weight less its buoyancy."""
    volume = s ** 3
    run = Run("ours" if setting is None else setting[0])
    if setting is None:
        I = m * s * s / 6.0
        urdf = f"""<robot name="crate"><link name="crate">
          <inertial><mass value="{m}"/><inertia ixx="{I}" iyy="{I}" izz="{I}" ixy="0" ixz="0" iyz="0"/></inertial>
          <hydrodynamics density="{rho}"><buoyancy volume="{volume}" xyz="0 0 0"/></hydrodynamics></link></robot>"""
        model = Model.from_urdf(urdf, base=BASE, gravity=(0.0, 0.0, -G))
        shapes = [halfspace("seabed", (0, 0, 1), -depth, 0.8), box("crate", (s, s, s), (0, 0), mu=0.8)]
        _ours([model], [np.array([0.0, 0.0, 0.5 * s - depth, 0, 0, 0, 1])], [np.zeros(6)], shapes, T, h,
              lambda t, qs, vs, info: run.add(t, z=qs[0][2] + depth - 0.5 * s,
                                              normal=sum(info.result.lam[3 * i] for i in range(info.n_contacts)) / h))
    else:
        # MuJoCo 4.0's fluid model gives a resting body no buoyancy (qfrc_fluid is 0 at rest), so the buoyancy is
        # applied as it acts on a fully submerged body: ρ V g up at the centre of buoyancy (here the centre)
        mm = _mjcf(h, setting, f'<geom type="plane" size="5 5 0.1" pos="0 0 {-depth}" friction="0.8 0 0"/>',
                   f'<body pos="0 0 {0.5 * s - depth}"><freejoint/><geom type="box" size="{s / 2} {s / 2} {s / 2}" '
                   f'mass="{m}" friction="0.8 0 0"/></body>')

        def setup(d):
            d.xfrc_applied[1, 2] = rho * volume * G
        _mj_run(mm, T, lambda t, d: run.add(t, z=d.qpos[2] + depth - 0.5 * s,
                                            normal=_mj_normal_forces(mm, d, [(0, 1)])[(0, 1)]), setup)
    run.values = {"normal force": run.series["normal"][-1], "sink z(T)": run.series["z"][-1]}
    return run


def joint_limit(setting, m=1.0, L=0.5, tau=2.0, T=2.0, h=1e-3, lo=-0.5, hi=0.5):
    """A 1 kg arm of length 0.5 m on a revolute joint about y, driven by 2 N m into its upper limit."""
    run = Run("ours" if setting is None else setting[0])
    if setting is None:
        urdf = f"""<robot name="one"><link name="base"/>
          <link name="arm"><inertial><origin xyz="{L} 0 0"/><mass value="{m}"/>
            <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
          <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
            <limit lower="{lo}" upper="{hi}" effort="100" velocity="10"/></joint></robot>"""
        model = Model.from_urdf(urdf, gravity=(0.0, 0.0, -G))
        q, v, info = np.zeros(1), np.zeros(1), None
        for k in range(int(round(T / h))):
            (q,), (v,), info = step([model], [q], [v], [np.array([tau])], h, warm=info)
            react = info.result.lam[0] / h if info.n_limits else 0.0
            run.add((k + 1) * h, q=q[0], reaction=react)
    else:
        # MJCF angles are in degrees (compiler angle="degree"), the range too
        mm = _mjcf(h, setting, "", f'<body><joint type="hinge" axis="0 1 0" limited="true" '
                   f'range="{math.degrees(lo)!r} {math.degrees(hi)!r}"/>'
                   f'<inertial pos="{L} 0 0" mass="{m}" diaginertia="1e-3 1e-3 1e-3"/></body>')

        def setup(d):
            d.qfrc_applied[0] = tau

        def rec(t, d):
            lim = [i for i in range(d.nefc) if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT]
            run.add(t, q=d.qpos[0], reaction=float(sum(d.efc_force[i] for i in lim)))
        _mj_run(mm, T, rec, setup)
    run.values = {"q(T) - upper": run.series["q"][-1] - hi, "reaction": run.series["reaction"][-1]}
    return run


def _settings(settings):
    return [None] + list(settings)


def build(settings=SETTINGS, only=None):
    """Every scene, run in ours and in each MuJoCo setting (``only``: a set of scene names)."""
    scenes = []
    want = (lambda name: only is None or name in only)
    for deg, mu, name in ((30.0, 0.3, "incline_slide"), (26.0, 0.5, "incline_stick")):
        if not want(name):
            continue
        th = math.radians(deg)
        a = max(G * (math.sin(th) - mu * math.cos(th)), 0.0)
        scenes.append(Scene(name, f"block on a {deg:g} deg incline, mu {mu}, 2 s",
                            {"v(T)": a * 2.0, "x(T)": a * 2.0 ** 2 / 2, "max lift": 0.0},
                            [incline(deg, mu, st) for st in _settings(settings)],
                            {"x": lambda t, a=a: 0.5 * a * t * t, "v": lambda t, a=a: a * t,
                             "lift": lambda t: 0 * t},
                            "x(T): both step semi-implicit Euler, ours h^2 a N(N+1)/2 = (1 + h/T) a T^2/2; max lift: "
                            "the centre's largest height above resting on the plane (negative: sunk into it)"))
    if want("slide_stop"):
        mu, v0 = 0.4, 2.0
        ts = v0 / (mu * G)
        scenes.append(Scene("slide_stop", "box sliding to a stop, mu 0.4, v0 2 m/s",
                            {"t_stop": ts, "x_stop": v0 * v0 / (2 * mu * G), "max lift": 0.0},
                            [slide_stop(st) for st in _settings(settings)],
                            {"x": lambda t, ts=ts, v0=v0, mu=mu: np.where(t < ts, v0 * t - 0.5 * mu * G * t * t,
                                                                          v0 * ts / 2),
                             "v": lambda t, v0=v0, mu=mu: np.maximum(v0 - mu * G * t, 0.0), "lift": lambda t: 0 * t},
                            "t_stop: first |v| < 1e-4 m/s; x_stop: position at 1 s; semi-implicit Euler's distance "
                            "is sum h v_k = v0^2/(2 mu g) - v0 h/2 + O(h^2): ours -1.0e-3 exactly"))
    if want("bowling"):
        mu, v0 = 0.2, 3.0
        tr = 2 * v0 / (7 * mu * G)
        scenes.append(Scene("bowling", "bowling ball slip -> roll, mu 0.2, v0 3 m/s, h 0.1 ms",
                            {"t_roll": tr, "v_roll": 5 * v0 / 7, "max lift": 0.0},
                            [bowling(st) for st in _settings(settings)],
                            {"v": lambda t, tr=tr, v0=v0, mu=mu: np.where(t < tr, v0 - mu * G * t, 5 * v0 / 7),
                             "slip": lambda t, v0=v0, mu=mu: np.maximum(v0 - 3.5 * mu * G * t, 0.0),
                             "lift": lambda t: 0 * t},
                            "t_roll: first |v - w r| < 1e-4 m/s; v_roll: speed at t_roll + 0.05 s"))
    for shape, factor, mu in (("sphere", 5 / 7, 0.5), ("cylinder", 2 / 3, 0.5), ("sphere", None, 0.05)):
        name = f"roll_{shape}_mu{mu:g}"
        if not want(name):
            continue
        th = math.radians(25.0)
        if factor is not None and mu >= (1 - factor) * math.tan(th):
            a = factor * G * math.sin(th)
        else:
            a = G * (math.sin(th) - mu * math.cos(th))
        scenes.append(Scene(name, f"solid {shape} released on a 25 deg incline, mu {mu:g}, 0.5 s",
                            {"a = v(T)/T": a, "max lift": 0.0},
                            [rolling(shape, mu, st) for st in _settings(settings)],
                            {"x": lambda t, a=a: 0.5 * a * t * t, "v": lambda t, a=a: a * t,
                             "lift": lambda t: 0 * t}))
    if want("stack"):
        scenes.append(Scene("stack", "5 boxes stacked, 1 kg, 10 s, h 2 ms",
                            {"max drift": 0.0, "ground load": 5 * G, "worst level load error": 0.0},
                            [stack(st) for st in _settings(settings)],
                            {"drift": lambda t: 0 * t, "ground": lambda t: 0 * t + 5 * G},
                            "loads: mean over the last second; level k carries (5 - k) m g"))
    if want("seabed"):
        scenes.append(Scene("seabed", "20 kg crate on the seabed (1025 kg/m^3, 8 L)",
                            {"normal force": (20.0 - 1025.0 * 0.008) * G, "sink z(T)": 0.0},
                            [seabed(st) for st in _settings(settings)],
                            {"z": lambda t: 0 * t, "normal": lambda t: 0 * t + (20.0 - 1025.0 * 0.008) * G}))
    if want("joint_limit"):
        scenes.append(Scene("joint_limit", "arm driven by 2 N m into its 0.5 rad limit",
                            {"q(T) - upper": 0.0, "reaction": 2.0 + 0.5 * 1.0 * G * math.cos(0.5)},
                            [joint_limit(st) for st in _settings(settings)],
                            {}, "reaction: the limit's torque at 2 s"))
    return scenes


def errors(scene):
    """{quantity: [|error| of each run]} (ours first)."""
    return {k: [abs(r.values[k] - c) for r in scene.runs] for k, c in scene.closed.items()}


def verdict(scene):
    """Per quantity: which the closed form supports (ours, MuJoCo or both within each other's error)."""
    out = {}
    for k, errs in errors(scene).items():
        ours, best = errs[0], min(errs[1:])
        out[k] = "ours" if ours < best else ("MuJoCo" if best < ours else "tie")
    return out


def table(scene):
    labels = [r.label for r in scene.runs]
    w = max(14, max(len(lab) for lab in labels) + 1)
    lines = [f"== {scene.name}: {scene.title}",
             f"{'quantity':<24}{'closed form':>{w}}" + "".join(f"{lab:>{w}}" for lab in labels) + "  supports"]
    ver = verdict(scene)
    for k, c in scene.closed.items():
        lines.append(f"{k:<24}{c:>{w}.6g}" + "".join(f"{r.values[k]:>{w}.6g}" for r in scene.runs))
        lines.append(f"{'  |error|':<24}{'':>{w}}" + "".join(f"{e:>{w}.2e}" for e in errors(scene)[k])
                     + f"  {ver[k]}")
    if scene.notes:
        lines.append(f"  ({scene.notes})")
    return "\n".join(lines)


def plot(scene, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in scene.runs[0].series if k != "loads"][:3]
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for i, r in enumerate(scene.runs):
            ax.plot(r.t, r.series[key], label=r.label, lw=2.5 if i == 0 else 1.2,
                    ls="-" if i == 0 else "--")
        if key in scene.closed_series:
            t = np.asarray(scene.runs[0].t)
            ax.plot(t, scene.closed_series[key](t), "k:", lw=1.5, label="closed form")
        ax.set_xlabel("t [s]")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(scene.title)
    fig.tight_layout()
    path = os.path.join(out, f"{scene.name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="/tmp/contact_vs_mujoco", help="directory for the plots")
    p.add_argument("--scene", action="append", help="run only these scenes (repeatable)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    scenes = build(only=set(args.scene) if args.scene else None)
    print(f"MuJoCo {mujoco.__version__}; settings: solref timeconst/impratio, elliptic cones unless 'pyr'; "
          f"condim 3; integrator implicitfast\n")
    for scene in scenes:
        print(table(scene))
        print(f"  plot: {plot(scene, args.out)}\n")
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
