"""The contact step's compiled terms (:func:`mbs_ros.dynamics.kernels.contact_terms.contact_terms`: one call for a
one-model scene) against the numpy path they replace and against the definitions: the free velocity and the rows
are the same kernels' (bit for bit), ``M⁻¹Jᵀ``, ``G = J M⁻¹Jᵀ`` and ``g = J v_f + max(φ, 0)/h`` agree with LAPACK's
Cholesky solve (:func:`~mbs_ros.dynamics.contact.step.delassus`) and with ``numpy.linalg.solve`` on the mass
matrix to rounding, on random trees of every base; ``G`` is exactly symmetric; a singular mass matrix gives no terms
(the numpy path then raises its error); and one contact step takes the same impulse both ways where the solution
is unique (one contact)."""
from __future__ import annotations

import numpy as np
import pytest
from test_contact_rows import BASES, _chain

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact import step as contact_step
from mbs_ros.dynamics.contact.geometry import halfspace, sphere
from mbs_ros.dynamics.contact.step import Contact, _layout, contact_rows, delassus, free_velocity
from mbs_ros.dynamics.contact.world import ContactWorld
from mbs_ros.dynamics.kernels import compiled as compiled_kernels
from mbs_ros.dynamics.kernels.contact_terms import contact_terms

pytestmark = pytest.mark.skipif(not compiled_kernels.AVAILABLE, reason="numba is not in use: nothing is compiled")
H = 1e-3


def _random_contacts(rng, model, n):
    """n contacts on random bodies, against the world or another body of the model, random points and normals,
    gaps and penetrations."""
    out = []
    for k in range(n):
        body = int(rng.integers(0, model.tree.nb))
        other = int(rng.integers(0, model.tree.nb))
        normal = rng.normal(size=3)
        out.append(Contact((0, body), rng.normal(size=3), normal / np.linalg.norm(normal), float(rng.normal(0, 1e-3)),
                           0.5, None if k % 3 == 0 or other == body else (0, other), f"pair{k % 4}"))
    return out


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("n", [1, 4, 12])
def test_the_compiled_terms_are_the_numpy_paths(base, n):
    rng = np.random.default_rng(hash((base, n)) % 2**32)
    model = Model.from_urdf(_chain(rng), base=base)
    compiled = model.compiled_kernels
    assert compiled is not None
    q = model.random_configuration(rng, 1.0)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    contacts = _random_contacts(rng, model, n)
    points, normals, dist, _, sides = contact_step._contact_arrays(contacts)
    got = contact_terms(compiled, q, v, tau, H, compiled.body_poses(q), points, normals, dist, sides,
                        _layout(model.tree))
    assert got is not None
    v_free, J, MinvJt, G, g = got

    offsets, v_free_np, _ = free_velocity([model], [q], [v], [tau], H)
    J_np, dist_np, _ = contact_rows([model], [contact_step.row_kinematics(model, q)], offsets, model.nv, contacts)
    MinvJt_np, G_np = delassus([model], [q], offsets, J_np)
    g_np = J_np @ v_free_np
    g_np[0::3] += np.maximum(dist_np, 0.0) / H
    assert np.array_equal(v_free, v_free_np)  # the same ABA kernel, the same arithmetic
    assert np.array_equal(J, J_np)  # the same frames and rows kernels

    M = model.mass_matrix(q)
    scale = np.linalg.cond(M) * 1e-15
    reference = np.linalg.solve(M, J.T)
    for ours, lapack, exact in ((MinvJt, MinvJt_np, reference), (G, G_np, J @ reference)):
        size = np.abs(exact).max()
        assert np.abs(ours - lapack).max() <= 10 * scale * size
        assert np.abs(ours - exact).max() <= 10 * scale * size
    assert np.array_equal(G, G.T)
    assert np.abs(g - g_np).max() <= 1e-13 * np.abs(g_np).max()


def _gimbal():
    """Joints z, x, z with massless links between them: at j2 = 0 the first and the third are coaxial and M is
    singular (iCub's neck at its neutral pose); elsewhere it is regular."""
    inertia = '<inertia ixx="{0}" iyy="{0}" izz="{0}" ixy="0" ixz="0" iyz="0"/>'
    links = (f'<link name="base"><inertial><mass value="1"/>{inertia.format(0.1)}</inertial></link>'
             f'<link name="l1"><inertial><mass value="0"/>{inertia.format(0.0)}</inertial></link>'
             f'<link name="l2"><inertial><mass value="0"/>{inertia.format(0.0)}</inertial></link>'
             f'<link name="l3"><inertial><origin xyz="0.2 0 0"/><mass value="1"/>{inertia.format(0.01)}</inertial>'
             '</link>')
    joints = "".join(f'<joint name="j{k}" type="continuous"><parent link="{parent}"/><child link="l{k}"/>'
                     f'<axis xyz="{axis}"/></joint>'
                     for k, parent, axis in ((1, "base", "0 0 1"), (2, "l1", "1 0 0"), (3, "l2", "0 0 1")))
    return f'<robot name="gimbal">{links}{joints}</robot>'


