"""Shared interface and numerics for the Lie groups of :mod:`mbs_ros.dynamics.lie`.

Conventions (project wide; README.md, "Conventions"):

* tangent coordinates are linear first, e.g. se(3) ``xi = [v; w]``;
* velocities are left-trivialised (body frame): ``g^-1 dg/dt = xi^``;
* ``hat3(x) @ y == cross(x, y)``; ``ad_X Y = [X, Y] = XY - YX`` of the matrices, for se(3)
  ``ad_[v;w] = [[hat w, hat v], [0, hat w]]`` (From, seed 004, eq. 8);
* ``ad_tilde(p)_ij = p . [e_i, e_j]`` (seed 004, eq. 73): skew, ``ad_tilde(p) @ y == -ad(y).T @ p``;
* ``dexp`` is RIGHT-trivialised, ``d/dt exp(x(t)) = (dexp(x) x')^ exp(x)``,
  ``dexp(x) = sum_k ad_x^k / (k+1)!``. Hence the body velocity of ``g exp(phi(t))`` is
  ``dexp(-phi) phi'`` and ``dexp_inv(x) = sum_k B_k/k! ad_x^k = I - ad/2 + ad^2/12 - ad^4/720 + ...``
  (Bernoulli numbers; Mueller & Terze, seed 001, eqs. (10), (11)). ``dexp_inv`` is singular where a
  rotation angle reaches 2*pi.

Every method takes and returns plain float numpy arrays for ONE element (no batching, no wrapper
objects): the dynamics code calls them in hot loops, so the implementations unpack to Python floats
and use :mod:`math` on scalars.

Closed forms lose accuracy near angle 0 by cancellation. Below thresholds chosen by measurement
against 80-digit mpmath (sin_coeff: 1, dexp_inv_coeffs: 2, se3_dexp_coeffs: 2.5,
se3_dexp_inv_beta: 3.1; sinc only avoids 0/0, below 1e-4) the coefficient functions switch to
Taylor series in theta**2. Their coefficients are exact rationals from the general terms (the tests
re-derive them with sympy), truncated per angle bracket at < 1e-17 relative. Measured on a dense
grid over [0, 2 pi): every coefficient within 5e-16 relative error (beta: 1.1e-15).
"""

from __future__ import annotations

import abc
import math
from fractions import Fraction

import numpy as np
import transforms3d.quaternions as _t3q

__all__ = [
    "LieGroup",
    "hat3",
    "vee3",
    "sinc",
    "cos_coeff",
    "sin_coeff",
    "dexp_inv_coeffs",
    "se3_dexp_coeffs",
    "se3_dexp_inv_beta",
    "SE3_DEXP_C3_SERIES",
    "SE3_DEXP_C4_SERIES",
]


# ----------------------------------------------------------------------------------------------
# so(3) hat / vee
# ----------------------------------------------------------------------------------------------
def hat3(x) -> np.ndarray:
    """3x3 skew matrix with ``hat3(x) @ y == np.cross(x, y)``."""
    a, b, c = _floats(x)
    return np.array([[0.0, -c, b], [c, 0.0, -a], [-b, a, 0.0]])


def vee3(X) -> np.ndarray:
    """Inverse of :func:`hat3` (reads the lower-left entries; no skew check)."""
    return np.array([X[2][1], X[0][2], X[1][0]], dtype=float)


def _floats(a) -> list:
    """Python floats of a 1-D array-like (``ndarray.tolist`` is the fast path)."""
    try:
        return a.tolist()
    except AttributeError:
        return [float(v) for v in a]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.flags.writeable = False
    return a


# ----------------------------------------------------------------------------------------------
# Coefficient functions with Taylor branches.  Series are in t2 = theta**2:  f = sum_k c_k t2**k,
# the c_k exact rationals (general terms below, checked against sympy in the tests) rounded once.
# ----------------------------------------------------------------------------------------------
def _bernoulli(n: int) -> list:
    """B_0..B_n (B_1 = -1/2) from sum_{k<=m} C(m+1, k) B_k = 0."""
    B = [Fraction(1)]
    for m in range(1, n + 1):
        B.append(-sum(math.comb(m + 1, k) * B[k] for k in range(m)) / (m + 1))
    return B


