"""Robot YAMLs with a ``world:`` mapping for the contact tests (unit, headless and ROS), written out so that each
test's closed forms can be read from the text it loads.

- :data:`PUCK_URDF`: one link, a 2 kg box 0.2 x 0.2 x 0.1 m with the same ``<collision>`` box, for an SE(3) base;
  :func:`write_puck`: its robot YAML on a ground at z = 0 (``world`` appended as given);
- :func:`write_arm`: the 2-link planar arm of ``config/robots/arm_2link_planar.urdf`` on a fixed base (no
  ``<collision>``: its joints' limits only) with a ground at z = -1 and a 2 kg, 0.2 m crate dropped 0.2 m onto it;
- :func:`dynamics_setup`: what the dynamics node builds from its parameters (model, settings, initial state, limits,
  source), the node's own functions in its order, for :func:`mbs_ros.cores.dynamics.make_simulator`.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
G = 9.81
PUCK_MASS, PUCK_SIZE = 2.0, (0.2, 0.2, 0.1)
_a, _b, _c = PUCK_SIZE
PUCK_INERTIA = (PUCK_MASS * (_b * _b + _c * _c) / 12, PUCK_MASS * (_a * _a + _c * _c) / 12,
                PUCK_MASS * (_a * _a + _b * _b) / 12)
PUCK_URDF = f"""<?xml version="1.0"?>
<robot name="puck">
  <link name="base_link">
    <inertial><mass value="{PUCK_MASS!r}"/>
      <inertia ixx="{PUCK_INERTIA[0]!r}" ixy="0" ixz="0" iyy="{PUCK_INERTIA[1]!r}" iyz="0" izz="{PUCK_INERTIA[2]!r}"/>
    </inertial>
    <collision><geometry><box size="{_a} {_b} {_c}"/></geometry></collision>
  </link>
</robot>
"""
PUCK_WORLD = "world:\n  ground: {height: 0.0, mu: 0.6}\n"
CRATE_MASS, CRATE_SIZE, CRATE_DROP = 2.0, 0.2, 0.2
ARM_GROUND = -1.0
ARM_WORLD = (f"world:\n  ground: {{height: {ARM_GROUND}, mu: 0.6}}\n  objects:\n"
             f"    - {{name: crate, box: [{CRATE_SIZE}, {CRATE_SIZE}, {CRATE_SIZE}], mass: {CRATE_MASS}, "
             f"xyz: [2.0, 0.0, {ARM_GROUND + CRATE_SIZE / 2 + CRATE_DROP}]}}\n")


def write_puck(directory, world: str = PUCK_WORLD, urdf: str = PUCK_URDF, name: str = "puck") -> Path:
    """``directory/<name>.yaml`` (and its URDF): the puck on an SE(3) base with ``world`` (YAML text) appended."""
    directory = Path(directory)
    (directory / f"{name}.urdf").write_text(urdf)
    path = directory / f"{name}.yaml"
    path.write_text(f"robot:\n  name: {name}\n  base: se3\n  gravity: [0.0, 0.0, {-G}]\n  urdf: {name}.urdf\n"
                    + world)
    return path


def write_arm(directory, world: str = ARM_WORLD) -> Path:
    """``directory/arm.yaml``: the 2-link planar arm on a fixed base with ``world`` appended."""
    directory = Path(directory)
    (directory / "arm.urdf").write_text((ROOT / "config" / "robots" / "arm_2link_planar.urdf").read_text())
    path = directory / "arm.yaml"
    path.write_text(f"robot:\n  name: arm\n  base: fixed\n  gravity: [0.0, 0.0, {-G}]\n  urdf: arm.urdf\n" + world)
    return path


def dynamics_setup(**given):
    """``(model, settings, q0, v0, limits, source)`` of the dynamics node's parameters ``given`` (the rest their
    defaults or the robot's), as the node and a headless run build them."""
    from mbs_ros.cores import dynamics_settings as ds
    from mbs_ros.cores.parameters.dynamics import PARAMETERS
    from mbs_ros.cores.params import model_parameter_values

    values, source = model_parameter_values(PARAMETERS, lambda n: PARAMETERS[n].default,
                                            lambda p, d: given.get(p.name, d))
    s = ds.settings_from_values(values, source)
    model = ds.build_model(s, source)
    q0, v0 = ds.initial_state(model, s)
    return model, s, q0, v0, ds.command_limits(model, s), source
