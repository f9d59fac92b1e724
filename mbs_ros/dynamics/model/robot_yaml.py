"""A small YAML schema for robots, read by :meth:`mbs_ros.dynamics.Model.from_yaml`: a reference to a URDF or
xacro file, or the robot inline (links, joints, and optionally bodies in water, joint springs/friction and
thrusters), turned into URDF text (``RobotConfig.urdf``) so that everything downstream sees one format. A broken file
raises :class:`RobotConfigError` naming the file and the key. The schema with examples: docs/robot_yaml.md.
"""
from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from mbs_ros import yamlschema
from mbs_ros.yamlfile import YamlFileError, read_yaml, shown

__all__ = ["RobotConfig", "RobotConfigError", "load_robot", "robot_to_urdf"]

_BASES = ("fixed", "se3", "schoenflies", "se2", "so3", "so3xr3")
_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


class RobotConfigError(ValueError):
    """A robot YAML file that does not follow the schema; the message names the file and the key."""


@dataclass(frozen=True)
class RobotConfig:
    name: str
    base: str
    gravity: tuple
    urdf: str  # URDF XML text
    fluid_density: float | None = None


class Reader(yamlschema.Reader):
    """The schema reader (:class:`mbs_ros.yamlschema.Reader`) as the robot YAML and the sensors files phrase it:
    ``FILE: KEY: expected ...``, with ``minimum``/``positive`` bounds and the model's names."""

    def __init__(self, path, where: str = "", error=None):
        super().__init__(str(path), wording="expected", where=where,
                         error=error or (lambda p, k, r: RobotConfigError(f"{p}: {k}: {r}" if k else f"{p}: {r}")))

    def at(self, where: str) -> "Reader":
        """The same file's reader for the part ``where`` (e.g. ``"sensors[2] (dvl)"``)."""
        return type(self)(self.path, where)

    def number(self, value, key, minimum=None, positive=False):
        v = super().number(value, key, 0.0 if positive else None, lo_open=positive)
        if minimum is not None and v < minimum:
            self.fail(key, self._want(f"a number >= {minimum:g}", value))
        return v

    def integer(self, value, key, minimum=None):
        return self.whole(value, key, minimum, floats=True)

    def name(self, value, key):
        return self.text(value, key)

    def model_name(self, value, key):
        """A robot, link, joint, thruster or sensor name: :func:`mbs_ros.dynamics.model.urdf.model_name_problem` (which
        the URDF built here passes again), checked before any message quotes it."""
        from mbs_ros.dynamics.model.urdf import model_name_problem

        problem = model_name_problem(self.name(value, key))
        if problem is not None:
            self.fail(key, problem)
        return value


_Reader = Reader


def load_robot(path) -> RobotConfig:
    """Read and check a robot YAML file (see the module docstring)."""
    r = _Reader(path)
    try:  # one line, never the content: UTF-8/16/32 by their byte-order mark, the place of a YAML error
        doc = read_yaml(path)
    except YamlFileError as exc:
        raise RobotConfigError(str(exc)) from None
    if not isinstance(doc, dict) or "robot" not in doc:
        r.fail("robot", "missing (the file must have a top-level 'robot' mapping)")
    robot = r.mapping(doc["robot"], "robot",
                      ("name", "base", "gravity", "urdf", "xacro_args", "links", "joints", "fluid", "hydrodynamics",
                       "joint_dynamics", "thrusters", "sensors", "environment"))  # the last two: mbs_ros.sensors.spec
    base = r.choice(robot.get("base", "fixed"), "robot.base", _BASES)
    gravity = tuple(r.numbers(robot.get("gravity", [0.0, 0.0, -9.81]), "robot.gravity", 3))
    has_file, has_inline = "urdf" in robot, ("links" in robot or "joints" in robot)
    if has_file == has_inline:
        r.fail("robot", "give either 'urdf' (a URDF/xacro file) or 'links' and 'joints' (inline), not both")
    if has_file:
        cfg = _from_file(r, robot, base, gravity)
    else:
        default = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.basename(str(path)))[0])[:64]
        name = r.model_name(robot.get("name", default), "robot.name")
        cfg = RobotConfig(name, base, gravity, robot_to_urdf(r, name, robot))
    density = None
    if "fluid" in robot:
        fluid = r.mapping(robot["fluid"], "robot.fluid", ("density",))
        if "density" in fluid:
            density = r.number(fluid["density"], "robot.fluid.density", positive=True)
    xml = _with_passive(r, robot, cfg.urdf)
    return RobotConfig(cfg.name, cfg.base, cfg.gravity, xml, density)