def _table(coeffs) -> tuple:
    """Floats, highest power first, for Horner evaluation in :func:`_series`."""
    return tuple(float(c) for c in reversed(coeffs))


def _series(table, t2: float) -> float:
    r = 0.0
    for c in table:
        r = r * t2 + c
    return r


_BRACKETS = (0.05, 0.2, 0.5, 1.0, 1.5, 2.0, 2.5, 3.1)


def _series_brackets(coeffs, threshold: float, radius: float = math.inf) -> tuple:
    """((theta_max, table), ...) up to ``threshold``: for |theta| < theta_max the table holds the
    fewest leading terms whose truncation error is < 1e-17 |c_0| (tail beyond the given terms
    bounded geometrically, ratio theta^2/radius^2 or the last term ratio), so small angles, the
    common case in time stepping, cost a few multiply-adds."""
    c = [abs(float(x)) for x in coeffs]
    out = []
    for tm in [b for b in _BRACKETS if b < threshold] + [threshold]:
        t2 = tm * tm
        terms = [ck * t2**k for k, ck in enumerate(c)]
        q = 1.1 * t2 / radius**2 if radius < math.inf else terms[-1] / terms[-2]
        tail = terms[-1] * q / (1.0 - q)
        if not 0.0 <= q < 1.0 or tail > 1e-17 * c[0]:
            raise ValueError(f"series too short for theta < {tm}")
        n = len(c)
        while n > 1 and tail + terms[n - 1] < 1e-17 * c[0]:
            tail += terms[n - 1]
            n -= 1
        out.append((tm, _table(coeffs[:n])))
    return tuple(out)


# sin(x)/x: the closed form is exact to rounding for every x != 0; the series only avoids 0/0.
SINC_THRESHOLD = 1e-4

# C = (theta - sin theta)/theta^3 = sum_k (-1)^k / (2k+3)! theta^2k.  Closed form within 4e-16
# above 1; 9 terms reach 2e-17 there.
SIN_COEFF_SERIES = _series_brackets(
    [Fraction((-1) ** k, math.factorial(2 * k + 3)) for k in range(9)], 1.0)

# a = (1 - (theta/2) cot(theta/2))/theta^2 = sum_k |B_{2k+2}|/(2k+2)! theta^2k (radius 2 pi).
# Closed form within 5e-16 above 2 (1e-15 at 1.5); 17 terms reach 1e-17 at 2.
_BERNOULLI = _bernoulli(66)
_A = [abs(_BERNOULLI[2 * k + 2]) / math.factorial(2 * k + 2) for k in range(33)]
DEXP_INV_SERIES = _series_brackets(_A[:17], 2.0, 2 * math.pi)

# SE(3) dexp = I + c1 ad + c2 ad^2 + c3 ad^3 + c4 ad^4 (the minimal polynomial of ad_X divides
# z (z^2 + theta^2)^2, theta = |w|; the polynomial interpolates (e^z - 1)/z on the spectrum).
# c1 = B + theta^2 c3 and c2 = C + theta^2 c4 (B, C the SO(3) coefficients), so only c3, c4 are
# needed: c3 = sum (-1)^k (k+1)/(2k+4)! theta^2k, c4 = sum (-1)^k (k+1)/(2k+5)! theta^2k.
# Closed forms within 4e-16 above 2.5 (c4 loses 8e-16 at 2.2, 1e-15 at 1.8); 12 terms reach
# 4e-18 at 2.5.
_SE3_C3 = _series_brackets(
    [Fraction((-1) ** k * (k + 1), math.factorial(2 * k + 4)) for k in range(12)], 2.5)
