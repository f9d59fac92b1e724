"""Reference: a rigid body about a fixed point in ZYX Euler angles, by Lagrange's equations (seed 004 §2, eq. 24).

Independent of the Lie-group code on purpose (no exp, no ad, no quasi-velocities): the state is
``η = (roll φ, pitch θ, yaw ψ)`` and ``η̇``, ``R = Rz(ψ) Ry(θ) Rx(φ)``, the body angular velocity is ``ω = E(η) η̇``
with ``det E = cos θ``, and

    d/dt ∂T/∂η̇ − ∂T/∂η + ∂V/∂η = Eᵀ τ_body,   T = ½ ωᵀ J_o ω,   V = −m gᵀ R c.

This is the "Euler-angle Lagrange form" the paper replaces; it is singular at θ = ±π/2 (gimbal lock).
"""
from __future__ import annotations

import numpy as np

__all__ = ["rotation", "rotation_partials", "angles", "omega_map", "omega_map_partials", "EulerZYXBody"]


def _rx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _ry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _drx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[0.0, 0.0, 0.0], [0.0, -s, -c], [0.0, c, -s]])


def _dry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[-s, 0.0, c], [0.0, 0.0, 0.0], [-c, 0.0, -s]])


def _drz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[-s, -c, 0.0], [c, -s, 0.0], [0.0, 0.0, 0.0]])


def rotation(eta) -> np.ndarray:
    """R = Rz(ψ) Ry(θ) Rx(φ) for η = (φ, θ, ψ)."""
    phi, theta, psi = eta
    return _rz(psi) @ _ry(theta) @ _rx(phi)


def rotation_partials(eta) -> tuple:
    """∂R/∂φ, ∂R/∂θ, ∂R/∂ψ."""
    phi, theta, psi = eta
    Rx, Ry, Rz = _rx(phi), _ry(theta), _rz(psi)
    return Rz @ Ry @ _drx(phi), Rz @ _dry(theta) @ Rx, _drz(psi) @ Ry @ Rx


def angles(R) -> np.ndarray:
    """η = (φ, θ, ψ) with rotation(η) = R, θ in [−π/2, π/2] (away from θ = ±π/2)."""
    R = np.asarray(R, dtype=float)
    return np.array([np.arctan2(R[2, 1], R[2, 2]), np.arcsin(np.clip(-R[2, 0], -1.0, 1.0)),
                     np.arctan2(R[1, 0], R[0, 0])])


def omega_map(eta) -> np.ndarray:
    """E(η) with body angular velocity ω = E(η) η̇ (ZYX); det E = cos θ."""
    phi, theta, _ = eta
    cf, sf, ct, st = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta)
    return np.array([[1.0, 0.0, -st], [0.0, cf, sf * ct], [0.0, -sf, cf * ct]])


def omega_map_partials(eta):
    """∂E/∂φ, ∂E/∂θ, ∂E/∂ψ."""
    phi, theta, _ = eta
    cf, sf, ct, st = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta)
    dphi = np.array([[0.0, 0.0, 0.0], [0.0, -sf, cf * ct], [0.0, -cf, -sf * ct]])
    dtheta = np.array([[0.0, 0.0, -ct], [0.0, 0.0, -sf * st], [0.0, 0.0, -cf * st]])
    return dphi, dtheta, np.zeros((3, 3))


class EulerZYXBody:
    """Rigid body rotating about its origin (fixed in the world), c.o.m. ``com``, inertia ``inertia`` about the c.o.m.."""

    def __init__(self, mass, inertia, com, gravity=(0.0, 0.0, -9.81)):
        self.mass = float(mass)
        self.com = np.asarray(com, dtype=float)
        self.gravity = np.asarray(gravity, dtype=float)
        c = self.com
        c_hat = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
        self.J_o = np.asarray(inertia, dtype=float) - self.mass * c_hat @ c_hat  # about the fixed point

    def rhs(self, t, x, torque_body):
        """ẋ for x = (η, η̇); ``torque_body(t, R, ω)`` is the applied body-frame torque."""
        eta, eta_d = x[:3], x[3:]
        E = omega_map(eta)
        dE = omega_map_partials(eta)
        E_dot = sum(d * r for d, r in zip(dE, eta_d))
        w = E @ eta_d
        Jw = self.J_o @ w
        # ∂T/∂η_k = ωᵀ J ∂E/∂η_k η̇ ;  d/dt(Eᵀ J ω) = Ėᵀ J ω + Eᵀ J (E η̈ + Ė η̇)
        dT_deta = np.array([Jw @ (d @ eta_d) for d in dE])
        dR = rotation_partials(eta)
        dV_deta = np.array([-self.mass * self.gravity @ (d @ self.com) for d in dR])
        R = rotation(eta)
        tau = np.asarray(torque_body(t, R, w), dtype=float)
        M = E.T @ self.J_o @ E
        rhs = E.T @ tau - E_dot.T @ Jw - E.T @ self.J_o @ (E_dot @ eta_d) + dT_deta - dV_deta
        return np.concatenate([eta_d, np.linalg.solve(M, rhs)])

    def energy(self, x) -> float:
        """T + V."""
        eta, eta_d = x[:3], x[3:]
        w = omega_map(eta) @ eta_d
        return 0.5 * w @ self.J_o @ w - self.mass * self.gravity @ (rotation(eta) @ self.com)
