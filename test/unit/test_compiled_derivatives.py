"""The compiled derivative kernels (mbs_ros.dynamics.kernels.derivatives) of the rigid RNEA and forward dynamics.

* Against Pinocchio's ``computeRNEADerivatives`` / ``computeABADerivatives`` on example-robot-data robots, fixed
  and free-flyer (same layout and tangent convention), with and without external wrenches: 1e-9 relative.
* Against central differences written here, along ``q ⊕ δ = model.integrate(q, δ)``, for the bases Pinocchio has
  no joint for (Schönflies, SE(2), SO(3), SO(3)×R³), random trees on every base, single rigid bodies on every
  group, and a vehicle with buoyancy (the fluid's weight term depends on q).
* Against the numpy reference backend (``model.with_backend("numpy")``).

The kernels are called through the compiled backend (``model._backend``): the same functions ``Model.rnea_derivatives``
and ``Model.aba_derivatives`` reach on a compiled model.
"""
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import BASES, TREE_BASES, Model

from mbs_ros.dynamics.kernels import compiled

from test_multibody import random_urdf

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not importable (or MBS_BACKEND=numpy)")

ROOT = Path(__file__).resolve().parents[2]
ROBOTS = ROOT / "config" / "robots"


def rel(x, ref):
    x, ref = np.asarray(x, dtype=float), np.asarray(ref, dtype=float)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    return float(np.abs(x - ref).max() / max(1e-8, np.abs(ref).max()))  # floor: a block that vanishes


def kernels(model):
    """(rnea_derivatives, aba_derivatives) of the compiled backend, called like the Model methods."""
    b = model._backend
    assert model.backend == "compiled" and hasattr(b, "compiled"), "the compiled backend is expected"
    return (lambda *x: b.rnea_derivatives(model, *x)), (lambda *x: b.aba_derivatives(model, *x))


def state(model, rng):
    if model.tree.nj:
        q = model.random_configuration(rng)
    elif model.group is not None:
        q = model.group.random(rng)
    else:
        q = model.neutral()
    return q, 1.5 * rng.standard_normal(model.nv), rng.standard_normal(model.nv), rng.standard_normal(model.nv)


# ------------------------------------------------------------------------------------------ central differences
def fd_rnea(model, q, v, a, f_ext, h=1e-6):
    """∂τ/∂q (along q ⊕ δ), ∂τ/∂v, ∂τ/∂a of ``model.inverse_dynamics`` by central differences."""
    nv = model.nv
    ID = model.inverse_dynamics
    out = [np.empty((nv, nv)) for _ in range(3)]
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        out[0][:, i] = (ID(model.integrate(q, e), v, a, f_ext) - ID(model.integrate(q, -e), v, a, f_ext)) / (2 * h)
        out[1][:, i] = (ID(q, v + e, a, f_ext) - ID(q, v - e, a, f_ext)) / (2 * h)
        out[2][:, i] = (ID(q, v, a + e, f_ext) - ID(q, v, a - e, f_ext)) / (2 * h)
    return out


def fd_aba(model, q, v, tau, f_ext, h=1e-6):
    """∂q̈/∂q (along q ⊕ δ), ∂q̈/∂v, ∂q̈/∂τ of ``model.forward_dynamics`` by central differences."""
    nv = model.nv
    FD = model.forward_dynamics
    out = [np.empty((nv, nv)) for _ in range(3)]
    for i in range(nv):
        e = np.zeros(nv)
        e[i] = h
        out[0][:, i] = (FD(model.integrate(q, e), v, tau, f_ext) - FD(model.integrate(q, -e), v, tau, f_ext)) / (2 * h)
        out[1][:, i] = (FD(q, v + e, tau, f_ext) - FD(q, v - e, tau, f_ext)) / (2 * h)
        out[2][:, i] = (FD(q, v, tau + e, f_ext) - FD(q, v, tau - e, f_ext)) / (2 * h)
    return out


FD_TOL = 2e-6  # central differences of step 1e-6: truncation ~1e-12 h⁻²-scaled, rounding ~1e-10 relative


