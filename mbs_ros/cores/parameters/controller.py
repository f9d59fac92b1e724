"""controller_node's parameters (see :mod:`mbs_ros.cores.parameters`): the one place of their defaults
(:class:`mbs_ros.cores.controller_settings.ControllerSettings` takes them from here); all are read-only. A model
from a URDF replaces the defaults of ``base_group``, ``gravity`` and ``base_frame`` with the robot's."""
from __future__ import annotations

from dataclasses import replace

from mbs_ros.dynamics.model import source as ms
from mbs_ros.cores.parameters import SHARED, from_pairs
from mbs_ros.cores.parameters.dynamics import (ARMATURE_DESCRIPTION, LOCKED_JOINTS_DESCRIPTION,
                                               LOCKED_POSITIONS_DESCRIPTION, MIMIC_DESCRIPTION)
from mbs_ros.cores.parameters.dynamics import PARAMETERS as DYNAMICS

LAWS = ("computed_torque", "passivity", "pd_gravity", "joint_pd_gravity", "lqr")
#: how the lqr weights are read: as given, or in acceleration units (scaled by the mass matrix)
LQR_SCALINGS = ("mass", "none")
#: where the controller's state comes from: the dynamics node's true state, or estimator_node's estimate
STATE_SOURCES = ("truth", "estimate")
#: (odom topic, joint_states topic) per state source, relative to the robot's namespace
STATE_TOPICS = {"truth": ("odom", "joint_states"), "estimate": ("estimate/odom", "estimate/joint_states")}

def _GAIN(default: float) -> dict:  # noqa: N802 - a table constant
    """A gain: a positive number or one per velocity component (the law checks them against the model)."""
    return {"default": default, "check": "gain"}


