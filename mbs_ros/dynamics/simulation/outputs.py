"""What the simulator's current state gives (:class:`StateOutputs`, the base of
:class:`~mbs_ros.dynamics.simulation.simulator.Simulator`): the energy and momentum references, the applied force, the
acceleration, the joint wrenches and the diagnostics' flat dict. Needs, from the simulator: ``model``, ``q``,
``v``, its held commands, its counters and ``objects_energy``."""

from __future__ import annotations

from typing import Optional

import numpy as np


class StateOutputs:
    """The outputs of a :class:`~mbs_ros.dynamics.simulation.simulator.Simulator`'s current state."""

    def rebaseline(self) -> None:
        """Take the current state as the energy and momentum reference; the work counts from here."""
        model, q, v = self.model, self.q, self.v
        self.work = 0.0
        self.passive_work = 0.0  # ∫ v·τ_p (springs excluded) [J]: what the passive loads did
        self.dissipated = 0.0  # ∫ dissipated power [J]
        #: the contact and limit port's work [J] (≤ 0: friction, impacts, limit stops): per contact step the
        #: energy the step took from the scene beyond the commands' and passive loads' work, when it took some
        self.contact_work = 0.0
        self.contact_power = 0.0  # its mean power over the last step [W] (≤ 0; 0 when it was no contact step)
        self._passive_end = None
        self.kinetic_energy_ref = model.kinetic_energy(q, v)
        self.energy_ref = self.kinetic_energy_ref + model.potential_energy(q) + self.objects_energy()
        self.momentum_ref = model.spatial_momentum(q, v)
        self._p_end_valid = False

    def energy(self) -> float:
        """Kinetic plus potential energy of the current state [J]."""
        return self.model.kinetic_energy(self.q, self.v) + self.model.potential_energy(self.q)

    def generalized_force(self) -> np.ndarray:
        """τ (nv,) of the commands applied on the last step, at the current configuration (wrench and efforts)."""
        if self._force_stale:
            self._build_force()
        if self._W_power is None:
            return self._tau_const.copy()
        return self._tau_const + self.model.wrench_to_generalized(self.q, self.applied_wrench_body())[0]

    def applied_wrench_body(self) -> np.ndarray:
        """The applied base wrench ``[F; τ]`` in body axes at the current pose (rotated when held in world axes)."""
        cmd = self._wrench.applied
        if cmd.frame != "world":
            return cmd.W
        R = self.model.base_rotation(self.q)
        return np.concatenate([R.T @ cmd.W[:3], R.T @ cmd.W[3:]])

    def acceleration(self) -> np.ndarray:
        """v̇ (nv,) of the current state under the commands of the last step, as the integrator's stages compute
        it: ``M v̇ + C v + g = τ + τ_p`` with the passive forces (water, joint springs, dampers, friction)."""
        q, v, model = self.q, self.v, self.model
        tau = self.generalized_force()
        if model.passive_active:
            tau = tau + model.passive_forces(q, v)
        return model.forward_dynamics(q, v, tau)

    def joint_wrenches(self, a: Optional[np.ndarray] = None) -> np.ndarray:
        """(nj, 6) ``Model.joint_wrenches`` of the current state with ``a`` (default :meth:`acceleration`) and the
        water's loads on the links: the total wrench ``[F; τ]`` each joint transmits to its child, in the child
        link's frame at its origin (actuation, joint passive torques and gravity included)."""
        q, v = self.q, self.v
        if a is None:
            a = self.acceleration()
        return self.model.joint_wrenches(q, v, a, f_ext=self.model.body_loads(q, v))

    def applied_wrench_world(self):
        """``(F, τ)`` of the applied base wrench in world axes at the current pose [N, N m]."""
        cmd = self._wrench.applied
        if cmd.frame == "world":
            return cmd.W[:3], cmd.W[3:]
        R = self.model.base_rotation(self.q)
        return R @ cmd.W[:3], R @ cmd.W[3:]

    def diagnostics(self) -> dict:
        """The bookkeeping of the current state as a flat dict (SI units, J for energies and work, world-frame
        momentum ``[linear; angular about the world origin]``): simulation time [s], step counts, paused, base
        group, integrator, kinetic/potential/total energy and their references, ``work_applied``,
        ``energy_balance_residual = E − E_ref − work`` (less the passive loads' and the contact's work) and the
        momentum and its reference per axis; with a contact world ``contact_work``, ``contact_steps``,
        ``contact_unconverged`` and the contact steps' cost in thread CPU time ``contact_step_mean_ms`` and
        ``contact_step_longest_ms`` (information: it differs from run to run)."""
        model, q, v = self.model, self.q, self.v
        ke = model.kinetic_energy(q, v)
        pe = model.potential_energy(q)
        h = model.spatial_momentum(q, v)
        values = {
            "sim_time": self.stamp() * 1e-9,
            "steps": self.k,
            "steps_since_reset": self.k - self.k_reset,
            "paused": self.paused,
            "fault": self.fault.reason if self.fault is not None else "",
            "faults": self.faults,
            "saturated_wrench_commands": self.saturated["wrench"],
            "saturated_effort_commands": self.saturated["joints"],
            "base_group": model.base,
            "integrator": self._integrator,
            "kinetic_energy": ke,
            "potential_energy": pe,
            "total_energy": ke + pe,
            "kinetic_energy_ref": self.kinetic_energy_ref,
            "total_energy_ref": self.energy_ref,
            "work_applied": self.work,
            "energy_balance_residual": (ke + pe + self.objects_energy() - self.energy_ref - self.work
                                        - self.passive_work - self.contact_work),
        }
        if self.world is not None:  # contact and joint limits: the impulses' work and how often they acted
            last = self.last_contact
            result = last.result if last is not None else None
            values.update(contact_work=self.contact_work, contact_steps=self.contact_steps,
                          contact_unconverged=self.contact_unconverged,
                          contacts=last.n_contacts if last is not None and self._free_until < 0 else 0,
                          limits_active=last.n_limits if last is not None and self._free_until < 0 else 0,
                          contact_residual=result.residual if result is not None else 0.0,
                          contact_sweeps=result.sweeps if result is not None else 0)
            w = self.world  # the contact steps' CPU time (information: it varies from run to run)
            values.update(contact_step_mean_ms=w.step_ns * 1e-6 / w.step_count if w.step_count else 0.0,
                          contact_step_longest_ms=w.step_ns_max * 1e-6)
            if self.objects:
                values["objects_energy"] = self.objects_energy()
        if model.passive_active:
            values.update(passive_work=self.passive_work, dissipated_energy=self.dissipated,
                          current_supplied_energy=self.passive_work + self.dissipated)
        axes = ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")
        for i, axis in enumerate(axes):
            values["momentum_" + axis] = float(h[i])
        for i, axis in enumerate(axes):
            values["momentum_ref_" + axis] = float(self.momentum_ref[i])
        return values
