"""Analytical derivatives of the rigid dynamics (issue 20): ``Model.rnea_derivatives`` / ``aba_derivatives`` and
``dynamics_derivatives`` of the numpy reference, along ``q ⊕ δ = model.integrate(q, δ)``.

Independent references only:

* Pinocchio's ``computeRNEADerivatives`` / ``computeABADerivatives`` on example-robot-data robots, fixed (UR5,
  Panda) and free-flyer (Solo12, ANYmal, TALOS), with and without external wrenches: 1e-9 relative to the largest
  entry of Pinocchio's matrix (our se3 base and Pinocchio's free flyer share q, v and the increment);
* central differences on the group, written here, for every base group (fixed, se3, schoenflies, se2, so3,
  so3xr3) on a branched tree with revolute, prismatic and continuous joints, on single rigid bodies (seed 004's
  closed forms), with mimic joints, with external wrenches and with bodies in water.

Central differences: step ``H = 1e-6``; truncation ``H²/6 |∂³τ|`` ~ 1e-12 here, rounding ~ ``ε |τ| / H`` ~ 1e-10
``|τ|``, so the observed error is ≤ 1e-8 of the matrix's largest entry; the gate :data:`CD_GATE` = 1e-6 leaves a
factor 100 and catches any wrong term (those planted while writing these tests were off by 1e-3 to 1).

Figures of the issue's note (worst relative error per robot against Pinocchio):
``python -m pytest -q -s test/unit/test_derivatives.py -k pinocchio``.
"""
import warnings
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, ModelWarning

from mbs_ros.dynamics.algorithms import derivatives
from test_hydro import uvms_urdf
from test_mimic import random_mimic_tree
from urdf_text import robot

H = 1e-6
CD_GATE = 1e-6
PIN_GATE = 1e-9
BASES = ("fixed", "se3", "schoenflies", "se2", "so3", "so3xr3")
GRAVITY = (0.8, -0.5, -9.7)  # tilted: the planar bases' turns change the gravity in body axes too


def rel(x, ref):
    return float(np.abs(np.asarray(x) - ref).max() / max(1e-300, np.abs(ref).max()))


# ----------------------------------------------------------------------------------------- central differences
def cd_q(model, fun, q, h=H):
    """``∂fun/∂q`` along ``q ⊕ δ`` by central differences (columns: the nv tangent directions)."""
    cols = []
    for i in range(model.nv):
        e = np.zeros(model.nv)
        e[i] = h
        cols.append((fun(model.integrate(q, e)) - fun(model.integrate(q, -e))) / (2 * h))
    return np.array(cols).T


def cd_x(fun, x, h=H):
    """``∂fun/∂x`` of a vector argument by central differences."""
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = h
        cols.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.array(cols).T


def check_against_central_differences(model, rng, f_ext=None, label="", h=H, gate=CD_GATE):
    """rnea_derivatives and aba_derivatives of ``model`` at a random state against central differences of step
    ``h`` of its inverse and forward dynamics; returns the worst relative error."""
    q = model.random_configuration(rng, 1.0)
    v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
    ID, FD = model.inverse_dynamics, model.forward_dynamics
    dq, dv, M = model.rnea_derivatives(q, v, a, f_ext)
    ref = {"dtau_dq": cd_q(model, lambda x: ID(x, v, a, f_ext), q, h),
           "dtau_dv": cd_x(lambda x: ID(q, x, a, f_ext), v, h),
           "M": cd_x(lambda x: ID(q, v, x, f_ext), a, h)}
    Aq, Av, Minv = model.aba_derivatives(q, v, tau, f_ext)
    ref.update({"da_dq": cd_q(model, lambda x: FD(x, v, tau, f_ext), q, h),
                "da_dv": cd_x(lambda x: FD(q, x, tau, f_ext), v, h),
                "Minv": cd_x(lambda x: FD(q, v, x, f_ext), tau, h)})
    ours = {"dtau_dq": dq, "dtau_dv": dv, "M": M, "da_dq": Aq, "da_dv": Av, "Minv": Minv}
    errors = {k: rel(ours[k], ref[k]) for k in ours}
    worst = max(errors, key=errors.get)
    assert errors[worst] < gate, f"{label}: {worst} off by {errors[worst]:.2e} relative ({errors})"
    return errors[worst]