_PAIRS = {
    "robot_description": ("URDF XML of the robot (as dynamics_node).", SHARED),
    "model_file": ("URDF, xacro or robot YAML file, or a package:// or file:// URI (as dynamics_node).", SHARED),
    "base_group": ("Base group (as dynamics_node): " + ", ".join(ms.TREE_BASES) + ".", SHARED),
    "mass": ("Single body only: mass [kg], in [1e-6, 1e9].", SHARED),
    "inertia": ("Single body only: [ixx, ixy, ixz, iyy, iyz, izz] about the c.o.m. [kg m^2].", SHARED),
    "com": ("Single body only: centre of mass in the body frame [m], each |x| <= 1e3.", SHARED),
    "gravity": ("Gravity in the world frame [m/s^2], norm <= 1e3 (default: the robot YAML's, else [0, 0, -9.81]).",
                SHARED),
    "mass_scale": ("Multiplies every mass and inertia of the controller's model (robustness tests); in "
                   "[0.001, 1000].", SHARED),
    "law": ("Control law: " + ", ".join(LAWS) + " (joint_pd_gravity: joint-space PD + gravity compensation, the "
            "base unactuated: a legged robot standing on its feet; cmd_wrench zero).",
            {"default": "computed_torque", "choices": LAWS}),
    "kp": ("Position gain (computed_torque, pd_gravity, joint_pd_gravity): scalar or one per velocity component (nv), each in "
           "(0, 1e9].", _GAIN(9.0)),
    "kd": ("Velocity gain: scalar or one per velocity component (nv), each in (0, 1e9].", _GAIN(6.0)),
    "lambda": ("Slotine-Li Lambda (passivity): scalar or one per velocity component (nv), each in (0, 1e9].",
               _GAIN(3.0)),
    "lqr_q_position": ("lqr: state weight on the configuration error log(q_d^-1 q): scalar or one per velocity "
                       "component (nv), each in (0, 1e9]. With lqr_scaling mass, kp^2 gives computed torque's kp on a "
                       "decoupled DOF.", _GAIN(81.0)),
    "lqr_q_velocity": ("lqr: state weight on the velocity error v - v_d: scalar or one per velocity component (nv), "
                       "each in (0, 1e9]. With lqr_scaling mass, kd^2 - 2 kp gives computed torque's kd.", _GAIN(18.0)),
    "lqr_r": ("lqr: input weight on the generalised force: scalar or one per velocity component (nv), each in "
              "(0, 1e9].", _GAIN(1.0)),
    "lqr_scaling": ("lqr: mass (the weights in acceleration units: Q and R scaled by the mass matrix at the "
                    "reference, so the defaults give computed torque's double pole at -3/s on a decoupled DOF) or "
                    "none (Q and R as given).", {"default": "mass", "choices": LQR_SCALINGS}),
    "lqr_redesign_threshold": ("lqr: the gain is redesigned (linearisation + Riccati equation) when the reference "
                               "moves farther than this from the last design point (each component of the "
                               "configuration, velocity and acceleration difference), > 0; a constant setpoint "
                               "is designed once.", {"default": 0.05, "floating_point_range": (1.0e-9, 1.0e6)}),
    "control_rate": ("Command rate [Hz] on the node clock (the wall clock, or /clock with use_sim_time), > 0; "
                     "not used in lockstep.", SHARED),
    "state_timeout": ("A state older than this [s of the node clock] stops commanding (zero command once, "
                      "throttled warning); at least one control period (1/control_rate); not used in lockstep.",
                      {"default": 0.2, "floating_point_range": (0.0, 1.0e6), "minimum": 0.0, "minimum_open": True}),
    "lockstep": ("Compute and publish one command per complete state (odom + joint_states with equal stamps), "
                 "stamped with the state's stamp, instead of on a timer (dynamics_node lockstep).", SHARED),
    "state_source": ("Where the state comes from: truth (odom and joint_states, the simulator's own state) or "
                     "estimate (estimate/odom and estimate/joint_states of estimator_node, which fuses the "
                     "sensors).", {"default": "truth", "choices": STATE_SOURCES}),
    "world_frame": ("Fixed frame of odom and base_reference.", SHARED),
    "base_frame": ("Base frame (as dynamics_node); prefixed with the namespace.", SHARED),
    "max_wrench": ("[force, torque]: largest norms [N, N m] of the cmd_wrench force and torque (scaled down "
                   "beyond), each in [1e-9, 1e6 m/s^2 or N m/kg x the model's total mass]. Empty: [100 m/s^2, "
                   "100 N m/kg] times the model's total mass.", SHARED),
    "max_effort": ("Largest joint effort [N m or N]: one number for every joint or one per joint (joint_names "
                   "order), each in [1e-9, 1e6 N m/kg x the total mass]; clipped beyond. Empty: the URDF <limit "
                   "effort> (at most that bound), else 100 N m/kg times the total mass.", SHARED),
    "max_time_jump": ("Largest forward step [s] between consecutive state stamps taken as time running on, >= "
                      "0.1; a larger one, or a step back, becomes the time base only after 3 consecutive states.",
                      {"default": 5.0, "floating_point_range": (0.1, 1.0e6)}),
    "max_mass_ratio": (ms.MASS_RATIO_DESCRIPTION, SHARED),
    "locked_joints": (LOCKED_JOINTS_DESCRIPTION + " As dynamics_node's (the same list).", SHARED),
    "locked_joint_positions": (LOCKED_POSITIONS_DESCRIPTION, SHARED),
    "mimic": (MIMIC_DESCRIPTION + " As dynamics_node's.", SHARED),
    "joint_armature": (ARMATURE_DESCRIPTION + " As dynamics_node's (the same values).", SHARED),
    "allocate_thrusters": (
        "A model with thrusters: map the base wrench to thrusts (weighted pseudo-inverse with saturation "
        "redistributed, mbs_ros.controllers.allocation) and publish them on thruster_command (and cmd_thrust "
        "with unstamped_commands) instead of cmd_wrench.", True),
    "unstamped_commands": (
        "Also publish the commands without stamp or names in std_msgs/Float64MultiArray, one value per joint or "
        "thruster in the model's order, as ros2_control's forward command controllers take them: "
        "cmd_joint_effort beside joint_command, cmd_thrust beside thruster_command. Off by default: the dynamics "
        "node subscribes to both forms and would take every command twice (0.15-0.19 ms a period at 1 kHz, "
        "docs/contact.md), and lockstep ignores the unstamped ones.", False),
    "thruster_weights": (
        "Allocation weights, one per thruster (the cost is sum w_k T_k^2), each in [1e-6, 1e6]; empty = all 1.",
        {"default": (), "type": "double[]", "each": (1.0e-6, 1.0e6)}),
    "compensate_passive": (
        "Add -tau_p(q, v): cancel the model's passive forces (joint springs, dampers and friction, hydrodynamic "
        "damping and the current's loads) as computed torque cancels C v + g.", True),
    "idle_until": (
        "Command zero (thrusters off, joints limp, no passive compensation) while the state's reference time "
        "(the simulation time in a run on simulation time) is before this [s], then the law: a vehicle that "
        "settles under its own weight and buoyancy before the law takes over (config/scenarios/rov_landing.yaml); "
        "0 = the law from the start, else in (0, 1e9].", {"default": 0.0, "floating_point_range": (0.0, 1.0e9)}),
    "gripper_joints": (
        "The gripper's finger joints (prismatic or revolute, e.g. [alpha_finger_l_joint, alpha_finger_r_joint]), "
        "each driven alike: the law's command on them is replaced by the gripper's, a position target with a "
        "squeeze limit as a GripperCommand's (position + max_effort): effort = clip(gripper_gain (target - q) + "
        "gripper_damping (target rate - v), +-gripper_max_effort), the target moving from the schedule's "
        "gripper_times/gripper_positions at gripper_speed; empty = no gripper.",
        {"default": (), "type": "string[]"}),
    "gripper_times": (
        "The gripper's schedule: reference times [s], increasing, each in [0, 1e9]; from each time on the target "
        "moves towards gripper_positions' entry at gripper_speed (before the second: the first entry).",
        {"default": (), "type": "double[]", "each": (0.0, 1.0e9)}),
    "gripper_positions": (
        "The gripper's targets [m or rad of each finger joint], one per gripper_times entry, each in [-10, 10]; a "
        "target past the joint's closed limit squeezes what is between the fingers with gripper_max_effort.",
        {"default": (), "type": "double[]", "each": (-10.0, 10.0)}),
    "gripper_max_effort": (
        "The gripper's squeeze limit [N or N m] on each finger joint, in [1e-6, 1e6] (and at most the joint's "
        "max_effort, which clips it after).", {"default": 10.0, "floating_point_range": (1.0e-6, 1.0e6)}),
    "gripper_speed": (
        "The speed [m/s or rad/s] at which the gripper's target moves to a new scheduled position, in [1e-6, 1e3] "
        "(a real gripper's closing speed: the fingers meet the object at it).",
        {"default": 0.05, "floating_point_range": (1.0e-6, 1.0e3)}),
    "gripper_gain": (
        "The gripper's position gain [N/m or N m/rad], in [0, 1e9].",
        {"default": 2000.0, "floating_point_range": (0.0, 1.0e9)}),
    "gripper_damping": (
        "The gripper's velocity gain [N s/m or N m s/rad], in [0, 1e9].",
        {"default": 20.0, "floating_point_range": (0.0, 1.0e9)}),
    "payload_mass": (
        "A grasped object's mass [kg] added to the controller's model of payload_link while the gripper holds it "
        "(its scheduled target arrived, at rest, below the schedule's first, open, position; always without a "
        "gripper); 0 = no "
        "payload (the model does not know the object: a robustness campaign draws both), else in (0, 1e6].",
        {"default": 0.0, "floating_point_range": (0.0, 1.0e6)}),
    "payload_inertia": (
        "The payload's principal moments [ixx, iyy, izz] about its centre of mass in payload_link's axes [kg m^2], "
        "each in [0, 1e6]; empty = a point mass.", {"default": (), "type": "double[]", "each": (0.0, 1.0e6)}),
    "payload_com": (
        "The payload's centre of mass in payload_link's frame [m], 3 entries, each in [-10, 10].",
        {"default": (0.0, 0.0, 0.0), "type": "double[]", "each": (-10.0, 10.0)}),
    "payload_link": (
        "The link that holds the payload (e.g. the palm, alpha_jaws); needed with payload_mass > 0.",
        {"allow_empty": True, "type": "string", "default": ""}),
    "allow_partial_joints_goal": (
        "FollowJointTrajectory: accept goals naming only some of the joints (the others hold their reference), as "
        "joint_trajectory_controller's parameter.", False),
    "goal_time_tolerance": (
        "FollowJointTrajectory: default time [s] after a trajectory's end within which the joints must meet the "
        "goal tolerances (joint_trajectory_controller's constraints.goal_time); 0 = no limit.",
        {"default": 0.0, "floating_point_range": (0.0, 1.0e6)}),
    "stopped_velocity_tolerance": (
        "FollowJointTrajectory: default goal velocity tolerance [rad/s or m/s] of every joint "
        "(joint_trajectory_controller's constraints.stopped_velocity_tolerance); 0 = not checked.",
        {"default": 0.01, "floating_point_range": (0.0, 1.0e6)}),
    "use_events_executor": (
        "Spin with rclpy.experimental.EventsExecutor when this rclpy has it (else the single-threaded executor, "
        "with a warning); false: always the single-threaded executor (as dynamics_node).", SHARED),
}


PARAMETERS = {n: replace(p, read_only=True) for n, p in from_pairs(_PAIRS, DYNAMICS).items()}
