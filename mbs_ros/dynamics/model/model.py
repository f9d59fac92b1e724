"""The ``Model``: an immutable description of a rigid body or a multibody tree on a base Lie group.

Pinocchio's split: a :class:`Model` holds what does not change (base group, kinematic tree, inertias, gravity,
limits, passive elements) and one backend (:mod:`mbs_ros.dynamics.kernels.backends`, chosen when it is built) that computes
its algorithms; they take ``(q, v, ...)`` explicitly, so one model serves any number of states and threads.
``M(q) v̇ + C(q, v) v + g(q) = τ`` in Pinocchio's layout (base configuration, then the joints; body-frame
quasi-velocities), with the structured ``C = Σ_i J_iᵀ(I_i J̇_i + ad~_{I_i V_i} J_i)`` so that ``Ṁ − 2C`` is
skew-symmetric; one body follows seed 004 (From, part one: ``V = B(q) v`` eq. 58, ``M = Bᵀ I_b B`` eq. 60, ``C``
eq. 57). Layout, conventions and the backends: ``docs/dynamics.md``.
"""
from __future__ import annotations

import dataclasses
import math
import os
import warnings
from types import MappingProxyType
from dataclasses import dataclass, field

import numpy as np

from mbs_ros.dynamics.kernels.backends import MimicBackend, select
from mbs_ros.dynamics.lie import GROUPS, LieGroup, hat3
from mbs_ros.dynamics.model.tree import CONTINUOUS, PRISMATIC, REVOLUTE, Tree, build_tree, single_body_tree, spatial_inertia
from mbs_ros.dynamics.model.checks import (GENERIC_CONFIGURATIONS, GENERIC_SEED, MAX_MASS_RATIO, SINGULAR_TOLERANCE,  # noqa: F401
                           _armature, _check_inertia, _check_tree, _gravity, _joint_limits, _kinetic_tree,
                           _lock_mimics_of_locked)
from mbs_ros.dynamics.model.urdf import ModelError, ModelWarning, looks_like_xml_text

__all__ = ["Model", "ModelError", "ModelWarning", "spatial_inertia", "BASES", "TREE_BASES", "MAX_MASS_RATIO",
           "SINGULAR_TOLERANCE"]

#: Base groups a single rigid body can live on.
BASES = ("se3", "schoenflies", "se2", "so3", "so3xr3")
#: Bases of a multibody model: a group, or fixed to the world.
TREE_BASES = ("fixed",) + BASES

_ATOL_POSE = 1e-9


