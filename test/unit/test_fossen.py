"""The marine robot files against Fossen's equations of motion, written out here independently of mbs_ros.

T. I. Fossen, *Handbook of Marine Craft Hydrodynamics and Motion Control*, 2nd ed., Wiley 2021: the rigid-body
mass matrix with the centre of gravity at r_g from the body origin (eq. 3.44), the added mass M_A, the Coriolis and
centripetal matrix of Theorem 3.2 (eq. 3.57) applied to M_RB + M_A, and the restoring forces of a submerged body
(eq. 4.6); for the surface vessel the 3-DOF C_RB(ν) and C_A(ν) of the manoeuvring model (Ch. 6; the 3-DOF branch
of ``m2c`` in Fossen's PythonVehicleSimulator). Every number comes from the robot files themselves: the robot YAML
names the xacro file and its arguments, the ``xacro`` package expands it and ``xml.etree`` reads the result here,
not mbs_ros's URDF reader.

Frames. Fossen writes η in NED and ν in a body frame with z down. Our world is z up (REP 103) with gravity
(0, 0, −9.81) and our body frames are x forward, y left, z up. Eq. 4.6 is written here without Euler angles and
without a frame assumption: with R the body-to-world rotation, f_g = m g⃗ and f_b = −ρ∇ g⃗ (world vectors, g⃗ the
gravity vector of the YAML file), g(η) = −[Rᵀ(f_g + f_b); r_g × Rᵀ f_g + r_b × Rᵀ f_b], which is Fossen's
eq. 4.6 when g⃗ = (0, 0, +g) in NED and holds as written in our z-up world. Eqs. 3.44 and 3.57 are
frame-covariant (any right-handed body frame).

Added mass, buoyancy and thrusters are mbs_ros's ``<hydrodynamics>``/``<thruster>`` URDF extensions
(:mod:`mbs_ros.dynamics.model.passive`).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import xacro
import yaml

from mbs_ros.dynamics import Model

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
BLUEROV = ROBOTS / "bluerov2_heavy.yaml"
UVMS = ROBOTS / "bluerov2_heavy_alpha5.yaml"
VESSEL = ROBOTS / "vessel_3dof.yaml"
RTOL = 1e-10


# ---------------------------------------------------------------------------------------------- the files, read here
def S(a):
    """Fossen's skew-symmetric matrix: S(a) b = a × b."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def rpy_matrix(rpy):
    """URDF's fixed-axis roll, pitch, yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def quat_matrix(x, y, z, w):
    """Rotation matrix of the unit quaternion (x, y, z, w)."""
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def numbers(text):
    return [float(t) for t in text.split()]


def origin(el):
    """(xyz, R) of an element's <origin> (identity without one)."""
    o = el.find("origin") if el is not None else None
    if o is None:
        return np.zeros(3), np.eye(3)
    return np.array(numbers(o.get("xyz", "0 0 0"))), rpy_matrix(numbers(o.get("rpy", "0 0 0")))


def matrix6(text):
    v = numbers(text)
    return np.diag(v) if len(v) == 6 else np.array(v).reshape(6, 6)


