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
A file in none of these cases that either side refuses fails.

The figures of the issue's report (the worst error per quantity, printed last): ``python -m pytest -q -s
test/unit/test_example_robot_data.py``.
"""
import warnings
import zlib
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
    "icub_description/robots/icub.urdf": (
        ("joint", "neck_roll"),
        "neck_pitch, neck_roll and neck_yaw meet through massless links: with the joints beyond it free, moving "
        "neck_roll moves no mass (M singular; icub_reduced, without them, loads; so does icub.urdf with the "
        "locked_joints the error suggests, test_locked_joints.py)"),
    "romeo_description/urdf/romeo.urdf": (
        ("joint", None),
        "24 finger/thumb joints move links without <inertial> (massless): M singular; the error suggests "
        "locking them, and with those locked_joints it loads (test_locked_joints.py)"),
    "romeo_description/urdf/romeo_laas_small.urdf": (
        ("link", "body"),
        "the trunk's inertia has principal moments [-0.021, 0.052, 0.099] kg m²: clearly not positive "
        "semi-definite (0.22 of the robot's largest moment, INERTIA_TOLERANCE is 1e-6); r_gripper_joint moves no "
        "mass either"),
}
#: Pinocchio refuses these; so do we.
PINOCCHIO_REFUSES = {
    "ur_description/urdf/ur3.urdf": "an empty <robot> (no name, no link: a xacro leftover)",
}
REL = 1e-9
N_STATES = 2
WORST = {}  # (quantity) -> (error, file, base): the report's figures


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


def load_ours(path, base, capfd):
    """Our model of ``path`` (or the ModelError), checking that the load prints nothing and warns at most once."""
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = Model.from_urdf(str(path), base=base)
        except ModelError as exc:
            result = exc
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), f"loading {path.name} printed: {(out + err)[:500]}"
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


def _record(quantity, err, relpath, base):
    if err > WORST.get(quantity, (-1.0,))[0]:
        WORST[quantity] = (err, relpath, base)


@pytest.mark.slow
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("relpath", URDFS)
def test_loads_where_pinocchio_does_and_agrees(relpath, base, capfd):
    path = ROBOTS / relpath
    ours = load_ours(path, base, capfd)
    try:
        pm = pin_model(path, base)
    except Exception as exc:  # noqa: BLE001 - Pinocchio raises ValueError/RuntimeError from urdfdom
        assert relpath in PINOCCHIO_REFUSES, f"Pinocchio refuses {relpath}: {exc}"
        assert isinstance(ours, ModelError), f"{relpath}: Pinocchio refuses it ({exc}); we load it"
        return
    assert relpath not in PINOCCHIO_REFUSES, f"Pinocchio now loads {relpath}: take it off PINOCCHIO_REFUSES"
    pd = pm.createData()
    if relpath in REFUSED:
        (kind, name), _why = REFUSED[relpath]
        assert isinstance(ours, ModelError), f"{relpath} is listed as refused but loads: take it off REFUSED"
        assert str(ours).startswith(f"{path}: ")
        named = ours.joint if kind == "joint" else ours.link
        assert named is not None and (name is None or named == name), str(ours)
        if kind == "joint":  # a singular joint's error suggests the locks that would load the robot
            assert f"locked_joints={{'" in str(ours) and repr(named) in str(ours).split("locked_joints=")[1]
        M = pin.crba(pm, pd, pin.neutral(pm))
        w = np.linalg.eigvalsh(np.triu(M) + np.triu(M, 1).T)
        assert w[0] < 1e-12 * w[-1], f"Pinocchio's M of {relpath} is regular (eigenvalues {w[0]:.3g}..{w[-1]:.3g})"
        return
    if base != "fixed" and root_link(path) == "world":
        # the file fixes the robot to the world on purpose: a floating base is refused, naming the world link
        assert isinstance(ours, ModelError) and "root link is 'world'" in str(ours), ours
        return
    assert not isinstance(ours, ModelError), f"we refuse {relpath}, which Pinocchio loads: {ours}"
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
        pd = pm.createData()

    first = 1 if base == "fixed" else 2
    assert (ours.nq, ours.nv) == (pm.nq, pm.nv)
    names = tuple(pm.names[first:])
    if mimic:  # Pinocchio keeps the mimic joints' names among its joints
        names = tuple(n for n in names if n not in ours.mimic_joints)
    assert ours.joint_names == names
    if ours.nv == 0:  # a lone body fixed to the world (hector's quadrotor_base, iris_simple): nothing moves
        assert len(ours.link_names) >= 1 and ours.mass_matrix(np.zeros(0)).shape == (0, 0)
        return
    repaired = any("projected" in item for item in ours.load_report)
    rng = np.random.default_rng(zlib.crc32(f"{relpath} {base}".encode()))
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
            for quantity, err in errors.items():
                _record(quantity, err, relpath, f"{base}, {model.backend}")
                if not repaired:
                    _record(quantity + " (no inertia repaired)", err, relpath, f"{base}, {model.backend}")
            assert max(errors.values()) < REL, (model.backend, errors)


@pytest.mark.slow
def test_worst_agreement_over_every_file():
    """Prints the worst relative error of each quantity over the files and bases above (run after them, ``-s``);
    the figure of the issue's report."""
    if not WORST:
        pytest.skip("run with the agreement tests (no file was compared in this session)")
    for quantity, (err, relpath, base) in sorted(WORST.items()):
        print(f"worst {quantity}: {err:.2g} ({relpath}, {base})")
    assert max(err for err, _, _ in WORST.values()) < REL
