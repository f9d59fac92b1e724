"""The contact step's rows and bookkeeping (mbs_ros.dynamics.contact.step, .kernels) against independent numbers:
a contact's three rows times v are the contact-frame velocity of its material points (central differences of their
world positions along the group's exponential), on every base and on both backends; the contact frames are the
closed form ``[n, n×e/|n×e|, n×t1]``; the warm start matches by pair name and distance; the limit rows are the
joints within the margin of their limits, lower before upper, in joint order."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.solver import SolveResult
from mbs_ros.dynamics.contact.step import (Contact, ContactArrays, StepInfo, _frames, contact_rows, free_velocity,
                                           limit_rows, warm_start)

BASES = ("fixed", "se3", "se2", "schoenflies", "so3", "so3xr3")


def _chain(rng, n=4):
    """A random tree of revolute, continuous and prismatic joints (each with a limit where it has one)."""
    types = ("revolute", "continuous", "prismatic", "revolute")
    links = ['<link name="base_link"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.2" izz="0.15" ixy="0" '
             'ixz="0" iyz="0"/></inertial></link>']
    joints = []
    for k in range(1, n + 1):
        jt = types[(k - 1) % len(types)]
        parent = "base_link" if k == 1 else f"l{rng.integers(0, k - 1) or k - 1}"
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        xyz = " ".join(f"{x:.6f}" for x in 0.3 * rng.normal(size=3))
        rpy = " ".join(f"{x:.6f}" for x in rng.uniform(-3, 3, 3))
        lim = '<limit lower="-2" upper="2" effort="10" velocity="10"/>' if jt != "continuous" else ""
        links.append(f'<link name="l{k}"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" '
                     'iyy="0.02" izz="0.015" ixy="0" ixz="0" iyz="0"/></inertial></link>')
        joints.append(f'<joint name="j{k}" type="{jt}"><parent link="{parent}"/><child link="l{k}"/>'
                      f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{" ".join(f"{a:.6f}" for a in axis)}"/>{lim}'
                      '</joint>')
    return '<robot name="chain">' + "".join(links) + "".join(joints) + "</robot>"


def _point_velocity(model, q, v, body, local, eps=1e-6):
    """World velocity of the material point ``local`` (body frame) of ``body``: central differences of its world
    position along q · exp(±eps v) (the numpy placements, not the compiled ones the step uses)."""
    def at(t):
        T = alg.body_placements(model, model.integrate(q, v, t))[body]
        return T[:3, :3] @ local + T[:3, 3]
    return (at(eps) - at(-eps)) / (2 * eps)


def _scene(base, backend, seed):
    rng = np.random.default_rng(seed)
    robot = Model.from_urdf(_chain(rng), base=base).with_backend(backend)
    box = Model.rigid_body("se3", 1.0, np.diag([0.01, 0.02, 0.015])).with_backend(backend)
    models = [robot, box]
    qs = [robot.random_configuration(rng, 1.5), box.random_configuration(rng, 1.5)]
    vs = [rng.normal(size=m.nv) for m in models]
    contacts, expected = [], []
    for i in range(6):  # robot bodies on the ground, on the box, and the box on the ground
        body = int(rng.integers(robot.tree.nb))
        local = rng.normal(size=3) * 0.2
        T = alg.body_placements(robot, qs[0])[body]
        n = rng.normal(size=3)
        if i == 0:
            n = np.array([0.0, 0.0, 1.0])  # an axis-aligned normal: the first of two equal smallest components
        n /= np.linalg.norm(n)
        point = T[:3, :3] @ local + T[:3, 3]
        va = _point_velocity(robot, qs[0], vs[0], body, local)
        other = None
        vb = np.zeros(3)
        if i % 2:  # against the box: its material point at the same world place
            Tb = alg.body_placements(box, qs[1])[0]
            other = (1, 0)
            vb = _point_velocity(box, qs[1], vs[1], 0, Tb[:3, :3].T @ (point - Tb[:3, 3]))
        contacts.append(Contact((0, body), point, n, -1e-4, 0.5, other, f"c{i}"))
        expected.append(va - vb)
    Tb = alg.body_placements(box, qs[1])[0]
    local = np.array([0.05, -0.02, -0.1])
    contacts.append(Contact((1, 0), Tb[:3, :3] @ local + Tb[:3, 3], np.array([0.0, 0.6, 0.8]), 0.0, 0.5, None, "b"))
    expected.append(_point_velocity(box, qs[1], vs[1], 0, local))
    return models, qs, vs, contacts, expected


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
@pytest.mark.parametrize("base", BASES)
def test_the_rows_times_v_are_the_contact_frame_velocity_of_the_material_points(base, backend):
    models, qs, vs, contacts, expected = _scene(base, backend, 11 + BASES.index(base))
    offsets, _, kins = free_velocity(models, qs, vs, [np.zeros(m.nv) for m in models], 1e-3)
    nv = int(offsets[-1])
    J, dist, mu = contact_rows(models, kins, offsets, nv, contacts)
    assert J.shape == (3 * len(contacts), nv) and dist.tolist() == [c.distance for c in contacts]
    c = (J @ np.concatenate(vs)).reshape(-1, 3)
    for i, (contact, vel) in enumerate(zip(contacts, expected)):
        n = contact.normal
        assert c[i, 0] == pytest.approx(n @ vel, abs=1e-7)  # the normal row: the approach speed
        tangential = vel - (n @ vel) * n
        assert math.hypot(c[i, 1], c[i, 2]) == pytest.approx(np.linalg.norm(tangential), abs=1e-7)
        moved = {contact.a[0]} | ({contact.b[0]} if contact.b is not None else set())
        for k in range(len(models)):  # a model without a side in the contact has no column in its rows
            block = J.reshape(-1, 3, nv)[i][:, offsets[k]:offsets[k + 1]]
            assert k in moved or not np.any(block != 0.0)


def test_the_frames_are_the_closed_form():
    s = 1.0 / math.sqrt(3.0)
    normals = np.array([[0.0, 0.0, 1.0], [s, s, s], [0.0, -1.0, 0.0], [0.6, 0.0, -0.8], [0.36, 0.48, 0.8]])
    F = _frames(normals)
    for n, R in zip(normals, F):
        e = np.eye(3)[int(np.argmin(np.abs(n)))]  # the first axis along the smallest component
        t1 = np.cross(n, e) / np.linalg.norm(np.cross(n, e))
        assert np.allclose(R[0], n, atol=0) and np.allclose(R[1], t1, atol=1e-15)
        assert np.allclose(R[2], np.cross(n, t1), atol=1e-15)
        assert np.allclose(R @ R.T, np.eye(3), atol=1e-15) and np.linalg.det(R) == pytest.approx(1.0)
    assert np.array_equal(F[1, 1], np.array([0.0, s, -s]) / np.linalg.norm([0.0, s, -s]))  # (1,1,1): e = x


def _info(contacts, lam, limit_names=(), points=True):
    return StepInfo(SolveResult(np.asarray(lam, dtype=float), None, 1, 0.0, True, 0), len(contacts),
                    len(limit_names), 0.0, contacts if isinstance(contacts, ContactArrays) else tuple(contacts),
                    tuple(limit_names),
                    np.array([c.point for c in contacts], dtype=float) if points else None)


def _as_arrays(contacts, numbering, space):
    """``contacts`` as a :class:`ContactArrays` whose pairs are numbered by ``numbering`` (name -> number)."""
    names = tuple(numbering)
    return ContactArrays(np.array([c.point for c in contacts], dtype=float),
                         np.array([c.normal for c in contacts], dtype=float),
                         np.array([c.distance for c in contacts]), np.array([c.mu for c in contacts]),
                         np.array([c.a + (c.b or (-1, -1)) for c in contacts], dtype=np.int64).reshape(-1, 4),
                         np.array([numbering[c.name] for c in contacts], dtype=np.int64), names, space)


@pytest.mark.parametrize("points", [True, False])
@pytest.mark.parametrize("kind", ["objects", "arrays in one numbering", "arrays in two numberings", "mixed"])
def test_the_warm_start_takes_the_nearest_old_contact_of_the_same_pair_within_the_tolerance(points, kind):
    """Contacts as objects, or as arrays (find_contacts' ``arrays``) whose pairs are matched by their numbers
    where both steps number them alike (one plan), else by name."""
    def c(name, x):
        return Contact((0, 1), np.array([x, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), 0.0, 0.5, None, name)

    old = [c("a", 0.0), c("a", 0.010), c("b", 0.0), c("a", 0.010)]
    lam = np.arange(1.0, 3 * len(old) + 3)  # 12 contact entries, then two limits
    new = [c("a", 0.009), c("b", 0.5), c("c", 0.0), c("b", 0.001)]
    if kind != "objects":
        first = {"b": 0, "c": 1, "a": 2}
        second = first if kind == "arrays in one numbering" else {"c": 0, "a": 1, "b": 2}
        old = _as_arrays(old, first, 7)
        new = new if kind == "mixed" else _as_arrays(new, second, 7 if second is first else 8)
    info = _info(old, lam, ("0:j lower", "0:k upper"), points)
    out = warm_start(info, new, ["0:k upper", "0:x lower"], 0.02)
    assert out[0:3].tolist() == lam[9:12].tolist()  # "a" at 0.009: nearest are the two at 0.010, the last of them
    assert out[3:6].tolist() == [0.0] * 3  # "b" 0.5 away: beyond the tolerance
    assert out[6:9].tolist() == [0.0] * 3  # a new pair
    assert out[9:12].tolist() == lam[6:9].tolist()  # "b" by name, not the nearer "a" at 0.0
    assert out[12:].tolist() == [lam[13], 0.0]  # limits by name
    assert warm_start(None, new, [], 0.02).tolist() == [0.0] * 12


def test_the_limit_rows_are_the_joints_within_the_margin_lower_before_upper():
    urdf = """<robot name="r"><link name="b"/>""" + "".join(
        f'<link name="l{k}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" '
        f'iyz="0"/></inertial></link><joint name="j{k}" type="{t}"><parent link="{"b" if k == 0 else f"l{k - 1}"}"/>'
        f'<child link="l{k}"/><axis xyz="0 0 1"/>{lim}</joint>'
        for k, (t, lim) in enumerate([("revolute", '<limit lower="-1" upper="1" effort="1" velocity="1"/>'),
                                      ("continuous", ""),
                                      ("prismatic", '<limit lower="0" upper="0.0005" effort="1" velocity="1"/>'),
                                      ("revolute", '<limit lower="-2" upper="0.5" effort="1" velocity="1"/>')])) \
        + "</robot>"
    model = Model.from_urdf(urdf)
    q = model.neutral()
    iq = model.tree.iq
    q[iq[0]], q[iq[2]], q[iq[3]] = 0.9995, 0.0002, 0.5003  # j0 near upper, j2 near both, j3 past upper
    J, d, names = limit_rows(model, q, 1e-3)
    assert names == ["j0 upper", "j2 lower", "j2 upper", "j3 upper"]
    assert d == pytest.approx([0.0005, 0.0002, 0.0003, -0.0003])
    iv = model.tree.iv
    expected = np.zeros((4, model.nv))
    expected[0, iv[0]], expected[1, iv[2]], expected[2, iv[2]], expected[3, iv[3]] = -1.0, 1.0, -1.0, -1.0
    assert np.array_equal(J, expected)
    q = model.neutral()
    q[iq[2]] = 0.00025
    J, d, names = limit_rows(model, q, 1e-5)  # nothing within 1e-5
    assert J.shape == (0, model.nv) and d.shape == (0,) and names == []
    for k, side, x in ((0, "upper", 0.99995), (0, "lower", -0.99995), (3, "upper", 0.49995), (2, "lower", np.nan)):
        q = model.neutral()
        q[iq[2]] = 0.00025
        q[iq[k]] = x  # one side of one joint near (or NaN), every other gap wider than the margin
        J, d, names = limit_rows(model, q, 1e-4)
        assert names == ([] if np.isnan(x) else [f"j{k} {side}"])


def test_the_warm_up_compiles_the_kernels_for_the_types_a_step_calls_them_with():
    """ContactWorld.warm_up (through the solver's warm_up) loads the step's kernels at start-up: a step afterwards
    adds no compiled signature (a new one would compile inside the first contact step: seconds in a callback)."""
    from mbs_ros.dynamics.contact import kernels, solver
    from mbs_ros.dynamics.contact.step import step
    from mbs_ros.dynamics.kernels.jit import AVAILABLE

    if not AVAILABLE:
        pytest.skip("numba is not in use: nothing is compiled")
    solver.warm_up()
    compiled = (kernels.contact_frames, kernels.model_rows, kernels.match_contacts, solver._screen,
                solver._gauss_seidel)
    before = [len(k.signatures) for k in compiled]
    models, qs, vs, contacts, _ = _scene("se3", "compiled", 5)
    taus = [np.zeros(m.nv) for m in models]
    info = None
    for _ in range(2):  # the second with the first's warm start
        _, _, info = step(models, qs, vs, taus, 1e-3, contacts, warm=info)
    assert info.n_contacts == len(contacts)
    assert [len(k.signatures) for k in compiled] == before
