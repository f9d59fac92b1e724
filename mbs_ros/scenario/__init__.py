"""The scenario schema, ROS-free: a ``config/scenarios/*.yaml`` file read and checked into node specs.

:mod:`mbs_ros.scenario.schema` loads a scenario (:func:`load_scenario`) and turns it into the nodes' specs
(:func:`node_specs`); :mod:`~mbs_ros.scenario.base` holds the data and the keys, :mod:`~mbs_ros.scenario.robot`
one robot's keys against its model, :mod:`~mbs_ros.scenario.overrides` ``--set`` overrides. The launch files, the
runner (:mod:`mbs_ros.bringup`), the headless run and the campaigns all read scenarios through it. docs/bringup.md.
"""
from mbs_ros.scenario.schema import *  # noqa: F401,F403 - the schema's public names, importable from the package
from mbs_ros.scenario.schema import __all__  # noqa: F401
