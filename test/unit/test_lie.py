"""Tests for mbs_ros.dynamics.lie, written once and run over every group.

References are independent of the code under test: scipy.linalg.expm, 50-term power series and
Bernoulli series evaluated in mpmath at 30 digits, sympy series for the Taylor coefficients, finite
differences, and the formulas printed in seeds 001/004 (Müller & Terze's dexp⁻¹, eqs. (10)-(11); From's ad~, eqs. 68,
73, 83: README, "The papers' studies"), with a misprint corrected where a test says so (From's Table 1 sign of ad~
on SO(3); his eq. 68 is right).
"""

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
import scipy.linalg

from mbs_ros.dynamics import lie
from mbs_ros.dynamics.lie import GROUPS, SE2, SE3, SO3, Rn, Schoenflies, SO3xR3, hat3, vee3
from mbs_ros.dynamics.lie import _base

ALL = [SO3, SE3, SE2, Schoenflies, SO3xR3, Rn(3), Rn(2)]
ROT = [SO3, SE3, SE2, Schoenflies, SO3xR3]
SUB = [G for G in ALL if G.H is not None]  # subgroups of SE(3)
ROT_IDX = {"so3": [0, 1, 2], "se3": [3, 4, 5], "se2": [2], "schoenflies": [3], "so3xr3": [3, 4, 5]}
# angle-like sizes that exercise every branch of the coefficient functions
ANGLES = [0.0, 1e-8, 1e-4, 0.1, 0.999, 1.001, 1.499, 1.501, 1.999, 2.001, 3.0,
          math.pi - 1e-6, math.pi - 1e-9, math.pi]
# slice of the configuration holding the unit quaternion / (cos, sin)
ROT_Q = {"so3": slice(0, 4), "se3": slice(3, 7), "so3xr3": slice(3, 7), "se2": slice(2, 4),
         "schoenflies": slice(3, 5)}
EPS = np.finfo(float).eps

ids = lambda G: G.name  # noqa: E731
params_all = pytest.mark.parametrize("G", ALL, ids=ids)
params_rot = pytest.mark.parametrize("G", ROT, ids=ids)
params_sub = pytest.mark.parametrize("G", SUB, ids=ids)


@pytest.fixture
def rng(request):
    # stable per-test seed (hash() of str is salted per process)
    return np.random.default_rng(sum(map(ord, request.node.name)))


def tangent(G, rng, angle=None, size=1.0):
    """Random tangent vector; its rotation part has norm `angle` (if given), the rest norm `size`."""
    x = rng.standard_normal(G.dim)
    rot = ROT_IDX.get(G.name, [])
    lin = [i for i in range(G.dim) if i not in rot]
    if not rot:  # R^n: the whole vector
        return x * ((size if angle is None else angle) / np.linalg.norm(x))
    x[lin] *= size / np.linalg.norm(x[lin]) if lin else 1.0
    if angle is not None:
        x[rot] *= angle / np.linalg.norm(x[rot])
    return x


# configuration entries that are a translation V(w) rho (translation first in SE(3), SE(2) and Schoenflies)
TRANSLATION_IDX = {"se3": [0, 1, 2], "se2": [0, 1], "schoenflies": [0, 1, 2]}


def rotation_angle(G, xi):
    return float(np.linalg.norm(xi[ROT_IDX[G.name]]))


def assert_same_element(G, a, b, tol=1e-14):
    """Faithful matrix representation: equality of elements regardless of the quaternion sign."""
    A, B = G.as_matrix(a), G.as_matrix(b)
    assert np.max(np.abs(A - B)) <= tol * max(1.0, np.max(np.abs(B)))


def rel_err(a, ref):
    a, ref = np.asarray(a, float), np.asarray(ref, float)
    return np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-300)


