"""``python -m tools.uvms_grasp_figures [--out DIR] [--duration S]``: the figures of the UVMS grasp and carry
(config/scenarios/uvms_grasp.yaml; docs/contact.md, The scenario uvms_grasp), from a headless run:

1. the handle lifted: the height of its lowest point above the seabed over time (the cylinder's, at its attitude:
   z of its centre − (L/2)|a_z| − r √(1 − a_z²) − seabed, a its axis), and its tilt (its axis from level): a
   handle that pivots in the jaws with one end left on the seabed is not lifted, however high its centre;
2. the carried distance: the handle's x at the end less at the start (the reference carries the vehicle 0.5 m);
3. slip between gripper and handle: the handle's position in the palm's frame (the link ``alpha_jaws``) from the
   lift to the set-down, its drift (largest distance from its value at the lift);
4. the grasp forces: the sum of the contact forces on the robot (the fingers': the handle's weight in water and
   its inertia while it is held; the squeeze forces cancel in the sum) and the fingers' commanded efforts.

Prints the figures; writes ``uvms_grasp.png`` into ``--out`` (default /tmp/uvms_grasp) when matplotlib is there.
:func:`grasp_metrics` is what test/unit/test_uvms_grasp.py asserts on.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from mbs_ros.dynamics import Model
from mbs_ros.headless import run_scenario

SEABED, R_HANDLE, L_HANDLE = -10.0, 0.015, 0.2  # config/worlds/seabed_handle.yaml
T_CLOSED, T_LIFTED, T_CARRIED, T_SET, T_OPEN = 4.0, 6.0, 10.0, 12.0, 12.5  # config/scenarios/uvms_grasp.yaml
MODEL = "config/robots/bluerov2_heavy_alpha5_gripper.yaml"


def grasp_metrics(run, model: Model | None = None) -> dict:
    """The run's figures: ``t``, ``height`` (the handle's lowest point above the seabed, per row), ``tilt`` (its
    axis from level [rad], per row), ``x`` (its centre's x), ``in_palm`` (its centre in the palm's frame, rows ×
    3), ``lifted`` (the smallest height while carried, from the end of the lift to the start of the set-down),
    ``max_tilt`` (the largest tilt then), ``carried`` (its x at the end less at the start), ``carried_lifted`` (its
    x at the start of the set-down less at the end of the lift), ``slip`` (largest drift of ``in_palm`` while
    carried from its value at the end of the lift), ``set_down`` (its height at the end), ``force`` (the summed
    contact force on the robot, rows × 3), ``held_force`` (its mean while carried), ``efforts`` (the fingers'
    commands)."""
    model = Model.from_yaml(MODEL) if model is None else model
    rec = run.robots["rov"]
    t = rec.t
    obj = np.asarray(rec.objects_q)[:, 0, :]
    # the cylinder's axis is its frame's z (rpy pitch 90 deg lays it along x); quaternion x, y, z, w
    qx, qy, qz, qw = obj[:, 3], obj[:, 4], obj[:, 5], obj[:, 6]
    a_z = np.clip(qw * qw - qx * qx - qy * qy + qz * qz, -1.0, 1.0)  # R[2, 2]
    tilt = np.arcsin(np.abs(a_z))
    height = obj[:, 2] - 0.5 * L_HANDLE * np.abs(a_z) - R_HANDLE * np.sqrt(1.0 - a_z * a_z) - SEABED
    palm = model.link_names.index("alpha_jaws")
    in_palm = np.empty((len(t), 3))
    for i, q in enumerate(rec.q):
        T = model.link_poses(q)[palm]
        in_palm[i] = T[:3, :3].T @ (obj[i, :3] - T[:3, 3])
    held = (t >= T_LIFTED) & (t <= T_CARRIED)  # lifted, carried
    i_lift, i_carried = int(np.argmax(t >= T_LIFTED)), int(np.argmax(t >= T_CARRIED))
    drift = np.linalg.norm(in_palm[held] - in_palm[i_lift], axis=1) if held.any() else np.full(1, np.nan)
    force = np.asarray(rec.contact_force)
    return {"t": t, "height": height, "tilt": tilt, "x": obj[:, 0], "in_palm": in_palm,
            "lifted": float(height[held].min()) if held.any() else float("nan"),
            "max_tilt": float(tilt[held].max()) if held.any() else float("nan"),
            "held_force": force[held].mean(axis=0) if held.any() else np.full(3, np.nan),
            "carried": float(obj[-1, 0] - obj[0, 0]), "slip": float(drift.max()),
            "carried_lifted": float(obj[i_carried, 0] - obj[i_lift, 0]),
            "set_down": float(height[-1]), "force": force,
            "efforts": np.asarray(rec.tau_applied)[:, -2:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/uvms_grasp"))
    parser.add_argument("--duration", type=float, default=None)
    args = parser.parse_args(argv)
    run = run_scenario("uvms_grasp", duration=args.duration)
    if run.fault is not None:
        print(f"fault: {run.fault}")
        return 1
    m = grasp_metrics(run)
    t, f = m["t"], m["force"]
    held = (t >= T_LIFTED) & (t <= T_CARRIED)
    print(f"uvms_grasp headless: {run.duration:.1f} s simulated in {run.wall_time:.1f} s wall")
    print(f"lifted: lowest point >= {m['lifted'] * 1e3:.1f} mm above the seabed from {T_LIFTED} s to "
          f"{T_CARRIED} s (the vehicle rose 100 mm), tilted at most {np.degrees(m['max_tilt']):.2f} deg")
    print(f"carried: {m['carried'] * 1e3:.1f} mm along x from start to end, {m['carried_lifted'] * 1e3:.1f} mm "
          f"while lifted ({T_LIFTED} s to {T_CARRIED} s; reference 500 mm)")
    print(f"slip: the handle's centre moved {m['slip'] * 1e3:.2f} mm in the palm's frame while carried")
    print(f"set down: its lowest point {m['set_down'] * 1e3:.2f} mm above the seabed at the end")
    if held.any():
        print(f"grasp force while held: net contact force on the robot z {f[held, 2].mean():.3f} N (mean; the "
              f"handle's weight in water 6.43 N), |x,y| up to {np.abs(f[held, :2]).max():.3f} N; finger efforts "
              f"{m['efforts'][held].mean(axis=0).round(3)} N")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    ax[0, 0].plot(t, m["height"] * 1e3)
    ax[0, 0].set(xlabel="t [s]", ylabel="[mm]", title="handle: lowest point above the seabed, tilt (dashed)")
    tilt_ax = ax[0, 0].twinx()
    tilt_ax.plot(t, np.degrees(m["tilt"]), "--", color="C1")
    tilt_ax.set(ylabel="tilt [deg]")
    ax[0, 1].plot(t, (m["x"] - m["x"][0]) * 1e3)
    ax[0, 1].set(xlabel="t [s]", ylabel="[mm]", title="handle: carried along x (reference 500 mm)")
    for k, name in enumerate("xyz"):
        ax[1, 0].plot(t, (m["in_palm"][:, k] - m["in_palm"][0, k]) * 1e3, label=name)
    for x in (T_LIFTED, T_SET):
        ax[1, 0].axvline(x, color="k", lw=0.5)
    ax[1, 0].set(xlabel="t [s]", ylabel="[mm]", title="handle in the palm's frame (change; slip while held)")
    ax[1, 0].legend(fontsize=8)
    for k, name in enumerate("xyz"):
        ax[1, 1].plot(t, f[:, k], label=f"contact force {name}")
    ax[1, 1].plot(t, m["efforts"][:, 0], "--", label="finger effort (left)")
    ax[1, 1].set(xlabel="t [s]", ylabel="[N]", title="contact force on the robot, finger effort")
    ax[1, 1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "uvms_grasp.png", dpi=110)
    print(f"wrote {args.out / 'uvms_grasp.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
