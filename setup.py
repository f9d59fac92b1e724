import os
from glob import glob

from setuptools import find_packages, setup

package_name = "mbs_ros"


def tree(src):
    """(install dir, [files]) pairs for every file below src, keeping sub-folders."""
    out = []
    for root, _dirs, files in os.walk(src):
        paths = [os.path.join(root, f) for f in files if not f.startswith(".")]
        if paths:
            out.append((os.path.join("share", package_name, root), paths))
    return out


setup(
    name=package_name,
    version="0.1.0",
    # mbs_ros_msgs/ is a package of its own (ament_cmake, generated Python): never part of this one.
    packages=find_packages(exclude=["test", "test.*", "mbs_ros_msgs", "mbs_ros_msgs.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        *tree("launch"),
        *tree("config"),
    ],
    install_requires=["setuptools", "numpy", "scipy", "transforms3d", "PyYAML", "urdfdom-py", "xacro",
                      "mcap>=1.6", "mcap-ros2-support>=0.6", "matplotlib", "tqdm", "pyarrow", "greenlet>=3"],
    zip_safe=True,
    maintainer="mbs_ros developers",
    maintainer_email="mbs-ros@example.org",
    description="Singularity-free Lie-group rigid-body and multibody dynamics, simulation and control for ROS 2.",
    license="Apache-2.0",
    # ray: the campaigns' optional engine; control: the linear models' export to python-control
    extras_require={"test": ["pytest"], "ray": ["ray~=2.60"], "control": ["control~=0.10.2"]},
    entry_points={
        "console_scripts": [
            "dynamics_node = mbs_ros.nodes.dynamics_node:main",
            "recorder = mbs_ros.recording:main",
            "plot = mbs_ros.plot:main",
            "controller_node = mbs_ros.nodes.controller_node:main",
            "reference_node = mbs_ros.nodes.reference_node:main",
            "estimator_node = mbs_ros.nodes.estimator_node:main",
            "bringup = mbs_ros.bringup.runner:main",
        ],
    },
)