def product_floor(*pairs, k=8):
    """Absolute floor for two evaluations of one bilinear quantity that add their products in different orders (a
    BLAS product against a closed form: OpenBLAS's kernels, chosen by CPU, sum in different orders): ``k`` roundings
    at the largest sum of |products|, ``max(|A| @ |B|)`` over the pairs ``(A, B)``; 8 is the worst case of two sums of
    at most 4 nonzero products each (γ₄ ≈ 4 eps of that sum, each side). A bare 1e-15 was 1-2 roundings at these
    sizes: test_ad_tilde passed with a margin of 2.25 on OpenBLAS's AVX-512 kernels, 9 on its AVX2 ones, and was
    exact on its AVX ones."""
    return k * EPS * max(float(np.max(np.abs(A) @ np.abs(B))) for A, B in pairs)


# ---------------------------------------------------------------------------------------------
# registry, helpers
# ---------------------------------------------------------------------------------------------
def test_registry():
    assert set(GROUPS) == {"so3", "se3", "se2", "schoenflies", "so3xr3"}
    assert GROUPS["se3"] is SE3 and GROUPS["so3xr3"] is SO3xR3
    assert Rn(4) is Rn(4) and Rn(4).dim == 4 and Rn(4).H is None
    assert all(isinstance(G, lie.LieGroup) for G in ALL)
    for G in ALL:
        assert G.identity().shape == (G.nq,) and G.as_matrix(G.identity()).shape == (G.matrix_dim,) * 2
    with pytest.raises(ValueError):
        Rn(5).pose_matrix(np.zeros(5))


def test_hat3_vee3(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(hat3(x) @ y, np.cross(x, y), rtol=0, atol=product_floor((hat3(x), y)))
    assert np.array_equal(vee3(hat3(x)), x)
    assert np.array_equal(hat3(x), -hat3(x).T)


def test_conventions_se3_layout(rng):
    """Linear first, left-trivialised: hat([v; w]) acts as p -> w x p + v; Pinocchio layout."""
    v, w, p = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    X = SE3.hat(np.r_[v, w])
    np.testing.assert_allclose(X @ np.r_[p, 1.0], np.r_[np.cross(w, p) + v, 0.0], atol=1e-15)
    # quaternion order x, y, z, w: rotation by pi/2 about z
    q = np.array([1.0, 2.0, 3.0, 0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4)])
    np.testing.assert_allclose(SE3.as_matrix(q) @ [1.0, 0, 0, 1], [1.0, 3.0, 3.0, 1.0], atol=1e-15)
    # SE(2)/Schoenflies (cos, sin) layout; SO3xR3 composition is (r1 + r2, R1 R2)
    np.testing.assert_allclose(SE2.exp([0.0, 0.0, 0.3])[2:], [math.cos(0.3), math.sin(0.3)])
    a, b = SO3xR3.random(rng), SO3xR3.random(rng)
    np.testing.assert_allclose(SO3xR3.compose(a, b)[:3], a[:3] + b[:3], atol=1e-15)


# ---------------------------------------------------------------------------------------------
# group structure, matrices
# ---------------------------------------------------------------------------------------------
@params_all
def test_group_axioms(G, rng):
    a, b, c = G.random(rng), G.random(rng), G.random(rng)
    e = G.identity()
    np.testing.assert_allclose(G.compose(G.compose(a, b), c), G.compose(a, G.compose(b, c)),
                               rtol=0, atol=1e-14)
    np.testing.assert_allclose(G.compose(a, e), a, rtol=0, atol=1e-15)
    np.testing.assert_allclose(G.compose(e, a), a, rtol=0, atol=1e-15)
    np.testing.assert_allclose(G.compose(a, G.inverse(a)), e, rtol=0, atol=1e-15)
    np.testing.assert_allclose(G.compose(G.inverse(a), a), e, rtol=0, atol=1e-15)


@params_all
def test_as_matrix_homomorphism_and_round_trip(G, rng):
    a, b = G.random(rng), G.random(rng)
    A, B = G.as_matrix(a), G.as_matrix(b)
    np.testing.assert_allclose(G.as_matrix(G.compose(a, b)), A @ B, rtol=0, atol=1e-14)
    np.testing.assert_allclose(G.as_matrix(G.identity()), np.eye(G.matrix_dim), rtol=0, atol=0)
    np.testing.assert_allclose(G.as_matrix(G.inverse(a)), np.linalg.inv(A), rtol=0, atol=1e-14)
    assert_same_element(G, G.from_matrix(A), a, tol=1e-15)
    if G.name in ROT_Q:  # from_matrix returns a normalised configuration
        assert abs(np.linalg.norm(G.from_matrix(A)[ROT_Q[G.name]]) - 1.0) <= 2 * EPS


