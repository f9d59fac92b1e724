"""One robot of a scenario checked against its model: the robot keys, its parameter file, model, initial
state, controller, dynamics, sensors, estimator and reference. Part of :mod:`mbs_ros.scenario.schema`
(import from there); ROS-free."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from mbs_ros.cores.parameters import table as parameter_table
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores import params as prm
from mbs_ros.cores.parameters import kind
from mbs_ros.cores.paramsfile import YamlFileError, flatten, read_params_file
from mbs_ros.yamlfile import shown
from mbs_ros.dynamics.model.mimic import MIMIC_MODES
from mbs_ros.packages import is_uri, resolve_uri
from mbs_ros.scenario.base import (_BASE_WAYPOINT_KEYS, _GLOBAL_KEYS, _INITIAL_KEYS, _JOINT_WAYPOINT_KEYS,
                                           _REFERENCE_KEYS, _ROBOT_KEYS, BASE_GROUPS, NODES, Robot, Waypoint,
                                           _Checker, _join, _show, declared_parameters, managed, resolve_path)


def _robots(c: _Checker, doc, key: str, count: Optional[int], g: dict) -> List[Robot]:
    doc = c.mapping(doc, key, _ROBOT_KEYS)
    if doc.get("namespace") is None:
        c.fail(_join(key, "namespace"), "missing (every robot needs its own namespace)")
    ns_template = c.text(doc["namespace"], _join(key, "namespace"))
    n = 1
    offset = (0.0, 0.0, 0.0)
    if "count" in doc:
        n = doc["count"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            c.fail(_join(key, "count"), f"must be a whole number >= 1, got {_show(n)}")
        if count is not None:
            n = count
        if "{i}" not in ns_template:
            c.fail(_join(key, "namespace"), "a fleet template (with count) needs '{i}' in its namespace, e.g. "
                                            "'uvms{i}'")
        if "offset" in doc:
            offset = c.vector(doc["offset"], _join(key, "offset"), 3, "x, y, z in m")
    elif "offset" in doc:
        c.fail(_join(key, "offset"), "only a fleet template (a robot with count) has an offset")
    out = []
    for k in range(1, n + 1):
        ns = ns_template.replace("{i}", str(k)) if "count" in doc else ns_template
        shift = tuple((k - 1) * o for o in offset)
        out.append(_robot(c, doc, key, ns, shift, g))
    return out


def _unknown_parameter(name: str, role: str, allowed: Sequence[str], other: Optional[str] = None,
                       other_allowed: Sequence[str] = (), section: str = "") -> str:
    """Why node ``role`` does not take parameter ``name``: the other node's (``other``), or did you mean …"""
    node = NODES[role][2]
    if other is not None and name in other_allowed:
        where = f" (put it under '{section}')" if section else ""
        return f"not a {node} parameter: a {NODES[other][2]} one{where}"
    candidates = [n for n in allowed if n not in managed(role)]
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return f"unknown {node} parameter (did you mean {close[0]!r}?)"
    return f"unknown {node} parameter (it takes: {', '.join(sorted(candidates))})"


def _params_file_sections(c: _Checker, path: Path, key: str, namespace: str) -> Dict[str, Dict[str, object]]:
    """{node name: parameters} of a ROS parameter file, for dynamics_node and controller_node in ``namespace``,
    with the rules rcl applies (``/**`` for every node; ``/**/name``, ``name``, ``/ns/name`` for one).

    Checked as the scenario's own keys are: a parameter in a section for one node must be one it declares; in a
    section for every node (``/**``) one that either declares, and each node gets only its own."""
    try:
        sections = read_params_file(path)
    except YamlFileError as e:
        c.fail(key, f"parameter file {e}")
    declared = {node: declared_parameters(role) for role, (_e, _m, node) in NODES.items() if role != "reference"}
    roles = {node: role for role, (_e, _m, node) in NODES.items()}
    out = {}
    for node in ("dynamics_node", "controller_node"):
        merged: Dict[str, object] = {}
        wildcard = ("/**", "**")
        wanted = wildcard + (f"/**/{node}", f"**/{node}", node, f"/{node}", f"{namespace}/{node}")
        for section, params in sections.items():
            if section not in wanted:
                continue
            for name, value in flatten(params).items():
                if name in declared[node] or name.startswith("qos_overrides."):
                    merged[name] = value
                elif section not in wildcard:
                    other = next(n for n in declared if n != node)
                    c.fail(key, f"{path}: {section}: {name}: " + _unknown_parameter(
                        name, roles[node], declared[node], roles[other], declared[other]))
                elif not any(name in d for d in declared.values()):
                    guess = _did_you_mean(name, sorted(set().union(*declared.values())))
                    c.fail(key, f"{path}: {section}: {name}: unknown parameter of every node (dynamics_node, "
                                f"controller_node){guess}")
        out[node] = merged
    return out


