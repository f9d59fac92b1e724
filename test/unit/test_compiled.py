"""The compiled fast path (mbs_ros.dynamics.kernels.compiled, the default backend) against the numpy reference.

Every kernel, on random trees of every base group (revolute, continuous, prismatic and fixed joints mixed) and on
the repository's robots, single rigid bodies included: RNEA (with external wrenches), CRBA, the structured
Coriolis matrix (the same matrix, not only C v), gravity, nonlinear effects, forward dynamics, all terms at once,
joint wrenches (total and reaction), link poses, and the Munthe-Kaas step of every tableau (held, per-stage and
world-fixed forces) and ``simulate``. The reference is ``model.with_backend("numpy")``: the seed's equations as
written (:mod:`mbs_ros.dynamics.algorithms.multibody` and the single-body closed forms).
"""
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, TREE_BASES, BASES, simulate, step
from mbs_ros.dynamics.kernels import compiled
from mbs_ros.dynamics.simulation.integrators import TABLEAUS

from test_multibody import random_urdf

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not importable (or MBS_BACKEND=numpy)")

ROOT = Path(__file__).resolve().parents[2]
ROBOTS = ROOT / "config" / "robots"
REL = 1e-12


def rel(x, y):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape
    return float(np.abs(x - y).max() / max(1.0, np.abs(y).max()))


def pairs():
    rng = np.random.default_rng(20261122)
    out = []
    for base in TREE_BASES:
        for n in (1, 3, 7, 12):
            urdf = random_urdf(rng, n)
            out.append(pytest.param(base, urdf, id=f"{base}-random{n}"))
    return out


def robot_models():
    models = [Model.from_yaml(p) for p in sorted(ROBOTS.glob("*.yaml"))]
    models += [Model.from_urdf(ROBOTS / "arm_2link_planar.urdf", base=b) for b in TREE_BASES]
    return models


def states(model, rng, n=3):
    for _ in range(n):
        q = model.random_configuration(rng) if model.nv > model.tree.nvb else model.group.random(rng) \
            if model.group is not None else model.neutral()
        yield q, 2.0 * rng.standard_normal(model.nv), rng.standard_normal(model.nv), rng.standard_normal(model.nv)


def check_kernels(fast, ref, rng):
    assert fast.backend == "compiled" and ref.backend == "numpy"
    worst = {}
    for q, v, a, tau in states(ref, rng):
        f_ext = rng.standard_normal((ref.tree.nb, 6))
        results = {
            "rnea": (fast.inverse_dynamics(q, v, a), ref.inverse_dynamics(q, v, a)),
            "rnea_fext": (fast.inverse_dynamics(q, v, a, f_ext=f_ext), ref.inverse_dynamics(q, v, a, f_ext=f_ext)),
            "crba": (fast.mass_matrix(q), ref.mass_matrix(q)),
            "coriolis": (fast.coriolis_matrix(q, v), ref.coriolis_matrix(q, v)),
            "gravity": (fast.gravity_forces(q), ref.gravity_forces(q)),
            "nle": (fast.nonlinear_effects(q, v), ref.nonlinear_effects(q, v)),
            "aba": (fast.forward_dynamics(q, v, tau), ref.forward_dynamics(q, v, tau)),
            "aba_fext": (fast.forward_dynamics(q, v, tau, f_ext=f_ext), ref.forward_dynamics(q, v, tau, f_ext=f_ext)),
            "all_terms": (np.concatenate([x.ravel() for x in fast.all_terms(q, v)]),
                          np.concatenate([ref.mass_matrix(q).ravel(), ref.nonlinear_effects(q, v),
                                          ref.gravity_forces(q)])),
            "link_poses": (fast.link_poses(q), ref.link_poses(q)),
            "kinetic_energy": (fast.kinetic_energy(q, v), ref.kinetic_energy(q, v)),
            "gravity_energy": (fast.gravity_energy(q), ref.gravity_energy(q)),
            "spatial_momentum": (fast.spatial_momentum(q, v), ref.spatial_momentum(q, v)),
        }
        if ref.tree.nj:
            results["joint_wrenches"] = (fast.joint_wrenches(q, v, a), ref.joint_wrenches(q, v, a))
            results["joint_reactions"] = (fast.joint_wrenches(q, v, a, tau=tau, f_ext=f_ext),
                                          ref.joint_wrenches(q, v, a, tau=tau, f_ext=f_ext))
        for name, (x, y) in results.items():
            worst[name] = max(worst.get(name, 0.0), rel(x, y))
    return worst


@pytest.mark.parametrize("base,urdf", pairs())
def test_kernels_agree_on_random_trees(base, urdf):
    fast = Model.from_urdf(urdf, base=base)
    worst = check_kernels(fast, fast.with_backend("numpy"), np.random.default_rng(7))
    assert max(worst.values()) < REL, worst


@pytest.mark.parametrize("base", BASES)
def test_kernels_agree_on_single_bodies(base):
    """One body: the compiled tree kernels against the closed forms of seed 004 (eqs. 57, 60, 76)."""
    rng = np.random.default_rng(3)
    J = np.array([[0.3, 0.02, -0.01], [0.02, 0.5, 0.03], [-0.01, 0.03, 0.4]])
    fast = Model.rigid_body(base, mass=2.5, inertia=J, com=[0.1, -0.05, 0.2], gravity=[0.3, -0.2, -9.81])
    worst = check_kernels(fast, fast.with_backend("numpy"), rng)
    assert max(worst.values()) < REL, worst


