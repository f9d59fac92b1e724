"""The shipped solo12_stand scenario headless (the same numbers as the ROS lockstep run: test_headless_identity):
Solo12 dropped onto the ground lands, stands under joint PD + gravity compensation with the summed normal force
equal to its weight m g (its URDF's total mass, 2.5 kg) within 1 %, and after the lateral push at 2 s stands
again at the height it stood at, within a millimetre; its base never drops below a standing bound, and nothing
was saturated. A slow test (a contact step per millisecond in Python: ~1 min)."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.packages import resolve_uri

SOLO12 = "package://example-robot-data/robots/solo_description/robots/solo12.urdf"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(resolve_uri(SOLO12).path is None, reason="example-robot-data is not installed")]
G = 9.81
MASS = 2.50000279  # the URDF's links summed (Solo12 of example-robot-data)


@pytest.fixture(scope="module")
def run():
    from mbs_ros.headless.run import run_scenario

    return run_scenario("solo12_stand")


def test_it_lands_and_stands_on_its_weight(run):
    assert run.fault is None and run.duration == pytest.approx(4.0)
    rec = run.robots["solo"]
    t, z, f = rec.t, rec.q[:, 2], rec.contact_force
    assert not rec.saturated.any() and rec.control_errors == 0
    # in the air until the feet reach the ground: their centres start 7.7 cm above it (base at 0.3 m), ~6 cm of fall
    first = t[np.flatnonzero(f[:, 2] > 0.0)[0]]
    assert 0.09 < first < 0.13, first
    assert not f[t < first].any()
    landing = f[:, 2].max()
    assert landing > 2 * MASS * G  # an impact, not a touch
    rest = (t >= 1.5) & (t < 2.0)
    assert np.abs(f[rest, 2] - MASS * G).max() < 0.01 * MASS * G
    assert np.abs(f[rest, :2]).max() < 0.01 * MASS * G  # no net tangential force at rest
    assert z[rest].min() > 0.2 and np.ptp(z[rest]) < 1e-4  # standing still, the base above 0.2 m


def test_after_the_push_it_stands_again_at_its_height(run):
    rec = run.robots["solo"]
    t, q, f = rec.t, rec.q, rec.contact_force
    before = q[np.searchsorted(t, 2.0) - 1]
    push = (t >= 2.0) & (t < 2.1)
    assert f[push, 1].min() < -5.0  # the feet's friction holds against the 10 N push along +y
    late = t >= 3.5
    assert np.abs(q[late, 2] - before[2]).max() < 1e-3
    assert np.abs(f[late, 2] - MASS * G).max() < 0.01 * MASS * G
    assert q[t >= 2.0, 2].min() > 0.2


def test_standing_the_solver_stops_once_it_stalls_within_its_tolerance(monkeypatch):
    """Each foot's patch points (up to four, at least 5 mm apart, on its rounded sole) are redundant: Gauss–Seidel moves the split of a foot's impulse among them
    about for ever (its 1e-12 relative change never comes) without changing the constraint velocities; it stops
    once a chunk of sweeps no longer halves the residual and the residual is within the solver's tolerance. The
    last 300 solves of 1.2 s (standing still): every one converged, the sweeps far below the 100 allowed."""
    from mbs_ros.dynamics.contact import step as contact_step
    from mbs_ros.dynamics.contact.solver import RESIDUAL_TOLERANCE
    from mbs_ros.headless.run import run_scenario

    solves, original = [], contact_step.solve

    def recording(G, g, mu, n_contacts, **kw):
        result = original(G, g, mu, n_contacts, **kw)
        if n_contacts >= 4:  # the contact problem of the four feet, not the post-stabilisation's normal rows (0)
            solves.append((result, float(np.abs(g).max()), kw.get("max_sweeps")))
        return result

    monkeypatch.setattr(contact_step, "solve", recording)
    run = run_scenario("solo12_stand", duration=1.2)
    assert run.fault is None
    last = solves[-300:]
    assert len(last) == 300 and all(max_sweeps == 100 for _, _, max_sweeps in last)
    assert all(r.converged and r.residual <= RESIDUAL_TOLERANCE * g_max + 1e-15 for r, g_max, _ in last)
    assert max(r.sweeps for r, _, _ in last) <= 30