def branched_tree(rng):
    """A base with two branches: revolute, prismatic and continuous joints on tilted axes, offset origins and
    centres of mass (a fixed joint merges a link into its parent)."""
    def vec(scale):
        return " ".join(f"{x:.5f}" for x in rng.normal(scale=scale, size=3))

    def link(name, mass):
        J = np.diag(rng.uniform(0.01, 0.02, 3))
        return (f'<link name="{name}"><inertial><origin xyz="{vec(0.05)}" rpy="{vec(0.5)}"/><mass value="{mass}"/>'
                f'<inertia ixx="{J[0, 0]}" ixy="0.001" ixz="0" iyy="{J[1, 1]}" iyz="0" izz="{J[2, 2]}"/>'
                f'</inertial></link>')

    def joint(name, parent, child, jtype):
        lim = '<limit lower="-3" upper="3" effort="10" velocity="3"/>' if jtype != "continuous" else ""
        return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
                f'<origin xyz="{vec(0.2)}" rpy="{vec(0.6)}"/><axis xyz="{vec(1.0)}"/>{lim}</joint>')

    parts = [link("base", 3.0), link("a1", 1.0), link("a2", 0.8), link("a3", 0.5), link("b1", 0.7),
             link("b2", 0.6), link("pod", 0.4)]
    parts += [joint("ja1", "base", "a1", "revolute"), joint("ja2", "a1", "a2", "prismatic"),
              joint("ja3", "a2", "a3", "continuous"), joint("jb1", "base", "b1", "continuous"),
              joint("jb2", "b1", "b2", "revolute"), joint("jpod", "a1", "pod", "fixed")]
    return robot(*parts, name="branched")


# ------------------------------------------------------------------------------------------- every base group
@pytest.mark.parametrize("base", BASES)
def test_tree_derivatives_match_central_differences_on_every_base(base):
    rng = np.random.default_rng(100 + BASES.index(base))
    model = Model.from_urdf(branched_tree(rng), base=base, gravity=GRAVITY,
                            armature=[0.01, 0.02, 0.0, 0.03, 0.0]).with_backend("numpy")
    check_against_central_differences(model, rng, label=base)
    f_ext = rng.normal(size=(model.tree.nb, 6))
    check_against_central_differences(model, rng, f_ext, label=f"{base} with f_ext")


@pytest.mark.parametrize("base", BASES[1:])
def test_single_rigid_body_derivatives_match_central_differences(base):
    """One body on its group: the closed forms of seed 004 (``RigidBodyBackend``), with an offset centre of mass,
    with a hydrodynamic added mass (gravity then off the added mass) and with an external wrench."""
    rng = np.random.default_rng(200 + BASES.index(base))
    A = rng.normal(size=(6, 6))
    for added_mass in (None, 0.3 * A @ A.T):
        model = Model.rigid_body(base, mass=2.0, inertia=[[0.2, 0.01, 0.0], [0.01, 0.25, 0.02], [0.0, 0.02, 0.3]],
                                 com=(0.1, -0.2, 0.05), gravity=GRAVITY, added_mass=added_mass)
        model = model.with_backend("numpy")
        label = f"{base} body{'' if added_mass is None else ' with added mass'}"
        check_against_central_differences(model, rng, label=label)
        check_against_central_differences(model, rng, rng.normal(size=(1, 6)), label=f"{label}, f_ext")


@pytest.mark.parametrize("base", ("fixed", "se3", "so3xr3"))
def test_mimic_joint_derivatives_match_central_differences(base):
    """Reduced coordinates (``q_full = G q + o``): the chain rule through the full tree, f_ext on its bodies."""
    rng = np.random.default_rng(300 + BASES.index(base))
    model = Model.from_urdf(random_mimic_tree(rng), base=base, gravity=GRAVITY).with_backend("numpy")
    assert model.nv < model.tree.nv  # some joints are mimics
    check_against_central_differences(model, rng, label=f"mimic {base}")
    check_against_central_differences(model, rng, rng.normal(size=(model.tree.nb, 6)), label=f"mimic {base} f_ext")


