"""Topic groups in a scenario's ``record:`` list, expanded per robot into the topics that robot's nodes publish:

- ``contacts/*``: with a contact world (the dynamics node's ``world``), ``contacts/<link>`` of every link with a
  collision shape, ``contacts/markers`` and ``world/markers`` (docs/contact.md, On ROS); nothing without one;
- ``sensors/*``: every topic of its sensors (``sensors/<name>``, a pressure sensor's ``/depth``, a DVL's
  ``/beams``, a foot contact sensor's ``/contact``); nothing without sensors.

So a scenario records its contact forces and sensors without naming each link or sensor (the free objects'
poses are on ``/tf``, recorded by name). ROS-free.
"""
from __future__ import annotations

from typing import List, Optional

__all__ = ["GROUPS", "expand_record"]

GROUPS = ("contacts/*", "sensors/*")


def expand_record(scenario, topics: Optional[List[str]]) -> Optional[List[str]]:
    """``topics`` (absolute names, :func:`mbs_ros.scenario.schema.record_topics`; None: every topic) with each
    robot's groups (module docstring) replaced by their topics, in order, without repeats."""
    if topics is None:
        return None
    from mbs_ros.bringup.foxglove_layout import contact_topics, sensor_topics

    groups = {}
    for r in scenario.robots:
        groups[f"{r.namespace}/contacts/*"] = lambda r=r: contact_topics(r)
        groups[f"{r.namespace}/sensors/*"] = lambda r=r: sensor_topics(r, scenario.physics_rate)
    out: List[str] = []
    for t in topics:
        out += groups[t]() if t in groups else [t]
    return list(dict.fromkeys(out))
