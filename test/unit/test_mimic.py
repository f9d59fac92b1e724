"""Mimic joints (issue 10): ``q_mimic = multiplier · q_master + offset``, removed from the independent coordinates.

References, none of them our reduced model:

- Pinocchio's own mimic support (``buildModelFromUrdf(..., mimic=True)``) on the example-robot-data robots it
  loads that way (Panda, PR2, Baxter, TIAGo Pro): M, C v + g, RNEA, forward dynamics — in
  ``test_example_robot_data.py`` for every file, and the figures here;
- where Pinocchio refuses (TALOS, whose masters come after their mimics in its joint order) and on random trees
  with chains, offsets and multipliers: the constrained (KKT) solution of the unreduced model (``mimic=
  "independent"``) with one constraint row ``q_i − m_i q_j − o_i = 0`` per ``<mimic>`` tag, read from the URDF
  text here (a chain is rows solved together, never composed), and its link poses at the configuration the rows
  give;
- the structure: ``Ṁ − 2C`` skew-symmetric (Ṁ by finite differences along the motion), energy conserved without
  forces, both backends.

The dynamics node's joint_states lists each mimic joint with its derived position, velocity and effort (a real
process). Bad mimics (unknown or continuous master, a loop) stay independent with one report item each.
"""
from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model, ModelWarning, simulate
from urdf_text import joint, link, robot

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI: pin) is the reference; make setup installs it")

# Each comparison's gate, 15-100x over its worst measured figure (README quotes the figures): forward dynamics
# through a solve gathers more roundoff than M, C v + g, RNEA, poses and energies.
GATES = {"forward dynamics vs KKT": 1e-12, "forward dynamics vs Pinocchio mimic": 1e-11,
         "energy drift, 0.5 s rk4": 1e-12}


def gate(quantity: str) -> float:
    return GATES.get(quantity, 1e-13)


