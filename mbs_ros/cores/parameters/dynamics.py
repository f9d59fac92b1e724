"""dynamics_node's parameters (see :mod:`mbs_ros.cores.parameters`)."""
from __future__ import annotations

from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.mimic import MIMIC_MODES
from mbs_ros.dynamics.model.model import MAX_MASS_RATIO
from mbs_ros.cores.parameters import from_pairs

INTEGRATORS = ("euler", "heun", "rk3", "rk4")

LOCKED_JOINTS_DESCRIPTION = (
    "Joints of the robot frozen at load (Pinocchio's buildReducedModel): each becomes a fixed joint at its "
    "locked_joint_positions entry, e.g. a massless hand or a gripper; they leave joint_names. Robots only.")
LOCKED_POSITIONS_DESCRIPTION = (
    "Positions of locked_joints, same order and length [rad or m], within each joint's URDF <limit>; empty = "
    "zeros.")
ARMATURE_DESCRIPTION = (
    "Rotor inertia of each joint [kg m^2 or kg], added to the mass matrix's diagonal (MuJoCo's armature, "
    "Pinocchio's model.armature): empty = none; one number for every movable joint; else one per joint in "
    "joint_names order (without locked joints and mimics). Finite, >= 0. Lets a robot with massless links (e.g. "
    "finger chains) load without locking them. Robots only.")
MIMIC_DESCRIPTION = (
    "URDF <mimic> joints: reduce (q = multiplier * q_master + offset; they leave joint_names, as Pinocchio 3 and "
    "ros2_control treat them) or independent (each moves on its own). Robots only.")

