"""The core's structure: one backend per Model chosen at construction, and the dynamics package's import rules.

* Backends: which one a model gets (rigid body or tree, compiled or numpy, mimic over a full model), that
  ``MBS_BACKEND=numpy``/missing numba (``compiled.AVAILABLE``) gives the numpy reference, and that ``with_backend``
  and ``with_current`` keep the kind and carry the current into the compiled kernels.
* Imports (read from the source, lazy imports inside functions included): no module of ``mbs_ros.dynamics`` imports
  ``mbs_ros.controllers`` or anything above the core; no import circle among the core's modules; no module reads a
  private name of another module (``obj._x`` with obj not self/cls, ``from m import _x``), except a sibling's inside
  the same package directory.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from mbs_ros.dynamics import Model

from mbs_ros.dynamics.kernels import backends

from mbs_ros.dynamics.kernels import compiled

INERTIAL = ('<inertial><mass value="{m}"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/>'
            '</inertial>')

CORE = Path(__file__).resolve().parents[2] / "mbs_ros" / "dynamics"
def _base_layer() -> set:
    """The base layer's modules as test_architecture.LAYERS names them (not a second list kept by hand)."""
    spec = importlib.util.spec_from_file_location("_architecture", Path(__file__).with_name("test_architecture.py"))
    arch = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = arch  # its dataclasses look their module up there
    spec.loader.exec_module(arch)
    (patterns,) = [p for label, _kind, p in arch.LAYERS if label == "base"]
    return set(patterns)


# what the core may import from the package besides itself: the base layer
BASE_LAYER = _base_layer()


def _arm(mimic=False):
    """Two revolute joints; with ``mimic``, j2 follows j1: ``q2 = 0.5 q1 + 0.1``."""
    links = "".join(f'<link name="{n}">{INERTIAL.format(m=m)}</link>' for n, m in (("base", 2.0), ("l1", 1.0),
                                                                                   ("l2", 0.5)))
    lim = '<limit lower="-2" upper="2" effort="10" velocity="3"/>'
    extra = '<mimic joint="j1" multiplier="0.5" offset="0.1"/>' if mimic else ""
    return (f'<robot name="arm">{links}'
            f'<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/>'
            f'<axis xyz="0 0 1"/>{lim}</joint>'
            f'<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/>'
            f'<axis xyz="0 1 0"/>{lim}{extra}</joint></robot>')


# ------------------------------------------------------------------------------------------------ backends
@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not importable (or MBS_BACKEND=numpy)")
def test_each_kind_of_model_gets_its_backend():
    body = Model.rigid_body("so3xr3", mass=2.0)
    arm = Model.from_urdf(_arm(), base="se3")
    kinds = {
        "rigid body": (body, backends.CompiledRigidBodyBackend, backends.RigidBodyBackend),
        "tree": (arm, backends.CompiledTreeBackend, backends.TreeBackend),
    }
    for what, (model, fast, ref) in kinds.items():
        assert type(model._backend) is fast, what
        assert model.fast_step is not None and model.fast_simulate is not None, what
        numpy_model = model.with_backend("numpy")
        assert type(numpy_model._backend) is ref and numpy_model.backend == "numpy", what
        assert numpy_model.fast_step is None and numpy_model.fast_simulate is None, what
        assert type(numpy_model.with_backend("compiled")._backend) is fast, what


def test_the_numpy_reference_where_compiled_kernels_are_unavailable(monkeypatch):
    monkeypatch.setattr(compiled, "AVAILABLE", False)
    body = Model.rigid_body("se3")
    arm = Model.from_urdf(_arm(), base="fixed")
    assert type(body._backend) is backends.RigidBodyBackend and body.backend == "numpy"
    assert type(arm._backend) is backends.TreeBackend and arm.backend == "numpy"
    assert arm.fast_step is None
    with pytest.raises(ValueError, match="needs numba"):
        arm.with_backend("compiled")


