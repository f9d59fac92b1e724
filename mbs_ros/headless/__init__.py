"""Headless runs: a scenario in one process without ROS, bit-identical to its lockstep run over ROS on simulation
time (:func:`run_scenario`; docs/headless.md). ROS-free: the nodes' cores only, never rclpy or message packages."""
from mbs_ros.headless.run import HeadlessError, HeadlessRun, RobotRecord, run_scenario

__all__ = ["run_scenario", "HeadlessRun", "RobotRecord", "HeadlessError"]
