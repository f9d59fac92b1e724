"""The dynamics node's services (:class:`Services`, a part of :class:`~mbs_ros.nodes.dynamics_node.DynamicsNode`):
``~/reset`` (std_srvs/Trigger), ``~/pause`` (std_srvs/SetBool) and ``~/step`` (mbs_ros_msgs/Step, as Gazebo's
``multi_step``); their behaviour is described in docs/dynamics_node.md, "Services"."""
from __future__ import annotations

from std_srvs.srv import SetBool, Trigger

from mbs_ros.dynamics.model_source import ParameterError
from mbs_ros.nodes import conversions as cv
from mbs_ros.nodes.dynamics_lockstep import TOPIC
from mbs_ros.nodes.dynamics_settings import initial_state

try:  # the ~/step service's type (mbs_ros_msgs/srv/Step); an older build of the package has only EnergyPorts
    from mbs_ros_msgs.srv import Step
except ImportError:  # pragma: no cover - without it: no ~/step (a warning says so)
    Step = None

__all__ = ["Services", "Step", "MAX_STEP_REQUEST"]

# ~/step: at most this many physics steps per request (the steps run inside the service callback)
MAX_STEP_REQUEST = 1_000_000


class Services:
    """Needs, from the node: ``sim``, ``model``, ``settings``, ``pacer``, ``advance``, ``_take_period``,
    ``_try_period``, the publishing methods, ``_guard_service``."""

    def _create_services(self) -> None:
        self.srv_reset = self.create_service(Trigger, "~/reset", self._guard_service(self._on_reset, "reset"))
        self.srv_pause = self.create_service(SetBool, "~/pause", self._guard_service(self._on_pause, "pause"))
        self.srv_step = None
        if Step is not None:
            self.srv_step = self.create_service(Step, "~/step", self._guard_service(self._on_step, "step"))
        else:
            self.get_logger().warning("mbs_ros_msgs has no Step service (an older build): no ~/step (make setup "
                                      "builds it)")

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            q0, v0 = initial_state(self.model, self.settings)
        except ParameterError as e:  # pragma: no cover - validated when set
            response.success, response.message = False, str(e)
            return response
        # The initial state becomes the state of the next step: stamps never repeat or go back. The commands
        # are cleared (the zero wrench is announced on `wrench` by the next step if it differs).
        fault = self.sim.fault
        self.sim.reset(q0, v0)
        self._anchor()
        self._markers_delete_all = True
        self._publish_state(everything=True)
        self._publish_diagnostics()
        response.success = True
        response.message = f"reset to the initial state at t = {self.stamp() * 1e-9:.9f} s" + (
            f" (the fault at t = {fault.stamp_ns * 1e-9:.9f} s cleared"
            + (", still paused: ~/pause false resumes)" if self.sim.paused else ", running)") if fault else "")
        self.get_logger().info(response.message)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        sim = self.sim
        if request.data and not sim.paused:
            sim.pause(True)
            if self._last_published_k != sim.k:
                self._publish_state(everything=True)
                self._publish_applied()
            self._publish_diagnostics()
            self._graph_counts = self._graph_counts_now()  # those matched later get the state again
            response.message = f"paused at t = {self.stamp() * 1e-9:.9f} s"
        elif not request.data and sim.fault is not None:
            sim.pause(False)  # the pause asked for ends; the fault holds until a reset
            f = sim.fault
            response.success = False
            response.message = (f"halted by a fault at t = {f.stamp_ns * 1e-9:.9f} s ({f.reason}); call ~/reset to "
                                "resume from the initial state")
            self.get_logger().warning(response.message)
            return response
        elif not request.data and sim.paused:
            sim.pause(False)
            self._anchor()
            response.message = f"resumed at t = {self.stamp() * 1e-9:.9f} s"
            if self.lockstep:
                self._try_period()  # the commands may all be here already
        else:
            response.message = "already " + ("paused" if sim.paused else "running")
        response.success = True
        self.get_logger().info(response.message)
        return response

    def _on_step(self, request, response):
        """``~/step`` (mbs_ros_msgs/Step): ``request.steps`` physics steps of a paused simulation (lockstep: one
        control period whose commands have arrived); see the module docstring, "Services"."""
        sim = self.sim
        n = int(request.steps)
        k0 = sim.k
        why = None
        if sim.fault is not None:
            f = sim.fault
            why = f"halted by a fault at t = {f.stamp_ns * 1e-9:.9f} s ({f.reason}); call ~/reset"
        elif not sim.paused:
            why = "not paused: ~/step advances a paused simulation (~/pause true first, or start_paused)"
        elif self.lockstep and n not in (0, sim.lockstep_steps):
            why = (f"lockstep: one control period at a time, steps {sim.lockstep_steps} (physics_rate / control_rate) "
                   f"or 0, not {n}: the next period needs the controller's answer to the state this one publishes")
        elif self.lockstep and n and not sim.period_complete():
            why = (f"lockstep: the period at t = {self.stamp() * 1e-9:.9f} s still waits for "
                   f"{' and '.join(TOPIC[ch] for ch in sim.missing())} stamped with it; call again once the "
                   "controller has answered that state")
        elif n > MAX_STEP_REQUEST:
            why = f"{n} steps: at most {MAX_STEP_REQUEST} per request (they are taken inside the service call)"
        if why is None and n:
            sim.pause(False)
            self._stepping = True
            try:
                if self.lockstep:
                    self._take_period()
                else:
                    self.advance(n)
            finally:
                sim.pause(True)
                self._stepping = False
            if self._last_published_k != sim.k:  # as a pause: the state it stopped at
                self._publish_state(everything=True)
                self._publish_applied()
            self._publish_diagnostics()
        taken = sim.k - k0
        response.sim_time = cv.time_from_ns(self.stamp())
        response.step_index = sim.k
        if why is None and sim.fault is not None:
            f = sim.fault
            why = (f"halted by a fault after {taken} of {n} steps, at t = {f.stamp_ns * 1e-9:.9f} s ({f.reason}); "
                   "call ~/reset")
        response.success = why is None
        response.message = why or f"{taken} steps to t = {self.stamp() * 1e-9:.9f} s (step {sim.k})"
        self.get_logger().debug(f"~/step: {response.message}")
        return response
