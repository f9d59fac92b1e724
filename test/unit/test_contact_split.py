"""The least-norm split among redundant sticking contacts (mbs_ros.dynamics.contact.split, via solver.solve).

A free box resting on its four bottom corners: 12 contact rows on a body of 6 degrees of freedom, so G = J M⁻¹ Jᵀ
(built here by hand: rows [eᵀ, (p × e)ᵀ] of the linear-first twist at the centre of mass) is singular and the load
is statically indeterminate. Vanishing equal compliance shares it linearly (a plate on four equal springs): with
the centre of mass at (x_c, y_c) over corners (±a, ±b), λ_i = h W/4 (1 + x_i x_c/a² + y_i y_c/b²) and no
tangential impulse — the least ‖λ‖ under Σλ = hW and the two moment balances, worked out on paper.
Gauss–Seidel alone (split=False) shares it by the order of its sweeps."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.dynamics.contact.solver import RESIDUAL_TOLERANCE, solve

MASS, GRAVITY, H, MU = 2.0, 9.81, 1e-3, 0.8
A_HALF, B_HALF, C_HALF = 0.2, 0.1, 0.05
CORNERS = np.array([[x, y, -C_HALF] for x in (A_HALF, -A_HALF) for y in (B_HALF, -B_HALF)])


def _box(com=(0.0, 0.0), push=(0.0, 0.0)):
    """(G, g) of the box at rest on its corners (the centre of mass at ``com`` in the corners' plane, x y), one
    step of gravity (and of a horizontal force ``push`` [N] at the centre of mass) in the free velocity."""
    inertia = MASS / 12.0 * np.array([(2 * B_HALF) ** 2 + (2 * C_HALF) ** 2, (2 * A_HALF) ** 2 + (2 * C_HALF) ** 2,
                                      (2 * A_HALF) ** 2 + (2 * B_HALF) ** 2])
    m_inv = np.diag(np.concatenate([np.full(3, 1.0 / MASS), 1.0 / inertia]))
    frame = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # normal, t1, t2
    J = np.array([np.concatenate([e, np.cross(p - [com[0], com[1], 0.0], e)]) for p in CORNERS for e in frame])
    v_free = np.array([push[0] * H / MASS, push[1] * H / MASS, -GRAVITY * H, 0.0, 0.0, 0.0])
    return J @ m_inv @ J.T, J @ v_free


def _linear_share(com):
    x, y = CORNERS[:, 0], CORNERS[:, 1]
    return H * MASS * GRAVITY / 4.0 * (1.0 + x * com[0] / A_HALF ** 2 + y * com[1] / B_HALF ** 2)


@pytest.mark.parametrize("com", [(0.0, 0.0), (0.3 * A_HALF, -0.2 * B_HALF), (-0.5 * A_HALF, 0.4 * B_HALF)])
def test_a_box_on_four_corners_shares_its_weight_as_equal_springs_would(com):
    G, g = _box(com)
    assert np.linalg.matrix_rank(G) == 6  # 12 rows, 6 degrees of freedom: redundant
    r = solve(G, g, np.full(4, MU), 4)
    lam = r.lam.reshape(4, 3)
    assert r.converged
    np.testing.assert_allclose(lam[:, 0], _linear_share(com), rtol=0, atol=1e-9 * H * MASS * GRAVITY)
    np.testing.assert_allclose(lam[:, 1:], 0.0, atol=1e-9 * H * MASS * GRAVITY)
    np.testing.assert_allclose(G @ r.lam + g, 0.0, atol=1e-9)  # at rest: every corner sticks


def test_gauss_seidel_alone_shares_it_by_its_order_and_the_velocities_are_the_same():
    """The same box, its centre of mass off the middle: Gauss–Seidel alone gives another member of the solution set
    (not the linear share), with the same constraint velocities as the least-norm one."""
    com = (0.3 * A_HALF, -0.2 * B_HALF)
    G, g = _box(com)
    gs = solve(G, g, np.full(4, MU), 4, split=False)
    split = solve(G, g, np.full(4, MU), 4)
    assert gs.converged and split.converged
    assert np.abs(gs.lam.reshape(4, 3)[:, 0] - _linear_share(com)).max() > 1e-3 * H * MASS * GRAVITY
    np.testing.assert_allclose(G @ gs.lam, G @ split.lam, atol=1e-9)
    assert np.linalg.norm(split.lam) < np.linalg.norm(gs.lam)


def test_a_warm_start_off_the_share_comes_back_to_it():
    """Warm-started with the whole load on two corners (an order's choice carried from a last step), the solve
    ends at the linear share all the same: the choice is not carried on."""
    com = (0.3 * A_HALF, -0.2 * B_HALF)
    G, g = _box(com)
    lam0 = np.zeros(12)
    lam0[0] = lam0[9] = 0.5 * H * MASS * GRAVITY
    r = solve(G, g, np.full(4, MU), 4, lam0=lam0)
    np.testing.assert_allclose(r.lam.reshape(4, 3)[:, 0], _linear_share(com), atol=1e-9 * H * MASS * GRAVITY)


def test_sliding_contacts_keep_their_impulses():
    """Pushed sideways harder than friction holds (push 2 μ W), the box slides: no contact sticks, nothing is
    redistributed, the impulses are Gauss–Seidel's, each on its cone's edge opposing the slide."""
    G, g = _box(push=(2.0 * MU * MASS * GRAVITY, 0.0))
    mu = np.full(4, MU)
    split, gs = solve(G, g, mu, 4), solve(G, g, mu, 4, split=False)
    assert split.converged and split.residual <= RESIDUAL_TOLERANCE * np.abs(g).max() + 1e-15
    np.testing.assert_array_equal(split.lam, gs.lam)
    lam = split.lam.reshape(4, 3)
    np.testing.assert_allclose(np.hypot(lam[:, 1], lam[:, 2]), MU * lam[:, 0], rtol=1e-9)
    assert (lam[:, 1] < 0).all()
