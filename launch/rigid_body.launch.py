"""One rigid body simulated by mbs_ros/dynamics_node.

    ros2 launch mbs_ros rigid_body.launch.py namespace:=robot1 params_file:=/path/to/params.yaml
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([FindPackageShare("mbs_ros"), "config", "rigid_body.yaml"]),
            description="Parameter file of the dynamics node (see config/rigid_body.yaml for all parameters).",
        ),
        DeclareLaunchArgument(
            "namespace",
            default_value="robot1",
            description="Namespace of the node; also the TF prefix of its base frame (robot1/base_link).",
        ),
        Node(
            package="mbs_ros",
            executable="dynamics_node",
            name="dynamics_node",
            namespace=LaunchConfiguration("namespace"),
            parameters=[LaunchConfiguration("params_file")],
            output="screen",
            emulate_tty=True,
        ),
    ])