@params_all
def test_pose_matrix_rigid_transform(G, rng):
    a, b = G.random(rng), G.random(rng)
    T = G.pose_matrix(a)
    R = T[:3, :3]
    assert T.shape == (4, 4) and np.array_equal(T[3], [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-15)
    assert abs(np.linalg.det(R) - 1.0) < 1e-15
    if G.H is not None:  # subgroups of SE(3): the pose is the SE(3) embedding, a homomorphism
        np.testing.assert_allclose(G.pose_matrix(G.compose(a, b)), T @ G.pose_matrix(b), atol=1e-14)
    if G is SO3xR3:  # pose [[R, r], [0, 1]] from the blocks of the 7x7 representation
        M = G.as_matrix(a)
        np.testing.assert_allclose(T[:3, :3], M[:3, :3], atol=0)
        np.testing.assert_allclose(T[:3, 3], M[3:6, 6], atol=0)


@params_all
def test_normalize_and_integrate(G, rng):
    q, xi = G.random(rng), G.random_tangent(rng, scale=0.7)
    ref = G.compose(q, G.exp(xi))
    out = G.integrate(q, xi)
    assert_same_element(G, out, ref, tol=1e-15)
    # a drifted rotation part is re-projected to unit length and the element kept
    rot = ROT_Q.get(G.name)
    if rot is not None:
        assert abs(np.linalg.norm(out[rot]) - 1.0) <= 2 * EPS
        drift = q.copy()
        drift[rot] *= 1.0 + 1e-3
        assert abs(np.linalg.norm(G.normalize(drift)[rot]) - 1.0) <= 2 * EPS
        np.testing.assert_allclose(G.normalize(drift), q, rtol=0, atol=1e-15)


@params_all
def test_random_elements(G, rng):
    angles = []
    for _ in range(300):
        q = G.random(rng)
        if G.name in ROT_IDX:
            assert abs(np.linalg.norm(q[ROT_Q[G.name]]) - 1.0) <= 2 * EPS
            angles.append(rotation_angle(G, G.log(q)))
    if angles:
        assert max(angles) <= math.pi + 1e-15 and max(angles) > 0.95 * math.pi
    x = G.random_tangent(rng, scale=1e-3)
    assert x.shape == (G.dim,) and 0 < np.linalg.norm(x) < 1e-2


# ---------------------------------------------------------------------------------------------
# exp / log
# ---------------------------------------------------------------------------------------------
@params_all
@pytest.mark.parametrize("norm", [0.0, 1e-8, 1e-4, 0.1, 1.0, 3.0])
def test_exp_log_round_trip(G, norm, rng):
    x = tangent(G, rng, angle=norm, size=norm)
    y = G.log(G.exp(x))
    if norm == 0.0:
        assert np.array_equal(y, np.zeros(G.dim))
    else:
        assert rel_err(y, x) < 2e-15


@params_rot
@pytest.mark.parametrize("gap", [1e-6, 1e-9, 0.0])
def test_exp_log_near_pi(G, gap, rng):
    x = tangent(G, rng, angle=math.pi - gap, size=2.0)
    q = G.exp(x)
    y = G.log(q)
    # |w| is formed from rounded components: at exactly pi it may land an ulp or two above
    assert rotation_angle(G, y) <= math.pi * (1.0 + 4.0 * np.finfo(float).eps)
    if gap:  # still the principal branch: log must return x itself
        assert rel_err(y, x) < 2e-15
    assert_same_element(G, G.exp(y), q, tol=2e-15)  # at exactly pi, -axis is as good


@params_all
@pytest.mark.parametrize("angle", ANGLES)
def test_exp_matches_expm_of_hat(G, angle, rng):
    x = tangent(G, rng, angle=angle, size=1.5)
    np.testing.assert_allclose(G.vee(G.hat(x)), x, rtol=0, atol=0)
    ref = scipy.linalg.expm(G.hat(x))
    assert np.max(np.abs(G.as_matrix(G.exp(x)) - ref)) < 3e-15 * max(1.0, np.max(np.abs(ref)))


# --- exactness against a 30-digit reference --------------------------------------------------
def _mp(A):
    return mp.matrix(np.asarray(A, float).tolist())


def _np(M):
    return np.array(M.tolist(), dtype=float)


def _mp_quat(w):
    """Unit quaternion (x, y, z, w) of exp(hat w), textbook formula in mpmath."""
    w = [mp.mpf(float(c)) for c in w]
    th = mp.sqrt(sum(c * c for c in w))
    k = mp.sin(th / 2) / th if th else mp.mpf(1) / 2
    return [k * c for c in w] + [mp.cos(th / 2)]


@mp.workdps(30)
def mp_exp_config(G, x):
    """Reference configuration of exp(x): rotations by trigonometric formulas, translations by the
    30-digit matrix exponential of hat(x). Returns (values, mask of entries compared absolutely)."""
    if G.name.startswith("r"):
        return np.array(x, float), np.zeros(G.nq, bool)
    T = _np(mp.expm(_mp(G.hat(x))))
    if G is SO3:
        vals = _mp_quat(x)
    elif G is SE3:
        vals = list(T[:3, 3]) + _mp_quat(x[3:])
    elif G is SO3xR3:
        vals = list(x[:3]) + _mp_quat(x[3:])
    elif G is SE2:
        r = mp.mpf(float(x[2]))
        vals = list(T[:2, 2]) + [mp.cos(r), mp.sin(r)]
    elif G is Schoenflies:
        r = mp.mpf(float(x[3]))
        vals = list(T[:3, 3]) + [mp.cos(r), mp.sin(r)]
    vals = np.array([float(v) for v in vals])
    # q_w = cos(|w|/2): |w| is rounded when formed from the components, so q_w is only
    # ABSOLUTELY accurate (relative error blows up where q_w -> 0 at angle pi).
    mask = np.zeros(G.nq, bool)
    if G in (SO3, SE3, SO3xR3):
        mask[-1] = True
    return vals, mask


@params_all
@pytest.mark.parametrize("angle", ANGLES)
def test_exp_log_exact(G, angle, rng):
    x = tangent(G, rng, angle=angle, size=1.0)
    ref, mask = mp_exp_config(G, x)
    err = np.abs(G.exp(x) - ref)
    # componentwise relative error (small rotations keep their digits), absolute for q_w; a translation
    # V(w) rho is a sum of terms that can cancel in one component, so it is held to its largest component
    scale = np.abs(ref)
    trans = TRANSLATION_IDX.get(G.name, [])
    if trans:
        scale[trans] = np.maximum(scale[trans], np.max(np.abs(ref[trans])))
    assert np.all(err[~mask] <= 2e-15 * scale[~mask]), err / np.abs(ref)
    assert np.all(err[mask] <= 2.5e-16)
    # log of the correctly rounded reference element returns x (principal branch below pi)
    y = G.log(ref)
    if angle < math.pi:
        assert np.max(np.abs(y - x)) <= 2e-15 * np.max(np.abs(x)) + 1e-300
    else:
        assert_same_element(G, G.exp(y), ref, tol=2e-15)


# ---------------------------------------------------------------------------------------------
# adjoint representations
# ---------------------------------------------------------------------------------------------
@params_all
def test_adjoint(G, rng):
    q, p, x = G.random(rng), G.random(rng), G.random_tangent(rng)
    Ad = G.adjoint(q)
    lhs = G.compose(q, G.compose(G.exp(x), G.inverse(q)))
    assert_same_element(G, lhs, G.exp(Ad @ x), tol=1e-14)
    M = G.as_matrix(q)
    np.testing.assert_allclose(M @ G.hat(x) @ np.linalg.inv(M), G.hat(Ad @ x), atol=1e-14)
    np.testing.assert_allclose(G.adjoint(G.compose(q, p)), Ad @ G.adjoint(p), atol=1e-14)
    np.testing.assert_allclose(G.adjoint(G.inverse(q)), np.linalg.inv(Ad), atol=1e-14)
    # Ad_exp(x) = e^(ad_x)
    np.testing.assert_allclose(G.adjoint(G.exp(x)), scipy.linalg.expm(G.ad(x)), atol=2e-15)


@params_all
def test_ad_is_the_commutator(G, rng):
    x, y = G.random_tangent(rng), G.random_tangent(rng)
    X, Y = G.hat(x), G.hat(y)
    np.testing.assert_allclose(G.ad(x) @ y, G.vee(X @ Y - Y @ X), rtol=0,
                               atol=product_floor((G.ad(x), y), (X, Y), (Y, X)))


@params_all
def test_ad_tilde(G, rng):
    p, y = G.random_tangent(rng), G.random_tangent(rng)
    At = G.ad_tilde(p)
    assert np.array_equal(At, -At.T)
    np.testing.assert_allclose(At @ y, -G.ad(y).T @ p, rtol=0, atol=product_floor((At, y), (G.ad(y).T, p)))
    # definition from the structure constants, (ad~_p)_ij = p . [e_i, e_j] (seed 004 eq. 73)
    E = [G.hat(e) for e in np.eye(G.dim)]
    ref = np.array([[p @ G.vee(Ei @ Ej - Ej @ Ei) for Ej in E] for Ei in E])
    np.testing.assert_allclose(At, ref, rtol=0, atol=1e-15)


def test_ad_tilde_printed_forms(rng):
    """Seed 004: eq. 73 (SE(3)), eq. 68 (SO(3), Table 1's sign is a typo), eq. 83 (SE(2)), X(z)."""
    p = rng.standard_normal(6)
    pl, pa = p[:3], p[3:]
    Z = np.zeros((3, 3))
    np.testing.assert_allclose(SE3.ad_tilde(p), np.block([[Z, -hat3(pl)], [-hat3(pl), -hat3(pa)]]))
    np.testing.assert_allclose(SO3.ad_tilde(pa), -hat3(pa))
    p1, p2 = p[0], p[1]
    np.testing.assert_allclose(SE2.ad_tilde(p[:3]), [[0, 0, -p2], [0, 0, p1], [p2, -p1, 0]])
    np.testing.assert_allclose(Schoenflies.ad_tilde(p[:4]),
                               [[0, 0, 0, -p2], [0, 0, 0, p1], [0, 0, 0, 0], [p2, -p1, 0, 0]])
    v, w = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(SE3.ad(np.r_[v, w]), np.block([[hat3(w), hat3(v)], [Z, hat3(w)]]))


@params_sub
def test_subgroup_projections(G, rng):
    """ad, ad~, Ad, dexp, dexp^-1, exp of a subgroup are those of SE(3) restricted by H."""
    H = G.H
    Hp = np.linalg.pinv(H)
    x, p, q = G.random_tangent(rng), rng.standard_normal(6), G.random(rng)
    np.testing.assert_allclose(G.ad(x), Hp @ SE3.ad(H @ x) @ H, atol=1e-15)
    np.testing.assert_allclose(G.ad_tilde(H.T @ p), H.T @ SE3.ad_tilde(p) @ H, atol=1e-15)
    np.testing.assert_allclose(G.dexp(x), Hp @ SE3.dexp(H @ x) @ H, atol=1e-15)
    np.testing.assert_allclose(G.dexp_inv(x), Hp @ SE3.dexp_inv(H @ x) @ H, atol=1e-15)
    np.testing.assert_allclose(G.pose_matrix(G.exp(x)), SE3.as_matrix(SE3.exp(H @ x)), atol=1e-15)
    q3 = SE3.from_matrix(G.pose_matrix(q))
    np.testing.assert_allclose(G.adjoint(q), Hp @ SE3.adjoint(q3) @ H, atol=1e-15)
    np.testing.assert_allclose(H @ G.log(q), SE3.log(q3), atol=1e-14)


# ---------------------------------------------------------------------------------------------
# dexp, dexp^-1
# ---------------------------------------------------------------------------------------------
def bernoulli(n):
    """B_0..B_n with B_1 = -1/2 (sum_k B_k x^k / k! = x / (e^x - 1))."""
    B = [Fraction(1)]
    for m in range(1, n + 1):
        B.append(-sum(math.comb(m + 1, k) * B[k] for k in range(m)) / (m + 1))
    return B


BERNOULLI = bernoulli(60)


def float_series(A, coeffs):
    S, P = np.zeros_like(A), np.eye(len(A))
    for c in coeffs:
        S += float(c) * P
        P = P @ A
    return S


@params_all
@pytest.mark.parametrize("angle", [0.0, 1e-8, 1e-3, 0.3, 1.0, 2.0])
def test_dexp_and_dexp_inv_series(G, angle, rng):
    x = tangent(G, rng, angle=angle, size=1.0)
    A = G.ad(x)
    ref_dexp = float_series(A, [Fraction(1, math.factorial(k + 1)) for k in range(40)])
    ref_inv = float_series(A, [BERNOULLI[k] / math.factorial(k) for k in range(61)])
    assert rel_err(G.dexp(x), ref_dexp) < 1e-15
    assert rel_err(G.dexp_inv(x), ref_inv) < 1e-15
    np.testing.assert_allclose(G.dexp_inv(x) @ G.dexp(x), np.eye(G.dim), rtol=0, atol=1e-15)


@params_all
def test_dexp_at_zero_is_exact(G, rng):
    x0 = np.zeros(G.dim)
    assert np.array_equal(G.dexp(x0), np.eye(G.dim))
    assert np.array_equal(G.dexp_inv(x0), np.eye(G.dim))
    # pure translation (angle exactly 0): the series stop after the linear term
    x = tangent(G, rng, angle=0.0, size=1.0)
    A = G.ad(x)
    np.testing.assert_array_equal(G.dexp(x), np.eye(G.dim) + A / 2 + A @ A / 6)
    np.testing.assert_array_equal(G.dexp_inv(x), np.eye(G.dim) - A / 2 + A @ A / 12)


@mp.workdps(30)
def mp_dexp_and_inverse(A, K=50):
    """sum_{k<K} A^k/(k+1)! in 30 digits."""
    A = _mp(A)
    n = A.rows
    S, P = mp.eye(n), mp.eye(n)
    for k in range(1, K):
        P = P * A
        S += P / mp.factorial(k + 1)
    return _np(S), _np(mp.inverse(S))


@params_all
@pytest.mark.parametrize("angle", ANGLES)
def test_dexp_exact(G, angle, rng):
    """Against a 30-digit evaluation: dexp by its power series, dexp^-1 as its inverse.

    Entrywise relative error, so the small entries keep their digits at angle 1e-8. Entries that
    are small by cancellation (e.g. sin(t)/t near pi) are held to ~angle * eps * |matrix| absolute:
    the angle |w| is rounded when formed from the components of x."""
    x = tangent(G, rng, angle=angle, size=1.0)
    D, Dinv = mp_dexp_and_inverse(G.ad(x))
    for mine, ref in ((G.dexp(x), D), (G.dexp_inv(x), Dinv)):
        err = np.abs(mine - ref)
        atol = 2 * EPS * angle * np.max(np.abs(ref))
        assert np.all(err <= 2e-15 * np.abs(ref) + atol), np.max(err / (np.abs(ref) + atol))


@params_rot
def test_dexp_singular_at_2pi(G, rng):
    """dexp_inv is singular at rotation angle 2 pi: dexp loses rank there."""
    x = tangent(G, rng, angle=2 * math.pi, size=1.0)
    assert np.linalg.matrix_rank(G.dexp(x), tol=1e-12) < G.dim
    y = tangent(G, rng, angle=2 * math.pi - 0.5, size=1.0)
    np.testing.assert_allclose(G.dexp_inv(y) @ G.dexp(y), np.eye(G.dim), atol=1e-13)


@params_all
@pytest.mark.parametrize("angle", [0.0, 1e-8, 0.4, 1.7, 2.6, 3.1])
def test_dexp_finite_differences(G, angle, rng):
    """Body velocity of g exp(phi(t)) is dexp(-phi) phi'; d/dt exp(x) = (dexp(x) x')^ exp(x)."""
    g, phi = G.random(rng), tangent(G, rng, angle=angle, size=0.8)
    dphi = G.random_tangent(rng)
    h = 1e-5
    ga = G.compose(g, G.exp(phi - h * dphi))
    gb = G.compose(g, G.exp(phi + h * dphi))
    V = G.log(G.compose(G.inverse(ga), gb)) / (2 * h)
    np.testing.assert_allclose(V, G.dexp(-phi) @ dphi, rtol=0, atol=1e-9)
    np.testing.assert_allclose(G.dexp_inv(-phi) @ V, dphi, rtol=0, atol=1e-9)
    # right-trivialised, as matrices
    Ea, Eb = G.as_matrix(G.exp(phi - h * dphi)), G.as_matrix(G.exp(phi + h * dphi))
    Xdot = (Eb - Ea) / (2 * h) @ np.linalg.inv(G.as_matrix(G.exp(phi)))
    np.testing.assert_allclose(Xdot, G.hat(G.dexp(phi) @ dphi), rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# coefficient functions: Taylor tables against sympy, accuracy across the thresholds
# ---------------------------------------------------------------------------------------------
def _closed_forms(t, m):
    """The closed forms of the coefficient functions, in sympy or mpmath (module m)."""
    s, c = m.sin(t), m.cos(t)
    return {
        "sin": (t - s) / t**3,
        "dexp_inv": (1 - t / 2 * m.cot(t / 2)) / t**2,
        "c3": (2 - t * s - 2 * c) / (2 * t**4),
        "c4": (2 * t - 3 * s + t * c) / (2 * t**5),
        "beta": 1 / t**4 + (t + s) / (4 * t**3 * (c - 1)),  # seed 001 eq. (10)
    }


TABLES = {"sin": _base.SIN_COEFF_SERIES, "dexp_inv": _base.DEXP_INV_SERIES,
          "c3": _base._SE3_C3, "c4": _base._SE3_C4, "beta": _base.SE3_BETA_SERIES}


@pytest.mark.slow
def test_taylor_tables_match_sympy():
    """Each coefficient function holds its series as ((theta_max, Horner table), ...) brackets:
    every table must be a prefix of the sympy series of the printed closed form."""
    sp = pytest.importorskip("sympy")
    t = sp.Symbol("t")
    forms = _closed_forms(t, sp)
    for name, brackets in TABLES.items():
        tables = [list(reversed(table)) for _, table in brackets]
        n = max(map(len, tables))
        ser = sp.series(forms[name], t, 0, 2 * n).removeO()
        exact = [float(ser.coeff(t, 2 * k)) for k in range(n)]
        assert all(tab == exact[:len(tab)] for tab in tables), name
        assert [b for b, _ in brackets] == sorted(b for b, _ in brackets)


@mp.workdps(80)  # the closed forms cancel up to t^4 ~ 1e-32 at t = 1e-8
def _mp_coeffs(t):
    t = mp.mpf(t)
    f = _closed_forms(t, mp)
    f["cos"] = (1 - mp.cos(t)) / t**2
    f["sinc"] = mp.sin(t) / t
    f["u"] = t / 2 * mp.cot(t / 2)
    return {k: float(v) for k, v in f.items()}


# tolerances ~1.2x the worst relative error measured on this grid
COEFF_TOL = {"sinc": 3e-16, "cos": 5e-16, "sin": 5e-16, "dexp_inv": 5e-16, "c3": 8e-16,
             "c4": 5e-16, "beta": 1.2e-15}
THRESHOLDS = [1e-4, 1.0, 2.0, 2.5, 3.1]


def test_coefficient_functions_accuracy():
    """Dense grid up to the pole of dexp^-1 at 2 pi, plus both sides of every threshold."""
    grid = np.concatenate([np.geomspace(1e-9, 0.05, 30), np.linspace(0.05, 6.2, 250),
                           [t * (1 + s * 1e-9) for t in THRESHOLDS for s in (-1, 1)]])
    worst = dict.fromkeys(list(COEFF_TOL) + ["u"], 0.0)
    for t in grid:
        ref = _mp_coeffs(t)
        c3, c4 = _base.se3_dexp_coeffs(t)
        a, u = _base.dexp_inv_coeffs(t)
        mine = {"sinc": _base.sinc(t), "cos": _base.cos_coeff(t), "sin": _base.sin_coeff(t),
                "dexp_inv": a, "c3": c3, "c4": c4, "beta": _base.se3_dexp_inv_beta(t, a, u)}
        for name, val in mine.items():
            worst[name] = max(worst[name], abs(val - ref[name]) / abs(ref[name]))
        worst["u"] = max(worst["u"], abs(u - ref["u"]) / max(abs(u), 1e-2))  # u -> 0 at pi
    assert all(worst[k] <= COEFF_TOL[k] for k in COEFF_TOL) and worst["u"] <= 4e-16, worst
    # SE(2) passes the signed yaw rate: the SO(3)-type coefficients are even functions
    for t in grid:
        for f in (_base.sinc, _base.cos_coeff, _base.sin_coeff, _base.dexp_inv_coeffs):
            assert f(-t) == f(t)


def test_coefficient_limits_at_zero():
    assert _base.sinc(0.0) == 1.0 and _base.cos_coeff(0.0) == 0.5
    assert _base.sin_coeff(0.0) == 1 / 6 and _base.dexp_inv_coeffs(0.0) == (1 / 12, 1.0)
    assert _base.se3_dexp_coeffs(0.0) == (1 / 24, 1 / 120)
    assert _base.se3_dexp_inv_beta(0.0, 1 / 12, 1.0) == -1 / 720


# ---------------------------------------------------------------------------------------------
# interoperability: Pinocchio's free-flyer / planar joints use the same layouts
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("angle", [0.0, 1e-8, 0.5, 2.5, math.pi - 1e-6])
def test_pinocchio_layout_and_maps(angle, rng):
    pin = pytest.importorskip("pinocchio")
    ff, planar = pin.Model(), pin.Model()
    ff.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "ff")
    planar.addJoint(0, pin.JointModelPlanar(), pin.SE3.Identity(), "planar")
    for G, model in ((SE3, ff), (SE2, planar)):
        q0, q1, v = G.random(rng), G.random(rng), tangent(G, rng, angle=angle, size=1.0)
        # Pinocchio 4.1's planar integrate is off by ~1e-8 at yaw increments ~1e-8 (checked against
        # a 40-digit expm: ours is within 1e-16 there); elsewhere both agree to rounding
        tol = 1e-8 if G is SE2 and 0 < angle < 1e-3 else 1e-15
        np.testing.assert_allclose(G.integrate(q0, v), pin.integrate(model, q0, v), atol=tol)
        np.testing.assert_allclose(G.log(G.compose(G.inverse(q0), q1)), pin.difference(model, q0, q1),
                                   atol=4e-15)
    x = tangent(SE3, rng, angle=angle, size=1.0)
    np.testing.assert_allclose(SE3.as_matrix(SE3.exp(x)), pin.exp6(x).homogeneous, atol=1e-15)
    # Pinocchio's Jexp/Jlog are the right Jacobians: Jexp6(x) = dexp(-x), Jlog6 = its inverse
    np.testing.assert_allclose(SE3.dexp(-x), pin.Jexp6(pin.Motion(x)), atol=1e-15)
    np.testing.assert_allclose(SE3.dexp_inv(-x), pin.Jlog6(pin.exp6(x)), atol=2e-15)
    np.testing.assert_allclose(SO3.dexp(-x[3:]), pin.Jexp3(x[3:]), atol=1e-15)
    np.testing.assert_allclose(SO3.log(SO3.exp(x[3:])), pin.log3(pin.exp3(x[3:])), atol=1e-14)