def check_against_central_differences(model, seed, n_states=2):
    rng = np.random.default_rng(seed)
    rnea_d, aba_d = kernels(model)
    worst = {}
    for k in range(n_states):
        q, v, a, tau = state(model, rng)
        f_ext = None if k == 0 else rng.standard_normal((model.tree.nb, 6))
        got = rnea_d(q, v, a, f_ext)
        ref = fd_rnea(model, q, v, a, f_ext)
        for name, x, y in zip(("dtau_dq", "dtau_dv", "M"), got, ref):
            worst[name] = max(worst.get(name, 0.0), rel(x, y))
        got = aba_d(q, v, tau, f_ext)
        ref = fd_aba(model, q, v, tau, f_ext)
        for name, x, y in zip(("da_dq", "da_dv", "Minv"), got, ref):
            worst[name] = max(worst.get(name, 0.0), rel(x, y))
    return worst


def random_trees():
    rng = np.random.default_rng(20261126)
    return [pytest.param(base, random_urdf(rng, n), id=f"{base}-random{n}") for base in TREE_BASES for n in (1, 6)]


@pytest.mark.parametrize("base,urdf", random_trees())
def test_random_trees_on_every_base_against_central_differences(base, urdf):
    worst = check_against_central_differences(Model.from_urdf(urdf, base=base), seed=1)
    assert max(worst.values()) < FD_TOL, worst


@pytest.mark.parametrize("base", BASES)
def test_single_bodies_against_central_differences(base):
    J = np.array([[0.3, 0.02, -0.01], [0.02, 0.5, 0.03], [-0.01, 0.03, 0.4]])
    model = Model.rigid_body(base, mass=2.5, inertia=J, com=[0.1, -0.05, 0.2], gravity=[0.3, -0.2, -9.81])
    worst = check_against_central_differences(model, seed=2, n_states=3)
    assert max(worst.values()) < FD_TOL, worst


@pytest.mark.parametrize("base", ("fixed", "so3xr3"))
def test_armature_against_central_differences(base):
    """Rotor inertia on M's diagonal (in ∂τ/∂a and M⁻¹, and through q̈ in the ABA's derivatives)."""
    model = Model.from_urdf(random_urdf(np.random.default_rng(8), 4), base=base, armature=0.05)
    worst = check_against_central_differences(model, seed=4)
    assert max(worst.values()) < FD_TOL, worst


@pytest.mark.parametrize("name", ("bluerov2_heavy", "bluerov2_heavy_alpha5"))
def test_vehicles_with_buoyancy_against_central_differences(name):
    """The ROV's (and its arm's) bodies displace water: the rigid RNEA carries their weight less buoyancy and the
    added mass through ``D g``, which turns with the bodies."""
    model = Model.from_yaml(ROBOTS / f"{name}.yaml")
    assert model.passive is not None and model.passive.has_fluid
    worst = check_against_central_differences(model, seed=3)
    assert max(worst.values()) < FD_TOL, worst


# ------------------------------------------------------------------------------------------ Pinocchio
try:
    import pinocchio as pin
except ImportError:  # the Pinocchio tests skip, naming it
    pin = None


def _erd(rel_path):
    try:
        from mbs_ros.bench.models import strip_urdf
        from importlib import metadata

        dist = metadata.distribution("example-robot-data")
    except Exception:  # noqa: BLE001 - a missing peer is a skip with its reason
        pytest.skip("example-robot-data is not installed")
    for f in dist.files or ():
        if str(f).endswith(rel_path):
            return Path(dist.locate_file(f)).read_text(), strip_urdf
    pytest.skip(f"example-robot-data has no {rel_path}")


PIN_ROBOTS = ("ur_description/urdf/ur5_robot.urdf", "kinova_description/robots/kinova.urdf",
              "solo_description/robots/solo12.urdf", "talos_data/robots/talos_reduced.urdf")
PIN_TOL = 1e-9


def _pin_pair(path, ff):
    if pin is None:
        pytest.skip("Pinocchio (PyPI: pin) is the reference; make setup installs it")
    text, strip = _erd(path)
    urdf = strip(text, drop_world=ff)
    model = Model.from_urdf(urdf, base="se3" if ff else "fixed")
    pm = pin.buildModelFromXML(urdf, pin.JointModelFreeFlyer()) if ff else pin.buildModelFromXML(urdf)
    pm.gravity.linear[:] = model.gravity
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    assert tuple(pm.names[2 if ff else 1:]) == model.joint_names
    return model, pm


def _pin_fext(pm, f_ext, ff):
    """Our body wrenches (nb, 6; body k = Pinocchio's joint k + 1 on a free flyer, joint k on a fixed base)."""
    out = [pin.Force.Zero() for _ in range(pm.njoints)]
    for k in range(f_ext.shape[0]):
        j = k + 1 if ff else k
        if j > 0:
            out[j] = pin.Force(f_ext[k, :3], f_ext[k, 3:])
    return out