def test_a_mimic_model_projects_its_full_model():
    reduced = Model.from_urdf(_arm(mimic=True), base="fixed")
    assert type(reduced._backend) is backends.MimicBackend
    mm = reduced.mimic_reduction
    assert mm is not None and reduced.mimic_joints == {"j2": ("j1", 0.5, 0.1)}
    assert reduced.nq == 1 and mm.full.nq == 2 and reduced.fast_step is None
    assert reduced.backend == mm.full.backend
    for backend in ("numpy",) + (("compiled",) if compiled.AVAILABLE else ()):
        model = reduced.with_backend(backend)
        assert model.backend == backend and model.mimic_reduction.full.backend == backend
        q, v = np.array([0.3]), np.array([0.7])
        # M = Gᵀ M_full G with G = [1, 0.5]ᵀ (mimic.py), from the full model's two-joint matrix
        Mf = model.mimic_reduction.full.mass_matrix(np.array([0.3, 0.5 * 0.3 + 0.1]))
        G = np.array([1.0, 0.5])
        assert model.mass_matrix(q)[0, 0] == pytest.approx(G @ Mf @ G, rel=1e-14)
        assert model.kinetic_energy(q, v) == pytest.approx(0.5 * 0.7 * (G @ Mf @ G) * 0.7, rel=1e-12)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not importable (or MBS_BACKEND=numpy)")
def test_with_current_reaches_the_compiled_kernels():
    """A ball with linear damping (no added mass, no buoyancy) at rest in a current U: the damping force is
    ``D_L (U − V) = D_L U``, whichever backend computes it."""
    model = Model.from_urdf(f'<robot name="ball"><link name="ball">{INERTIAL.format(m=1.0)}<hydrodynamics>'
                            '<linear_damping>2 3 4 0.1 0.1 0.1</linear_damping></hydrodynamics></link></robot>',
                            base="se3", gravity=(0.0, 0.0, 0.0))
    q, v = model.neutral(), np.zeros(6)
    assert not model.passive_terms(q, v)[0].any()
    for m in (model.with_current((0.5, 0.0, 0.0)), model.with_backend("numpy").with_current((0.5, 0.0, 0.0))):
        tau, power = m.passive_terms(q, v)
        np.testing.assert_allclose(tau, [2.0 * 0.5, 0, 0, 0, 0, 0], atol=1e-12)
        assert power == pytest.approx(2.0 * 0.5 ** 2, rel=1e-12)  # dissipated: D_L |V_r|², V_r = −U
    assert type(model.with_current((0.5, 0.0, 0.0))._backend) is backends.CompiledRigidBodyBackend


# ------------------------------------------------------------------------------------------------ imports
def _modules():
    """{module name: (path, parsed tree)} of every module of the core."""
    out = {}
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(CORE.parents[1]).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return out


def _package(name, path):
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _imports(name, path, tree):
    """[(imported module, imported names)] of every import statement, lazy ones included, resolved to absolute."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(name, path).split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, tuple(a.name for a in node.names)))
    return out


def test_the_core_imports_nothing_above_it():
    bad = []
    for name, (path, tree) in _modules().items():
        for mod, _ in _imports(name, path, tree):
            if mod.split(".")[0] == "mbs_ros" and not (mod.startswith("mbs_ros.dynamics") or mod in BASE_LAYER):
                bad.append(f"{name} imports {mod}")
            if mod.split(".")[0] == "rclpy":
                bad.append(f"{name} imports rclpy")
    assert not bad, bad


def test_the_core_has_no_import_circle():
    modules = _modules()
    graph = {}
    for name, (path, tree) in modules.items():
        deps = set()
        for mod, names in _imports(name, path, tree):
            for target in [f"{mod}.{n}" for n in names] + [mod]:
                if target in modules and target != name:
                    deps.add(target)
                    break
        graph[name] = deps
    # a package's __init__ re-exporting its modules is not a circle of modules: leave the packages out
    packages = {n for n, (p, _) in modules.items() if p.name == "__init__.py"}
    graph = {n: d - packages for n, d in graph.items() if n not in packages}
    state, cycles = {}, []

    def visit(n, stack):
        state[n] = 1
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert not cycles, [" -> ".join(c) for c in cycles]


def _own_private_names(tree) -> set:
    """The private names a module defines: functions, classes, module and class attributes, ``self._x = ...``."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
    return {n for n in own if n.startswith("_")}


def test_the_core_reads_no_private_name_of_another_module():
    bad = []
    for name, (path, tree) in _modules().items():
        package = _package(name, path)
        own = _own_private_names(tree)
        for mod, names in _imports(name, path, tree):
            sibling = mod.rsplit(".", 1)[0] == package or mod == package
            for n in names:
                if n.startswith("_") and not n.startswith("__") and not sibling:
                    bad.append(f"{name}: from {mod} import {n}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and node.attr not in own
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{path.relative_to(CORE)}:{node.lineno}: .{node.attr}")
    assert not bad, "\n".join(bad)
