"""State estimation (ROS-free): the invariant EKF on SE₂(3) for IMU + DVL + depth + compass (Barrau & Bonnabel
2017; Potokar, Norman & Mangelson 2021), which the estimator node runs on the sensors' topics, and the NEES
consistency helpers its tests use. docs/estimation.md is the manual."""

from mbs_ros.estimation.inekf import ImuNoise, InvariantEKF, se23_exp, se23_log
from mbs_ros.estimation.nees import Consistency, anees_bounds, consistency, nees

__all__ = ["ImuNoise", "InvariantEKF", "se23_exp", "se23_log", "Consistency", "anees_bounds", "consistency",
           "nees"]
