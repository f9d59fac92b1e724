"""Interconnection patterns and their flattening to an explicit ODE (seed 000 §2, eq. 4, Figs. 4–7)."""
from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from mbs_ros.dynamics.simulation.integrators import TABLEAUS, check_time_step
from mbs_ros.ephs.components import Environment, Onsager, Storage
from mbs_ros.ephs.ports import Port, pairing

__all__ = ["Pattern", "System", "Block"]

_STORES = (Storage, Environment)


class Pattern:
    """Interconnection pattern (§2): ``boxes`` {name: primitive component or Pattern}, ``junctions``
    {name: ["box.port", ...]} and ``outer`` {outer port name: junction name}.

    At a junction (eq. 4) the states of all ports are equal, the efforts of all power ports are equal and the
    inner flows sum to the outer flow. Every inner port joins exactly one junction, and ports at a junction carry
    the same quantity. A Pattern fills a box of another Pattern through its outer ports (nesting, Fig. 4)."""

    def __init__(self, boxes: Mapping, junctions: Mapping, outer: Mapping | None = None):
        self.boxes, self.outer = dict(boxes), dict(outer or {})
        self.junctions = {j: list(r) for j, r in junctions.items()}
        seen, quantity, power = set(), {}, {}
        for j, refs in self.junctions.items():
            for ref in refs:
                p = self.port_of(ref)
                if ref in seen:
                    raise ValueError(f"port {ref!r} is joined to more than one junction")
                seen.add(ref)
                if quantity.setdefault(j, p.quantity) != p.quantity:
                    raise ValueError(f"junction {j!r}: {ref!r} carries {p.quantity}, the junction {quantity[j]}")
                power[j] = power.get(j, False) or p.power
        missing = [f"{b}.{p.name}" for b, c in self.boxes.items() for p in c.ports if f"{b}.{p.name}" not in seen]
        if missing:
            raise ValueError(f"ports not joined to any junction: {', '.join(missing)}")
        for name, j in self.outer.items():
            if j not in quantity:
                raise ValueError(f"outer port {name!r}: no junction {j!r} with ports")
        kinds = {j: next(self.port_of(r) for r in self.junctions[j]) for j in quantity}
        self.ports = tuple(Port(n, kinds[j].kind, kinds[j].dim, power[j], kinds[j].group)
                           for n, j in self.outer.items())

    def port_of(self, ref: str) -> Port:
        box, _, name = ref.partition(".")
        try:
            return next(p for p in self.boxes[box].ports if p.name == name)
        except (KeyError, StopIteration):
            raise ValueError(f"no port {ref!r} in this pattern") from None

    def primitives(self, prefix: str = ""):
        """(path, component) of every primitive component, depth first (the flattened pattern, Fig. 4)."""
        for b, c in self.boxes.items():
            yield from c.primitives(f"{prefix}{b}.") if isinstance(c, Pattern) else [(prefix + b, c)]

    def collect(self, prefix, parent, attach):
        """Inline nested patterns: union-find ``parent`` over (prefix, junction) ids, primitive port
        attachments ``attach`` [(junction id, path, component, port index)]; returns {outer port: junction id}."""
        inner = {b: c.collect(f"{prefix}{b}.", parent, attach)
                 for b, c in self.boxes.items() if isinstance(c, Pattern)}
        for j, refs in self.junctions.items():
            jid = parent.setdefault((prefix, j), (prefix, j))
            for ref in refs:
                box, _, name = ref.partition(".")
                if box in inner:
                    parent[_find(parent, inner[box][name])] = _find(parent, jid)
                else:
                    c = self.boxes[box]
                    attach.append((jid, prefix + box, c, [p.name for p in c.ports].index(name)))
        return {n: (prefix, j) for n, j in self.outer.items()}

    def flatten(self) -> "System":
        """The explicit ODE ẋ = F(x) over the storage states (§2: eliminating the interface variables)."""
        return System(self)


class Block(NamedTuple):
    """One storage state in :attr:`System.layout`: its path, port, and slices into x and into ẋ = F(x)."""
    name: str
    port: Port
    x: slice
    dx: slice