def _with_passive(r, robot, xml: str) -> str:
    """``xml`` with the robot's ``hydrodynamics``, ``joint_dynamics`` and ``thrusters`` as URDF extension elements
    (:mod:`mbs_ros.dynamics.model.passive`); unchanged when it has none."""
    if not any(k in robot for k in ("hydrodynamics", "joint_dynamics", "thrusters")):
        return xml
    root = ET.fromstring(xml)
    links = {el.get("name"): el for el in root.findall("link")}
    joints = {el.get("name"): el for el in root.findall("joint")}
    hydro = robot.get("hydrodynamics", {})
    r.mapping(hydro, "robot.hydrodynamics", tuple(links))
    for lname, h in hydro.items():
        key = f"robot.hydrodynamics.{lname}"
        h = r.mapping(h, key, ("origin", "added_mass", "linear_damping", "quadratic_damping", "volume",
                               "center_of_buoyancy", "density"))
        old = links[lname].find("hydrodynamics")
        if old is not None:
            links[lname].remove(old)
        el = ET.SubElement(links[lname], "hydrodynamics")
        if "density" in h:
            el.set("density", repr(r.number(h["density"], f"{key}.density", positive=True)))
        if "origin" in h:
            xyz, rpy = _origin(r, h["origin"], f"{key}.origin")
            ET.SubElement(el, "origin", xyz=_fmt(xyz), rpy=_fmt(rpy))
        for k, sizes in (("added_mass", (6, 36)), ("linear_damping", (6, 36)), ("quadratic_damping", (6,))):
            if k in h:
                v = h[k]
                if not isinstance(v, (list, tuple)) or len(v) not in sizes:
                    r.fail(f"{key}.{k}", f"expected {' or '.join(map(str, sizes))} numbers, got {shown(v)}")
                ET.SubElement(el, k).text = _fmt(r.numbers(v, f"{key}.{k}", len(v)))
        if "volume" in h or "center_of_buoyancy" in h:
            ET.SubElement(el, "buoyancy", volume=repr(r.number(h.get("volume", 0.0), f"{key}.volume", minimum=0.0)),
                          xyz=_fmt(r.numbers(h.get("center_of_buoyancy", [0, 0, 0]), f"{key}.center_of_buoyancy",
                                             3)))
    jd = robot.get("joint_dynamics", {})
    r.mapping(jd, "robot.joint_dynamics", tuple(joints))
    names = {"damping": "damping", "friction": "friction", "friction_velocity": "friction_velocity",
             "stiffness": "spring_stiffness", "rest": "spring_reference"}
    for jname, d in jd.items():
        key = f"robot.joint_dynamics.{jname}"
        d = r.mapping(d, key, tuple(names))
        el = joints[jname].find("dynamics")
        if el is None:
            el = ET.SubElement(joints[jname], "dynamics")
        for k, attr in names.items():
            if k in d:
                el.set(attr, repr(r.number(d[k], f"{key}.{k}", minimum=None if k == "rest" else 0.0)))
    thrusters = robot.get("thrusters", [])
    if not isinstance(thrusters, list):
        r.fail("robot.thrusters", "expected a list of thrusters")
    for i, t in enumerate(thrusters):
        key = f"robot.thrusters[{i}]"
        t = r.mapping(t, key, ("name", "link", "position", "direction", "min_thrust", "max_thrust",
                               "time_constant"), ("name", "link", "direction"))
        if r.model_name(t["link"], f"{key}.link") not in links:
            r.fail(f"{key}.link", f"no link named {t['link']!r}")
        el = ET.SubElement(root, "thruster", name=r.model_name(t["name"], f"{key}.name"), link=t["link"])
        ET.SubElement(el, "origin", xyz=_fmt(r.numbers(t.get("position", [0, 0, 0]), f"{key}.position", 3)))
        d = r.numbers(t["direction"], f"{key}.direction", 3)
        if math.hypot(*d) < 1e-12:
            r.fail(f"{key}.direction", "must be a non-zero vector")
        ET.SubElement(el, "axis", xyz=_fmt(d))
        lim = {}
        if "min_thrust" in t:
            lim["lower"] = repr(r.number(t["min_thrust"], f"{key}.min_thrust"))
        if "max_thrust" in t:
            lim["upper"] = repr(r.number(t["max_thrust"], f"{key}.max_thrust"))
        if lim:
            ET.SubElement(el, "limit", **lim)
        if "time_constant" in t:
            ET.SubElement(el, "time_constant", value=repr(r.number(t["time_constant"], f"{key}.time_constant",
                                                                   minimum=0.0)))
    return ET.tostring(root, encoding="unicode")


