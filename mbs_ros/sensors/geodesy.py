"""WGS-84 geodetic ↔ ECEF ↔ local ENU around a datum: the world frame of a robot with a GNSS receiver is the local
tangent plane (REP 103 ENU, z up) at the datum (lat0, lon0, alt0).

Geodetic → ECEF is the closed form (N the prime-vertical radius of curvature); ECEF → geodetic is Heikkinen's exact
closed form (Heikkinen 1982, "Geschlossene Formeln zur Berechnung räumlicher geodätischer Koordinaten aus
rechtwinkligen Koordinaten", Z. Vermess. 107; as in J. Zhu, "Conversion of Earth-centered Earth-fixed coordinates
to geodetic coordinates", IEEE TAES 30(3) 1994), no iteration; ECEF ↔ ENU is the rotation of the datum's local
frame. Angles in degrees at the interface, metres otherwise; every function takes scalars or arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WGS84_A", "WGS84_F", "geodetic_to_ecef", "ecef_to_geodetic", "enu_to_geodetic", "geodetic_to_enu"]

#: WGS-84 semi-major axis [m] and flattening (NIMA TR8350.2).
WGS84_A = 6378137.0
WGS84_F = 1.0 / 298.257223563
_B = WGS84_A * (1.0 - WGS84_F)
_E2 = WGS84_F * (2.0 - WGS84_F)  # first eccentricity squared
_EP2 = (WGS84_A ** 2 - _B ** 2) / _B ** 2  # second eccentricity squared


def geodetic_to_ecef(lat, lon, alt):
    """ECEF ``(x, y, z)`` [m] of latitude, longitude [deg] and ellipsoidal altitude [m]."""
    phi, lam = np.radians(lat), np.radians(lon)
    alt = np.asarray(alt, dtype=float)
    s = np.sin(phi)
    n = WGS84_A / np.sqrt(1.0 - _E2 * s * s)
    return ((n + alt) * np.cos(phi) * np.cos(lam), (n + alt) * np.cos(phi) * np.sin(lam),
            (n * (1.0 - _E2) + alt) * s)


def ecef_to_geodetic(x, y, z):
    """Latitude, longitude [deg] and ellipsoidal altitude [m] of ECEF ``(x, y, z)`` (Heikkinen's closed form;
    valid away from the Earth's centre, i.e. anywhere a receiver can be)."""
    x, y, z = (np.asarray(c, dtype=float) for c in (x, y, z))
    a, b, e2 = WGS84_A, _B, _E2
    p2 = x * x + y * y
    p = np.sqrt(p2)
    F = 54.0 * b * b * z * z
    G = p2 + (1.0 - e2) * z * z - e2 * (a * a - b * b)
    c = e2 * e2 * F * p2 / G ** 3
    s = np.cbrt(1.0 + c + np.sqrt(c * c + 2.0 * c))
    k = s + 1.0 + 1.0 / s
    P = F / (3.0 * k * k * G * G)
    Q = np.sqrt(1.0 + 2.0 * e2 * e2 * P)
    r0 = (-P * e2 * p / (1.0 + Q)
          + np.sqrt(np.maximum(0.5 * a * a * (1.0 + 1.0 / Q) - P * (1.0 - e2) * z * z / (Q * (1.0 + Q))
                               - 0.5 * P * p2, 0.0)))
    U = np.sqrt((p - e2 * r0) ** 2 + z * z)
    V = np.sqrt((p - e2 * r0) ** 2 + (1.0 - e2) * z * z)
    z0 = b * b * z / (a * V)
    alt = U * (1.0 - b * b / (a * V))
    lat = np.degrees(np.arctan2(z + _EP2 * z0, p))
    lon = np.degrees(np.arctan2(y, x))
    return lat, lon, alt


def _enu_rotation(lat0, lon0):
    """R (3×3) taking ECEF differences to ENU at (lat0, lon0) [deg]: rows east, north, up."""
    phi, lam = np.radians(lat0), np.radians(lon0)
    sp, cp, sl, cl = np.sin(phi), np.cos(phi), np.sin(lam), np.cos(lam)
    return np.array([[-sl, cl, 0.0], [-sp * cl, -sp * sl, cp], [cp * cl, cp * sl, sp]])


def enu_to_geodetic(e, n, u, lat0, lon0, alt0):
    """Latitude, longitude [deg] and altitude [m] of the point ``(e, n, u)`` [m] of the ENU frame at the datum."""
    R = _enu_rotation(lat0, lon0)
    x0, y0, z0 = geodetic_to_ecef(lat0, lon0, alt0)
    enu = np.stack(np.broadcast_arrays(*(np.asarray(c, dtype=float) for c in (e, n, u))))
    d = np.tensordot(R.T, enu, axes=1)
    return ecef_to_geodetic(x0 + d[0], y0 + d[1], z0 + d[2])


def geodetic_to_enu(lat, lon, alt, lat0, lon0, alt0):
    """``(e, n, u)`` [m] in the ENU frame at the datum of latitude, longitude [deg] and altitude [m]."""
    R = _enu_rotation(lat0, lon0)
    x0, y0, z0 = geodetic_to_ecef(lat0, lon0, alt0)
    x, y, z = geodetic_to_ecef(lat, lon, alt)
    d = np.stack(np.broadcast_arrays(x - x0, y - y0, z - z0))
    enu = np.tensordot(R, d, axes=1)
    return enu[0], enu[1], enu[2]