def read_robot(yaml_path):
    """The robot YAML's gravity, base and expanded URDF: ``(gravity, base, links, joints, thrusters)``. A link's
    fluid density: its ``<hydrodynamics density>``, else the YAML's ``fluid: {density}``, else 1000 kg/m³."""
    spec = yaml.safe_load(Path(yaml_path).read_text(encoding="utf-8"))["robot"]
    default_density = float(spec.get("fluid", {}).get("density", 1000.0))
    doc = xacro.process_file(str(Path(yaml_path).parent / spec["urdf"]),
                             mappings={k: str(v) for k, v in spec.get("xacro_args", {}).items()})
    root = ET.fromstring(doc.toxml())
    links = {}
    for el in root.findall("link"):
        link = {"mass": 0.0, "com": np.zeros(3), "inertia": np.zeros((3, 3)), "hydro": None}
        inertial = el.find("inertial")
        if inertial is not None:
            c, Rc = origin(inertial)
            i = inertial.find("inertia")
            Ic = np.array([[float(i.get("ixx")), float(i.get("ixy")), float(i.get("ixz"))],
                           [float(i.get("ixy")), float(i.get("iyy")), float(i.get("iyz"))],
                           [float(i.get("ixz")), float(i.get("iyz")), float(i.get("izz"))]])
            link.update(mass=float(inertial.find("mass").get("value")), com=c, inertia=Rc @ Ic @ Rc.T)
        h = el.find("hydrodynamics")
        if h is not None:
            p, R = origin(h)
            b = h.find("buoyancy")
            link["hydro"] = {
                "density": float(h.get("density", default_density)), "p": p, "R": R,
                "added_mass": matrix6(h.findtext("added_mass")) if h.find("added_mass") is not None
                else np.zeros((6, 6)),
                "volume": float(b.get("volume")) if b is not None else 0.0,
                "cob": np.array(numbers(b.get("xyz", "0 0 0"))) if b is not None else np.zeros(3)}
        links[el.get("name")] = link
    joints = {}
    for el in root.findall("joint"):
        xyz, R = origin(el)
        axis = el.find("axis")
        joints[el.get("name")] = {
            "type": el.get("type"), "parent": el.find("parent").get("link"), "child": el.find("child").get("link"),
            "xyz": xyz, "R": R,
            "axis": np.array(numbers(axis.get("xyz"))) if axis is not None else np.array([1.0, 0.0, 0.0])}
    thrusters = []
    for el in root.findall("thruster"):
        xyz, R = origin(el)
        d = R @ np.array(numbers(el.find("axis").get("xyz")))
        lim = el.find("limit")
        thrusters.append({"name": el.get("name"), "link": el.get("link"), "r": xyz, "d": d / np.linalg.norm(d),
                          "lower": float(lim.get("lower")), "upper": float(lim.get("upper"))})
    return np.array(spec["gravity"], dtype=float), spec["base"], links, joints, thrusters


# --------------------------------------------------------------------------------------------------------- Fossen
def rigid_body_mass(m, r_g, I_g):
    """Fossen eq. 3.44: M_RB at the body origin CO, CG at r_g, I_g the inertia about the CG (body axes)."""
    M = np.zeros((6, 6))
    M[:3, :3] = m * np.eye(3)
    M[:3, 3:] = -m * S(r_g)
    M[3:, :3] = m * S(r_g)
    M[3:, 3:] = I_g - m * S(r_g) @ S(r_g)
    return M


def added_mass_at_origin(h):
    """M_A given at frame F (origin p, axes R in the body frame) moved to the body origin: with the body twist
    ν at CO, the twist at F in F's axes is J ν, J = [[Rᵀ, −Rᵀ S(p)], [0, Rᵀ]], and ½ (Jν)ᵀ M_F (Jν) = ½ νᵀ M ν."""
    J = np.zeros((6, 6))
    J[:3, :3] = h["R"].T
    J[:3, 3:] = -h["R"].T @ S(h["p"])
    J[3:, 3:] = h["R"].T
    return J.T @ h["added_mass"] @ J


def coriolis(M, nu):
    """Fossen Theorem 3.2 (eq. 3.57): C(ν) = [[0, −S(M11ν1 + M12ν2)], [−S(M11ν1 + M12ν2), −S(M21ν1 + M22ν2)]]."""
    M = 0.5 * (M + M.T)
    a = M[:3, :3] @ nu[:3] + M[:3, 3:] @ nu[3:]
    b = M[3:, :3] @ nu[:3] + M[3:, 3:] @ nu[3:]
    C = np.zeros((6, 6))
    C[:3, 3:] = -S(a)
    C[3:, :3] = -S(a)
    C[3:, 3:] = -S(b)
    return C


def restoring(R, gravity, m, r_g, rho_V, r_b):
    """Fossen eq. 4.6 without Euler angles, any world frame: weight f_g = m g⃗ at r_g, buoyancy f_b = −ρ∇ g⃗ at r_b,
    g(η) = −[Rᵀ(f_g + f_b); r_g × Rᵀ f_g + r_b × Rᵀ f_b]."""
    fg, fb = R.T @ (m * gravity), R.T @ (-rho_V * gravity)
    return -np.concatenate([fg + fb, np.cross(r_g, fg) + np.cross(r_b, fb)])


def body(links, name):
    """A single link's Fossen quantities: m, r_g, I_g, M_RB, M_A, ρ∇ and r_b at the link origin."""
    L = links[name]
    M_RB = rigid_body_mass(L["mass"], L["com"], L["inertia"])
    h = L["hydro"]
    M_A = added_mass_at_origin(h) if h else np.zeros((6, 6))
    rho_V = h["density"] * h["volume"] if h else 0.0
    r_b = h["p"] + h["R"] @ h["cob"] if h else np.zeros(3)
    return L["mass"], L["com"], L["inertia"], M_RB, M_A, rho_V, r_b


