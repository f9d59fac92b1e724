"""WGS-84 geodetic ↔ ECEF ↔ local ENU around a datum: the world frame of a robot with a GNSS receiver is the local
tangent plane (REP 103 ENU, z up) at the datum (lat0, lon0, alt0).

Geodetic → ECEF is the closed form (N the prime-vertical radius of curvature); ECEF → geodetic is Heikkinen's exact
closed form (Heikkinen 1982, "Geschlossene Formeln zur Berechnung räumlicher geodätischer Koordinaten aus
rechtwinkligen Koordinaten", Z. Vermess. 107; as in J. Zhu, "Conversion of Earth-centered Earth-fixed coordinates
to geodetic coordinates", IEEE TAES 30(3) 1994), no iteration; ECEF ↔ ENU is the rotation of the datum's local
frame. Angles in degrees at the interface, metres otherwise; every function takes scalars (computed with
:mod:`math`, ~20x faster than numpy on 0-d arrays) or arrays. :class:`LocalTangentPlane` keeps a datum's ECEF origin
and rotation for repeated conversions (a receiver's).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

__all__ = ["WGS84_A", "WGS84_F", "geodetic_to_ecef", "ecef_to_geodetic", "enu_to_geodetic", "geodetic_to_enu",
           "LocalTangentPlane"]

#: WGS-84 semi-major axis [m] and flattening (NIMA TR8350.2).
WGS84_A = 6378137.0
WGS84_F = 1.0 / 298.257223563
_B = WGS84_A * (1.0 - WGS84_F)
_E2 = WGS84_F * (2.0 - WGS84_F)  # first eccentricity squared
_EP2 = (WGS84_A ** 2 - _B ** 2) / _B ** 2  # second eccentricity squared


#: The functions the formulas use, for scalars and for arrays (same names, so one formula serves both).
_MATH = SimpleNamespace(sin=math.sin, cos=math.cos, sqrt=math.sqrt, atan2=math.atan2, radians=math.radians,
                        degrees=math.degrees, maximum=max, cbrt=lambda x: math.copysign(abs(x) ** (1.0 / 3.0), x))
_NUMPY = SimpleNamespace(sin=np.sin, cos=np.cos, sqrt=np.sqrt, atan2=np.arctan2, radians=np.radians,
                         degrees=np.degrees, maximum=np.maximum, cbrt=np.cbrt)


def _scalar(v) -> bool:
    return isinstance(v, (float, int, np.number)) or (isinstance(v, np.ndarray) and v.ndim == 0)


def _lib(*values):
    """(the function namespace, the values as floats or float arrays): math when every value is a scalar."""
    if all(_scalar(v) for v in values):
        return _MATH, tuple(float(v) for v in values)
    return _NUMPY, tuple(np.asarray(v, dtype=float) for v in values)


def geodetic_to_ecef(lat, lon, alt):
    """ECEF ``(x, y, z)`` [m] of latitude, longitude [deg] and ellipsoidal altitude [m]."""
    m, (lat, lon, alt) = _lib(lat, lon, alt)
    phi, lam = m.radians(lat), m.radians(lon)
    s, c = m.sin(phi), m.cos(phi)
    n = WGS84_A / m.sqrt(1.0 - _E2 * s * s)
    return (n + alt) * c * m.cos(lam), (n + alt) * c * m.sin(lam), (n * (1.0 - _E2) + alt) * s


def ecef_to_geodetic(x, y, z):
    """Latitude, longitude [deg] and ellipsoidal altitude [m] of ECEF ``(x, y, z)`` (Heikkinen's closed form;
    valid away from the Earth's centre, i.e. anywhere a receiver can be)."""
    m, (x, y, z) = _lib(x, y, z)
    a, b, e2 = WGS84_A, _B, _E2
    p2 = x * x + y * y
    p = m.sqrt(p2)
    F = 54.0 * b * b * z * z
    G = p2 + (1.0 - e2) * z * z - e2 * (a * a - b * b)
    c = e2 * e2 * F * p2 / G ** 3
    s = m.cbrt(1.0 + c + m.sqrt(c * c + 2.0 * c))
    k = s + 1.0 + 1.0 / s
    P = F / (3.0 * k * k * G * G)
    Q = m.sqrt(1.0 + 2.0 * e2 * e2 * P)
    r0 = (-P * e2 * p / (1.0 + Q)
          + m.sqrt(m.maximum(0.5 * a * a * (1.0 + 1.0 / Q) - P * (1.0 - e2) * z * z / (Q * (1.0 + Q))
                             - 0.5 * P * p2, 0.0)))
    U = m.sqrt((p - e2 * r0) ** 2 + z * z)
    V = m.sqrt((p - e2 * r0) ** 2 + (1.0 - e2) * z * z)
    z0 = b * b * z / (a * V)
    alt = U * (1.0 - b * b / (a * V))
    return m.degrees(m.atan2(z + _EP2 * z0, p)), m.degrees(m.atan2(y, x)), alt


class LocalTangentPlane:
    """The ENU frame at a datum (lat0, lon0 [deg], alt0 [m]): ``origin`` its ECEF position, ``R`` (3×3) the rotation
    taking ECEF differences to ENU (rows east, north, up)."""

    def __init__(self, lat0, lon0, alt0=0.0):
        self.datum = (float(lat0), float(lon0), float(alt0))
        self.origin = np.array(geodetic_to_ecef(*self.datum))
        phi, lam = math.radians(lat0), math.radians(lon0)
        sp, cp, sl, cl = math.sin(phi), math.cos(phi), math.sin(lam), math.cos(lam)
        self.R = np.array([[-sl, cl, 0.0], [-sp * cl, -sp * sl, cp], [cp * cl, cp * sl, sp]])
        self._rows = tuple(tuple(float(x) for x in row) for row in self.R)
        self._o = tuple(float(x) for x in self.origin)

    def to_geodetic(self, e, n, u):
        """Latitude, longitude [deg], altitude [m] of the ENU point ``(e, n, u)`` [m]."""
        (re, rn, ru), (x0, y0, z0) = self._rows, self._o
        if _scalar(e) and _scalar(n) and _scalar(u):
            e, n, u = float(e), float(n), float(u)
        else:
            e, n, u = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (e, n, u)))
        # ECEF = origin + Rᵀ [e, n, u]
        return ecef_to_geodetic(x0 + re[0] * e + rn[0] * n + ru[0] * u, y0 + re[1] * e + rn[1] * n + ru[1] * u,
                                z0 + re[2] * e + rn[2] * n + ru[2] * u)

    def to_enu(self, lat, lon, alt):
        """``(e, n, u)`` [m] of latitude, longitude [deg] and altitude [m]."""
        x, y, z = geodetic_to_ecef(lat, lon, alt)
        (re, rn, ru), (x0, y0, z0) = self._rows, self._o
        dx, dy, dz = x - x0, y - y0, z - z0
        return (re[0] * dx + re[1] * dy + re[2] * dz, rn[0] * dx + rn[1] * dy + rn[2] * dz,
                ru[0] * dx + ru[1] * dy + ru[2] * dz)


def enu_to_geodetic(e, n, u, lat0, lon0, alt0):
    """Latitude, longitude [deg] and altitude [m] of the point ``(e, n, u)`` [m] of the ENU frame at the datum."""
    return LocalTangentPlane(lat0, lon0, alt0).to_geodetic(e, n, u)


def geodetic_to_enu(lat, lon, alt, lat0, lon0, alt0):
    """``(e, n, u)`` [m] in the ENU frame at the datum of latitude, longitude [deg] and altitude [m]."""
    return LocalTangentPlane(lat0, lon0, alt0).to_enu(lat, lon, alt)
