"""GNSS: the WGS-84 ↔ local ENU conversions of :mod:`mbs_ros.sensors.geodesy` and the receiver model of
:mod:`mbs_ros.sensors.gnss` (issue 18: "GNSS round trip datum ↔ local to 1 mm"; no fix under water).

References, none of them the code under test: hand-derived closed forms (a point straight above the datum, a point
east of it on the equator, the poles), and an independent implementation written here (:func:`_ref_enu_to_geodetic`:
ENU axes built as vectors, geodetic from ECEF by fixed-point iteration on the latitude, not the module's
closed form). The figures (worst round trip, worst difference to the reference, metres):
``python -m pytest -q -s test/unit/test_gnss.py``.
"""
import math
import zlib

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.sensors import geodesy
from mbs_ros.sensors.frames import SensorFrame
from mbs_ros.sensors.spec import SensorConfigError, parse_sensors

A, F = 6378137.0, 1 / 298.257223563  # WGS-84, typed from NIMA TR8350.2, not read from the module
B = A * (1 - F)
DATUMS = [(0.0, 0.0, 0.0), (45.0, 10.0, 100.0), (-33.86, 151.21, 20.0), (64.1, -21.9, -30.0), (89.5, -170.0, 0.0),
          (-89.9, 45.0, 5.0), (12.0, 179.99, 2500.0)]
#: Points up to 10 km away horizontally and 1 km vertically: a surface vessel's whole mission area.
SPAN_H, SPAN_V = 10_000.0, 1_000.0
FIGURES = {}


def _points(seed, n=400):
    rng = np.random.default_rng(seed)
    e, n_ = rng.uniform(-SPAN_H, SPAN_H, (2, n))
    u = rng.uniform(-SPAN_V, SPAN_V, n)
    return e, n_, u


@pytest.mark.parametrize("datum", DATUMS)
def test_the_round_trip_local_geodetic_local_is_within_a_millimetre(datum):
    e, n, u = _points(zlib.crc32(repr(datum).encode()))
    lat, lon, alt = geodesy.enu_to_geodetic(e, n, u, *datum)
    e2, n2, u2 = geodesy.geodetic_to_enu(lat, lon, alt, *datum)
    err = np.max(np.abs(np.stack([e2 - e, n2 - n, u2 - u])))
    FIGURES["round trip [m]"] = max(FIGURES.get("round trip [m]", 0.0), float(err))
    assert err < 1e-3


@pytest.mark.parametrize("datum", DATUMS)
def test_geodetic_to_local_and_back_from_the_geodetic_side_is_within_a_millimetre(datum):
    rng = np.random.default_rng(7)
    lat = np.clip(datum[0] + rng.uniform(-0.05, 0.05, 200), -90, 90)
    lon = datum[1] + rng.uniform(-0.05, 0.05, 200)
    alt = datum[2] + rng.uniform(-500, 500, 200)
    lat2, lon2, alt2 = geodesy.enu_to_geodetic(*geodesy.geodetic_to_enu(lat, lon, alt, *datum), *datum)
    # degrees to metres on the sphere of radius A (an upper bound of the meridian and parallel arcs here)
    d_lat = np.abs(lat2 - lat) * math.pi / 180 * A
    d_lon = np.abs((lon2 - lon + 180) % 360 - 180) * math.pi / 180 * A * np.cos(np.radians(lat))
    assert max(d_lat.max(), d_lon.max(), np.abs(alt2 - alt).max()) < 1e-3


def test_closed_forms_straight_up_east_on_the_equator_and_the_pole():
    # straight above the datum: same latitude and longitude, altitude + u
    lat, lon, alt = geodesy.enu_to_geodetic(0.0, 0.0, 1234.5, 37.0, -122.0, 10.0)
    assert abs(lat - 37.0) < 1e-9 and abs(lon + 122.0) < 1e-9 and abs(alt - 1244.5) < 1e-4
    # east of (0, 0, 0) on the equator: ECEF (A, e, 0) -> lon = atan2(e, A), alt = hypot(A, e) - A, lat = 0
    for east in (1.0, 1000.0, 9000.0):
        lat, lon, alt = geodesy.enu_to_geodetic(east, 0.0, 0.0, 0.0, 0.0, 0.0)
        assert abs(lat) < 1e-12
        assert abs(lon - math.degrees(math.atan2(east, A))) < 1e-12
        assert abs(alt - (math.hypot(A, east) - A)) < 1e-6
    # the north pole is at ECEF z = B (semi-minor axis)
    x, y, z = geodesy.geodetic_to_ecef(90.0, 0.0, 0.0)
    assert abs(x) < 1e-6 and abs(y) < 1e-9 and abs(z - B) < 1e-6
    lat, lon, alt = geodesy.ecef_to_geodetic(0.0, 0.0, B + 100.0)
    assert abs(lat - 90.0) < 1e-12 and abs(alt - 100.0) < 1e-6
    # equator, lon 90: ECEF (0, A + h, 0)
    lat, lon, alt = geodesy.ecef_to_geodetic(0.0, A + 50.0, 0.0)
    assert abs(lat) < 1e-12 and abs(lon - 90.0) < 1e-12 and abs(alt - 50.0) < 1e-6


