"""Message types as a recording names them: the definition text rosbag2 stores as a schema (from the installed
``.msg``/``.idl`` files), type names checked against the ament index before anything is imported, and offered QoS
profiles as rosbag2's metadata text. Reads index files only: no ROS graph, no rclpy."""

from __future__ import annotations

import functools
import importlib
import re
import sys
from pathlib import Path
from typing import Iterable, Optional, Tuple



# ------------------------------------------------------------------------------ message definitions

class DefinitionNotFound(LookupError):
    """No installed ``.msg``/``.idl`` file defines the type (or a type it depends on)."""


# As rosbag2_cpp/message_definitions/local_message_definition_source.cpp: type names (pkg/Type or
# pkg/msg/Type), field types in .msg text ("foo_msgs/Bar" in "foo_msgs/Bar[] bar"), .idl includes.
_PACKAGE_TYPENAME = re.compile(r"^([a-zA-Z0-9_]+)/(?:msg/|srv/)?([a-zA-Z0-9_]+)$")
_MSG_FIELD_TYPE = re.compile(r"(?:^|\n)\s*([a-zA-Z0-9_/]+)(?:\[[^\]]*\])?\s+")
_IDL_INCLUDE = re.compile(r"(?:^|\n)#include\s+(?:\"|<)([a-zA-Z0-9_/]+)\.idl(?:\"|>)")
_PRIMITIVES = frozenset({"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
                         "int32", "uint32", "int64", "uint64", "string"})
_DELIMITER = "=" * 80 + "\n"


def _share_directory(package: str) -> Optional[Path]:
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(package))
    except (LookupError, OSError, ImportError):  # not in the index, or AMENT_PREFIX_PATH unset
        pass
    candidate = Path(sys.prefix) / "share" / package  # a venv holding the ROS 2 wheels
    return candidate if candidate.is_dir() else None


@functools.lru_cache(maxsize=None)
def _definition_file(type_name: str, extension: str) -> Tuple[str, str]:
    """(text of the .msg/.idl file, package) of ``pkg/Type`` or ``pkg/msg/Type``."""
    m = _PACKAGE_TYPENAME.match(type_name)
    if not m:
        raise DefinitionNotFound(f"type name {type_name!r} not understood")
    package, name = m.groups()
    share = _share_directory(package)
    path = share / "msg" / (name + extension) if share is not None else None
    if path is None or not path.is_file():
        raise DefinitionNotFound(f"no {extension} file for {type_name} (package {package!r} share: {share})")
    return path.read_text(encoding="utf-8"), package


def _dependencies(text: str, package: str, extension: str) -> list:
    if extension == ".idl":
        return sorted(set(_IDL_INCLUDE.findall(text)))
    deps = set()
    for t in _MSG_FIELD_TYPE.findall(text):
        if t not in _PRIMITIVES:
            deps.add(t if "/" in t else f"{package}/{t}")
    return sorted(deps)  # rosbag2 keeps them in a std::set


@functools.lru_cache(maxsize=None)
def message_definition(type_name: str) -> Tuple[str, str]:
    """``(encoding, text)`` of the full definition of ``pkg/msg/Type``, as rosbag2 stores it in MCAP.

    The type's ``.msg`` text, then for each dependency not yet included (depth first, dependencies of
    a type in sorted order) a blank line, 80 ``=``, ``MSG: pkg/Type`` and its text; encoding
    ``ros2msg``. If any ``.msg`` is missing, the same from ``.idl`` files (``IDL:`` delimiters, one
    before the root too) with encoding ``ros2idl``. Raises :class:`DefinitionNotFound`.
    """
    for extension, encoding, tag in ((".msg", "ros2msg", "MSG: "), (".idl", "ros2idl", "IDL: ")):
        seen = set()

        def append(name: str, depth: int) -> str:
            if depth <= 0:
                raise DefinitionNotFound(f"dependencies of {type_name} nest too deeply")
            text, package = _definition_file(name, extension)
            out = text
            for dep in _dependencies(text, package, extension):
                if dep not in seen:
                    seen.add(dep)
                    out += "\n" + _DELIMITER + tag + dep + "\n" + append(dep, depth - 1)
            return out

        try:
            text = append(type_name, 50)
        except DefinitionNotFound as e:
            error = e
            continue
        if extension == ".idl":
            text = _DELIMITER + tag + type_name + "\n" + text
        return encoding, text
    raise DefinitionNotFound(f"{type_name}: {error}")


class UnknownMessageType(LookupError):
    """Not the name of a message type of an installed ROS interface package (nothing was imported)."""


