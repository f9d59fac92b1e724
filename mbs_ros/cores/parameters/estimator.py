"""estimator_node's parameters (see :mod:`mbs_ros.cores.parameters`): the one place of their defaults
(:class:`mbs_ros.cores.estimator_settings.EstimatorSettings` takes them from here); all are read-only. A model
from a URDF or robot YAML replaces the defaults of ``base_group``, ``gravity`` and ``base_frame`` with the
robot's."""
from __future__ import annotations

from dataclasses import replace

from mbs_ros.dynamics.model import source as ms
from mbs_ros.cores.parameters import SHARED, from_pairs
from mbs_ros.cores.parameters.dynamics import PARAMETERS as DYNAMICS

#: the estimator's sensor roles, in the order their names are given (each a sensor of the sensors file, or "")
SENSOR_ROLES = ("imu", "dvl", "depth", "compass", "encoders")
#: the sensor type each role takes
ROLE_TYPES = {"imu": "imu", "dvl": "dvl", "depth": "pressure", "compass": "magnetometer", "encoders": "encoders"}

def _POSITIVE(default: float) -> dict:  # noqa: N802 - a table constant
    return {"default": default, "minimum": 0.0, "minimum_open": True}


_PAIRS = {
    "robot_description": ("URDF XML of the robot (as dynamics_node).", SHARED),
    "model_file": ("URDF, xacro or robot YAML file, or a package:// or file:// URI (as dynamics_node).", SHARED),
    "base_group": ("Base group (as dynamics_node): " + ", ".join(ms.TREE_BASES) + ".", SHARED),
    "gravity": ("Gravity in the world frame [m/s^2] (default: the robot YAML's, else [0, 0, -9.81]): the "
                "filter's gravity.", dict(SHARED, scenario="model")),
    "sensors": ("The sensors file, as dynamics_node's sensors parameter: empty = the robot YAML's sensors; a path "
                "= that file. Gives every sensor's mount, rate, delay, stamp mode and noise (the filter's noise).",
                dict(SHARED, scenario="sensors")),
    "physics_rate": ("The dynamics node's physics rate [Hz] (the sensors' rates are whole numbers of its steps).",
                     dict(SHARED, scenario="physics_rate")),
    "imu": ("Name of the IMU in the sensors file (type imu, on the base link): drives the propagation; required "
            "for a floating base. Empty: none.", {"allow_empty": True, "default": "", "type": "string"}),
    "dvl": ("Name of the DVL (type dvl, on the base link): body-velocity updates. Empty: none.",
            {"allow_empty": True, "default": "", "type": "string"}),
    "depth": ("Name of the pressure sensor (type pressure, on the base link): depth updates from its "
              "FluidPressure. Empty: none.", {"allow_empty": True, "default": "", "type": "string"}),
    "compass": ("Name of the magnetometer (type magnetometer, on the base link): heading (full-field) updates. "
                "Empty: none.", {"allow_empty": True, "default": "", "type": "string"}),
    "encoders": ("Name of the joint encoders (type encoders): estimate/joint_states. Empty: none (a robot with "
                 "joints then publishes no joint state).", {"allow_empty": True, "default": "", "type": "string"}),
    "initial_position": ("Prior mean of the base position in world_frame [m] (the robot's initial position).", SHARED),
    "initial_rpy": ("Prior mean of the base roll, pitch, yaw [rad] (R = Rz(yaw) Ry(pitch) Rx(roll)).", SHARED),
    "initial_velocity": ("Prior mean of the base origin's velocity in world_frame [m/s].",
                         {"default": (0.0, 0.0, 0.0), "size": 3, "scenario": "initial.twist"}),
    "initial_joint_positions": ("Joint positions published until the first encoder reading (one per joint); "
                                "empty: zeros.", SHARED),
    "initial_error": ("[dx, dy, dz, droll, dpitch, dyaw] added to the prior mean (m, world axes; rad, to the "
                      "roll, pitch, yaw): start the filter wrong on purpose (tests, demos); the sigmas stay.",
                      {"default": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0), "size": 6}),
    "initial_position_sigma": ("Prior standard deviation of the position [m], > 0.", _POSITIVE(0.1)),
    "initial_attitude_sigma": ("Prior standard deviations [rad] of roll/pitch and of yaw: [tilt, yaw], > 0.",
                               {"default": (0.02, 0.1), "check": "custom"}),
    "initial_velocity_sigma": ("Prior standard deviation of the velocity [m/s], > 0.", _POSITIVE(0.05)),
    "initial_gyro_bias_sigma": ("Prior standard deviation of each gyroscope bias [rad/s]; 0: the IMU's "
                                "gyroscope_turn_on_bias_sigma (at least 1e-5).", {"default": 0.0, "minimum": 0.0}),
    "initial_accel_bias_sigma": ("Prior standard deviation of each accelerometer bias [m/s^2]; 0: the IMU's "
                                 "accelerometer_turn_on_bias_sigma (at least 1e-4).",
                                 {"default": 0.0, "minimum": 0.0}),
    "min_measurement_sigma": ("Floor [SI units] of every aiding measurement's standard deviation (a sensor "
                              "configured without noise would otherwise make a singular update), > 0.",
                              {"default": 1.0e-4, "floating_point_range": (1.0e-12, 1.0e3)}),
    "publish_rate": ("Rate [Hz] of estimate/odom and estimate/joint_states outside lockstep: an estimate for "
                     "every point of this grid (simulation or node time) the IMU reaches.",
                     {"default": 50.0, "floating_point_range": (0.001, 1.0e5)}),
    "control_rate": ("Lockstep: the control rate [Hz] (as dynamics_node's): the estimates' grid, so that they "
                     "carry the stamps of the dynamics node's states.", dict(SHARED, scenario="control_rate")),
    "lockstep": ("Publish the estimate at t only once every used sensor's reading due by t has arrived "
                 "(deterministic, as the dynamics node's lockstep); the grid is the control period.", SHARED),
    "world_frame": ("Fixed frame of estimate/odom.", SHARED),
    "base_frame": ("Base frame (as dynamics_node): estimate/odom's child frame; prefixed with the namespace.", SHARED),
    "use_events_executor": ("Spin with rclpy.experimental.EventsExecutor when this rclpy has it (as "
                            "dynamics_node).", SHARED),
}


PARAMETERS = {n: replace(p, read_only=True) for n, p in from_pairs(_PAIRS, DYNAMICS).items()}
