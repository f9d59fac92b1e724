"""A vehicle-manipulator (SE(3) underwater vehicle + 6-DOF arm), its controller and its references.

    ros2 launch mbs_ros vehicle_manipulator.launch.py [scenario:=FILE] [rviz:=true] [rviz_config:=FILE]
    ros2 launch mbs_ros vehicle_manipulator.launch.py scenario:=<share>/config/scenarios/scara.yaml

(<share> = $(ros2 pkg prefix mbs_ros)/share/mbs_ros; scara.yaml: the SCARA under a Schoenflies carriage.)

Starts the nodes of a scenario (default: config/scenarios/vehicle_manipulator.yaml; schema in
mbs_ros/scenario/schema.py) as mbs_ros.bringup.node_specs gives them: per robot dynamics_node, controller_node
and reference_node, in the robot's namespace. These are the nodes `python -m mbs_ros.bringup
vehicle_manipulator` starts without launch. With rviz:=true, RViz2 shows config/rviz/vehicle_manipulator.rviz
with a display group per robot.
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
            default_value=PathJoinSubstitution([share, "config", "scenarios", "vehicle_manipulator.yaml"]),
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
            description="RViz2 configuration file; empty: config/rviz/vehicle_manipulator.rviz with a display group "
                        "per robot.",
        ),
        OpaqueFunction(function=launch_setup, kwargs={"kind": "vehicle_manipulator"}),
    ])
