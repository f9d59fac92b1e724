"""What a :class:`~mbs_ros.dynamics.model.model.Model` is built from, checked and put in shape: inertias and gravity,
joint limits and armature, locked mimic joints, the added mass in the kinetic tree, and the whole tree's
physics (the heaviest-to-lightest mass ratio, joints singular at generic configurations), each refusal naming
the link or joint."""
from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from mbs_ros.dynamics.model.tree import Tree, inertia_pivots
from mbs_ros.dynamics.model.urdf import ModelError

#: Default bound on the ratio of the heaviest to the lightest moving body (bodies as the dynamics sees them: a
#: link with every link fixed to it; massless bodies not counted). Integrating bodies 10^6 apart in mass with one
#: step size is already stiff; the widest among the URDFs of example-robot-data is 6.6e3 (single links go to
#: 1.5e8, but those are frames fixed to heavier links). ``Model.from_urdf(..., max_mass_ratio=None)`` lifts it.
MAX_MASS_RATIO = 1e6
#: A joint is singular when the inertia along its motion, with the joints beyond it free (its articulated pivot),
#: is below this fraction of the larger of its locked-subtree value and — for a rotation — the moment of a solid
#: sphere of the subtree's mass at the density of osmium (22.6 t/m³, the densest element): no solid object of that
#: mass is that thin. example-robot-data's robots stay above 0.07; a zero inertia gives ~1e-30.
SINGULAR_TOLERANCE = 1e-8
#: A mass matrix singular at the neutral configuration is checked at this many seeded random configurations (seed
#: :data:`GENERIC_SEED`, within the joints' limits): a robot is refused only if it is singular at each of them.
GENERIC_CONFIGURATIONS = 3
GENERIC_SEED = 20240909
_DENSEST = 22_590.0  # kg/m³, osmium


def _check_inertia(mass: float, inertia: np.ndarray) -> None:
    if not (np.isfinite(mass) and mass > 0.0):
        raise ValueError(f"mass must be a finite positive number, got {mass!r}")
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
        raise ValueError(f"inertia must be a finite 3x3 matrix, got shape {inertia.shape}")
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-12 * max(1.0, np.abs(inertia).max())):
        raise ValueError("inertia must be symmetric")
    eig = np.linalg.eigvalsh(inertia)
    if eig[0] <= 0.0:
        raise ValueError(f"inertia must be positive definite, its principal moments are {eig.tolist()}")
    a, b, c = eig
    if c > a + b + 1e-12 * c:
        # Physically impossible for a real body, but papers use such values (seed 002's balloon): warn only.
        warnings.warn(
            f"principal moments {eig.tolist()} violate the triangle inequality (no real body has them)",
            stacklevel=3,
        )



def _kinetic_tree(tree: Tree, passive) -> Tree:
    """``tree`` with each body's added mass in its inertia (the kinetic energy's), masses and first moments kept."""
    if passive is None or not passive.added_mass.any():
        return tree
    inertia = np.array(tree.body_inertia) + passive.added_mass
    inertia.setflags(write=False)
    return dataclasses.replace(tree, body_inertia=inertia)


def _lock_mimics_of_locked(locked, mimics) -> dict | None:
    """``locked`` with every mimic joint whose master is locked (directly or up its chain) locked at
    ``multiplier · lock + offset``; explicit locks win."""
    if not locked or not mimics or not hasattr(locked, "items"):
        return locked
    out = dict(locked)
    changed = True
    while changed:
        changed = False
        for m in mimics:
            if m.name not in out and m.master in out:
                try:
                    out[m.name] = m.multiplier * float(out[m.master]) + m.offset
                except (TypeError, ValueError):
                    continue  # lock_joints names the bad position
                changed = True
    return out


def _joint_limits(tree: Tree, spec) -> tuple:
    by_name = {j.name: j for j in spec.joints}
    joints = [by_name[name] for name in tree.joint_names]
    effort = np.full(tree.nv, np.inf)
    velocity = np.full(tree.nv, np.inf)
    effort[tree.nvb:] = [j.effort for j in joints]
    velocity[tree.nvb:] = [j.velocity for j in joints]
    lower = np.array([j.lower for j in joints], dtype=float)
    upper = np.array([j.upper for j in joints], dtype=float)
    for a in (effort, velocity, lower, upper):
        a.setflags(write=False)
    return effort, velocity, lower, upper


