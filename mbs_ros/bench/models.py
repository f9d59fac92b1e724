"""The benchmark's robots, each as one URDF text that ours, Pinocchio and MuJoCo all load.

- ``arm6``: the 6-DOF arm on a fixed base (``config/robots/arm_6dof_fixed.yaml``, gravity on);
- ``uvms``: the same arm under its box vehicle on SE(3) (``config/robots/uvms_6dof.yaml``, 12 DOF, gravity 0);
- ``ur5`` / ``ur5_ff``: the UR5 of example-robot-data (``ur5_robot.urdf``), fixed, and as a free-flyer (its
  ``world`` link removed, the root ``base_link`` on SE(3));
- ``chainN``: N revolute links in series, tilted axes, offset full inertias (fixed base, gravity on);
- ``treeN``: N revolute links in a binary tree (link k hangs from link (k-1)//2, link 0 the fixed base).

Visuals and collisions are dropped from every URDF (meshes are not needed for dynamics, and MuJoCo would try to
load them). Fixed joints merge into their parent in all three (ours and Pinocchio merge inertias; MuJoCo's URDF
compiler fuses static bodies, its default for URDF).
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from mbs_ros.dynamics import Model

ROOT = Path(__file__).resolve().parents[2]
ROBOTS = ROOT / "config" / "robots"
UR5_IN_ERD = "robots/ur_description/urdf/ur5_robot.urdf"


@dataclasses.dataclass
class Case:
    key: str
    label: str
    model: Model
    nbodies: int  # moving bodies (joints + the floating base)

    @property
    def urdf(self) -> str:
        """The URDF text the peers load: ``model.urdf`` (what ours was built from) without visuals."""
        return strip_urdf(self.model.urdf)


def strip_urdf(xml: str, drop_world: bool = False) -> str:
    """``xml`` without visuals, collisions and comments; ``drop_world``: also without a root link named
    ``world`` and the fixed joints hanging from it (so that the next link can float)."""
    root = ET.fromstring(xml)
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for e in link.findall(tag):
                link.remove(e)
    for tag in ("gazebo", "transmission"):
        for e in root.findall(tag):
            root.remove(e)
    if drop_world:
        for link in root.findall("link"):
            if link.get("name") == "world":
                root.remove(link)
        for joint in root.findall("joint"):
            parent = joint.find("parent")
            if parent is not None and parent.get("link") == "world":
                root.remove(joint)
    return ET.tostring(root, encoding="unicode")


def _inertial(xyz="0.1 0.02 0"):
    return (f'<inertial><origin xyz="{xyz}" rpy="0 0 0"/><mass value="1.0"/>'
            '<inertia ixx="0.01" ixy="0.001" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial>')


def _axis(rng):
    a = rng.normal(size=3)
    a /= np.linalg.norm(a)
    return " ".join(repr(float(x)) for x in a)


def chain_urdf(n: int, seed: int = 1) -> str:
    """A serial chain of ``n`` revolute joints with tilted axes and offset inertias."""
    rng = np.random.default_rng(seed)
    parts = [f'<robot name="chain{n}"><link name="base_link">{_inertial()}</link>']
    for k in range(1, n + 1):
        parent = "base_link" if k == 1 else f"l{k - 1}"
        parts.append(f'<link name="l{k}">{_inertial()}</link><joint name="j{k:04d}" type="revolute">'
                     f'<parent link="{parent}"/><child link="l{k}"/><origin xyz="0.2 0 0.05" rpy="0 0.1 0"/>'
                     f'<axis xyz="{_axis(rng)}"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return "".join(parts) + "</robot>"


def tree_urdf(n: int, seed: int = 2) -> str:
    """A binary tree of ``n`` revolute joints: link k (1..n) hangs from link (k-1)//2, link 0 being the base;
    siblings branch to either side."""
    rng = np.random.default_rng(seed)
    parts = [f'<robot name="tree{n}"><link name="base_link">{_inertial()}</link>']
    for k in range(1, n + 1):
        p = (k - 1) // 2
        parent = "base_link" if p == 0 else f"l{p}"
        side = 0.08 if k % 2 else -0.08
        parts.append(f'<link name="l{k}">{_inertial()}</link><joint name="j{k:04d}" type="revolute">'
                     f'<parent link="{parent}"/><child link="l{k}"/><origin xyz="0.2 {side} 0.05" rpy="0 0.1 0"/>'
                     f'<axis xyz="{_axis(rng)}"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return "".join(parts) + "</robot>"


def erd_path(relpath: str) -> tuple[Path | None, str]:
    """A file of example-robot-data (``robots/...``; the PyPI wheel ships the robots as data under its cmeel
    prefix; older versions also have a Python module with ``getModelPath``), or ``(None, reason)``."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    candidates = []
    if dist is not None:
        candidates.append(Path(dist.locate_file(f"cmeel.prefix/share/example-robot-data/{relpath}")))
    try:
        import example_robot_data as erd  # noqa: F401 - only its path helper

        candidates.append(Path(erd.getModelPath(relpath)) / relpath)
    except Exception:  # noqa: BLE001 - not installed, or a version without the module
        pass
    for c in candidates:
        if c.is_file():
            return c, ""
    if dist is None and not candidates:
        return None, "example-robot-data is not installed (pip install example-robot-data)"
    return None, f"example-robot-data has no {relpath}"


def ur5_path() -> tuple[Path | None, str]:
    """The UR5 URDF of example-robot-data, or ``(None, reason)``."""
    return erd_path(UR5_IN_ERD)


def build(key: str) -> Case:
    """The case named ``key`` (arm6, uvms, ur5, ur5_ff, chainN, treeN); FileNotFoundError for a missing UR5."""
    if key == "arm6":
        m = Model.from_yaml(ROBOTS / "arm_6dof_fixed.yaml")
        return Case(key, "6-DOF arm, fixed base", m, m.nv)
    if key == "uvms":
        m = Model.from_yaml(ROBOTS / "uvms_6dof.yaml")
        return Case(key, "SE(3) vehicle + 6-DOF arm", m, m.nv - 5)
    if key in ("ur5", "ur5_ff"):
        path, why = ur5_path()
        if path is None:
            raise FileNotFoundError(why)
        ff = key == "ur5_ff"
        m = Model.from_urdf(strip_urdf(path.read_text(), drop_world=ff), base="se3" if ff else "fixed")
        return Case(key, "UR5 free-flyer" if ff else "UR5, fixed base", m, m.nv - 5 if ff else m.nv)
    if key.startswith("chain"):
        n = int(key[5:])
        return Case(key, f"chain of {n}", Model.from_urdf(chain_urdf(n)), n)
    if key.startswith("tree"):
        n = int(key[4:])
        return Case(key, f"binary tree of {n}", Model.from_urdf(tree_urdf(n)), n)
    raise KeyError(key)

