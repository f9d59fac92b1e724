"""A free object's quadratic drag (world file ``drag: {cd}``, mbs_ros.dynamics.contact.world_file): a sphere sinking
in water against the closed form of a body under constant force and quadratic drag, ``v(t) = v_t tanh(t / T)``
with ``v_t = sqrt(2 (m − ρV) g / (ρ C_d A))`` (the terminal speed) and ``T = m / sqrt(F D)``, ``F = (m − ρV) g``,
``D = ½ ρ C_d A``; the drag coefficients of the shapes against their projected areas; refusals naming the key."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.world_file import build_world, drag_coefficients, load_world
from mbs_ros.dynamics.simulation.simulator import Simulator
from mbs_ros.yamlfile import YamlFileError

G, RHO, R, M, CD = 9.81, 1000.0, 0.05, 1.0, 0.5


def _sphere_world(tmp_path, drag="{cd: 0.5}", extra=""):
    path = tmp_path / "world.yaml"
    path.write_text(textwrap.dedent(f"""\
        world:
          ground: {{height: 0.0}}
          objects:
            - {{name: ball, sphere: {R}, mass: {M}, xyz: [0.0, 0.0, 20.0], fluid_density: {RHO}{extra},
               drag: {drag}}}
        """))
    return path


def test_a_sinking_sphere_reaches_its_terminal_speed(tmp_path):
    robot = Model.rigid_body("se3", 1.0, np.eye(3), gravity=(0.0, 0.0, 0.0))  # weightless, far above
    q_robot = np.array([0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 1.0])
    world, objects = build_world(load_world(_sphere_world(tmp_path)), robot, None, q_robot, (0.0, 0.0, -G))
    V, A = 4.0 / 3.0 * math.pi * R ** 3, math.pi * R ** 2
    F, D = (M - RHO * V) * G, 0.5 * RHO * CD * A
    v_t, T = math.sqrt(2.0 * (M - RHO * V) * G / (RHO * CD * A)), M / math.sqrt(F * D)
    sim2 = Simulator(robot, q_robot, np.zeros(6), 1e-3, world=world, objects=objects)
    checked = 0
    for n, t in ((300, 0.3), (700, 1.0), (2000, 3.0)):
        assert sim2.advance(n) == n and sim2.fault is None
        vz = sim2.obj_v[0][2]
        assert vz == pytest.approx(-v_t * math.tanh(t / T), rel=1e-8), (t, vz)
        # sinking straight: the drop follows v_t T ln cosh(t/T)
        assert 20.0 - sim2.obj_q[0][2] == pytest.approx(v_t * T * math.log(math.cosh(t / T)), rel=1e-8)
        checked += 1
    assert checked == 3 and abs(sim2.obj_v[0][2] + v_t) < 1e-3 * v_t  # at 3 s (9 T) the terminal speed


def test_the_drag_of_each_shape_is_half_rho_cd_times_its_projected_area():
    d = drag_coefficients("box", [0.1, 0.2, 0.3], RHO, 1.2)
    np.testing.assert_allclose(d[:3], [0.6 * RHO * 0.06, 0.6 * RHO * 0.03, 0.6 * RHO * 0.02], rtol=1e-15)
    d = drag_coefficients("cylinder", [0.02, 0.2], RHO, 1.0)  # along z: side-on 2 r L, end-on pi r^2
    np.testing.assert_allclose(d[:3], [0.5 * RHO * 0.008, 0.5 * RHO * 0.008, 0.5 * RHO * math.pi * 4e-4],
                               rtol=1e-15)
    assert d[5] == 0.0  # turning about its axis moves no water across
    # turning side-on: a strip of width 2r and length L, the integral of 1/2 rho Cd 2r |x w| x w x over x
    x = np.linspace(-0.1, 0.1, 200001)
    y = 0.5 * RHO * 1.0 * 0.04 * np.abs(x) * x * x
    assert d[3] == pytest.approx(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2, rel=1e-6)
    d = drag_coefficients("sphere", [R], RHO, CD)
    np.testing.assert_allclose(d, [0.5 * RHO * CD * math.pi * R * R] * 3 + [0.0] * 3, rtol=1e-15)


@pytest.mark.parametrize("drag, extra, key", [("{cd: -1.0}", "", "world.objects[0].drag.cd"),
                                              ("{cd: 1.0, cx: 2.0}", "", "world.objects[0].drag"),
                                              ("{}", "", "world.objects[0].drag.cd"),
                                              ("{cd: 1.0}", "", None)])
def test_a_bad_drag_is_refused_naming_the_key(tmp_path, drag, extra, key):
    path = _sphere_world(tmp_path, drag, extra)
    if key is None:  # without a fluid: fluid_density 0 here
        path.write_text(path.read_text().replace(f"fluid_density: {RHO}", "fluid_density: 0.0"))
        key = "world.objects[0].drag"
    with pytest.raises(YamlFileError) as e:
        load_world(path)
    assert key in str(e.value) and "world.yaml" in str(e.value)
