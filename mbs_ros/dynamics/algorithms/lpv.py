"""Linear parameter-varying (LPV) families: the linear models of :func:`mbs_ros.dynamics.algorithms.linear.linearize` over a
grid of a scheduling parameter p (payload mass, a joint angle, the current's speed), stacked as ``A(p_k)``,
``B(p_k)`` — the grid-based LPV representation (Apkarian & Adams 1998; Alazard et al., seed 002, close with LPV
models around equilibria for robustness analysis and co-design). Exported to python-control ``StateSpace``
objects and to a MATLAB ``.mat`` file.

Builders for the three schedules: :func:`link_mass_schedule`, :func:`joint_angle_schedule`,
:func:`current_schedule`; each returns ``build(p) -> (model, q, v, tau)`` for :func:`lpv_family`, by default with
the generalised force that holds the state with zero acceleration (:func:`holding_force`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from mbs_ros.dynamics.algorithms.linear import LinearModel, linearize

__all__ = ["LPVFamily", "lpv_family", "holding_force", "link_mass_schedule", "joint_angle_schedule",
           "current_schedule"]


@dataclass(frozen=True)
class LPVFamily:
    """Linear models over a grid: ``A[k], B[k]`` at ``grid[k]`` of the parameter ``name``, about the operating
    points ``q0[k], v0[k], tau0[k]`` (stacks), states and inputs named as in :class:`LinearModel`; ``dt`` None for
    continuous models, else the step of the discrete pairs."""

    name: str
    grid: np.ndarray
    A: np.ndarray
    B: np.ndarray
    q0: np.ndarray
    v0: np.ndarray
    tau0: np.ndarray
    state_names: tuple
    input_names: tuple
    dt: float | None = None

    def __len__(self) -> int:
        return self.grid.size

    def model(self, k: int) -> LinearModel:
        """The k-th grid point's :class:`LinearModel`."""
        return LinearModel(self.A[k], self.B[k], self.q0[k], self.v0[k], self.tau0[k], self.state_names,
                           self.input_names, self.dt)

    def at(self, p: float, model=None) -> LinearModel:
        """The :class:`LinearModel` at p by linear interpolation of A, B, v0 and tau0 between the neighbouring grid
        points (q0 along the group: ``q_k ⊕ s·difference(q_k, q_{k+1})`` when ``model`` is given, else entrywise);
        ValueError outside the grid."""
        p = float(p)
        g = self.grid
        if not np.isfinite(p) or p < g[0] or p > g[-1]:
            raise ValueError(f"p = {p} is outside the grid of {self.name} [{g[0]}, {g[-1]}]")
        if g.size == 1:
            return self.model(0)
        k = min(int(np.searchsorted(g, p, side="right")) - 1, g.size - 2)
        s = (p - g[k]) / (g[k + 1] - g[k])

        def mix(X):
            return (1.0 - s) * X[k] + s * X[k + 1]

        if model is not None:
            q = model.integrate(self.q0[k], s * model.difference(self.q0[k], self.q0[k + 1]))
        else:
            q = mix(self.q0)
        return LinearModel(mix(self.A), mix(self.B), q, mix(self.v0), mix(self.tau0), self.state_names,
                           self.input_names, self.dt)

    def to_control(self, C=None, D=None, outputs=None) -> list:
        """One python-control ``StateSpace`` per grid point (see :meth:`LinearModel.to_control`)."""
        return [self.model(k).to_control(C, D, outputs) for k in range(self.grid.size)]

    def save_mat(self, path) -> None:
        """Write a MATLAB ``.mat`` file (scipy.io.savemat, format 5): ``A`` (n×n×N) and ``B`` (n×m×N) with
        ``A(:,:,k)`` the model at ``grid(k)``, ``grid`` (1×N), ``q0`` (nq×N), ``v0`` and ``tau0`` (nv×N),
        ``state_names`` and ``input_names`` (cell arrays of char), ``parameter`` (the parameter's name) and ``dt``
        (0 for continuous models). In MATLAB: ``S = load(path); sys = ss(S.A, S.B, eye(size(S.A,1)), 0, S.dt)``
        gives the model array over the grid."""
        from scipy.io import savemat

        savemat(path, {
            "A": np.moveaxis(self.A, 0, -1), "B": np.moveaxis(self.B, 0, -1), "grid": self.grid.reshape(1, -1),
            "q0": self.q0.T, "v0": self.v0.T, "tau0": self.tau0.T,
            "state_names": np.array(self.state_names, dtype=object),
            "input_names": np.array(self.input_names, dtype=object),
            "parameter": self.name, "dt": 0.0 if self.dt is None else float(self.dt)}, do_compression=True)

    @classmethod
    def load_mat(cls, path) -> "LPVFamily":
        """The family a :meth:`save_mat` file holds, checked (:func:`mbs_ros.dynamics.algorithms.lpv_file.read_family`:
        every variable present with its type and a consistent shape, every number finite, ``dt`` >= 0, and at most
        ``MAX_MAT_BYTES`` once decompressed, known before anything is decompressed into memory); ValueError of one
        line naming the file and the variable."""
        from mbs_ros.dynamics.algorithms.lpv_file import read_family

        return cls(*read_family(path))