# ROS 2 names: packages as REP 144 (lowercase, digits, underscores, a letter first), types as rosidl (PascalCase)
_ROS_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*$")
_ROS_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def _interface_listing(package: str) -> Optional[str]:
    """The package's ``rosidl_interfaces`` resource (its interface files, one a line) from the ament index, or
    None if the index does not list the package as an interface package. Reads index files only."""
    try:
        from ament_index_python import get_resource
        return get_resource("rosidl_interfaces", package)[0]
    except Exception:  # noqa: BLE001 - not in the index, AMENT_PREFIX_PATH unset, or no ament_index_python
        pass
    # a venv holding the ROS 2 wheels, used without AMENT_PREFIX_PATH
    path = Path(sys.prefix) / "share" / "ament_index" / "resource_index" / "rosidl_interfaces" / package
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else None
    except OSError:
        return None


def resolve_message_type(type_name: str) -> Tuple[str, str]:
    """``(package, Type)`` of ``pkg/msg/Type`` (or ``pkg/Type``) if the ament index lists ``msg/Type.msg`` or
    ``msg/Type.idl`` among the interfaces of ``pkg``; :class:`UnknownMessageType` otherwise. Imports nothing:
    a name seen in the ROS graph is checked here before anything is imported for it."""
    parts = type_name.split("/") if isinstance(type_name, str) else []
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or parts[1] != "msg":
        raise UnknownMessageType(f"{type_name!r} is not a message type name (expected pkg/msg/Type)")
    package, _, name = parts
    if not _ROS_PACKAGE.match(package) or not _ROS_TYPE.match(name):
        raise UnknownMessageType(f"{type_name!r} is not a ROS 2 message type name (package: lowercase, "
                                 "digits and _; type: PascalCase)")
    listing = _interface_listing(package)
    if listing is None:
        raise UnknownMessageType(f"{package!r} is not an installed ROS interface package (not in the ament "
                                 "index's rosidl_interfaces)")
    files = {line.strip() for line in listing.splitlines()}
    if f"msg/{name}.msg" not in files and f"msg/{name}.idl" not in files:
        raise UnknownMessageType(f"the interface package {package!r} has no message {name!r}")
    return package, name


def message_class(type_name: str):
    """The Python class of ``pkg/msg/Type`` (also ``pkg/Type``), imported from ``pkg.msg`` only once the ament
    index confirms that ``pkg`` is an installed interface package defining ``Type``
    (:func:`resolve_message_type`); raises :class:`UnknownMessageType` (a ``LookupError``) otherwise."""
    package, name = resolve_message_type(type_name)
    try:
        module = importlib.import_module(f"{package}.msg")
    except ImportError as e:
        raise UnknownMessageType(f"{package}.msg cannot be imported ({e}): the package's Python part is "
                                 "not installed") from None
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and cls.__module__.startswith(f"{package}.msg")
            and hasattr(cls, "get_fields_and_field_types")):
        raise UnknownMessageType(f"{package}.msg has no message class {name!r}")
    return cls


def _normalise_type(type_name) -> str:
    """``pkg/msg/Type`` from a class, ``pkg/Type`` or ``pkg/msg/Type``."""
    if not isinstance(type_name, str):
        module = type_name.__module__.split(".")  # nav_msgs.msg._odometry
        return f"{module[0]}/{module[1]}/{type_name.__name__}"
    parts = type_name.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else type_name


# ------------------------------------------------------------------------------------- QoS as rosbag2

def _duration_yaml(d) -> str:
    ns = max(0, d.nanoseconds if hasattr(d, "nanoseconds") else int(d))  # infinite: 2^63 - 1, as rmw's
    return f"\n    sec: {ns // 1_000_000_000}\n    nsec: {ns % 1_000_000_000}"


def qos_profiles_yaml(profiles: Iterable) -> str:
    """rosbag2's ``offered_qos_profiles`` text (metadata version 9: policies by name) of rclpy QoS profiles."""
    def name(policy) -> str:
        return policy.name.lower() if hasattr(policy, "name") else str(policy)

    items = []
    for p in profiles:
        items.append(
            f"- history: {name(p.history)}\n  depth: {int(p.depth)}\n  reliability: {name(p.reliability)}\n"
            f"  durability: {name(p.durability)}\n  deadline:{_duration_yaml(p.deadline)}\n"
            f"  lifespan:{_duration_yaml(p.lifespan)}\n  liveliness: {name(p.liveliness)}\n"
            f"  liveliness_lease_duration:{_duration_yaml(p.liveliness_lease_duration)}\n"
            f"  avoid_ros_namespace_conventions: {'true' if p.avoid_ros_namespace_conventions else 'false'}")
    return "\n".join(items) if items else "[]"
