"""The ROV on a sloped seabed (config/scenarios/rov_landing.yaml, issue 30): the BlueROV2 Heavy in fresh water
(0.981 N heavy) on a seabed sloped by 10 deg, headless (the Python path: the fast path refuses a contact world).

- the shipped scenario: thrusters off (the controller's idle_until: a command of exactly zero) it sinks, lands,
  stays (mu 0.5 > tan 10 deg) and, once the law takes over at 10 s, takes off to its reference 0.5 m up;
- placed flush on the slope: with mu 0.5 it does not move along the slope; with mu 0.05 (< tan 10 deg) it slides
  down it as the closed form of the one-dimensional slide says. Along the slope (the body's y axis) the vehicle
  has its mass m plus the added mass Y_vdot, and only quadratic damping (Y_v|v|; its linear Y_v is 0), so

      (m + m_a) dv/dt = F - d v|v|,   F = (W - B)(sin theta - mu cos theta)
      v(t) = v_t tanh(t / T),  s(t) = v_t T ln cosh(t / T),  v_t = sqrt(F / d),  T = (m + m_a) / sqrt(F d)

  with W - B = (m - rho V) g: at the start (v = 0, no damping) the acceleration is g_eff (sin theta - mu cos
  theta) (m / (m + m_a)), g_eff = g (1 - rho V / m) the gravity the buoyancy leaves; with the added mass off
  (added_mass_scale 0) exactly g_eff (sin theta - mu cos theta). The numbers are the URDF's (von Benzon et al.
  2022, bluerov2_heavy.urdf.xacro), written here, not read from the model.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbs_ros.headless import run_scenario

THETA = math.radians(10.0)
N = np.array([0.0, math.sin(THETA), math.cos(THETA)])  # the seabed's normal (config/worlds/sloped_seabed.yaml)
DOWN = np.array([0.0, math.cos(THETA), -math.sin(THETA)])  # down the slope
G, M, RHO, V = 9.81, 13.5, 1000.0, 0.0134  # bluerov2_heavy.urdf.xacro, water_density 1000
M_A, D_Q = 7.12, 217.0  # -Y_vdot [kg], -Y_v|v| [N s^2/m^2] (-Y_v = 0)
HALF_H = 0.254 / 2  # the hull box's half height
SLIPPERY = "config/worlds/sloped_seabed_slippery.yaml"


def flush(gap: float = 1e-4) -> dict:
    """Overrides that place the vehicle with its hull's bottom face parallel to the seabed, ``gap`` above it, at
    rest (the seabed passes through (0, 0, -10))."""
    c = np.array([0.0, 0.0, -10.0]) + N * (HALF_H + gap)
    return {"robots[0].initial.position": c.tolist(), "robots[0].initial.rpy": [-THETA, 0.0, 0.0]}


def along_slope(rec) -> np.ndarray:
    return (rec.q[:, :3] - rec.q[0, :3]) @ DOWN


def test_the_shipped_scenario_lands_stays_and_takes_off():
    run = run_scenario("rov_landing")
    assert run.fault is None, run.fault
    rec = run.robots["rov"]
    t = rec.t
    idle = t < 10.0
    # thrusters off: the law's command is exactly zero until idle_until, and not after it
    assert not rec.tau[idle].any() and not rec.tau_applied[idle].any()
    assert np.abs(rec.tau[~idle]).max() > 1.0
    # landed (on the slope, rolled to it) and resting from 6 s to 10 s: no motion along or across the slope
    rest = (t >= 6.0) & idle
    p = rec.q[rest, :3]
    assert np.abs(p - p[0]).max() < 1e-9, np.abs(p - p[0]).max()
    roll = 2.0 * np.arcsin(-rec.q[rest, 3])
    # flush on the slope: each contact point its own distance (10.000 deg; 9.900 deg while Coal's patch gave every
    # corner the deepest one's and held the tilted hull face within the margin)
    assert abs(roll[0] - THETA) < math.radians(0.005), math.degrees(roll[0])
    assert rec.contact_work[-1] < 0.0  # the landing dissipated
    # took off: 0.5 m above the start and level at the end (computed torque, kp 4: within 2 cm, 1 deg)
    assert abs(rec.q[-1, 2] - (-9.29)) < 0.02, rec.q[-1, :3]
    assert abs(rec.q[-1, 3]) < math.sin(math.radians(0.5)), rec.q[-1, 3:7]


def test_flush_on_the_slope_it_stays_where_mu_is_above_tan_theta():
    assert 0.5 > math.tan(THETA)
    run = run_scenario("rov_landing", duration=2.0, overrides=flush())
    assert run.fault is None, run.fault
    rec = run.robots["rov"]
    s = along_slope(rec)
    settled = rec.t >= 0.2
    assert np.abs(s[settled] - s[settled][0]).max() < 1e-9, np.abs(s[settled] - s[settled][0]).max()


def slide(overrides, duration):
    run = run_scenario("rov_landing", duration=duration,
                       overrides={**flush(), "robots[0].dynamics.world": SLIPPERY, **overrides})
    assert run.fault is None, run.fault
    rec = run.robots["rov"]
    return rec.t, along_slope(rec)


@pytest.mark.parametrize("added_mass", [1.0, 0.0], ids=["with added mass", "added mass off"])
def test_flush_on_the_slope_it_slides_as_the_closed_form_where_mu_is_below_tan_theta(added_mass):
    mu = 0.05
    assert mu < math.tan(THETA)
    t, s = slide({"robots[0].dynamics.added_mass_scale": added_mass}, 4.0)
    g_eff = G * (1.0 - RHO * V / M)
    F = M * g_eff * (math.sin(THETA) - mu * math.cos(THETA))
    mass = M + added_mass * M_A
    v_t, T = math.sqrt(F / D_Q), mass / math.sqrt(F * D_Q)
    t0 = 0.0  # it lands in its first step (the 0.1 mm gap within the world's 1 mm margin closes in it)
    k = t >= t0
    closed = v_t * T * np.log(np.cosh((t[k] - t0) / T))
    moved = s[k] - s[k][0]
    assert moved[-1] > 0.02  # it slides: 2 cm and more in 4 s
    assert np.abs(moved - closed).max() < 0.01 * closed[-1], (moved[-1], closed[-1])
    # the initial acceleration: g_eff (sin theta - mu cos theta) m / (m + m_a), from the half second after the
    # landing (s = s0 + v0 t + a t^2 / 2 while the damping, d v^2 ~ 1e-3 F, does not yet act): the 0.1 mm drop
    # onto the slope takes sqrt(2e-4 / g_eff) = 0.05 s, falling straight down, 0.1 mm tan(theta) along the slope
    early = ((t[k] - t0) >= 0.1) & ((t[k] - t0) <= 0.6)
    a = np.polyfit(t[k][early] - t0, moved[early], 2)[0] * 2.0
    expected = g_eff * (math.sin(THETA) - mu * math.cos(THETA)) * M / mass
    # within 3 %: the damping, d v^2 at 0.6 s (v ~ a t = 3.5 mm/s), is already 2 % of F (5.789e-3 against 5.919e-3
    # with the added mass once each contact point has its own distance; 5.878e-3 while the patch was held flush)
    assert abs(a - expected) < 0.03 * expected, (a, expected)
