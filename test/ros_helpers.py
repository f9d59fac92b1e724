"""Helpers shared by the ROS integration tests (real node processes, real topics).

Import it after ``pytest.importorskip("rclpy")``: it needs rclpy. pytest puts ``test/`` on ``sys.path`` (rootdir
insertion for a test directory without ``__init__.py``), so ``from ros_helpers import ...`` works.

- :class:`Probe`: the test side, one rclpy node in its own context, spun by hand (a context manager that closes
  it); every wait has a timeout and can check that the node processes under test are still running;
- :class:`Recorder`: every message of one topic, in arrival order, with the monotonic arrival times;
- :func:`running`: start node processes at once, stop them all at the end;
- :func:`ros_env_defaults`: harmless defaults for the isolation ``conftest.py`` sets (if it is absent);
- :func:`stamp_of`: a message's header stamp in ns;
- :func:`exact_fields`: every field of a message, floats by their bytes, to compare two runs bit for bit.
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile

from mbs_ros.dds import dds_defaults
from mbs_ros.nodes import conversions as cv


def poll_until(predicate, step, timeout, what="condition", alive=()):
    """Call ``step()`` until ``predicate()``; raise if a process of ``alive`` exited or after ``timeout`` s (wall)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for p in alive:
            p.check_running()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        step()


class Probe:
    """The test side: one rclpy node, spun by hand. ``timeout`` is the default of every wait."""

    def __init__(self, name, timeout):
        self.timeout = timeout
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, predicate, timeout=None, what="condition", alive=()):
        """Spin until ``predicate()``; raise if a process of ``alive`` exited or after ``timeout`` s."""
        poll_until(predicate, lambda: self.executor.spin_once(timeout_sec=0.01),
                   self.timeout if timeout is None else timeout, what, alive)

    def spin_for(self, seconds):
        """A bounded observation window: spin for ``seconds`` of wall clock."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.005)

    def call(self, srv_type, name, request, timeout=None, alive=(), resend_after=None):
        """Call a service once it is ready; the response. ``resend_after`` (s; idempotent services only, e.g.
        get_parameters): send the request again while no response came for that long, within ``timeout`` — a
        client whose response reader is not matched yet when the server answers loses the response (DDS
        discovery), which a wait for ``service_is_ready`` does not rule out."""
        client = self.node.create_client(srv_type, name)
        timeout = self.timeout if timeout is None else timeout
        try:
            self.spin_until(client.service_is_ready, timeout, f"service {name}", alive)
            deadline = time.monotonic() + timeout
            while True:
                future = client.call_async(request)
                wait = timeout if resend_after is None else min(resend_after, max(0.0, deadline - time.monotonic()))
                try:
                    self.spin_until(future.done, wait, f"response of {name}", alive)
                    return future.result()
                except AssertionError:
                    client.remove_pending_request(future)
                    if resend_after is None or time.monotonic() >= deadline:
                        raise AssertionError(f"timed out after {timeout} s waiting for the response of {name}") \
                            from None
        finally:
            self.node.destroy_client(client)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        if self.context.ok():
            rclpy.shutdown(context=self.context)


class Recorder:
    """Every message of one topic, in arrival order, and its ``time.monotonic()`` arrival time."""

    def __init__(self, probe, msg_type, topic, depth=1000, qos=None):
        self.messages = []
        self.arrival = []
        self.sub = probe.node.create_subscription(msg_type, topic, self._on, qos or QoSProfile(depth=depth))

    def _on(self, m):
        self.messages.append(m)
        self.arrival.append(time.monotonic())

    def __len__(self):
        return len(self.messages)


def ros_env_defaults():
    """conftest.py isolates the run (domain id, loopback discovery, UDPv4); harmless defaults if it is absent."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 100 + 1))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4")
    dds_defaults()


@contextlib.contextmanager
def running(procs):
    """Start every process of ``procs`` (a dict or a list) at once; stop them all on exit. Yields ``procs``."""
    values = list(procs.values()) if isinstance(procs, dict) else list(procs)
    try:
        for p in values:
            p.start()
        yield procs
    finally:
        for p in values:
            p.stop()


def stamp_of(m):
    return cv.ns_from_time(m.header.stamp)


def exact_fields(msg):
    """Every field of a message, floats as their bytes (bit-identical, -0.0 != 0.0), for comparing two messages.
    Not serialize_message: CDR's alignment padding is not initialised, so equal messages can serialize apart."""
    if hasattr(msg, "get_fields_and_field_types"):
        return tuple((name, exact_fields(getattr(msg, name))) for name in msg.get_fields_and_field_types())
    if isinstance(msg, float):
        return np.float64(msg).tobytes()
    if isinstance(msg, np.ndarray):
        return (msg.dtype.str, msg.tobytes())
    if isinstance(msg, (list, tuple)) or type(msg).__name__ == "array":
        return tuple(exact_fields(x) for x in msg)
    return msg
