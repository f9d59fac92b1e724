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

__all__ = ["Reconfiguration", "ON"]

#: what a change redoes -> the parameters whose change does it (the table's on_change)
ON = {what: {n for n, p in PARAMETERS.items() if what in p.on_change} for what in ("rate", "limits", "water", "pause")}


class Reconfiguration:
    """Checks a ``set_parameters`` request to the node whose ``logger`` it is, for the model of ``sim`` from
    ``source`` (``multibody``: a robot) stepped every ``dt_ns``; ``current()`` the node's ``(settings, pause_k,
    rate)`` now. An accepted change goes to ``apply(settings, changed, pause_k, model, limits, rate)`` (the node's),
    a refused one is logged and answered with the reason."""

    def __init__(self, logger, sim, *, source, multibody: bool, dt_ns: int, current, apply):
        self.logger, self.sim, self.source, self.multibody, self.dt_ns = logger, sim, source, multibody, dt_ns
        self.current, self.apply = current, apply

    def on_set_parameters(self, params) -> SetParametersResult:
        settings, pause_k, rate = self.current()
        values = {f: getattr(settings, f) for f in PARAMETERS}
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
            check_runtime_change(settings, s, changed)
            pause_k = check_pause_at(s, self.sim.k, self.dt_ns) if changed & ON["pause"] else pause_k
            model = build_model(s, self.source) if changed & set(INERTIAL) else self.sim.model
            q0, _v0 = initial_state(model, s)  # the initial pose/twist/joints must stay valid
            limits = command_limits(model, s)
            if changed & ON["rate"]:
                rate = check_rate(model, s, q0, limits)
        except ParameterError as e:
            self.logger.warning(f"parameter change refused: {e}")
            return SetParametersResult(successful=False, reason=str(e))
        self.apply(s, changed, pause_k, model, limits, rate)
        self.logger.info("parameters changed: " + ", ".join(sorted(changed)))
        return SetParametersResult(successful=True)
