"""A legged robot on the ground (a contact world), its controller and its joint reference.

    ros2 launch mbs_ros legged.launch.py [scenario:=FILE] [rviz:=true] [rviz_config:=FILE]

Starts the nodes of a scenario (default: config/scenarios/solo12_stand.yaml, Solo12 dropped onto the ground,
standing under joint PD + gravity compensation and pushed at 2 s; schema in mbs_ros/scenario/schema.py) as
mbs_ros.bringup.node_specs gives them: per robot dynamics_node, controller_node and reference_node, in the robot's
namespace. These are the nodes `python -m mbs_ros.bringup solo12_stand` starts without launch. With rviz:=true,
RViz2 shows config/rviz/legged.rviz with a display group per robot (its model, path, markers, the contact points
and forces, and the world's shapes).
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
            default_value=PathJoinSubstitution([share, "config", "scenarios", "solo12_stand.yaml"]),
            description="Scenario file (robots, models, initial states, controllers, references, rates, the "
                        "contact world; schema in mbs_ros/scenario/schema.py).",
        ),
        DeclareLaunchArgument(
            "rviz",
            default_value="false",
            choices=["true", "false"],
            description="Open RViz2 (fixed frame world; TF, robot models, odometry paths, markers, contacts and "
                        "the world's shapes).",
        ),
        DeclareLaunchArgument(
            "rviz_config",
            default_value="",
            description="RViz2 configuration file; empty: config/rviz/legged.rviz with a display group per robot.",
        ),
        OpaqueFunction(function=launch_setup, kwargs={"kind": "legged"}),
    ])
