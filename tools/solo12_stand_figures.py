"""``python -m tools.solo12_stand_figures BAG``: the figures of the quadruped's landing, stance and push
(config/scenarios/solo12_stand.yaml; docs/contact.md) from a recording of the run over ROS, e.g. the README's
``python -m mbs_ros.bringup solo12_stand --record BAG``:

1. the landing: the first stamp with a contact force, the peak of the sum of the feet's normal forces (world z,
   ``<ns>/contacts/<link>`` at ``contacts_rate``: the sum over each sample's physics step, so a 100 Hz sample
   shows one step's force in ten) and that peak in m g;
2. the stance: the sum of the feet's world-z forces averaged over the second before the push, against m g from
   the URDF's masses (g = 9.81 m/s²), relative;
3. the push (``disturbance``: 10 N along y for 0.1 s at 2 s): the base height before it (its mean over that same
   second), its largest deviation after it, and at the end; the base's largest displacement along y and at the end.

Exit 0 when the file has them (whatever their values: this prints, the tests assert), 2 otherwise.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

PUSH_S, BEFORE_S = 2.0, 1.0  # the scenario's disturbance start; the stance window before it


def figures(bag: Path, ns: str = "/solo") -> dict:
    """The figures of the module docstring from ``bag`` (robot namespace ``ns``), as a dict of floats."""
    from mbs_ros.analysis.contacts import contact_forces, object_paths
    from mbs_ros.analysis.reader import load

    rec = load(bag, progress="never")
    contacts = contact_forces(rec)
    rc = contacts.get(ns)
    if rc is None or not rc.links or rc.weight is None:
        raise ValueError(f"{bag}: no contact topics of {ns} with its robot_description (record contacts/* and "
                         "robot_description)")
    objects = object_paths(rec, contacts)
    links = [s for s in rc.links.values() if s.frame not in objects]  # the robot's links, not a free object's
    if not links or any(s.force_world is None for s in links):
        raise ValueError(f"{bag}: no robot link's contact force in world axes (record /tf, or odom and "
                         "joint_states)")
    t0 = rec.t0()
    stamps = np.unique(np.concatenate([s.stamps for s in links]))
    total = np.zeros(len(stamps))
    for s in links:  # a link's sample counts at its own stamp (the links share the contacts_rate grid)
        total[np.searchsorted(stamps, s.stamps)] += s.force_world[:, 2]
    t = (stamps - t0) * 1e-9
    stance = (t >= PUSH_S - BEFORE_S) & (t < PUSH_S)
    if not stance.any() or ns not in rec.odom:
        raise ValueError(f"{bag}: the run ends before {PUSH_S} s, or has no {ns}/odom")
    touched = np.flatnonzero(total > 0.0)
    z = rec.odom[ns][:, 2]
    y = rec.odom[ns][:, 1]
    t_odom = (rec.odom_stamps[ns] - t0) * 1e-9
    before = (t_odom >= PUSH_S - BEFORE_S) & (t_odom < PUSH_S)
    after = t_odom >= PUSH_S
    z_before = float(np.mean(z[before]))
    return {
        "m_g": rc.weight,
        "first_contact_s": float(t[touched[0]]) if len(touched) else float("nan"),
        "landing_peak_N": float(total.max()),
        "landing_peak_mg": float(total.max() / rc.weight),
        "stance_sum_N": float(np.mean(total[stance])),
        "stance_relative": float(np.mean(total[stance]) / rc.weight - 1.0),
        "base_height_before_m": z_before,
        "base_height_max_dev_after_m": float(np.max(np.abs(z[after] - z_before))) if after.any() else float("nan"),
        "base_height_end_dev_m": float(z[-1] - z_before),
        "base_y_drift_m": float(np.max(np.abs(y[t_odom >= 0.0] - y[0]))),
        "base_y_end_m": float(y[-1] - y[0]),
        "end_s": float(t_odom[-1]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.solo12_stand_figures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bag", type=Path)
    parser.add_argument("--ns", default="/solo", help="the robot's namespace (default /solo)")
    args = parser.parse_args(argv)
    from mbs_ros.analysis.reader import PlotError

    try:
        f = figures(args.bag, args.ns)
    except (OSError, ValueError, PlotError) as e:
        print(f"solo12_stand_figures: {e}", file=sys.stderr)
        return 2
    print(f"m g {f['m_g']:.4f} N; first contact at {f['first_contact_s']:.3f} s; landing peak of the summed normal "
          f"forces {f['landing_peak_N']:.1f} N ({f['landing_peak_mg']:.2f} m g)")
    print(f"stance ({PUSH_S - BEFORE_S:g}-{PUSH_S:g} s): sum {f['stance_sum_N']:.4f} N, "
          f"{100 * f['stance_relative']:+.4f} % of m g")
    print(f"push at {PUSH_S:g} s: base height before {f['base_height_before_m'] * 1e3:.2f} mm, largest deviation after "
          f"{f['base_height_max_dev_after_m'] * 1e3:.2f} mm, at the end ({f['end_s']:.2f} s) "
          f"{f['base_height_end_dev_m'] * 1e3:+.3f} mm; along y: largest {f['base_y_drift_m'] * 1e3:.2f} mm, at the end "
          f"{f['base_y_end_m'] * 1e3:+.3f} mm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
