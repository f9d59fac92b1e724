"""The compiled kernels' data layout, one place for every kernel module (:mod:`mbs_ros.dynamics.kernels.compiled`, :mod:`mbs_ros.dynamics.kernels.spatial`,
:mod:`mbs_ros.dynamics.kernels.multibody`, :mod:`mbs_ros.dynamics.kernels.step`, the derivative and law kernels): the integer array ``im`` and the
float array ``fm`` a :class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel` builds from a tree, and what each row and column holds.

``im``: row ``IM_HDR`` the header ``[base code, nb, nj, nq, nv, nqb, nvb, passive flags]``, row ``IM_COLS`` the
base's velocity columns (-1 padded; entry 7: the number of damping elements), row ``IM_BODY + k`` body k's
``[parent, joint type, iq, iv]``. ``fm``: one row per body (row 0 the base: gravity in its first three entries,
the current U and its rate U̇ (world) in 3..8), the columns below; rows ``nb + e``: damping element e
``[body, R (9), p (3), D_lin (36), D_quad (6)]`` at the ``EL_*`` columns.
"""
from __future__ import annotations

__all__ = ["BASE_CODES", "FM_R0", "FM_P0", "FM_PA", "FM_PA2", "FM_PAX", "FM_S", "FM_HD", "FM_HMA", "FM_JP", "FM_FW",
           "FM_ARM", "EL_BODY", "EL_R", "EL_P", "EL_DLIN", "EL_DQUAD", "F_FLUID", "F_CURRENT", "F_ELEMS", "F_JOINTS",
           "IM_HDR", "IM_COLS", "IM_BODY"]

#: im[IM_HDR, 0]: the base group's code
BASE_CODES = {"fixed": 0, "se3": 1, "schoenflies": 2, "se2": 3, "so3": 4, "so3xr3": 5}
#: fm columns of a body row: the joint's rotation R0 (9) and position P0 (3) in the parent, the inertia's
#: parameters PA (9), PA2 (9), PAX (3), the joint's motion subspace S (6)
FM_R0, FM_P0, FM_PA, FM_PA2, FM_PAX, FM_S = 0, 9, 12, 21, 30, 33
#: passive elements (passive.py): per body HD: D = M_A[:, :3] + ρ∇[1; ĉ_b] (6×3), HMA: the added mass M_A (6×6),
#: JP: the joint's [stiffness, rest, damping, friction, friction velocity], FW: the fluid weight's entries
FM_HD, FM_HMA, FM_JP, FM_FW = 40, 58, 94, 100
FM_ARM = 99  #: fm[k, FM_ARM]: joint k − 1's armature (rotor inertia on M's diagonal)
#: columns of a damping element's row: body, R (9), p (3), D_lin (36), D_quad (6)
EL_BODY, EL_R, EL_P, EL_DLIN, EL_DQUAD = 0, 1, 10, 13, 49
#: im[IM_HDR, 7]: passive flags
F_FLUID, F_CURRENT, F_ELEMS, F_JOINTS = 1, 2, 4, 8
#: im rows: the header, the base columns, the first body
IM_HDR, IM_COLS, IM_BODY = 0, 1, 2
