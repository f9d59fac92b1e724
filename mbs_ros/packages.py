"""``package://`` and ``file://`` URIs, resolved as ROS tools resolve them. ROS-free.

A ``package://PKG/PATH`` URI names ``PATH`` inside PKG's share directory. The share directory is looked up:

1. through the ament index (``ament_index_python``, over ``AMENT_PREFIX_PATH``) — what RViz and
   ``robot_state_publisher`` use;
2. then in the prefixes pip wheels install into without registering them on ``AMENT_PREFIX_PATH``: cmeel's
   ``site-packages/cmeel.prefix`` (Pinocchio's and example-robot-data's wheels; it is an ament prefix, with
   ``share/ament_index``), looked up as ``<prefix>/share/PKG``.

A package found only by step 2 loads here, but RViz will not find its meshes unless that prefix is added to
``AMENT_PREFIX_PATH`` (:func:`describe_lookup` says so). ``file:///abs/path`` is the absolute path; any other
string is a plain path (relative ones against a given directory).
"""

from __future__ import annotations

import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple
from urllib.parse import unquote, urlparse

__all__ = ["Resolved", "resolve_uri", "share_directory", "pip_prefixes", "is_uri", "package_root"]


@dataclass(frozen=True)
class Resolved:
    """``path``: the existing file (None if the URI does not resolve); ``ament``: False when the package was found
    only outside the ament index (RViz will not find it); ``reason``: why it did not resolve (one line)."""

    path: Optional[str]
    ament: bool = True
    reason: str = ""


def package_root() -> Optional[Path]:
    """The directory holding mbs_ros's ``config/`` and ``launch/``: the source tree, else the installed share
    directory (None if neither)."""
    here = Path(__file__).resolve().parents[1]
    if (here / "config").is_dir():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("mbs_ros"))
    except Exception:  # noqa: BLE001 - no ament index or package not installed
        return None


def is_uri(text: str) -> bool:
    return text.startswith(("package://", "file://"))


def pip_prefixes() -> List[str]:
    """Install prefixes of pip wheels that do not register themselves on AMENT_PREFIX_PATH (cmeel's)."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    dirs += [p for p in sys.path if p.endswith("site-packages")]
    out = []
    for d in dirs:
        prefix = os.path.join(d, "cmeel.prefix")
        if os.path.isdir(os.path.join(prefix, "share")) and prefix not in out:
            out.append(prefix)
    return out


def share_directory(package: str) -> Tuple[Optional[str], bool, List[str]]:
    """``(share directory or None, found through the ament index, places tried)``."""
    tried = []
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        tried.append("the ament index (ament_index_python is not installed)")
    else:
        try:
            return get_package_share_directory(package), True, tried
        except (PackageNotFoundError, LookupError, ValueError, OSError):  # OSError: AMENT_PREFIX_PATH unset
            tried.append("the ament index (AMENT_PREFIX_PATH)")
    for prefix in pip_prefixes():
        share = os.path.join(prefix, "share", package)
        tried.append(share)
        if os.path.isdir(share):
            return share, False, tried
    return None, False, tried


def resolve_uri(uri: str, base_dir: Optional[str] = None) -> Resolved:
    """The file a ``package://``/``file://`` URI or a path names (see the module docstring)."""
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        package, _, rel = rest.partition("/")
        if not package or not rel:
            return Resolved(None, reason=f"{uri!r}: expected package://PACKAGE/PATH")
        share, ament, tried = share_directory(package)
        if share is None:
            return Resolved(None, reason=f"package {package!r} not found (looked in {', '.join(tried)})")
        path = os.path.join(share, unquote(rel))
        if not os.path.isfile(path):
            return Resolved(None, ament, f"{rel!r} not found in package {package!r} ({share})")
        return Resolved(path, ament)
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            return Resolved(None, reason=f"{uri!r}: only local file:// URIs (file:///absolute/path)")
        path = unquote(parsed.path)
    else:
        path = os.path.expanduser(uri)
        if not os.path.isabs(path) and base_dir is not None:
            path = os.path.join(base_dir, path)
    if not os.path.isfile(path):
        return Resolved(None, reason=f"{path} not found")
    return Resolved(os.path.abspath(path))
