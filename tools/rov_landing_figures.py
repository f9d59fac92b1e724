"""``python -m tools.rov_landing_figures [--out DIR]``: the figures of the ROV on a sloped seabed
(config/scenarios/rov_landing.yaml; docs/contact.md, The ROV on a sloped seabed), from headless runs:

1. the shipped scenario (mu 0.5, landing from level, thrusters off until 10 s, then the take-off): the motion along
   the slope while it rests;
2. placed flush on the slope for 4 s, mu 0.5 and mu 0.05 (config/worlds/sloped_seabed_slippery.yaml), with and
   without the added mass: the distance slid against the closed form of test/unit/test_rov_landing.py
   (``s = v_t T ln cosh(t/T)``) and the initial acceleration against ``g_eff (sin theta - mu cos theta) m/(m+m_a)``.

Prints a table; writes ``rov_landing.png`` into ``--out`` (default /tmp/rov_landing) when matplotlib is there.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from mbs_ros.headless import run_scenario

THETA = math.radians(10.0)
N = np.array([0.0, math.sin(THETA), math.cos(THETA)])
DOWN = np.array([0.0, math.cos(THETA), -math.sin(THETA)])
G, M, RHO, V, M_A, D_Q = 9.81, 13.5, 1000.0, 0.0134, 7.12, 217.0  # bluerov2_heavy.urdf.xacro, fresh water
SLIPPERY = "config/worlds/sloped_seabed_slippery.yaml"


def flush(gap: float = 1e-4) -> dict:
    c = np.array([0.0, 0.0, -10.0]) + N * (0.127 + gap)
    return {"robots[0].initial.position": c.tolist(), "robots[0].initial.rpy": [-THETA, 0.0, 0.0]}


def closed_form(t, mu, added_mass):
    F = (M - RHO * V) * G * (math.sin(THETA) - mu * math.cos(THETA))
    if F <= 0.0:
        return np.zeros_like(t), 0.0
    mass = M + added_mass * M_A
    v_t, T = math.sqrt(F / D_Q), mass / math.sqrt(F * D_Q)
    return v_t * T * np.log(np.cosh(t / T)), F / mass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/rov_landing"))
    args = parser.parse_args(argv)
    shipped = run_scenario("rov_landing")
    rec = shipped.robots["rov"]
    rest = (rec.t >= 6.0) & (rec.t < 10.0)
    s = (rec.q[rest, :3] - rec.q[rest][0, :3]) @ DOWN
    roll = math.degrees(2.0 * math.asin(-rec.q[rest][0, 3]))
    print(f"shipped (mu 0.5, from level): rests rolled {roll:.3f} deg at y = {rec.q[rest][0, 1] * 1e3:.2f} mm; "
          f"largest motion along the slope from 6 s to 10 s {np.abs(s).max():.2e} m; at 16 s z = "
          f"{rec.q[-1, 2]:.4f} m (reference -9.29)")
    rows, curves = [], []
    for mu, world in ((0.5, None), (0.05, SLIPPERY)):
        for am in (1.0, 0.0):
            ov = {**flush(), "robots[0].dynamics.added_mass_scale": am}
            if world:
                ov["robots[0].dynamics.world"] = world
            r = run_scenario("rov_landing", duration=4.0, overrides=ov).robots["rov"]
            t, moved = r.t, (r.q[:, :3] - r.q[0, :3]) @ DOWN
            closed, a0 = closed_form(t, mu, am)
            early = t <= 0.5
            a = 2.0 * np.polyfit(t[early], moved[early], 2)[0]
            rows.append((mu, am, moved[-1], closed[-1], np.abs(moved - closed).max(), a, a0))
            curves.append((f"mu {mu:g}, added mass x{am:g}", t, moved, closed))
    print(f"flush on the slope (tan 10 deg = {math.tan(THETA):.4f}), 4 s:")
    print("| mu | added mass | slid [m] | closed form [m] | largest difference [m] | a(0) [m/s^2] | "
          "closed form a(0) |")
    print("|---|---|---|---|---|---|---|")
    for mu, am, s4, c4, err, a, a0 in rows:
        print(f"| {mu:g} | x{am:g} | {s4:.4e} | {c4:.4e} | {err:.2e} | {a:.4e} | {a0:.4e} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for label, t, moved, closed in curves:
        line, = ax1.plot(t, moved * 1e3, label=label)
        ax1.plot(t, closed * 1e3, "--", color=line.get_color())
    ax1.set(xlabel="t [s]", ylabel="distance down the slope [mm]", title="flush on a 10 deg slope (dashed: closed form)")
    ax1.legend(fontsize=8)
    ax2.plot(rec.t, rec.q[:, 2] - rec.q[0, 2], label="z - z(0) [m]")
    ax2.axvline(10.0, color="k", lw=0.5)
    ax2.set(xlabel="t [s]", ylabel="z - z(0) [m]", title="rov_landing: land (thrusters off), rest, take off at 10 s")
    ax3 = ax2.twinx()
    ax3.plot(rec.t, (rec.q[:, :3] - rec.q[0, :3]) @ DOWN * 1e3, color="C1", label="down the slope [mm]")
    ax3.set(ylabel="down the slope [mm]")
    ax2.legend(loc="upper left", fontsize=8)
    ax3.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "rov_landing.png", dpi=110)
    print(f"wrote {args.out / 'rov_landing.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
