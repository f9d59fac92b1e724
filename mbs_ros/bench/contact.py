"""``contact``: one contact step (``ContactWorld.step``) against one ``mujoco.mj_step`` on the same scene.

Scenes (h = 1 ms on both sides, gravity 9.81, MuJoCo with ``cone="elliptic"``, its default soft contacts):

- ``solo12``: example-robot-data's Solo12 URDF, base on SO(3)×R³ (MuJoCo: a free joint), collision shapes from
  its ``<collision>`` elements (the meshes as convex hulls on both sides), a ground half-space (MuJoCo: a plane),
  μ 0.9, the joints held by a PD law (Kp 20 N m/rad, Kd 0.3 N m s/rad) about the SRDF's ``standing`` pose. The
  pairs never tested: ours those of :func:`~mbs_ros.dynamics.contact.collision.excluded_pairs` (adjacent
  bodies, the SRDF's ``<disable_collisions>``, pairs touching at the stance); MuJoCo the same body pairs
  (``<exclude>``; its feet are fused into the lower legs as ours are). Both drop from 2 mm onto the ground and
  are let settle (1000 steps; 300 with ``--quick``), then the PD torque is held.
- ``stack5``: five 0.2 m, 1 kg boxes stacked on the ground (``test_contact_closed_forms``'s stack), μ 0.6,
  settled alike (500 steps; 200 with ``--quick``).

Timed (:func:`mbs_ros.bench.timing.compare`): ours ``world.step`` and MuJoCo ``mj_step``, each advancing its own
state from the settled one (reset at every sample). Target: ours <= 2x MuJoCo's (issue 28). Agreement: our
compiled step against the numpy reference (``contact.step.COMPILED`` off) on the same state, contacts and warm
start: the largest relative difference of ``v⁺`` and ``q⁺`` (``--tol``). The figures beside it, information
only: the contacts, the solver's sweeps and residual, the weight the contacts carry (relative to the scene's
weight: the soft contacts of MuJoCo carry it too, within their spring), and the per-contact cost.

The split: each part of our step timed alone at the settled state (:func:`mbs_ros.bench.timing.alone`): body
poses, the geometry (``find_contacts``: the broad phase, Coal, the patch points), the free velocity (forward
dynamics), the rows (contact and limit Jacobians, warm start), the Delassus matrix ``G = J M⁻¹ Jᵀ`` and ``g``, the
solve, the integration on the group; "other" is the whole step less these (the post-stabilisation's second solve
where a penetration is left, the glue).
"""
from __future__ import annotations

import re

import numpy as np

from mbs_ros.bench import timing
from mbs_ros.bench.models import erd_path

H = 1e-3
TARGET = 2.0
SOLO12_IN_ERD = "robots/solo_description/robots/solo12.urdf"
SOLO12_SRDF_IN_ERD = "robots/solo_description/srdf/solo.srdf"
#: the SRDF's ``standing`` group state, in the model's joint order (FL, FR, HL, HR; HAA, HFE, KFE)
STAND = np.array([0.1, 0.8, -1.6, -0.1, 0.8, -1.6, 0.1, -0.8, 1.6, -0.1, -0.8, 1.6])
KP, KD = 20.0, 0.3
MU_SOLO, MU_STACK = 0.9, 0.6
DROP = 2e-3
G = 9.81


class Scene:
    """Both sides of one scene, settled: ``world``, ``qs``, ``vs``, ``taus`` (ours), ``m``, ``d`` and the saved
    MuJoCo state (peer)."""

    def __init__(self, key, label, world, qs, vs, taus, m, d, weight):
        self.key, self.label, self.world = key, label, world
        self.qs, self.vs, self.taus = [q.copy() for q in qs], [v.copy() for v in vs], [t.copy() for t in taus]
        self.m, self.d, self.weight = m, d, weight
        self.mj_state = (d.qpos.copy(), d.qvel.copy(), d.qfrc_applied.copy(), d.qacc_warmstart.copy())

    def reset_peer(self):
        d = self.d
        d.time = 0.0
        d.qpos[:], d.qvel[:], d.qfrc_applied[:], d.qacc_warmstart[:] = self.mj_state


# ---------------------------------------------------------------------------------------------- scenes
def _pd(q, v):
    tau = np.zeros(v.shape[0])
    tau[6:] = KP * (STAND - q[7:]) - KD * v[6:]
    return tau