def _load(urdf, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        return Model.from_urdf(urdf, **kw)


def mimic(j, master, multiplier=None, offset=None):
    """``j`` (joint XML) with ``<mimic joint=master .../>``."""
    attrs = f'joint="{master}"' + (f' multiplier="{multiplier!r}"' if multiplier is not None else "") + \
        (f' offset="{offset!r}"' if offset is not None else "")
    return j.replace("</joint>", f"<mimic {attrs}/></joint>")


def random_mimic_tree(rng, n=7):
    """A random tree of ``n`` revolute/prismatic joints; about half of them mimic an earlier or later joint, some
    through a chain, with random multipliers and offsets."""
    parts, names = [link("l0", 1.0)], []
    for k in range(1, n + 1):
        parent = f"l{rng.integers(0, k)}"
        axis_v = rng.normal(size=3)
        axis = " ".join(f"{x:.6f}" for x in axis_v / np.linalg.norm(axis_v))
        xyz = " ".join(f"{x:.4f}" for x in rng.uniform(-0.3, 0.3, size=3))
        com = " ".join(f"{x:.4f}" for x in rng.uniform(-0.1, 0.1, size=3))
        jtype = "prismatic" if rng.random() < 0.3 else "revolute"
        parts.append(link(f"l{k}", float(rng.uniform(0.5, 2.0)), xyz=com))
        parts.append(joint(f"j{k}", parent, f"l{k}", jtype=jtype, axis=axis, xyz=xyz,
                           limit='lower="-3" upper="3" effort="10" velocity="3"'))
        names.append(f"j{k}")
    # mimics: j2 follows j1; j4 follows j2 (a chain); j6 follows j7 (master later in the tree order)
    for name, master in (("j2", "j1"), ("j4", "j2"), ("j6", "j7")):
        k = int(name[1:])
        m, o = float(rng.uniform(-2, 2)), float(rng.uniform(-0.3, 0.3))
        parts[2 * k] = mimic(parts[2 * k], master, m, o)
    return robot(*parts, name="mimic_tree")


def urdf_mimics(urdf) -> list:
    """``[(joint, master, multiplier, offset)]`` of every ``<mimic>`` tag of the URDF (its text or a file path),
    read here from the XML (multiplier 1 and offset 0 when absent), each tag on its own: no chain is resolved."""
    text = urdf if urdf.lstrip().startswith("<") else Path(urdf).read_text()
    out = []
    for j in ET.fromstring(text).findall("joint"):
        tag = j.find("mimic")
        if tag is not None:
            out.append((j.get("name"), tag.get("joint"), float(tag.get("multiplier", "1")),
                        float(tag.get("offset", "0"))))
    return out


def expand(independent: Model, reduced: Model, tags, x, offsets=True):
    """The unreduced joint coordinates (or rates, ``offsets`` False) for the reduced ones ``x`` of the independent
    joints: the linear system of one row ``x_i − m x_j = o`` per tag (a chain is two rows, solved together) and
    ``x_k`` given for every joint without a tag."""
    names = list(independent.joint_names)
    col = {n: k for k, n in enumerate(names)}
    given = dict(zip(reduced.joint_names, x))
    K, b = np.zeros((len(names), len(names))), np.zeros(len(names))
    for r, (name, master, m, o) in enumerate(tags):
        K[r, col[name]], K[r, col[master]], b[r] = 1.0, -m, o if offsets else 0.0
    for r, name in enumerate(given, start=len(tags)):
        K[r, col[name]], b[r] = 1.0, given[name]
    return np.linalg.solve(K, b)


def check_against_kkt(urdf, base, rng, label):
    """The reduced model against the constrained unreduced one at random states, the constraint rows written from
    the URDF's own ``<mimic>`` tags (:func:`urdf_mimics`); returns the worst relative errors."""
    reduced = _load(urdf, base=base)
    independent = _load(urdf, base=base, mimic="independent")
    tags = urdf_mimics(urdf)
    mimics = {name for name, *_ in tags}
    assert tags and list(reduced.joint_names) == [n for n in independent.joint_names if n not in mimics]
    nj = len(independent.joint_names)
    assert independent.nq - nj == reduced.nq - len(reduced.joint_names)  # one coordinate per joint
    nqb, nvb = independent.nq - nj, independent.nv - nj
    col = {n: nvb + k for k, n in enumerate(independent.joint_names)}
    A = np.zeros((len(tags), independent.nv))  # velocity constraint rows v_i − m v_j = 0
    for r, (name, master, m, _o) in enumerate(tags):
        A[r, col[name]], A[r, col[master]] = 1.0, -m
    keep = list(range(nvb)) + [col[n] for n in reduced.joint_names]
    worst = {}
    for _ in range(3):
        q = reduced.random_configuration(rng, 1.0)
        v, tau = rng.normal(size=(2, reduced.nv))
        qf = np.concatenate([q[:nqb], expand(independent, reduced, tags, q[nqb:])])
        vf = np.concatenate([v[:nvb], expand(independent, reduced, tags, v[nvb:], offsets=False)])
        assert np.abs(A @ vf).max() < 1e-12 * max(1.0, np.abs(vf).max())
        M, nle = independent.mass_matrix(qf), independent.nonlinear_effects(qf, vf)
        tau_f = np.zeros(independent.nv)
        tau_f[keep] = tau  # the commands act on the independent joints; the coupling's forces are λ
        K = np.block([[M, A.T], [A, np.zeros((len(tags), len(tags)))]])
        a_f = np.linalg.solve(K, np.concatenate([tau_f - nle, np.zeros(len(tags))]))[: independent.nv]
        for model in (reduced, reduced.with_backend("numpy")):
            a = model.forward_dynamics(q, v, tau)
            a_full = np.concatenate([a[:nvb], expand(independent, reduced, tags, a[nvb:], offsets=False)])
            errors = {
                "forward dynamics vs KKT": np.abs(a_full - a_f).max() / max(1.0, np.abs(a_f).max()),
                "link poses": np.abs(model.link_poses(q) - independent.link_poses(qf)).max(),
                "kinetic energy": abs(model.kinetic_energy(q, v) - independent.kinetic_energy(qf, vf))
                / max(1.0, independent.kinetic_energy(qf, vf)),
            }
            for k, e in errors.items():
                if e > worst.get(k, (-1.0,))[0]:
                    worst[k] = (float(e), f"{label}, {base}, {model.backend}")
            assert all(e < gate(k) for k, e in errors.items()), (label, base, model.backend, errors)
    return worst


BASES = ["fixed", "se3", "se2"]
SEEDS = range(4)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_trees_agree_with_the_constrained_full_model(seed, base):
    rng = np.random.default_rng(seed)
    check_against_kkt(random_mimic_tree(rng), base, rng, f"random tree {seed}")


def test_a_chains_offset_goes_through_the_multiplier():
    """A chain j4 → j2 → j1 with offsets: the reference solves both tags as written (j4 = -3 (2 q1 + 0.5) + 0.25,
    the composed offset -1.25, not 0.75), and the reduced model's links sit where the full model's are there."""
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                 link("c", 1.0, xyz="0.1 0 0"), joint("j1", "base", "a"),
                 mimic(joint("j2", "a", "b", axis="0 1 0", xyz="0.3 0 0"), "j1", 2.0, 0.5),
                 mimic(joint("j4", "b", "c", jtype="prismatic", axis="1 0 0", xyz="0.3 0 0"), "j2", -3.0, 0.25))
    reduced, independent = _load(urdf), _load(urdf, mimic="independent")
    assert urdf_mimics(urdf) == [("j2", "j1", 2.0, 0.5), ("j4", "j2", -3.0, 0.25)]
    x = expand(independent, reduced, urdf_mimics(urdf), np.array([0.1]))
    assert x.tolist() == pytest.approx([0.1, 0.7, -1.85])
    np.testing.assert_allclose(reduced.link_poses(np.array([0.1])), independent.link_poses(x), atol=1e-12)