@dataclass(frozen=True, eq=False)
class Model:
    """Immutable rigid-body or multibody model on a base group; see the module docstring for the equations.

    Build it with :meth:`Model.rigid_body`, :meth:`Model.from_urdf`, :meth:`Model.from_xacro` or
    :meth:`Model.from_yaml`. Attributes: ``base`` (group name or ``"fixed"``), ``group`` (the base's Lie group,
    None for a fixed base), ``nq``, ``nv``, ``gravity`` (world frame, m/s²), ``joint_names`` and ``joint_types``
    (movable joints, configuration order), ``link_names`` (every URDF link, tree order), ``name``, ``urdf`` (the
    URDF XML it was built from, if any) and, for the base body (the root link with everything fixed to it):
    ``mass``, ``inertia`` (3×3 about its c.o.m.), ``com`` and ``I_b`` (6×6 spatial inertia at its frame).
    Limits from the URDF: :attr:`effort_limits`, :attr:`velocity_limits` (length ``nv``) and
    :attr:`position_limits` (per joint). ``load_report``: what loading the URDF repaired, left out or found
    implausible, a tuple of short strings each naming its link or joint (empty for a clean file, and for models
    not built from a URDF); see :mod:`mbs_ros.dynamics.model.urdf` and :meth:`from_urdf`. ``locked_joints``: the joints
    frozen at load, ``{name: position}`` (read-only; not in ``joint_names``), see :meth:`from_urdf`.
    :attr:`mimic_joints`: the joints that follow a master (``<mimic>``; not in ``joint_names``).
    """

    base: str
    group: LieGroup | None
    mass: float
    inertia: np.ndarray
    com: np.ndarray
    gravity: np.ndarray
    I_b: np.ndarray = field(repr=False)
    _H: np.ndarray | None = field(repr=False)
    _tree: Tree = field(repr=False)
    name: str = "rigid_body"
    urdf: str | None = field(default=None, repr=False)
    added_mass: np.ndarray | None = field(default=None, repr=False)
    _limits: tuple | None = field(default=None, repr=False)  # (effort (nv,), velocity (nv,), lower (nj,), upper (nj,))
    load_report: tuple = field(default=(), repr=False)
    #: The joints locked at load (``from_urdf(..., locked_joints=...)``): ``{joint name: position}`` (rad or m),
    #: read-only, in the URDF's joint order; empty when none is.
    locked_joints: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), repr=False)
    #: The passive elements (:class:`~mbs_ros.dynamics.model.passive.Passive`: added mass, buoyancy, hydrodynamic
    #: damping, the current, joint springs/dampers/friction, thrusters), or None.
    passive: object = field(default=None, repr=False)
    _backend: object = field(default=None, repr=False)  # backends.Backend: computes everything below

    # ------------------------------------------------------------------ construction
    @classmethod
    def rigid_body(
        cls,
        base: str = "se3",
        mass: float = 1.0,
        inertia=None,
        com=(0.0, 0.0, 0.0),
        gravity=(0.0, 0.0, -9.81),
        added_mass=None,
    ) -> "Model":
        """One rigid body on ``base`` ∈ {se3, schoenflies, se2, so3, so3xr3}.

        ``inertia`` is the 3×3 inertia about the centre of mass in body axes and ``com`` the centre of mass in the
        body frame, as URDF gives them (default: unit-mass unit-inertia body). ``gravity`` is the world-frame
        acceleration of gravity. For ``so3`` the body rotates about its origin, fixed at the world origin.

        ``added_mass`` is an optional constant symmetric 6×6 hydrodynamic added mass ``M_A`` at the body origin,
        linear first (Kirchhoff/Lamb/Fossen; seed 003 §5 motivates it): the kinetic energy becomes
        ``½ Vᵀ(I_b + M_A)V``, so ``M``, ``C = ad~_{(I_b + M_A)V}`` (which carries the Munk moment), the kinetic
        energy and the momenta use ``I_b + M_A`` (then stored as ``I_b``), while gravity and the potential energy
        keep the rigid ``mass`` and ``com``.
        """
        if base not in BASES:
            raise ValueError(f"unknown base group {base!r}; choose one of {', '.join(BASES)}")
        mass = float(mass)
        inertia = np.eye(3) if inertia is None else np.array(inertia, dtype=float)
        if inertia.shape == (6,):
            ixx, ixy, ixz, iyy, iyz, izz = inertia
            inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        _check_inertia(mass, inertia)
        com = np.array(com, dtype=float).reshape(3)
        gravity = _gravity(gravity)
        if not np.all(np.isfinite(com)):
            raise ValueError("com and gravity must be finite")
        I_b = spatial_inertia(mass, inertia, com)
        if added_mass is None:
            return cls._assemble(base, single_body_tree(base, I_b), gravity, name="rigid_body")
        M_A = np.array(added_mass, dtype=float)
        if M_A.shape != (6, 6) or not np.all(np.isfinite(M_A)):
            raise ValueError(f"added_mass must be a finite 6x6 matrix, got shape {M_A.shape}")
        if not np.allclose(M_A, M_A.T, rtol=0.0, atol=1e-12 * max(1.0, np.abs(M_A).max())):
            raise ValueError("added_mass must be symmetric")
        if np.linalg.eigvalsh(I_b + M_A)[0] <= 0.0:
            raise ValueError("rigid-body inertia plus added_mass must be positive definite")
        from mbs_ros.dynamics.model.passive import LinkHydro, build_passive

        tree = single_body_tree(base, I_b)
        passive = build_passive(tree, {"base_link": LinkHydro("base_link", np.eye(4), M_A, np.zeros((6, 6)),
                                                              np.zeros(6))}, {}, [])
        M_A.setflags(write=False)
        model = cls._assemble(base, tree, gravity, name="rigid_body", passive=passive)
        return dataclasses.replace(model, added_mass=M_A)

    @classmethod
    def from_urdf(cls, urdf, base: str = "fixed", gravity=(0.0, 0.0, -9.81), xacro: bool | None = None,
                  mappings: dict | None = None, max_mass_ratio: float | None = MAX_MASS_RATIO,
                  locked_joints=None, mimic: str = "reduce", fluid_density: float | None = None,
                  current=None, armature=None) -> "Model":
        """Model of a URDF robot: the root link is the base body, on the group ``base`` or fixed to the world
        (``"fixed"``; a root link named ``world`` with fixed joints places the robot in the world).

        ``urdf`` is the XML text or a path; a path ending in ``.xacro`` (or ``xacro=True``) is expanded by the
        ``xacro`` package with ``mappings`` (``{name: value}``, its ``name:=value`` arguments). Joints: revolute,
        continuous, prismatic and fixed (fixed joints merge the child's inertia into the parent body, as Pinocchio
        does; every link keeps a frame for :meth:`link_poses`).

        A model that cannot be simulated is refused with a :class:`ModelError` (a ValueError) naming the file
        (when ``urdf`` is a path), the joint and the link (see :mod:`mbs_ros.dynamics.model.urdf` for the checks of one
        link or joint):

        * a joint-space mass matrix singular at the neutral configuration and at generic ones (seeded random
          configurations within the joints' limits, :data:`GENERIC_CONFIGURATIONS`): a joint whose moving links
          have no mass (a massless end link), or no inertia about its axis (mass on the axis, zero inertia), or
          whose motion the joints beyond it reproduce without moving mass (coaxial joints with a massless link
          between them); for a floating base, a robot without mass or without inertia in a direction its base
          moves. Tolerance: :data:`SINGULAR_TOLERANCE`. A massless link is fine where mass beyond it is carried.
          A mass matrix singular at the neutral configuration only (iCub's neck: coaxial joints there) loads with
          a :attr:`load_report` note; a state at or next to such a pose is a run-time fault
          (:class:`~mbs_ros.dynamics.kernels.compiled.SingularMassMatrix` from the forward dynamics);
        * moving bodies whose masses differ by more than ``max_mass_ratio`` (default :data:`MAX_MASS_RATIO`;
          ``None`` or ``inf``: no bound).

        What does not affect the dynamics (visuals, collisions, materials, transmissions, gazebo and other
        extension tags) is not parsed, so it never fails a load and prints nothing. What the loader repaired (an
        inertia within rounding of positive semi-definite, projected), left out although it may matter
        (``<mimic>``) or found implausible (triangle inequality, malformed decoration) is :attr:`load_report` and
        is issued once, as one :class:`ModelWarning` listing the items, when the model loads.

        ``locked_joints`` (Pinocchio's ``buildReducedModel``): ``{joint name: position}`` (rad for revolute and
        continuous joints, m for prismatic ones); each becomes a fixed joint at that position (its origin times
        the joint's motion there), so its child merges into its parent's body, before the checks above: a hand
        or gripper without mass can be frozen. They leave ``joint_names``, ``nq`` and ``nv``; :attr:`locked_joints`
        keeps them. ModelError naming the joint for an unknown or fixed joint, a position not finite or outside
        the joint's ``<limit>``. A joint mimicking a locked joint is locked at ``multiplier · lock + offset``.

        ``armature``: each joint's rotor inertia [kg m² or kg], added to the diagonal of M (MuJoCo's
        ``armature``, Pinocchio's ``model.armature``, a motor's reflected inertia): a number for every movable joint,
        a mapping ``{joint name: value}`` or a sequence over the model's joints (``joint_names`` order: the movable
        joints without the locked ones and the mimics that follow a master). A massless finger joint with an
        armature is regular. ModelError naming the joint for an unknown one, a negative or non-finite value.

        ``mimic``: ``"reduce"`` (default; Pinocchio 3's and ros2_control's treatment): a revolute or prismatic joint
        with ``<mimic joint multiplier offset>`` follows its master, ``q = multiplier · q_master + offset``, and
        leaves the independent coordinates (``joint_names``, ``nq``, ``nv`` shrink; M, C, g, RNEA and forward
        dynamics are those of the reduced coordinates, see :mod:`mbs_ros.dynamics.model.mimic`; :attr:`mimic_joints`
        lists them). A mimic that cannot be simulated so (its master missing, fixed or continuous) stays
        independent and is reported. ``"independent"``: every mimic joint moves on its own (reported).

        Bodies in water, joint springs and friction, thrusters: the URDF extensions of
        :mod:`mbs_ros.dynamics.model.passive` (``<hydrodynamics>`` in a link, ``<dynamics>`` of a joint, ``<thruster>``),
        read into :attr:`passive`. ``fluid_density`` [kg/m³] (default 1000) is the density of links whose
        ``<hydrodynamics>`` names none; ``current`` an initial uniform current (world axes, m/s), see
        :meth:`with_current`.
        """
        from mbs_ros.dynamics.model.mimic import MIMIC_MODES, mimic_elements, reduce_model
        from mbs_ros.dynamics.model.passive import WATER_DENSITY, build_passive, parse_extensions
        from mbs_ros.dynamics.model.urdf import MIMIC_NOTE, lock_joints, parse_urdf, report_message

        if base not in TREE_BASES:
            raise ValueError(f"unknown base {base!r}; choose one of {', '.join(TREE_BASES)}")
        if mimic not in MIMIC_MODES:
            raise ValueError(f"mimic must be 'reduce' or 'independent', got {mimic!r}")
        file = None
        if isinstance(urdf, os.PathLike) or (isinstance(urdf, str) and not looks_like_xml_text(urdf)):
            file = os.fspath(urdf)
        try:
            spec = parse_urdf(urdf, xacro=xacro, mappings=mappings, warn=False)
            mimics = mimic_elements(spec.xml) if mimic == "reduce" else []
            locked_joints = _lock_mimics_of_locked(locked_joints, mimics)
            spec, locked = lock_joints(spec, locked_joints)
            tree = build_tree(spec, base)
            if armature is not None:
                tree = tree.with_armature(_armature(tree, armature, {m.name for m in mimics}))
            hydro, joint_dynamics, thrusters = parse_extensions(spec.xml)
            passive = build_passive(tree, hydro, joint_dynamics, thrusters,
                                    WATER_DENSITY if fluid_density is None else fluid_density,
                                    (0.0, 0.0, 0.0) if current is None else current)
            notes = _check_tree(_kinetic_tree(tree, passive), base, max_mass_ratio,
                                {j.name: (j.lower, j.upper) for j in spec.joints})
        except ModelError as exc:
            raise exc.with_file(file) from None
        model = cls._assemble(base, tree, _gravity(gravity), name=spec.name, urdf=spec.xml, passive=passive)
        model = dataclasses.replace(model, _limits=_joint_limits(tree, spec), locked_joints=MappingProxyType(locked))
        report = spec.report + notes
        if mimic == "reduce":  # the generic "not simulated" note gives way to one per mimic that stays independent
            mimic, mimic_report = reduce_model(model, mimics, locked)
            if mimic is not None:
                model = cls._reduced(model, mimic)
            report = tuple(r for r in report if MIMIC_NOTE not in r) + mimic_report
        if report:
            warnings.warn(report_message(report, file or spec.name), ModelWarning, stacklevel=2)
        return dataclasses.replace(model, load_report=report)

    @classmethod
    def from_xacro(cls, path, mappings: dict | None = None, base: str = "fixed",
                   gravity=(0.0, 0.0, -9.81), max_mass_ratio: float | None = MAX_MASS_RATIO,
                   locked_joints=None, mimic: str = "reduce", armature=None) -> "Model":
        """:meth:`from_urdf` of a xacro file expanded with ``mappings``."""
        return cls.from_urdf(path, base=base, gravity=gravity, xacro=True, mappings=mappings,
                             max_mass_ratio=max_mass_ratio, locked_joints=locked_joints, mimic=mimic,
                             armature=armature)

    @classmethod
    def from_yaml(cls, path, max_mass_ratio: float | None = MAX_MASS_RATIO, locked_joints=None,
                  mimic: str = "reduce", armature=None) -> "Model":
        """Model of a robot YAML file (schema: :mod:`mbs_ros.dynamics.model.robot_yaml`); errors name the file.
        ``locked_joints``, ``mimic`` and ``armature`` as in :meth:`from_urdf`."""
        from mbs_ros.dynamics.model.robot_yaml import load_robot

        cfg = load_robot(path)
        try:
            model = cls.from_urdf(cfg.urdf, base=cfg.base, gravity=cfg.gravity, max_mass_ratio=max_mass_ratio,
                                  locked_joints=locked_joints, mimic=mimic, fluid_density=cfg.fluid_density,
                                  armature=armature)
        except ModelError as exc:
            raise exc.with_file(os.fspath(path)) from None
        return dataclasses.replace(model, name=cfg.name) if cfg.name else model

    @classmethod
    def _assemble(cls, base: str, tree: Tree, gravity: np.ndarray, name: str, urdf: str | None = None,
                  passive=None) -> "Model":
        """The model of a rigid ``tree``; with ``passive``, its added mass joins the bodies' inertias (``I_b`` and
        the kernels' inertia) while ``mass``, ``com`` and ``inertia`` stay the rigid body's."""
        group = None if base == "fixed" else GROUPS[base]
        I_rigid = np.array(tree.body_inertia[0])
        tree = _kinetic_tree(tree, passive)
        I_b = np.array(tree.body_inertia[0])
        mass = float(I_rigid[0, 0])
        com = np.array(tree.body_first_moment[0]) / mass if mass > 0 else np.zeros(3)
        com_hat = hat3(com)
        inertia = I_rigid[3:, 3:] + mass * (com_hat @ com_hat)
        H = None
        if group is not None and group.H is not None:
            H = np.asarray(group.H, dtype=float)
        for a in (inertia, com, gravity, I_b, H):
            if a is not None:
                a.setflags(write=False)
        return cls(base=base, group=group, mass=mass, inertia=inertia, com=com, gravity=gravity, I_b=I_b,
                   _H=H, _tree=tree, name=name, urdf=urdf, passive=passive,
                   _backend=select(base, tree, gravity, passive, I_b, H, com))

    def _reduced(self, mimic) -> "Model":
        """This (full) model reduced by ``mimic`` (:class:`~mbs_ros.dynamics.model.mimic.Mimic`): the reduced coordinates
        and the independent joints' limits."""
        limits = self._limits
        if limits is not None:
            effort, velocity, lower, upper = limits
            limits = (effort[mimic.keep_v], velocity[mimic.keep_v], lower[mimic.keep_joints], upper[mimic.keep_joints])
            for a in limits:
                a.setflags(write=False)
        return dataclasses.replace(self, _backend=MimicBackend(mimic), _limits=limits)

    # ------------------------------------------------------------------ backends
    @property
    def backend(self) -> str:
        """``"compiled"`` (the numba kernels of :mod:`mbs_ros.dynamics.kernels.compiled`, the default) or ``"numpy"`` (the
        readable reference: :mod:`mbs_ros.dynamics.algorithms.multibody` and the single-body closed forms)."""
        return self._backend.name

    def with_backend(self, backend: str) -> "Model":
        """The same model computed by ``backend`` (``"compiled"`` or ``"numpy"``); ValueError where the compiled
        path is unavailable (numba missing)."""
        mimic = self._backend.mimic
        if mimic is not None:  # the full tree's backend; the reduction is plain numpy around it
            return dataclasses.replace(self, _backend=self._backend.with_full(mimic.full.with_backend(backend)))
        if backend not in ("numpy", "compiled"):
            raise ValueError(f"unknown backend {backend!r}; choose compiled or numpy")
        if backend == self.backend:
            return self if backend == "compiled" else dataclasses.replace(self)
        chosen = select(self.base, self._tree, self.gravity, self.passive, self.I_b, self._H, self.com, backend)
        if chosen is None:
            raise ValueError("the compiled backend needs numba (pip install numba, or the distro's python3-numba)")
        return dataclasses.replace(self, _backend=chosen)

    @property
    def fast_step(self):
        """The compiled Munthe-Kaas step ``(q, v, tau, dt, method, wrench_world) -> (q, v)`` that
        :func:`~mbs_ros.dynamics.simulation.integrators.step` takes for array-valued tau, or None (numpy, mimic joints)."""
        return self._backend.fast_step

    @property
    def fast_advance(self):
        """The compiled loop ``(q0, v0, tau, dt, steps, method, wrench_world, v_caps, max_q) -> (qs, vs,
        n_within)`` of :meth:`~mbs_ros.dynamics.kernels.compiled.CompiledModel.advance` that :class:`~mbs_ros.dynamics.simulation.simulator.Simulator`
        takes for the steps of a held command, or None."""
        return self._backend.fast_advance

    @property
    def compiled_kernels(self):
        """The :class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel` whose kernels compute this model (the arrays the
        compiled control laws and stepping loops take), or None (numpy backend, mimic joints)."""
        return getattr(self._backend, "compiled", None)

    @property
    def fast_simulate(self):
        """The compiled ``simulate`` loop that :func:`~mbs_ros.dynamics.simulation.integrators.simulate` takes for a held
        tau, or None."""
        return self._backend.fast_simulate

    @property
    def tree(self) -> Tree:
        """The kinematic tree the kernels run on (:class:`~mbs_ros.dynamics.model.tree.Tree`, read-only arrays; with
        mimic joints, the full tree's)."""
        return self._tree

    @property
    def mimic_reduction(self):
        """The :class:`~mbs_ros.dynamics.model.mimic.Mimic` reduction by the :attr:`mimic_joints` (its ``full`` model
        has every joint), or None."""
        return self._backend.mimic

    # ------------------------------------------------------------------ sizes and names
    @property
    def nq(self) -> int:
        return self._backend.nq(self)

    @property
    def nv(self) -> int:
        return self._backend.nv(self)

    @property
    def joint_names(self) -> tuple:
        """Movable joints, in configuration order (``q``/``v`` entries after the base's); mimic joints (see
        :attr:`mimic_joints`) are not among them."""
        return self._backend.joint_names(self)

    @property
    def joint_types(self) -> tuple:
        return self._backend.joint_types(self)

    @property
    def mimic_joints(self) -> dict:
        """``{mimic joint: (master, multiplier, offset)}``, ``q = multiplier · q_master + offset``, in the full
        tree's configuration order; empty without mimic joints (or with ``mimic="independent"``)."""
        mm = self._backend.mimic
        if mm is None:
            return {}
        return {n: (m.master, m.multiplier, m.offset) for n, m in mm.joints.items()}

    def mimic_joint_states(self, q: np.ndarray, v: np.ndarray, a=None):
        """``(positions, velocities, efforts)`` of the :attr:`mimic_joints` (their order) at the state: ``m q + o``,
        ``m v``, and the effort each carries along the motion with acceleration ``a`` (its entry of the full
        tree's inverse dynamics; zeros without ``a``)."""
        mm = self._backend.mimic
        if mm is None:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        qf, vf = mm.q_full(np.asarray(q, dtype=float)), mm.v_full(v)
        efforts = np.zeros(mm.iv_mimic.size) if a is None else mm.full_efforts(q, v, a)[mm.iv_mimic]
        return qf[mm.iq_mimic], vf[mm.iv_mimic], efforts

    @property
    def link_names(self) -> tuple:
        """Every URDF link (fixed-joint children included), in tree order: the order of :meth:`link_poses`."""
        return self._tree.link_names

    @property
    def effort_limits(self) -> np.ndarray:
        """(nv,) largest generalised force per velocity component [N m or N]: the URDF's ``<limit effort>`` of each
        joint, ``inf`` for the base's components and where the URDF gives none (no tag, or ``effort="0"``: see
        :class:`~mbs_ros.dynamics.model.urdf.JointSpec`). A copy."""
        if self._limits is None:
            return np.full(self.nv, np.inf)
        return self._limits[0].copy()

    @property
    def total_mass(self) -> float:
        """Mass of every body of the model [kg] (the base and all links; ``mass`` alone for a single body)."""
        return float(self.mass) if self._single else float(self._tree.body_mass.sum())

    @property
    def velocity_limits(self) -> np.ndarray:
        """(nv,) largest speed per velocity component [rad/s or m/s], as :attr:`effort_limits` (``<limit
        velocity>``; ``inf`` for the base and where none is given)."""
        if self._limits is None:
            return np.full(self.nv, np.inf)
        return self._limits[1].copy()

    @property
    def position_limits(self) -> tuple:
        """``(lower, upper)``, each (n_joints,) in ``joint_names`` order — one position per joint as
        ``joint_states`` has them (an angle for continuous joints), not q's layout — from ``<limit lower upper>``;
        ``-inf``/``inf`` for continuous joints and where the URDF gives no range (``lower == upper``)."""
        nj = len(self.joint_names)
        if self._limits is None:
            return np.full(nj, -np.inf), np.full(nj, np.inf)
        return self._limits[2].copy(), self._limits[3].copy()

    @property
    def _single(self) -> bool:
        return self._tree.nj == 0 and self.group is not None

    def neutral(self) -> np.ndarray:
        """The identity configuration (Pinocchio's ``neutral``): base at the identity, joints at 0."""
        return self._backend.neutral(self)

    def random_configuration(self, rng: np.random.Generator, joint_range: float = math.pi) -> np.ndarray:
        """A random configuration: the base group's ``random``, joint positions uniform in ±joint_range."""
        return self._backend.random_configuration(self, rng, joint_range)

    # ------------------------------------------------------------------ base kinematics
    def _base_q(self, q: np.ndarray) -> np.ndarray:
        return q if self._single else q[: self._tree.nqb]

    def base_pose_matrix(self, q: np.ndarray) -> np.ndarray:
        """World pose (4×4) of the base body frame (the root link's): identity for a fixed base."""
        if self.group is None:
            return np.eye(4)
        return self.group.pose_matrix(self._base_q(q))

    def base_rotation(self, q: np.ndarray) -> np.ndarray:
        """``R_world_base`` (3×3), the base frame's orientation in the world."""
        return self.base_pose_matrix(q)[:3, :3]

    @property
    def velocity_map_is_constant(self) -> bool:
        """Whether :meth:`velocity_map` B is independent of q (fixed base, and the SE(3) subgroups; not
        SO(3)×R³)."""
        return self.group is None or self._H is not None

    def velocity_map(self, q: np.ndarray) -> np.ndarray:
        """B(q), 6×nvb: base body twist ``V = B(q) v_base`` (``B = H`` for the subgroups of SE(3), seed 004
        eq. 58; 6×0 for a fixed base)."""
        if self._H is not None:
            return self._H
        if self.group is None:
            return np.zeros((6, 0))
        B = np.zeros((6, 6))
        B[:3, :3] = self.base_rotation(q).T
        B[3:, 3:] = np.eye(3)
        return B

    def twist(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Body twist ``V = [v; ω]`` of the base (body frame, linear first); zero for a fixed base."""
        nvb = self._tree.nvb
        return self.velocity_map(q) @ np.asarray(v, dtype=float)[:nvb]

    def velocity_from_twist(self, q: np.ndarray, V: np.ndarray) -> np.ndarray:
        """Velocity v (nv,) whose base part gives the base twist V (``B(q) v_base = V``) and whose joint rates are
        0; ValueError if V has components the base cannot have."""
        V = np.asarray(V, dtype=float).reshape(6)
        B = self.velocity_map(q)
        if self._H is not None:  # orthonormal columns of the identity: the least-squares solution is Hᵀ V
            vb = B.T @ V
            residual = V - B @ vb
        elif B.shape[1]:
            vb = np.linalg.lstsq(B, V, rcond=None)[0]
            residual = V - B @ vb
        else:
            vb, residual = np.zeros(0), V
        if np.abs(residual).max() > _ATOL_POSE * max(1.0, np.abs(V).max()):
            raise ValueError(
                f"twist {V.tolist()} has components a {self.base} base cannot have "
                f"(unreachable part {np.round(residual, 12).tolist()})"
            )
        if self._single:
            return vb
        v = np.zeros(self.nv)
        v[: vb.size] = vb
        return v

    def pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base pose in the world: ``(position (3,), quaternion [x, y, z, w])`` (a fixed base's: the identity)."""
        q = np.asarray(q, dtype=float)
        if self.group is None:
            return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
        q = self._base_q(q)
        if self.base in ("se3", "so3xr3"):
            return q[:3].copy(), q[3:7].copy()
        if self.base == "so3":
            return np.zeros(3), q[:4].copy()
        # se2 [x y c s], schoenflies [x y z c s]: yaw about z
        c, s = q[-2], q[-1]
        half = 0.5 * math.atan2(s, c)
        quat = np.array([0.0, 0.0, math.sin(half), math.cos(half)])
        pos = np.array([q[0], q[1], 0.0]) if self.base == "se2" else q[:3].copy()
        return pos, quat

    def configuration_from_pose(self, position, quaternion_xyzw, joints=None) -> np.ndarray:
        """Configuration q of a base pose, joints at ``joints`` (their part of q, default neutral); ValueError
        with the reason if the pose is not on the group (for a fixed base: if it is not the identity)."""
        p = np.asarray(position, dtype=float).reshape(3)
        quat = np.asarray(quaternion_xyzw, dtype=float).reshape(4)
        if not (np.isfinite(p).all() and np.isfinite(quat).all()):
            raise ValueError("pose must be finite")
        n = math.sqrt(quat.dot(quat))  # np.linalg.norm of a vector, without its generic input handling
        if n < 1e-12:
            raise ValueError("quaternion has zero norm")
        quat = quat / n
        qb = self._base_configuration(p, quat)
        if self._single and joints is None:
            return qb
        q = self.neutral() if joints is None else np.empty(self.nq)  # with joints, every entry is set below
        q[: qb.size] = qb
        if joints is not None:
            q[qb.size:] = np.asarray(joints, dtype=float).reshape(self.nq - qb.size)
        return q

    def _base_configuration(self, p, quat) -> np.ndarray:
        if self.group is None:
            if np.abs(p).max() > _ATOL_POSE or abs(abs(quat[3]) - 1.0) > _ATOL_POSE:
                raise ValueError("a fixed base stays at the identity pose (place it in the URDF)")
            return np.zeros(0)
        if self.base in ("se3", "so3xr3"):
            return np.concatenate([p, quat])
        if self.base == "so3":
            if np.abs(p).max() > _ATOL_POSE:
                raise ValueError(f"a so3 body rotates about the world origin: position must be 0, got {p.tolist()}")
            return quat.copy()
        if abs(quat[0]) > _ATOL_POSE or abs(quat[1]) > _ATOL_POSE:
            raise ValueError(f"a {self.base} body only rotates about z: the orientation has roll or pitch")
        if self.base == "se2" and abs(p[2]) > _ATOL_POSE:
            raise ValueError(f"a se2 body moves in the plane z = 0, got z = {p[2]}")
        yaw = 2.0 * math.atan2(quat[2], quat[3])
        cs = [math.cos(yaw), math.sin(yaw)]
        return np.array([p[0], p[1], *cs]) if self.base == "se2" else np.array([*p, *cs])

    # ------------------------------------------------------------------ configuration space
    def integrate(self, q: np.ndarray, v: np.ndarray, dt: float = 1.0) -> np.ndarray:
        """``q · exp(v dt)``: the base by its group's exponential map, joints by rotation/translation (Pinocchio's
        ``integrate``)."""
        return self._backend.integrate(self, q, v, dt)

    def difference(self, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
        """``log(q0⁻¹ q1)``, the tangent vector taking q0 to q1 in unit time (Pinocchio's ``difference``)."""
        return self._backend.difference(self, q0, q1)

    def dexp_inv(self, xi: np.ndarray) -> np.ndarray:
        """dexp⁻¹ of the configuration space (seed 001 eq. 10), used by the RKMK integrators: block-diagonal,
        the base group's, identity for the joints."""
        return self._backend.dexp_inv(self, xi)

    # ------------------------------------------------------------------ kinematics of the tree
    def link_poses(self, q: np.ndarray) -> np.ndarray:
        """World poses of every URDF link, an (n_links, 4, 4) array of homogeneous matrices in ``link_names``
        order (``T_world_link``; a link's frame is its URDF frame, i.e. its parent joint's frame)."""
        return self._backend.link_poses(self, q)

    def body_accelerations(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """(n_links, 6): each link's body-frame acceleration ``[v̇; ω̇]`` (the derivative of its body twist's
        components; its origin's acceleration in link axes is ``v̇ + ω × v``), ``link_names`` order:
        :func:`mbs_ros.dynamics.algorithms.multibody.body_accelerations`."""
        from mbs_ros.dynamics.algorithms.multibody import body_accelerations

        return body_accelerations(self, q, v, a)

    def link_pose_dict(self, q: np.ndarray) -> dict:
        """:meth:`link_poses` as ``{link name: 4×4}``."""
        return dict(zip(self.link_names, self.link_poses(q)))

    # ------------------------------------------------------------------ dynamics
    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q): CRBA for a tree; ``Bᵀ I_b B`` for one body (seed 004 eq. 60), constant on SE(3) subgroups."""
        return self._backend.mass_matrix(self, q)

    def coriolis_matrix(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """C(q, v) = Σ_i J_iᵀ (I_i J̇_i + ad~_{I_i V_i} J_i); for one body ``Bᵀ (I_b Ḃ + ad~_{I_b B v} B)``, seed 004
        eq. 57 ``Hᵀ ad~_{I_b H v} H`` for constant B = H."""
        return self._backend.coriolis_matrix(self, q, v)

    def gravity_forces(self, q: np.ndarray) -> np.ndarray:
        """g(q) = −Σ J_iᵀ W_gravity,i, the generalised gravity force on the left-hand side of the equations."""
        return self._backend.gravity_forces(self, q)

    def nonlinear_effects(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """C(q, v) v + g(q) (RNEA with zero acceleration); for one body ``Bᵀ(I_b Ḃ v − ad_Vᵀ I_b V) + g``
        (seed 004 eq. 76), ``−ad_Vᵀ p = ad~_p V``."""
        return self._backend.nonlinear_effects(self, q, v)

    def forward_dynamics(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, f_ext=None) -> np.ndarray:
        """v̇ = M⁻¹(τ − C v − g) (seed 004 eq. 48). ``f_ext``: external wrenches per body, as in
        :meth:`inverse_dynamics` (then ``M v̇ = τ − RNEA(q, v, 0, f_ext)``)."""
        return self._backend.forward_dynamics(self, q, v, tau, f_ext)

    def inverse_dynamics(self, q: np.ndarray, v: np.ndarray, a: np.ndarray, f_ext=None) -> np.ndarray:
        """τ = M v̇ + C v + g (RNEA for a tree). ``f_ext`` (optional, (n_bodies, 6)): a wrench on each body in its
        own frame at its origin, linear first — body 0 is the base, body k the child of joint k − 1 (of the full
        tree, mimic joints included)."""
        return self._backend.inverse_dynamics(self, q, v, a, f_ext)

    def joint_wrenches(self, q: np.ndarray, v: np.ndarray, a: np.ndarray, tau=None, f_ext=None) -> np.ndarray:
        """(n_joints, 6) wrench each movable joint (``joint_names`` order) transmits from its parent to its child,
        in the joint frame (= the child link's frame) at its origin, linear first ``[F; τ]``, gravity included.

        Without ``tau``: the total transmitted wrench, actuation included (its component along the joint's motion
        axis is the joint effort of inverse dynamics) — what TITOP's joint blocks output. With ``tau`` (the (nv,)
        generalised forces actually applied): the actuation ``s_j τ_j`` is taken off, leaving the pure reaction
        (constraint) wrench; along the joint's free direction it is 0 when ``a = forward_dynamics(q, v, tau)``.
        ``f_ext`` as in :meth:`inverse_dynamics`. With mimic joints: the rows of ``joint_names`` (see
        :meth:`mbs_ros.dynamics.model.mimic.Mimic.joint_wrenches` for ``tau``)."""
        return self._backend.joint_wrenches(self, q, v, a, tau, f_ext)

    def all_terms(self, q: np.ndarray, v: np.ndarray):
        """``(M, C v + g, g)`` at (q, v) in one call (the dynamics part of Pinocchio's ``computeAllTerms``)."""
        return self._backend.all_terms(self, q, v)

    # ------------------------------------------------------------------ derivatives and linear models
    def rnea_derivatives(self, q: np.ndarray, v: np.ndarray, a: np.ndarray, f_ext=None) -> tuple:
        """``(∂τ/∂q, ∂τ/∂v, M)`` of :meth:`inverse_dynamics` along ``q ⊕ δ`` (Pinocchio's
        ``computeRNEADerivatives``), by the backend (numpy: :func:`mbs_ros.dynamics.algorithms.derivatives.tree_rnea_derivatives`;
        docs/derivatives.md). ValueError naming a wrongly sized or non-finite argument."""
        return self._backend.rnea_derivatives(self, q, v, a, f_ext)  # which checks the arguments

    def aba_derivatives(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, f_ext=None) -> tuple:
        """``(∂a/∂q, ∂a/∂v, M⁻¹)`` of :meth:`forward_dynamics` (Pinocchio's ``computeABADerivatives``): ``−M⁻¹``
        times :meth:`rnea_derivatives` at ``a = FD(q, v, τ)`` (docs/derivatives.md)."""
        return self._backend.aba_derivatives(self, q, v, tau, f_ext)

    def dynamics_derivatives(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, passive: bool = True) -> tuple:
        """``(a, ∂a/∂q, ∂a/∂v, ∂a/∂τ)`` of the simulated acceleration ``FD(q, v, τ + τ_p)``, passive forces
        included: :func:`mbs_ros.dynamics.algorithms.derivatives.forward_dynamics_derivatives`."""
        from mbs_ros.dynamics.algorithms.derivatives import forward_dynamics_derivatives

        return forward_dynamics_derivatives(self, q, v, tau, passive)

    def linearize(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, **options):
        """The :class:`~mbs_ros.dynamics.algorithms.linear.LinearModel` ``(A, B)`` at ``(q, v, τ)`` on the state ``(δq, δv)``:
        :func:`mbs_ros.dynamics.algorithms.linear.linearize` (``options``: ``inputs``, ``dt``, ...)."""
        from mbs_ros.dynamics.algorithms.linear import linearize

        return linearize(self, q, v, tau, **options)

    # ------------------------------------------------------------------ passive elements
    @property
    def passive_active(self) -> bool:
        """Whether :meth:`passive_forces` can be nonzero (a :attr:`passive` element acts)."""
        P = self.passive
        return P is not None and P.active

    def passive_forces(self, q: np.ndarray, v: np.ndarray, springs: bool = True) -> np.ndarray:
        """τ_p (nv,): joint springs (unless ``springs`` is False), dampers and friction, hydrodynamic damping and the
        current's loads (:mod:`mbs_ros.dynamics.model.passive`); the simulation solves ``M v̇ + C v + g = τ + τ_p``."""
        return self._backend.passive_terms(self, q, v, springs)[0]

    def body_loads(self, q: np.ndarray, v: np.ndarray):
        """The water's loads on each body (:func:`mbs_ros.dynamics.model.passive.body_loads`): the ``f_ext`` of
        :meth:`joint_wrenches` for the simulated motion; None without them."""
        from mbs_ros.dynamics.model import passive

        return passive.body_loads(self, q, v) if self.passive_active else None

    def passive_terms(self, q, v, springs: bool = True):
        """``(τ_p, dissipated power [W])``: :meth:`passive_forces` and the power they dissipate."""
        return self._backend.passive_terms(self, q, v, springs)

    def with_current(self, velocity, rate=(0.0, 0.0, 0.0)) -> "Model":
        """The same model in a uniform current of ``velocity`` [m/s] changing at ``rate`` [m/s²] (world axes);
        without hydrodynamics it has no effect."""
        P = self.passive
        if P is None:
            return self
        P = P.with_current(velocity, rate)
        mimic = self._backend.mimic
        if mimic is not None:
            backend = self._backend.with_full(mimic.full.with_current(velocity, rate))
        else:
            backend = self._backend.with_current(P)
        return dataclasses.replace(self, passive=P, _backend=backend)

    @property
    def thruster_names(self) -> tuple:
        """The thrusters (``<thruster>``), in URDF order."""
        return () if self.passive is None else self.passive.thruster_names

    @property
    def thruster_matrix(self) -> np.ndarray:
        """(6, n_thrusters): the base-frame wrench ``[d; r × d]`` of one newton of each thruster."""
        return np.zeros((6, 0)) if self.passive is None else self.passive.B_thrust.copy()

    @property
    def thrust_limits(self) -> tuple:
        """``(lower, upper)`` thrust of each thruster [N]."""
        if self.passive is None:
            return np.zeros(0), np.zeros(0)
        return self.passive.thrust_lower.copy(), self.passive.thrust_upper.copy()

    def energy_ports(self, q, v, efforts=None, wrench=None, thrust=None, temperature=None) -> dict:
        """Port-level energy bookkeeping at a state: :func:`mbs_ros.dynamics.model.passive.energy_ports`."""
        from mbs_ros.dynamics.model.passive import ENVIRONMENT_TEMPERATURE, energy_ports

        return energy_ports(self, q, v, efforts, wrench, thrust,
                            ENVIRONMENT_TEMPERATURE if temperature is None else temperature)

    # ------------------------------------------------------------------ wrenches, energy, momentum
    def wrench_to_generalized(self, q: np.ndarray, W: np.ndarray):
        """Generalised force of a base-frame wrench ``W = [F; τ]`` at the base origin: ``(τ (nv,), W_applied,
        W_dropped)``, where ``W_dropped`` holds the components the base group cannot act on (taken by the
        constraint, e.g. a roll torque on se2; all of W for a fixed base), ``W_applied = W − W_dropped``, and the
        joint entries of τ are 0."""
        W = np.asarray(W, dtype=float).reshape(6)
        B = self.velocity_map(q)
        if self._H is not None and B.shape == (6, 6) and np.isfinite(W).all():
            # SE(3): B = H = I, so Bᵀ W = W and nothing is dropped (the products below, without the products)
            tau_b, applied, dropped = W.copy(), W.copy(), np.zeros(6)
        elif self._H is None and self.group is not None:  # SO(3)×R³: B is invertible, every component acts
            tau_b = B.T @ W
            applied, dropped = W.copy(), np.zeros(6)
        else:
            tau_b = B.T @ W
            applied = B @ tau_b  # H has orthonormal columns: H Hᵀ projects onto the subalgebra
            dropped = W - applied
        if self._single:
            return tau_b, applied, dropped
        tau = np.zeros(self.nv)
        tau[: tau_b.size] = tau_b
        return tau, applied, dropped

    def kinetic_energy(self, q: np.ndarray, v: np.ndarray) -> float:
        """½ vᵀ M v."""
        return self._backend.kinetic_energy(self, q, v)

    def potential_energy(self, q: np.ndarray) -> float:
        """−gᵀ Σ m_i p_com,i, with p_com,i the world position of each body's centre of mass; with
        :attr:`passive`, plus buoyancy's ``gᵀ Σ ρ∇ c_b`` and the joint springs' ``Σ ½k(θ − θ₀)²``."""
        return self._backend.potential_energy(self, q)

    def gravity_energy(self, q: np.ndarray) -> float:
        """The potential of gravity on the rigid masses alone, ``−gᵀ Σ m_i p_com,i``."""
        return self._backend.gravity_energy(self, q)

    def spatial_momentum(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """World-frame spatial momentum of the whole system ``Σ Ad_{g_i⁻¹}ᵀ I_i V_i``: ``[linear; angular about
        the world origin]``."""
        return self._backend.spatial_momentum(self, q, v)

    def noether_momentum(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The momentum the base group's symmetry conserves when no force acts: ``Hᵀ h`` of the spatial momentum h
        (all six components for se3 and so3xr3, whose physical symmetry is SE(3); none for a fixed base)."""
        h = self.spatial_momentum(q, v)
        if self.group is None:
            return np.zeros(0)
        return h if self._H is None else self._H.T @ h
