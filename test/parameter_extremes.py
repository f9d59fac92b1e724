"""Every numeric parameter of the nodes at its extremes, written out from the parameter tables' descriptions and
docs/*_node.md (not computed by the code under test): the lowest and highest value a node takes and a value just
outside on each side, which it refuses. Shared by the unit tests of the settings and the ROS tests, which set
them at start-up and at run time.

The single rigid body runs at physics_rate 1000 Hz with mass 1 kg (max_wrench: [1e-9, 1e6 x 1 kg]); the arm is
config/robots/arm_2link_planar.yaml (13.5 kg: max_effort up to 1.35e7 N m). Each row: (name, lowest, highest,
just below, just above); None where a side has no bound (just below: none for max_mass_ratio's unbounded top).
"""

# dynamics_node, settable at run time (on the single body at 1000 Hz)
DYNAMICS_RUNTIME = [
    ("mass", 1e-6, 1e9, 0.99e-6, 1.01e9),
    ("publish_rate", 0.1, 1000.0, 0.099, 1000.5),
    ("wrench_rate", 1e-3, 1000.0, 0.9e-3, 1000.5),  # 0 = off is accepted too
    ("markers_rate", 1e-3, 1000.0, 0.9e-3, 1000.5),
    ("contacts_rate", 1e-3, 1000.0, 0.9e-3, 1000.5),  # 0 = off is accepted too
    ("diagnostics_rate", 1e-3, 1000.0, 0.9e-3, 1000.5),
    ("energy_rate", 1e-3, 1000.0, 0.9e-3, 1000.5),
    ("cmd_timeout", 1e-3, 60.0, 0.9e-3, 60.5),  # one physics step at least; 0 at start-up only
    ("real_time_factor", 1e-3, 1e6, 0.9e-3, 1.1e6),  # 0 = as fast as possible is accepted too
    ("marker_wrench_scale", 0.0, 1e6, -1e-9, 1.1e6),
    ("environment_temperature", 1.0, 1e4, 0.999, 1.0001e4),
]

# dynamics_node, vectors settable at run time (single body): (name, lowest, highest, just below, just above)
DYNAMICS_RUNTIME_VECTORS = [
    ("inertia", [1e-12, 0.0, 0.0, 1e-12, 0.0, 1e-12], [1e9, 0.0, 0.0, 1e9, 0.0, 1e9],
     [0.9e-12, 0.0, 0.0, 0.9e-12, 0.0, 0.9e-12], [1.1e9, 0.0, 0.0, 1.1e9, 0.0, 1.1e9]),
    ("com", [-1e3, 0.0, 0.0], [1e3, 1e3, 1e3], [-1000.5, 0.0, 0.0], [1000.5, 0.0, 0.0]),
    ("gravity", [0.0, 0.0, 0.0], [0.0, 0.0, -1e3], None, [0.0, 600.0, -800.5]),
    ("current", [-100.0, -100.0, -100.0], [100.0, 100.0, 100.0], [-100.5, 0.0, 0.0], [0.0, 0.0, 100.5]),
    ("current_rate", [-100.0, 0.0, 0.0], [100.0, 100.0, 100.0], [-100.5, 0.0, 0.0], [0.0, 100.5, 0.0]),
    ("initial_position", [-1e6, -1e6, -1e6], [1e6, 1e6, 1e6], [-1.000001e6, 0.0, 0.0], [0.0, 0.0, 1.000001e6]),
    ("initial_rpy", [-1e3, 0.0, 0.0], [1e3, 1e3, 1e3], [-1000.5, 0.0, 0.0], [0.0, 1000.5, 0.0]),
    ("max_wrench", [1e-9, 1e-9], [1e6, 1e6], [0.9e-9, 1.0], [1.0, 1.01e6]),
]