def _erd_path(relpath):
    """The file of example-robot-data (a test dependency) ending with ``relpath``, or None when absent."""
    from importlib import metadata

    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return None
    return next((Path(dist.locate_file(f)) for f in dist.files or () if str(f).endswith(relpath)), None)


def _erd(relpath):
    path = _erd_path(relpath)
    if path is None:
        pytest.skip(f"{relpath}: example-robot-data (a test dependency in requirements-dev.txt) does not have it")
    return path


TALOS = "talos_data/robots/talos_full_v2.urdf"
PINOCCHIO_MIMIC = ["panda_description/urdf/panda.urdf", "pr2_description/urdf/pr2.urdf",
                   "baxter_description/urdf/baxter.urdf", "tiago_pro_description/robots/tiago_pro.urdf"]


def talos_against_kkt(path, base):
    with pytest.raises(Exception, match="mimic"):  # the reason this case needs the KKT reference
        pin.buildModelFromUrdf(str(path), True)
    rng = np.random.default_rng(zlib.crc32(f"talos {base}".encode()))
    return check_against_kkt(str(path), base, rng, "talos_full_v2")


@pytest.mark.parametrize("base", ["fixed", "se3"])
def test_talos_whose_mimics_pinocchio_refuses_agrees_with_the_constrained_model(base):
    talos_against_kkt(_erd(TALOS), base)


def against_pinocchio(path, relpath):
    """Our model against Pinocchio's mimic model of one file at random states; the worst relative errors."""
    ours = _load(str(path), base="se3")
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer(), True)
    pd = pm.createData()
    assert (ours.nq, ours.nv) == (pm.nq, pm.nv) and ours.mimic_joints
    rng = np.random.default_rng(zlib.crc32(relpath.encode()))
    worst = {}
    for _ in range(3):
        q = ours.random_configuration(rng, 1.0)
        v, a, tau = rng.normal(size=(3, ours.nv))
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        nle = pin.nonLinearEffects(pm, pd, q, v).copy()
        ref = {"M vs Pinocchio mimic": M, "C v + g vs Pinocchio mimic": nle,
               "RNEA vs Pinocchio mimic": pin.rnea(pm, pd, q, v, a).copy(),
               "forward dynamics vs Pinocchio mimic": np.linalg.solve(M, tau - nle)}
        for model in (ours, ours.with_backend("numpy")):
            got = {"M vs Pinocchio mimic": model.mass_matrix(q),
                   "C v + g vs Pinocchio mimic": model.coriolis_matrix(q, v) @ v + model.gravity_forces(q),
                   "RNEA vs Pinocchio mimic": model.inverse_dynamics(q, v, a),
                   "forward dynamics vs Pinocchio mimic": model.forward_dynamics(q, v, tau)}
            for k, x in got.items():
                e = float(np.abs(x - ref[k]).max() / np.abs(ref[k]).max())
                if e > worst.get(k, (-1.0,))[0]:
                    worst[k] = (e, f"{relpath}, {model.backend}")
                assert e < gate(k), (relpath, model.backend, k, e)
    return worst


@pytest.mark.parametrize("relpath", PINOCCHIO_MIMIC)
def test_real_robots_agree_with_pinocchio_mimic(relpath):
    """test_example_robot_data.py checks every file; these four carry the figures (test_figures)."""
    against_pinocchio(_erd(relpath), relpath)


