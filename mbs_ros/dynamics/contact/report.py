"""What the last contact step did, per contact and per body, in names a user reads (ROS-free): the dynamics node
publishes it (``contacts/<link>``, ``contacts/markers``: :mod:`mbs_ros.nodes.dynamics_contacts`), a headless run
or a test reads it the same way.

A contact step solves for impulses ``λ`` per contact in its contact frame (normal, tangent 1, tangent 2:
:func:`mbs_ros.dynamics.contact.step._frames`) over the step ``h``; the mean force of the step on the moving
side ``a`` is ``F = Rᵀ λ / h`` (world axes), the other side takes ``−F``. The step the Simulator took last ended
at ``sim.k`` when ``sim.last_contact_k == sim.k − 1``; otherwise the last step was the ordinary one (nothing within
the margin) and there is no contact force.

Names: a robot contact is named by the URDF link of its collision shape (``FL_FOOT``), a free object by its
name in the world file, a world shape by its name (``ground``, a static shape).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mbs_ros.dynamics.contact.step import _contact_arrays, _frames, _names

__all__ = ["ContactForce", "ContactReport", "object_pose"]


@dataclass(frozen=True)
class ContactForce:
    """One contact point of the last step: the force ``force`` [N, world] the side ``link`` (a robot link or a
    free object) took at ``point`` [m, world] from ``other`` (a link, an object, ``ground`` or a static shape);
    ``normal`` (unit, world) points from ``other`` to ``link``; ``penetration`` [m] ``max(0, −distance)`` at the
    start of the step."""

    link: str
    other: str
    point: np.ndarray
    normal: np.ndarray
    force: np.ndarray
    penetration: float


class ContactReport:
    """The contact forces of a :class:`~mbs_ros.dynamics.simulation.simulator.Simulator` ``sim`` with a contact
    world (``sim.world``), by name: :meth:`forces` per contact, :meth:`wrenches` per body, in its frame."""

    def __init__(self, sim):
        self.sim = sim
        world = sim.world
        shapes = list(world.shapes) if world is not None else []
        self.objects = []  # (name, model index) of the free objects
        self.links = []  # the robot links with a collision shape, in the shapes' order
        self._frame = {}  # body name -> (model index, body index, 4×4 pose of its frame on the body)
        self._label = {}  # shape name -> the body's name (robot: URDF link; object: its name; world: the shape's)
        tree = sim.model.tree
        link_index = {n: i for i, n in enumerate(tree.link_names)} if tree is not None else {}
        for s in shapes:
            if s.body is None:
                label = s.name
            elif s.body[0] == 0:
                label = s.link or s.name
                if label not in self._frame:
                    i = link_index.get(s.link)
                    T = np.asarray(tree.T_body_link[i]) if i is not None else np.eye(4)
                    self._frame[label] = (0, int(s.body[1]), T)
                    self.links.append(label)
            else:
                label = s.name
                self.objects.append((s.name, int(s.body[0])))
                self._frame[label] = (int(s.body[0]), int(s.body[1]), np.eye(4))
            self._label[s.name] = label
        self._pairs: Dict[str, Tuple[str, str]] = {}
        self._names = sorted(self._label, key=len, reverse=True)
        self._link_set = frozenset(self.links)
        self._step = None  # (StepInfo, dt, what _step_forces found): the last step's forces, kept

    def _pair(self, name: str) -> Tuple[str, str]:
        """(label of side a, label of side b) of a contact's ``"<shape a>/<shape b>"`` (shape names may hold '/')."""
        out = self._pairs.get(name)
        if out is None:
            out = (name, "")
            for a in self._names:
                if name.startswith(a + "/") and name[len(a) + 1:] in self._label:
                    out = (self._label[a], self._label[name[len(a) + 1:]])
                    break
            self._pairs[name] = out
        return out

    def body(self, name: str) -> Optional[Tuple[int, int, np.ndarray]]:
        """``(model index, body index, 4×4 pose of its frame on the body)`` of a contact link or free object
        ``name`` (model 0: the robot), None for a world shape or an unknown name."""
        return self._frame.get(name)

    def current(self) -> bool:
        """Was the step that ended at ``sim.k`` a contact step?"""
        sim = self.sim
        return sim.last_contact is not None and sim.last_contact_k == sim.k - 1

    def _step_forces(self):
        """``(contacts, F (n, 3) world forces on side a, w (n,) +1/−1/0: how each enters the robot's total)`` of
        the step that ended at ``sim.k``, None when it was not a contact step; kept per step (the StepInfo)."""
        if not self.current():
            return None
        info = self.sim.last_contact
        if info.result is None or not info.contacts:
            return None
        cached = self._step
        if cached is not None and cached[0] is info and cached[1] == self.sim.dt:
            return cached[2]
        contacts = info.contacts
        own_points, normals = _contact_arrays(contacts)[:2]
        points = info.points
        if points is None or points.shape[0] != len(contacts):
            points = own_points
        frames = _frames(normals)  # (n, 3, 3): rows normal, t1, t2
        lam = np.asarray(info.result.lam[:3 * len(contacts)], dtype=float).reshape(-1, 3)
        F = np.einsum("nij,ni->nj", frames, lam) / self.sim.dt
        links = self._link_set
        pairs = [self._pair(name) for name in _names(contacts)]
        w = np.array([float(a in links) - float(b in links) for a, b in pairs])
        out = (contacts, points, normals, F, w, pairs)
        self._step = (info, self.sim.dt, out)
        return out

    def forces(self) -> List[ContactForce]:
        """The contacts of the step that ended at ``sim.k`` (empty when it was not a contact step)."""
        step = self._step_forces()
        if step is None:
            return []
        contacts, points, normals, F, _, pairs = step
        return [ContactForce(a, b or "world", points[i].copy(), normals[i].copy(), F[i].copy(),
                             max(0.0, -float(c.distance))) for i, (c, (a, b)) in enumerate(zip(contacts, pairs))]

    def robot_force(self, forces: Optional[Sequence[ContactForce]] = None) -> np.ndarray:
        """The sum of the contact forces on the robot (model 0) [N, world axes]: its links' sides of every contact
        with something that is not the robot."""
        if forces is None:  # from the step's arrays, in the contacts' order (the sum below, without the objects)
            step = self._step_forces()
            if step is None:
                return np.zeros(3)
            F, w = step[3], step[4]
            return np.zeros(3) + np.cumsum(w[:, None] * F, axis=0)[-1]  # summed in order, as the loop below
        links = self._link_set
        total = np.zeros(3)
        for f in forces:
            total += (f.link in links) * f.force - (f.other in links) * f.force
        return total

    def body_poses(self) -> Dict[str, np.ndarray]:
        """4×4 world poses of the robot's contact links and of the free objects (their frames)."""
        sim = self.sim
        if not self._frame:
            return {}
        bodies = sim.world.poses([sim.q] + list(sim.obj_q))
        return {name: bodies[k][b] @ T for name, (k, b, T) in self._frame.items()}

    def wrenches(self, forces: Optional[Sequence[ContactForce]] = None) -> Dict[str, np.ndarray]:
        """``{name: [f; τ]}`` of every contact link and object: the sum of its contact forces (both sides of a
        contact between two of them) in its own frame's axes, the torque about its frame's origin; zero for those
        out of contact."""
        forces = self.forces() if forces is None else forces
        poses = self.body_poses()
        names = list(poses)
        index = {name: j for j, name in enumerate(names)}
        sides = [(index[name], i, sign) for i, f in enumerate(forces)
                 for name, sign in ((f.link, 1.0), (f.other, -1.0)) if name in index]
        W = np.zeros((len(names), 6))
        if sides:  # every side at once: R_bᵀ F and R_bᵀ ((x − p_b) × F), summed per body in the forces' order
            body, which, sign = (np.array(x) for x in zip(*sides))
            T = np.array([poses[name] for name in names])[body]
            R, p = T[:, :3, :3], T[:, :3, 3]
            F = np.array([f.force for f in forces], dtype=float)[which] * sign[:, None]
            x = np.array([f.point for f in forces], dtype=float)[which]
            parts = np.concatenate([np.einsum("kji,kj->ki", R, F), np.einsum("kji,kj->ki", R, np.cross(x - p, F))],
                                   axis=1)
            np.add.at(W, body, parts)
        return {name: W[j].copy() for name, j in index.items()}


def object_pose(q: np.ndarray) -> np.ndarray:
    """4×4 pose of a free object's ``so3xr3`` configuration ``[x, y, z, qx, qy, qz, qw]``."""
    x, y, z, w = (float(c) for c in q[3:7])
    T = np.eye(4)
    T[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    T[:3, 3] = q[:3]
    return T