def _sphere_moment(mass: float) -> float:
    """Moment of inertia about a diameter of a solid sphere of ``mass`` at the density of osmium: the least a
    solid object of that mass has about every axis through it (a rough floor, used as a scale)."""
    radius = (3.0 * mass / (4.0 * math.pi * _DENSEST)) ** (1.0 / 3.0)
    return 0.4 * mass * radius * radius


def _names(names, limit: int = 4) -> str:
    names = [repr(n) for n in names]
    return ", ".join(names) if len(names) <= limit else ", ".join(names[:limit]) + f" and {len(names) - limit} more"


_BASE_DIRECTIONS = ("translation along x", "translation along y", "translation along z", "rotation about x",
                    "rotation about y", "rotation about z")


def _armature(tree: Tree, armature, mimics) -> np.ndarray:
    """The (nj,) armature of :meth:`Model.from_urdf`'s ``armature`` (a number, a mapping or a sequence over the
    joints without ``mimics``); ModelError naming the joint for an unknown one or a bad value."""
    names = tree.joint_names
    out = np.zeros(tree.nj)
    if isinstance(armature, (int, float, np.floating, np.integer)) and not isinstance(armature, bool):
        items = [(n, armature) for n in names]
    elif hasattr(armature, "items"):
        items = list(armature.items())
    else:
        try:
            values = list(armature)
        except TypeError:
            raise ModelError("armature must be a number, a mapping {joint name: value} or a sequence over the "
                             f"joints, got {type(armature).__name__}") from None
        independent = [n for n in names if n not in mimics]
        if len(values) != len(independent):
            raise ModelError(f"armature: {len(values)} values for the model's {len(independent)} joints "
                             f"({_names(independent)})")
        items = list(zip(independent, values))
    index = {n: i for i, n in enumerate(names)}
    for name, value in items:
        if name not in index:
            raise ModelError(f"armature: the model has no movable joint {str(name)[:100]!r} (locked and fixed "
                             f"joints have none; its joints: {_names(names)})", joint=str(name)[:100])
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ModelError(f"armature: the value of joint {name!r} is not a number", joint=name) from None
        if not (math.isfinite(x) and x >= 0.0):
            raise ModelError(f"armature: the value of joint {name!r} must be finite and >= 0, got {x!r}", joint=name)
        out[index[name]] = x
    return out


def _lock_hint(names, ranges, armature: float | None = None) -> str:
    """The advice of a singular joint's error: lock ``names`` (at 0, or the end of its range nearer 0), or give
    them an ``armature`` (rotor inertia) of about that value."""
    ranges = ranges or {}

    def position(name):
        lower, upper = ranges.get(name, (-math.inf, math.inf))
        return min(max(0.0, lower), upper)

    shown = ", ".join(f"{n!r}: {position(n)!r}" for n in names)
    hint = (f"lock {'them' if len(names) > 1 else 'it'} with locked_joints={{{shown}}} (Model.from_urdf) or the "
            "nodes' locked_joints parameter")
    if armature:
        values = ", ".join(f"{n!r}: {armature:.1g}" for n in names)
        hint += (f", or give {'them' if len(names) > 1 else 'it'} a rotor inertia with armature={{{values}}} "
                 "(Model.from_urdf) or the nodes' joint_armature parameter")
    return hint


def _massless_joints(tree: Tree, M_diag, m_sub) -> list:
    """The movable joints whose subtree has no mass (and, for a rotation, no inertia about the axis either)."""
    top = float(np.max(M_diag)) if len(M_diag) else 0.0
    return [tree.joint_names[j] for j in range(tree.nj)
            if m_sub[j + 1] <= 0.0 and not ((tree.joint_types[j] != "prismatic" or tree.armature[j] > 0.0)
                                            and M_diag[j] > SINGULAR_TOLERANCE * top)]


