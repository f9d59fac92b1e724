"""The compiled fast path: numba kernels for every base group and joint type, in body frames.

The equations and layouts of :mod:`mbs_ros.dynamics.algorithms.multibody` (the tests compare the two on random trees of
every base group) as Featherstone's recursions (Featherstone 2008, ch. 5–7): RNEA, CRBA, the articulated-body
algorithm, the structured Coriolis matrix (seed 004 eq. 57) and the whole Munthe-Kaas step (seed 001 eqs. 35–37)
as one call. Compiled once and cached on disk (:func:`warm_up`); without numba or with ``MBS_BACKEND=numpy`` the
models use the numpy reference. The lie module's series tables are compiled in as constants: numba's cache does
not see a change there, so touch this file after changing them. Details: ``docs/dynamics.md``.
"""
from __future__ import annotations

import time

import numpy as np

from mbs_ros.dynamics.kernels.jit import AVAILABLE
from mbs_ros.dynamics.kernels.multibody import (PIVOT_TOLERANCE, _SingularPivot, _aba_core, _coriolis_core, _crba_core, _passive_core,
                              _rnea_core)
from mbs_ros.dynamics.kernels.layout import (BASE_CODES, EL_BODY, EL_DLIN, EL_DQUAD, EL_P, EL_R, FM_ARM, FM_FW, FM_HD, FM_HMA, FM_JP,
                            FM_P0, FM_PA, FM_PA2, FM_PAX, FM_R0, FM_S, F_CURRENT, F_ELEMS, F_FLUID, F_JOINTS, IM_BODY,
                            IM_COLS, IM_HDR)
from mbs_ros.dynamics.kernels.step import (_advance_core, _all_terms_core, _body_poses_core, _energy_core, _integrate,
                                           _momentum_core, _simulate_core, _step_core)

__all__ = ["AVAILABLE", "CompiledModel", "compile_model", "warm_up", "warm_up_model", "SingularMassMatrix",
           "PIVOT_TOLERANCE"]


class SingularMassMatrix(ArithmeticError):
    """The joint-space mass matrix is singular at the configuration the forward dynamics was asked at."""


# ------------------------------------------------------------------------------------------ Python side
def _f64(x, n=None):
    """x as a C-contiguous, writable float64 array (no copy when it already is one): the kernels are compiled
    for exactly that type, so any other input would trigger another compilation."""
    if type(x) is not np.ndarray or x.dtype != np.float64 or not x.flags.c_contiguous or not x.flags.writeable:
        x = np.array(x, dtype=np.float64)
    if n is not None and x.shape != (n,):
        raise ValueError(f"expected a vector of {n} numbers, got shape {x.shape}")
    return x


_NO_FEXT = np.zeros((1, 6))