def _from_file(r, robot, base, gravity) -> RobotConfig:
    from mbs_ros.dynamics.model.urdf import load_urdf_xml

    rel = r.name(robot["urdf"], "robot.urdf")
    full = rel if os.path.isabs(rel) else os.path.join(os.path.dirname(os.path.abspath(r.path)), rel)
    if not os.path.isfile(full):
        r.fail("robot.urdf", f"file not found: {full}")
    args = robot.get("xacro_args", {})
    if not isinstance(args, dict):
        r.fail("robot.xacro_args", "expected a mapping of xacro arguments")
    try:
        xml = load_urdf_xml(full, mappings=args)
    except Exception as exc:  # xacro reports its own errors
        r.fail("robot.urdf", f"{type(exc).__name__}: {exc}")
    name = robot.get("name")
    if name is not None:
        r.model_name(name, "robot.name")
    return RobotConfig(name or "", base, gravity, xml)


def _fmt(xs):
    return " ".join(repr(float(x)) for x in xs)


def _origin(r, value, key):
    o = r.mapping(value, key, ("xyz", "rpy"))
    return r.numbers(o.get("xyz", [0, 0, 0]), f"{key}.xyz", 3), r.numbers(o.get("rpy", [0, 0, 0]), f"{key}.rpy", 3)


def _inertia(r, value, key):
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(row, (list, tuple)) for row in value):
        m = [r.numbers(row, f"{key}[{i}]", 3) for i, row in enumerate(value)]
        if any(abs(m[i][j] - m[j][i]) > 1e-12 * max(1.0, abs(m[i][j])) for i in range(3) for j in range(3)):
            r.fail(key, "the 3x3 inertia must be symmetric")
        return [m[0][0], m[0][1], m[0][2], m[1][1], m[1][2], m[2][2]]
    if not isinstance(value, (list, tuple)) or len(value) != 6:
        r.fail(key, f"expected 6 numbers [ixx, ixy, ixz, iyy, iyz, izz] or a 3x3 list, got {shown(value)}")
    return r.numbers(value, key, 6)


def _visual(r, value, key, link_el):
    v = r.mapping(value, key, ("box", "cylinder", "sphere", "origin"))
    shapes = [k for k in ("box", "cylinder", "sphere") if k in v]
    if len(shapes) != 1:
        r.fail(key, "expected exactly one of box, cylinder, sphere")
    vis = ET.SubElement(link_el, "visual")
    if "origin" in v:
        xyz, rpy = _origin(r, v["origin"], f"{key}.origin")
        ET.SubElement(vis, "origin", xyz=_fmt(xyz), rpy=_fmt(rpy))
    geom = ET.SubElement(vis, "geometry")
    shape = shapes[0]
    k = f"{key}.{shape}"
    if shape == "box":
        size = r.numbers(v["box"], k, 3)
        if min(size) <= 0:
            r.fail(k, "box sizes must be positive")
        ET.SubElement(geom, "box", size=_fmt(size))
    elif shape == "cylinder":
        c = r.mapping(v["cylinder"], k, ("radius", "length"), ("radius", "length"))
        ET.SubElement(geom, "cylinder", radius=repr(r.number(c["radius"], f"{k}.radius", positive=True)),
                      length=repr(r.number(c["length"], f"{k}.length", positive=True)))
    else:
        s = r.mapping(v["sphere"], k, ("radius",), ("radius",))
        ET.SubElement(geom, "sphere", radius=repr(r.number(s["radius"], f"{k}.radius", positive=True)))


