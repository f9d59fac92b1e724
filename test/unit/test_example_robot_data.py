"""Every URDF of example-robot-data that Pinocchio loads also loads here, and agrees with it (issue 10).

Parametrised over every ``.urdf`` under the package's ``robots`` directory, on a fixed base and on a free-flying
(se3) base: where ``pinocchio.buildModelFromUrdf`` loads the file, ours loads it too — printing nothing (capfd)
and issuing at most one :class:`ModelWarning`, whose items are ``Model.load_report`` — with Pinocchio's joint
order and sizes (continuous joints as ``(cos θ, sin θ)`` in both), and M, C v + g, RNEA and forward dynamics agree
at random states (relative to the largest entry of Pinocchio's result), for both backends (compiled and numpy). Pinocchio's free-flyer and our se3 base
share the configuration and velocity layout, so no conversion is needed. A robot with <mimic> joints is compared
with Pinocchio's mimic model (``mimic=True``; forward dynamics by its M and C v + g, as its aba has no mimic
support); where Pinocchio refuses that (TALOS), our independent-mimic model against its plain one.

A refusal is never a silent skip: the files we refuse on purpose are listed in :data:`REFUSED` with the link or
joint our ModelError names and the reason, and for each the test checks that Pinocchio's mass matrix at the
neutral configuration is singular as well (it loads them without checks); the files Pinocchio itself refuses are
in :data:`PINOCCHIO_REFUSES`, and we must refuse them too. A file whose root link is ``world`` is fixed to the
world on purpose: on the se3 base we refuse it, naming that link (Pinocchio adds a free-flyer above ``world``).
A file in none of these cases that either side refuses fails. iCub's mass matrix is singular at the neutral
configuration only: it loads (with a load-report note) and a state there is a fault naming the joint; Romeo loads
with the armature its error suggests, and agrees with Pinocchio's model with that ``model.armature``.

Each file's comparison runs once (:func:`compare`, cached), whichever test asks first, so every test has the same
outcome in any order or ``-k`` selection. The figures of the issue's report (the worst error per quantity, printed
by the last test): ``python -m pytest -q -s test/unit/test_example_robot_data.py``.
"""
import ast
import functools
import os
import tempfile
import warnings
import zlib
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, ModelError, ModelWarning

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")


def _robots_dir():
    """example-robot-data's ``robots`` directory (the PyPI wheel has the files, not always a Python module)."""
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if str(f).endswith(".urdf") and "robots" in parts:
            path = Path(dist.locate_file(f))
            return path.parents[len(parts) - parts.index("robots") - 2]
    return None


ROBOTS = _robots_dir()
if ROBOTS is None:
    pytest.skip("example-robot-data (PyPI example-robot-data, in requirements-dev.txt) is not installed",
                allow_module_level=True)
URDFS = sorted(p.relative_to(ROBOTS).as_posix() for p in ROBOTS.rglob("*.urdf"))
BASES = ("fixed", "se3")

#: Refused on purpose: {file: (what our ModelError names: ("joint" | "link", name), why)}, on every base.
#: Pinocchio loads these without checks; its mass matrix is singular at the neutral configuration for each.
REFUSED = {
    "romeo_description/urdf/romeo.urdf": (
        ("joint", None),
        "24 finger/thumb joints move links without <inertial> (massless): M singular at every pose; the error "
        "suggests locking them (test_locked_joints.py) or an armature, with which it loads (below)"),
    "romeo_description/urdf/romeo_laas_small.urdf": (
        ("link", "body"),
        "the trunk's inertia has principal moments [-0.021, 0.052, 0.099] kg m²: clearly not positive "
        "semi-definite (0.22 of the robot's largest moment, INERTIA_TOLERANCE is 1e-6); r_gripper_joint moves no "
        "mass either"),
}
#: Singular at the neutral configuration only: loads with one load-report note naming the joint.
SINGULAR_AT_NEUTRAL = {"icub_description/robots/icub.urdf": "neck_roll"}
#: Pinocchio refuses these; so do we.
PINOCCHIO_REFUSES = {
    "ur_description/urdf/ur3.urdf": "an empty <robot> (no name, no link: a xacro leftover)",
}
#: Gates, a margin (10-100x) over the worst relative error measured over every file, base and backend
#: (test_worst_agreement_over_every_file prints them): M 1.7e-15, C v + g 2.7e-15, RNEA 2.4e-15, forward dynamics
#: 8.8e-13 (TIAGo Pro); iCub's forward dynamics 7.3e-11 (its M has condition numbers of 1e6-1e8 at random poses).
#: Files with inertias the loader repaired (TIAGo's) differ from Pinocchio's by the repair: 5.7e-10.
REL = {"M": 1e-13, "C v + g": 1e-13, "RNEA": 1e-13, "forward dynamics": 1e-11}
REL_ILL_CONDITIONED = {"icub_description/robots/icub.urdf": 1e-9}  # forward dynamics only
REL_REPAIRED = 1e-8
N_STATES = 2


