"""Mimic joints: ``q_mimic = multiplier · q_master + offset`` (URDF ``<mimic>``), as Pinocchio 3 and ros2_control
treat them — the mimic joints leave the independent coordinates.

The full tree (every movable joint) keeps its kernels; the reduced model maps its coordinates to the full ones by a
constant affine map (the mimic joints are revolute or prismatic, one coordinate each, and so are their masters):

    q_full = E(q),  v_full = G v,  v̇_full = G v̇        (G: nv_full × nv, constant)

Constant G makes the reduced equations the projections of the full ones (d'Alembert along the admissible motions):

    M = Gᵀ M_full G,   C = Gᵀ C_full G,   g = Gᵀ g_full,   τ = Gᵀ τ_full,

so ``Ṁ − 2C = Gᵀ(Ṁ_full − 2C_full)G`` stays skew-symmetric and the energy balance is the full one's. Forward
dynamics solves the reduced ``M v̇ = τ − Gᵀ (C_full G v + g_full)`` (dense, as Pinocchio does for mimic joints).
A mimic of a mimic is resolved to its root master (the multipliers and offsets compose).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np


__all__ = ["MimicJoint", "Mimic", "MIMIC_MODES", "mimic_elements", "reduce_model"]

#: How a model treats URDF ``<mimic>`` joints (``Model.from_urdf(..., mimic=...)``, the nodes' and scenarios' key).
MIMIC_MODES = ("reduce", "independent")


@dataclass(frozen=True)
class MimicJoint:
    """``name`` follows ``master``: ``q_name = multiplier · q_master + offset`` (rad or m)."""

    name: str
    master: str
    multiplier: float = 1.0
    offset: float = 0.0


def mimic_elements(xml: str) -> list:
    """The ``<mimic>`` of every non-fixed joint of a URDF, as written: ``[MimicJoint]`` in URDF order
    (``multiplier`` 1 and ``offset`` 0 when absent; a value that is not a number is left as NaN for the caller to
    report)."""

    def number(text, default):
        if text is None:
            return default
        try:
            return float(text)
        except ValueError:
            return float("nan")

    out = []
    for joint in ET.fromstring(xml).findall("joint"):
        m = joint.find("mimic")
        if m is None or joint.get("type") == "fixed":
            continue
        out.append(MimicJoint(joint.get("name"), m.get("joint") or "", number(m.get("multiplier"), 1.0),
                              number(m.get("offset"), 0.0)))
    return out


def _resolve(mimics: list, movable: dict) -> tuple:
    """``(resolved {name: MimicJoint to a root master}, problems [(name, why)])``. ``movable``: joint name ->
    URDF type (revolute, prismatic, continuous) of the full tree's movable joints."""
    by_name = {m.name: m for m in mimics}
    problems, resolved = [], {}
    for m in mimics:
        why = None
        if not (np.isfinite(m.multiplier) and np.isfinite(m.offset)):
            why = "its multiplier or offset is not a number"
        elif m.name not in movable:
            why = "it is not a movable joint of the model"
        elif movable[m.name] not in ("revolute", "prismatic"):
            why = "only revolute and prismatic joints can mimic (a continuous one has no single coordinate)"
        if why is None:  # follow the chain to a master that mimics nobody
            mult, off, master, seen = m.multiplier, m.offset, m.master, {m.name}
            while master in by_name and master not in seen:
                up = by_name[master]
                seen.add(master)
                mult, off, master = mult * up.multiplier, mult * up.offset + off, up.master
            if master in seen:
                why = "its mimic chain is a loop"
            elif master not in movable:
                why = f"its master {master!r} is not a movable joint of the model"
            elif movable[master] not in ("revolute", "prismatic"):
                why = f"its master {master!r} is a continuous joint (no single coordinate)"
            else:
                resolved[m.name] = MimicJoint(m.name, master, mult, off)
        if why is not None:
            problems.append((m.name, why))
    bad = {name for name, _ in problems}
    # a joint whose chain runs through a refused mimic is refused too (its master would move independently)
    for m in mimics:
        if m.name in resolved and any(n in bad for n in _chain(m, by_name)):
            del resolved[m.name]
            problems.append((m.name, "it mimics a joint whose own <mimic> is not simulated"))
    return resolved, problems