def robot_to_urdf(r: _Reader, name: str, robot: dict) -> str:
    """URDF XML of an inline robot (checked key by key)."""
    root = ET.Element("robot", name=name)
    links = robot.get("links")
    joints = robot.get("joints", [])
    if not isinstance(links, list) or not links:
        r.fail("robot.links", "expected a non-empty list of links")
    if not isinstance(joints, list):
        r.fail("robot.joints", "expected a list of joints")
    link_names = []
    for i, link in enumerate(links):
        key = f"robot.links[{i}]"
        link = r.mapping(link, key, ("name", "mass", "com", "inertia", "visual"), ("name",))
        lname = r.model_name(link["name"], f"{key}.name")
        if lname in link_names:
            r.fail(f"{key}.name", f"link {lname!r} defined twice")
        link_names.append(lname)
        el = ET.SubElement(root, "link", name=lname)
        mass = r.number(link.get("mass", 0.0), f"{key}.mass", minimum=0.0)
        if mass > 0:
            inertial = ET.SubElement(el, "inertial")
            ET.SubElement(inertial, "origin", xyz=_fmt(r.numbers(link.get("com", [0, 0, 0]), f"{key}.com", 3)),
                          rpy="0 0 0")
            ET.SubElement(inertial, "mass", value=repr(mass))
            if "inertia" not in link:
                r.fail(f"{key}.inertia", "missing (a link with mass needs its inertia about the c.o.m.)")
            ixx, ixy, ixz, iyy, iyz, izz = _inertia(r, link["inertia"], f"{key}.inertia")
            ET.SubElement(inertial, "inertia", ixx=repr(ixx), ixy=repr(ixy), ixz=repr(ixz), iyy=repr(iyy),
                          iyz=repr(iyz), izz=repr(izz))
        elif "inertia" in link or "com" in link:
            r.fail(f"{key}.mass", "missing or 0 while com/inertia are given")
        if "visual" in link:
            _visual(r, link["visual"], f"{key}.visual", el)
    joint_names, children = [], {}
    for i, joint in enumerate(joints):
        key = f"robot.joints[{i}]"
        joint = r.mapping(joint, key, ("name", "type", "parent", "child", "origin", "axis", "limit"),
                          ("name", "type", "parent", "child"))
        jname = r.model_name(joint["name"], f"{key}.name")
        if jname in joint_names:
            r.fail(f"{key}.name", f"joint {jname!r} defined twice")
        joint_names.append(jname)
        jtype = r.choice(joint["type"], f"{key}.type", _JOINT_TYPES)
        for role in ("parent", "child"):
            if r.model_name(joint[role], f"{key}.{role}") not in link_names:
                r.fail(f"{key}.{role}", f"no link named {joint[role]!r} in robot.links")
        if joint["child"] in children:
            r.fail(f"{key}.child", f"link {joint['child']!r} is already the child of joint {children[joint['child']]!r}")
        children[joint["child"]] = jname
        el = ET.SubElement(root, "joint", name=jname, type=jtype)
        ET.SubElement(el, "parent", link=joint["parent"])
        ET.SubElement(el, "child", link=joint["child"])
        if "origin" in joint:
            xyz, rpy = _origin(r, joint["origin"], f"{key}.origin")
            ET.SubElement(el, "origin", xyz=_fmt(xyz), rpy=_fmt(rpy))
        if jtype != "fixed":
            if "axis" not in joint:
                r.fail(f"{key}.axis", "missing (a movable joint needs its axis)")
            axis = r.numbers(joint["axis"], f"{key}.axis", 3)
            if math.hypot(*axis) < 1e-12:
                r.fail(f"{key}.axis", "must be a non-zero vector")
            ET.SubElement(el, "axis", xyz=_fmt(axis))
        lim = joint.get("limit")
        if lim is not None or jtype in ("revolute", "prismatic"):
            lim = r.mapping(lim or {}, f"{key}.limit", ("lower", "upper", "effort", "velocity"))
            vals = {k: r.number(lim.get(k, d), f"{key}.limit.{k}")
                    for k, d in (("lower", -math.pi), ("upper", math.pi), ("effort", 1e6), ("velocity", 1e6))}
            ET.SubElement(el, "limit", **{k: repr(v) for k, v in vals.items()})
    roots = [n for n in link_names if n not in children]
    if len(roots) != 1:
        r.fail("robot.joints", f"the links must form one tree; roots found: {roots}")
    return ET.tostring(root, encoding="unicode")