@pytest.mark.parametrize("model", robot_models(), ids=lambda m: f"{m.name}-{m.base}")
def test_kernels_agree_on_the_repository_robots(model):
    worst = check_kernels(model, model.with_backend("numpy"), np.random.default_rng(11))
    assert max(worst.values()) < REL, worst


@pytest.mark.parametrize("base,urdf", pairs()[::4])
@pytest.mark.parametrize("method", sorted(TABLEAUS))
def test_one_step_agrees(base, urdf, method):
    fast = Model.from_urdf(urdf, base=base, gravity=[0.5, 0.2, -9.81])
    ref = fast.with_backend("numpy")
    rng = np.random.default_rng(5)
    ns = len(TABLEAUS[method].b)
    for q, v, _, tau in states(ref, rng, n=2):
        W = 20.0 * rng.standard_normal(6)
        stages = rng.standard_normal((ns, ref.nv))
        for kw in ({"tau": tau}, {"tau": tau, "wrench_world": W}, {"tau": stages}, {"tau": stages, "wrench_world": W}):
            kw = dict(kw)
            t = kw.pop("tau")
            q1, v1 = step(fast, q, v, t, 2e-3, method=method, **kw)
            q2, v2 = step(ref, q, v, t, 2e-3, method=method, **kw)
            assert rel(q1, q2) < REL and rel(v1, v2) < REL, (kw, rel(q1, q2), rel(v1, v2))


@pytest.mark.slow
@pytest.mark.parametrize("base", TREE_BASES)
def test_simulate_agrees_over_a_second(base):
    """1000 RK4 steps through the compiled loop vs the numpy step by step (errors may grow with time, but only
    by rounding: both integrate the same equations the same way)."""
    fast = Model.from_urdf(random_urdf(np.random.default_rng(1), 5), base=base)
    ref = fast.with_backend("numpy")
    rng = np.random.default_rng(2)
    q0 = fast.random_configuration(rng)
    v0 = rng.standard_normal(fast.nv)
    tau = rng.standard_normal(fast.nv)
    _, qf, vf = simulate(fast, q0, v0, tau, 1e-3, 1000)
    _, qr, vr = simulate(ref, q0, v0, tau, 1e-3, 1000)
    assert rel(qf, qr) < 1e-10 and rel(vf, vr) < 1e-10, (rel(qf, qr), rel(vf, vr))


def test_callable_tau_still_works_on_the_compiled_model():
    """A function tau(t, q, v) cannot be compiled: the step falls back to the Python loop (compiled FD inside)."""
    m = Model.from_yaml(ROBOTS / "uvms_6dof.yaml")
    ref = m.with_backend("numpy")
    rng = np.random.default_rng(4)
    q, v = m.random_configuration(rng), rng.standard_normal(m.nv)
    K = rng.standard_normal((m.nv, m.nv))

    def tau(t, q_, v_):
        return K @ v_ + np.sin(t)

    q1, v1 = step(m, q, v, tau, 1e-3, t=0.3)
    q2, v2 = step(ref, q, v, tau, 1e-3, t=0.3)
    assert rel(q1, q2) < REL and rel(v1, v2) < REL


def test_backends_and_bad_input():
    m = Model.from_yaml(ROBOTS / "uvms_6dof.yaml")
    assert m.backend == "compiled"
    assert m.with_backend("numpy").with_backend("compiled").backend == "compiled"
    with pytest.raises(ValueError, match="unknown backend"):
        m.with_backend("cuda")
    with pytest.raises(ValueError, match="vector of 13 numbers"):
        m.mass_matrix(np.zeros(5))
    with pytest.raises(ValueError, match="unknown integrator"):
        step(m, m.neutral(), np.zeros(m.nv), np.zeros(m.nv), 1e-3, method="rk9")
    with pytest.raises(ValueError, match="4-stage rk4 needs"):
        step(m, m.neutral(), np.zeros(m.nv), np.zeros((3, m.nv)), 1e-3)
    # read-only and non-contiguous inputs are copied, never mis-read
    q = m.random_configuration(np.random.default_rng(0))
    q_ro = q.copy()
    q_ro.setflags(write=False)
    q_strided = np.repeat(q, 2)[::2]
    assert np.array_equal(m.mass_matrix(q_ro), m.mass_matrix(q))
    assert np.array_equal(m.mass_matrix(q_strided), m.mass_matrix(q))
    # added mass is compiled too (gravity kept off it by the kernels' D g term, passive.py) and agrees with the
    # single body's closed forms
    body = Model.rigid_body("se3", mass=2.0, com=(0.1, 0, 0.2), added_mass=np.diag([1.0, 2, 3, 0.1, 0.2, 0.3]))
    assert body.backend == "compiled"
    ref = body.with_backend("numpy")
    qb = body.random_configuration(np.random.default_rng(1))
    vb = np.random.default_rng(2).normal(size=6)
    np.testing.assert_allclose(body.gravity_forces(qb), ref.gravity_forces(qb), atol=1e-12)
    np.testing.assert_allclose(body.forward_dynamics(qb, vb, vb), ref.forward_dynamics(qb, vb, vb), atol=1e-12)
