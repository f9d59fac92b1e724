"""The dynamics node's true-model perturbations for campaigns (mass_scale, link_mass_scales, added_mass_scale,
sensor_seed), checked against numbers read independently: urdf_parser_py's link masses, Pinocchio's CRBA on a URDF
scaled here, the added-mass numbers written in the test's URDF, and the sensors file's seeds. No process, no rclpy."""
from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
import yaml
from urdf_parser_py.urdf import URDF

import urdf_text as ut
from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores import dynamics_settings as ds
from mbs_ros.cores.parameters import table
from mbs_ros.sensors.spec import load_sensors, parse_sensors
from mbs_ros.sensors.suite import SensorSuite
from mbs_ros.dynamics.simulation.simulator import Simulator

UVMS = "config/robots/uvms_6dof.yaml"
UVMS_SENSORS = "config/sensors/uvms_6dof.yaml"


def _values(**changes):
    values = {n: p.default for n, p in table("dynamics").items()}
    values.update(model_file=UVMS, base_group="se3", gravity=(0.0, 0.0, 0.0), base_frame="vehicle")
    values.update(changes)
    return values


def _build(source, **changes):
    return ds.build_model(ds.settings_from_values(_values(**changes), source), source)


def _scaled_by_hand(xml: str, factors: dict) -> str:
    """The URDF with link ``name``'s <mass> and <inertia> entries times ``factors[name]``: written here, for
    Pinocchio."""
    root = ET.fromstring(xml)
    for link in root.findall("link"):
        f = factors[link.get("name")]
        for el in link.findall("inertial/mass"):
            el.set("value", str(float(el.get("value")) * f))
        for el in link.findall("inertial/inertia"):
            for k in list(el.attrib):
                el.set(k, str(float(el.get(k)) * f))
    return ET.tostring(root, encoding="unicode")


def test_mass_scale_and_link_mass_scales_scale_each_link_of_the_true_model():
    """uvms_6dof (9 URDF links) with mass_scale 1.1 and per-link factors 0.5 .. 1.3: the total mass is the sum of
    factor x mass over urdf_parser_py's links, and the mass matrix at 5 random configurations equals Pinocchio's
    CRBA of the URDF whose masses and inertias this test scaled link by link (to 1e-9 relative)."""
    source = ms.load_source("", UVMS)
    plain = _build(source)
    links = plain.link_names
    assert len(links) == 9
    factors = np.linspace(0.5, 1.3, len(links))
    model = _build(source, mass_scale=1.1, link_mass_scales=tuple(factors))
    per_link = {name: 1.1 * f for name, f in zip(links, factors)}
    urdf = URDF.from_xml_string(source.urdf)
    masses = {link.name: (link.inertial.mass if link.inertial is not None else 0.0) for link in urdf.links}
    assert model.total_mass == pytest.approx(sum(per_link[n] * m for n, m in masses.items()), rel=1e-12)
    assert plain.total_mass == pytest.approx(sum(masses.values()), rel=1e-12)
    pm = pin.buildModelFromXML(_scaled_by_hand(source.urdf, per_link), pin.JointModelFreeFlyer())
    pd = pm.createData()
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = model.random_configuration(rng)
        M_pin = pin.crba(pm, pd, q)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        M = model.mass_matrix(q)
        assert np.allclose(M, M_pin, rtol=1e-9, atol=1e-9 * np.abs(M_pin).max()), np.abs(M - M_pin).max()


HYDRO = "<hydrodynamics><added_mass>{}</added_mass></hydrodynamics>"
ADDED = (12.0, 20.0, 30.0, 1.5, 2.5, 3.5)


def test_added_mass_scale_multiplies_the_added_mass_of_the_true_model():
    """A one-link vehicle whose <added_mass> is diag(12, 20, 30, 1.5, 2.5, 3.5) (written here): the model's added
    mass is 0.7 x that matrix with added_mass_scale 0.7 and the matrix itself with 1; its rigid-body inertia is
    unchanged (mass 40 kg)."""
    link = ut.link("hull", 40.0).replace("</link>", HYDRO.format(" ".join(map(str, ADDED))) + "</link>")
    source = ms.load_source(ut.robot(link, name="hull"), "")
    base = dict(robot_description=source.urdf, model_file="", base_frame="hull", gravity=(0.0, 0.0, 0.0))
    for scale in (1.0, 0.7):
        model = _build(source, **base, added_mass_scale=scale)
        assert np.allclose(model.passive.added_mass[0], scale * np.diag(ADDED), rtol=1e-12, atol=0.0)
        assert model.total_mass == pytest.approx(40.0, rel=1e-12)


