"""The DDS settings mbs_ros's own launchers give the nodes they start. ROS-free: environment variables only.

``config/fastdds/profile.xml`` is a Fast DDS participant profile that turns XTypes type propagation off
(``fastdds.type_propagation = disabled``). Fast DDS 3.2.3, which the kilted wheels ship, has a race in the
type-lookup service: a reply processed while discovery registers another type request crashes the process
(SIGSEGV in ``TypeLookupManager::notify_callbacks``, on the service's reply thread), about once in 500 node starts
of the test suite's shape. With propagation off no participant asks another for a type, so that code never runs.
ROS 2 loses nothing: rmw_fastrtps registers every message type itself, and endpoints still match by type name and
type hash.

:func:`dds_defaults` points ``FASTDDS_DEFAULT_PROFILES_FILE`` at that profile, unless the user has already chosen
a profile (the variable, its old name, or a ``DEFAULT_FASTDDS_PROFILES.xml`` in the working directory) or another
RMW implementation. ``ros2 launch`` users who want the same set the variable themselves (docs/bringup.md).

A node with real-time scheduling (the dynamics node's ``thread_priority``) is started with
``RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS`` (:data:`REALTIME_ENVIRONMENT`, through
``NodeSpec.environment``; :func:`node_environment` leaves a user's choice alone). rmw_fastrtps publishes
synchronously by default: each ``publish`` sends in the caller's thread, and there it waits for the transport's
locks, which another process's thread may hold (shared memory), up to 8 ms of a callback at the landing of
solo12_stand with 0.3-0.9 ms of CPU in it. Asynchronously the callback only queues the message and Fast DDS's own
thread sends it. Not the default for every node: it costs CPU (Solo12 at 1 kHz: the dynamics node 65 -> 80 % of a
core) and a lockstep run's speed (the 500 Hz bench loop: real-time factor 2.3-2.5 -> 1.7-1.9), a fair price only
where a bounded callback is asked for (docs/dynamics_node.md, "Real-time scheduling").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Iterable, Mapping, MutableMapping, Optional, Tuple

from mbs_ros.packages import package_root

__all__ = ["FASTDDS_PROFILE", "PROFILE_VARIABLE", "PUBLICATION_MODE_VARIABLE", "REALTIME_ENVIRONMENT",
           "fastdds_profile", "dds_defaults", "node_environment", "synchronous_publication"]

PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
FASTDDS_PROFILE = Path("config") / "fastdds" / "profile.xml"
_USER_CHOICES = (PROFILE_VARIABLE, "FASTRTPS_DEFAULT_PROFILES_FILE")
_CWD_PROFILE = "DEFAULT_FASTDDS_PROFILES.xml"  # Fast DDS loads it when the variable is unset
PUBLICATION_MODE_VARIABLE = "RMW_FASTRTPS_PUBLICATION_MODE"  # rmw_fastrtps: SYNCHRONOUS (its default), ASYNCHRONOUS
_QOS_FROM_XML = "RMW_FASTRTPS_USE_QOS_FROM_XML"  # "1": rmw_fastrtps reads no publication mode, the XML decides
#: what a node with real-time scheduling is started with (its publications sent by Fast DDS's thread, not its own)
REALTIME_ENVIRONMENT: Tuple[Tuple[str, str], ...] = ((PUBLICATION_MODE_VARIABLE, "ASYNCHRONOUS"),)


def fastdds_profile() -> Optional[Path]:
    """The shipped profile (source tree, else the installed share directory); None if neither has it."""
    root = package_root()
    path = root / FASTDDS_PROFILE if root is not None else None
    return path if path is not None and path.is_file() else None


def dds_defaults(environ: Optional[MutableMapping[str, str]] = None, cwd: Optional[Path] = None) -> Optional[str]:
    """Set ``FASTDDS_DEFAULT_PROFILES_FILE`` in ``environ`` (default ``os.environ``) to the shipped profile when
    the nodes will run Fast DDS and the user has chosen no profile. Returns the path set, or None (left alone)."""
    env = os.environ if environ is None else environ
    if not _fast_dds(env):
        return None
    if any(env.get(name) for name in _USER_CHOICES):
        return None
    if ((cwd or Path.cwd()) / _CWD_PROFILE).is_file():
        return None
    path = fastdds_profile()
    if path is None:
        return None
    env[PROFILE_VARIABLE] = str(path)
    return str(path)


def _fast_dds(env: Mapping[str, str]) -> bool:
    rmw = env.get("RMW_IMPLEMENTATION", "")
    return not rmw or rmw.startswith("rmw_fastrtps")


def node_environment(entries: Iterable[Tuple[str, str]], environ: Optional[Mapping[str, str]] = None
                     ) -> Dict[str, str]:
    """The ``entries`` (a ``NodeSpec.environment``) a launcher adds to the environment its node inherits from
    ``environ`` (default ``os.environ``): none the user has set already; the Fast DDS publication mode only when
    the nodes run Fast DDS and take the publication mode from it (not ``RMW_FASTRTPS_USE_QOS_FROM_XML=1``)."""
    env = os.environ if environ is None else environ
    out = {}
    for name, value in entries:
        if name in env:
            continue
        if name == PUBLICATION_MODE_VARIABLE and (not _fast_dds(env) or env.get(_QOS_FROM_XML) == "1"):
            continue
        out[name] = value
    return out


def synchronous_publication(rmw_identifier: str, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Why this process's publications are sent in the publishing thread (each ``publish`` waits there for the
    transport), or None when they are not: rmw_fastrtps (``rmw_identifier``) without
    ``RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS`` in ``environ`` (default ``os.environ``), unless its
    publication mode comes from the XML profile. Other middlewares: None (not ours to tell)."""
    env = os.environ if environ is None else environ
    if not rmw_identifier.startswith("rmw_fastrtps") or env.get(_QOS_FROM_XML) == "1":
        return None
    mode = env.get(PUBLICATION_MODE_VARIABLE, "")
    if mode == "ASYNCHRONOUS":
        return None
    return (f"{PUBLICATION_MODE_VARIABLE} is {mode}" if mode else
            f"{PUBLICATION_MODE_VARIABLE} is not set (rmw_fastrtps publishes synchronously by default)")