@pytest.mark.parametrize("base", ("se3", "so3xr3", "schoenflies"))
def test_bodies_in_water_derivatives_match_central_differences(base):
    """Added mass over a tree: the inverse dynamics carries the gravity taken off the added mass and buoyancy
    (``D R_iᵀ g`` on each body), which turns with the joints and the base."""
    rng = np.random.default_rng(400 + BASES.index(base))
    model = Model.from_urdf(uvms_urdf(seed=3), base=base).with_backend("numpy")
    check_against_central_differences(model, rng, label=f"water {base}")
    check_against_central_differences(model, rng, rng.normal(size=(model.tree.nb, 6)), label=f"water {base} f_ext")


@pytest.mark.parametrize("base", ("se3", "so3xr3"))
def test_simulated_acceleration_derivatives_with_passive_forces(base):
    """``forward_dynamics_derivatives``: of ``FD(q, v, τ + τ_p(q, v))`` (damping, springs, friction, buoyancy,
    a current), against central differences of that acceleration written here; ``passive=False`` gives
    aba_derivatives."""
    rng = np.random.default_rng(500 + BASES.index(base))
    model = Model.from_urdf(uvms_urdf(seed=4, joint_dynamics=True), base=base).with_backend("numpy")
    model = model.with_current((0.3, -0.2, 0.1))
    q = model.random_configuration(rng, 1.0)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)

    def acc(x, y, t):
        return model.forward_dynamics(x, y, t + model.passive_forces(x, y))

    a, dq, dv, dtau = model.dynamics_derivatives(q, v, tau)
    np.testing.assert_allclose(a, acc(q, v, tau), rtol=1e-12, atol=1e-12)
    for name, ours, ref in (("da_dq", dq, cd_q(model, lambda x: acc(x, v, tau), q)),
                            ("da_dv", dv, cd_x(lambda x: acc(q, x, tau), v)),
                            ("da_dtau", dtau, cd_x(lambda x: acc(q, v, x), tau))):
        assert rel(ours, ref) < CD_GATE, f"{base} {name}: {rel(ours, ref):.2e}"
    a0, dq0, dv0, _ = model.dynamics_derivatives(q, v, tau, passive=False)
    Aq, Av, _ = model.aba_derivatives(q, v, tau)
    np.testing.assert_allclose(a0, model.forward_dynamics(q, v, tau), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dq0, Aq, rtol=1e-12, atol=1e-12 * np.abs(Aq).max())
    np.testing.assert_allclose(dv0, Av, rtol=1e-12, atol=1e-12 * np.abs(Av).max())


CONFIG_ROBOTS = sorted((Path(__file__).resolve().parents[2] / "config" / "robots").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIG_ROBOTS, ids=lambda p: p.stem)
def test_repository_robots_derivatives_match_central_differences(path):
    """The repository's robots as their YAML files configure them (base group, water, joint dynamics): the rigid
    derivatives and those of the simulated acceleration (passive forces included). An arm on a heavy vehicle has
    cond(M) up to ~7e5, and the forward dynamics' rounding ``ε κ(M) |a| / h`` reaches 1e-5 of ∂a/∂q at h = 1e-6:
    here h = 1e-4 (truncation ~h² = 1e-8; observed ≤ 1e-6) and the gate 1e-5."""
    rng = np.random.default_rng(700 + CONFIG_ROBOTS.index(path))
    model = Model.from_yaml(path).with_backend("numpy")
    h, gate = 1e-4, 1e-5
    check_against_central_differences(model, rng, label=path.stem, h=h, gate=gate)
    q = model.random_configuration(rng, 1.0)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)

    def acc(x, y, t):
        return model.forward_dynamics(x, y, t + model.passive_forces(x, y))

    _, dq, dv, _ = model.dynamics_derivatives(q, v, tau)
    assert rel(dq, cd_q(model, lambda x: acc(x, v, tau), q, h)) < gate
    assert rel(dv, cd_x(lambda x: acc(q, x, tau), v, h)) < gate


