"""Contact and joint limits on a model with mimic joints (reduced coordinates, ``q_mimic = k q_master``): the
shapes sit on the full tree's bodies, the contact rows are the full tree's along ``v_full = G v``, the limit rows
index the reduced q and v. Closed forms: a slider whose child slider follows it with multiplier k rests on the
ground with the normal force ``m1 g / (1 + k) + m2 g`` (virtual work: the foot moves (1 + k) times the master)."""
from __future__ import annotations

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.geometry import halfspace, sphere
from mbs_ros.dynamics.contact.step import limit_rows
from mbs_ros.dynamics.contact.world import ContactWorld

G, K, M1, M2, M3, R = 9.81, 2.0, 1.5, 0.4, 0.25, 0.05
INERTIA = 'ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"'


def _link(name, mass):
    return (f'<link name="{name}"><inertial><mass value="{mass}"/><inertia {INERTIA}/></inertial>'
            + (f'<collision><geometry><sphere radius="{R}"/></geometry></collision>' if name == "foot" else "")
            + "</link>")


# lift (master, prismatic z) → follow (prismatic z, mimics lift ×K) → spin (continuous z: two coordinates, cos and
# sin) → wrist (revolute z, limited): after the mimic joint and the continuous one, the wrist's reduced coordinate
# is neither its full tree's nor the full tree's joint at its reduced index's
URDF = ('<robot name="mimic_slider"><link name="base"/>' + _link("l1", M1) + _link("foot", M2) + _link("l3", M3 / 2)
        + _link("l4", M3 / 2)
        + '<joint name="lift" type="prismatic"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>'
          '<limit lower="-1" upper="1" effort="100" velocity="10"/></joint>'
        + '<joint name="follow" type="prismatic"><parent link="l1"/><child link="foot"/><axis xyz="0 0 1"/>'
          f'<mimic joint="lift" multiplier="{K}" offset="0"/>'
          '<limit lower="-3" upper="3" effort="100" velocity="30"/></joint>'
        + '<joint name="spin" type="continuous"><parent link="foot"/><child link="l3"/><axis xyz="0 0 1"/></joint>'
        + '<joint name="wrist" type="revolute"><parent link="l3"/><child link="l4"/><axis xyz="0 0 1"/>'
          '<limit lower="-0.5" upper="0.5" effort="10" velocity="10"/></joint></robot>')


def _model(mimic="reduce"):
    return Model.from_urdf(URDF, base="fixed", gravity=(0.0, 0.0, -G), mimic=mimic)


@pytest.mark.filterwarnings("ignore:mimic_slider. loaded with 1 note")  # the independent model's report
def test_body_poses_are_the_full_trees_at_the_mimicked_configuration():
    model, full = _model(), _model("independent")
    assert model.mimic_reduction is not None and model.nq == 4 and full.nq == 5
    c, s = np.cos(0.2), np.sin(0.2)
    q = np.array([-0.07, c, s, 0.3])  # lift, spin (cos, sin), wrist
    poses = alg.body_placements(model, q)
    expected = alg.body_placements(full, np.array([-0.07, K * -0.07, c, s, 0.3]))  # follow = K lift
    np.testing.assert_allclose(poses, expected, atol=1e-15)
    assert poses[2][2, 3] == pytest.approx((1 + K) * -0.07)  # the foot's height


def test_a_mimic_slider_rests_on_the_ground_with_the_virtual_work_force():
    model = _model()
    foot = list(model.tree.link_names).index("foot")
    body = int(model.tree.link_body[foot])
    ground_z = -0.3
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), ground_z, mu=0.5),
                                   sphere("foot", R, (0, body), mu=0.5)], limits=True, margin=1e-3)
    h = 1e-3
    q, v = np.array([-0.05, 1.0, 0.0, 0.0]), np.zeros(3)
    info = None
    for _ in range(1500):  # falls (3 x faster at the foot), lands, rests
        (q,), (v,), info, _ = world.step([q], [v], [np.zeros(3)], h)
    assert info.n_contacts == 1
    normal_force = info.result.lam[0] / h
    assert normal_force == pytest.approx(M1 * G / (1 + K) + (M2 + M3) * G, rel=1e-6)
    assert (1 + K) * q[0] - R == pytest.approx(ground_z, abs=1e-6)  # the foot on the ground
    assert np.abs(v).max() < 1e-9


def test_limit_rows_index_the_reduced_coordinates():
    model = _model()
    q = np.array([0.1, 1.0, 0.0, 0.4995])  # the wrist 0.5 mm from its upper limit
    J, dist, names = limit_rows(model, q, 1e-3)
    assert names == ["wrist upper"]
    np.testing.assert_array_equal(J, [[0.0, 0.0, -1.0]])  # −v_wrist; v = [lift, spin, wrist]
    assert dist[0] == pytest.approx(0.5 - 0.4995, abs=1e-15)


def test_the_free_steps_stop_where_the_wrist_comes_near_its_limit():
    model = _model()
    world = ContactWorld([model], [], limits=True, margin=1e-3)
    wrist = np.linspace(0.4505, 0.5105, 61)  # no state on the margin's edge
    qb = np.column_stack([np.zeros(61), np.ones(61), np.zeros(61), wrist])  # the lift far from its limits
    first_near = int(np.flatnonzero(0.5 - wrist <= 1e-3)[0])
    assert world.free_steps([qb]) == first_near - 1
