"""Roll-pitch-yaw and rotation matrices to quaternions, ROS-free: the nodes' cores and the headless run need them
without the message packages :mod:`mbs_ros.nodes.conversions` imports. Quaternions ``[x, y, z, w]`` (README,
Conventions)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from transforms3d import euler as _euler

__all__ = ["quaternion_from_rpy", "quaternion_from_matrix"]


def quaternion_from_rpy(rpy: Sequence[float]) -> np.ndarray:
    """``[x, y, z, w]`` from roll, pitch, yaw in rad (ROS convention: R = Rz(yaw) Ry(pitch) Rx(roll)).

    Human-facing input only: states never hold Euler angles.
    """
    a = np.asarray(rpy, dtype=float).reshape(-1)
    if a.shape != (3,):
        raise ValueError(f"roll/pitch/yaw must have 3 components, got {a.size}")
    r, p, y = a
    w, x, y_, z = _euler.euler2quat(r, p, y, "sxyz")
    return np.array([x, y_, z, w])


def quaternion_from_matrix(R: np.ndarray) -> np.ndarray:
    """``[x, y, z, w]`` (``w >= 0``, unit) of a rotation matrix, or (n, 4) of a stack (n, 3, 3) in one call.

    Shepperd's method: the quaternion is read off the column of the largest of ``(w, x, y, z)``, so every
    component is as accurate as the matrix (no square root of a small number)."""
    R = np.asarray(R, dtype=float)
    rows = R.reshape(-1, 9).tolist()  # a few matrices per call here: plain floats beat numpy's per-call overhead
    return np.array([_quaternion(*r) for r in rows]).reshape(R.shape[:-2] + (4,))


def _quaternion(m00, m01, m02, m10, m11, m12, m20, m21, m22) -> list:
    tr = m00 + m11 + m22
    if tr >= m00 and tr >= m11 and tr >= m22:
        q = [m21 - m12, m02 - m20, m10 - m01, 1.0 + tr]
    elif m00 >= m11 and m00 >= m22:
        q = [1.0 + m00 - m11 - m22, m01 + m10, m02 + m20, m21 - m12]
    elif m11 >= m22:
        q = [m01 + m10, 1.0 - m00 + m11 - m22, m12 + m21, m02 - m20]
    else:
        q = [m02 + m20, m12 + m21, 1.0 - m00 - m11 + m22, m10 - m01]
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    n = -n if q[3] < 0.0 else n
    return [q[0] / n, q[1] / n, q[2] / n, q[3] / n]