class System:
    """A flattened pattern: ``system(x, inputs)`` is F(x) (left-trivialised for group-valued states, see
    :meth:`simulate`); ``inputs`` {outer port: flow} are the outer flows (default 0, an isolated system).

    Each junction must hold exactly one storage (or environment) port: the junction's state and effort are its
    state and effort, and its flow closes the flow balance (eq. 4). Junctions without one are constraints (a DAE,
    §5.2.4) and are refused."""

    def __init__(self, pattern: Pattern):
        parent, attach = {}, []
        outer = pattern.collect("", parent, attach)
        root = {jid: _find(parent, jid) for jid in parent}
        store, stores, others, nx, ndx = {}, [], {}, 0, 0
        order = {path: n for n, (path, _) in enumerate(pattern.primitives())}
        for jid, path, comp, i in sorted(attach, key=lambda a: order[a[1]]):
            if isinstance(comp, _STORES):
                if root[jid] in store:
                    raise ValueError(f"junction {_name(root[jid])!r} holds two storages, {store[root[jid]][0]} "
                                     f"and {path}")
                p = comp.ports[0]
                store[root[jid]] = (path, comp)
                stores.append((Block(path, p, slice(nx, nx + p.nx), slice(ndx, ndx + p.dim)), comp, root[jid]))
                nx, ndx = nx + p.nx, ndx + p.dim
            else:
                others.setdefault(path, [comp, [None] * len(comp.ports)])[1][i] = root[jid]
        lonely = {_name(r) for r in root.values() if r not in store}
        if lonely:
            raise ValueError(f"junctions without a storage (constraints, not an explicit ODE): {sorted(lonely)}")
        self.pattern, self.layout, self.nx, self.ndx = pattern, tuple(b for b, _, _ in stores), nx, ndx
        self._stores = stores
        self._others = [(path, c, roots) for path, (c, roots) in others.items()]
        self._outer = {n: root[jid] for n, jid in outer.items()}

    # ---------------------------------------------------------------------------------------------- evaluation
    def evaluate(self, x, inputs: Mapping | None = None) -> dict:
        """All port variables: {path: [(x, f, e) per port]} (f, e None for state ports), and ẋ under "xdot"."""
        x = np.asarray(x, dtype=float)
        js, je, net, out = {}, {}, {}, {}
        for blk, comp, r in self._stores:
            js[r], je[r] = x[blk.x], comp.effort(x[blk.x])
            net[r] = np.zeros(blk.port.dim)
        for n, f in (inputs or {}).items():
            net[self._outer[n]] = net[self._outer[n]] + np.asarray(f, dtype=float)
        for path, comp, roots in self._others:
            states = [js[r] for r in roots]
            efforts = [je[r] if p.power else None for p, r in zip(comp.ports, roots)]
            flows = comp.flows(states, efforts)
            for r, f in zip(roots, flows):
                if f is not None:
                    net[r] = net[r] - f
            out[path] = list(zip(states, flows, efforts))
        for blk, comp, r in self._stores:
            out[blk.name] = [(js[r], net[r], je[r])]
        out["xdot"] = np.concatenate([net[r] for _, _, r in self._stores])
        return out

    def __call__(self, x, inputs: Mapping | None = None) -> np.ndarray:
        return self.evaluate(x, inputs)["xdot"]

    def powers(self, x, inputs: Mapping | None = None) -> dict:
        """{path: Σ⟨e|f⟩} per primitive component: dE/dt for storages, 0 for Dirac structures, the exergy
        destruction rate (≥ 0) for Onsager structures."""
        ev = self.evaluate(x, inputs)
        return {k: sum(pairing(e, f) for _, f, e in v if f is not None) for k, v in ev.items() if k != "xdot"}

    def entropy_production(self, x, inputs: Mapping | None = None) -> float:
        """Σ over Onsager components of exergy destruction / θ₀ (eqs. 6, 29: dυ²/θ ≥ 0)."""
        p = self.powers(x, inputs)
        return sum(p[path] / c.theta0 for path, c, _ in self._others if isinstance(c, Onsager))

    def energy(self, x) -> float:
        """Total energy: storages plus θ₀ s of each environment (conserved when isolated)."""
        return sum(c.energy(np.asarray(x)[b.x]) for b, c, _ in self._stores)

    def exergy(self, x) -> float:
        return sum(c.exergy(np.asarray(x)[b.x]) for b, c, _ in self._stores)

    # ---------------------------------------------------------------------------------------------- layout
    def block(self, name: str) -> Block:
        return next(b for b in self.layout if b.name == name)

    def state(self, values: Mapping) -> np.ndarray:
        """Pack {storage path: state} into x (states not given: 0, or the group identity)."""
        x = np.zeros(self.nx)
        for b in self.layout:
            g = b.port.group
            x[b.x] = values.get(b.name, g.identity() if g is not None else 0.0)
        return x

    def simulate(self, x0, dt: float, steps: int, method: str = "rk4", inputs: Mapping | None = None):
        """Runge–Kutta–Munthe-Kaas (seed 001 eqs. 35–37, tableaus of :mod:`mbs_ros.dynamics.simulation.integrators`):
        vector states step additively, group states by q·exp(Ψ) with stage flows mapped by dexp⁻¹(−Ψ).
        Returns (t, xs) with xs (steps+1, nx)."""
        tab = TABLEAUS[method]
        dt = check_time_step(dt)
        xs = np.empty((int(steps) + 1, self.nx))
        xs[0] = x0
        for n in range(int(steps)):
            x, ks = xs[n], []
            for a_row in tab.A:
                psi = dt * sum((a * k for a, k in zip(a_row, ks) if a), np.zeros(self.ndx))
                ks.append(self._chart(psi, self(self._retract(x, psi), inputs)))
            xs[n + 1] = self._retract(x, dt * sum(b * k for b, k in zip(tab.b, ks)))
        return dt * np.arange(len(xs)), xs

    def _retract(self, x, psi):
        y = np.array(x, dtype=float)
        for b in self.layout:
            g = b.port.group
            y[b.x] = x[b.x] + psi[b.dx] if g is None else g.integrate(x[b.x], psi[b.dx])
        return y

    def _chart(self, psi, f):
        k = np.array(f, dtype=float)
        for b in self.layout:
            if b.port.group is not None:
                k[b.dx] = b.port.group.dexp_inv(-psi[b.dx]) @ f[b.dx]
        return k


def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _name(jid) -> str:
    return jid[0] + jid[1]
