"""Live reconfiguration of the dynamics node (:class:`Reconfiguration`, a part of
:class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`): a ``set_parameters`` request is checked as a whole, as at
start-up (:func:`~mbs_ros.cores.dynamics_settings.settings_from_values`, the model, the initial state, the command
limits and, when they change, the physics-rate check), and refused with the reason, or applied: rates, integrator,
limits, pacing, a new model for new inertial parameters (a single body's marker box with it), the water's
current, or where ``pause_at`` pauses (a time ahead of the simulation's only)."""
from __future__ import annotations

from rcl_interfaces.msg import SetParametersResult

from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores.dynamics_settings import (INERTIAL, SINGLE_BODY_ONLY, build_model, check_pause_at, check_rate,
                                             check_runtime_change, command_limits, initial_state,
                                             settings_from_values)
from mbs_ros.cores.parameters.dynamics import PARAMETERS

__all__ = ["Reconfiguration"]

#: what a change redoes -> the parameters whose change does it (the table's on_change)
_ON = {what: {n for n, p in PARAMETERS.items() if what in p.on_change} for what in ("rate", "limits", "water", "pause")}


class Reconfiguration:
    """Needs, from the node: ``sim``, ``model``, ``settings``, ``source``, ``multibody``, ``_rate``,
    ``_set_rates``, ``_make_timer``, ``pacer``, ``_setup_markers``, ``_warn_inertia``, ``_limits_text``."""

    def _on_set_parameters(self, params) -> SetParametersResult:
        values = {f: getattr(self.settings, f) for f in PARAMETERS}
        changed = set()
        for p in params:
            if p.name in PARAMETERS:
                values[p.name] = p.value
                changed.add(p.name)
        if not changed:
            return SetParametersResult(successful=True)
        try:
            if self.multibody and changed & set(SINGLE_BODY_ONLY):
                raise ParameterError(
                    f"{', '.join(sorted(changed & set(SINGLE_BODY_ONLY)))}: single-body parameters; this node's "
                    f"model comes from {self.source.describe()}")
            s = settings_from_values(values, self.source)
            check_runtime_change(self.settings, s, changed)
            pause_k = check_pause_at(s, self.sim.k, self.dt_ns) if changed & _ON["pause"] else self._pause_k
            model = build_model(s, self.source) if changed & set(INERTIAL) else self.model
            q0, _v0 = initial_state(model, s)  # the initial pose/twist/joints must stay valid
            limits = command_limits(model, s)
            rate = self._rate
            if changed & _ON["rate"]:
                rate = check_rate(model, s, q0, limits)
        except ParameterError as e:
            self.get_logger().warning(f"parameter change refused: {e}")
            return SetParametersResult(successful=False, reason=str(e))
        old = self.settings
        self.settings = s
        self._set_rates(s)
        self.sim.integrator = s.integrator
        self._pause_k = pause_k
        if changed & _ON["limits"]:
            self.sim.set_limits((limits.max_force, limits.max_torque), limits.max_effort)
            self.get_logger().info("command limits: " + self._limits_text())
        if rate is not self._rate:
            self._rate = rate
            if rate.warning:
                self.get_logger().warning(rate.warning)
        if s.real_time_factor != old.real_time_factor:
            self._anchor()
            self._make_timer()
        if model is not self.model:
            self.sim.set_model(model)  # same state, new inertia: new energy/momentum reference
            if not self.multibody:
                self._warn_inertia(s)
                self._setup_markers()  # the equivalent-inertia box changes with the inertia
        elif changed & _ON["water"]:  # the water changes, the references stay (a port of the balance)
            self.sim.set_current(s.current, s.current_rate)
        self.get_logger().info("parameters changed: " + ", ".join(sorted(changed)))
        return SetParametersResult(successful=True)
