"""``find_contacts`` against Coal called directly, on the poses of scenario runs.

    python tools/contact_geometry_check.py [NAME:SECONDS ...]   (default: solo12_stand:2 rov_landing:6 uvms_grasp:4)

runs each scenario headless, records every ``find_contacts`` call of its contact steps (the body poses, the shapes,
the margin, the excluded pairs) and compares the contacts with :func:`coal_contacts`: every pair handed to Coal with
fresh request and result objects (no broad phase, no cached constants), the patch points read with
``getPointShape1``/``getPointShape2``, the pair's own distances from ``_own_distances`` (unchanged; its closed forms
are tested in test_contact_patch_distances) and the reduction of the patch as it was first written (NumPy); a convex
polytope on a half-space by its definition (:func:`polytope_on_halfspace`: the vertices, in NumPy). Same
count, order, names, bodies and friction; points, normals and distances within 1e-12 m (it also says how many are
equal bit for bit). Exit status 1 on a difference. test_contact_geometry_fast uses :func:`coal_contacts` on random
scenes.
"""
from __future__ import annotations

import argparse
import sys

import coal
import numpy as np

TOLERANCE = 1e-12


def reduce_reference(points, distance, min_separation, max_kept):
    """The patch reduction as first written (NumPy): the deepest point, then each the farthest from those kept
    while at least ``min_separation`` from them."""
    n = points.shape[0]
    if n <= 1:
        return list(range(n))
    kept = [int(distance.argmin())]
    x = points - points[kept[0]]
    d = np.sqrt((x * x).sum(axis=1))
    while len(kept) < max_kept:
        j = int(d.argmax())
        if d[j] < min_separation:
            break
        kept.append(j)
        x = points - points[j]
        np.minimum(d, np.sqrt((x * x).sum(axis=1)), out=d)
    return kept


def _polytope_on_plane(sa, sb):
    """Whether ``sa`` is a convex polytope (no swept radius) and ``sb`` a half-space: a pair taken by its vertices."""
    return (isinstance(sb.geometry, coal.Halfspace) and isinstance(sa.geometry, coal.ConvexBase)
            and sa.geometry.getSweptSphereRadius() == 0.0)


def _vertex_distances(sa, Ta, sb, Tb):
    """A polytope's vertices in the world, a half-space's outward normal in the world, and each vertex's signed
    distance to its plane."""
    g, h = sa.geometry, sb.geometry
    vertices = np.array([g.point(k) for k in range(g.num_points)], dtype=float).reshape(-1, 3)
    x = vertices @ Ta[:3, :3].T + Ta[:3, 3]
    n = Tb[:3, :3] @ np.asarray(h.n, dtype=float)
    return x, n, x @ n - (float(h.d) + n @ Tb[:3, 3])


def polytope_edge_pairs(body_poses, shapes, margin, tolerance=TOLERANCE):
    """The names of the pairs of a convex polytope on a half-space whose deepest vertex is within ``tolerance`` of
    ``margin``: found or not by the rounding of the poses' arithmetic, so two correct searches may differ there."""
    def pose(s):
        return s.T_body_shape if s.body is None else body_poses[s.body[0]][s.body[1]] @ s.T_body_shape

    out = set()
    for sa in shapes:
        for sb in shapes:
            if sa.body is not None and sb.body is None and _polytope_on_plane(sa, sb):
                if abs(_vertex_distances(sa, pose(sa), sb, pose(sb))[2].min() - margin) <= tolerance:
                    out.add(f"{sa.name}/{sb.name}")
    return out


def polytope_on_halfspace(sa, Ta, sb, Tb, margin, min_separation, max_kept):
    """The contacts of a convex polytope ``sa`` on a half-space ``sb`` by their definition, in NumPy: each vertex's
    signed distance to the plane ``n·x = d`` (world), the pair touching when the deepest is within ``margin``, the
    patch the vertices within ``margin`` of the deepest, a distance within FLUSH of the deepest taken as the
    deepest's, the reduction as first written, each point the middle of the vertex and its projection."""
    from mbs_ros.dynamics.contact.geometry import FLUSH
    from mbs_ros.dynamics.contact.step import Contact

    x, n, s = _vertex_distances(sa, Ta, sb, Tb)
    if not s.min() <= margin:
        return []
    patch = s <= s.min() + margin
    x, s = x[patch], s[patch]
    dist = np.where(s - s.min() < FLUSH, s.min(), s)
    mid = x - 0.5 * s[:, None] * n
    return [Contact(tuple(sa.body), mid[p], n, float(dist[p]), min(sa.mu, sb.mu), None if sb.body is None else
                    tuple(sb.body), f"{sa.name}/{sb.name}") for p in reduce_reference(x, dist, min_separation, max_kept)]