# dynamics_node, start-up only (read-only): physics_rate's lowest needs every rate at most 1 Hz
DYNAMICS_STARTUP = [
    ("physics_rate", 1.0, 1e5, 0.99, 1.01e5),
    ("control_rate", 1e-3, 1e5, 0.9e-3, 1.01e5),
    ("fluid_density", 0.0, 1e5, -1e-9, 1.01e5),
    ("object_mass_scale", 1e-3, 1e3, 0.9e-3, 1.01e3),
    ("object_mu_scale", 0.0, 1e3, -1e-9, 1.01e3),
    ("max_mass_ratio", 0.0, 1e300, -1e-9, None),
    ("thread_priority", 0.0, 98.0, -1.0, 99.0),  # SCHED_FIFO 98 where the system allows it, else a warning
]

# pause_at (single body at 1000 Hz: one physics step at least): at run time only a time ahead of the simulation's is
# taken, so its lowest is a start-up value (a node started with it pauses 1 ms in)
PAUSE_AT = ("pause_at", 1e-3, 1e9, 0.9e-3, 1.01e9)

# the arm's joints: max_effort (13.5 kg: at most 1.35e7 N m)
ARM_EFFORT = ("max_effort", 1e-9, 1.35e7, 0.9e-9, 1.36e7)

# controller_node (every parameter start-up only), on the single body, control_rate 100 Hz, not lockstep
CONTROLLER = [
    ("mass", 1e-6, 1e9, 0.99e-6, 1.01e9),
    ("mass_scale", 1e-3, 1e3, 0.9e-3, 1.1e3),
    ("kp", 1e-300, 1e9, None, 1.1e9),  # a gain must be > 0: 0 is refused by the law
    ("kd", 1e-300, 1e9, None, 1.1e9),
    ("lambda", 1e-300, 1e9, None, 1.1e9),
    ("lqr_q_position", 1e-300, 1e9, None, 1.1e9),  # weights of law lqr: each in (0, 1e9], as the gains
    ("lqr_q_velocity", 1e-300, 1e9, None, 1.1e9),
    ("lqr_r", 1e-300, 1e9, None, 1.1e9),
    ("lqr_redesign_threshold", 1e-9, 1e6, 0.9e-9, 1.01e6),
    ("control_rate", 1e-3, 1e5, 0.9e-3, 1.01e5),  # state_timeout must then be >= 1/control_rate: set with it
    ("state_timeout", 0.01, 1e6, 0.0099, 1.01e6),  # at least one control period (100 Hz)
    ("max_time_jump", 0.1, 1e6, 0.099, 1.01e6),
    ("max_mass_ratio", 0.0, 1e300, -1e-9, None),
    ("goal_time_tolerance", 0.0, 1e6, -1e-9, 1.01e6),
    ("stopped_velocity_tolerance", 0.0, 1e6, -1e-9, 1.01e6),
    ("idle_until", 0.0, 1e9, -1e-9, 1.01e9),
    ("gripper_max_effort", 1e-6, 1e6, 0.9e-6, 1.01e6),
    ("gripper_speed", 1e-6, 1e3, 0.9e-6, 1.01e3),
    ("gripper_gain", 0.0, 1e9, -1e-9, 1.01e9),
    ("gripper_damping", 0.0, 1e9, -1e-9, 1.01e9),
]

# controller_node's payload (a robot's: a link of it holds the payload): payload_mass > 0 needs payload_link, so its
# highest is set with the arm's link2 (test/ros: the arm's stand-law controller), its lowest (0 = none) alone
PAYLOAD_MASS = ("payload_mass", 0.0, 1e6, -1e-9, 1.01e6)
PAYLOAD_HIGHEST = dict(payload_mass=PAYLOAD_MASS[2], payload_link="link2", payload_inertia=[1e6, 1e6, 1e6],
                       payload_com=[10.0, -10.0, 10.0])