def skew_and_energy(base):
    """Ṁ − 2C skew and the energy drift of 0.5 s without forces on a random tree; the drift."""
    rng = np.random.default_rng(7)
    model = _load(random_mimic_tree(rng), base=base, gravity=(0.0, 0.0, 0.0))
    q = model.random_configuration(rng, 1.0)
    v = rng.normal(size=model.nv)
    h = 1e-6
    Mdot = (model.mass_matrix(model.integrate(q, v, h)) - model.mass_matrix(model.integrate(q, v, -h))) / (2 * h)
    S = Mdot - 2 * model.coriolis_matrix(q, v)
    assert np.abs(S + S.T).max() < 1e-6 * np.abs(Mdot).max()
    _t, qs, vs = simulate(model, q, v, np.zeros(model.nv), dt=1e-3, steps=500, method="rk4")
    energy = [model.kinetic_energy(qq, vv) for qq, vv in zip(qs, vs)]
    assert abs(energy[-1] - energy[0]) < 1e-8 * energy[0]
    return {"energy drift, 0.5 s rk4": (abs(energy[-1] - energy[0]) / energy[0], f"random tree, {base}")}


@pytest.mark.parametrize("base", ["fixed", "se3"])
def test_mdot_minus_2c_is_skew_and_energy_is_conserved(base):
    skew_and_energy(base)


def test_limits_joint_states_and_independent_option():
    """Limits are the independent joints'; mimic_joint_states derives position, velocity and effort; the
    ``independent`` option keeps every joint."""
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                 joint("ja", "base", "a", limit='lower="-1" upper="1" effort="7" velocity="2"'),
                 mimic(joint("jb", "a", "b", jtype="prismatic", xyz="0.2 0 0", axis="1 0 0",
                             limit='lower="0" upper="0.5" effort="99" velocity="9"'), "ja", 0.25, 0.1))
    model = _load(urdf)
    assert model.joint_names == ("ja",) and model.nq == model.nv == 1
    assert model.mimic_joints == {"jb": ("ja", 0.25, 0.1)}
    assert model.effort_limits.tolist() == [7.0] and model.velocity_limits.tolist() == [2.0]
    assert [x.tolist() for x in model.position_limits] == [[-1.0], [1.0]]
    q, v, a = np.array([0.4]), np.array([-2.0]), np.array([3.0])
    position, velocity, effort = model.mimic_joint_states(q, v, a)
    assert position.tolist() == pytest.approx([0.25 * 0.4 + 0.1]) and velocity.tolist() == [-0.5]
    full = _load(urdf, mimic="independent")
    assert full.joint_names == ("ja", "jb")
    qf, vf, af = np.array([0.4, 0.2]), np.array([-2.0, -0.5]), np.array([3.0, 0.75])
    assert effort == pytest.approx(full.inverse_dynamics(qf, vf, af)[1:], rel=1e-12)
    # the reduced inverse dynamics is the power-consistent sum: tau_a + 0.25 tau_b
    tau_full = full.inverse_dynamics(qf, vf, af)
    assert model.inverse_dynamics(q, v, a) == pytest.approx([tau_full[0] + 0.25 * tau_full[1]], rel=1e-12)
    # joint wrenches: the independent joint's row, the same as the full model's
    np.testing.assert_allclose(model.joint_wrenches(q, v, a), full.joint_wrenches(qf, vf, af)[:1], rtol=1e-12)


@pytest.mark.parametrize("bad, why", [
    ('<mimic joint="nope"/>', "its master 'nope' is not a movable joint"),
    ('<mimic joint="jc"/>', "its master 'jc' is a continuous joint"),
    ('<mimic joint="ja" multiplier="x"/>', "not a number"),
])
def test_a_mimic_that_cannot_be_simulated_stays_independent_and_is_reported(bad, why):
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                 link("c", 1.0, xyz="0.1 0 0"), joint("ja", "base", "a"),
                 joint("jb", "a", "b", xyz="0.3 0 0").replace("</joint>", bad + "</joint>"),
                 joint("jc", "base", "c", jtype="continuous", limit=""))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = Model.from_urdf(urdf)
    assert model.joint_names == ("ja", "jb", "jc") and model.mimic_joints == {}
    assert len(model.load_report) == 1 and model.load_report[0].startswith("joint 'jb': <mimic> not simulated")
    assert why in model.load_report[0] and len(caught) == 1


def test_a_mimic_loop_stays_independent():
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                 mimic(joint("ja", "base", "a"), "jb"), mimic(joint("jb", "a", "b", xyz="0.3 0 0"), "ja"))
    model = _load(urdf)
    assert model.joint_names == ("ja", "jb")
    assert all("loop" in r for r in model.load_report) and len(model.load_report) == 2


