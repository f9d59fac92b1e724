"""The ROV landing on a sloped seabed (issue 30): the BlueROV2 Heavy, thrusters off, sinks onto a seabed sloped by
10 deg, rests there by static friction and takes off under thrust at 10 s.

    ros2 launch mbs_ros rov_landing.launch.py [scenario:=FILE] [rviz:=true] [rviz_config:=FILE]

Starts the nodes of a scenario (default: config/scenarios/rov_landing.yaml, with its world
config/worlds/sloped_seabed.yaml; schema in mbs_ros/scenario/schema.py) as mbs_ros.bringup.node_specs gives them:
dynamics_node, controller_node and reference_node in the robot's namespace. These are the nodes `python -m
mbs_ros.bringup rov_landing` starts without launch. With rviz:=true, RViz2 shows config/rviz/rov_landing.rviz
(looking at the seabed) with a display group per robot.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from mbs_ros.bringup.launch_actions import launch_setup


def generate_launch_description():
    share = FindPackageShare("mbs_ros")
    return LaunchDescription([
        DeclareLaunchArgument(
            "scenario",
            default_value=PathJoinSubstitution([share, "config", "scenarios", "rov_landing.yaml"]),
            description="Scenario file (robots, models, initial states, controllers, references, rates; schema in "
                        "mbs_ros/scenario/schema.py).",
        ),
        DeclareLaunchArgument(
            "rviz",
            default_value="false",
            choices=["true", "false"],
            description="Open RViz2 (fixed frame world; TF, robot models, odometry paths and markers).",
        ),
        DeclareLaunchArgument(
            "rviz_config",
            default_value="",
            description="RViz2 configuration file; empty: config/rviz/rov_landing.rviz with a display group per "
                        "robot.",
        ),
        OpaqueFunction(function=launch_setup, kwargs={"kind": "rov_landing"}),
    ])