def lpv_family(build, grid, name: str = "p", **linearize_options) -> LPVFamily:
    """Linearise ``build(p) -> (model, q, v, tau)`` at every p of ``grid`` (strictly increasing, finite) with
    :func:`linearize` (``linearize_options``: ``inputs``, ``passive``, ``dt``, ``method``, ``u0``) and stack the
    results. Every grid point must give the same states and inputs."""
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"grid must be a non-empty 1-D sequence of parameter values, got shape {grid.shape}")
    if not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0.0):
        raise ValueError("grid must be finite and strictly increasing")
    if not callable(build):
        raise ValueError("build must be a function p -> (model, q, v, tau)")
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    models = []
    for p in grid:
        model, q, v, tau = build(float(p))
        lm = linearize(model, q, v, tau, **linearize_options)
        if models and (lm.state_names != models[0].state_names or lm.input_names != models[0].input_names):
            raise ValueError(f"build({p}) gives other states or inputs than build({grid[0]})")
        models.append(lm)
    first = models[0]
    return LPVFamily(name, grid, np.stack([m.A for m in models]), np.stack([m.B for m in models]),
                     np.stack([m.q0 for m in models]), np.stack([m.v0 for m in models]),
                     np.stack([m.tau0 for m in models]), first.state_names, first.input_names, first.dt)


def holding_force(model, q, v=None) -> np.ndarray:
    """The generalised force τ that gives zero simulated acceleration at (q, v): ``ID(q, v, 0) − τ_p(q, v)``
    (gravity, Coriolis and the passive forces balanced; for a floating base, the base wrench that holds it)."""
    q = np.asarray(q, dtype=float)
    v = np.zeros(model.nv) if v is None else np.asarray(v, dtype=float)
    tau = model.inverse_dynamics(q, v, np.zeros(model.nv))
    if model.passive_active:
        tau = tau - model.passive_forces(q, v)
    return tau


def _hold(model, q, v, tau):
    v = np.zeros(model.nv) if v is None else np.asarray(v, dtype=float)
    if tau is None:
        return v, holding_force(model, q, v)
    return v, (tau(model, q, v) if callable(tau) else np.asarray(tau, dtype=float))


def link_mass_schedule(model, link: str, q, v=None, tau=None, **from_urdf_options):
    """``build(p)`` for a payload schedule: the model rebuilt from its URDF with link ``link``'s mass and rotational
    inertia scaled by p (its spatial inertia times p, Featherstone 2008 eq. 2.63: a payload rigidly at that link's
    centre of mass, proportional to it; p = 1 is the model). ``from_urdf_options`` go to :meth:`Model.from_urdf`
    (default: the model's base and gravity). ``tau``: None for :func:`holding_force`, a vector, or a function
    ``tau(model, q, v)``."""
    from mbs_ros.dynamics.model.model import Model
    from mbs_ros.dynamics.model.source import scale_urdf_inertia

    if model.urdf is None:
        raise ValueError("model has no URDF to rescale (build it with Model.from_urdf, from_xacro or from_yaml)")
    if link not in model.link_names:
        raise ValueError(f"link {link!r} is not a link of the model ({', '.join(model.link_names)})")
    options = {"base": model.base, "gravity": model.gravity, **from_urdf_options}
    q = np.asarray(q, dtype=float)

    def build(p):
        if not p > 0.0:
            raise ValueError(f"the mass scale of {link} must be > 0, got {p}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # triangle-inequality warnings of a scaled URDF: the author's choice
            scaled = Model.from_urdf(scale_urdf_inertia(model.urdf, 1.0, {link: p}), **options)
        return (scaled, q, *_hold(scaled, q, v, tau))

    return build


def joint_angle_schedule(model, joint: str, q, v=None, tau=None):
    """``build(p)``: the operating point q with joint ``joint`` at position p (rad or m), held there (``tau`` as in
    :func:`link_mass_schedule`)."""
    if joint not in model.joint_names:
        raise ValueError(f"joint {joint!r} is not a movable joint of the model ({', '.join(model.joint_names)})")
    i = model.nv - len(model.joint_names) + model.joint_names.index(joint)
    q = np.asarray(q, dtype=float)
    here = model.difference(model.neutral(), q)[i]

    def build(p):
        e = np.zeros(model.nv)
        e[i] = p - here
        qp = model.integrate(q, e)
        return (model, qp, *_hold(model, qp, v, tau))

    return build


def current_schedule(model, q, direction=(1.0, 0.0, 0.0), v=None, tau=None):
    """``build(p)``: the model in a uniform current of speed p [m/s] along ``direction`` (world axes; normalised)
    by :meth:`Model.with_current`, held at q (``tau`` as in :func:`link_mass_schedule`)."""
    d = np.asarray(direction, dtype=float).reshape(3)
    n = float(np.linalg.norm(d))
    if not np.isfinite(n) or n == 0.0:
        raise ValueError(f"direction must be a finite nonzero 3-vector, got {direction!r}")
    if not model.passive_active and model.passive is None:
        raise ValueError("model has no hydrodynamics: a current does not act on it")
    d = d / n
    q = np.asarray(q, dtype=float)

    def build(p):
        m = model.with_current(p * d)
        return (m, q, *_hold(m, q, v, tau))

    return build