_SE3_C4 = _series_brackets(
    [Fraction((-1) ** k * (k + 1), math.factorial(2 * k + 5)) for k in range(12)], 2.5)
SE3_DEXP_C3_SERIES, SE3_DEXP_C4_SERIES = _SE3_C3, _SE3_C4  # for the compiled control laws' tables

# beta of seed 001 eq. (10): 1/theta^4 + (theta + sin theta)/(4 theta^3 (cos theta - 1)) -> -1/720.
# With a = 1/12 + theta^2 a2:  beta = (3 a2 - a^2)/2  (so beta_k = (3 A_{k+1} - sum A_i A_j)/2),
# and alpha = a + theta^2 beta.  Every closed form of beta cancels: ~7e-15 relative error up to
# theta = 3.1, < 1.1e-15 beyond, so the series (radius 2 pi) is used up to 3.1 (32 terms).
SE3_BETA_SERIES = _series_brackets(
    [(3 * _A[k + 1] - sum(_A[i] * _A[k - i] for i in range(k + 1))) / 2 for k in range(32)],
    3.1, 2 * math.pi)


def sinc(x: float) -> float:
    """sin(x)/x."""
    if abs(x) < SINC_THRESHOLD:
        x2 = x * x
        return 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0)
    return math.sin(x) / x


def cos_coeff(theta: float) -> float:
    """B = (1 - cos theta)/theta**2, evaluated as sinc(theta/2)**2 / 2 (no cancellation)."""
    s = sinc(0.5 * theta)
    return 0.5 * s * s


def sin_coeff(theta: float) -> float:
    """C = (theta - sin theta)/theta**3 (series for |theta| < 1)."""
    t = abs(theta)
    for tmax, table in SIN_COEFF_SERIES:
        if t < tmax:
            return _series(table, theta * theta)
    return (theta - math.sin(theta)) / (theta * theta * theta)


def dexp_inv_coeffs(theta: float) -> tuple:
    """(a, u): a = (1 - u)/theta**2 is the hat^2 coefficient of so(3) dexp^-1 (seed 001 eq. 11,
    -> 1/12), u = (theta/2) cot(theta/2) (-> 1; u is returned separately because 1 - a theta^2
    loses its relative accuracy where u -> 0 near theta = pi). Series for |theta| < 2; singular
    at theta = 2 pi."""
    t2 = theta * theta
    t = abs(theta)
    for tmax, table in DEXP_INV_SERIES:
        if t < tmax:
            a = _series(table, t2)
            return a, 1.0 - a * t2
    h = 0.5 * theta
    u = h * math.cos(h) / math.sin(h)
    return (1.0 - u) / t2, u


def se3_dexp_coeffs(theta: float) -> tuple:
    """(c3, c4) of SE(3) dexp = I + c1 ad + c2 ad^2 + c3 ad^3 + c4 ad^4, theta = |w|:
    c3 = (2 - t sin t - 2 cos t)/(2t^4) -> 1/24, c4 = (2t - 3 sin t + t cos t)/(2t^5) -> 1/120.
    Series for theta < 2.5."""
    t = abs(theta)
    for (tmax, table3), (_, table4) in zip(_SE3_C3, _SE3_C4):
        if t < tmax:
            t2 = theta * theta
            return _series(table3, t2), _series(table4, t2)
    s, c = math.sin(theta), math.cos(theta)
    t4 = theta ** 4
    return ((2.0 - theta * s - 2.0 * c) / (2.0 * t4),
            (2.0 * theta - 3.0 * s + theta * c) / (2.0 * t4 * theta))


def se3_dexp_inv_beta(theta: float, a: float, u: float) -> float:
    """beta of seed 001 eq. (10), the ad^4 coefficient of SE(3) dexp^-1 (-> -1/720); a, u from
    :func:`dexp_inv_coeffs`. Series below 3.1, above it (a (2 + u)/2 - 1/8)/theta^2 (eq. 10
    rewritten with u = (theta/2) cot(theta/2))."""
    t2 = theta * theta
    t = abs(theta)
    for tmax, table in SE3_BETA_SERIES:
        if t < tmax:
            return _series(table, t2)
    return (0.5 * a * (2.0 + u) - 0.125) / t2