_PAIRS = {
    "robot_description": (
        "URDF XML of a robot (as robot_state_publisher takes it); empty: see model_file.",
        {"scenario": "model", "allow_empty": True, "type": "string", "default": "", "read_only": True}),
    "model_file": (
        "URDF, xacro or robot YAML file of a robot; a relative path is looked up in the mbs_ros share directory, "
        "then the current directory; a package://PKG/PATH URI through the ament index, then pip's install "
        "prefixes; file:///PATH. Neither this nor robot_description: a single rigid body (mass, inertia, "
        "com).", {"scenario": "model", "allow_empty": True, "type": "string", "default": "", "read_only": True}),
    "base_group": (
        "Configuration group of the base: " + ", ".join(ms.BASES) + "; a robot also fixed. Default: the robot "
        "YAML's base, fixed for a URDF, se3 for a single body.",
        {"scenario": "base_group", "check": "custom", "type": "string", "default": "se3", "choices": ms.TREE_BASES,
         "read_only": True}),
    "mass": (
        "Mass [kg], in [1e-6, 1e9] (single body only).",
        {"on_change": ("model", "rate"), "single_body": True,
         "type": "double", "default": 1.0, "floating_point_range": (1.0e-6, 1.0e9)}),
    "inertia": (
        "Inertia about the centre of mass in body axes [kg m^2], as URDF: [ixx, ixy, ixz, iyy, iyz, izz]; "
        "must be positive definite with principal moments in [1e-12, 1e9] (a warning if it violates the triangle "
        "inequality). Single body only.",
        {"on_change": ("model", "rate"), "single_body": True,
         "size": 6, "type": "double[]", "default": (0.01, 0.0, 0.0, 0.01, 0.0, 0.01)}),
    "com": (
        "Centre of mass in the body frame [m], as URDF: [x, y, z], each |x| <= 1e3. Single body only.",
        {"on_change": ("model", "rate"), "single_body": True,
         "size": 3, "bound": 1.0e3, "type": "double[]", "default": (0.0, 0.0, 0.0)}),
    "gravity": (
        "Acceleration of gravity in the world frame [m/s^2]: [x, y, z], norm <= 1e3 (default: the robot "
        "YAML's, else [0, 0, -9.81]).",
        {"on_change": ("model", "rate"),
         "size": 3, "bound": 1.0e3, "norm": True, "type": "double[]", "default": (0.0, 0.0, -9.81)}),
    "integrator": (
        "Lie-group integrator: " + ", ".join(INTEGRATORS) + ".",
        {"on_change": ("rate",), "type": "string", "default": "rk4", "choices": INTEGRATORS}),
    "physics_rate": (
        "Physics steps per second of simulation time [Hz]; dt is the nearest whole number of ns. Refused when "
        "the model's fastest gravity mode is unstable under the integrator at this rate; a warning when it is "
        "barely resolved (docs/dynamics_node.md, Robustness).",
        {"type": "double", "default": 1000.0, "read_only": True, "floating_point_range": (1.0, 100000.0)}),
    "publish_rate": (
        "Rate of the state: odom, pose, /tf, joint_states (and wrench, joint_effort again with it) [Hz], in "
        "[0.1, physics_rate]; published every round(physics_rate/publish_rate) steps. In lockstep odom and "
        "joint_states go out once per control period, the rest with the periods that cross this grid.",
        {"at_most": "physics_rate", "type": "double", "default": 100.0,
         "floating_point_range": (0.1, 100000.0)}),
    "wrench_rate": (
        "Rate of joint_wrenches/<joint> [Hz], 0 = off, else in [0.001, physics_rate]; every "
        "round(physics_rate/wrench_rate) steps. Computed only while someone subscribes to one of them.",
        {"off": True, "at_most": "physics_rate", "type": "double", "default": 100.0,
         "floating_point_range": (0.0, 100000.0)}),
    "markers_rate": (
        "Rate of markers [Hz], 0 = off, else in [0.001, physics_rate]; every round(physics_rate/markers_rate) steps "
        "(with publish_markers). Built only while someone subscribes.",
        {"off": True, "at_most": "physics_rate", "type": "double", "default": 20.0,
         "floating_point_range": (0.0, 100000.0)}),
    "contacts_rate": (
        "Rate of the contact topics [Hz] (contacts/<link>, contacts/markers, world/markers and the free objects "
        "on /tf; docs/contact.md, On ROS), 0 = off, else in [0.001, physics_rate]; every "
        "round(physics_rate/contacts_rate) steps, with a contact world that has shapes. Built only while someone "
        "subscribes.",
        {"off": True, "at_most": "physics_rate", "type": "double", "default": 20.0,
         "floating_point_range": (0.0, 100000.0)}),
    "diagnostics_rate": (
        "Energy/momentum bookkeeping rate on /diagnostics [Hz], 0 = off, else in [0.001, physics_rate].",
        {"off": True, "at_most": "physics_rate", "type": "double", "default": 1.0,
         "floating_point_range": (0.0, 100000.0)}),
    "initial_position": (
        "Initial position of the base in the world [m], each |x| <= 1e6; used at start-up and "
        "reset.",
        {"scenario": "initial.position", "size": 3, "bound": 1.0e6, "type": "double[]", "default": (0.0, 0.0, 0.0)}),
    "initial_rpy": (
        "Initial roll, pitch, yaw [rad] (fixed axes x, y, z, as URDF), each |x| <= 1e3; human-facing input only, "
        "converted to a rotation at once.",
        {"scenario": "initial.rpy", "size": 3, "bound": 1.0e3, "type": "double[]", "default": (0.0, 0.0, 0.0)}),
    "initial_twist": (
        "Initial body-frame twist [vx, vy, vz, wx, wy, wz] (linear first) [m/s, rad/s], within the "
        "runaway bounds (1e4 m/s; physics_rate rad/s, at most 1e4).",
        {"scenario": "initial.twist", "size": 6, "type": "double[]", "default": (0.0,) * 6}),
    "initial_joint_positions": (
        "Initial joint positions in joint_names order [rad or m; the angle of a continuous joint]; "
        "empty = zeros. Within the URDF's [lower, upper]; joints without limits: |q| <= 1e3.",
        {"scenario": "initial.joint_positions", "type": "double[]", "default": ()}),
    "initial_joint_velocities": (
        "Initial joint velocities in joint_names order [rad/s or m/s]; empty = zeros. Within the runaway bounds "
        "(as initial_twist).", {"scenario": "initial.joint_velocities", "type": "double[]", "default": ()}),
    "world_frame": (
        "Fixed frame of odom, pose and tf.", {"type": "string", "default": "world", "read_only": True}),
    "base_frame": (
        "Base frame; prefixed with the node namespace (robot1/base_link). A leading '/' means no prefix (for "
        "every link of a robot). For a robot it names the URDF's root link (the default).",
        {"type": "string", "default": "base_link", "read_only": True}),
    "cmd_timeout": (
        "A cmd_wrench or cmd_joint_effort is held for this long [s of simulation time], then it goes to zero; "
        "in [1/physics_rate, 60] (one physics step at least). 0 = hold the last command forever, accepted at "
        "start-up only (for replays): a change to 0 at run time is refused.",
        {"type": "double", "default": 0.5, "floating_point_range": (0.0, 60.0)}),
    "max_mass_ratio": (
        ms.MASS_RATIO_DESCRIPTION,
        {"minimum": 0.0, "type": "double", "default": MAX_MASS_RATIO, "read_only": True}),
    "locked_joints": (
        LOCKED_JOINTS_DESCRIPTION,
        {"scenario": "locked_joints", "check": "locked", "type": "string[]", "default": (), "read_only": True}),
    "locked_joint_positions": (
        LOCKED_POSITIONS_DESCRIPTION,
        {"scenario": "locked_joints", "check": "locked", "type": "double[]", "default": (), "read_only": True}),
    "mimic": (MIMIC_DESCRIPTION,
              {"scenario": "mimic", "type": "string", "default": "reduce", "choices": MIMIC_MODES, "read_only": True}),
    "joint_armature": (ARMATURE_DESCRIPTION, {"type": "double[]", "default": (), "read_only": True}),
    "mass_scale": (
        "Multiplies every link's mass and rotational inertia of the simulated (true) model, centres of mass "
        "unchanged, in [0.001, 1000]: a model error for test campaigns (the controller's own mass_scale scales "
        "the controller's model). Robots only.",
        {"type": "double", "default": 1.0, "read_only": True, "floating_point_range": (1.0e-3, 1.0e3)}),
    "added_mass_scale": (
        "Multiplies every link's hydrodynamic added-mass matrix (<hydrodynamics><added_mass>) of the simulated "
        "model, in [0, 1000]. Robots only.",
        {"type": "double", "default": 1.0, "read_only": True, "floating_point_range": (0.0, 1.0e3)}),
    "link_mass_scales": (
        "One factor per URDF link in the model's link order (depth-first from the root, children in joint-name "
        "order: the dynamics' link_names) multiplying that link's mass and rotational inertia on top of "
        "mass_scale, each in [0.001, 1000]; empty = none. Robots only.",
        {"each": (1.0e-3, 1.0e3), "type": "double[]", "default": (), "read_only": True}),
    "sensor_seed": (
        "A whole number in [0, 2^31) added to every sensor's seed: new noise streams for every sensor without "
        "editing the sensors file (0: the file's seeds).",
        {"check": "whole", "type": "double", "default": 0.0, "read_only": True,
         "floating_point_range": (0.0, 2147483647.0)}),
    "thread_priority": (
        "Real-time scheduling of the node's process (its executor thread, where every callback runs, and the "
        "middleware's threads): 0 = the system's default scheduler; a whole number in [1, 98] = SCHED_FIFO at "
        "that priority (Linux; as ros2_control's controller_manager thread_priority), so that the other "
        "processes of a busy machine do not preempt a control period. Needs the right (root, CAP_SYS_NICE or an "
        "rtprio limit); refused by the system: a warning, and the default scheduler. The bringup runner and the "
        "launch files start such a node with RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS (unless set), its "
        "publications sent by Fast DDS's thread; without it the node warns (docs/dynamics_node.md).",
        {"check": "whole", "type": "double", "default": 0.0, "read_only": True,
         "floating_point_range": (0.0, 98.0)}),
    "use_events_executor": (
        "Spin with rclpy.experimental.EventsExecutor when this rclpy has it (else the single-threaded executor, "
        "with a warning); false: always the single-threaded executor.",
        {"type": "bool", "default": True, "read_only": True}),
    "publish_clock": (
        "Publish the simulation time on /clock (rosgraph_msgs/Clock), so that every node can run with "
        "use_sim_time:=true. One node per ROS graph should publish it.",
        {"scenario": "sim_time", "type": "bool", "default": False, "read_only": True}),
    "real_time_factor": (
        "Simulation seconds per wall-clock second: 0 = as fast as possible, else in [0.001, 1e6]. In lockstep: "
        "the maximum speed (0 = as fast as the controller answers).",
        {"type": "double", "default": 1.0, "floating_point_range": (0.0, 1.0e6)}),
    "lockstep": (
        "Advance one control period (physics_rate/control_rate steps) only when the commands stamped with the "
        "current state's stamp have arrived on cmd_wrench (floating base, base_actuated) and joint_command "
        "(joints).",
        {"scenario": "lockstep", "type": "bool", "default": False, "read_only": True}),
    "base_actuated": (
        "Whether a floating base takes a commanded wrench. false (a legged robot: only its joints are driven): "
        "no cmd_wrench subscription, and lockstep waits for joint_command alone; the disturbance still pushes "
        "the base. A fixed base takes no wrench either way.",
        {"type": "bool", "default": True, "read_only": True}),
    "control_rate": (
        "Control periods per second of simulation time [Hz] (lockstep only); physics_rate/control_rate must be "
        "a whole number.",
        {"type": "double", "default": 100.0, "read_only": True, "floating_point_range": (0.001, 100000.0)}),
    "publish_markers": (
        "Publish the bodies' shapes and the applied base wrench as a visualization_msgs/MarkerArray on "
        "markers, at markers_rate.", {"type": "bool", "default": True}),
    "marker_wrench_scale": (
        "Length of the wrench arrows on markers [m per N and m per N m], >= 0.",
        {"type": "double", "default": 0.01, "floating_point_range": (0.0, 1.0e6)}),
    "max_wrench": (
        "[force, torque]: largest norms [N, N m] of the applied base wrench's force and torque (a larger one is "
        "scaled down along its direction; counted), each in [1e-9, 1e6 m/s^2 or N m/kg x the model's total "
        "mass]. Empty: [100 m/s^2, 100 N m/kg] times the model's total mass (as controller_node).",
        {"on_change": ("limits", "rate"), "check": "limits", "size": 2, "type": "double[]", "default": ()}),
    "max_effort": (
        "Largest joint effort [N m or N]: one number for every joint or one per joint (joint_names order), each "
        "in [1e-9, 1e6 N m/kg x the total mass]; clipped beyond (counted). Empty: the URDF <limit effort> (at "
        "most that bound), else 100 N m/kg times the total mass (as controller_node).",
        {"on_change": ("limits", "rate"), "type": "double|double[]", "default": ()}),
    "fluid_density": (
        "Density of the water [kg/m^3] for links whose <hydrodynamics> names none; 0 = the robot YAML's "
        "fluid.density, else 1000.",
        {"type": "double", "default": 0.0, "read_only": True, "floating_point_range": (0.0, 1.0e5)}),
    "current": (
        "Uniform ocean current [m/s], world axes: hydrodynamic loads use each link's velocity relative to the "
        "water (mbs_ros.dynamics.model.passive). Settable at run time; no effect without <hydrodynamics>.",
        {"on_change": ("water",), "size": 3, "bound": 100.0, "type": "double[]", "default": (0.0, 0.0, 0.0)}),
    "current_rate": (
        "Rate of change of the current [m/s^2], world axes (the water's acceleration pushes the added mass and "
        "the displaced volume). The current itself changes only when set.",
        {"on_change": ("water",), "size": 3, "bound": 100.0, "type": "double[]", "default": (0.0, 0.0, 0.0)}),
    "environment_temperature": (
        "Temperature theta_0 [K] of the environment the dissipated power goes to, in [1, 1e4]: entropy "
        "production = dissipated power / theta_0 (energy topic).",
        {"type": "double", "default": 288.15, "floating_point_range": (1.0, 1.0e4)}),
    "energy_rate": (
        "Rate of the energy topic (mbs_ros_msgs/EnergyPorts: storages, ports, dissipators, entropy) [Hz], 0 = "
        "off, else in [0.001, physics_rate]. Built only while someone subscribes.",
        {"off": True, "at_most": "physics_rate", "type": "double", "default": 10.0,
         "floating_point_range": (0.0, 100000.0)}),
    "start_paused": (
        "Start paused at t0: the initial state is published (again whenever a new subscriber of the state or a "
        "new command publisher matches) and time stands still until ~/pause false, or ~/step advances it. The "
        "scenario runner starts a lockstep run on simulation time so, and resumes it once the controller holds "
        "its reference.", {"type": "bool", "default": False, "read_only": True}),
    "pause_at": (
        "Pause by itself once the simulation time reaches t0 + pause_at [s], as ~/pause true would: what falls due "
        "at that stamp is published, the state included, and the time stands still until ~/pause false or ~/step. "
        "0 = never, else in [1/physics_rate, 1e9] (one physics step at least). Exactly at t0 + pause_at when it "
        "lies on the physics-step grid (in lockstep: the control-period grid), else at the first step (period) "
        "after it. Settable at run time to a time ahead of the simulation's (one already reached is refused); "
        "~/step does not stop at it. The scenario runner sets it to --duration for a lockstep run on simulation "
        "time (t0 = 0), which so ends at exactly that time.",
        {"on_change": ("pause",), "type": "double", "default": 0.0, "floating_point_range": (0.0, 1.0e9)}),
    "wait_for_command": (
        "Outside lockstep: hold the time at t0, publishing the initial state (again at publish_rate, same "
        "stamp), until the first accepted command, a controller's answer to that state, so a robot under "
        "gravity holds its initial pose while its controller starts. ~/pause ends the wait; with start_paused "
        "it does not apply; lockstep waits for its commands anyway. The shipped parameter files with a "
        "controller set it.",
        {"type": "bool", "default": False, "read_only": True}),
    "sensors": (
        "Simulated sensors (mbs_ros.sensors; docs/dynamics_node.md, Sensors): empty = the robot YAML's "
        "sensors: list when model_file is one that has it, else none; a path (as model_file: share directory, "
        "then the current directory; package:// and file:// URIs) = that sensors file or robot YAML; none = no "
        "sensors. A bad file refuses the start naming file, sensor and key.",
        {"allow_empty": True, "type": "string", "default": "", "read_only": True}),
    "world": (
        "Contact world (docs/contact.md, The world file): ground or seabed, static shapes, free objects and the "
        "robot's URDF <collision> shapes, with exact Coulomb friction. Empty = the robot YAML's world: mapping "
        "when model_file is one that has it, else none; a path (as model_file) = that world file or robot YAML; "
        "none = no world. A bad file refuses the start naming file and key; a world that starts "
        "interpenetrating names the pair and the depth.",
        {"allow_empty": True, "type": "string", "default": "", "read_only": True}),
    "object_mu_scale": (
        "Multiplies every free object's friction coefficient (a pair takes the smaller of its two), in [0, 1e3].",
        {"default": 1.0, "type": "double", "floating_point_range": (0.0, 1.0e3), "read_only": True}),
    "disturbance": (
        "Timed pushes on a floating (se3) base, groups of 8 numbers [start, duration, fx, fy, fz, tx, ty, tz]: from "
        "t0 + start [s] for duration [s] (rounded to whole physics steps, at least one; counted again from a "
        "reset) the wrench [N, N m] in world axes at the base frame's origin, added to the commanded one (its "
        "work is counted with the commands'); empty = none. Start-up only.",
        {"type": "double[]", "default": (), "read_only": True}),
    "friction_scale": (
        "Multiplies every friction coefficient of the contact world (the world file's friction, the ground's, the "
        "static shapes', the robot shapes' and the free objects' mu), in [0, 1000]: a model error for test "
        "campaigns (a pair's mu is the scale times the smaller of its two shapes' mu); 1 = the file's. Start-up "
        "only.",
        {"type": "double", "default": 1.0, "read_only": True, "floating_point_range": (0.0, 1.0e3)}),
    "object_mass_scale": (
        "Multiplies every free object's mass and inertia of the contact world (its volume, so its buoyancy, "
        "unchanged), in [0.001, 1000]: an object heavier or lighter than the world file says, for test campaigns. "
        "Start-up only.",
        {"type": "double", "default": 1.0, "read_only": True, "floating_point_range": (1.0e-3, 1.0e3)}),
    "object_offset": (
        "[dx, dy, dz, dyaw]: every free object of the contact world starts shifted by (dx, dy, dz) [m, world axes] "
        "and turned by dyaw [rad] about the world's z axis through its own centre, each |x| <= 1000; zeros = as the "
        "world file places them. An object then interpenetrating refuses the start (the pair and the depth). "
        "Start-up only.",
        {"size": 4, "bound": 1000.0, "type": "double[]", "default": (0.0, 0.0, 0.0, 0.0), "read_only": True}),
    "joint_limits": (
        "Stop the joints at their URDF <limit lower upper> (unilateral constraints of the contact step, exact "
        "impulses); false = the joints pass their limits as before. Robots only.",
        {"type": "bool", "default": True, "read_only": True}),
}


PARAMETERS = from_pairs(_PAIRS)