def coal_contacts(body_poses, shapes, margin=1e-3, max_points=8, excluded=frozenset(), min_separation=5e-3,
                  max_kept=4):
    """The contacts of ``find_contacts``' contract from Coal alone: every pair (i < j) on different bodies whose
    groups meet and that is not excluded, in order, the moving shape first."""
    from mbs_ros.dynamics.contact.geometry import _own_distances
    from mbs_ros.dynamics.contact.step import Contact

    def pose(s):
        return s.T_body_shape if s.body is None else body_poses[s.body[0]][s.body[1]] @ s.T_body_shape

    out = []
    for i, si in enumerate(shapes):
        for j in range(i + 1, len(shapes)):
            sj = shapes[j]
            if si.body == sj.body or not (si.group & sj.mask and sj.group & si.mask) or (i, j) in excluded:
                continue
            sa, sb = (sj, si) if si.body is None else (si, sj)
            Ta, Tb = pose(sa), pose(sb)
            if _polytope_on_plane(sa, sb):
                out += polytope_on_halfspace(sa, Ta, sb, Tb, margin, min_separation, max_kept)
                continue
            ta = coal.Transform3s(np.ascontiguousarray(Ta[:3, :3]), np.ascontiguousarray(Ta[:3, 3]))
            tb = coal.Transform3s(np.ascontiguousarray(Tb[:3, :3]), np.ascontiguousarray(Tb[:3, 3]))
            req = coal.CollisionRequest()
            req.num_max_contacts = 1
            req.security_margin = float(margin)
            res = coal.CollisionResult()
            if not coal.collide(sa.geometry, ta, sb.geometry, tb, req, res):
                continue
            preq = coal.ContactPatchRequest()
            preq.max_size_patch = int(max_points)
            preq.patch_tolerance = float(margin)
            pres = coal.ContactPatchResult(preq)
            coal.computeContactPatch(sa.geometry, ta, sb.geometry, tb, res, preq, pres)
            for k in range(pres.numContactPatches()):
                patch = pres.getContactPatch(k)
                n12 = np.array(patch.getNormal())
                pa = np.array([patch.getPointShape1(p) for p in range(patch.size())]).reshape(-1, 3)
                pb = np.array([patch.getPointShape2(p) for p in range(patch.size())]).reshape(-1, 3)
                mid = 0.5 * (pa + pb)
                dist = (pb - pa) @ n12
                if isinstance(sb.geometry, coal.Halfspace):
                    dist, mid = _own_distances(sa, Ta, sb, Tb, mid, n12, dist, mid)
                for p in reduce_reference(pa, dist, min_separation, max_kept):
                    out.append(Contact(tuple(sa.body), mid[p], -n12, float(dist[p]), min(sa.mu, sb.mu),
                                       None if sb.body is None else tuple(sb.body), f"{sa.name}/{sb.name}"))
    return out


def differences(found, expected, tolerance=TOLERANCE):
    """``(what differs or None, bit-identical)`` between two contact lists."""
    if len(found) != len(expected):
        return f"{len(found)} contacts, expected {len(expected)}", False
    exact = True
    for k, (c, e) in enumerate(zip(found, expected)):
        if (c.a, c.b, c.name, c.mu) != (e.a, e.b, e.name, e.mu):
            return f"contact {k}: {c.name} {c.a} {c.b} {c.mu}, expected {e.name} {e.a} {e.b} {e.mu}", False
        for what in ("point", "normal", "distance"):
            x, y = np.asarray(getattr(c, what)), np.asarray(getattr(e, what))
            if not np.all(np.abs(x - y) <= tolerance):
                return f"contact {k} ({c.name}): {what} {x} expected {y}", False
            exact = exact and np.array_equal(x, y)
    return None, exact


def record(name, seconds):
    """The ``find_contacts`` calls of a headless run: ``[(body poses (copies), shapes, keywords)]``."""
    import mbs_ros.dynamics.contact.world as world
    from mbs_ros.headless import run_scenario

    calls, find = [], world.find_contacts

    def recording(body_poses, shapes, **kw):
        calls.append(([np.array(p, copy=True) for p in body_poses], shapes, dict(kw)))
        return find(body_poses, shapes, **kw)

    world.find_contacts = recording
    try:
        run = run_scenario(name, duration=seconds)
    finally:
        world.find_contacts = find
    if run.fault:
        raise RuntimeError(f"{name}: the run faulted ({run.fault})")
    return calls


def main(argv=None) -> int:
    from mbs_ros.dynamics.contact.geometry import find_contacts

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="*", default=["solo12_stand:2", "rov_landing:6", "uvms_grasp:4"])
    args = p.parse_args(argv)
    bad = 0
    for item in args.runs:
        name, _, seconds = item.partition(":")
        calls = record(name, float(seconds or 2.0))
        n = exact = 0
        for k, (poses, shapes, kw) in enumerate(calls):
            kw = {key: value for key, value in kw.items() if key != "checkpoint"}  # a node's, not a search's
            found, expected = find_contacts(poses, shapes, **kw), coal_contacts(poses, shapes, **kw)
            edge = polytope_edge_pairs(poses, shapes, kw.get("margin", 1e-3))
            why, same = differences([c for c in found if c.name not in edge], [c for c in expected
                                                                               if c.name not in edge])
            n += len(expected)
            exact += same
            if why:
                bad += 1
                print(f"{name} call {k}: {why}")
        print(f"{name}: {len(calls)} calls, {n} contacts, {exact} calls bit-identical to the reference, "
              f"{len(calls) - exact} within {TOLERANCE:g} m only or different")
    print("ok" if not bad else f"{bad} calls differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
