"""ContactWorld: the travel bound that lets the ordinary integrator run where nothing is near, checked against
Coal's distances at every state of integrated batches."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.contact.geometry import box, halfspace, sphere
from mbs_ros.dynamics.contact.world import ContactWorld
from mbs_ros.dynamics.simulation.integrators import step as rk_step

G = 9.81


def _batch(model, q, v, n, h):
    qs, vs = [q], [v]
    for _ in range(n):
        q, v = rk_step(model, q, v, np.zeros(model.nv), h, method="rk4")
        qs.append(q)
        vs.append(v)
    return np.array(qs), np.array(vs)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("base", ["se3", "so3xr3"])
def test_no_state_within_the_free_steps_comes_within_the_margin(base, seed):
    rng = np.random.default_rng(seed)
    s, h = 0.2, 2e-3
    model = Model.rigid_body(base, 1.0, np.diag([0.01, 0.02, 0.015]), gravity=(0.0, 0.0, -G))
    q = np.zeros(7)
    q[:3] = (0.0, 0.0, 0.3 + 0.2 * rng.random())
    q[3:] = (lambda x: x / np.linalg.norm(x))(rng.normal(size=4))
    v = np.concatenate([rng.normal(size=3), 8.0 * rng.normal(size=3)])  # spinning fast, thrown
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0), box("box", (s, s, s), (0, 0))],
                         margin=1e-3)
    qs, _ = _batch(model, q, v, 300, h)
    k = world.free_steps([qs])
    distances = [world.pair_distances([qs[i]])[(0, 1)] for i in range(qs.shape[0])]
    assert all(d > world.margin for d in distances[:k + 1])  # rigorous: every state it lets through is clear
    first_near = next((i for i, d in enumerate(distances) if d <= world.margin), None)
    assert first_near is not None  # every seed reaches the ground within 300 steps
    assert k == first_near - 1  # re-anchored where the bound runs out, it stops just before that state


def test_a_joint_near_its_limit_stops_the_batch_there():
    urdf = """<robot name="one"><link name="base"/><link name="arm"><inertial><origin xyz="0.5 0 0"/>
      <mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
      <limit lower="-0.5" upper="0.5" effort="100" velocity="10"/></joint></robot>"""
    model = Model.from_urdf(urdf, gravity=(0.0, 0.0, -G))
    h, n = 1e-3, 400
    qs, _ = _batch(model, np.zeros(1), np.array([2.0]), n, h)  # swinging towards the upper limit
    world = ContactWorld([model], [], limits=True, margin=1e-3)
    k = world.free_steps([qs])
    first_near = next(i for i in range(n + 1) if 0.5 - qs[i, 0] <= 1e-3)
    assert k == first_near - 1
    assert ContactWorld([model], [], limits=False).free_steps([qs]) == n
    assert world.free_steps([qs[first_near:]]) == -1  # a batch that starts within the margin frees nothing


def test_bad_settings_are_refused():
    model = Model.rigid_body("se3", 1.0, np.eye(3) * 0.01)
    with pytest.raises(ValueError, match="margin"):
        ContactWorld([model], [], margin=0.0)
    with pytest.raises(ValueError, match="mu"):
        ContactWorld([model], [sphere("ball", 0.1, (0, 0), mu=-0.2)])
    with pytest.raises(ValueError, match="mu"):
        ContactWorld([model], [sphere("ball", 0.1, (0, 0), mu=math.nan)])


def test_where_nothing_is_near_a_batch_costs_a_few_distance_queries(monkeypatch):
    model = Model.rigid_body("se3", 1.0, np.diag([0.01, 0.02, 0.015]), gravity=(0.0, 0.0, -G))
    q = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0), sphere("ball", 0.1, (0, 0))])
    calls = []
    original = world.pair_distances
    monkeypatch.setattr(world, "pair_distances", lambda qs, among="all": calls.append(1) or original(qs, among))
    qs, _ = _batch(model, q, np.array([0.5, 0, 0, 0, 3.0, 0]), 200, 1e-3)  # 0.2 s: falls 0.2 m of 0.9
    assert world.free_steps([qs]) == 200 and len(calls) == 1


def test_a_turning_box_whose_corner_swings_down_is_stopped_before_it():
    """No translation at all: only the rotation brings a corner to the ground; the bound must count the reach."""
    s, h = 0.2, 1e-3
    model = Model.rigid_body("se3", 1.0, np.diag([0.01, 0.01, 0.01]), gravity=(0.0, 0.0, 0.0))
    q = np.array([0.0, 0.0, 0.13, 0.0, 0.0, 0.0, 1.0])  # face 3 cm above; the half diagonal is 14.1 cm
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0), box("box", (s, s, s), (0, 0))])
    qs, _ = _batch(model, q, np.array([0.0, 0.0, 0.0, 2.0, 0.0, 0.0]), 400, h)
    k = world.free_steps([qs])
    distances = [world.pair_distances([qs[i]])[(0, 1)] for i in range(qs.shape[0])]
    first_near = next(i for i, d in enumerate(distances) if d <= world.margin)
    assert k == first_near - 1 and all(d > world.margin for d in distances[:k + 1])


def test_near_is_any_pair_distance_within_the_margin():
    """ContactWorld.near (the look-ahead's first question) against Coal's distances of every pair
    (pair_distances) at states of a box falling onto the ground beside a sphere on the world: the same answer at
    every state, whichever pair it found last time."""
    s, h = 0.2, 2e-3
    model = Model.rigid_body("se3", 1.0, np.diag([0.01, 0.02, 0.015]), gravity=(0.0, 0.0, -G))
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0), sphere("ball", 0.05, None),
                                   box("box", (s, s, s), (0, 0))], margin=5e-3)
    world.shapes[1].T_body_shape[:3, 3] = (0.12, 0.0, 0.3)  # the ball beside the box's path
    q = np.array([0.0, 0.0, 0.2, 0.0, 0.0, math.sin(0.2), math.cos(0.2)])
    qs, _ = _batch(model, q, np.array([0.0, 0.0, 0.0, 0.5, 0.3, 0.0]), 120, h)
    answers = []
    for qk in qs:
        expected = any(d <= world.margin for d in world.pair_distances([qk]).values())
        assert world.near([qk]) == expected
        answers.append(expected)
    assert any(answers) and not all(answers)  # both answers met: in the air, then on the ground or the ball


def test_a_step_and_a_look_ahead_suspended_at_every_checkpoint_give_the_uninterrupted_numbers(monkeypatch):
    """A node runs a lockstep contact step in slices (:class:`~mbs_ros.cores.work.Slices`, through
    ``ContactWorld.checkpoint``) and resumes it in later callbacks. Suspended at every checkpoint (a deadline in
    the past), a stack of three boxes dropped onto the ground (redundant corner contacts: the solves go past
    Gauss–Seidel) and its look-aheads take the steps of a world never suspended, bit for bit, and the step's CPU
    time leaves out what ran while it was suspended."""
    pytest.importorskip("greenlet")
    from mbs_ros.cores import work
    from mbs_ros.cores.work import Slices
    from mbs_ros.dynamics.contact import solver
    from mbs_ros.dynamics.contact import world as world_module

    solver.warm_up()

    class Clock:  # the thread's CPU clock (ContactWorld times its steps with it, Slices its stops), moved on below
        ns = 0
        monotonic_ns = staticmethod(time.monotonic_ns)

        def thread_time_ns(self):
            self.ns += 1
            return self.ns

    clock = Clock()
    monkeypatch.setattr(world_module, "time", clock)
    monkeypatch.setattr(work, "time", clock)
    n, s, h = 3, 0.2, 2e-3
    model = Model.rigid_body("se3", 1.0, np.diag([s * s / 6.0] * 3), gravity=(0.0, 0.0, -G))
    shapes = [halfspace("ground", (0, 0, 1), 0.0, 0.6)] + [box(f"box{k}", (s, s, s), (k, 0), mu=0.6)
                                                           for k in range(n)]
    plain, sliced = ContactWorld([model] * n, shapes), ContactWorld([model] * n, shapes)
    slices = Slices()
    sliced.checkpoint = slices.checkpoint
    qs = [np.array([0.01 * k, 0.0, (k + 0.5) * s + 0.003 * (k + 1), 0.0, 0.0, 0.0, 1.0]) for k in range(n)]
    vs = [np.zeros(6)] * n
    taus = [np.zeros(6)] * n
    a = b = (qs, vs)
    resumed = 0
    for _ in range(60):
        out = []
        if slices.run(lambda: out.append(sliced.step(b[0], b[1], taus, h)), time.monotonic_ns() - 1) is False:
            while not slices.run(None, time.monotonic_ns() - 1):
                resumed += 1
                clock.ns += 10 ** 9  # a second of another callback's CPU time while the step is suspended
        q1, v1, _, _ = plain.step(a[0], a[1], taus, h)
        q2, v2, _, _ = out[0]
        assert all(np.array_equal(x, y) for x, y in zip(q1 + v1, q2 + v2))
        a, b = (q1, v1), (q2, v2)
        batch = [_batch(model, q, v, 20, h)[0] for q, v in zip(q1, v1)]
        found = []
        if not slices.run(lambda: found.append(sliced.free_steps(batch)), time.monotonic_ns() - 1):
            while not slices.run(None, time.monotonic_ns() - 1):
                pass
        assert found == [plain.free_steps(batch)]
    assert resumed > 60 and slices.suspensions > resumed  # suspended inside the solves, several times a step
    assert sliced.step_count == plain.step_count == 60
    assert sliced.step_ns_max < 10 ** 9  # the seconds that passed while it was suspended are not the step's


def test_a_long_look_ahead_passes_a_checkpoint_every_few_states_of_its_poses():
    """A look-ahead's batch can be long (it doubles after each clear look): its body poses are computed in slices
    of ``POSE_SLICE`` states with a checkpoint between them, where a node may suspend it. A box falling far above
    the ground, 101 states."""
    from mbs_ros.dynamics.contact.world import POSE_SLICE

    s, h, n = 0.2, 2e-3, 100
    model = Model.rigid_body("se3", 1.0, np.diag([s * s / 6.0] * 3), gravity=(0.0, 0.0, -G))
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0))])
    batch = _batch(model, np.array([0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 1.0]), np.zeros(6), n, h)[0]
    calls = []
    world.checkpoint = lambda: calls.append(1)
    assert world.free_steps([batch]) == n  # nothing near: every state clear
    assert len(calls) >= n // POSE_SLICE + 1  # the poses' slices, and the distance queries'


def test_a_step_that_goes_on_at_its_checkpoints_reads_the_cpu_clock_twice(monkeypatch):
    """The thread's CPU clock is a system call (0.7–8 µs here): a contact step reads it at its start and its end,
    and around a checkpoint only when the step stopped there (:meth:`~mbs_ros.cores.work.Slices.checkpoint`
    returns the time spent away). A box resting on the ground, its step run in slices with no deadline: every
    checkpoint is passed, none stops."""
    pytest.importorskip("greenlet")
    from mbs_ros.cores import work
    from mbs_ros.cores.work import Slices
    from mbs_ros.dynamics.contact import world as world_module

    reads = []

    class Clock:
        monotonic_ns = staticmethod(time.monotonic_ns)

        def thread_time_ns(self):
            reads.append(1)
            return time.thread_time_ns()

    s, h = 0.2, 2e-3
    model = Model.rigid_body("se3", 1.0, np.diag([s * s / 6.0] * 3), gravity=(0.0, 0.0, -G))
    world = ContactWorld([model], [halfspace("ground", (0, 0, 1), 0.0, 0.6), box("box", (s, s, s), (0, 0))])
    slices = Slices()
    passed = []
    world.checkpoint = lambda: passed.append(1) or slices.checkpoint()
    q, v = np.array([0.0, 0.0, 0.5 * s + 1e-4, 0.0, 0.0, 0.0, 1.0]), np.zeros(6)
    world.step([q], [v], [np.zeros(6)], h)  # loads what a first step loads
    monkeypatch.setattr(world_module, "time", Clock())
    monkeypatch.setattr(work, "time", Clock())
    for _ in range(5):
        out = []
        assert slices.run(lambda: out.append(world.step([q], [v], [np.zeros(6)], h)), None)
        (q,), (v,), info, _ = out[0]
    assert len(info.contacts) == 4 and len(passed) >= 5 * 4  # resting on its corners, past several checkpoints
    assert len(reads) == 2 * 5 and world.step_count == 6


# A fresh interpreter (a test process has loaded kernels already): ContactWorld.warm_up, then Solo12 dropped from
# 0.3 m through its landing; prints the most contacts, the post-stabilisation's solves and the kernels that
# gained a compiled signature during the steps.
LANDING = '''
import sys
import numpy as np
from numba.core.registry import CPUDispatcher
from mbs_ros.bench.models import erd_path
from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms import multibody as alg
from mbs_ros.dynamics.contact.collision import collision_shapes, excluded_pairs, read_srdf_disabled
from mbs_ros.dynamics.contact.geometry import find_contacts, halfspace
from mbs_ros.dynamics.contact.world import ContactWorld

path, _ = erd_path("robots/solo_description/robots/solo12.urdf")
srdf, _ = erd_path("robots/solo_description/srdf/solo.srdf")
model = Model.from_urdf(str(path), base="so3xr3")
shapes = collision_shapes(model, str(path), mu=0.9) + [halfspace("ground", (0, 0, 1), 0.0, 0.9)]
stand = np.array([0.1, 0.8, -1.6, -0.1, 0.8, -1.6, 0.1, -0.8, 1.6, -0.1, -0.8, 1.6])
q = np.zeros(model.nq)
q[6], q[7:] = 1.0, stand
q[2] = 0.3 - min(c.distance for c in find_contacts([alg.body_placements(model, q)], shapes, margin=1.0)
                 if c.b is None)
world = ContactWorld([model], shapes, excluded_pairs(shapes, [model], disabled=read_srdf_disabled(str(srdf)),
                                                     touching_at=[q]))
v = np.zeros(model.nv)
world.warm_up([q], [v])
signatures = lambda: {f"{name}.{k}": len(f.signatures) for name, mod in list(sys.modules.items())
                      if name.startswith("mbs_ros") for k, f in vars(mod).items() if isinstance(f, CPUDispatcher)}
before = signatures()
import mbs_ros.dynamics.contact.step as contact_step
calls, solve = [0], contact_step.solve
def counted(G, g, mu, n_contacts, **kw):  # the post-stabilisation's solve: normal rows alone, no contact block
    calls[0] += n_contacts == 0
    return solve(G, g, mu, n_contacts, **kw)
contact_step.solve = counted
most = 0
for _ in range(700):
    tau = np.zeros(model.nv)
    tau[6:] = 20.0 * (stand - q[7:]) - 0.3 * v[6:]
    (q,), (v,), info, _ = world.step([q], [v], [tau], 1e-3)
    most = max(most, info.n_contacts)
after = signatures()
print(most, calls[0], sorted(k for k in after if after[k] != before.get(k, 0)))
'''


@pytest.mark.e2e
def test_after_the_warm_up_a_landing_loads_no_kernel():
    """ContactWorld.warm_up loads what a landing's contact steps call, the post-stabilisation's energy balance
    included (its kernel loaded at the first post-stabilisation took 11-19 ms inside that step): Solo12 dropped from
    0.3 m lands on its four feet, is moved out of a penetration at least once, and no compiled kernel gains a
    signature during the 700 steps (each new one a cache load or a compilation inside a step)."""
    import subprocess
    import sys

    from mbs_ros.bench.models import erd_path
    from mbs_ros.dynamics.kernels.jit import AVAILABLE

    if not AVAILABLE:
        pytest.skip("numba is not in use: nothing is compiled")
    path, why = erd_path("robots/solo_description/robots/solo12.urdf")
    if path is None:
        pytest.skip(f"example-robot-data's Solo12: {why}")
    run = subprocess.run([sys.executable, "-c", LANDING], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    most, energy_calls, loaded = run.stdout.strip().splitlines()[-1].split(" ", 2)
    assert int(most) >= 12 and int(energy_calls) > 0  # landed on its feet, post-stabilised
    assert loaded == "[]"