def test_locking_a_master_locks_its_mimics():
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.1 0 0"), link("b", 1.0, xyz="0.1 0 0"),
                 link("c", 1.0, xyz="0.1 0 0"), joint("ja", "base", "a"),
                 mimic(joint("jb", "a", "b", xyz="0.3 0 0"), "ja", -0.5, 0.2), joint("jc", "b", "c", xyz="0.3 0 0"))
    model = _load(urdf, locked_joints={"ja": 0.6})
    assert model.joint_names == ("jc",) and dict(model.locked_joints) == pytest.approx({"ja": 0.6, "jb": -0.1})


@pytest.mark.ros
def test_the_dynamics_node_lists_mimic_joints_with_their_derived_state(tmp_path):
    """A real dynamics node on a robot whose second joint mimics the first (q_b = -0.5 q_a + 0.2) under gravity:
    joint_states lists ja, then jb with -0.5 q_a + 0.2, -0.5 v_a and the effort of the full inverse dynamics."""
    pytest.importorskip("rclpy")
    from sensor_msgs.msg import JointState

    from mbs_ros.process import NodeProcess
    from ros_helpers import Probe, Recorder

    path = tmp_path / "mimic.urdf"
    urdf = robot(link("base", 1.0), link("a", 1.0, xyz="0.2 0 0"), link("b", 1.0, xyz="0.2 0 0"),
                 joint("ja", "base", "a", axis="0 1 0", limit='lower="-3" upper="3" effort="10" velocity="9"'),
                 mimic(joint("jb", "a", "b", axis="0 1 0", xyz="0.4 0 0",
                             limit='lower="-3" upper="3" effort="10" velocity="9"'), "ja", -0.5, 0.2))
    path.write_text(urdf)
    proc = NodeProcess("mbs_ros.nodes.dynamics_node", name="mimic_node", namespace="mimic",
                       parameters=dict(model_file=str(path), physics_rate=500.0, publish_rate=50.0),
                       log_file=tmp_path / "mimic.log")
    proc.start()
    try:
        assert proc.wait_for_log("rk4 at 500 Hz", timeout=120), proc.log_text()
        with Probe("test_mimic_probe", 60.0) as probe:
            joints = Recorder(probe, JointState, "/mimic/joint_states")
            probe.spin_until(lambda: any(abs(m.velocity[0]) > 0.1 for m in joints.messages),
                             what="the arm falling under gravity", alive=[proc])
    finally:
        rc = proc.stop()
    assert rc == 0, proc.log_text()
    model = _load(urdf)
    full = _load(urdf, mimic="independent")
    for m in joints.messages[-5:]:
        assert list(m.name) == ["ja", "jb"]
        qa, va = m.position[0], m.velocity[0]
        assert m.position[1] == pytest.approx(-0.5 * qa + 0.2, abs=1e-12)
        assert m.velocity[1] == pytest.approx(-0.5 * va, abs=1e-12)
        # no command: the reduced acceleration under gravity alone, and jb's share of the full inverse dynamics
        a = model.forward_dynamics(np.array([qa]), np.array([va]), np.zeros(1))[0]
        qf, vf, af = np.array([qa, -0.5 * qa + 0.2]), np.array([va, -0.5 * va]), np.array([a, -0.5 * a])
        assert m.effort[0] == 0.0
        assert m.effort[1] == pytest.approx(full.inverse_dynamics(qf, vf, af)[1], rel=1e-9, abs=1e-12)


def test_figures():
    """The worst figures of the checks above, each computed here (``-s`` prints them): the same cases, so the
    figures do not depend on which tests ran before; a robot example-robot-data lacks is left out."""
    figures = {}

    def merge(worst):
        for k, (e, where) in worst.items():
            if e > figures.get(k, (-1.0,))[0]:
                figures[k] = (e, where)

    for seed in SEEDS:
        for base in BASES:
            rng = np.random.default_rng(seed)
            merge(check_against_kkt(random_mimic_tree(rng), base, rng, f"random tree {seed}"))
    for base in ("fixed", "se3"):
        merge(skew_and_energy(base))
        if _erd_path(TALOS) is not None:
            merge(talos_against_kkt(_erd_path(TALOS), base))
    for relpath in PINOCCHIO_MIMIC:
        if _erd_path(relpath) is not None:
            merge(against_pinocchio(_erd_path(relpath), relpath))
    for k, (e, where) in sorted(figures.items()):
        print(f"mimic: worst {k}: {e:.2g} ({where})")
    assert "forward dynamics vs KKT" in figures and all(e < gate(k) for k, (e, _) in figures.items())