def _sym(M):
    M = np.array(M)
    return np.triu(M) + np.triu(M, 1).T


@pytest.mark.parametrize("ff", (False, True), ids=("fixed", "free-flyer"))
@pytest.mark.parametrize("path", PIN_ROBOTS, ids=lambda p: Path(p).stem)
def test_agree_with_pinocchio_on_example_robot_data(path, ff):
    model, pm = _pin_pair(path, ff)
    pd = pm.createData()
    rnea_d, aba_d = kernels(model)
    rng = np.random.default_rng(4)
    worst = {}
    for k in range(3):
        q, v, a, tau = state(model, rng)
        f_ext = None if k == 0 else rng.standard_normal((model.tree.nb, 6))
        args = () if f_ext is None else (_pin_fext(pm, f_ext, ff),)
        dq, dv, M = rnea_d(q, v, a, f_ext)
        ref = [np.array(x) for x in pin.computeRNEADerivatives(pm, pd, q, v, a, *args)]
        for name, x, y in zip(("dtau_dq", "dtau_dv", "M"), (dq, dv, M), (ref[0], ref[1], _sym(ref[2]))):
            worst[name] = max(worst.get(name, 0.0), rel(x, y))
        da_dq, da_dv, Minv = aba_d(q, v, tau, f_ext)
        ref = [np.array(x) for x in pin.computeABADerivatives(pm, pd, q, v, tau, *args)]
        for name, x, y in zip(("da_dq", "da_dv", "Minv"), (da_dq, da_dv, Minv), (ref[0], ref[1], _sym(ref[2]))):
            worst[name] = max(worst.get(name, 0.0), rel(x, y))
    assert max(worst.values()) < PIN_TOL, worst


# ------------------------------------------------------------------------------------------ the numpy backend
# Until the analytical numpy reference (derivatives.py, TreeBackend.rnea_derivatives) is on the branch, the numpy
# model's derivatives are the scaffold's central differences: the tolerance is then FD_TOL; with the reference in
# place it is 1e-10.
def _numpy_tol(ref):
    return 1e-10 if hasattr(ref._backend, "rnea_derivatives") else FD_TOL


@pytest.mark.parametrize("base", TREE_BASES)
def test_agree_with_the_numpy_backend(base):
    rng = np.random.default_rng(5)
    model = Model.from_urdf(random_urdf(rng, 5), base=base)
    ref = model.with_backend("numpy")
    rnea_d, aba_d = kernels(model)
    tol = _numpy_tol(ref)
    q, v, a, tau = state(model, rng)
    f_ext = rng.standard_normal((model.tree.nb, 6))
    for x, y in zip(rnea_d(q, v, a, f_ext), ref.rnea_derivatives(q, v, a, f_ext)):
        assert rel(x, y) < tol
    for x, y in zip(aba_d(q, v, tau, f_ext), ref.aba_derivatives(q, v, tau, f_ext)):
        assert rel(x, y) < tol


# ------------------------------------------------------------------------------------------ bad input
def test_bad_input():
    model = Model.from_urdf(random_urdf(np.random.default_rng(6), 3), base="se3")
    rnea_d, aba_d = kernels(model)
    q, v, a, tau = state(model, np.random.default_rng(7))
    with pytest.raises(ValueError, match=r"q must have shape \(10,\)"):
        rnea_d(q[:-1], v, a)
    with pytest.raises(ValueError, match=r"tau must have shape \(9,\)"):
        aba_d(q, v, tau[1:])
    with pytest.raises(ValueError, match="f_ext must hold one wrench per body"):
        aba_d(q, v, tau, np.zeros((model.tree.nb + 1, 6)))
    # a non-finite entry in a vector of the kernels' own type: the kernel's check, not a conversion, catches it
    for i, name in ((0, "q"), (1, "v"), (2, "a")):
        bad = [q.copy(), v.copy(), a.copy()]
        bad[i][-1] = np.inf if i else np.nan
        with pytest.raises(ValueError, match=f"{name} must be finite"):
            rnea_d(*bad)
        bad[2] = tau.copy() if i < 2 else tau * np.nan
        with pytest.raises(ValueError, match=f"{'tau' if i == 2 else name} must be finite"):
            aba_d(*bad)
    # the kernels alone, as the benchmark calls them
    from mbs_ros.dynamics.kernels.derivatives import DerivativeKernels

    k = DerivativeKernels(model.compiled_kernels)
    with pytest.raises(ValueError, match="q must be a vector of 10 numbers"):
        k.rnea_derivatives(q[:-1], v, a)
    with pytest.raises(ValueError, match="q, v and tau must be finite"):
        k.aba_derivatives(q, v * np.nan, tau)
    assert k.try_rnea_derivatives(q, v, a * np.inf) is None and k.try_aba_derivatives(q, v, tau * np.nan) is None
    assert k.try_rnea_derivatives(q[::-1][::-1].astype(np.float32), v, a) is None  # not the compiled type: refused
    # a strided or read-only vector in any place is taken (copied or read) and gives the same numbers
    for call, args in ((rnea_d, (q, v, a)), (aba_d, (q, v, tau))):
        ref = call(*args)
        for i in range(3):
            strided, ro = list(args), list(args)
            strided[i] = np.repeat(args[i], 2)[::2]
            ro[i] = args[i].copy()
            ro[i].flags.writeable = False
            for x, y, z in zip(call(*strided), call(*ro), ref):
                assert np.array_equal(x, z) and np.array_equal(y, z)