def solo12(settle: int) -> Scene:
    import mujoco

    from mbs_ros.dynamics import Model
    from mbs_ros.dynamics.algorithms import multibody as alg
    from mbs_ros.dynamics.contact.collision import collision_shapes, excluded_pairs, read_srdf_disabled
    from mbs_ros.dynamics.contact.geometry import find_contacts, halfspace
    from mbs_ros.dynamics.contact.world import ContactWorld

    path, why = erd_path(SOLO12_IN_ERD)
    srdf, why_srdf = erd_path(SOLO12_SRDF_IN_ERD)
    if path is None or srdf is None:
        raise FileNotFoundError(why or why_srdf)
    model = Model.from_urdf(str(path), base="so3xr3")
    shapes = collision_shapes(model, str(path), mu=MU_SOLO) + [halfspace("ground", (0, 0, 1), 0.0, MU_SOLO)]
    q = np.zeros(model.nq)
    q[6], q[7:] = 1.0, STAND
    q[2] = 0.3
    low = min(c.distance for c in find_contacts([alg.body_placements(model, q)], shapes, margin=1.0)
              if c.b is None)
    q[2] -= low - DROP
    excluded = excluded_pairs(shapes, [model], disabled=read_srdf_disabled(str(srdf)), touching_at=[q])
    world = ContactWorld([model], shapes, excluded)
    v = np.zeros(model.nv)
    for _ in range(settle):
        (q,), (v,), _info, _ = world.step([q], [v], [_pd(q, v)], H)
    tau = _pd(q, v)
    weight = G * float(model.mass_matrix(q)[0, 0])  # so3xr3: the first three velocities translate the base

    # MuJoCo: the same URDF text, meshes by absolute path, the same excluded body pairs
    m = _mj_solo12(path, model, shapes, excluded)
    d = mujoco.MjData(m)
    d.qpos[:] = 0.0
    d.qpos[2], d.qpos[3], d.qpos[7:] = 0.3, 1.0, STAND
    mujoco.mj_forward(m, d)
    d.qpos[2] -= _mj_lowest(m, d) - DROP
    for _ in range(settle):
        d.qfrc_applied[6:] = KP * (STAND - d.qpos[7:]) - KD * d.qvel[6:]
        mujoco.mj_step(m, d)
    d.qfrc_applied[6:] = KP * (STAND - d.qpos[7:]) - KD * d.qvel[6:]
    return Scene("solo12", "Solo12 standing (PD), so3xr3 base", world, [q], [v], [tau], m, d, weight)


def _mj_lowest(m, d) -> float:
    """The lowest point of the robot's geoms above z = 0 (its AABB corners; convex hull meshes by vertices)."""
    import mujoco

    low = np.inf
    for g in range(m.ngeom):
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
            mid = m.geom_dataid[g]
            a, n = m.mesh_vertadr[mid], m.mesh_vertnum[mid]
            pts = m.mesh_vert[a:a + n] @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]
            low = min(low, float(pts[:, 2].min()))
    return low


def _mj_solo12(path, model, shapes, excluded):
    import mujoco

    base_dir = str(path.parent.parent) + "/"
    text = path.read_text().replace("package://example-robot-data/robots/solo_description/", base_dir)
    text = re.sub(r"<visual>.*?</visual>", "", text, flags=re.S)
    text = re.sub(r"(<robot[^>]*>)", r'\1<mujoco><compiler discardvisual="true" balanceinertia="false" '
                                     r'strippath="false"/></mujoco>', text, count=1)
    spec = mujoco.MjSpec.from_string(text)
    spec.option.timestep = H
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.gravity = [0.0, 0.0, -G]
    spec.body("base_link").add_freejoint()
    for gspec in spec.geoms:
        gspec.friction = [MU_SOLO, 0.0, 0.0]
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5.0, 5.0, 0.1], friction=[MU_SOLO, 0.0, 0.0])
    # the body pairs (MuJoCo's bodies: the links that head one of our bodies) all of whose shape pairs we skip
    tree = model.tree
    head = {}
    for i, name in enumerate(tree.link_names):
        head.setdefault(int(tree.link_body[i]), name)
    pairs = {}
    for i, a in enumerate(shapes):
        for j in range(i + 1, len(shapes)):
            b = shapes[j]
            if a.body is None or b.body is None or a.body == b.body:
                continue
            key = frozenset((head[a.body[1]], head[b.body[1]]))
            pairs[key] = pairs.get(key, True) and (i, j) in excluded
    for key, skip in pairs.items():
        if skip:
            e = spec.add_exclude()
            e.bodyname1, e.bodyname2 = sorted(key)
    return spec.compile()