def _ref_ecef(lat, lon, alt):
    """Textbook geodetic -> ECEF (N: prime-vertical radius), written out here."""
    e2 = 1 - (B / A) ** 2
    phi, lam = np.radians(lat), np.radians(lon)
    N = A / np.sqrt(1 - e2 * np.sin(phi) ** 2)
    return np.stack([(N + alt) * np.cos(phi) * np.cos(lam), (N + alt) * np.cos(phi) * np.sin(lam),
                     (N * (B / A) ** 2 + alt) * np.sin(phi)])


def _ref_axes(lat0, lon0):
    """East, north, up unit vectors (ECEF) of the datum: up is the ellipsoid normal, east is horizontal."""
    phi, lam = math.radians(lat0), math.radians(lon0)
    up = np.array([math.cos(phi) * math.cos(lam), math.cos(phi) * math.sin(lam), math.sin(phi)])
    east = np.array([-math.sin(lam), math.cos(lam), 0.0])
    return east, np.cross(up, east), up


def _ref_enu_to_geodetic(e, n, u, lat0, lon0, alt0):
    """ECEF of the point, then latitude by fixed-point iteration phi = atan2(z + e2 N sin(phi), p) to convergence."""
    east, north, up = _ref_axes(lat0, lon0)
    X = _ref_ecef(lat0, lon0, alt0)[:, None] + np.outer(east, e) + np.outer(north, n) + np.outer(up, u)
    e2 = 1 - (B / A) ** 2
    p = np.hypot(X[0], X[1])
    phi = np.arctan2(X[2], p * (1 - e2))
    for _ in range(50):
        N = A / np.sqrt(1 - e2 * np.sin(phi) ** 2)
        phi = np.arctan2(X[2] + e2 * N * np.sin(phi), p)
    N = A / np.sqrt(1 - e2 * np.sin(phi) ** 2)
    # altitude along the normal: the distance from the foot point (p_f, z_f) of latitude phi
    alt = (p - N * np.cos(phi)) * np.cos(phi) + (X[2] - N * (1 - e2) * np.sin(phi)) * np.sin(phi)
    return np.degrees(phi), np.degrees(np.arctan2(X[1], X[0])), alt


@pytest.mark.parametrize("datum", DATUMS)
def test_local_to_geodetic_agrees_with_an_independent_iterative_conversion(datum):
    e, n, u = _points(3)
    lat, lon, alt = geodesy.enu_to_geodetic(e, n, u, *datum)
    la, lo, al = _ref_enu_to_geodetic(e, n, u, *datum)
    err = float(np.max(np.abs(_ref_ecef(lat, lon, alt) - _ref_ecef(la, lo, al))))  # as positions, metres
    FIGURES["vs reference [m]"] = max(FIGURES.get("vs reference [m]", 0.0), err)
    assert err < 1e-3
    e2, n2, u2 = geodesy.geodetic_to_enu(la, lo, al, *datum)
    assert np.max(np.abs(np.stack([e2 - e, n2 - n, u2 - u]))) < 1e-3


# ------------------------------------------------------------------------------------------------ the receiver
def _receiver(noise=None, margin=None, water=True, datum=(47.0, 8.0, 400.0)):
    gnss = {"name": "gps", "type": "gnss", "link": "base_link", "rate": 10}
    if noise is not None:
        gnss["noise"] = noise
    if margin is not None:
        gnss["surface_margin"] = margin
    env = {"datum": {"latitude": datum[0], "longitude": datum[1], "altitude": datum[2]}}
    if water:
        env["fluid_density"] = 1025.0
    sset = parse_sensors({"environment": env, "sensors": [gnss]}, "robots/vessel.yaml", Model.rigid_body(), 0.01)
    from mbs_ros.sensors.gnss import Sensor

    return Sensor(sset.sensors[0], sset.environment, None, 0.01)


def _frame(p, k=0):
    T = np.eye(4)
    T[:3, 3] = p
    return SensorFrame(k=k, stamp_ns=k * 10_000_000, T_world_sensor=T, v=np.zeros(3), w=np.zeros(3), dt_ns=10_000_000)


def test_noise_off_reading_is_the_antenna_position_in_geodetic_coordinates():
    s = _receiver(noise={"horizontal_std": 0, "vertical_std": 0})
    r = s.measure(_frame([1500.0, -800.0, 2.5]))
    lat, lon, alt = (float(x[0]) for x in _ref_enu_to_geodetic(1500.0, -800.0, 2.5, 47.0, 8.0, 400.0))
    assert r.valid and r.reason is None and r.values["status"] == 0
    assert abs(r.values["latitude"] - lat) < 1e-9 and abs(r.values["longitude"] - lon) < 1e-9
    assert abs(r.values["altitude"] - alt) < 1e-4
    assert np.array_equal(r.values["position_cov"], np.zeros(9))