# ------------------------------------------------------------------------------------------------- Pinocchio
pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")
from test_example_robot_data import ROBOTS  # noqa: E402  (after the skip: it needs example-robot-data)

PIN_ROBOTS = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "fixed"),
    "panda": ("panda_description/urdf/panda.urdf", "fixed"),
    "solo12": ("solo_description/robots/solo12.urdf", "se3"),
    "anymal": ("anymal_b_simple_description/robots/anymal.urdf", "se3"),
    "talos": ("talos_data/robots/talos_reduced.urdf", "se3"),
}
FIGURES = {}


def _sym(upper):
    """Pinocchio fills only the upper triangle of M and M⁻¹."""
    return np.triu(upper) + np.triu(upper, 1).T


@pytest.mark.parametrize("name", list(PIN_ROBOTS))
def test_derivatives_match_pinocchio_on_example_robot_data(name):
    """Pinocchio's analytical derivatives on real robots (the Panda's mimic finger moves independently, as in
    Pinocchio's plain model), random states with fixed seeds, with and without one wrench per body (Pinocchio's
    ``fext`` in the joint frames = our body frames; its free flyer is joint 1, a fixed base is its universe)."""
    if ROBOTS is None:
        pytest.skip("example-robot-data is not installed")
    relpath, base = PIN_ROBOTS[name]
    path = str(ROBOTS / relpath)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)  # the Panda's independent mimic, ANYmal's base inertia
        model = Model.from_urdf(path, base=base, mimic="independent").with_backend("numpy")
    pm = pin.buildModelFromUrdf(path) if base == "fixed" else pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    pd = pm.createData()
    rng = np.random.default_rng(7 + list(PIN_ROBOTS).index(name))
    worst = 0.0
    for with_fext in (False, True):
        q = model.random_configuration(rng, 1.0)
        v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
        f_ext, fext = None, ()
        if with_fext:
            f_ext = rng.normal(size=(model.tree.nb, 6))
            forces = [pin.Force(f) for f in f_ext]
            fext = (forces if base == "fixed" else [pin.Force.Zero()] + forces,)
        dq, dv, M = model.rnea_derivatives(q, v, a, f_ext)
        pin.computeRNEADerivatives(pm, pd, q, v, a, *fext)
        errors = {"dtau_dq": rel(dq, pd.dtau_dq), "dtau_dv": rel(dv, pd.dtau_dv), "M": rel(M, _sym(pd.M))}
        Aq, Av, Minv = model.aba_derivatives(q, v, tau, f_ext)
        pin.computeABADerivatives(pm, pd, q, v, tau, *fext)
        errors.update({"da_dq": rel(Aq, pd.ddq_dq), "da_dv": rel(Av, pd.ddq_dv), "Minv": rel(Minv, _sym(pd.Minv))})
        bad = {k: e for k, e in errors.items() if not e < PIN_GATE}
        assert not bad, f"{name} (f_ext: {with_fext}): {bad}"
        worst = max(worst, *errors.values())
    FIGURES[name] = (base, model.nv, worst)
    if len(FIGURES) == len(PIN_ROBOTS):
        print("\nrigid derivatives vs Pinocchio (numpy reference), worst of dtau/dq, dtau/dv, M, da/dq, da/dv, Minv:")
        for robot_name, (b, nv, err) in FIGURES.items():
            print(f"  {robot_name:8s} {b:5s} nv={nv:2d}  {err:.1e}")