# ----------------------------------------------------------------------------------------------
# Unit quaternions, Pinocchio order (x, y, z, w).  Conversions to/from matrices use transforms3d
# (w, x, y, z order); quat2mat costs ~1.1 us per call with list input, fine for the hot path.
# ----------------------------------------------------------------------------------------------
def quat_exp(wx: float, wy: float, wz: float) -> tuple:
    """Unit quaternion (x, y, z, w) of exp(hat w): (sin(t/2) w/t, cos(t/2)), t = |w|."""
    theta = math.sqrt(wx * wx + wy * wy + wz * wz)
    h = 0.5 * theta
    k = 0.5 * sinc(h)  # sin(t/2)/t
    return (k * wx, k * wy, k * wz, math.cos(h))


def quat_log(x: float, y: float, z: float, w: float) -> tuple:
    """Rotation vector w, |w| in [0, pi], of a (unit) quaternion (x, y, z, w).

    theta = 2 atan2(|q_v|, |q_w|) with the sign of q flipped when q_w < 0: well conditioned at and
    near theta = pi, unlike acos of the trace. At exactly pi the sign of the axis follows q_v."""
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    n = math.sqrt(x * x + y * y + z * z)
    if n < 1e-8 * w:
        # 2 atan(n/w)/n = (2/w)(1 - r^2/3 + r^4/5), r = n/w < 1e-8: exact to rounding
        r2 = (n / w) ** 2
        k = 2.0 / w * (1.0 - r2 / 3.0)
    else:
        k = 2.0 * math.atan2(n, w) / n
    return (k * x, k * y, k * z)