def stack5(settle: int) -> Scene:
    import mujoco

    from mbs_ros.dynamics import Model
    from mbs_ros.dynamics.contact.geometry import box, halfspace
    from mbs_ros.dynamics.contact.world import ContactWorld

    n, s, mass = 5, 0.2, 1.0
    inertia = np.eye(3) * mass * 2 * s * s / 12.0
    models = [Model.rigid_body("so3xr3", mass, inertia, gravity=(0.0, 0.0, -G)) for _ in range(n)]
    qs = [np.array([0.0, 0.0, (k + 0.5) * s, 0.0, 0.0, 0.0, 1.0]) for k in range(n)]
    vs = [np.zeros(6) for _ in range(n)]
    taus = [np.zeros(6) for _ in range(n)]
    shapes = [halfspace("ground", (0, 0, 1), 0.0, MU_STACK)] + [box(f"box{k}", (s, s, s), (k, 0), mu=MU_STACK)
                                                                for k in range(n)]
    world = ContactWorld(models, shapes, limits=False)
    for _ in range(settle):
        qs, vs, _info, _ = world.step(qs, vs, taus, H)
    bodies = "".join(f'<body pos="0 0 {(k + 0.5) * s}"><freejoint/><geom type="box" size="{s / 2} {s / 2} {s / 2}" '
                     f'mass="{mass}" friction="{MU_STACK} 0 0"/></body>' for k in range(n))
    m = mujoco.MjModel.from_xml_string(
        f'<mujoco><option timestep="{H}" cone="elliptic" gravity="0 0 -{G}"/><worldbody>'
        f'<geom type="plane" size="5 5 0.1" friction="{MU_STACK} 0 0"/>{bodies}</worldbody></mujoco>')
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    for _ in range(settle):
        mujoco.mj_step(m, d)
    return Scene("stack5", "5 boxes stacked, so3xr3", world, qs, vs, taus, m, d, n * mass * G)


SCENES = dict(solo12=(solo12, 1000, 300), stack5=(stack5, 500, 200))


# ---------------------------------------------------------------------------------------------- measuring
def pipeline(scene):
    """The settled step taken apart as :func:`~mbs_ros.dynamics.contact.step.step` runs it: a dict of the
    callables of each part (each a zero-argument function) and the step's pieces, for the split and the
    agreement check."""
    from mbs_ros.dynamics.algorithms import multibody as alg
    from mbs_ros.dynamics.contact import step as cstep
    from mbs_ros.dynamics.contact.geometry import find_contacts
    from mbs_ros.dynamics.contact.solver import solve

    w, qs, vs, taus = scene.world, scene.qs, scene.vs, scene.taus
    w.forget()
    w.step(qs, vs, taus, H)  # the warm start of a settled step
    qs1, vs1, warm, _ = w.step(qs, vs, taus, H)
    margin = w.margin + H * max(float(np.max(np.abs(v))) for v in vs)
    poses = w.poses(qs)
    contacts = find_contacts(poses, w.shapes, margin=margin, excluded=w.excluded)
    offsets, v_free, kins = cstep.free_velocity(w.models, qs, vs, taus, H)
    nv = int(offsets[-1])
    active = tuple(c for c in contacts if c.distance <= margin)

    def rows():
        Jc, dc, mu = cstep.contact_rows(w.models, kins, offsets, nv, active)
        Jl, dl, names = [Jc], [dc], []
        if w.limits:
            for k, model in enumerate(w.models):
                J_k, d_k, n_k = cstep.limit_rows(model, qs[k], margin)
                J = np.zeros((d_k.shape[0], nv))
                J[:, offsets[k]:offsets[k + 1]] = J_k
                Jl.append(J)
                dl.append(d_k)
                names += [f"{k}:{n}" for n in n_k]
        lam0 = cstep.warm_start(warm, active, names, 10.0 * margin)
        return np.vstack(Jl), np.concatenate(dl), mu, lam0

    J, gap, mu, lam0 = rows()
    nc = mu.shape[0]
    normal = np.concatenate([3 * np.arange(nc), np.arange(3 * nc, J.shape[0])])

    def delassus():
        MinvJt, Gm = cstep.delassus(w.models, qs, offsets, J)
        g = J @ v_free
        g[normal] += np.maximum(gap, 0.0) / H
        return MinvJt, Gm, g

    MinvJt, Gm, g = delassus()
    res = solve(Gm, g, mu, nc, lam0=lam0, max_sweeps=100)
    v_next = v_free + MinvJt @ res.lam

    def integrate():
        return [m.integrate(qs[k], v_next[offsets[k]:offsets[k + 1]], H) for k, m in enumerate(w.models)]

    parts = {
        "body poses": lambda: [alg.body_placements(m, q) for m, q in zip(w.models, qs)],  # not the kept ones
        "geometry (find_contacts: Coal and its Python)":
            lambda: find_contacts(poses, w.shapes, margin=margin, excluded=w.excluded),
        "free velocity": lambda: cstep.free_velocity(w.models, qs, vs, taus, H),
        "rows, warm start": rows,
        "Delassus G, g": delassus,
        "solve": lambda: solve(Gm, g, mu, nc, lam0=lam0, max_sweeps=100),
        "integrate": integrate,
    }
    return dict(parts=parts, contacts=active, warm=warm, result=res, n_contacts=nc, n_rows=J.shape[0],
                nv=nv, step_info=warm, next=(qs1, vs1))


