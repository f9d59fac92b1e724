"""A fleet of N namespaced vehicle-manipulators (uvms1 ... uvmsN), each with its controller and reference.

    ros2 launch mbs_ros fleet.launch.py [scenario:=FILE] [rviz:=true] [rviz_config:=FILE] [count:=N]

Starts the nodes of a scenario (default: config/scenarios/fleet.yaml; schema in
mbs_ros/scenario/schema.py) as mbs_ros.bringup.node_specs gives them: per robot dynamics_node, controller_node
and reference_node, in the robot's namespace. These are the nodes `python -m mbs_ros.bringup fleet` starts
without launch. With rviz:=true, RViz2 shows config/rviz/fleet.rviz with a display group per robot.
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
            default_value=PathJoinSubstitution([share, "config", "scenarios", "fleet.yaml"]),
            description="Scenario file (robots, models, initial states, controllers, references, rates; schema in "
                        "mbs_ros/scenario/schema.py).",
        ),
        DeclareLaunchArgument(
            "count",
            default_value="3",
            description="Number of vehicle-manipulators (namespaces uvms1 ... uvmsN, 4 m apart in y).",
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
            description="RViz2 configuration file; empty: config/rviz/fleet.rviz with a display group per "
                        "robot.",
        ),
        OpaqueFunction(function=launch_setup, kwargs={"kind": "fleet", "fleet": True}),
    ])
