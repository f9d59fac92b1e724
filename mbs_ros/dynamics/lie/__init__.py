"""Lie groups for configuration spaces: SO(3), SE(3), SE(2), Schoenflies, SO(3) x R^3, R^n.

Each group is a stateless instance of a :class:`LieGroup` subclass whose methods map plain numpy
arrays to plain numpy arrays (see ``_base`` for the conventions: Pinocchio configuration layout,
linear-first tangent coordinates, body-frame velocities, right-trivialised dexp).

>>> from mbs_ros.dynamics.lie import SE3
>>> q = SE3.integrate(SE3.identity(), [0.1, 0.0, 0.0, 0.0, 0.0, 0.2])
"""

from mbs_ros.dynamics.lie._base import (DEXP_INV_SERIES, SE3_BETA_SERIES, SE3_DEXP_C3_SERIES, SE3_DEXP_C4_SERIES,
                    SIN_COEFF_SERIES, SINC_THRESHOLD, LieGroup, hat3, vee3)
from mbs_ros.dynamics.lie.rn import Rn, RnGroup
from mbs_ros.dynamics.lie.schoenflies import Schoenflies
from mbs_ros.dynamics.lie.se2 import SE2
from mbs_ros.dynamics.lie.se3 import SE3
from mbs_ros.dynamics.lie.so3 import SO3
from mbs_ros.dynamics.lie.so3xr3 import SO3xR3

GROUPS = {g.name: g for g in (SO3, SE3, SE2, Schoenflies, SO3xR3)}

__all__ = ["LieGroup", "RnGroup", "SO3", "SE3", "SE2", "Schoenflies", "SO3xR3", "Rn", "GROUPS",
           "hat3", "vee3", "SINC_THRESHOLD", "SIN_COEFF_SERIES", "DEXP_INV_SERIES", "SE3_BETA_SERIES",
           "SE3_DEXP_C3_SERIES", "SE3_DEXP_C4_SERIES"]