def carried(scene, info) -> float:
    """Relative error of the world-normal force the ground's contacts carry against the scene's weight."""
    lam = info.result.lam
    fz = sum(lam[3 * i] * c.normal[2] for i, c in enumerate(info.contacts) if c.b is None) / H
    return abs(fz - scene.weight) / scene.weight


def agreement(scene, warm) -> float:
    """Our compiled step against the numpy reference on the same state, contacts and warm start (module
    docstring); 0 where the step has no compiled path."""
    from mbs_ros.dynamics.contact import step as cstep
    from mbs_ros.dynamics.contact.geometry import find_contacts

    w, qs, vs, taus = scene.world, scene.qs, scene.vs, scene.taus
    margin = w.margin + H * max(float(np.max(np.abs(v))) for v in vs)
    contacts = find_contacts(w.poses(qs), w.shapes, margin=margin, excluded=w.excluded)
    if not hasattr(cstep, "COMPILED"):
        return 0.0
    was = cstep.COMPILED
    out = []
    try:
        for flag in (True, False):
            cstep.COMPILED = flag
            out.append(cstep.step(w.models, qs, vs, taus, H, contacts, limits=w.limits, margin=margin, warm=warm))
    finally:
        cstep.COMPILED = was
    (qa, va, _), (qb, vb, _) = out
    err = 0.0
    for a, b in zip(qa + va, qb + vb):
        err = max(err, timing.rel_err(a, b, scale=1e-3))
    return err


def run(key: str, quick: bool, plan: timing.Plan, tol: float) -> list:
    """One row: ours vs MuJoCo on scene ``key``, with the split, the per-contact cost and the agreement."""
    import mujoco

    build, settle_full, settle_quick = SCENES[key]
    scene = build(settle_quick if quick else settle_full)
    p = pipeline(scene)
    info = p["step_info"]
    err = agreement(scene, info)
    w, taus = scene.world, scene.taus
    state = {}

    def reset_ours():
        state["qs"], state["vs"] = list(scene.qs), list(scene.vs)

    def ours():
        state["qs"], state["vs"], _, _ = w.step(state["qs"], state["vs"], taus, H)

    reset_ours()
    m, d = scene.m, scene.d
    pair = timing.compare(ours, lambda: mujoco.mj_step(m, d), plan, reset_ours=reset_ours,
                          reset_peer=scene.reset_peer)
    scene.reset_peer()
    mujoco.mj_forward(m, d)
    split = [dict(part=name, us=timing.alone(fn, plan)) for name, fn in p["parts"].items()]
    split.append(dict(part="other (post-stabilisation, glue)",
                      us=max(0.0, pair.ours_us - sum(s["us"] for s in split))))
    nc = p["n_contacts"]
    solve_us = next(s["us"] for s in split if s["part"] == "solve")
    res = info.result
    return [dict(section="contact", model=key, label=scene.label, nv=p["nv"], kernel="step", **pair.as_dict(),
                 err=err, tol=tol, agree=bool(err <= tol), target=f"<= {TARGET:g}x", target_ratio=TARGET,
                 met=bool(pair.ratio <= TARGET), n_contacts=nc, n_rows=p["n_rows"], mujoco_contacts=int(d.ncon),
                 us_per_contact=pair.ours_us / max(nc, 1), solve_us_per_contact=solve_us / max(nc, 1),
                 sweeps=res.sweeps, residual=res.residual, converged=res.converged,
                 weight_err=carried(scene, info), split=split)]