# ------------------------------------------------------------------------------------------ deep chains
def test_deep_chains_take_the_acceleration_from_the_articulated_body_pass():
    """The ABA derivatives' q̈ is M⁻¹ (τ − h) from the sweep's own composites, except past ``FD_BY_ABA_DEPTH``
    joints deep, where M's conditioning costs digits (M⁻¹ (τ − h) on a random chain of 40: ~1e-10 relative to
    Pinocchio's ABA) and the articulated-body pass gives q̈ (~2e-12). Both paths agree with Pinocchio on a short
    chain."""
    if pin is None:
        pytest.skip("Pinocchio (PyPI: pin) is the reference; make setup installs it")
    from mbs_ros.bench.kernels import pin_model
    from mbs_ros.bench.models import build
    from mbs_ros.dynamics.kernels.derivatives import FD_BY_ABA_DEPTH, DerivativeKernels

    def worst(case, by_aba=None):
        pm = pin_model(case)
        pd = pm.createData()
        k = DerivativeKernels(case.model.compiled_kernels)
        if by_aba is not None:
            k.fd_by_aba = by_aba
        rng = np.random.default_rng(9)
        out = 0.0
        for _ in range(3):
            q, v, _a, tau = state(case.model, rng)
            ref = [np.array(x) for x in pin.computeABADerivatives(pm, pd, q, v, tau)]
            ref[2] = _sym(ref[2])
            out = max(out, *(rel(x, y) for x, y in zip(k.aba_derivatives(q, v, tau), ref)))
        return k.fd_by_aba, out

    short, deep = build("chain8"), build("chain40")
    assert 8 <= FD_BY_ABA_DEPTH < 40
    for by_aba in (False, True):
        assert worst(short, by_aba)[1] < PIN_TOL, by_aba
    assert worst(short) == worst(short, False)  # the short chain's default is M⁻¹ (τ − h)
    by_aba, err = worst(deep)
    assert by_aba and err < 2e-11, (by_aba, err)


VIEWS = """
import sys, numpy as np
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.kernels import derivatives
derivatives.warm_up()  # what make setup loads
before = len(derivatives.all_finite.overloads)
m = Model.from_yaml(sys.argv[1])
q, v = m.neutral(), np.linspace(-0.5, 0.5, m.nv)
columns = np.column_stack([q[:m.nv], v, 2 * v])  # each column a strided view
for backend in (m, m.with_backend("numpy")):
    backend.rnea_derivatives(np.concatenate([columns[:, 0], q[m.nv:]]), columns[:, 1], columns[:, 2])
    backend.aba_derivatives(q, columns[:, 1], v[::-1])
print(len(derivatives.all_finite.overloads) - before)
"""


@pytest.mark.e2e
def test_derivatives_of_vector_views_compile_nothing():
    """Strided views (a matrix's columns, a reversed vector) given to the derivative APIs, compiled and numpy
    backends, in a fresh process: no new signature of the argument check's compiled kernel (each one compiled
    for seconds the first time on a machine, inside whatever called it: a node's callback)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", VIEWS, str(ROOT / "config" / "robots" / "uvms_6dof.yaml")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "0", out.stdout
