"""Scenario bring-up: scenario YAML -> node specs, shared by the launch files and the no-launch runner.

- :mod:`mbs_ros.scenario.schema`: the scenario schema (docs/bringup.md), :func:`load_scenario`,
  :func:`node_specs`, :func:`record_topics`. ROS-free.
- :mod:`mbs_ros.bringup.runner`: ``python -m mbs_ros.bringup SCENARIO [--duration S] [--record FILE]
  [--plot DIR]``: the same nodes as real processes (``python -m mbs_ros.nodes.X --ros-args …``), stopped
  cleanly, with recording and plots.
- :mod:`mbs_ros.bringup.rviz`: RViz configurations for a scenario's namespaces, from ``config/rviz/*.rviz``.
- :mod:`mbs_ros.bringup.launch_actions`: what the launch files in ``launch/`` call (imports ``launch``/``launch_ros``
  only there).
"""

from mbs_ros.scenario.schema import (  # noqa: F401
    DEFAULT_RECORD,
    NodeSpec,
    Robot,
    Scenario,
    ScenarioError,
    Waypoint,
    list_scenarios,
    load_scenario,
    node_specs,
    package_root,
    record_topics,
    resolve_path,
    scenario_path,
)

__all__ = ["DEFAULT_RECORD", "NodeSpec", "Robot", "Scenario", "ScenarioError", "Waypoint", "list_scenarios",
           "load_scenario", "node_specs", "package_root", "record_topics", "resolve_path", "scenario_path"]