def pin_model(path, base, mimic=False):
    if base == "fixed":
        return pin.buildModelFromUrdf(str(path), mimic)
    return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer(), mimic)


def root_link(path) -> str:
    """The URDF's root link, read by the standard library's XML parser."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    children = {j.find("child").get("link") for j in root.findall("joint")}
    return next(link.get("name") for link in root.findall("link") if link.get("name") not in children)


def rel_err(x, ref):
    return float(np.abs(np.asarray(x) - ref).max() / max(1e-300, np.abs(ref).max()))


@contextmanager
def captured_fds():
    """What the process writes to file descriptors 1 and 2 inside the block (C++ code included), as one string
    in ``out[0]`` after it."""
    out = [""]
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield out
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            out[0] = tmp.read().decode("utf-8", "replace")


def load_ours(path, base, **kwargs):
    """Our model of ``path`` (or the ModelError), checking that the load prints nothing and warns at most once."""
    with warnings.catch_warnings(record=True) as caught, captured_fds() as printed:
        warnings.simplefilter("always")
        try:
            result = Model.from_urdf(str(path), base=base, **kwargs)
        except ModelError as exc:
            result = exc
    assert printed[0] == "", f"loading {path.name} printed: {printed[0][:500]}"
    model_warnings = [w for w in caught if issubclass(w.category, ModelWarning)]
    assert len(model_warnings) == len(caught) <= 1, [str(w.message)[:200] for w in caught]
    if isinstance(result, Model):
        if result.load_report:
            message = str(model_warnings[0].message)
            assert message.startswith(f"{path}: loaded with {len(result.load_report)} note")
            assert all(item in message for item in result.load_report)
        else:
            assert not model_warnings
    return result


def agreement(ours, pm, relpath, base, mimic=False) -> list:
    """``[(quantity, error, where)]``: M, C v + g, RNEA and forward dynamics of ``ours`` (both backends) against
    Pinocchio's ``pm`` at random states, each within its gate."""
    pd = pm.createData()
    repaired = any("projected" in item for item in ours.load_report)
    rng = np.random.default_rng(zlib.crc32(f"{relpath} {base}".encode()))
    records = []
    for _ in range(N_STATES):
        q = ours.random_configuration(rng)
        v, a, tau = rng.normal(size=(3, ours.nv))
        M_pin = pin.crba(pm, pd, q)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        nle_pin = pin.nonLinearEffects(pm, pd, q, v).copy()
        rnea_pin = pin.rnea(pm, pd, q, v, a).copy()
        # Pinocchio's aba has no mimic support: its M and C v + g solved
        aba_pin = np.linalg.solve(M_pin, tau - nle_pin) if mimic else pin.aba(pm, pd, q, v, tau).copy()
        for model in (ours, ours.with_backend("numpy")):
            errors = {
                "M": rel_err(model.mass_matrix(q), M_pin),
                "C v + g": rel_err(model.nonlinear_effects(q, v), nle_pin),
                "RNEA": rel_err(model.inverse_dynamics(q, v, a), rnea_pin),
                "forward dynamics": rel_err(model.forward_dynamics(q, v, tau), aba_pin),
            }
            gates = dict.fromkeys(REL, REL_REPAIRED) if repaired else dict(REL)
            if relpath in REL_ILL_CONDITIONED:
                gates["forward dynamics"] = REL_ILL_CONDITIONED[relpath]
            where = f"{base}, {model.backend}"
            for quantity, err in errors.items():
                if quantity == "forward dynamics" and relpath in REL_ILL_CONDITIONED:
                    quantity += " (ill-conditioned M)"
                records.append((quantity, err, where))
                if not repaired:
                    records.append((quantity + " (no inertia repaired)", err, where))
            assert all(errors[k] < gates[k] for k in errors), (relpath, model.backend, errors, gates)
    return records