def _generic_angles(tree: Tree, ranges, count: int = 3) -> list:
    """``count`` seeded random configurations (joint angles, see :func:`~mbs_ros.dynamics.model.tree.inertia_pivots`): each joint
    uniform within its limits, clipped to [-π, π] (prismatic: [-1, 1] m)."""
    ranges = ranges or {}
    rng = np.random.default_rng(GENERIC_SEED)
    lo = np.empty(tree.nj)
    hi = np.empty(tree.nj)
    for j, name in enumerate(tree.joint_names):
        bound = 1.0 if tree.joint_types[j] == "prismatic" else math.pi
        lower, upper = ranges.get(name, (-math.inf, math.inf))
        lo[j], hi[j] = max(lower, -bound), min(upper, bound)
        if not lo[j] <= hi[j]:
            lo[j] = hi[j] = min(max(0.0, lower), upper)
    return [rng.uniform(lo, hi) for _ in range(count)]


def _check_tree(tree: Tree, base: str, max_mass_ratio, ranges=None) -> tuple:
    """ModelError unless M is positive definite at generic configurations and the moving bodies' masses are
    within ``max_mass_ratio`` (see :meth:`Model.from_urdf`); the load-report notes (M singular at the neutral
    configuration only). ``ranges``: ``{joint: (lower, upper)}``, for the positions the errors suggest locking a
    joint at and the generic configurations."""
    error = _singularity(tree, base, ranges, inertia_pivots(tree))
    notes = ()
    if error is not None:
        if all(_singularity(tree, base, ranges, inertia_pivots(tree, angles)) is not None
               for angles in _generic_angles(tree, ranges, GENERIC_CONFIGURATIONS)):
            raise error
        where = f"joint {error.joint!r}" if error.joint else f"link {error.link!r}"
        notes = (f"{where}: the mass matrix is singular at the neutral configuration (every joint at 0) and "
                 "regular at generic ones; a state at or next to that pose halts the simulation with a fault "
                 "naming the joint: start elsewhere (initial_joint_positions)",)
    _check_mass_ratio(tree, base, max_mass_ratio)
    return notes