class CompiledModel:
    """The arrays the kernels read, packed once from a model's tree (``base`` name, :class:`~mbs_ros.dynamics.model.tree.Tree`, world
    gravity); one instance serves any number of calls, each call allocates its own workspace."""

    __slots__ = ("im", "fm", "I6", "nq", "nv", "nb", "_tableaus", "joint_names", "mc")

    def __init__(self, base, tree, gravity, passive=None):
        nb, nj = tree.nb, tree.nj
        im = np.full((nb + 2, 8), -1, dtype=np.int64)
        im[IM_HDR] = [BASE_CODES[base], nb, nj, tree.nq, tree.nv, tree.nqb, tree.nvb, 0]
        if tree.base_cols is not None:
            im[IM_COLS, : len(tree.base_cols)] = tree.base_cols
        im[IM_BODY:, 0] = tree.parent
        im[IM_BODY + 1:, 1] = tree.jtype
        im[IM_BODY + 1:, 2] = tree.iq
        im[IM_BODY + 1:, 3] = tree.iv
        ne = 0 if passive is None else int(passive.elem_body.size)
        fm = np.zeros((nb + ne, FM_FW))
        fm[0, :3] = gravity
        if nj and tree.armature is not None:
            fm[1:nb, FM_ARM] = tree.armature
        if nj:
            fm[1:nb, FM_R0:FM_R0 + 9] = tree.placement[:, :3, :3].reshape(nj, 9)
            fm[1:nb, FM_P0:FM_P0 + 3] = tree.placement[:, :3, 3]
            fm[1:nb, FM_PA:FM_PA + 9] = tree.PA.reshape(nj, 9)
            fm[1:nb, FM_PA2:FM_PA2 + 9] = tree.PA2.reshape(nj, 9)
            fm[1:nb, FM_PAX:FM_PAX + 3] = tree.Pa
            fm[1:nb, FM_S:FM_S + 6] = tree.s_joint
        if passive is not None:
            flags = 0
            if passive.has_fluid:
                flags |= F_FLUID
                fm[:nb, FM_HD:FM_HD + 18] = passive.D.reshape(nb, 18)
                fm[:nb, FM_HMA:FM_HMA + 36] = passive.added_mass.reshape(nb, 36)
            if passive.has_current:
                flags |= F_CURRENT
            fm[0, 3:6] = passive.current
            fm[0, 6:9] = passive.current_rate
            if ne:
                flags |= F_ELEMS
                fm[nb:, EL_BODY] = passive.elem_body
                fm[nb:, EL_R:EL_R + 9] = passive.T_body_elem[:, :3, :3].reshape(ne, 9)
                fm[nb:, EL_P:EL_P + 3] = passive.T_body_elem[:, :3, 3]
                fm[nb:, EL_DLIN:EL_DLIN + 36] = passive.D_lin.reshape(ne, 36)
                fm[nb:, EL_DQUAD:EL_DQUAD + 6] = passive.D_quad
            if nj and (passive.stiffness.any() or passive.damping.any() or passive.friction.any()):
                flags |= F_JOINTS
                fm[1:nb, FM_JP] = passive.stiffness
                fm[1:nb, FM_JP + 1] = passive.rest
                fm[1:nb, FM_JP + 2] = passive.damping
                fm[1:nb, FM_JP + 3] = passive.friction
                fm[1:nb, FM_JP + 4] = np.where(passive.friction_velocity > 0, passive.friction_velocity, 1.0)
            im[IM_HDR, 7] = flags
            im[IM_COLS, 7] = ne
        else:
            im[IM_HDR, 7] = 0
            im[IM_COLS, 7] = 0
        self.im, self.fm = im, fm
        self.I6 = np.ascontiguousarray(tree.body_inertia, dtype=np.float64).copy()
        self.mc = np.ascontiguousarray(np.column_stack([tree.body_mass, tree.body_first_moment]), dtype=np.float64)
        self.nq, self.nv, self.nb = tree.nq, tree.nv, nb
        self.joint_names = tuple(tree.joint_names)
        from mbs_ros.dynamics.simulation.integrators import TABLEAUS

        self._tableaus = {}
        for name, tab in TABLEAUS.items():
            ns = len(tab.b)
            A = np.zeros((ns, ns))
            for j, row in enumerate(tab.A):
                A[j, : len(row)] = row
            self._tableaus[name] = (A, np.array(tab.b, dtype=np.float64))

    def _fext(self, f_ext):
        if f_ext is None:
            return _NO_FEXT, 0
        f = np.array(f_ext, dtype=np.float64).reshape(self.nb, 6)
        return f, 4

    # ------------------------------------------------------------------ kernels (Model delegates to these)
    def rnea(self, q, v, a, f_ext=None):
        tau = np.empty(self.nv)
        fext, flag = self._fext(f_ext)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), _f64(a, self.nv), fext, 3 | flag,
                   tau, np.empty((self.nb, 6)))
        return tau

    def nonlinear_effects(self, q, v):
        tau = np.empty(self.nv)
        v = _f64(v, self.nv)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), v, v, _NO_FEXT, 1, tau, np.empty((self.nb, 6)))
        return tau

    def gravity_forces(self, q):
        tau = np.empty(self.nv)
        z = np.zeros(self.nv)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), z, z, _NO_FEXT, 0, tau, np.empty((self.nb, 6)))
        return tau

    def crba(self, q):
        M = np.empty((self.nv, self.nv))
        _crba_core(self.im, self.fm, self.I6, _f64(q, self.nq), M)
        return M

    def coriolis_matrix(self, q, v):
        C = np.empty((self.nv, self.nv))
        _coriolis_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), C)
        return C

    def aba(self, q, v, tau, f_ext=None):
        qdd = np.empty(self.nv)
        fext, flag = self._fext(f_ext)
        try:
            _aba_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), _f64(tau, self.nv), fext,
                      flag != 0, qdd)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return qdd

    def _singular(self, exc) -> SingularMassMatrix:
        """The :class:`SingularMassMatrix` naming the joint of the kernel's vanished pivot."""
        name = self.joint_names[int(exc.args[0]) - 1] if exc.args else "?"
        return SingularMassMatrix(
            f"the joint-space mass matrix is singular at this configuration: with the joints beyond it free, moving "
            f"joint {name!r} moves no mass (joints in line with a massless link between them); no acceleration is "
            "defined: start from, or reset to, another pose, or give the joint an armature")

    def all_terms(self, q, v):
        M = np.empty((self.nv, self.nv))
        nle = np.empty(self.nv)
        g = np.empty(self.nv)
        _all_terms_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), M, nle, g)
        return M, nle, g

    def joint_wrenches(self, q, v, a, tau=None, f_ext=None):
        """(nj, 6): the wrench each joint transmits to its child, in the child (joint) frame."""
        F = np.empty((self.nb, 6))
        fext, flag = self._fext(f_ext)
        _rnea_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), _f64(a, self.nv), fext, 3 | flag,
                   np.empty(self.nv), F)
        W = F[1:]
        if tau is not None:  # what reaches the link: the effort less what accelerates the rotor (armature)
            nvb = int(self.im[IM_HDR, 6])
            tau = np.asarray(tau, dtype=float).reshape(self.nv)[nvb:]
            tau = tau - self.fm[1:self.nb, FM_ARM] * _f64(a, self.nv)[nvb:]
            W -= self.fm[1:self.nb, FM_S:FM_S + 6] * tau[:, None]
        return W

    def passive(self, q, v, springs=True):
        """``(τ_p (nv,), dissipated power [W])``: the passive forces of passive.py at (q, v)."""
        tau = np.empty(self.nv)
        pw = np.empty(1)
        _passive_core(self.im, self.fm, _f64(q, self.nq), _f64(v, self.nv), bool(springs), tau, pw)
        return tau, float(pw[0])

    def with_current(self, velocity, rate):
        """A copy whose current is ``velocity`` and ``rate`` (world axes; the kernels' arrays otherwise shared)."""
        out = CompiledModel.__new__(CompiledModel)
        for name in CompiledModel.__slots__:
            setattr(out, name, getattr(self, name))
        out.fm = self.fm.copy()
        out.im = self.im.copy()
        out.fm[0, 3:6] = velocity
        out.fm[0, 6:9] = rate
        if self.im[IM_HDR, 7] & F_FLUID:
            if np.any(velocity) or np.any(rate):
                out.im[IM_HDR, 7] |= F_CURRENT
            else:
                out.im[IM_HDR, 7] &= ~F_CURRENT
        return out

    def energies(self, q, v):
        """``(kinetic, gravity potential)`` [J] at (q, v) (:func:`_energy_core`)."""
        out = np.empty(2)
        _energy_core(self.im, self.fm, self.I6, self.mc, _f64(q, self.nq), _f64(v, self.nv), out)
        return float(out[0]), float(out[1])

    def spatial_momentum(self, q, v):
        """The world-frame spatial momentum ``[linear; angular about the world origin]`` at (q, v)
        (:func:`_momentum_core`)."""
        out = np.empty(6)
        _momentum_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), out)
        return out

    def body_poses(self, q):
        T = np.empty((self.nb, 4, 4))
        _body_poses_core(self.im, self.fm, _f64(q, self.nq), T)
        return T

    def integrate(self, q, xi):
        out = np.empty(self.nq)
        _integrate(self.im, _f64(q, self.nq), _f64(xi, self.nv), out)
        return out

    def _taus(self, tau, method):
        tau = _f64(tau)
        if tau.ndim == 1:
            if tau.shape[0] != self.nv:
                raise ValueError(f"tau must have {self.nv} entries, got {tau.shape[0]}")
            return tau.reshape(1, self.nv)
        ns = self._tableaus[method][1].shape[0]
        if tau.shape != (ns, self.nv):
            raise ValueError(f"tau has shape {tau.shape}; the {ns}-stage {method} needs ({ns}, {self.nv})")
        return tau

    def step(self, q, v, tau, dt, method="rk4", wrench_world=None):
        """One Munthe-Kaas step: ``(q_next, v_next)``; ``tau`` held (nv,) or per stage (n_stages, nv)."""
        try:
            A, b = self._tableaus[method]
        except KeyError:
            raise ValueError(f"unknown integrator {method!r}; choose one of {', '.join(self._tableaus)}") from None
        q_out = np.empty(self.nq)
        v_out = np.empty(self.nv)
        W = _NO_FEXT[0] if wrench_world is None else _f64(wrench_world, 6)
        try:
            _step_core(self.im, self.fm, self.I6, _f64(q, self.nq), _f64(v, self.nv), self._taus(tau, method), W,
                       wrench_world is not None, float(dt), A, b, q_out, v_out)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return q_out, v_out

    def simulate(self, q0, v0, tau, dt, steps, method="rk4", wrench_world=None):
        """``steps`` steps with ``tau`` (nv,) held: (qs (steps+1, nq), vs (steps+1, nv))."""
        A, b = self._tableaus[method]
        qs = np.empty((steps + 1, self.nq))
        vs = np.empty((steps + 1, self.nv))
        W = _NO_FEXT[0] if wrench_world is None else _f64(wrench_world, 6)
        try:
            _simulate_core(self.im, self.fm, self.I6, _f64(q0, self.nq), _f64(v0, self.nv), _f64(tau, self.nv), W,
                           wrench_world is not None, float(dt), A, b, int(steps), qs, vs)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return qs, vs


    def advance(self, q0, v0, tau, dt, steps, method, wrench_world, v_caps, max_q):
        """:meth:`simulate` stopping at the first step out of the bounds (finite, ``|v| <= v_caps``, ``|q| <=
        max_q``): ``(qs, vs, n_within)``, rows ``0 .. n_within`` (and the failing one after them) filled."""
        A, b = self._tableaus[method]
        qs = np.empty((steps + 1, self.nq))
        vs = np.empty((steps + 1, self.nv))
        W = _NO_FEXT[0] if wrench_world is None else _f64(wrench_world, 6)
        try:
            n = _advance_core(self.im, self.fm, self.I6, _f64(q0, self.nq), _f64(v0, self.nv), _f64(tau, self.nv),
                              W, wrench_world is not None, float(dt), A, b, int(steps), _f64(v_caps, self.nv),
                              float(max_q), qs, vs)
        except _SingularPivot as exc:
            raise self._singular(exc) from None
        return qs, vs, n