@functools.lru_cache(maxsize=None)
def compare(relpath, base) -> tuple:
    """The checks of one file on one base (see the module docstring); ``((quantity, error, where), ...)`` of the
    comparisons made. Cached: computed once, whichever test asks first (a failure is not cached: it fails again)."""
    path = ROBOTS / relpath
    ours = load_ours(path, base)
    try:
        with captured_fds():  # urdfdom's complaints about the file Pinocchio refuses
            pm = pin_model(path, base)
    except Exception as exc:  # noqa: BLE001 - Pinocchio raises ValueError/RuntimeError from urdfdom
        assert relpath in PINOCCHIO_REFUSES, f"Pinocchio refuses {relpath}: {exc}"
        assert isinstance(ours, ModelError), f"{relpath}: Pinocchio refuses it ({exc}); we load it"
        return ()
    assert relpath not in PINOCCHIO_REFUSES, f"Pinocchio now loads {relpath}: take it off PINOCCHIO_REFUSES"
    if relpath in REFUSED:
        (kind, name), _why = REFUSED[relpath]
        assert isinstance(ours, ModelError), f"{relpath} is listed as refused but loads: take it off REFUSED"
        assert str(ours).startswith(f"{path}: ")
        named = ours.joint if kind == "joint" else ours.link
        assert named is not None and (name is None or named == name), str(ours)
        if kind == "joint":  # a singular joint's error suggests the locks that would load the robot
            assert f"locked_joints={{'" in str(ours) and repr(named) in str(ours).split("locked_joints=")[1]
        pd = pm.createData()
        M = pin.crba(pm, pd, pin.neutral(pm))
        w = np.linalg.eigvalsh(np.triu(M) + np.triu(M, 1).T)
        assert w[0] < 1e-12 * w[-1], f"Pinocchio's M of {relpath} is regular (eigenvalues {w[0]:.3g}..{w[-1]:.3g})"
        return ()
    if base != "fixed" and root_link(path) == "world":
        # the file fixes the robot to the world on purpose: a floating base is refused, naming the world link
        assert isinstance(ours, ModelError) and "root link is 'world'" in str(ours), ours
        return ()
    assert not isinstance(ours, ModelError), f"we refuse {relpath}, which Pinocchio loads: {ours}"
    if relpath in SINGULAR_AT_NEUTRAL:
        joint = SINGULAR_AT_NEUTRAL[relpath]
        assert any(item.startswith(f"joint {joint!r}: the mass matrix is singular at the neutral configuration")
                   for item in ours.load_report), ours.load_report
    mimic = bool(ours.mimic_joints)
    if mimic:  # ours follows <mimic> (the default): so does Pinocchio's model built with mimic=True
        try:
            pm = pin_model(path, base, mimic=True)
        except Exception:  # noqa: BLE001 - Pinocchio wants each master before its mimics in its joint order
            # (TALOS): the reduced model is checked against the constrained full model in test_mimic.py; here
            # the independent one against Pinocchio's
            mimic = False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = Model.from_urdf(str(path), base=base, mimic="independent")

    first = 1 if base == "fixed" else 2
    assert (ours.nq, ours.nv) == (pm.nq, pm.nv)
    names = tuple(pm.names[first:])
    if mimic:  # Pinocchio keeps the mimic joints' names among its joints
        names = tuple(n for n in names if n not in ours.mimic_joints)
    assert ours.joint_names == names
    if ours.nv == 0:  # a lone body fixed to the world (hector's quadrotor_base, iris_simple): nothing moves
        assert len(ours.link_names) >= 1 and ours.mass_matrix(np.zeros(0)).shape == (0, 0)
        return ()
    return tuple(agreement(ours, pm, relpath, base, mimic))


@pytest.mark.slow
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("relpath", URDFS)
def test_loads_where_pinocchio_does_and_agrees(relpath, base):
    compare(relpath, base)


def worst() -> dict:
    """``{quantity: (error, file, where)}``: the worst of every comparison (the report's figures)."""
    out = {}
    for relpath in URDFS:
        for base in BASES:
            for quantity, err, where in compare(relpath, base):
                if err > out.get(quantity, (-1.0,))[0]:
                    out[quantity] = (err, relpath, where)
    return out


@pytest.mark.slow
def test_worst_agreement_over_every_file():
    """Prints the worst relative error of each quantity over the files and bases above (``-s``), the figure of
    the issue's report, and the load count (fixed base): files that load / files."""
    figures = worst()
    for quantity, (err, relpath, base) in sorted(figures.items()):
        print(f"worst {quantity}: {err:.2g} ({relpath}, {base})")
    loaded = sum(1 for relpath in URDFS if compare(relpath, "fixed") or relpath in SINGULAR_AT_NEUTRAL
                 or not isinstance(load_ours(ROBOTS / relpath, "fixed"), ModelError))
    print(f"load on a fixed base: {loaded} of {len(URDFS)}")
    assert figures and len(URDFS) - loaded == len(REFUSED) + len(PINOCCHIO_REFUSES)


ROMEO = "romeo_description/urdf/romeo.urdf"
ICUB = "icub_description/robots/icub.urdf"


