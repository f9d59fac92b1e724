"""The benchmark's floor: an rclpy node that does nothing but answer (``python -m mbs_ros.bench.echo``).

It subscribes to ``ping`` (``nav_msgs/Odometry``, reliable, depth 10) and publishes every message it receives
back on ``pong``, deserialized and serialized again as any rclpy node's callback does, spun by the executor our
nodes use (rclpy's EventsExecutor where this rclpy has it, ``--single``: the SingleThreadedExecutor). The round
trip of one message through it is the least a state -> command exchange between two rclpy processes costs here,
with no computation at all: :func:`mbs_ros.bench.node.floor` measures it. Stops on SIGINT/SIGTERM (exit 0).
"""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from mbs_ros.nodes import runtime
    from mbs_ros.process import TeardownGuard

    argv = list(sys.argv if argv is None else argv)  # the program name first, as rclpy.init takes it
    single = "--single" in argv
    stop = runtime.init_ros([a for a in argv if a != "--single"])
    node = Node("echo")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(Odometry, "pong", qos)
    node.create_subscription(Odometry, "ping", pub.publish, qos)
    if single:
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor()
    else:
        try:
            from rclpy.experimental import EventsExecutor

            executor = EventsExecutor()
        except ImportError:
            from rclpy.executors import SingleThreadedExecutor

            executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        runtime.spin_until_stopped(executor, stop)
    finally:
        # the middleware's teardown can hang on a loaded machine (the EventsExecutor's, once in a suite run: the
        # echo needed SIGTERM): bounded as the nodes' is (mbs_ros.process.TeardownGuard), ending with exit 0
        guard = TeardownGuard("echo", 0)
        executor.shutdown()
        node.destroy_node()
        runtime.try_shutdown()
        guard.done()
    return 0


if __name__ == "__main__":
    sys.exit(main())
