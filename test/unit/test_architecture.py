"""The architecture of mbs_ros/, read from its source: import layers, no import circle, ROS-free layers (transitively),
no private reads across packages, thin node files and node families, short modules and module docstrings; and
that a test in test/unit which starts a process is marked with its kind (``ros``/``e2e``), so the fast selection
starts none. ``python test/unit/test_architecture.py`` prints the layout (:func:`layout`).

Every rule is a function of a package directory returning one line per violation (``file:line: what``), so each is
run on the real ``mbs_ros/`` and, to show it can fail, on small synthetic packages written into ``tmp_path``.
Imports are read with ``ast``: every ``import``/``from`` statement anywhere in a module (inside functions and
``if TYPE_CHECKING:`` too) and ``importlib.import_module("literal")``; relative imports are resolved, and
``from pkg import name`` where ``pkg.name`` is a module counts as importing that module.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mbs_ros"

# Bottom to top; a module may import its own layer or a lower one. "x.*" is x and everything below it; a module
# takes the first layer that names it, so a module listed low stays there though a pattern above also matches it.
# A ROS-free layer's modules run without ROS: none imports rclpy or a ROS interface package, itself or through any
# chain of mbs_ros imports (ros_imports); a ROS layer's modules may. This table is the only list of either.
FREE, ROS = "ROS-free", "ROS"
LAYERS = (
    ("base", FREE, ("mbs_ros", "mbs_ros.yamlfile", "mbs_ros.yamlschema", "mbs_ros.packages", "mbs_ros.process",
                    "mbs_ros.dds")),
    ("dynamics", FREE, ("mbs_ros.dynamics.*",)),
    ("controllers/ephs/sensors/estimation", FREE, ("mbs_ros.controllers.*", "mbs_ros.ephs.*", "mbs_ros.sensors.*",
                                                   "mbs_ros.estimation.*")),
    # the nodes' ROS-free cores: the simulation loop, command intake, state paths, settings, parameter tables
    ("cores", FREE, ("mbs_ros.cores.*",)),
    # the rclpy nodes: adapters from messages to the cores' calls and back, and their message conversions
    ("nodes", ROS, ("mbs_ros.nodes.*",)),
    # the scenario schema reads the cores' parameter tables; the headless run, the animation (--model SCENARIO)
    # and the campaigns read scenarios through it, the runner, the bridge and the launch helpers too
    ("scenario schema", FREE, ("mbs_ros.scenario.*",)),
    # a scenario run without ROS through the nodes' ROS-free cores, below the campaigns that run it
    ("headless", FREE, ("mbs_ros.headless.*",)),
    # reading recordings (MCAP, no ROS), plots, animations, Foxglove's schemas
    ("analysis", FREE, ("mbs_ros.analysis.*", "mbs_ros.foxglove_schemas", "mbs_ros.plot", "mbs_ros.animate.*")),
    # the recorder: a node that subscribes and writes MCAP
    ("recorder", ROS, ("mbs_ros.recording.*",)),
    # test campaigns: scenario draws, headless runs, metrics and criteria (Ray only inside its engine)
    ("campaign", FREE, ("mbs_ros.campaign.*",)),
    ("bringup", ROS, ("mbs_ros.bringup.*",)),
    ("studies", FREE, ("mbs_ros.validation.*",)),
    # the demo runs the nodes; the benchmarks time them too
    ("demo/benchmarks", ROS, ("mbs_ros.demo", "mbs_ros.bench.*")),
)
ROS_PACKAGE = re.compile(r"^(rclpy|launch_ros|rcl_interfaces|builtin_interfaces|rosidl_\w+|rosbag2_py|\w+_msgs"
                         r"|\w+_srvs)$")
# Private names of the standard library that are its documented interface (os._exit after fork, sys._getframe
# for a caller's frame) and namedtuple's methods, which carry an underscore so as not to clash with field names.
STDLIB_PRIVATE = {("os", "_exit"), ("sys", "_getframe")}
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
MAX_NODE_LINES = 600
# A node's family: nodes/X_node.py and every nodes/X_*.py beside it, what one reads to follow node X. The largest is
# the dynamics node's: 2487 lines before its cores left nodes/ (issue 29), 1799 after (its parts composed), 1981
# with its contact topics (issue 30: nodes/dynamics_contacts.py).
MAX_FAMILY_LINES = 2000
MAX_MODULE_LINES = 800
MAX_DOCSTRING_LINES = 40


@dataclass
class Module:
    name: str          # dotted, e.g. mbs_ros.dynamics.model
    path: Path
    is_package: bool   # an __init__.py
    tree: ast.Module
    imports: list = field(default_factory=list)  # [(imported dotted name, line, names or None)]

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


def read_package(root: Path) -> dict[str, Module]:
    """Every module under the package directory ``root`` by dotted name (the package is root's directory name)."""
    return _read_package(Path(root).resolve())


@functools.lru_cache(maxsize=None)  # parsed once for all the rules (a tree is not changed while the tests run)
def _read_package(root: Path) -> dict[str, Module]:
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, path, is_package, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    for m in modules.values():
        m.imports = sorted(_imports(m), key=lambda i: i[1])
    return modules


def _from_name(m: Module, node: ast.ImportFrom) -> str:
    """The absolute name of a ``from X import ...`` statement's X (relative imports resolved)."""
    if not node.level:
        return node.module
    base = m.package.split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(m: Module):
    """(dotted name, line, imported names or None) of every import statement in the module, anywhere in it."""
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, None
        elif isinstance(node, ast.ImportFrom):
            if node.module != "__future__":
                yield _from_name(m, node), node.lineno, [a.name for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            yield node.args[0].value, node.lineno, None


def _known(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in modules:
            return prefix
    return None


def internal_edges(m: Module, modules) -> list[tuple[str, int]]:
    """(module of the package, line) of each import of one: ``from pkg import sub`` gives pkg.sub."""
    out = []
    for name, line, names in m.imports:
        targets = []
        for n in names or ():
            if f"{name}.{n}" in modules:
                targets.append(f"{name}.{n}")
        if not targets or any(f"{name}.{n}" not in modules for n in names or ()):
            target = _known(name, modules)
            if target is not None:
                targets.append(target)
        out += [(t, line) for t in targets if t != m.name]
    return out


def _matches(name: str, patterns) -> bool:
    return any(name == p[:-2] or name.startswith(p[:-1]) if p.endswith(".*") else name == p for p in patterns)


def layer_of(name: str) -> int | None:
    for i, (_label, _ros, patterns) in enumerate(LAYERS):
        if _matches(name, patterns):
            return i
    return None


def _where(m: Module, line: int, root: Path) -> str:
    return f"{m.path.relative_to(Path(root).resolve().parent)}:{line}"


# ------------------------------------------------------------------------------------------------------ the rules
def layer_violations(root: Path) -> list[str]:
    """Each module imports its own layer or a lower one, and every module has a layer."""
    modules, out = read_package(root), []
    for m in modules.values():
        mine = layer_of(m.name)
        if mine is None:
            out.append(f"{_where(m, 1, root)}: {m.name} has no layer: place it in LAYERS "
                       f"(test/unit/test_architecture.py)")
            continue
        for target, line in internal_edges(m, modules):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                out.append(f"{_where(m, line, root)}: {m.name} (layer {LAYERS[mine][0]}) imports {target} "
                           f"(layer {LAYERS[theirs][0]}, higher)")
    return out


def import_cycles(root: Path) -> list[str]:
    """No import circle between modules; a package's __init__ importing its own submodules is not one."""
    modules = read_package(root)
    graph = {}
    for m in modules.values():
        edges = {}
        for target, line in internal_edges(m, modules):
            if m.is_package and target.startswith(m.name + "."):
                continue  # the package re-exports its own submodule
            edges.setdefault(target, line)
        graph[m.name] = edges
    out, seen_cycles = [], set()
    state = {}  # name -> 1 on the current path, 2 done
    path = []

    def visit(name):
        state[name] = 1
        path.append(name)
        for target in sorted(graph.get(name, ())):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    steps = ", ".join(f"{_where(modules[a], graph[a][b], root)} {a} imports {b}"
                                      for a, b in zip(cycle, cycle[1:]))
                    out.append(f"import circle {' → '.join(cycle)} ({steps})")
            elif target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return out


def ros_imports(root: Path) -> list[str]:
    """A module of a ROS-free layer imports neither rclpy nor a ROS interface package, itself or through any chain of
    mbs_ros imports (the shortest chain is named)."""
    modules, out = read_package(root), []
    direct = {m.name: [(name, line) for name, line, _names in m.imports if ROS_PACKAGE.match(name.split(".")[0])]
              for m in modules.values()}
    for m in modules.values():
        mine = layer_of(m.name)
        if mine is None or LAYERS[mine][1] != FREE:
            continue
        path = _ros_path(m.name, modules, direct)
        if path is None:
            continue
        last = path[-1][0]
        package, line = direct[last][0]
        where = _where(modules[last], line, root)
        if len(path) == 1:
            out.append(f"{where}: {m.name} (layer {LAYERS[mine][0]}) must run without ROS but imports {package}")
        else:
            chain = " → ".join(name for name, _line in path[1:])
            out.append(f"{_where(m, path[1][1], root)}: {m.name} (layer {LAYERS[mine][0]}) must run without ROS but "
                       f"imports {chain}, which imports {package} ({where})")
    return out


def _ros_path(start: str, modules, direct) -> list[tuple[str, int]] | None:
    """The shortest chain of mbs_ros imports from ``start`` to a module importing ROS, breadth first, as
    [(start, 0), (module start imports, its line in start), ...]; None if there is none."""
    parent, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for name in frontier:
            if direct.get(name):
                path = []
                while name is not None:
                    up = parent[name]
                    path.append((name, up[1] if up else 0))
                    name = up[0] if up else None
                return path[::-1]
            for target, line in internal_edges(modules[name], modules):
                if target not in parent:
                    parent[target] = (name, line)
                    nxt.append(target)
        frontier = sorted(nxt)
    return None


def private_reads(root: Path) -> list[str]:
    """No ``obj._name`` where obj is not self/cls (or the enclosing class, or a module of the same directory), and
    no ``from M import _name`` where M lives in another directory than the importer."""
    modules, out = read_package(root), []
    for m in modules.values():
        found = []
        for name, line, names in m.imports:
            source = modules.get(name)
            if source is None or source.path.parent == m.path.parent:
                continue  # another distribution's module, or package-internal
            for n in names or ():
                if n.startswith("_") and not n.startswith("__"):
                    found.append((line, f"{_where(m, line, root)}: {m.name} imports the private {n} of {name} "
                                        f"(another package directory)"))
        found += _private_attributes(m, modules, root)
        out += [text for _line, text in sorted(found, key=lambda f: f[0])]
    return out


def _module_aliases(m: Module, modules) -> dict[str, str]:
    """Local name -> module of the package it is bound to by an import."""
    aliases = {}
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in modules:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            name = _from_name(m, node)
            for a in node.names:
                if f"{name}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{name}.{a.name}"
    return aliases


def _private_attributes(m: Module, modules, root) -> list[str]:
    aliases = _module_aliases(m, modules)
    out = []

    def walk(node, classes):  # in source order
        if isinstance(node, ast.ClassDef):
            classes = classes + (node.name,)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
            owner = node.value
            ok = node.attr in NAMEDTUPLE_API
            if isinstance(owner, ast.Name):
                ok = ok or owner.id in ("self", "cls") or owner.id in classes \
                    or (owner.id, node.attr) in STDLIB_PRIVATE \
                    or owner.id in aliases and modules[aliases[owner.id]].path.parent == m.path.parent
            elif isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                ok = True
            if not ok:
                out.append((node.lineno, f"{_where(m, node.lineno, root)}: {m.name} reads {ast.unparse(node)}, a "
                                         f"private name of another object"))
        for child in ast.iter_child_nodes(node):
            walk(child, classes)

    walk(m.tree, ())
    return out


def long_node_files(root: Path) -> list[str]:
    """Each ``nodes/*_node.py`` stays thin: at most MAX_NODE_LINES lines (the ROS-free work lives elsewhere)."""
    out = []
    for path in sorted((Path(root) / "nodes").glob("*_node.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_NODE_LINES:
            out.append(f"{path.relative_to(Path(root).parent)}:{n}: {n} lines, more than {MAX_NODE_LINES} for a "
                       f"node file")
    return out


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_node_families(root: Path) -> list[str]:
    """A node's family (nodes/X_node.py and every nodes/X_*.py) has at most MAX_FAMILY_LINES lines together."""
    out = []
    for node in sorted((Path(root) / "nodes").glob("*_node.py")):
        family = sorted(node.parent.glob(node.name[:-len("node.py")] + "*.py"))
        n = sum(_lines(p) for p in family)
        if n > MAX_FAMILY_LINES:
            parts = ", ".join(f"{p.name} {_lines(p)}" for p in family)
            out.append(f"{node.relative_to(Path(root).parent)}: the {node.stem[:-5]} node's family has {n} lines, "
                       f"more than {MAX_FAMILY_LINES} ({parts})")
    return out


def long_modules(root: Path) -> list[str]:
    """Every module has at most MAX_MODULE_LINES lines."""
    out = []
    for m in read_package(root).values():
        rel = m.path.relative_to(Path(root).resolve().parent).as_posix()
        n = _lines(m.path)
        if n > MAX_MODULE_LINES:
            out.append(f"{rel}:{n}: {n} lines, more than {MAX_MODULE_LINES} for a module: split it into cohesive "
                       f"parts")
    return sorted(out)


def long_docstrings(root: Path) -> list[str]:
    """Module docstrings say what and why in at most MAX_DOCSTRING_LINES lines; manuals go to README/docs."""
    out = []
    for m in read_package(root).values():
        doc = ast.get_docstring(m.tree, clean=False)
        if doc is not None and len(doc.splitlines()) > MAX_DOCSTRING_LINES:
            out.append(f"{_where(m, 1, root)}: {m.name}'s docstring has {len(doc.splitlines())} lines, more than "
                       f"{MAX_DOCSTRING_LINES} (a manual belongs in README.md or docs/)")
    return out


# --------------------------------------------------------------------------------------------- the layout
def _package(name: str) -> str:
    """mbs_ros.<first part>: a package of mbs_ros, or a module at its top."""
    return ".".join(name.split(".")[:2])


def layout(root: Path, largest: int = 10) -> list[str]:
    """The layout as numbers: lines per package, the largest modules, import circles, imports up a layer, and
    back arrows between packages (a module importing a package whose highest layer is above its own: the
    package then holds modules of two levels, as bringup holds the scenario schema). ``python <this file>``."""
    modules, out = read_package(root), []
    lines = {name: _lines(m.path) for name, m in modules.items()}
    per_package = {}
    for name, n in lines.items():
        key = _package(name) if "." in name and modules[_package(name)].is_package else f"{name.split('.')[0]} (top)"
        per_package[key] = per_package.get(key, 0) + n
    out.append(f"{sum(lines.values())} lines in {len(lines)} modules; per package:")
    out += [f"  {n:6d}  {p}" for p, n in sorted(per_package.items(), key=lambda i: -i[1])]
    out.append(f"the {largest} largest modules:")
    out += [f"  {lines[name]:6d}  {modules[name].path.relative_to(Path(root).resolve().parent)}"
            for name in sorted(lines, key=lambda k: -lines[k])[:largest]]
    top = {}
    for name in modules:
        if layer_of(name) is not None:
            top[_package(name)] = max(top.get(_package(name), -1), layer_of(name))
    arrows = {}
    for m in modules.values():
        mine = layer_of(m.name)
        for target, line in internal_edges(m, modules):
            theirs = _package(target)
            if mine is not None and theirs != _package(m.name) and top.get(theirs, -1) > mine:
                arrows.setdefault((_package(m.name), theirs), []).append(f"{_where(m, line, root)} {target}")
    for title, found in (("import circles", import_cycles(root)), ("imports up a layer", layer_violations(root)),
                         ("back arrows between packages", [f"{a} → {b}: {len(v)} imports ({v[0]}, ...)"
                                                           for (a, b), v in sorted(arrows.items())])):
        out.append(f"{title}: {len(found)}")
        out += [f"  {f}" for f in found]
    return out


# ------------------------------------------------------------------------------------------ tests by kind
STARTERS = {"NodeProcess", "subprocess", "Popen", "os.system", "multiprocessing"}  # what starts a process


def _used_name(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{node.value.id}.{node.attr}" if isinstance(node.value, ast.Name) and node.value.id == "os" \
            else node.attr
    return node.name.split(".")[-1]  # an imported name


def unmarked_process_tests(test_dir: Path) -> list[str]:
    """A test in test/unit that starts a process (NodeProcess, subprocess, ...: itself, through a function or a
    fixture of its file) is marked ``ros`` or ``e2e``, so ``make test-fast`` starts none."""
    out = []
    for path in sorted(Path(test_dir).glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        functions = {f.name: f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        uses = {name: {_used_name(n) for n in ast.walk(f) if isinstance(n, (ast.Name, ast.Attribute, ast.alias))}
                | {a.arg for a in f.args.args} for name, f in functions.items()}
        starts = {name for name, used in uses.items() if used & STARTERS}
        grown = True
        while grown:  # through the file's helpers and fixtures
            more = {name for name, used in uses.items() if used & starts} - starts
            starts |= more
            grown = bool(more)
        module_kind = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                          and re.search(r"mark\.(ros|e2e)\b", ast.unparse(n.value)) for n in tree.body)
        for name in sorted(starts, key=lambda n: functions[n].lineno):
            kinds = {ast.unparse(d).split("(")[0] for d in functions[name].decorator_list}
            if name.startswith("test") and not module_kind and not kinds & {"pytest.mark.ros", "pytest.mark.e2e"}:
                out.append(f"{path.name}:{functions[name].lineno}: {name} starts a process but is not marked "
                           f"@pytest.mark.ros or @pytest.mark.e2e")
    return out


def test_unit_tests_that_start_a_process_are_marked_with_their_kind():
    problems = unmarked_process_tests(Path(__file__).parent)
    assert not problems, "\n".join(problems)


def test_an_unmarked_process_test_is_reported(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import subprocess\nimport pytest\n\n\ndef _cli():\n    return subprocess.run(['true'])\n\n\n"
        "@pytest.fixture\ndef node():\n    return _cli()\n\n\n"
        "def test_direct():\n    from mbs_ros.process import NodeProcess\n\n\n"
        "def test_through_a_helper():\n    _cli()\n\n\n"
        "def test_through_a_fixture(node):\n    pass\n\n\n"
        "@pytest.mark.e2e\ndef test_marked():\n    _cli()\n\n\n"
        "def test_numerics():\n    system = 2\n    assert 1 + 1 == system\n\n\n"
        "def test_shell():\n    import os\n    os.system('true')\n", encoding="utf-8")
    assert unmarked_process_tests(tmp_path) == [
        "test_x.py:14: test_direct starts a process but is not marked @pytest.mark.ros or @pytest.mark.e2e",
        "test_x.py:18: test_through_a_helper starts a process but is not marked @pytest.mark.ros or @pytest.mark.e2e",
        "test_x.py:22: test_through_a_fixture starts a process but is not marked @pytest.mark.ros or "
        "@pytest.mark.e2e",
        "test_x.py:36: test_shell starts a process but is not marked @pytest.mark.ros or @pytest.mark.e2e"]


RULES = [layer_violations, import_cycles, ros_imports, private_reads, long_node_files, long_node_families,
         long_modules, long_docstrings]


# ------------------------------------------------------------------------------------------- on the real tree
@pytest.mark.parametrize("rule", RULES, ids=[r.__name__ for r in RULES])
def test_mbs_ros_keeps_the_rule(rule):
    problems = rule(PACKAGE)
    assert not problems, " ".join(rule.__doc__.split()) + "\n" + "\n".join(problems)


# --------------------------------------------------------------------- each rule fails on a planted violation
def write(tmp_path, files: dict[str, str]) -> Path:
    """A synthetic mbs_ros package under tmp_path: {relative path: source}; __init__.py files added."""
    root = tmp_path / "mbs_ros"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        if not (d / "__init__.py").exists():
            (d / "__init__.py").write_text("", encoding="utf-8")
    return root


CLEAN = {
    "__init__.py": '"""The package."""\n',
    "yamlfile.py": "import os\n\ndef f():\n    os._exit(0)\n",
    "dynamics/__init__.py": "from .model import Model\nfrom .simulator import Simulator\nfrom . import lie\n",
    "dynamics/simulator.py": "from mbs_ros.dynamics import Model\n",
    "dynamics/model.py": ("import sys\nfrom mbs_ros import yamlfile\nfrom ._kernels import _fast\n\n\n"
                          "class Model:\n    _cache = {}\n\n"
                          "    def f(self, other):\n        Model._cache.clear()\n        sys._getframe(0)\n"
                          "        return self._x + super()._y + other._replace(a=1).a\n"),
    "dynamics/_kernels.py": "def _fast():\n    pass\n",
    "dynamics/lie/__init__.py": "from . import _base\n",
    "dynamics/lie/_base.py": "from mbs_ros.dynamics.lie import so3\n\ndef _helper():\n    return so3._unit\n",
    "dynamics/lie/so3.py": "_unit = 1.0\n",
    "controllers/laws.py": "from mbs_ros.dynamics import Model\nfrom ..ephs import ports\n",
    "ephs/ports.py": "import numpy\n",
    "nodes/dynamics_node.py": "import rclpy\nfrom sensor_msgs.msg import JointState\nfrom .params import x\n",
    "cores/params.py": "x = 1\n",
    "cores/parameters/__init__.py": "import importlib\nTABLE = importlib.import_module('mbs_ros.cores.params')\n",
    "recording/__init__.py": "from mbs_ros.analysis.mcapfile import read\nfrom .recorder import Recorder\n",
    "recording/recorder.py": "import rclpy\nfrom mbs_ros.cores import params\n",
    "analysis/mcapfile.py": "def read():\n    pass\n",
    "analysis/reader.py": "from mbs_ros.analysis.mcapfile import read\n",
    "bringup/runner.py": "from mbs_ros import recording\n",
    "bench/timing.py": "from mbs_ros.bringup import runner\n",
    "validation/study.py": "from mbs_ros.dynamics import Model\n",
}


def test_a_clean_synthetic_package_keeps_every_rule(tmp_path):
    """The patterns the rules allow: re-exports by a package __init__, self/cls/super/the class's own privates,
    os._exit and sys._getframe, namedtuple's _replace, privates of the same directory, imports downward."""
    root = write(tmp_path, CLEAN)
    for rule in RULES:
        assert rule(root) == [], rule.__name__


PLANTED = [
    # upward imports, at module level, in a function, under TYPE_CHECKING, relative, and by `from pkg import sub`
    ({"dynamics/model.py": "from mbs_ros.cores import params\n"}, layer_violations,
     "mbs_ros/dynamics/model.py:1: mbs_ros.dynamics.model (layer dynamics) imports mbs_ros.cores.params "
     "(layer cores, higher)"),
    ({"dynamics/model.py": "x = 1\n\n\ndef f():\n    import mbs_ros.controllers.laws\n"}, layer_violations,
     "mbs_ros/dynamics/model.py:5: mbs_ros.dynamics.model (layer dynamics) imports mbs_ros.controllers.laws"),
    ({"ephs/ports.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cores.params import x\n"},
     layer_violations, "mbs_ros/ephs/ports.py:3: mbs_ros.ephs.ports (layer controllers/ephs/sensors/estimation) "
                       "imports "
                       "mbs_ros.cores.params (layer cores, higher)"),
    ({"cores/params.py": "from mbs_ros import recording\n"}, layer_violations,
     "mbs_ros/cores/params.py:1: mbs_ros.cores.params (layer cores) imports mbs_ros.recording"),
    ({"cores/params.py": "from mbs_ros.nodes import dynamics_node\n"}, layer_violations,
     "mbs_ros/cores/params.py:1: mbs_ros.cores.params (layer cores) imports mbs_ros.nodes.dynamics_node "
     "(layer nodes, higher)"),
    ({"process.py": "import importlib\nm = importlib.import_module('mbs_ros.dynamics.model')\n"}, layer_violations,
     "mbs_ros/process.py:2: mbs_ros.process (layer base) imports mbs_ros.dynamics.model"),
    ({"newthing.py": "x = 1\n"}, layer_violations, "mbs_ros/newthing.py:1: mbs_ros.newthing has no layer"),
    # circles
    ({"dynamics/lie/so3.py": "from . import _base\n_unit = 1.0\n"}, import_cycles,
     "import circle mbs_ros.dynamics.lie._base → mbs_ros.dynamics.lie.so3 → mbs_ros.dynamics.lie._base "
     "(mbs_ros/dynamics/lie/_base.py:1 mbs_ros.dynamics.lie._base imports mbs_ros.dynamics.lie.so3, "
     "mbs_ros/dynamics/lie/so3.py:1 mbs_ros.dynamics.lie.so3 imports mbs_ros.dynamics.lie._base)"),
    ({"ephs/ports.py": "def f():\n    from mbs_ros.controllers.laws import g\n"}, import_cycles,
     "import circle mbs_ros.controllers.laws → mbs_ros.ephs.ports → mbs_ros.controllers.laws"),
    # ROS in the ROS-free layers
    ({"dynamics/model.py": "def f():\n    import rclpy.node\n"}, ros_imports,
     "mbs_ros/dynamics/model.py:2: mbs_ros.dynamics.model (layer dynamics) must run without ROS but imports "
     "rclpy.node"),
    ({"cores/parameters/dynamics.py": "from rcl_interfaces.msg import ParameterDescriptor\n"}, ros_imports,
     "mbs_ros/cores/parameters/dynamics.py:1: mbs_ros.cores.parameters.dynamics (layer cores) must run without "
     "ROS but imports rcl_interfaces.msg"),
    ({"cores/paramsfile.py": "from geometry_msgs.msg import Twist\n"}, ros_imports,
     "mbs_ros/cores/paramsfile.py:1: mbs_ros.cores.paramsfile (layer cores) must run without ROS but imports "
     "geometry_msgs.msg"),
    ({"validation/study.py": "def main():\n    import rclpy\n"}, ros_imports,
     "mbs_ros/validation/study.py:2: mbs_ros.validation.study (layer studies) must run without ROS but imports "
     "rclpy"),
    ({"analysis/stats.py": "import builtin_interfaces.msg\n"}, ros_imports,
     "mbs_ros/analysis/stats.py:1: mbs_ros.analysis.stats (layer analysis) must run without ROS but imports "
     "builtin_interfaces.msg"),
    ({"bringup/launch_file.py": "import launch_ros.actions\n",
      "campaign/run.py": "from mbs_ros.bringup import launch_file\n"},
     ros_imports, "mbs_ros/campaign/run.py:1: mbs_ros.campaign.run (layer campaign) must run without ROS but "
                  "imports mbs_ros.bringup.launch_file, which imports launch_ros.actions"),
    # ... and through a chain of mbs_ros imports: a node core reading a node's message conversions, a lazy import
    # two steps down, a package __init__ re-exporting a ROS module
    ({"nodes/conversions.py": "from builtin_interfaces.msg import Time\n",
      "cores/rotations.py": "x = 1\n\n\ndef f():\n    from mbs_ros.nodes.conversions import Time\n"}, ros_imports,
     "mbs_ros/cores/rotations.py:5: mbs_ros.cores.rotations (layer cores) must run without ROS but imports "
     "mbs_ros.nodes.conversions, which imports builtin_interfaces.msg (mbs_ros/nodes/conversions.py:1)"),
    ({"nodes/conversions.py": "def f():\n    import rclpy\n", "cores/params.py": "from mbs_ros.nodes import conversions\n",
      "headless/run.py": "import numpy\nfrom mbs_ros.cores.params import x\n"}, ros_imports,
     "mbs_ros/headless/run.py:2: mbs_ros.headless.run (layer headless) must run without ROS but imports "
     "mbs_ros.cores.params → mbs_ros.nodes.conversions, which imports rclpy (mbs_ros/nodes/conversions.py:2)"),
    ({"analysis/reader.py": "from mbs_ros.recording import read\n"}, ros_imports,
     "mbs_ros/analysis/reader.py:1: mbs_ros.analysis.reader (layer analysis) must run without ROS but imports "
     "mbs_ros.recording → mbs_ros.recording.recorder, which imports rclpy (mbs_ros/recording/recorder.py:1)"),
    # private reads
    ({"bringup/runner.py": "def f(node):\n    return node._timer\n"}, private_reads,
     "mbs_ros/bringup/runner.py:2: mbs_ros.bringup.runner reads node._timer, a private name of another object"),
    ({"bringup/runner.py": "class A:\n    def f(self):\n        return self.sim._q\n"}, private_reads,
     "mbs_ros/bringup/runner.py:3: mbs_ros.bringup.runner reads self.sim._q"),
    ({"bringup/runner.py": "from mbs_ros.dynamics import model\nmodel._cache = 1\n"}, private_reads,
     "mbs_ros/bringup/runner.py:2: mbs_ros.bringup.runner reads model._cache"),
    ({"bringup/runner.py": "import os\nos._environ\n"}, private_reads, "reads os._environ"),
    ({"cores/params.py": "from mbs_ros.dynamics.model import _solve\n"}, private_reads,
     "mbs_ros/cores/params.py:1: mbs_ros.cores.params imports the private _solve of mbs_ros.dynamics.model "
     "(another package directory)"),
    ({"dynamics/model.py": "from .lie import _base\n"}, private_reads,
     "mbs_ros/dynamics/model.py:1: mbs_ros.dynamics.model imports the private _base of mbs_ros.dynamics.lie"),
    # thin nodes, short docstrings
    ({"nodes/dynamics_node.py": "x = 1\n" * 601}, long_node_files,
     "mbs_ros/nodes/dynamics_node.py:601: 601 lines, more than 600 for a node file"),
    ({"nodes/dynamics_node.py": "x = 1\n" * 600, "nodes/dynamics_inputs.py": "x = 1\n" * 800,
      "nodes/dynamics_core.py": "x = 1\n" * 100, "nodes/dynamics_extra.py": "x = 1\n" * 501}, long_node_families,
     "mbs_ros/nodes/dynamics_node.py: the dynamics node's family has 2001 lines, more than 2000 (dynamics_core.py 100, "
     "dynamics_extra.py 501, dynamics_inputs.py 800, dynamics_node.py 600)"),
    ({"dynamics/lie/so3.py": "_unit = 1.0\n" * 801}, long_modules,
     "mbs_ros/dynamics/lie/so3.py:801: 801 lines, more than 800 for a module"),
    ({"bringup/__init__.py": "x = 1\n" * 900}, long_modules, "mbs_ros/bringup/__init__.py:900: 900 lines"),
    ({"plot.py": '"""Plots.\n' + "line\n" * 40 + '"""\n'}, long_docstrings,
     "mbs_ros/plot.py:1: mbs_ros.plot's docstring has 41 lines, more than 40"),
]


@pytest.mark.parametrize("files, rule, expected", PLANTED,
                         ids=[f"{rule.__name__}-{i}" for i, (_f, rule, _e) in enumerate(PLANTED)])
def test_a_planted_violation_is_reported_by_file_and_line(tmp_path, files, rule, expected):
    root = write(tmp_path, {**CLEAN, **files})
    problems = rule(root)
    assert any(expected in p for p in problems), problems


def test_the_limits_themselves_pass(tmp_path):
    """600 lines for a node, 2000 for its family, 800 for a module and a 40-line docstring are within the rules (the
    bounds are inclusive); a module outside nodes/ named like a node's is not of its family."""
    root = write(tmp_path, {**CLEAN, "nodes/dynamics_node.py": "x = 1\n" * 600,
                            "nodes/dynamics_core.py": "x = 1\n" * 100, "nodes/dynamics_inputs.py": "x = 1\n" * 800,
                            "nodes/dynamics_extra.py": "x = 1\n" * 500, "dynamics/dynamics_x.py": "x = 1\n" * 800,
                            "plot.py": '"""Plots.\n' + "line\n" * 39 + '"""\n'})
    assert long_node_files(root) == [] and long_docstrings(root) == []
    assert long_node_families(root) == [] and long_modules(root) == []


def test_the_layout_counts_lines_circles_and_back_arrows(tmp_path):
    """The layout report: a package holding modules of two levels (bringup's scenario schema below the headless
    run, the rest of bringup above it) shows as a back arrow; lines are counted per package and module."""
    root = write(tmp_path, {**CLEAN, "bringup/scenario.py": "x = 1\n" * 900,
                            "headless/run.py": "from mbs_ros.bringup.scenario import x\n"})
    report = layout(root, largest=1)
    assert "     900  mbs_ros/bringup/scenario.py" in report and "import circles: 0" in report
    assert "back arrows between packages: 1" in report
    assert any(line.startswith("  mbs_ros.headless → mbs_ros.bringup: 1 imports (mbs_ros/headless/run.py:1 ")
               for line in report), report
    # bringup: scenario.py 900 lines + runner.py 1 (its __init__.py is empty)
    assert any(line.endswith("  mbs_ros.bringup") and int(line.split()[0]) == 901 for line in report), report


if __name__ == "__main__":
    import sys

    print("\n".join(layout(Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE)))
