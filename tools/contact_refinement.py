"""The contact step under refinement: a solid sphere rolling down a 25° incline for 0.5 s on SE(3) and on
SO(3)×R³, at h = 4, 2, 1, 0.5 ms: the deepest penetration Coal sees before a step, and the energy residual
``E(T) − E(0) − W`` for two accountings of the contact's work W: the impulses' kinetic work (``StepInfo.power``)
and the Simulator's port (per step the energy the step removed, ``min(0, ΔE)`` here where no command acts), whose
residual is what the step gained. ``python -m tools.contact_refinement``."""
from __future__ import annotations

import math

import numpy as np
from scipy.spatial.transform import Rotation

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.geometry import find_contacts, halfspace, sphere
from mbs_ros.dynamics.contact.step import step

G = 9.81


def run(base, h, T=0.5, r=0.1, m=1.0, theta=math.radians(25.0), mu=0.5):
    """(deepest penetration, residual against the impulses' work, residual against the port, E(T) − E(0)) of
    the rolling sphere."""
    model = Model.rigid_body(base, m, np.eye(3) * 0.4 * m * r * r, gravity=(0.0, 0.0, -G))
    n = np.array([0.0, -math.sin(theta), math.cos(theta)])
    q = np.concatenate([r * n, Rotation.from_rotvec([theta, 0.0, 0.0]).as_quat()])
    shapes = [halfspace("slope", n, 0.0, mu), sphere("ball", r, (0, 0), mu=mu)]
    v, info, deepest, work, port = np.zeros(6), None, 0.0, 0.0, 0.0

    def energy(q, v):
        return model.kinetic_energy(q, v) + model.potential_energy(q)

    e0 = e = energy(q, v)
    for _ in range(int(round(T / h))):
        margin = 1e-3 + h * float(np.linalg.norm(v))
        contacts = find_contacts([alg.body_placements(model, q)], shapes, margin=margin)
        deepest = max(deepest, max((-c.distance for c in contacts), default=0.0))
        (q,), (v,), info = step([model], [q], [v], [np.zeros(6)], h, contacts, warm=info, margin=margin)
        work += h * info.power
        e1 = energy(q, v)
        port += min(0.0, e1 - e)
        e = e1
    return deepest, e - e0 - work, e - e0 - port, e - e0


def main():
    for base in ("se3", "so3xr3"):
        previous = None
        for h in (4e-3, 2e-3, 1e-3, 5e-4):
            deepest, residual, port_residual, change = run(base, h)
            ratios = "" if previous is None else \
                f"  (halving h: penetration /{previous[0] / max(deepest, 1e-300):.2f}, residual /{previous[1] / residual:.2f})"
            print(f"{base:7s} h {h * 1e3:.1f} ms: penetration {deepest:.3e} m, residual vs impulse work "
                  f"{residual:+.3e} J, vs the port {port_residual:+.3e} J, E(T) - E(0) {change:+.3e} J{ratios}")
            previous = (deepest, residual)


if __name__ == "__main__":
    main()