def test_a_singular_mass_matrix_gives_no_terms_and_the_step_raises_the_numpy_paths_error():
    with pytest.warns(Warning, match="singular at the neutral configuration"):
        model = Model.from_urdf(_gimbal(), base="fixed")
    q, v = model.neutral(), np.zeros(model.nv)
    contacts = [Contact((0, 3), np.array([0.2, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), 0.0, 0.5)]
    points, normals, dist, _, sides = contact_step._contact_arrays(contacts)
    compiled = model.compiled_kernels
    assert contact_terms(compiled, q, v, v, H, compiled.body_poses(q), points, normals, dist, sides,
                         _layout(model.tree)) is None
    with pytest.raises(compiled_kernels.SingularMassMatrix):
        model.forward_dynamics(q, v, v)  # what the numpy path's free velocity raises
    with pytest.raises(compiled_kernels.SingularMassMatrix):
        contact_step.step([model], [q], [v], [v], H, contacts)


def test_a_sphere_on_a_slope_takes_the_same_impulse_both_ways():
    """One contact (a unique solution): a sliding and a sticking sphere on a 20 degree slope, one step each from
    the same state, by the compiled terms and by the numpy path (the compiled path switched off)."""
    theta = np.radians(20.0)
    n = np.array([0.0, -np.sin(theta), np.cos(theta)])
    r = 0.1
    for mu in (0.1, 1.0):
        model = Model.rigid_body("so3xr3", 1.0, np.eye(3) * 0.4 * r * r)
        world = ContactWorld([model], [halfspace("slope", n, 0.0, mu), sphere("ball", r, (0, 0), mu=mu)])
        q = np.concatenate([r * n, [0.0, 0.0, 0.0, 1.0]])
        v = np.array([0.3, -0.2, 0.0, 0.5, 0.0, 0.2])
        fast = world.step([q], [v], [np.zeros(6)], H)
        world.forget()
        contact_step.COMPILED = False
        try:
            slow = world.step([q], [v], [np.zeros(6)], H)
        finally:
            contact_step.COMPILED = True
        assert fast[2].n_contacts == slow[2].n_contacts == 1
        lam_fast, lam_slow = fast[2].result.lam, slow[2].result.lam
        assert np.abs(lam_fast - lam_slow).max() <= 1e-12 * np.abs(lam_slow).max()
        assert np.abs(fast[1][0] - slow[1][0]).max() <= 1e-12 * np.abs(slow[1][0]).max()
        assert np.abs(fast[0][0] - slow[0][0]).max() <= 1e-14


def test_the_velocity_after_the_solve_is_the_numpy_paths():
    from mbs_ros.dynamics.kernels.contact_terms import velocity_after

    rng = np.random.default_rng(11)
    nv, m = 18, 36
    v_free, MinvJt, lam, J = rng.normal(size=nv), rng.normal(size=(nv, m)), rng.normal(size=m), rng.normal(size=(m, nv))
    for gap, deep in ((np.array([1e-4, -5e-10, 0.0]), False), (np.array([1e-4, -2e-9, 0.0]), True)):
        v_next, power, got_deep = velocity_after(v_free, MinvJt, lam, J, gap, 1e-9, H)
        expected = v_free + MinvJt @ lam
        assert np.abs(v_next - expected).max() <= 1e-13 * np.abs(expected).max()
        expected_power = 0.5 * float(lam @ (J @ (v_free + expected))) / H
        assert power == pytest.approx(expected_power, rel=1e-12)
        assert got_deep is deep


@pytest.mark.parametrize("up", [True, False])
def test_the_compiled_post_stabilisation_is_the_numpy_paths(up):
    """The shift along the normal rows, the potential energy it restores taken from the kinetic energy (a body
    shifted up: its velocity scaled down; shifted down: kept), then the step on the group, against the numpy
    path's arithmetic with the model's own integrate and energies (a box on an SO(3)×R³ base, gravity along −z)."""
    from mbs_ros.dynamics.kernels.contact_terms import move

    rng = np.random.default_rng(3)
    model = Model.rigid_body("so3xr3", 2.0, np.diag([0.02, 0.03, 0.04]), com=(0.01, 0.0, -0.02))
    compiled = model.compiled_kernels
    q = model.random_configuration(rng, 1.0)
    v = rng.normal(size=6)
    normal = np.array([0.0, 0.0, 1.0 if up else -1.0])
    contacts = [Contact((0, 0), rng.normal(size=3) * 0.1, normal, -1e-4, 0.5) for _ in range(3)]
    points, normals, dist, _, sides = contact_step._contact_arrays(contacts)
    v_free, J, MinvJt, G, g = contact_terms(compiled, q, v, np.zeros(6), H, compiled.body_poses(q), points, normals,
                                            dist, sides, _layout(model.tree))
    shift = np.array([2e-4, 0.0, 1e-4])
    v_next = v.copy()
    got = move(compiled, q, v_next, MinvJt, shift, H)

    delta = MinvJt[:, 0::3] @ shift
    shifted = model.integrate(q, delta, 1.0)
    gained = model.potential_energy(shifted) - model.potential_energy(q)
    assert (gained > 0.0) is up
    factor = np.sqrt(max(0.0, 1.0 - gained / model.kinetic_energy(shifted, v))) if gained > 0.0 else 1.0
    assert np.abs(v_next - factor * v).max() <= 1e-14 * np.abs(v).max()
    assert np.abs(got - model.integrate(shifted, factor * v, H)).max() <= 1e-14
    assert bool(factor < 1.0) is up

    v_next = v.copy()  # no shift: the step alone
    assert np.abs(move(compiled, q, v_next, MinvJt, None, H) - model.integrate(q, v, H)).max() <= 1e-14
    assert np.array_equal(v_next, v)
