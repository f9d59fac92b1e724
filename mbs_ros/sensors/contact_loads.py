"""The contact loads a sensor feels: the forces of the Simulator's last contact step on the robot's bodies, as
the external wrenches of the dynamics (ROS-free).

A contact step gives impulses over the step; their mean force over the step ``F`` (world axes, at the contact
point) is what :class:`mbs_ros.dynamics.contact.report.ContactReport` reports and ``contacts/<link>`` publishes.
:class:`ContactLoads` turns them into

- ``f_ext`` (n_bodies, 6): the sum of the contact wrenches on each body of the robot (model 0), in the body's own
  frame at its origin, linear first (the ``f_ext`` of :meth:`Model.forward_dynamics` and
  :meth:`Model.joint_wrenches`);
- ``normal`` (n_bodies,): the sum of the normal components ``F·n`` of the contact forces on each body [N] (≥ 0:
  contact pushes, never pulls);

so that the acceleration the IMU and the F/T sensors are handed is ``M v̇ + C v + g = τ + τ_p + Σ Jᵀ f_ext``
(a body resting on a support: v̇ = 0) and a joint's transmitted wrench includes what its child subtree touches
(a wrist F/T sensor reads the grasp; a link resting on a support: its weight less the support force). When the
last step was no contact step (nothing within the margin), there are no contact loads (None).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from mbs_ros.dynamics.contact.report import ContactReport

__all__ = ["ContactLoads"]


class ContactLoads:
    """The contact loads on the robot of ``sim`` (a :class:`~mbs_ros.dynamics.simulation.simulator.Simulator`);
    :meth:`loads` is None when ``sim`` has no contact world or its last step was no contact step."""

    def __init__(self, sim):
        self.sim = sim
        self.report = ContactReport(sim) if sim.world is not None else None
        self._cache: Tuple[Optional[int], object] = (None, None)

    def loads(self) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """``(f_ext, normal)`` of the step that ended at ``sim.k`` (module docstring), or None."""
        sim, report = self.sim, self.report
        if report is None or not report.current():
            return None
        key = (int(sim.k), id(sim.last_contact))
        if self._cache[0] == key:
            return self._cache[1]
        forces = report.forces()
        out = None
        if forces:
            nb = sim.model.tree.nb
            f_ext, normal = np.zeros((nb, 6)), np.zeros(nb)
            poses = None
            for f in forces:
                for name, sign in ((f.link, 1.0), (f.other, -1.0)):
                    where = report.body(name)  # (model index, body index, T_body_link)
                    if where is None or where[0] != 0:
                        continue
                    if poses is None:
                        poses = sim.world.poses([sim.q] + list(sim.obj_q))[0]
                    b = where[1]
                    R, p = poses[b][:3, :3], poses[b][:3, 3]
                    F = sign * f.force
                    f_ext[b, :3] += R.T @ F
                    f_ext[b, 3:] += R.T @ np.cross(f.point - p, F)
                    normal[b] += float(f.force @ f.normal)  # F·n on either side (the other side: −F·−n)
            if poses is not None:
                out = (f_ext, normal)
        self._cache = (key, out)
        return out

    def acceleration(self, f_ext: Optional[np.ndarray]) -> np.ndarray:
        """v̇ of the current state under the last step's commands, passive loads and contact loads ``f_ext``
        (:meth:`Simulator.acceleration` when None)."""
        sim = self.sim
        if f_ext is None:
            return sim.acceleration()
        q, v, model = sim.q, sim.v, sim.model
        tau = sim.generalized_force()
        if model.passive_active:
            tau = tau + model.passive_forces(q, v)
        return model.forward_dynamics(q, v, tau, f_ext=f_ext)

    def joint_wrenches(self, a: np.ndarray, f_ext: Optional[np.ndarray]) -> np.ndarray:
        """:meth:`Simulator.joint_wrenches` with the contact loads ``f_ext`` added to the water's."""
        sim = self.sim
        if f_ext is None:
            return sim.joint_wrenches(a)
        q, v, model = sim.q, sim.v, sim.model
        water = model.body_loads(q, v)
        return model.joint_wrenches(q, v, a, f_ext=f_ext if water is None else np.asarray(water) + f_ext)