CONTROLLER_VECTORS = [
    ("com", [1e3, 0.0, 0.0], [1e3, 1e3, 1e3], None, [1000.5, 0.0, 0.0]),
    ("gravity", [0.0, 0.0, 0.0], [0.0, 0.0, -1e3], None, [0.0, 0.0, -1000.5]),
    ("inertia", [1e-12, 0.0, 0.0, 1e-12, 0.0, 1e-12], [1e9, 0.0, 0.0, 1e9, 0.0, 1e9],
     [0.9e-12, 0.0, 0.0, 0.9e-12, 0.0, 0.9e-12], [1.1e9, 0.0, 0.0, 1.1e9, 0.0, 1.1e9]),
    ("max_wrench", [1e-9, 1e-9], [1e6, 1e6], [0.9e-9, 1.0], [1.0, 1.01e6]),
]

# what a value just outside is refused with: the parameter's name (rclpy's range refusal names it too)


def cases(rows):
    """``(name, value, accepted)`` for every row: lowest and highest accepted, just below and above refused."""
    out = []
    for name, lo, hi, below, above in rows:
        out += [(name, lo, True), (name, hi, True)]
        out += [(name, v, False) for v in (below, above) if v is not None]
    return out


# disturbance (start-up, a floating se3 base only: the single body of 1 kg at 1000 Hz): groups of 8 [start [s],
# duration [s], fx, fy, fz [N], tx, ty, tz [N m]]; start in [0, 1e9], duration in [one physics step, 1e9], each
# wrench component at most 1e6 N/kg (N m/kg) x the total mass (docs/dynamics_node.md; mbs_ros/cores/dynamics.py's
# refusals): the lowest a push of one step at t0, the highest two groups at the bounds (the second from 1e9 s)
DISTURBANCE = ("disturbance",
               [0.0, 1e-3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
               [0.0, 1e-3, 1e6, -1e6, 1e6, -1e6, 1e6, -1e6, 1e9, 1e9, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6],
               [-1e-9, 1e-3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
               [0.0, 1e-3, 1.000001e6, 0.0, 0.0, 0.0, 0.0, 0.0])

# the contact parameters on a robot with a contact world (the puck on the ground beside a crate: test/ros): the
# run-time rows that apply to a robot (mass, inertia, com and max_wrench are a single body's or depend on its mass)
ROBOT_RUNTIME = [r for r in DYNAMICS_RUNTIME if r[0] != "mass"]
ROBOT_RUNTIME_VECTORS = [r for r in DYNAMICS_RUNTIME_VECTORS if r[0] in ("gravity", "current", "current_rate",
                                                                         "initial_position", "initial_rpy")]
HAND_WRITTEN = {"dynamics": {r[0] for r in DYNAMICS_RUNTIME + DYNAMICS_RUNTIME_VECTORS + DYNAMICS_STARTUP
                             + [PAUSE_AT, ARM_EFFORT, DISTURBANCE]},
                "controller": {r[0] for r in CONTROLLER + CONTROLLER_VECTORS + [PAYLOAD_MASS]}}


def table_rows(role):
    """``(name, lowest, highest, single_body)`` of every number of the node's parameter table
    (mbs_ros/cores/parameters) with a declared range that no hand-written row above covers: a parameter added
    later is taken to its range's ends by the ROS start-up test without an edit here (no crash, nothing
    non-finite published: the properties checked there, not computed by the table). Its refusals just outside
    need a hand-written row.
    ``single_body``: a single body's parameter (else a robot's or both: taken on the 2-link arm)."""
    from mbs_ros.cores.parameters import table

    out = []
    for name, p in table(role).items():
        if name in HAND_WRITTEN[role] or p.range is None or p.type not in ("double", None):
            continue
        if not isinstance(p.default, float) or isinstance(p.default, bool):
            continue
        lo, hi = (float(x) for x in p.range)
        if p.minimum is not None:
            lo = max(lo, float(p.minimum) * (1.0 + 1e-9) if p.minimum_open else float(p.minimum))
        out.append((name, lo, hi, bool(p.single_body)))
    return out
