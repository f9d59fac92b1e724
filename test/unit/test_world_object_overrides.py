"""The free objects drawn by a campaign (dynamics parameters object_offset, object_mass_scale, object_mu_scale;
mbs_ros.cores.dynamics.vary_objects): the handle of config/worlds/seabed_handle.yaml moved and turned in the world,
its mass, inertia and friction scaled, against the file's numbers written here; the defaults change nothing; the
parameters reach the simulator's object (its start pose and mass) through the node's own setup."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from contact_fixtures import dynamics_setup
from mbs_ros.cores.dynamics import make_world, vary_objects
from mbs_ros.dynamics.contact.world_file import load_world

WORLD = "config/worlds/seabed_handle.yaml"
# the file's handle: xyz (0.3, 0, -9.985), rpy (0, pi/2, 0), 0.8 kg, mu 1.0, a cylinder r 0.015, L 0.2
XYZ, RPY, MASS, MU = (0.3, 0.0, -9.985), (0.0, math.pi / 2, 0.0), 0.8, 1.0
SIDE, AXIAL = MASS * (3 * 0.015 ** 2 + 0.2 ** 2) / 12, MASS * 0.015 ** 2 / 2


def test_the_defaults_leave_the_world_as_it_is():
    spec = load_world(WORLD, fluid_density=1025.0)
    assert vary_objects(spec) is spec


def test_an_object_is_moved_turned_and_scaled():
    spec = load_world(WORLD, fluid_density=1025.0)
    out = vary_objects(spec, (0.05, -0.02, 0.0, 0.3), 1.5, 0.4)
    (o,) = out.objects
    np.testing.assert_allclose(o["xyz"], [XYZ[0] + 0.05, XYZ[1] - 0.02, XYZ[2]], rtol=0, atol=1e-15)
    expected = Rotation.from_rotvec([0, 0, 0.3]).as_matrix() @ Rotation.from_euler("xyz", RPY).as_matrix()
    np.testing.assert_allclose(Rotation.from_euler("xyz", o["rpy"]).as_matrix(), expected, atol=1e-12)
    assert o["mass"] == pytest.approx(1.5 * MASS, rel=1e-15)
    np.testing.assert_allclose(o["inertia"], [1.5 * SIDE, 1.5 * SIDE, 1.5 * AXIAL], rtol=1e-12)
    assert o["mu"] == pytest.approx(0.4 * MU, rel=1e-15)
    assert spec.objects[0]["mass"] == MASS  # the loaded spec is not changed


def test_the_parameters_reach_the_simulators_object():
    model, s, q0, v0, limits, source = dynamics_setup(
        model_file="config/robots/bluerov2_heavy_alpha5_gripper.yaml", world=WORLD, base_group="se3",
        initial_position=[0.0, 0.0, -9.5], initial_joint_positions=[0.0, 0.8, 0.0, 0.0, 0.025, 0.025],
        object_offset=[0.1, 0.0, 0.0, 0.0], object_mass_scale=2.0)
    world, objects = make_world(s, source, model, q0)
    (q, v), = objects
    np.testing.assert_allclose(q[:3], [XYZ[0] + 0.1, XYZ[1], XYZ[2]], atol=1e-15)
    assert world.models[1].total_mass == pytest.approx(2.0 * MASS, rel=1e-12)
