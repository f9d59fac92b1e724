"""reference_node's parameters (see :mod:`mbs_ros.cores.parameters`), with their rules: the waypoint lists'
types, the stamp modes, the bounds (``mbs_ros.cores.params.check_table`` checks them)."""
from __future__ import annotations

from dataclasses import replace

from mbs_ros.cores.parameters import SHARED, from_pairs
from mbs_ros.cores.parameters.dynamics import PARAMETERS as DYNAMICS
from mbs_ros.cores.reference import STAMP_MODES

_LIST = {"default": [], "type": "double[]"}

_PAIRS = {
    "base_times": ("Base waypoint times [s after the start], strictly increasing, >= 0.", _LIST),
    "base_positions": ("Base waypoint positions in world_frame [m]: x, y, z per waypoint, flat.", _LIST),
    "base_rpy": ("Base waypoint roll, pitch, yaw [rad] per waypoint, flat (input only). Empty: zeros.", _LIST),
    "joint_names": ("Joints the joint waypoints give, in order; empty: every joint of joint_states.",
                    {"default": [], "type": "string[]"}),
    "joint_times": ("Joint waypoint times [s after the start], strictly increasing, >= 0.", _LIST),
    "joint_positions": ("Joint waypoint positions [rad or m], one per joint per waypoint, flat, row by row.", _LIST),
    "reference_file": ("YAML file with base/joints/joint_names waypoints (the scenario's reference keys), "
                       "instead of the waypoint parameters.", {"default": "", "allow_empty": True}),
    "stamp": ("state: header.stamp = the newest state's stamp, that state prepended at 0 when the first "
              "waypoint is later; zero: header.stamp 0 (the controller starts it at its newest state).",
              {"default": "state", "choices": STAMP_MODES}),
    "start_time": ("Simulation time [s] the reference starts at, < 2e9 (a stamp's seconds are 32 bits): "
                   "header.stamp = start_time (overrides stamp; no wait for the controller's command); negative: "
                   "not set.", {"default": -1.0, "floating_point_range": (-1.0e9, 2.0e9)}),
    "min_subscribers": ("Publish once every reference topic has this many matched subscriptions (>= 1).",
                        {"default": 1, "minimum": 1.0}),
    "command_timeout": ("Wait at most this long [s, wall clock] for the controller's first command once the rest "
                        "is ready, in [0, 1e6]; then publish anyway, with a warning.",
                        {"default": 10.0, "floating_point_range": (0.0, 1.0e6)}),
    "world_frame": ("header.frame_id of base_reference.", SHARED),
}


PARAMETERS = {n: replace(p, read_only=True) for n, p in from_pairs(_PAIRS, DYNAMICS).items()}
