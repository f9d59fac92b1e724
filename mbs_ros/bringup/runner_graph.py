"""The runner's own view of the ROS graph (:class:`_Graph`): a private rclpy context spun in a thread."""

from __future__ import annotations

import threading
from typing import Dict, Optional, Sequence


class _Graph:
    """The runner's own view of the ROS graph, from a private rclpy context spun in a thread (no signal
    handlers): which controllers subscribe their state yet, the newest /clock time (sim-time durations), the
    newest ``diagnostics`` of the controllers that hold a paused start (how many came, their counters), and clients
    of the paused dynamics nodes' ``~/pause``."""

    def __init__(self, watch_clock: bool, diagnostics: Sequence[str] = (), pause: Sequence[str] = (),
                 references: Sequence[str] = ()):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile
        from rclpy.signals import SignalHandlerOptions

        self.now_ns: Optional[int] = None
        self.diagnostics: Dict[str, tuple] = {}  # topic -> (messages so far, {key: value} of the newest)
        self.context = Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("bringup_runner", context=self.context)
        if watch_clock:
            from rosgraph_msgs.msg import Clock

            # depth 1: the newest /clock time, not a backlog of older ones (the clock can run far faster than
            # real time, and this thread is starved while the nodes start)
            self.node.create_subscription(Clock, "/clock", self._on_clock, QoSProfile(depth=1))
        if diagnostics:
            from diagnostic_msgs.msg import DiagnosticArray

            for topic in diagnostics:
                self.node.create_subscription(DiagnosticArray, topic, lambda m, t=topic: self._on_diagnostics(t, m),
                                              QoSProfile(depth=10))
        #: reference topic -> header.stamp (ns) of the reference received on it (reliable, transient local: the
        #: reference node publishes each once)
        self.references: Dict[str, int] = {}
        if references:
            from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
            from trajectory_msgs.msg import JointTrajectory, MultiDOFJointTrajectory

            latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            for topic in references:
                kind = MultiDOFJointTrajectory if topic.endswith("base_reference") else JointTrajectory
                self.node.create_subscription(kind, topic, lambda m, t=topic: self._on_reference(t, m), latched)
        self.pause_clients = {}
        if pause:
            from std_srvs.srv import SetBool

            self.pause_clients = {name: self.node.create_client(SetBool, name) for name in pause}
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True, name="bringup-graph")
        self.thread.start()

    def _on_clock(self, msg) -> None:
        self.now_ns = int(msg.clock.sec) * 1_000_000_000 + int(msg.clock.nanosec)

    def _on_reference(self, topic: str, msg) -> None:
        self.references[topic] = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)

    def _on_diagnostics(self, topic: str, msg) -> None:
        from mbs_ros.nodes.conversions import values_from_status

        values = values_from_status(msg.status[0]) if msg.status else {}
        self.diagnostics[topic] = (self.diagnostics.get(topic, (0, {}))[0] + 1, values)

    def call_pause(self, service: str, paused: bool):
        """Send ``~/pause`` ``paused`` once the service is there: a future (its result a SetBool response), or
        None while the service is not ready yet."""
        from std_srvs.srv import SetBool

        client = self.pause_clients[service]
        if not client.service_is_ready():
            return None
        return client.call_async(SetBool.Request(data=paused))

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - context shut down under us
                break

    def subscribed(self, topic: str, node_name: str, namespace: str) -> bool:
        """Whether node ``namespace/node_name`` subscribes ``topic``."""
        try:
            infos = self.node.get_subscriptions_info_by_topic(topic)
        except Exception:  # noqa: BLE001 - context going down
            return False
        return any(i.node_name == node_name and i.node_namespace == namespace for i in infos)

    def close(self) -> None:
        import rclpy

        self._stop.set()
        self.thread.join(timeout=2.0)
        try:
            self.executor.shutdown()
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
