"""Kernel timings of mbs_ros.dynamics against Pinocchio's Python calls, same URDF, same states.

    .venv/bin/python bench/kernels.py            (or: bash tools/in_env.sh python bench/kernels.py)

Robots: the 6-DOF arm of config/robots/arm_6dof.urdf.xacro on a fixed base, and the same arm under a vehicle on a
free-flyer (se3) base. Prints µs per call (best of several repeats of many calls; noisy shared machines: read the
ratios of one run). No assertion: a table for the record.
"""
from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbs_ros.dynamics import Model  # noqa: E402
from mbs_ros.dynamics import algorithms as alg  # noqa: E402
from mbs_ros.dynamics.urdf import load_urdf_xml  # noqa: E402

XACRO = ROOT / "config" / "robots" / "arm_6dof.urdf.xacro"


def aba_python(model, q, v, tau):
    """Featherstone's articulated-body algorithm as a per-body Python recursion on the same spatial quantities
    (world axes, world origin) as mbs_ros.dynamics.algorithms — only here to measure it against CRBA + solve."""
    tree = model._tree
    kin = alg.kinematics(model, q)
    S, I = kin.S, kin.I
    nvb, nb = tree.nvb, tree.nb
    V = alg.body_twists(model, q, v, kin)
    AD = alg._batch(alg._AD, V, 6)
    c = alg._mv(AD[1:], S[nvb:] * v[nvb:, None])  # Ṡ_j q̇_j
    IA = I.copy()
    pA = -alg._mv(AD.transpose(0, 2, 1), alg._mv(I, V))
    U, D, u = [None] * nb, np.zeros(nb), np.zeros(nb)
    for k in range(nb - 1, 0, -1):
        j, p = k - 1, tree.parent[k]
        s = S[nvb + j]
        U[k] = IA[k] @ s
        D[k] = s @ U[k]
        u[k] = tau[nvb + j] - s @ pA[k]
        Ia = IA[k] - np.outer(U[k], U[k]) / D[k]
        IA[p] += Ia
        pA[p] += pA[k] + Ia @ c[j] + U[k] * (u[k] / D[k])
    A = np.empty((nb, 6))
    g = np.concatenate([-model.gravity, np.zeros(3)])
    qdd = np.empty(model.nv)
    if nvb:  # floating base: its columns solve the whole articulated inertia
        S0 = S[:nvb].T
        if tree.base_cols is None:  # SO(3)×R³: its Ṡ_0 v_0 = [−ω × ṗ; 0]
            c0 = np.concatenate([-np.cross(V[0, 3:], v[:3]), np.zeros(3)])
        else:
            c0 = np.zeros(6)
        rhs = tau[:nvb] - S0.T @ (pA[0] + IA[0] @ (g + c0))
        qdd[:nvb] = np.linalg.solve(S0.T @ IA[0] @ S0, rhs)
        A[0] = g + c0 + S0 @ qdd[:nvb]
    else:
        A[0] = g
    for k in range(1, nb):
        j, p = k - 1, tree.parent[k]
        a_in = A[p] + c[j]
        qdd[nvb + j] = (u[k] - U[k] @ a_in) / D[k]
        A[k] = a_in + S[nvb + j] * qdd[nvb + j]
    return qdd


def best_us(fn, number, repeat=5):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def cases():
    import pinocchio as pin

    out = []
    for label, base, args, root in (("6-DOF arm, fixed base", "fixed", {}, None),
                                    ("SE(3) vehicle + 6-DOF arm", "se3", {"with_vehicle": "true"},
                                     pin.JointModelFreeFlyer())):
        urdf = load_urdf_xml(str(XACRO), mappings=args)
        model = Model.from_urdf(urdf, base=base)
        pm = pin.buildModelFromXML(urdf, root) if root is not None else pin.buildModelFromXML(urdf)
        out.append((label, model, pm))
    urdf = chain_urdf(18)
    out.append(("SE(3) base + 18-joint chain", Model.from_urdf(urdf, base="se3"),
                pin.buildModelFromXML(urdf, pin.JointModelFreeFlyer())))
    return out


def chain_urdf(n):
    """A serial chain of n revolute joints with tilted axes and offset inertias (for the n ≤ 18 comparison)."""
    rng = np.random.default_rng(1)
    inertial = ('<inertial><origin xyz="0.1 0.02 0" rpy="0 0 0"/><mass value="1.0"/>'
                '<inertia ixx="0.01" ixy="0.001" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial>')
    parts = ['<robot name="chain"><link name="base_link">' + inertial + "</link>"]
    for k in range(1, n + 1):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        parent = "base_link" if k == 1 else f"l{k - 1}"
        parts.append(f'<link name="l{k}">{inertial}</link><joint name="j{k:02d}" type="revolute">'
                     f'<parent link="{parent}"/><child link="l{k}"/><origin xyz="0.2 0 0.05" rpy="0 0.1 0"/>'
                     f'<axis xyz="{float(axis[0])!r} {float(axis[1])!r} {float(axis[2])!r}"/>'
                     f'<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return "".join(parts) + "</robot>"


def main(argv=None):
    import pinocchio as pin

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for label, model, pm in cases():
        pd = pm.createData()
        q = model.random_configuration(rng)
        v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
        err = np.abs(aba_python(model, q, v, tau) - model.forward_dynamics(q, v, tau)).max()
        assert err < 1e-8 * max(1.0, np.abs(tau).max()), f"Python ABA disagrees with CRBA + solve by {err}"
        kernels = (
            ("rnea", lambda: model.inverse_dynamics(q, v, a), lambda: pin.rnea(pm, pd, q, v, a)),
            ("crba", lambda: model.mass_matrix(q), lambda: pin.crba(pm, pd, q)),
            ("coriolis", lambda: model.coriolis_matrix(q, v), lambda: pin.computeCoriolisMatrix(pm, pd, q, v)),
            ("forward dyn.", lambda: model.forward_dynamics(q, v, tau), lambda: pin.aba(pm, pd, q, v, tau)),
            ("  ABA (py)", lambda: aba_python(model, q, v, tau), lambda: pin.aba(pm, pd, q, v, tau)),
            ("nle", lambda: model.nonlinear_effects(q, v), lambda: pin.nonLinearEffects(pm, pd, q, v)),
            ("kinematics", lambda: alg.kinematics(model, q), lambda: pin.forwardKinematics(pm, pd, q)),
        )
        for name, ours, theirs in kernels:
            t_ours, t_pin = best_us(ours, args.number), best_us(theirs, args.number)
            rows.append((label, name, t_ours, t_pin))
    w = max(len(r[0]) for r in rows)
    print(f"{'robot':<{w}}  {'kernel':<12} {'mbs_ros µs':>11} {'pinocchio µs':>13} {'ratio':>7}")
    for label, name, t_ours, t_pin in rows:
        print(f"{label:<{w}}  {name:<12} {t_ours:11.1f} {t_pin:13.2f} {t_ours / t_pin:7.1f}")
    print("forward dyn.: ours = CRBA + RNEA(a=0) + dense solve sharing one kinematics pass; Pinocchio = aba")
    print("ABA (py): a per-body Python articulated-body recursion on the same quantities (bench only)")


if __name__ == "__main__":
    main()
