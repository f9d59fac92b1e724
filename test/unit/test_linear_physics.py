"""Physics of the linear models (issue 20): the hanging balloon chain's modal frequencies against an independent
derivation (Pinocchio's aba differentiated by central differences written here) and a closed form (the double
pendulum), and the intermediate axis theorem from ``Model.linearize`` of a free body in torque-free spin.

The balloon table: ``python -m mbs_ros.validation modes``.
"""
import warnings

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms.equilibrium import find_equilibrium
from mbs_ros.validation import balloon as bl
from mbs_ros.validation import modes

K = 100.0


def _oscillation_frequencies(A, floor=1e-4):
    lam = np.linalg.eigvals(A)
    return np.sort(np.abs(lam[lam.imag > floor])), lam


def test_balloon_chain_modes_equal_pinocchios():
    """Ours: the equilibrium, then ``Model.linearize`` with M⁻¹ ∂τ/∂q of the world-fixed buoyancy and the spring.
    Reference: A from Pinocchio's aba (buoyancy as fext turning with the balloon, spring as joint force) by central
    differences along pin.integrate; the eigenvalues do not depend on the chart at an equilibrium with v = 0."""
    pin = pytest.importorskip("pinocchio")
    m = bl.build_model()
    nv = m.nv
    q0 = m.neutral()
    q0[8], q0[9] = 0.3, -0.2
    q0 = m.integrate(q0, np.array([0, 0, 0, 0.15, 0, -0.1, 0.05, 0, 0]))

    def spring(q, v):
        f = np.zeros(nv)
        f[6] = -K * q[7]
        return f

    eq = find_equilibrium(m, q0, free_q=[3, 5, 6, 7, 8], wrench_world=np.r_[bl.BUOYANCY, 0, 0, 0], forces=spring)
    assert eq.success, eq.message
    A = np.array(m.linearize(eq.q, eq.v, eq.tau).A)
    A[nv:, :nv] += np.linalg.solve(m.mass_matrix(eq.q), eq.dtau_dq)
    ours, lam = _oscillation_frequencies(A)
    np.testing.assert_allclose(eq.linearize(m).A, A, rtol=1e-12, atol=1e-12)  # the method adds the same
    with pytest.raises(ValueError, match="dt"):
        eq.linearize(m, dt=0.01)

    pm = bl.pinocchio_model()
    data = pm.createData()

    def aba(q, v):
        R = pin.Quaternion(q[6], q[3], q[4], q[5]).normalized().matrix()
        fext = [pin.Force.Zero() for _ in range(pm.njoints)]
        fext[1] = pin.Force(R.T @ bl.BUOYANCY, np.zeros(3))
        tau = np.zeros(nv)
        tau[6] = -K * q[7]
        return np.array(pin.aba(pm, data, q, v, tau, fext))

    h, z = 1e-6, np.zeros(nv)
    A_ref = np.zeros((2 * nv, 2 * nv))
    A_ref[:nv, nv:] = np.eye(nv)
    for i, e in enumerate(np.eye(nv) * h):
        A_ref[nv:, i] = (aba(pin.integrate(pm, eq.q, e), z) - aba(pin.integrate(pm, eq.q, -e), z)) / (2 * h)
        A_ref[nv:, nv + i] = (aba(eq.q, e) - aba(eq.q, -e)) / (2 * h)
    ref, _ = _oscillation_frequencies(A_ref)
    # 9 DOF: base position (3) and yaw about the vertical through B are free (λ = 0, 8 eigenvalues), 5 modes
    assert ours.size == ref.size == 5
    assert np.sum(np.abs(lam) < 1e-4) == 8
    assert np.abs(lam.real).max() < 1e-8  # no damping, no instability
    np.testing.assert_allclose(ours, ref, rtol=1e-7)


def test_double_pendulum_frequencies_equal_the_closed_form():
    """Equal point masses m, lengths l, hanging: with absolute angles M = m l² [[2, 1], [1, 1]], K = m g l diag(2, 1)
    (by hand from T and V), det(K − ω² M) = 0 ⇒ ω⁴ − 4(g/l) ω² + 2(g/l)² = 0 ⇒ ω² = (2 ∓ √2) g/l."""
    mass, l, g = 1.3, 0.7, 9.81
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = Model.from_urdf(modes.double_pendulum_urdf(mass, l), base="fixed", gravity=(0.0, 0.0, -g))
    q = m.neutral()
    w, _ = _oscillation_frequencies(m.linearize(q, np.zeros(2), m.gravity_forces(q)).A)
    np.testing.assert_allclose(w, np.sqrt([(2 - np.sqrt(2)) * g / l, (2 + np.sqrt(2)) * g / l]), rtol=1e-8)


def test_modes_study_reports_the_table():
    r = modes.run(use_reference=False)
    assert r["equilibrium"]["success"] and len(r["ours"]) == 5
    text = modes._report(r)
    assert "ω ours" in text and "closed form" in text


# ------------------------------------------------------------------------------------ intermediate axis
I1, I2, I3 = 2.0, 3.0, 4.0  # principal moments, body axes x, y, z (a real body: I1 + I2 ≥ I3)
OMEGA = 1.5


def _euler_closed_form(axis):
    """Euler's equations I ω̇ = (Iω) × ω about a steady spin Ω e_i: for the other two axes j, k,
    I_j δω̇_j = (I_k − I_i) Ω δω_k, I_k δω̇_k = (I_i − I_j) Ω δω_j ⇒ λ² = Ω² (I_k − I_i)(I_i − I_j) / (I_j I_k):
    negative (a frequency) when I_i is the largest or the smallest moment, positive (a growth rate) when it is
    the intermediate one."""
    I = [I1, I2, I3]
    i = axis
    j, k = [n for n in range(3) if n != i]
    return OMEGA ** 2 * (I[k] - I[i]) * (I[i] - I[j]) / (I[j] * I[k])


@pytest.mark.parametrize("base", ["se3", "so3"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_intermediate_axis_theorem(base, axis):
    m = Model.rigid_body(base, mass=2.0, inertia=np.diag([I1, I2, I3]), gravity=(0.0, 0.0, 0.0))
    nb = 3 if base == "se3" else 0
    v = np.zeros(m.nv)
    v[nb + axis] = OMEGA
    lin = m.linearize(m.neutral(), v, np.zeros(m.nv))
    lam = np.linalg.eigvals(lin.A)
    lam2 = _euler_closed_form(axis)
    if axis == 1:  # intermediate: unstable, one real positive eigenvalue Ω √((I2 − I1)(I3 − I2)/(I1 I3))
        assert lam2 > 0
        assert lam.real.max() == pytest.approx(np.sqrt(lam2), rel=1e-7)
        assert lam.real.max() == pytest.approx(OMEGA * np.sqrt((I2 - I1) * (I3 - I2) / (I1 * I3)), rel=1e-7)
    else:  # largest or smallest: marginally stable, ±i Ω √((I_i − I_j)(I_i − I_k)/(I_j I_k))
        assert lam2 < 0
        assert np.abs(lam.real).max() < 1e-7
        w = np.sqrt(-lam2)
        assert np.min(np.abs(lam - 1j * w)) < 1e-7 * OMEGA
        # the other eigenvalues are 0 and ±iΩ (the attitude rotating with the spin; linear velocity on se3)
        others = lam[np.abs(np.abs(lam) - w) > 1e-6]
        assert np.all(np.minimum(np.abs(others), np.abs(np.abs(others) - OMEGA)) < 1e-6)
