"""What the launch files in ``launch/`` call: the scenario's node specs as ``launch_ros.actions.Node`` actions.

Only this module (and the launch files) import ``launch``/``launch_ros``; the specs come from
:func:`mbs_ros.bringup.node_specs`, the same function the no-launch runner uses. Each launch file declares its
arguments (``scenario``, ``rviz``, ``rviz_config``, and ``count`` for fleets) and hands them to
:func:`launch_setup` through an ``OpaqueFunction``.
"""

from __future__ import annotations

from typing import List, Optional

from mbs_ros.bringup import rviz as rviz_configs
from mbs_ros.dds import node_environment
from mbs_ros.scenario.schema import NodeSpec, Scenario, load_scenario, node_specs

__all__ = ["TRUE", "FALSE", "node_action", "rviz_action", "launch_setup", "scenario_from_context"]

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")


def _flag(text: str, name: str) -> bool:
    value = text.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"launch argument {name}:={text!r}: expected true or false")


def node_action(spec: NodeSpec):
    """``launch_ros.actions.Node`` of one spec (the node's console script, its name, namespace, parameters, and the
    environment variables of its spec that the launch's own environment does not set)."""
    from launch_ros.actions import Node

    return Node(package=spec.package, executable=spec.executable, name=spec.name, namespace=spec.namespace,
                parameters=[dict(spec.parameters)], remappings=list(spec.remappings), output="screen",
                emulate_tty=True, additional_env=node_environment(spec.environment) or None)


def rviz_action(scenario: Scenario, kind: str, config: str = ""):
    """RViz2 with ``config`` (a path), or with ``config/rviz/<kind>.rviz`` rendered for the scenario's robots."""
    from launch_ros.actions import Node

    path = config.strip() or str(rviz_configs.write_config(rviz_configs.template_path(kind),
                                                           [r.namespace for r in scenario.robots]))
    parameters = [{"use_sim_time": True}] if scenario.sim_time else []
    return Node(package="rviz2", executable="rviz2", name="rviz2", arguments=["-d", path],
                parameters=parameters, output="screen")


def scenario_from_context(context, fleet: bool = False) -> Scenario:
    from launch.substitutions import LaunchConfiguration

    path = LaunchConfiguration("scenario").perform(context)
    count: Optional[int] = None
    if fleet:
        text = LaunchConfiguration("count").perform(context).strip()
        try:
            count = int(text)
        except ValueError:
            raise ValueError(f"launch argument count:={text!r}: expected a whole number >= 1") from None
    return load_scenario(path, count=count)


def launch_setup(context, kind: str, fleet: bool = False) -> List:
    """The ``OpaqueFunction`` body of every launch file: load the scenario named by the ``scenario`` argument
    (with ``count`` copies per fleet template for a fleet), one Node per spec, and RViz if ``rviz:=true``."""
    from launch.substitutions import LaunchConfiguration

    scenario = scenario_from_context(context, fleet)
    actions = [node_action(spec) for spec in node_specs(scenario)]
    if _flag(LaunchConfiguration("rviz").perform(context), "rviz"):
        actions.append(rviz_action(scenario, kind, LaunchConfiguration("rviz_config").perform(context)))
    return actions
