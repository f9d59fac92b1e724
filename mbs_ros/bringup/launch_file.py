"""``python -m mbs_ros.bringup.launch_file FILE [NAME:=VALUE ...]``: run a launch file as ``ros2 launch`` does,
where ``launch`` and ``launch_ros`` are installed but ``ros2cli`` (the ``ros2`` command) is not, e.g. in the venv
(README, "ROS-native").

FILE is a path, or the name of a file in mbs_ros's ``share/mbs_ros/launch`` (found through the ament index, as
``ros2 launch mbs_ros FILE`` does). ``--show-args`` lists the launch arguments and starts nothing. Ctrl-C stops
the launch and its nodes. Exit code: the launch service's; 2 when ``launch`` is not installed or FILE is not found.
"""

from __future__ import annotations

import argparse
import os
import sys


def _launch():
    """The ``launch`` package, or None. A checkout's ``launch/`` folder (the launch files, no ``__init__.py``)
    imports as an empty namespace package where ``launch`` is not installed."""
    try:
        import launch
    except ImportError:
        return None
    return launch if hasattr(launch, "LaunchService") else None


def resolve(name: str) -> str:
    """A launch file's path: ``name`` itself when it exists, else ``<share of mbs_ros>/launch/<name>``."""
    if os.path.isfile(name):
        return os.path.abspath(name)
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        path = os.path.join(get_package_share_directory("mbs_ros"), "launch", name)
    except PackageNotFoundError:
        raise FileNotFoundError(f"{name}: no such file, and mbs_ros is not on AMENT_PREFIX_PATH") from None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{name}: neither a file nor in {os.path.dirname(path)}")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbs_ros.bringup.launch_file", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a launch file, or its name in share/mbs_ros/launch (e.g. vehicle.launch.py)")
    ap.add_argument("arguments", nargs="*", metavar="NAME:=VALUE", help="launch arguments")
    ap.add_argument("--show-args", action="store_true", help="list the launch arguments and exit")
    args = ap.parse_args(argv)
    bad = [a for a in args.arguments if ":=" not in a]
    if bad:
        ap.error(f"launch arguments are NAME:=VALUE, not {bad}")
    launch = _launch()
    if launch is None:
        print("launch is not installed: ROS 2's launch and launch_ros are not on PyPI (README, \"ROS-native\"); "
              "python -m mbs_ros.bringup runs the same scenarios without them", file=sys.stderr)
        return 2
    try:
        path = resolve(args.file)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import AnyLaunchDescriptionSource, get_launch_description_from_any_launch_file

    if args.show_args:
        for a in get_launch_description_from_any_launch_file(path).get_launch_arguments():
            default = "".join(s.describe() for s in a.default_value) if a.default_value else "(required)"
            print(f"'{a.name}':\n    {a.description}\n    (default: {default})")
        return 0
    service = launch.LaunchService(argv=args.arguments)
    service.include_launch_description(launch.LaunchDescription([IncludeLaunchDescription(
        AnyLaunchDescriptionSource(path), launch_arguments=[tuple(a.split(":=", 1)) for a in args.arguments])]))
    return service.run()


if __name__ == "__main__":
    sys.exit(main())