def random_quaternion(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def close(actual, expected, rtol=RTOL):
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    scale = max(float(np.abs(expected).max()), 1e-300)
    err = float(np.abs(actual - expected).max())
    assert err <= rtol * scale, f"max error {err:.3g} against {scale:.3g} (rtol {rtol:g})"


# ------------------------------------------------------------------------------------------------ the files load
@pytest.mark.parametrize("path, nv, joints, mass", [
    (BLUEROV, 6, (), 13.5),
    (UVMS, 10, ("alpha_axis_e", "alpha_axis_d", "alpha_axis_c", "alpha_axis_b"), 14.8),
    (VESSEL, 3, (), 80.0),
])
def test_robot_files_load(path, nv, joints, mass):
    model = Model.from_yaml(path)
    assert model.nv == nv
    assert tuple(model.joint_names) == joints
    assert model.total_mass == pytest.approx(mass, rel=1e-12)


def test_arm_joint_limits_are_the_files():
    _, _, _, joints, _ = read_robot(UVMS)
    model = Model.from_yaml(UVMS)
    doc = xacro.process_file(str(ROBOTS / "bluerov2_heavy.urdf.xacro"), mappings={"with_arm": "true"})
    limits = {j.get("name"): j.find("limit") for j in ET.fromstring(doc.toxml()).findall("joint")}
    lower, upper = model.position_limits
    for k, name in enumerate(model.joint_names):
        lim = limits[name]
        assert joints[name]["type"] == "revolute"
        assert model.effort_limits[6 + k] == pytest.approx(float(lim.get("effort")))  # (nv,): the base first
        assert model.velocity_limits[6 + k] == pytest.approx(float(lim.get("velocity")))
        assert (lower[k], upper[k]) == pytest.approx((float(lim.get("lower")), float(lim.get("upper"))))


# --------------------------------------------------------------------------------- BlueROV2 Heavy, rigid + added mass
def test_bluerov_mass_matrix_is_rigid_body_plus_added_mass():
    _, _, links, _, _ = read_robot(BLUEROV)
    _, _, _, M_RB, M_A, _, _ = body(links, "base_link")
    assert np.abs(M_A).max() > 1.0  # the file has added mass
    model = Model.from_yaml(BLUEROV)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = np.concatenate([rng.normal(size=3), random_quaternion(rng)])
        close(model.mass_matrix(q), M_RB + M_A)


def test_bluerov_coriolis_is_theorem_3_2():
    _, _, links, _, _ = read_robot(BLUEROV)
    _, _, _, M_RB, M_A, _, _ = body(links, "base_link")
    model = Model.from_yaml(BLUEROV)
    rng = np.random.default_rng(2)
    for _ in range(20):
        q = np.concatenate([rng.normal(size=3), random_quaternion(rng)])
        nu = rng.normal(scale=[1, 1, 1, 2, 2, 2])
        C_RB, C_A = coriolis(M_RB, nu), coriolis(M_A, nu)
        close(model.coriolis_matrix(q, nu), C_RB + C_A)
        close(model.coriolis_matrix(q, nu) @ nu, (C_RB + C_A) @ nu)
        # the Munk moment: C_A(ν)ν is not zero for a non-spherical added mass
        assert np.abs(C_A @ nu).max() > 1e-3


def test_bluerov_restoring_forces_are_eq_4_6():
    gravity, _, links, _, _ = read_robot(BLUEROV)
    m, r_g, _, _, _, rho_V, r_b = body(links, "base_link")
    assert rho_V > m  # slightly positively buoyant, as the real one is trimmed
    model = Model.from_yaml(BLUEROV)
    rng = np.random.default_rng(3)
    for _ in range(20):
        quat = random_quaternion(rng)
        q = np.concatenate([rng.normal(size=3), quat])
        close(model.gravity_forces(q), restoring(quat_matrix(*quat), gravity, m, r_g, rho_V, r_b))
    # upright: only the net buoyancy pushes, (ρ∇ − m) g up, so g(η) = −(ρ∇ − m) g ẑ; no moment (r_b above r_g)
    up = np.array([0, 0, 0, 0, 0, 0, 1.0])
    close(model.gravity_forces(up), [0, 0, -(rho_V - m) * 9.81, 0, 0, 0])


def test_bluerov_thrusters():
    _, _, _, _, thrusters = read_robot(BLUEROV)
    model = Model.from_yaml(BLUEROV)
    assert tuple(model.thruster_names) == tuple(f"t{k}" for k in range(1, 9))
    B = np.column_stack([np.concatenate([t["d"], np.cross(t["r"], t["d"])]) for t in thrusters])
    close(model.thruster_matrix, B)
    assert np.linalg.matrix_rank(B) == 6  # the Heavy configuration acts in all six degrees of freedom
    lower, upper = model.thrust_limits
    close(lower, [t["lower"] for t in thrusters])
    close(upper, [t["upper"] for t in thrusters])


# ------------------------------------------------------------------------------ the vehicle with the arm, per link
def _chain(links, joints, joint_order, q_joints):
    """Link poses in the base frame and, per link, the joints moving it: ``({link: (p, R)}, {link: [joint]})``."""
    child_of = {j["child"]: (name, j) for name, j in joints.items()}
    angle = dict(zip(joint_order, q_joints))
    pose, moved_by = {}, {}

    def walk(link):
        if link in pose:
            return pose[link]
        if link not in child_of:
            pose[link], moved_by[link] = (np.zeros(3), np.eye(3)), []
            return pose[link]
        name, j = child_of[link]
        p0, R0 = walk(j["parent"])
        p, R = p0 + R0 @ j["xyz"], R0 @ j["R"]
        moved_by[link] = list(moved_by[j["parent"]])
        if j["type"] != "fixed":
            a = j["axis"] / np.linalg.norm(j["axis"])
            th = angle[name]
            K = S(a)
            R = R @ (np.eye(3) + math.sin(th) * K + (1 - math.cos(th)) * K @ K)
            moved_by[link].append(name)
        pose[link] = (p, R)
        return pose[link]

    for link in links:
        walk(link)
    return pose, moved_by, child_of


def _random_uvms_state(model, joints, rng):
    quat = random_quaternion(rng)
    th = rng.uniform(-1.5, 1.5, size=len(model.joint_names))
    q = np.concatenate([rng.normal(size=3), quat, th])
    return q, quat, th


def test_uvms_restoring_forces_sum_over_links():
    """g(q) of the vehicle with the arm: every link's weight at its CG and its own buoyancy at its centre of
    buoyancy (the arm links are not neutrally buoyant), summed here over the links with our own kinematics."""
    gravity, _, links, joints, _ = read_robot(UVMS)
    model = Model.from_yaml(UVMS)
    order = list(model.joint_names)
    arm = [n for n in links if n != "base_link"]
    weight = sum(links[n]["mass"] for n in arm)
    lift = sum(links[n]["hydro"]["density"] * links[n]["hydro"]["volume"] for n in arm)
    assert weight == pytest.approx(1.3) and 0.45 < lift < 0.55  # ~1.3 kg in air, ~0.8 kg in water
    rng = np.random.default_rng(4)
    for _ in range(10):
        q, quat, th = _random_uvms_state(model, joints, rng)
        Rw = quat_matrix(*quat)
        pose, moved_by, child_of = _chain(links, joints, order, th)
        gb = Rw.T @ gravity  # gravity in base axes
        expected = np.zeros(model.nv)
        for name, L in links.items():
            p, R = pose[name]
            forces = [(p + R @ L["com"], L["mass"] * gb)]
            h = L["hydro"]
            if h:
                forces.append((p + R @ (h["p"] + h["R"] @ h["cob"]), -h["density"] * h["volume"] * gb))
            for at, f in forces:
                expected[:3] -= f
                expected[3:6] -= np.cross(at, f)
                for jn in moved_by[name]:
                    jp, jR = pose[joints[jn]["child"]]
                    a = jR @ (joints[jn]["axis"] / np.linalg.norm(joints[jn]["axis"]))
                    expected[6 + order.index(jn)] -= a @ np.cross(at - jp, f)
        close(model.gravity_forces(q), expected)


def test_uvms_mass_matrix_sums_rigid_body_and_added_mass_of_every_link():
    """M(q) = Σ_i J_iᵀ (M_RB,i + M_A,i) J_i over the links (Kirchhoff: each link's kinetic energy
    ½ V_iᵀ (M_RB,i + M_A,i) V_i), J_i the link twist (link axes, linear first) per generalised velocity."""
    _, _, links, joints, _ = read_robot(UVMS)
    model = Model.from_yaml(UVMS)
    order = list(model.joint_names)
    rng = np.random.default_rng(5)

    def twist_map(p, R):
        """Twist at the frame (p, R) in its axes from the twist at the base origin in base axes."""
        X = np.zeros((6, 6))
        X[:3, :3] = R.T
        X[:3, 3:] = -R.T @ S(p)
        X[3:, 3:] = R.T
        return X

    for _ in range(5):
        q, _, th = _random_uvms_state(model, joints, rng)
        pose, moved_by, _ = _chain(links, joints, order, th)
        M = np.zeros((model.nv, model.nv))
        for name in links:
            p, R = pose[name]
            *_, M_RB, M_A, _, _ = body(links, name)
            J = np.zeros((6, model.nv))
            J[:, :6] = twist_map(p, R)
            for jn in moved_by[name]:
                jp, jR = pose[joints[jn]["child"]]
                a = jR @ (joints[jn]["axis"] / np.linalg.norm(joints[jn]["axis"]))
                J[:, 6 + order.index(jn)] = twist_map(p, R) @ np.concatenate([np.cross(jp, a), a])
            M += J.T @ (M_RB + M_A) @ J
        close(model.mass_matrix(q), M)


# -------------------------------------------------------------------------------------- the Otter, 3 DOF on SE(2)
def _vessel():
    _, base, links, _, thrusters = read_robot(VESSEL)
    assert base == "se2"
    m, r_g, I_g, _, M_A6, _, _ = body(links, "base_link")
    x_g, y_g = r_g[0], r_g[1]
    I_z = I_g[2, 2] + m * (x_g ** 2 + y_g ** 2)  # about the CO's z axis
    M_RB = np.array([[m, 0.0, -m * y_g], [0.0, m, m * x_g], [-m * y_g, m * x_g, I_z]])
    M_A = M_A6[np.ix_([0, 1, 5], [0, 1, 5])]
    return m, x_g, y_g, M_RB, M_A, thrusters


def test_vessel_mass_matrix_3dof():
    _, _, _, M_RB, M_A, _ = _vessel()
    # the Otter's numbers (otter.py: M[0,0], M[1,1], M[1,5], M[5,5] of its 6-DOF M)
    close(M_RB + M_A, [[85.5, 0, 0], [0, 162.5, 12.25], [0, 12.25, 42.65145019531249]], rtol=1e-12)
    model = Model.from_yaml(VESSEL)
    rng = np.random.default_rng(6)
    for _ in range(5):
        psi = rng.uniform(-math.pi, math.pi)
        q = np.array([*rng.normal(size=2), math.cos(psi), math.sin(psi)])
        close(model.mass_matrix(q), M_RB + M_A)


def test_vessel_coriolis_3dof():
    """Fossen's 3-DOF C_RB(ν) = [[0, 0, −m(x_g r + v)], [0, 0, m(u − y_g r)], [m(x_g r + v), −m(u − y_g r), 0]]
    and C_A(ν) = [[0, 0, Y_v̇ v + Y_ṙ r], [0, 0, −X_u̇ u], [−Y_v̇ v − Y_ṙ r, X_u̇ u, 0]] (M_A without surge
    coupling, as the Otter's); the same in a z-up body frame (v and r change sign together)."""
    m, x_g, y_g, _, M_A, thrusters = _vessel()
    assert M_A[0, 1] == M_A[0, 2] == 0.0
    X_ud, Y_vd, Y_rd = -M_A[0, 0], -M_A[1, 1], -M_A[1, 2]
    model = Model.from_yaml(VESSEL)
    rng = np.random.default_rng(7)
    for _ in range(20):
        psi = rng.uniform(-math.pi, math.pi)
        q = np.array([*rng.normal(size=2), math.cos(psi), math.sin(psi)])
        u, v, r = nu = rng.normal(scale=[2.0, 1.0, 0.5])
        C_RB = np.array([[0, 0, -m * (x_g * r + v)], [0, 0, m * (u - y_g * r)],
                         [m * (x_g * r + v), -m * (u - y_g * r), 0]])
        C_A = np.array([[0, 0, Y_vd * v + Y_rd * r], [0, 0, -X_ud * u], [-Y_vd * v - Y_rd * r, X_ud * u, 0]])
        close(model.coriolis_matrix(q, nu), C_RB + C_A)
    # two propellers ±0.395 m off the centre line, pushing forward
    assert [t["name"] for t in thrusters] == ["port", "starboard"]
    assert [t["r"][1] for t in thrusters] == pytest.approx([0.395, -0.395])
    assert [t["lower"] for t in thrusters] == pytest.approx([-66.708] * 2)
    assert [t["upper"] for t in thrusters] == pytest.approx([119.682] * 2)