def _singularity(tree: Tree, base: str, ranges, pivots):
    """The ModelError of the first singular joint (deepest first) or base direction of M at the configuration
    of ``pivots`` (:func:`~mbs_ros.dynamics.model.tree.inertia_pivots`), or None."""
    D, M_diag, IA0, IC0, m_sub = pivots
    tol = SINGULAR_TOLERANCE
    regular = M_diag[(M_diag > 0.0) & (D > tol * M_diag)]
    suggest = float(regular.min()) if regular.size else 1e-3
    armature = tree.armature
    def subtree_links(body):
        bodies = set(np.flatnonzero(np.asarray(tree.subtree)[body] > 0.5).tolist())
        return [n for n, b in zip(tree.link_names, tree.link_body) if b in bodies]

    # deepest joints first: their error is the cause, the ones nearer the base inherit it
    for j in range(tree.nj - 1, -1, -1):
        k = j + 1
        name, jtype, child = tree.joint_names[j], tree.joint_types[j], tree.body_names[k]
        rotation = jtype != "prismatic"
        along = "about its axis" if rotation else "along its axis"
        # a massless link may still have a rotational inertia (Bolt's feet): regular if it is not negligible
        if m_sub[k] <= 0.0 and not ((rotation or armature[j] > 0.0) and M_diag[j] > tol * float(np.max(M_diag))):
            massless = _massless_joints(tree, M_diag, m_sub)
            others = len(massless) - 1
            return ModelError(
                f"joint {name!r} ({jtype}) moves only massless links ({_names(subtree_links(k))}): the joint-space "
                "mass matrix is singular (no torque gives a defined acceleration)"
                + (f"; so do {others} more joint{'s' if others > 1 else ''} of the robot" if others else "")
                + f"; give link {child!r} an <inertial> with mass, make the joint fixed, or "
                + _lock_hint(massless, ranges, suggest), joint=name, link=child)
        ref = max(M_diag[j], _sphere_moment(m_sub[k]) if rotation else m_sub[k])
        if D[j] >= tol * ref:
            continue
        if M_diag[j] < tol * ref:
            unit = "kg m²" if rotation else "kg"
            return ModelError(
                f"joint {name!r} ({jtype}): the links it moves ({_names(subtree_links(k))}; {m_sub[k]:.6g} kg) have "
                f"no inertia {along} ({M_diag[j]:.3g} {unit}, against {ref:.3g} for a solid sphere of that mass "
                "of the densest metal): the joint-space mass matrix is singular; give link "
                f"{child!r} its inertia (<inertia>), move its centre of mass off the axis, or "
                + _lock_hint([name], ranges, suggest), joint=name, link=child)
        return ModelError(
            f"joint {name!r} ({jtype}): with the joints beyond it free, moving it moves no mass ({D[j]:.3g} of "
            f"{M_diag[j]:.3g} remains): the joints beyond link {child!r} ({tree.body_mass[k]:.6g} kg) reproduce its "
            "motion, so the joint-space mass matrix is singular (e.g. coaxial joints with a massless link between "
            f"them); give link {child!r} mass and inertia, make one of the joints fixed, or "
            + _lock_hint([name], ranges, suggest), joint=name, link=child)

    root = tree.body_names[0]
    if base != "fixed":
        cols = np.arange(6) if tree.base_cols is None else np.asarray(tree.base_cols, dtype=int)
        total = float(m_sub[0])
        if total <= 0.0:
            return ModelError(f"the robot has no mass: its {base} base (link {root!r}) cannot be simulated; "
                             "give its links an <inertial> with mass", link=root)
        P = IA0[np.ix_(cols, cols)]
        ref = np.maximum(np.diag(IC0)[cols], np.where(cols < 3, total, _sphere_moment(total)))
        S = P / np.sqrt(np.outer(ref, ref))
        w, V = np.linalg.eigh(0.5 * (S + S.T))
        if w[0] < tol:
            dirs = [_BASE_DIRECTIONS[c] for c, x in zip(cols, V[:, 0]) if abs(x) > 0.3 * np.abs(V[:, 0]).max()]
            return ModelError(
                f"the {base} base (link {root!r}, {tree.body_mass[0]:.6g} kg with the links fixed to it): with the "
                f"joints free, the robot has no inertia for {' with '.join(dirs)}, so the mass matrix is singular; "
                f"give link {root!r} mass and inertia", link=root)
    return None


def _check_mass_ratio(tree: Tree, base: str, max_mass_ratio) -> None:
    """ModelError when two moving bodies' masses differ by more than ``max_mass_ratio`` (None, inf: no bound)."""
    if max_mass_ratio is None or not math.isfinite(float(max_mass_ratio)):
        return

    def links_of(body):
        return [n for n, b in zip(tree.link_names, tree.link_body) if b == body]

    moving = np.arange(0 if base != "fixed" else 1, tree.nb)
    masses = np.asarray(tree.body_mass)[moving]
    heavy = moving[masses > 0.0]
    if heavy.size < 2:
        return
    m = np.asarray(tree.body_mass)[heavy]
    light_b, heavy_b = int(heavy[np.argmin(m)]), int(heavy[np.argmax(m)])
    ratio = float(m.max() / m.min())
    if ratio > float(max_mass_ratio):
        light = tree.body_names[light_b]
        joint = tree.joint_names[light_b - 1] if light_b > 0 else None
        raise ModelError(
            f"link {light!r} ({m.min():.6g} kg{' with the links fixed to it' if len(links_of(light_b)) > 1 else ''}) "
            f"is {ratio:.3g} times lighter than link {tree.body_names[heavy_b]!r} ({m.max():.6g} kg): beyond "
            f"max_mass_ratio={float(max_mass_ratio):g} (one step size cannot integrate both; fix the masses, or "
            "pass max_mass_ratio=None to Model.from_urdf to allow it)", link=light, joint=joint)


def _gravity(gravity) -> np.ndarray:
    g = np.array(gravity, dtype=float).reshape(3)
    if not np.all(np.isfinite(g)):
        raise ValueError("com and gravity must be finite")
    return g