@pytest.mark.slow
def test_derivatives_agree_with_pinocchio_on_every_example_robot():
    """Every example-robot-data file both load, fixed and free-flyer (mimic joints independent, as in Pinocchio's
    plain model), errors relative to the largest entry of the three Pinocchio matrices (some robots, like the
    Iris's rotors, have exactly zero ∂τ/∂q or ∂τ/∂v): ∂τ/∂q, ∂τ/∂v, M to 1e-12, and ∂a/∂q, ∂a/∂v, M⁻¹ to
    ``max(1e-11, 1e-15 κ(M))`` — both sides solve with M, so rounding grows as ε κ(M) (iCub's κ reaches 6e8).
    Files whose inertias our loader repaired (TIAGo's) are another model than Pinocchio's
    (test_example_robot_data.py) and are left out. Prints the worst of each group (``-s``)."""
    if ROBOTS is None:
        pytest.skip("example-robot-data is not installed")
    import test_example_robot_data as erd

    records = []
    for relpath in erd.URDFS:
        if relpath in erd.REFUSED or relpath in erd.PINOCCHIO_REFUSES:
            continue
        path = ROBOTS / relpath
        for base in ("fixed", "se3"):
            if base == "se3" and erd.root_link(path) == "world":
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = Model.from_urdf(str(path), base=base, mimic="independent")
            if model.nv == 0 or any("projected" in item for item in model.load_report):
                continue
            model = model.with_backend("numpy")
            pm = erd.pin_model(path, base)
            pd = pm.createData()
            rng = np.random.default_rng(11)
            q = model.random_configuration(rng, 1.0)
            v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
            ours = model.rnea_derivatives(q, v, a)
            pin.computeRNEADerivatives(pm, pd, q, v, a)
            e_rnea = rel_many(ours, (pd.dtau_dq, pd.dtau_dv, _sym(pd.M)))
            ours = model.aba_derivatives(q, v, a)
            pin.computeABADerivatives(pm, pd, q, v, a)
            e_aba = rel_many(ours, (pd.ddq_dq, pd.ddq_dv, _sym(pd.Minv)))
            gate_aba = max(1e-11, 1e-15 * np.linalg.cond(_sym(pd.M)))
            assert e_rnea < 1e-12 and e_aba < gate_aba, (relpath, base, e_rnea, e_aba, gate_aba)
            records.append((e_rnea, e_aba, np.linalg.cond(_sym(pd.M)), f"{relpath} {base}"))
    assert len(records) > 100
    print(f"\n{len(records)} (file, base) pairs; worst ∂τ/∂q, ∂τ/∂v, M: %.1e (%s)" % max(records)[::3])
    for e_aba, kappa, where in sorted(((r[1], r[2], r[3]) for r in records), reverse=True)[:4]:
        print(f"  ∂a/∂q, ∂a/∂v, M⁻¹: {e_aba:.1e} with κ(M) = {kappa:.1e} ({where})")


def rel_many(ours, refs):
    """The largest entry of the differences over the largest entry of the references."""
    return max(float(np.abs(x - r).max()) for x, r in zip(ours, refs)) / max(float(np.abs(r).max()) for r in refs)


# ------------------------------------------------------------------------------------------ API and bad input
def test_public_functions_are_the_model_methods():
    rng = np.random.default_rng(600)
    model = Model.from_urdf(branched_tree(rng), base="se3").with_backend("numpy")
    q = model.random_configuration(rng, 1.0)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    for ours, theirs in zip(derivatives.rnea_derivatives(model, q, v, a), model.rnea_derivatives(q, v, a)):
        np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(derivatives.aba_derivatives(model, q, v, a), model.aba_derivatives(q, v, a)):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("call, message", [
    (lambda m, q, v: m.rnea_derivatives(q[:-1], v, v), r"q must have shape \(14,\)"),
    (lambda m, q, v: m.rnea_derivatives(q, v[:-1], v), r"v must have shape \(11,\)"),
    (lambda m, q, v: m.rnea_derivatives(q, v, np.r_[v, 0.0]), r"a must have shape \(11,\)"),
    (lambda m, q, v: m.aba_derivatives(q, v, v * np.nan), r"tau must be finite"),
    (lambda m, q, v: m.aba_derivatives(q, v, v, f_ext=np.zeros((2, 6))), r"f_ext must hold one wrench per body"),
    (lambda m, q, v: m.dynamics_derivatives(q, v, v[:3]), r"tau must have shape \(11,\)"),
])
def test_bad_input_names_the_argument(call, message):
    rng = np.random.default_rng(601)
    model = Model.from_urdf(branched_tree(rng), base="se3").with_backend("numpy")
    assert (model.nq, model.nv) == (14, 11)
    with pytest.raises(ValueError, match=message):
        call(model, model.neutral(), np.zeros(model.nv))