def suggested_armature(error: ModelError) -> dict:
    """The ``armature={...}`` a singular joint's error suggests, read from its text."""
    text = str(error)
    assert "joint_armature" in text, text
    start = text.index("armature={") + len("armature=")
    return ast.literal_eval(text[start:text.index("}", start) + 1])


@pytest.mark.slow
@pytest.mark.parametrize("base", BASES)
def test_romeo_loads_with_the_armature_its_error_suggests_and_agrees_with_pinocchios(base):
    """Romeo's massless fingers: the error suggests an armature for each of them; with it the robot loads and
    agrees with Pinocchio's model whose ``armature`` holds the same values (M + diag(armature))."""
    path = ROBOTS / ROMEO
    error = load_ours(path, base)
    assert isinstance(error, ModelError)
    armature = suggested_armature(error)
    assert len(armature) == 24 and all(x > 0.0 for x in armature.values())
    ours = load_ours(path, base, armature=armature, mimic="independent")
    assert isinstance(ours, Model), ours
    pm = pin_model(path, base)
    arm = np.zeros(pm.nv)
    for name, x in armature.items():
        arm[pm.idx_vs[pm.getJointId(name)]] = x
    pm.armature = arm
    records = agreement(ours, pm, ROMEO + " armature", base)
    assert len(records) == 2 * N_STATES * 4 * 2


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_icub_at_its_singular_pose_is_a_fault_naming_the_joint(backend):
    """iCub loads; its neutral pose (neck joints coaxial) is a SingularMassMatrix in the forward dynamics and,
    in the simulator, a fault whose reason says why (the compiled kernels also name the joint); 0.3 rad away the
    pose is regular (without gravity, at rest, it stays: no fault). Both poses are outside some of the URDF's joint
    limits (the neutral pose below l_elbow's 0.096 rad, +0.3 above six upper limits) and the limits are not the
    subject: the simulators run without them."""
    from mbs_ros.dynamics import Simulator
    from mbs_ros.dynamics.kernels.compiled import SingularMassMatrix

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Model.from_urdf(str(ROBOTS / ICUB), gravity=(0.0, 0.0, 0.0)).with_backend(backend)
    q0 = model.neutral()
    zero = np.zeros(model.nv)
    if backend == "compiled":
        with pytest.raises(SingularMassMatrix, match="neck_roll"):
            model.forward_dynamics(q0, zero, zero)
    sim = Simulator(model, q0, zero, dt=1e-3, joint_limits=False)
    assert sim.advance(10) == 0
    assert sim.fault is not None and "mass matrix is singular" in sim.fault.reason, sim.fault
    if backend == "compiled":
        assert "neck_roll" in sim.fault.reason
    q1 = q0 + 0.3
    sim = Simulator(model, q1, zero, dt=1e-3, joint_limits=False)
    assert sim.advance(100) == 100 and sim.fault is None
    assert np.array_equal(sim.q, q1) and sim.k == 100


@pytest.mark.slow
def test_the_nodes_joint_armature_parameter_reaches_the_model():
    """The nodes' ``joint_armature`` (one number: every joint) loads Romeo in both nodes' settings (without it
    the start is refused with an error suggesting it): each massless finger joint's diagonal entry of M is then
    exactly that armature, in both backends."""
    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.cores import controller_settings as cs
    from mbs_ros.cores import dynamics_settings as ds
    from mbs_ros.cores.parameters import controller as controller_table
    from mbs_ros.cores.parameters import dynamics as dynamics_table

    source = ms.load_source("", str(ROBOTS / ROMEO))
    with pytest.raises(ms.ParameterError, match="joint_armature"):
        ds.build_model(ds.settings_from_values({n: p.default for n, p in dynamics_table.PARAMETERS.items()}
                                               | {"base_group": "fixed"}, source), source)
    models = []
    for table, settings in ((dynamics_table, ds), (controller_table, cs)):
        values = {n: p.default for n, p in table.PARAMETERS.items()} | {
            "base_group": "fixed", "mimic": "independent", "joint_armature": (0.25,)}
        s = settings.settings_from_values(values, source)
        models.append(settings.build_model(s, source))
    for model in models:
        q = model.neutral()
        diff = np.diag(model.mass_matrix(q)) - np.diag(model.with_backend("numpy").mass_matrix(q))
        assert np.abs(diff).max() < 1e-12
        massless = [i for i, n in enumerate(model.joint_names) if "Finger" in n or "Thumb" in n or "Hand" in n]
        assert massless and np.allclose(np.diag(model.mass_matrix(q))[massless], 0.25, rtol=0, atol=1e-12)
