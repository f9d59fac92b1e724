"""The contact step's shortcuts (issue 30, real time at 1 kHz) give the numbers of what they replace, bit for bit:
the Cholesky solve without SciPy's wrappers against ``cho_solve(cho_factor(M), B)``, the contact world's kept
body poses against :func:`~mbs_ros.dynamics.algorithms.multibody.body_placements` at each state asked, the
post-stabilisation's energies against the model's methods, and the warm start's compiled copy against NumPy's
indexing."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.geometry import box, halfspace
from mbs_ros.dynamics.contact.step import _cho_solve
from mbs_ros.dynamics.contact.world import ContactWorld


@pytest.mark.parametrize("n, m", [(6, 1), (18, 36), (25, 7)])
def test_the_cholesky_solve_is_scipys_bit_for_bit(n, m):
    rng = np.random.default_rng(n + m)
    A = rng.normal(size=(n, n))
    M = A @ A.T + 0.1 * np.eye(n)
    J = rng.normal(size=(m, n))
    assert np.array_equal(_cho_solve(M, J.T), cho_solve(cho_factor(M), J.T))  # the contact step's J[:, cols].T
    B = rng.normal(size=(n, m))
    assert np.array_equal(_cho_solve(M, B), cho_solve(cho_factor(M), B))
    x = _cho_solve(M, B)
    assert np.allclose(M @ x, B, rtol=0.0, atol=1e-9 * np.abs(B).max() * np.linalg.cond(M))


def test_the_cholesky_solve_refuses_what_scipy_refuses():
    with pytest.raises(LinAlgError):
        _cho_solve(np.diag([1.0, -1.0, 2.0]), np.ones((3, 2)))  # not positive definite
    with pytest.raises(ValueError):
        _cho_solve(np.diag([1.0, np.nan, 2.0]), np.ones((3, 2)))


def test_kept_body_poses_are_those_of_the_state_asked():
    """Alternating states, a state equal to the last one but another array, the same state twice: each time the
    poses body_placements gives for that state."""
    s = 0.2
    a = Model.rigid_body("se3", 1.0, np.diag([0.01, 0.02, 0.015]), gravity=(0.0, 0.0, -9.81))
    b = Model.rigid_body("se3", 2.0, np.diag([0.02, 0.02, 0.02]), gravity=(0.0, 0.0, -9.81))
    world = ContactWorld([a, b], [halfspace("ground", (0, 0, 1), 0.0), box("box", (s, s, s), (0, 0)),
                                  box("other", (s, s, s), (1, 0))])
    rng = np.random.default_rng(3)
    states = []
    for _ in range(4):
        q = np.concatenate([rng.normal(size=3), (lambda x: x / np.linalg.norm(x))(rng.normal(size=4))])
        states.append(q)
    for qa, qb in [(states[0], states[1]), (states[2], states[1]), (states[2], states[1].copy()),
                   (states[0], states[3]), (states[0], states[3])]:
        got = world.poses([qa, qb])
        for model, q, P in zip(world.models, (qa, qb), got):
            assert np.array_equal(P, alg.body_placements(model, q))


def _models():
    from test_backends import _arm  # the two-joint arm (and its mimic twin) of the backend tests

    body = Model.rigid_body("so3xr3", 2.0, np.diag([0.02, 0.03, 0.04]), com=(0.01, -0.02, 0.03))
    arm = Model.from_urdf(_arm(), base="se3")
    return [body, Model.rigid_body("se3", 1.5, np.diag([0.01, 0.02, 0.02])), arm, arm.with_backend("numpy"),
            Model.from_urdf(_arm(mimic=True), base="se3"),
            Model.rigid_body("se3", 1.0, np.eye(3) * 0.01, added_mass=np.diag([1.0, 2.0, 3.0, 0.1, 0.2, 0.3]))]


@pytest.mark.parametrize("k", range(6))
def test_the_post_stabilisations_energies_are_the_models_bit_for_bit(k):
    """The post-stabilisation's energy balance calls the compiled energies kernel directly where the model's
    ``potential_energy``/``kinetic_energy`` would reach the same kernel through its backend (a compiled model
    without passive elements), the model's methods otherwise: the same numbers either way."""
    from mbs_ros.dynamics.contact.step import _kinetic_energy, _potential_energy

    model = _models()[k]
    rng = np.random.default_rng(k)
    for _ in range(5):
        q = model.integrate(model.neutral(), rng.normal(size=model.nv), 1.0)
        v = rng.normal(size=model.nv)
        assert _potential_energy(model, q) == model.potential_energy(q)
        assert _kinetic_energy(model, q, v) == model.kinetic_energy(q, v)


def test_the_warm_start_copies_the_matched_contacts_impulses():
    """kernels.copy_matched against the indexing it replaces: each matched contact's three impulses from its old
    contact, the unmatched ones and the rows after the contacts left as they were."""
    from mbs_ros.dynamics.contact.kernels import copy_matched

    rng = np.random.default_rng(5)
    old = rng.normal(size=3 * 7)
    best = np.array([3, -1, 0, 6, -1, 3], dtype=np.int64)
    lam = rng.normal(size=3 * best.size + 2)
    expected = lam.copy()
    found = np.flatnonzero(best >= 0)
    expected[:3 * best.size].reshape(-1, 3)[found] = old.reshape(-1, 3)[best[found]]
    copy_matched(best, old, lam)
    assert np.array_equal(lam, expected)
