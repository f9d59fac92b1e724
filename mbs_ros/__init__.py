"""mbs_ros: singularity-free Lie-group rigid-body and multibody dynamics for ROS 2.

ROS-free numerics live in :mod:`mbs_ros.dynamics` and :mod:`mbs_ros.controllers`;
thin rclpy nodes live in :mod:`mbs_ros.nodes`.
"""

__version__ = "0.1.0"