def _chain(m: MimicJoint, by_name: dict) -> list:
    out, master, seen = [], m.master, {m.name}
    while master in by_name and master not in seen:
        out.append(master)
        seen.add(master)
        master = by_name[master].master
    return out


class Mimic:
    """The coordinate reduction of ``full`` (a :class:`~mbs_ros.dynamics.Model` without mimic joints) by
    ``joints`` (resolved :class:`MimicJoint` s, masters independent). Implements the reduced model's algorithms;
    :class:`~mbs_ros.dynamics.Model` delegates to it."""

    def __init__(self, full, joints: dict):
        tree = full.tree
        names = list(tree.joint_names)
        index = {n: k for k, n in enumerate(names)}
        self.full = full
        self.joints = {n: joints[n] for n in names if n in joints}  # configuration order
        keep = [k for k, n in enumerate(names) if n not in self.joints]
        self.keep_joints = np.array(keep, dtype=int)
        qj, vj = [], []
        for k in keep:
            width = 2 if k in set(tree.cont.tolist()) else 1
            qj.extend(range(int(tree.iq[k]), int(tree.iq[k]) + width))
            vj.append(int(tree.iv[k]))
        self.keep_q = np.concatenate([np.arange(tree.nqb), np.array(qj, dtype=int)]).astype(int)
        self.keep_v = np.concatenate([np.arange(tree.nvb), np.array(vj, dtype=int)]).astype(int)
        self.nq, self.nv = self.keep_q.size, self.keep_v.size
        G = np.zeros((tree.nv, self.nv))
        G[self.keep_v, np.arange(self.nv)] = 1.0
        self.iq_mimic = np.array([int(tree.iq[index[n]]) for n in self.joints], dtype=int)
        self.iv_mimic = np.array([int(tree.iv[index[n]]) for n in self.joints], dtype=int)
        self.iq_master = np.array([int(tree.iq[index[m.master]]) for m in self.joints.values()], dtype=int)
        iv_master = np.array([int(tree.iv[index[m.master]]) for m in self.joints.values()], dtype=int)
        self.multiplier = np.array([m.multiplier for m in self.joints.values()], dtype=float)
        self.offset = np.array([m.offset for m in self.joints.values()], dtype=float)
        G[self.iv_mimic] = self.multiplier[:, None] * G[iv_master]
        self.G = G
        self.Gt = np.ascontiguousarray(G.T)
        self.joint_names = tuple(names[k] for k in keep)
        self.joint_types = tuple(tree.joint_types[k] for k in keep)
        for a in (self.keep_q, self.keep_v, self.G, self.Gt, self.iq_mimic, self.iv_mimic, self.iq_master,
                  self.multiplier, self.offset, self.keep_joints):
            a.setflags(write=False)

    # ---------------------------------------------------------------- coordinates
    def q_full(self, q: np.ndarray) -> np.ndarray:
        """E(q): the full configuration, mimic joints at ``multiplier · q_master + offset``."""
        out = np.empty(self.full.nq)
        out[self.keep_q] = q
        out[self.iq_mimic] = self.multiplier * out[self.iq_master] + self.offset
        return out

    def v_full(self, v: np.ndarray) -> np.ndarray:
        return self.G @ np.asarray(v, dtype=float)

    def with_full(self, full) -> "Mimic":
        new = object.__new__(Mimic)
        new.__dict__.update(self.__dict__)
        new.full = full
        return new

    # ---------------------------------------------------------------- configuration space
    def neutral(self) -> np.ndarray:
        return self.full.neutral()[self.keep_q]

    def random_configuration(self, rng, joint_range) -> np.ndarray:
        return self.full.random_configuration(rng, joint_range)[self.keep_q]

    def integrate(self, q, v, dt) -> np.ndarray:
        return self.full.integrate(self.q_full(q), self.v_full(v), dt)[self.keep_q]

    def difference(self, q0, q1) -> np.ndarray:
        return self.full.difference(self.q_full(q0), self.q_full(q1))[self.keep_v]

    def dexp_inv(self, xi) -> np.ndarray:
        out = np.eye(self.nv)
        nvb = self.full.tree.nvb
        if nvb:
            out[:nvb, :nvb] = self.full.group.dexp_inv(np.asarray(xi, dtype=float)[:nvb])
        return out

    def link_poses(self, q) -> np.ndarray:
        return self.full.link_poses(self.q_full(q))

    # ---------------------------------------------------------------- dynamics: projections of the full tree's
    def mass_matrix(self, q) -> np.ndarray:
        return self.Gt @ self.full.mass_matrix(self.q_full(q)) @ self.G

    def coriolis_matrix(self, q, v) -> np.ndarray:
        return self.Gt @ self.full.coriolis_matrix(self.q_full(q), self.v_full(v)) @ self.G

    def gravity_forces(self, q) -> np.ndarray:
        return self.Gt @ self.full.gravity_forces(self.q_full(q))

    def nonlinear_effects(self, q, v) -> np.ndarray:
        return self.Gt @ self.full.nonlinear_effects(self.q_full(q), self.v_full(v))

    def all_terms(self, q, v):
        M, nle, g = self.full.all_terms(self.q_full(q), self.v_full(v))
        return self.Gt @ M @ self.G, self.Gt @ nle, self.Gt @ g

    def forward_dynamics(self, q, v, tau, f_ext=None) -> np.ndarray:
        qf, vf = self.q_full(q), self.v_full(v)
        if f_ext is None:
            M, nle, _ = self.full.all_terms(qf, vf)
        else:
            M = self.full.mass_matrix(qf)
            nle = self.full.inverse_dynamics(qf, vf, np.zeros(self.full.nv), f_ext=f_ext)
        return np.linalg.solve(self.Gt @ M @ self.G, np.asarray(tau, dtype=float) - self.Gt @ nle)

    def full_efforts(self, q, v, a, f_ext=None) -> np.ndarray:
        """τ_full = RNEA_full(E q, G v, G a): the effort at every joint of the full tree along the motion, the
        coupling's share at each mimic joint included (``Gᵀ τ_full`` is the reduced inverse dynamics)."""
        return self.full.inverse_dynamics(self.q_full(q), self.v_full(v), self.v_full(a), f_ext=f_ext)

    def inverse_dynamics(self, q, v, a, f_ext=None) -> np.ndarray:
        return self.Gt @ self.full_efforts(q, v, a, f_ext)

    def joint_wrenches(self, q, v, a, tau=None, f_ext=None) -> np.ndarray:
        """Rows of the independent joints (``joint_names`` order). With ``tau``, the actuation taken off at each
        joint of the full tree is ``τ_full`` of :meth:`full_efforts` with the reduced residual ``tau − Gᵀ τ_full``
        on the independent coordinates (zero when ``a`` is the forward dynamics of ``tau``)."""
        qf, vf, af = self.q_full(q), self.v_full(v), self.v_full(a)
        tau_full = None
        if tau is not None:
            tau_full = self.full.inverse_dynamics(qf, vf, af, f_ext=f_ext)
            tau_full[self.keep_v] += np.asarray(tau, dtype=float) - self.Gt @ tau_full
        W = self.full.joint_wrenches(qf, vf, af, tau=tau_full, f_ext=f_ext)
        return W[self.keep_joints]

    def kinetic_energy(self, q, v) -> float:
        return self.full.kinetic_energy(self.q_full(q), self.v_full(v))

    def potential_energy(self, q) -> float:
        return self.full.potential_energy(self.q_full(q))

    def spatial_momentum(self, q, v) -> np.ndarray:
        return self.full.spatial_momentum(self.q_full(q), self.v_full(v))


def reduce_model(model, mimics: list, locked: dict):
    """``(mimic, report items)``: the :class:`Mimic` reduction of ``model`` (a full :class:`~mbs_ros.dynamics.Model`)
    by the mimic joints of ``mimics`` (:func:`mimic_elements`), or None when none can be simulated as a mimic.
    Mimic joints that are locked are skipped (their lock holds); those that cannot be simulated as mimics (see
    :func:`_resolve`) stay independent, one report item each."""
    tree = model.tree
    movable = dict(zip(tree.joint_names, tree.joint_types))
    mimics = [m for m in mimics if m.name not in locked]
    resolved, problems = _resolve(mimics, movable)
    report = tuple(f"joint {name!r}: <mimic> not simulated, it moves independently ({why})" for name, why in problems)
    if not resolved:
        return None, report
    return Mimic(model, resolved), report