def quat_mul(a: tuple, b: tuple) -> tuple:
    """Hamilton product a*b of (x, y, z, w) quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


def quat_rotate(q: tuple, v: tuple) -> tuple:
    """R(q) v for a unit quaternion: v + 2w (q_v x v) + 2 q_v x (q_v x v)."""
    x, y, z, w = q
    vx, vy, vz = v
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty,
            vy + w * ty + z * tx - x * tz,
            vz + w * tz + x * ty - y * tx)


def quat_normalize(x: float, y: float, z: float, w: float) -> tuple:
    n = 1.0 / math.sqrt(x * x + y * y + z * z + w * w)
    return (x * n, y * n, z * n, w * n)


def quat_to_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """3x3 rotation matrix (transforms3d.quat2mat; normalises internally)."""
    return _t3q.quat2mat([w, x, y, z])


def matrix_to_quat(R) -> tuple:
    """(x, y, z, w), w >= 0, of a rotation matrix (transforms3d.mat2quat, eigenvector method: robust
    at pi and for slightly non-orthogonal input; components carry ~1e-16 ABSOLUTE error)."""
    w, x, y, z = _t3q.mat2quat(np.asarray(R, dtype=float)[:3, :3]).tolist()
    return (x, y, z, w)


def random_quat(rng: np.random.Generator) -> tuple:
    """Uniformly distributed unit quaternion (normalised 4-D Gaussian), any angle in [0, pi]."""
    return quat_normalize(*rng.standard_normal(4).tolist())


# ----------------------------------------------------------------------------------------------
# Interface
# ----------------------------------------------------------------------------------------------
class LieGroup(abc.ABC):
    """One matrix Lie group. Instances are stateless singletons; elements are 1-D arrays ``q`` of
    length ``nq`` (Pinocchio layout), tangent vectors are 1-D arrays of length ``dim``.

    Attributes: ``name``, ``nq``, ``dim``, ``matrix_dim`` (size of :meth:`as_matrix`), ``H``
    (6 x dim selection into se(3) for subgroups of SE(3), seed 004 eq. 58; ``None`` otherwise).
    """

    name: str
    nq: int
    dim: int
    matrix_dim: int
    H: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"<LieGroup {self.name}: nq={self.nq}, dim={self.dim}>"

    # --- group structure ---------------------------------------------------------------------
    @abc.abstractmethod
    def identity(self) -> np.ndarray:
        """Identity element (a fresh array)."""

    @abc.abstractmethod
    def compose(self, a, b) -> np.ndarray:
        """Group product a * b."""

    @abc.abstractmethod
    def inverse(self, a) -> np.ndarray:
        """Group inverse (assumes a normalised element)."""

    @abc.abstractmethod
    def normalize(self, q) -> np.ndarray:
        """Re-project the rotation part (quaternion or (cos, sin)) to unit length (a copy)."""

    # --- exponential coordinates ---------------------------------------------------------------
    @abc.abstractmethod
    def exp(self, xi) -> np.ndarray:
        """Exponential map algebra -> group (closed form, Taylor branch near 0)."""

    @abc.abstractmethod
    def log(self, q) -> np.ndarray:
        """Logarithm group -> algebra, rotation angle in [0, pi] (inverse of exp there)."""

    def integrate(self, q, xi) -> np.ndarray:
        """q * exp(xi), re-normalised (a body-frame step; xi = v dt for a body velocity v)."""
        return self.normalize(self.compose(q, self.exp(xi)))

    # --- matrices ------------------------------------------------------------------------------
    @abc.abstractmethod
    def as_matrix(self, q) -> np.ndarray:
        """Faithful matrix representation: as_matrix(a*b) = as_matrix(a) @ as_matrix(b)."""

    @abc.abstractmethod
    def from_matrix(self, T) -> np.ndarray:
        """Inverse of :meth:`as_matrix`."""

    @abc.abstractmethod
    def pose_matrix(self, q) -> np.ndarray:
        """Physical 4x4 homogeneous pose world <- body."""

    @abc.abstractmethod
    def hat(self, xi) -> np.ndarray:
        """Algebra element as a matrix of the representation of :meth:`as_matrix`."""

    @abc.abstractmethod
    def vee(self, X) -> np.ndarray:
        """Inverse of :meth:`hat`."""

    # --- adjoint representations ---------------------------------------------------------------
    @abc.abstractmethod
    def adjoint(self, q) -> np.ndarray:
        """Ad_q with q exp(xi) q^-1 = exp(Ad_q xi)."""

    @abc.abstractmethod
    def ad(self, xi) -> np.ndarray:
        """ad_xi, ad_xi eta = vee([hat xi, hat eta]) (seed 004 eq. 8 for se(3))."""

    @abc.abstractmethod
    def ad_tilde(self, p) -> np.ndarray:
        """ad~_p, (ad~_p)_ij = p . [e_i, e_j] for p in the dual algebra (seed 004 eq. 73);
        skew, ad~_p y = -ad_y^T p; C(v) = ad~_{Mv} in M v' + C(v) v = tau."""

    @abc.abstractmethod
    def dexp(self, xi) -> np.ndarray:
        """Right-trivialised differential of exp, sum_k ad_xi^k/(k+1)!:
        d/dt exp(x) = (dexp(x) x')^ exp(x); body velocity of g exp(phi) is dexp(-phi) phi'."""

    @abc.abstractmethod
    def dexp_inv(self, xi) -> np.ndarray:
        """Inverse of :meth:`dexp`, sum_k B_k/k! ad^k = I - ad/2 + ad^2/12 - ad^4/720 + ...
        (seed 001 eqs. 10, 11); singular at rotation angle 2 pi."""

    # --- sampling ------------------------------------------------------------------------------
    @abc.abstractmethod
    def random(self, rng: np.random.Generator) -> np.ndarray:
        """Random element; rotations uniform (angles up to pi), translations standard normal."""

    def random_tangent(self, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        """Random tangent vector, i.i.d. normal entries times ``scale``."""
        return scale * rng.standard_normal(self.dim)
