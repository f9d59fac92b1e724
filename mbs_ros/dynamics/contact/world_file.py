"""A scenario's world from YAML: the ground or seabed, static shapes, free objects, and which of the robot's URDF
``<collision>`` shapes take part (``docs/contact.md``, "The world file"). ROS-free.

The file (or a robot YAML's ``world:`` key) holds one mapping::

    world:
      margin: 0.001              # [m] > 0: contacts within it are rows of the step (default 1 mm)
      friction: 0.8              # mu of the robot's shapes and of every shape that gives none (default 0.8)
      robot_collision: true      # the robot's URDF <collision> shapes (default true)
      self_collision: false      # pairs of the robot's own links (adjacent ones and the SRDF's never)
      srdf: robot.srdf           # <disable_collisions> pairs (relative to the world file)
      ground: {height: 0.0, normal: [0, 0, 1], mu: 0.8}
      static:                    # world-fixed shapes: box [x, y, z] | sphere r | cylinder [r, length]
        - {name: wall, box: [0.1, 2.0, 1.0], xyz: [1.5, 0, 0.5], rpy: [0, 0, 0], mu: 0.5}
      robot_shapes:              # shapes on the robot's links beside (or instead of) its URDF <collision>, e.g.
        - {name: foot, link: FL_FOOT, sphere: 0.02, xyz: [0, 0, 0], group: 1, mask: 4294967295}
      objects:                   # free bodies on SO(3)xR3 (exact rolling on the group, docs/contact.md)
        - {name: crate, box: [0.2, 0.2, 0.2], mass: 2.0, xyz: [1, 0, 0.1], rpy: [0, 0, 0],
           velocity: [0, 0, 0, 0, 0, 0], inertia: [ixx, iyy, izz], mu: 0.6, fluid_density: 1000,
           drag: {cd: 1.0}}

An object's inertia defaults to the solid shape's of its mass; ``fluid_density`` [kg/m^3] (default: the robot YAML's
``fluid.density`` when the world is in one, else none) gives it buoyancy ``ρ V g`` at its centre (a homogeneous,
fully immersed body: the centre of buoyancy is the centre of mass), so it moves under ``g (1 − ρ V / m)``.
``drag: {cd: C_d}`` (with a fluid density) gives it quadratic drag, ``½ ρ C_d A |u| u`` along each of its axes with
``A`` the shape's area projected across that axis, and the turning drag of strip theory (Fossen 2021, as the arm's
links in config/robots/bluerov2_heavy.urdf.xacro), in the object model's ``<hydrodynamics>``
(:func:`drag_coefficients`), so wherever the object is integrated (free flight, the contact step) it is there.
Every error names the file and the key (``world.objects[1].mass``), never the file's content.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from mbs_ros.yamlfile import YamlFileError, read_yaml, shown
from mbs_ros.yamlschema import Reader

__all__ = ["WorldSpec", "load_world", "build_world", "drag_coefficients", "WORLD_KEYS"]

WORLD_KEYS = ("margin", "friction", "robot_collision", "self_collision", "srdf", "ground", "static", "objects",
              "robot_shapes")
SHAPE_KINDS = ("box", "sphere", "cylinder", "capsule")
MASK_BITS = 0xFFFFFFFF
MAX_SHAPES = 1000


@dataclass
class WorldSpec:
    """What a world file says, checked: ``path`` the file, the rest as its keys (shapes as dicts)."""

    path: str
    margin: float
    friction: float
    robot_collision: bool
    self_collision: bool
    srdf: Optional[str]
    ground: Optional[dict]
    static: list
    objects: list
    robot_shapes: list


def _fail(path, key, reason):
    raise YamlFileError(path, f"{key}: {reason}")


def _reader(path) -> Reader:
    """The schema reader (:class:`mbs_ros.yamlschema.Reader`) raising YamlFileError ``FILE: KEY: reason``."""
    return Reader(path, error=lambda p, k, reason: YamlFileError(p, f"{k}: {reason}"))


def _number(path, key, value, low=-math.inf, high=math.inf, low_open=False):
    return _reader(path).number(value, key, None if low == -math.inf else low, low_open,
                                None if high == math.inf else high)


def _vector(path, key, value, n, low=-math.inf, low_open=False, high=1e6):
    if not isinstance(value, (list, tuple)) or len(value) != n:
        _fail(path, key, f"must be a list of {n} numbers, got {shown(value)}")
    return [_number(path, f"{key}[{i}]", x, low, high, low_open) for i, x in enumerate(value)]


def _mapping(path, key, value, allowed):
    if not isinstance(value, dict):
        _fail(path, key, f"must be a mapping, got {shown(value)}")
    return _reader(path).mapping(value, key, allowed)


def _shape(path, key, item, extra):
    kinds = [k for k in SHAPE_KINDS if k in item]
    if len(kinds) != 1:
        _fail(path, key, f"needs exactly one of {', '.join(SHAPE_KINDS)}")
    kind = kinds[0]
    if kind == "box":
        size = _vector(path, f"{key}.box", item["box"], 3, 0.0, low_open=True)
    elif kind == "sphere":
        size = [_number(path, f"{key}.sphere", item["sphere"], 0.0, 1e6, low_open=True)]
    else:
        size = _vector(path, f"{key}.{kind}", item[kind], 2, 0.0, low_open=True)
    name = item.get("name")
    if not (isinstance(name, str) and name and len(name) <= 128 and name.replace("_", "a").replace("-", "a").isalnum()):
        _fail(path, f"{key}.name", f"must be a name (letters, digits, _ and -), got {shown(name)}")
    out = {"name": name, "kind": kind, "size": size,
           "xyz": _vector(path, f"{key}.xyz", item.get("xyz", [0.0, 0.0, 0.0]), 3),
           "rpy": _vector(path, f"{key}.rpy", item.get("rpy", [0.0, 0.0, 0.0]), 3, high=1e3),
           "mu": None if "mu" not in item else _number(path, f"{key}.mu", item["mu"], 0.0, 1e3)}
    for bits in ("group", "mask"):  # collision bits: two shapes touch when a.group & b.mask and b.group & a.mask
        value = item.get(bits, MASK_BITS if bits == "mask" else 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MASK_BITS:
            _fail(path, f"{key}.{bits}", f"must be a whole number in [0, {MASK_BITS}], got {shown(value)}")
        out[bits] = value
    for k, check in extra.items():
        out[k] = check(item.get(k), f"{key}.{k}")
    return out


def _volume(kind, size):
    if kind == "box":
        return size[0] * size[1] * size[2]
    if kind == "sphere":
        return 4.0 / 3.0 * math.pi * size[0] ** 3
    return math.pi * size[0] ** 2 * size[1]


def _solid_inertia(kind, size, m):
    """Principal moments of a homogeneous solid about its centre (the shape's axes; a cylinder along z)."""
    if kind == "box":
        a, b, c = size
        return [m * (b * b + c * c) / 12.0, m * (a * a + c * c) / 12.0, m * (a * a + b * b) / 12.0]
    if kind == "sphere":
        return [0.4 * m * size[0] ** 2] * 3
    r, h = size
    side = m * (3.0 * r * r + h * h) / 12.0
    return [side, side, 0.5 * m * r * r]


def drag_coefficients(kind, size, rho, cd):
    """The diagonal quadratic damping ``[X_u|u|, Y_v|v|, Z_w|w|, K_p|p|, M_q|q|, N_r|r|]`` (positive, Fossen's
    notation) of a box, sphere or cylinder (along z) at its centre: translation ``½ ρ C_d A`` with ``A`` the area
    projected across the axis; turning ``ρ C_d w L⁴ / 64`` per strip of length L and width w swept across by the
    turn (``∫ ½ ρ C_d w |xω| xω x dx`` over the strip); a sphere does not turn the water (0), nor a cylinder
    about its axis."""
    k = 0.5 * rho * cd
    if kind == "sphere":
        return [k * math.pi * size[0] ** 2] * 3 + [0.0, 0.0, 0.0]
    if kind == "box":
        a, b, c = size
        turn = rho * cd / 64.0
        return [k * b * c, k * a * c, k * a * b,
                turn * a * (b ** 4 + c ** 4), turn * b * (a ** 4 + c ** 4), turn * c * (a ** 4 + b ** 4)]
    r, h = size
    side = rho * cd * 2.0 * r * h ** 4 / 64.0
    return [k * 2.0 * r * h, k * 2.0 * r * h, k * math.pi * r * r, side, side, 0.0]


def _object_model(o, mass, inertia, g_eff):
    """The free object's model on SO(3)xR3: a rigid body, with its drag in a one-link URDF's ``<hydrodynamics>``
    when it has one (buoyancy stays in ``g_eff``: the same numbers as without drag)."""
    from mbs_ros.dynamics import Model

    drag = o.get("drag")
    if drag is None:
        return Model.rigid_body("so3xr3", mass, np.diag(inertia), gravity=tuple(g_eff))
    d = drag_coefficients(o["kind"], o["size"], o["fluid_density"], drag["cd"])
    ixx, iyy, izz = (repr(float(x)) for x in inertia)
    urdf = (f'<robot name="{o["name"]}"><link name="{o["name"]}"><inertial><mass value="{mass!r}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/></inertial>'
            f'<hydrodynamics><quadratic_damping>{" ".join(repr(float(x)) for x in d)}</quadratic_damping>'
            f'</hydrodynamics></link></robot>')
    return Model.from_urdf(urdf, base="so3xr3", gravity=tuple(g_eff))


def load_world(path, fluid_density: Optional[float] = None, key: str = "world") -> WorldSpec:
    """The checked :class:`WorldSpec` of ``path`` (a world file or a robot YAML with a ``world:`` key);
    YamlFileError naming the file and the key."""
    path = str(path)
    data = read_yaml(path)
    if not isinstance(data, dict) or key not in data:
        raise YamlFileError(path, f"no {key}: mapping")
    w = _mapping(path, key, data[key], WORLD_KEYS)
    margin = _number(path, f"{key}.margin", w.get("margin", 1e-3), 0.0, 1.0, low_open=True)
    friction = _number(path, f"{key}.friction", w.get("friction", 0.8), 0.0, 1e3)
    flags = {}
    for k, default in (("robot_collision", True), ("self_collision", False)):
        flags[k] = w.get(k, default)
        if not isinstance(flags[k], bool):
            _fail(path, f"{key}.{k}", f"must be true or false, got {shown(flags[k])}")
    srdf = w.get("srdf")
    if srdf is not None:
        if not isinstance(srdf, str) or not srdf:
            _fail(path, f"{key}.srdf", f"must be a file name, got {shown(srdf)}")
        srdf = srdf if os.path.isabs(srdf) else os.path.join(os.path.dirname(os.path.abspath(path)), srdf)
        if not os.path.isfile(srdf):
            _fail(path, f"{key}.srdf", "no such file")
    ground = None
    if w.get("ground") is not None:
        g = _mapping(path, f"{key}.ground", w["ground"], ("height", "normal", "mu"))
        normal = _vector(path, f"{key}.ground.normal", g.get("normal", [0.0, 0.0, 1.0]), 3)
        if np.linalg.norm(normal) < 1e-9:
            _fail(path, f"{key}.ground.normal", "must not be zero")
        ground = {"height": _number(path, f"{key}.ground.height", g.get("height", 0.0), -1e6, 1e6),
                  "normal": normal, "mu": None if "mu" not in g else _number(path, f"{key}.ground.mu", g["mu"], 0.0, 1e3)}
    lists = {}
    for k in ("static", "objects", "robot_shapes"):
        items = w.get(k, [])
        if not isinstance(items, list) or len(items) > MAX_SHAPES:
            _fail(path, f"{key}.{k}", f"must be a list of at most {MAX_SHAPES} shapes, got {shown(items)}")
        lists[k] = items
    static = []
    for i, item in enumerate(lists["static"]):
        k = f"{key}.static[{i}]"
        static.append(_shape(path, k, _mapping(path, k, item, ("name", "xyz", "rpy", "mu", "group", "mask")
                                                 + SHAPE_KINDS), {}))

    def link(value, k):
        if not (isinstance(value, str) and value and len(value) <= 128):
            _fail(path, k, f"must be the name of one of the robot's links, got {shown(value)}")
        return value

    robot_shapes = []
    for i, item in enumerate(lists["robot_shapes"]):
        k = f"{key}.robot_shapes[{i}]"
        robot_shapes.append(_shape(path, k, _mapping(path, k, item, ("name", "link", "xyz", "rpy", "mu", "group",
                                                                      "mask") + SHAPE_KINDS), {"link": link}))

    def density(value, k):
        if value is None:
            return fluid_density
        return _number(path, k, value, 0.0, 1e5)

    def velocity(value, k):
        return [0.0] * 6 if value is None else _vector(path, k, value, 6, high=1e3)

    objects = []
    for i, item in enumerate(lists["objects"]):
        k = f"{key}.objects[{i}]"
        _mapping(path, k, item, ("name", "xyz", "rpy", "mu", "mass", "inertia", "velocity", "fluid_density",
                                 "group", "mask", "drag") + SHAPE_KINDS)
        if "mass" not in item:
            _fail(path, f"{k}.mass", "missing: a free object needs its mass [kg]")
        o = _shape(path, k, item, {"velocity": velocity, "fluid_density": density})
        if o["kind"] == "capsule":
            _fail(path, k, "a free object is a box, sphere or cylinder (its inertia and volume in closed form)")
        o["mass"] = _number(path, f"{k}.mass", item["mass"], 0.0, 1e9, low_open=True)
        o["inertia"] = (_solid_inertia(o["kind"], o["size"], o["mass"]) if item.get("inertia") is None else
                        _vector(path, f"{k}.inertia", item["inertia"], 3, 0.0, low_open=True, high=1e9))
        a, b, c = o["inertia"]
        if a + b < c * (1 - 1e-9) or a + c < b * (1 - 1e-9) or b + c < a * (1 - 1e-9):
            _fail(path, f"{k}.inertia", "principal moments must satisfy the triangle inequality")
        o["drag"] = None
        if item.get("drag") is not None:
            d = _mapping(path, f"{k}.drag", item["drag"], ("cd",))
            if "cd" not in d:
                _fail(path, f"{k}.drag.cd", "missing: the drag coefficient C_d")
            if not o["fluid_density"]:
                _fail(path, f"{k}.drag", "needs a fluid: the object's fluid_density (or the robot YAML's "
                      "fluid.density) > 0")
            o["drag"] = {"cd": _number(path, f"{k}.drag.cd", d["cd"], 0.0, 1e3)}
        objects.append(o)
    names = [s["name"] for s in static + objects + robot_shapes]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        _fail(path, f"{key}", f"names must be unique: {', '.join(dup)} repeated")
    return WorldSpec(path, margin, friction, flags["robot_collision"], flags["self_collision"], srdf, ground,
                     static, objects, robot_shapes)


def _geometry(o, mu_default, body=None, T=None, link=""):
    import coal

    from mbs_ros.dynamics.contact.geometry import Shape

    mu = mu_default if o["mu"] is None else o["mu"]
    kind, size = o["kind"], o["size"]
    g = (coal.Box(*size) if kind == "box" else coal.Sphere(size[0]) if kind == "sphere" else
         coal.Cylinder(size[0], size[1]) if kind == "cylinder" else coal.Capsule(size[0], size[1]))
    return Shape(o["name"], g, body, np.eye(4) if T is None else np.asarray(T, float), mu, link=link,
                 group=o["group"], mask=o["mask"])


def build_world(spec: WorldSpec, model, urdf: Optional[str], q0, gravity, limits: bool = True,
                base_dir: Optional[str] = None):
    """``(ContactWorld, objects)`` of ``spec`` around ``model`` (model 0, its shapes from ``urdf``'s
    ``<collision>``; None: a model without them), the object initial states ``[(q0, v0)]``. ValueError (naming
    the pair and depth) when the world starts interpenetrating at ``q0``; ModelError for an unreadable
    collision mesh (naming the link and the file)."""
    from scipy.spatial.transform import Rotation

    from mbs_ros.dynamics.model.urdf import origin_matrix

    from mbs_ros.dynamics.contact.collision import collision_shapes, excluded_pairs, read_srdf_disabled
    from mbs_ros.dynamics.contact.geometry import halfspace
    from mbs_ros.dynamics.contact.world import ContactWorld

    shapes = []
    if spec.robot_collision and urdf is not None:
        shapes += collision_shapes(model, urdf, 0, mu=spec.friction, base_dir=base_dir)
    if spec.robot_shapes:
        tree = model.tree
        index = {name: i for i, name in enumerate(tree.link_names)}
        for o in spec.robot_shapes:
            if o["link"] not in index:
                raise ValueError(f"{spec.path}: world.robot_shapes: {o['name']}: the robot has no link "
                                 f"{shown(o['link'])} (links: {', '.join(tree.link_names)})")
            i = index[o["link"]]
            T = np.asarray(tree.T_body_link[i]) @ origin_matrix(o["xyz"], o["rpy"])
            shapes.append(_geometry(o, spec.friction, (0, int(tree.link_body[i])), T, link=o["link"]))
    if spec.ground is not None:
        g = spec.ground
        n = np.asarray(g["normal"], dtype=float) / np.linalg.norm(g["normal"])
        shapes.append(halfspace("ground", n, g["height"], spec.friction if g["mu"] is None else g["mu"]))
    for s in spec.static:
        shapes.append(_geometry(s, spec.friction, None, origin_matrix(s["xyz"], s["rpy"])))
    models, objects = [model], []
    g = np.asarray(gravity, dtype=float)
    for i, o in enumerate(spec.objects, start=1):
        rho = o["fluid_density"] or 0.0
        # buoyancy at the centre of mass of a homogeneous immersed body: gravity scaled by (1 - rho V / m)
        g_eff = g * (1.0 - rho * _volume(o["kind"], o["size"]) / o["mass"])
        models.append(_object_model(o, o["mass"], o["inertia"], g_eff))
        shapes.append(_geometry(o, spec.friction, (i, 0)))
        q = np.concatenate([o["xyz"], Rotation.from_euler("xyz", o["rpy"]).as_quat()])
        objects.append((q, np.asarray(o["velocity"], dtype=float)))
    disabled = read_srdf_disabled(spec.srdf) if spec.srdf else frozenset()
    q_start = [np.asarray(q0, dtype=float)] + [q for q, _ in objects]
    excluded = set(excluded_pairs(shapes, models, disabled, adjacent=True, touching_at=q_start[:1]))
    if not spec.self_collision:
        on_robot = [s.body is not None and s.body[0] == 0 for s in shapes]
        excluded |= {(i, j) for i in range(len(shapes)) for j in range(i + 1, len(shapes))
                     if on_robot[i] and on_robot[j]}
    world = ContactWorld(models, shapes, frozenset(excluded), limits=limits, margin=spec.margin)
    try:
        world.check_start(q_start)
    except ValueError as e:
        raise ValueError(f"{spec.path}: {e}") from None
    return world, objects