def test_no_fix_under_water_and_fix_again_at_the_surface():
    s = _receiver(margin=0.1)
    under = s.measure(_frame([0.0, 0.0, -0.5]))
    assert not under.valid and under.values["status"] == -1
    assert math.isnan(under.values["latitude"]) and "below the water surface" in under.reason
    just = s.measure(_frame([0.0, 0.0, 0.05]))  # above the water, inside the margin
    assert not just.valid and just.values["status"] == -1
    above = s.measure(_frame([0.0, 0.0, 0.15]))
    assert above.valid and above.values["status"] == 0 and above.reason is None
    # without water the surface means nothing: a fix anywhere
    dry = _receiver(water=False)
    assert dry.measure(_frame([0.0, 0.0, -5.0])).valid


def _enu_errors(receiver, p, n):
    """(n, 3) ENU errors of ``n`` readings (one measurement each) at the fixed point ``p`` of the datum (47, 8,
    400), back to ENU by the reference."""
    out = []
    for k in range(n):
        v = receiver.measure(_frame(p, k)).values
        out.append((v["latitude"], v["longitude"], v["altitude"]))
    out = np.array(out)
    east, north, up = _ref_axes(47.0, 8.0)
    d = _ref_ecef(out[:, 0], out[:, 1], out[:, 2]) - _ref_ecef(47.0, 8.0, 400.0)[:, None]
    return np.stack([east @ d, north @ d, up @ d], axis=1) - p


def test_position_noise_matches_the_configured_horizontal_and_vertical_std():
    """20 000 seeded samples at one point: the sample std of east, north, up (back to ENU by the reference) is the
    configured 2 m / 5 m within 3 % (the sample std's own relative std is 1/sqrt(2N) = 0.5 %: 6 sigma), the mean
    within 5 sigma of the mean's std; the covariance is diag(σh², σh², σv²)."""
    s = _receiver(noise={"horizontal_std": 2.0, "vertical_std": 5.0})
    N = 20_000
    err = _enu_errors(s, [100.0, 200.0, 3.0], N)
    std = err.std(axis=0)
    assert np.allclose(std, [2.0, 2.0, 5.0], rtol=0.03), std
    assert np.all(np.abs(err.mean(axis=0)) < 5 * np.array([2.0, 2.0, 5.0]) / math.sqrt(N))
    cov = s.measure(_frame([0, 0, 3.0])).values["position_cov"].reshape(3, 3)
    assert np.array_equal(cov, np.diag([4.0, 4.0, 25.0]))


def test_correlated_position_error_is_a_gauss_markov_process_with_the_configured_std():
    """noise.correlation_time τ = T / ln 2 at 10 Hz (T = 0.1 s): φ = exp(−T/τ) = 0.5. Over 20 000 seeded samples
    the lag-1 autocorrelation of each ENU error is 0.5 within 0.03 (its estimate's std is √((1 − φ²)/N) = 0.006: 5
    sigma) and the std the configured one within 5 % (N_eff = N (1 − φ)/(1 + φ) = 6 700, so the sample std's
    relative std is 0.9 %: 5.7 sigma); white noise (the default) has lag-1 autocorrelation 0 within 0.03."""
    def errors(noise):
        return _enu_errors(_receiver(noise=noise), [10.0, 20.0, 3.0], 20_000)

    def lag1(x):
        x = x - x.mean(axis=0)
        return (x[1:] * x[:-1]).sum(axis=0) / (x * x).sum(axis=0)

    err = errors({"horizontal_std": 2.0, "vertical_std": 5.0, "correlation_time": 0.1 / math.log(2.0)})
    assert np.allclose(lag1(err), 0.5, atol=0.03), lag1(err)
    assert np.allclose(err.std(axis=0), [2.0, 2.0, 5.0], rtol=0.05), err.std(axis=0)
    white = errors({"horizontal_std": 2.0, "vertical_std": 5.0})
    assert np.all(np.abs(lag1(white)) < 0.03), lag1(white)


@pytest.mark.parametrize("gnss, key, what", [
    ({"noise": {"horizontal_std": -1}}, "noise.horizontal_std", "expected a number >= 0"),
    ({"noise": {"vertical_std": "2 m"}}, "noise.vertical_std", "expected a finite number"),
    ({"noise": {"std": 1.0}}, "noise.std", "unknown key"),
    ({"surface_margin": [0.1]}, "surface_margin", "expected a finite number"),
    ({"surface_margin": -0.1}, "surface_margin", "expected a number >= 0"),
    ({"noise": {"correlation_time": -60}}, "noise.correlation_time", "expected a number >= 0"),
])
def test_bad_gnss_keys_are_refused_naming_file_sensor_and_key(gnss, key, what):
    item = {"name": "gps", "type": "gnss", "link": "base_link", "rate": 10, **gnss}
    with pytest.raises(SensorConfigError) as exc:
        parse_sensors({"sensors": [item]}, "robots/vessel.yaml", Model.rigid_body(), 0.01)
    msg = str(exc.value)
    assert msg.startswith(f"robots/vessel.yaml: sensors[0] (gps): {key}: "), msg
    assert what in msg


def test_figures():
    """Prints the worst errors the tests above measured (run with -s after them)."""
    print("\nGNSS figures:", {k: f"{v:.2e}" for k, v in FIGURES.items()})
