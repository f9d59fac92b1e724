"""R^n under addition: q = x, xi = x (abelian: Ad = dexp = dexp_inv = I, ad = ad~ = 0)."""

from __future__ import annotations

import functools

import numpy as np

from mbs_ros.dynamics.lie._base import LieGroup, _readonly


class RnGroup(LieGroup):
    """R^n. as_matrix is the (n+1)x(n+1) translation [[I, x], [0, 1]]. For n <= 3 the group is the
    translation subgroup of SE(3) along the first n axes (H = first n columns of I6) and pose_matrix
    pads x with zeros; for n > 3 (joint spaces) H is None and pose_matrix raises ValueError."""

    def __init__(self, n: int):
        n = int(n)
        if n < 1:
            raise ValueError(f"Rn needs n >= 1, got {n}")
        self.n = self.nq = self.dim = n
        self.name = f"r{n}"
        self.matrix_dim = n + 1
        self.H = _readonly(np.eye(6)[:, :n]) if n <= 3 else None
        self._eye = _readonly(np.eye(n))

    def identity(self):
        return np.zeros(self.n)

    def compose(self, a, b):
        return np.add(a, b, dtype=float)

    def inverse(self, a):
        return np.negative(a, dtype=float)

    def normalize(self, q):
        return np.array(q, dtype=float)

    def exp(self, xi):
        return np.array(xi, dtype=float)

    def log(self, q):
        return np.array(q, dtype=float)

    def integrate(self, q, xi):
        return np.add(q, xi, dtype=float)

    def as_matrix(self, q):
        T = np.eye(self.n + 1)
        T[: self.n, self.n] = q
        return T

    def from_matrix(self, T):
        return np.array(np.asarray(T, dtype=float)[: self.n, self.n])

    def pose_matrix(self, q):
        if self.n > 3:
            raise ValueError(f"R^{self.n} has no physical pose")
        T = np.eye(4)
        T[: self.n, 3] = q
        return T

    def hat(self, xi):
        X = np.zeros((self.n + 1, self.n + 1))
        X[: self.n, self.n] = xi
        return X

    def vee(self, X):
        return np.array(np.asarray(X, dtype=float)[: self.n, self.n])

    def adjoint(self, q):
        return np.eye(self.n)

    def ad(self, xi):
        return np.zeros((self.n, self.n))

    def ad_tilde(self, p):
        return np.zeros((self.n, self.n))

    def dexp(self, xi):
        return np.eye(self.n)

    def dexp_inv(self, xi):
        return np.eye(self.n)

    def random(self, rng):
        return rng.standard_normal(self.n)


@functools.lru_cache(maxsize=None)
def Rn(n: int) -> RnGroup:
    """The (cached) R^n group instance."""
    return RnGroup(n)