def compile_model(base, tree, gravity, passive=None):
    """A :class:`CompiledModel` of a tree on ``base`` (with its :class:`~mbs_ros.dynamics.model.passive.Passive`, if any), or None where
    numba is unavailable (or the environment sets ``MBS_BACKEND=numpy``)."""
    return CompiledModel(base, tree, gravity, passive) if AVAILABLE else None


def warm_up_model():
    """``(CompiledModel, q)``: the two-body SE(3) tree the warm-ups call every kernel on (the kernels are compiled for
    the array types, whatever the base group or joint types)."""
    from mbs_ros.dynamics.model.tree import build_tree
    from mbs_ros.dynamics.model.urdf import parse_urdf

    urdf = ('<robot name="warm"><link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"'
            ' ixz="0" iyz="0"/></inertial></link><link name="c"><inertial><mass value="1"/><inertia ixx="1" iyy="1"'
            ' izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j" type="continuous"><parent link="b"/>'
            '<child link="c"/><axis xyz="0 0 1"/></joint></robot>')
    c = CompiledModel("se3", build_tree(parse_urdf(urdf, warn=False), "se3"), np.array([0.0, 0.0, -9.81]))
    return c, np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0])


def warm_up() -> float:
    """Compile (or load from the on-disk cache) every kernel by calling it once; returns the seconds it took.
    One tree suffices: the kernels are compiled for the array types, whatever the base group or joint types."""
    t0 = time.perf_counter()
    if not AVAILABLE:
        return 0.0
    c, q = warm_up_model()
    v = np.zeros(c.nv)
    c.rnea(q, v, v)
    c.rnea(q, v, v, np.zeros((c.nb, 6)))
    c.nonlinear_effects(q, v)
    c.gravity_forces(q)
    c.crba(q)
    c.coriolis_matrix(q, v)
    c.aba(q, v, v)
    c.aba(q, v, v, np.zeros((c.nb, 6)))
    c.all_terms(q, v)
    c.joint_wrenches(q, v, v)
    c.body_poses(q)
    c.energies(q, v)
    c.spatial_momentum(q, v)
    c.integrate(q, v)
    c.step(q, v, v, 1e-3)
    c.step(q, v, v, 1e-3, wrench_world=np.zeros(6))
    c.simulate(q, v, v, 1e-3, 1)
    c.advance(q, v, v, 1e-3, 2, "rk4", None, np.full(c.nv, np.inf), np.inf)
    c.passive(q, v)
    return time.perf_counter() - t0

