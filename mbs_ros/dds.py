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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import MutableMapping, Optional

from mbs_ros.packages import package_root

__all__ = ["FASTDDS_PROFILE", "PROFILE_VARIABLE", "fastdds_profile", "dds_defaults"]

PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
FASTDDS_PROFILE = Path("config") / "fastdds" / "profile.xml"
_USER_CHOICES = (PROFILE_VARIABLE, "FASTRTPS_DEFAULT_PROFILES_FILE")
_CWD_PROFILE = "DEFAULT_FASTDDS_PROFILES.xml"  # Fast DDS loads it when the variable is unset


def fastdds_profile() -> Optional[Path]:
    """The shipped profile (source tree, else the installed share directory); None if neither has it."""
    root = package_root()
    path = root / FASTDDS_PROFILE if root is not None else None
    return path if path is not None and path.is_file() else None


def dds_defaults(environ: Optional[MutableMapping[str, str]] = None, cwd: Optional[Path] = None) -> Optional[str]:
    """Set ``FASTDDS_DEFAULT_PROFILES_FILE`` in ``environ`` (default ``os.environ``) to the shipped profile when
    the nodes will run Fast DDS and the user has chosen no profile. Returns the path set, or None (left alone)."""
    env = os.environ if environ is None else environ
    rmw = env.get("RMW_IMPLEMENTATION", "")
    if rmw and not rmw.startswith("rmw_fastrtps"):
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
