"""The UVMS grasp and carry (issue 30): the BlueROV2 Heavy with the Alpha-5-like arm and its parallel gripper
reaches a handle lying on the seabed, closes the gripper on it, lifts it, carries it 0.5 m and sets it down.

    ros2 launch mbs_ros uvms_grasp.launch.py [scenario:=FILE] [rviz:=true] [rviz_config:=FILE]

Starts the nodes of a scenario (default: config/scenarios/uvms_grasp.yaml, with its world
config/worlds/seabed_handle.yaml; schema in mbs_ros/scenario/schema.py) as mbs_ros.bringup.node_specs gives them:
dynamics_node, controller_node and reference_node in the robot's namespace. These are the nodes `python -m
mbs_ros.bringup uvms_grasp` starts without launch. With rviz:=true, RViz2 shows config/rviz/uvms_grasp.rviz
(looking at the handle, with the contacts and the world's markers) with a display group per robot.
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
            default_value=PathJoinSubstitution([share, "config", "scenarios", "uvms_grasp.yaml"]),
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
            description="RViz2 configuration file; empty: config/rviz/uvms_grasp.rviz with a display group per "
                        "robot.",
        ),
        OpaqueFunction(function=launch_setup, kwargs={"kind": "uvms_grasp"}),
    ])