@pytest.mark.parametrize("changes, words", [
    (dict(mass_scale=0.0), ["mass_scale", "0.001"]),
    (dict(mass_scale=-1.0), ["mass_scale"]),
    (dict(added_mass_scale=-0.5), ["added_mass_scale"]),
    (dict(link_mass_scales=(1.0, 1.0)), ["link_mass_scales", "9", "vehicle", "tool0", "got 2"]),
    (dict(link_mass_scales=(1.0,) * 8 + (0.0,)), ["link_mass_scales", "[0.001, 1000]", "got 0"]),
    (dict(link_mass_scales=(1.0,) * 8 + (float("nan"),)), ["link_mass_scales", "finite"]),
    (dict(sensor_seed=1.5), ["sensor_seed", "whole number"]),
    (dict(sensor_seed=-1), ["sensor_seed"]),
])
def test_invalid_scales_and_seeds_are_refused_with_the_reason(changes, words):
    source = ms.load_source("", UVMS)
    with pytest.raises(ParameterError) as err:
        _build(source, **changes)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_a_single_body_refuses_the_robot_scales():
    with pytest.raises(ParameterError, match="single body"):
        ds.settings_from_values({n: p.default for n, p in table("dynamics").items()} | {"mass_scale": 2.0})


def _stream(readings):
    return [(r.name, r.k) + tuple(np.asarray(v).tobytes() for v in r.values.values()) for r in readings]


def _run(model, sensor_set, steps=200):
    dt = 0.002
    sim = Simulator(model, model.configuration_from_pose([0, 0, -5], [0, 0, 0, 1]), np.r_[0.1, 0, 0, 0, 0, 0.2,
                                                                                          [0.0] * 6], dt)
    return _stream(SensorSuite(model, sensor_set, dt).run(sim, steps))


def test_sensor_seed_adds_to_every_seed_of_the_sensors_file():
    """The uvms sensors file: with sensor_seed 0 the seeds are the file's (read here with yaml); with 17 each is
    the file's + 17, and the readings over 200 steps are byte for byte those of the same file with every seed
    raised by 17 in the text (and differ from sensor_seed 0's)."""
    source = ms.load_source("", UVMS)
    model = _build(source)
    with open(UVMS_SENSORS, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    written = {s["name"]: s.get("seed", 0) for s in doc["sensors"]}
    plain = load_sensors(UVMS_SENSORS, model, 0.002)
    assert {s.name: s.seed for s in plain.sensors} == written
    shifted = load_sensors(UVMS_SENSORS, model, 0.002, seed_offset=17)
    assert {s.name: s.seed for s in shifted.sensors} == {n: s + 17 for n, s in written.items()}
    edited = copy.deepcopy(doc)
    for s in edited["sensors"]:
        s["seed"] = s.get("seed", 0) + 17
    by_text = parse_sensors(edited, UVMS_SENSORS, model, 0.002)
    a, b, c = _run(model, shifted), _run(model, by_text), _run(model, plain)
    assert a == b and len(a) > 10
    assert all(x[2:] != y[2:] for x, y in zip(a, c) if x[0] != "encoders") and a != c
    settings = ds.settings_from_values(_values(sensor_seed=17.0), source)
    assert settings.sensor_seed == 17 and isinstance(settings.sensor_seed, int)


def test_the_headless_run_draws_its_sensor_noise_with_sensor_seed(tmp_path):
    """vehicle_manipulator_sensors for 0.3 s headless: sensor_seed 9 gives, bit for bit, the estimates of the same
    scenario with a copy of its sensors file whose seeds this test raised by 9; sensor_seed 0 those of the file."""
    from mbs_ros.headless import run_scenario

    with open(UVMS_SENSORS, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    for s in doc["sensors"]:
        s["seed"] = s.get("seed", 0) + 9
    edited = tmp_path / "uvms_sensors_plus_9.yaml"
    edited.write_text(yaml.safe_dump(doc), encoding="utf-8")

    def estimates(overrides):
        run = run_scenario("vehicle_manipulator_sensors", duration=0.3, overrides=overrides)
        assert run.fault is None
        return run.robots["uvms"].estimate_q

    plain, zero = estimates({}), estimates({"robots[0].dynamics.sensor_seed": 0})
    nine = estimates({"robots[0].dynamics.sensor_seed": 9})
    by_file = estimates({"robots[0].sensors": str(edited)})
    assert plain.shape[0] == 31 and np.array_equal(plain, zero)
    assert np.array_equal(nine, by_file) and not np.array_equal(nine, plain)