def _did_you_mean(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_file(text: str, beside: Optional[Path]) -> Tuple[Optional[str], str]:
    """``(model_file value, reason)``: a package:// or file:// URI as written (the nodes resolve it too) once it
    resolves here, a path as the absolute path :func:`resolve_path` finds; ``(None, why)`` when neither does."""
    if is_uri(text):
        resolved = resolve_uri(text)
        return (text if resolved.path is not None else None), resolved.reason
    found = resolve_path(text, beside=beside)
    return (str(found) if found is not None else None), "not found"


def _robot(c: _Checker, doc: dict, key: str, namespace: str, shift: Tuple[float, ...], g: dict) -> Robot:
    from mbs_ros.dynamics.model import source as ms  # ROS-free: reads URDF/xacro/YAML, builds the Model

    namespace = "/" + namespace.strip("/")
    if namespace == "/" or any(not part or not (part[0].isalpha() or part[0] == "_")
                               or not all(ch.isalnum() or ch == "_" for ch in part)
                               for part in namespace.strip("/").split("/")):
        c.fail(_join(key, "namespace"), f"{shown(namespace)} is not a valid ROS namespace (letters, digits and _, "
                                        "each part starting with a letter)")
    declared = {role: declared_parameters(role) for role in ("dynamics", "controller")}
    dyn: Dict[str, object] = {}
    ctl: Dict[str, object] = {}
    if doc.get("params") is not None:
        pkey = _join(key, "params")
        found = resolve_path(c.text(doc["params"], pkey), beside=c.path)
        if found is None:
            c.fail(pkey, f"parameter file {shown(doc['params'])} not found (looked in the package, beside the scenario "
                         "and in the current directory)")
        sections = _params_file_sections(c, found, pkey, namespace)
        dyn.update(sections["dynamics_node"])
        ctl.update(sections["controller_node"])
    model_key = _join(key, "model")
    if doc.get("model") is not None:
        text = c.text(doc["model"], model_key).strip()
        value, why = _model_file(text, c.path)
        if value is None:
            c.fail(model_key, f"robot file {shown(text)}: {why}" if is_uri(text) else
                   f"robot file {shown(doc['model'])} not found (looked in the package, beside the scenario and in the "
                   "current directory)")
        dyn["model_file"] = ctl["model_file"] = value
    else:
        if not dyn.get("model_file") and not dyn.get("robot_description"):
            c.fail(model_key, "missing: give the robot file (model) or a parameter file (params) naming one")
        for params in (dyn, ctl):  # from the params file: resolve it as the scenario would
            if params.get("model_file"):
                text = str(params["model_file"]).strip()
                value, why = _model_file(text, c.path)
                if value is None:
                    c.fail(_join(key, "params"), f"its model_file {shown(params['model_file'])}: {why}" if is_uri(text)
                           else f"its model_file {shown(params['model_file'])} was not found")
                params["model_file"] = value
        ctl.setdefault("model_file", dyn.get("model_file", ""))
        if dyn.get("robot_description"):
            ctl.setdefault("robot_description", dyn["robot_description"])
    try:
        source = ms.load_source(str(dyn.get("robot_description", "") or ""), str(dyn.get("model_file", "") or ""))
    except ms.ParameterError as e:
        c.fail(model_key, str(e))
    if not source.multibody:
        c.fail(model_key, "names no robot (single rigid bodies are not scenario robots)")
    base = doc.get("base_group", dyn.get("base_group"))
    if base is None:
        base = ms.default_base(source)
    base_key = _join(key, "base_group")
    if base not in BASE_GROUPS:
        c.fail(base_key, f"must be one of {', '.join(BASE_GROUPS)}, got {_show(base)}")
    dyn["base_group"] = ctl["base_group"] = base
    gravity = dyn.get("gravity", ms.default_gravity(source))
    # --- locked joints: {name: position} here, the nodes' two parallel parameters (ROS parameters are no maps)
    lkey = _join(key, "locked_joints")
    if doc.get("locked_joints") is not None:
        locks = c.mapping(doc["locked_joints"], lkey, ())
        for name, value in locks.items():
            c.number(value, _join(lkey, str(name)))
        dyn["locked_joints"] = ctl["locked_joints"] = [str(n) for n in locks]
        dyn["locked_joint_positions"] = ctl["locked_joint_positions"] = [float(v) for v in locks.values()]
    names = list(dyn.get("locked_joints") or ())
    positions = list(dyn.get("locked_joint_positions") or ()) or [0.0] * len(names)
    if len(positions) != len(names):
        c.fail(_join(key, "params"), f"locked_joint_positions has {len(positions)} entries for {len(names)} "
                                     "locked_joints")
    locked = dict(zip(names, (float(v) for v in positions))) or None
    if doc.get("mimic") is not None:
        mkey = _join(key, "mimic")
        if doc["mimic"] not in MIMIC_MODES:
            c.fail(mkey, f"must be reduce or independent, got {_show(doc['mimic'])}")
        dyn["mimic"] = ctl["mimic"] = doc["mimic"]
    mimic = str(dyn.get("mimic", "reduce"))
    try:
        model = ms.build_multibody(source, base, gravity, locked_joints=locked, mimic=mimic)
    except ms.ParameterError as e:
        c.fail(base_key if doc.get("base_group") is not None else model_key, str(e))
    joints = tuple(model.joint_names)
    nq_base, nv_base = ms.base_sizes(model)

    # --- initial state
    ikey = _join(key, "initial")
    initial = c.mapping(doc.get("initial"), ikey, tuple(_INITIAL_KEYS))
    sizes = {"position": 3, "rpy": 3, "twist": 6, "joint_positions": len(joints), "joint_velocities": len(joints)}
    for k, param in _INITIAL_KEYS.items():
        if k in initial:
            what = {"position": "x, y, z in m", "rpy": "roll, pitch, yaw in rad", "twist": "vx, vy, vz, wx, wy, wz",
                    "joint_positions": "one per joint: " + ", ".join(joints),
                    "joint_velocities": "one per joint: " + ", ".join(joints)}[k]
            dyn[param] = c.vector(initial[k], _join(ikey, k), sizes[k], what)
    if shift != (0.0, 0.0, 0.0):
        p = tuple(float(x) for x in dyn.get("initial_position", (0.0, 0.0, 0.0)))
        dyn["initial_position"] = tuple(a + b for a, b in zip(p, shift))
    for param, n in (("initial_joint_positions", len(joints)), ("initial_joint_velocities", len(joints))):
        if param in dyn and len(dyn[param]) != n:  # from a params file
            c.fail(_join(key, "params"), f"{param} has {len(dyn[param])} entries for {n} joints")
    if joints and dyn.get("initial_joint_positions"):
        _check_joint_limits(c, model, dyn["initial_joint_positions"],
                            _join(ikey, "joint_positions") if "joint_positions" in initial else _join(key, "params"))
    pose_p = dyn.get("initial_position", (0.0, 0.0, 0.0))
    pose_rpy = dyn.get("initial_rpy", (0.0, 0.0, 0.0))
    if base == "fixed":
        if any(float(x) != 0.0 for x in (*pose_p, *pose_rpy, *dyn.get("initial_twist", ()))):
            c.fail(ikey, "a fixed base stays where the URDF puts it: no initial position, rpy or twist")
    else:
        try:
            model.configuration_from_pose(_vec(pose_p), _quaternion(pose_rpy))
        except ValueError as e:
            c.fail(ikey, f"initial pose not on the {base} group: {e}")

    # --- controller
    ckey = _join(key, "controller")
    controller = doc.get("controller", {})
    if controller is False:
        ctl_params = None
    else:
        controller = c.mapping(controller, ckey, ())
        taken = managed("controller")
        for k in controller:
            if k in taken:
                c.fail(_join(ckey, k), f"set by the scenario ({taken[k]})")
            if k not in declared["controller"]:
                c.fail(_join(ckey, k), _unknown_parameter(k, "controller", declared["controller"], "dynamics",
                                                          declared["dynamics"], _join(key, "dynamics")))
        ctl.update(controller)
        _table_values(c, "controller", ctl, ckey)
        for gain in (n for n, p in parameter_table("controller").items() if p.check == "gain"):
            if gain in ctl:
                v = ctl[gain]
                gk = _join(ckey, gain)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    c.number(v, gk, 0.0, True)
                else:
                    vec = c.vector(v, gk, model.nv, f"gains, one per velocity component ({nv_base} base, then "
                                                    f"{', '.join(joints) or 'no joints'})")
                    if any(x <= 0 for x in vec):
                        c.fail(gk, "gains must be > 0")
        ctl_params = ctl

    # --- free-form dynamics parameters
    dkey = _join(key, "dynamics")
    extra = c.mapping(doc.get("dynamics"), dkey, ())
    taken = managed("dynamics")
    for k in extra:
        if k in taken:
            c.fail(_join(dkey, k), f"set by the scenario ({taken[k]})")
        if k not in declared["dynamics"]:
            c.fail(_join(dkey, k), _unknown_parameter(k, "dynamics", declared["dynamics"], "controller",
                                                      declared["controller"], _join(key, "controller")))
    dyn.update(extra)
    _table_values(c, "dynamics", extra, dkey)

    # --- sensors (the dynamics node publishes them) and the estimator (fuses them)
    _sensors(c, doc, key, dyn, model, g)
    estimator = _estimator(c, doc, key, dyn, model, g, source)
    if ctl_params is not None:
        state_source = ctl_params.get("state_source", parameter_table("controller")["state_source"].default)
        skey = _join(ckey, "state_source")
        if state_source == "estimate" and estimator is None:
            c.fail(skey, f"estimate needs an estimator: add {_join(key, 'estimator')} (its imu, dvl, depth, "
                         "compass, encoders)")

    # --- remappings
    rkey = _join(key, "remappings")
    remaps = c.mapping(doc.get("remappings"), rkey, ())
    remappings = tuple((c.text(k, rkey), c.text(v, _join(rkey, k))) for k, v in remaps.items())

    # --- reference
    refkey = _join(key, "reference")
    ref = c.mapping(doc.get("reference"), refkey, _REFERENCE_KEYS)
    base_wps: List[Waypoint] = []
    if ref.get("base") is not None:
        bkey = _join(refkey, "base")
        if base == "fixed":
            c.fail(bkey, "a fixed base has no base reference")
        for i, wp in enumerate(_waypoint_list(c, ref["base"], bkey)):
            wkey = f"{bkey}[{i}]"
            wp = c.mapping(wp, wkey, _BASE_WAYPOINT_KEYS)
            for need in ("time", "position"):
                if need not in wp:
                    c.fail(_join(wkey, need), "missing")
            t = c.number(wp["time"], _join(wkey, "time"), 0.0)
            p = c.vector(wp["position"], _join(wkey, "position"), 3, "x, y, z in m")
            rpy = c.vector(wp.get("rpy", (0.0, 0.0, 0.0)), _join(wkey, "rpy"), 3, "roll, pitch, yaw in rad")
            p = tuple(a + b for a, b in zip(p, shift))
            try:
                model.configuration_from_pose(_vec(p), _quaternion(rpy))
            except ValueError as e:
                c.fail(wkey, f"pose not on the {base} group: {e}")
            base_wps.append(Waypoint(t, position=p, rpy=rpy))
        _check_times(c, base_wps, bkey)
    joint_names: Tuple[str, ...] = ()
    joint_wps: List[Waypoint] = []
    if ref.get("joint_names") is not None:
        nkey = _join(refkey, "joint_names")
        joint_names = c.names(ref["joint_names"], nkey)
        unknown = [n for n in joint_names if n not in joints]
        if unknown:
            c.fail(nkey, f"unknown joint(s) {', '.join(unknown)}; the model has {', '.join(joints) or 'none'}")
        if len(set(joint_names)) != len(joint_names):
            c.fail(nkey, "a joint is named twice")
        if ref.get("joints") is None:
            c.fail(_join(refkey, "joints"), "missing (joint_names without joint waypoints)")
    if ref.get("joints") is not None:
        jkey = _join(refkey, "joints")
        if not joints:
            c.fail(jkey, "the robot has no movable joints")
        joint_names = joint_names or joints
        for i, wp in enumerate(_waypoint_list(c, ref["joints"], jkey)):
            wkey = f"{jkey}[{i}]"
            wp = c.mapping(wp, wkey, _JOINT_WAYPOINT_KEYS)
            for need in _JOINT_WAYPOINT_KEYS:
                if need not in wp:
                    c.fail(_join(wkey, need), "missing")
            t = c.number(wp["time"], _join(wkey, "time"), 0.0)
            q = c.vector(wp["positions"], _join(wkey, "positions"), len(joint_names),
                         "one per joint: " + ", ".join(joint_names))
            joint_wps.append(Waypoint(t, positions=q))
        _check_times(c, joint_wps, jkey)
    if (base_wps or joint_wps) and ctl_params is None:
        c.fail(refkey, "a reference needs a controller (controller: false)")

    return Robot(namespace=namespace, model_file=str(dyn.get("model_file", "")), base_group=base,
                 joint_names=joints, nv=model.nv, dynamics=dyn, controller=ctl_params, remappings=remappings,
                 estimator=estimator,
                 base_reference=tuple(base_wps), joint_reference_names=joint_names if joint_wps else (),
                 joint_reference=tuple(joint_wps))


def _table_values(c: _Checker, role: str, values: Mapping, key: str) -> None:
    """Each value of a node ``role``'s parameters in ``values`` checked by its table entry (type, range, choices,
    size, bounds: :func:`mbs_ros.cores.params.check_parameter`), the error naming ``key.NAME``; the checks that
    need the model (gains, base group, locked joints) are the robot's own."""
    params = parameter_table(role)
    for name, value in values.items():
        p = params.get(name)
        if p is None or p.check in ("gain", "custom", "locked") or kind(p) is None:
            continue
        try:
            prm.check_parameter({name: tuple(value) if isinstance(value, list) else value}, p)
        except ParameterError as e:  # its text quotes the value: only when nothing in it is a file's free text
            reason = str(e) if _quotable(value) else f"not a valid {kind(p)} value, got {shown(value)}"
            c.fail(_join(key, name), reason[len(name) + 1:] if reason.startswith(name + " ") else reason)


def _quotable(value) -> bool:
    """Numbers, flags, name-shaped texts, and lists of them: what an error may quote of a scenario."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return all(shown(x) == repr(x) for x in items)


def _physics_rate(dyn: Mapping, g: Mapping) -> float:
    rate = g.get("physics_rate") or dyn.get("physics_rate") or parameter_table("dynamics")["physics_rate"].default
    return float(rate)


def _sensors(c: _Checker, doc: Mapping, key: str, dyn: dict, model, g: Mapping) -> None:
    """The robot's ``sensors`` key: a sensors file (docs/sensors.md) for the dynamics node's ``sensors``
    parameter (or ``none``); loaded here so that a bad file is refused before any node starts."""
    skey = _join(key, "sensors")
    if doc.get("sensors") is None:
        return
    if "sensors" in dyn:
        c.fail(skey, f"given twice: here and in {_join(key, 'dynamics')} (or the params file)")
    text = c.text(doc["sensors"], skey)
    if text.lower() == "none":
        dyn["sensors"] = "none"
        return
    found = resolve_path(text, beside=c.path)
    if found is None:
        c.fail(skey, f"sensors file {shown(text)} not found (looked in the package, beside the scenario and in the "
                     "current directory)")
    from mbs_ros.sensors.spec import SensorConfigError, load_sensors

    try:
        load_sensors(str(found), model, 1.0 / _physics_rate(dyn, g))
    except SensorConfigError as e:
        c.fail(skey, str(e))
    dyn["sensors"] = str(found)


def _estimator(c: _Checker, doc: Mapping, key: str, dyn: Mapping, model, g: Mapping, source) -> Optional[dict]:
    """The robot's ``estimator`` mapping: estimator_node parameters (its sensor roles, prior sigmas,
    initial_error, publish_rate); the model, the sensors file, the prior mean (the robot's initial state) and the
    rates come from the scenario. Checked as the node checks them (names of the sensors file, mounts)."""
    ekey = _join(key, "estimator")
    if doc.get("estimator") is None:
        return None
    est = c.mapping(doc["estimator"], ekey, ())
    declared = declared_parameters("estimator")
    taken = managed("estimator")
    for k in est:
        if k in taken:
            c.fail(_join(ekey, k), f"set by the scenario ({taken[k]})")
        if k not in declared:
            c.fail(_join(ekey, k), _unknown_parameter(k, "estimator", declared))
    _table_values(c, "estimator", est, ekey)
    if dyn.get("sensors") == "none":
        c.fail(ekey, "the robot's sensors are off (sensors: none): nothing to estimate from")
    est = dict(est)
    for name, p in parameter_table("estimator").items():
        # what the robot's keys set in its dynamics parameters (model, base_group, gravity, sensors, the initial
        # pose and joints: the table's scenario attribute) the estimator takes as they are; the global ones below
        if p.scenario and p.scenario not in _GLOBAL_KEYS and name in dyn:
            v = dyn[name]
            est[name] = tuple(float(x) for x in v) if isinstance(v, (list, tuple)) else v
    est["physics_rate"] = _physics_rate(dyn, g)
    if g.get("control_rate"):
        est["control_rate"] = g["control_rate"]
    if dyn.get("initial_twist") is not None:  # body-frame [v; w] -> the base origin's world velocity
        R = _rotation(dyn.get("initial_rpy", (0.0, 0.0, 0.0)))
        est["initial_velocity"] = tuple(float(x) for x in R @ _vec(dyn["initial_twist"][:3]))
    from mbs_ros.cores.estimator_settings import ParameterError, build_setup, settings_from_values

    from mbs_ros.dynamics.model import source as ms

    values = {n: p.default for n, p in parameter_table("estimator").items()}
    values.update({k: v for k, v in ms.model_defaults(source).items() if k in values})
    values.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in est.items()})
    try:
        build_setup(settings_from_values(values, source), source)
    except ParameterError as e:
        text = str(e)
        name = text.split(":", 1)[0].split(" ", 1)[0]
        c.fail(_join(ekey, name) if name in est and name in declared else ekey, text)
    return est


def _rotation(rpy):
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", [float(v) for v in rpy]).as_matrix()


def _waypoint_list(c: _Checker, value, key: str) -> list:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
        c.fail(key, f"must be a non-empty list of waypoints, got {_show(value)}")
    return list(value)


def _check_times(c: _Checker, wps: Sequence[Waypoint], key: str) -> None:
    for i in range(1, len(wps)):
        if wps[i].time <= wps[i - 1].time:
            c.fail(f"{key}[{i}].time", f"waypoint times must increase strictly ({wps[i - 1].time:g} then "
                                       f"{wps[i].time:g})")


def _vec(x):
    import numpy as np

    return np.asarray([float(v) for v in x], dtype=float)


def _quaternion(rpy) -> "object":
    """[x, y, z, w] of roll, pitch, yaw (R = Rz(yaw) Ry(pitch) Rx(roll), as URDF and the nodes)."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", [float(v) for v in rpy]).as_quat()


def _check_joint_limits(c, model, positions, key: str) -> None:
    """The initial joint positions within the URDF's limits (the dynamics node's own check, made when the file is
    read, so that bringup refuses the start as headless does instead of a node's FATAL after the launch)."""
    import numpy as np

    from mbs_ros.cores.dynamics_settings import MAX_JOINT_POSITION, joint_position_limits

    lower, upper = joint_position_limits(model)
    a = np.asarray(positions, dtype=float)
    tol = 1e-9 * np.maximum(1.0, upper - lower)
    bad = [f"{n} = {x:g} outside [{lo:g}, {hi:g}]" for n, x, lo, hi, ok in
           zip(model.joint_names, a, lower, upper, (a >= lower - tol) & (a <= upper + tol)) if not ok]
    if bad:
        c.fail(key, ", ".join(bad) + f" (the URDF's limits; joints without limits: |q| <= {MAX_JOINT_POSITION:g})")
