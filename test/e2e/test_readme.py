"""README.md's code blocks, as a newcomer would use them.

- Every ```python block runs as written, in a fresh interpreter with the repository root as working directory.
- Every shell block (``` without a language, outside "## Layout") names only commands that exist: each ``make X``
  is a Makefile target; each ``python -m mbs_ros.X`` module answers ``--help`` (``mbs_ros.bringup`` lines run
  as written with ``--print``, which starts nothing); ``ros2 run``/``ros2 launch`` name a console script of
  setup.py / a file in launch/; every relative path a line names exists. A line whose command this file does not
  know how to check fails, so that a new kind of command gets a check.
- The same for the ``python -m mbs_ros.…`` commands and ``make`` targets named in the prose.
- The "## Layout" block names files that exist.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TIMEOUT = 300.0  # a python block on a loaded 2-core machine (measured: 3 s unloaded)
# Commands of shell blocks that are documentation of other tools (an install step, a shell builtin): not run.
EXTERNAL = {"source", "export", "rosdep", "apt-get", "sudo", "cd", "git", "du", "time", "ip", "unset"}


def blocks():
    """[(language, heading, line number, text)] of README.md's fenced code blocks."""
    out, heading, lang, start, lines = [], "", None, 0, []
    for i, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if lang is None:
            if line.startswith("#") and not line.startswith("#!"):
                heading = line.lstrip("#").strip()
            m = re.match(r"^```(\w*)\s*$", line)
            if m:
                lang, start, lines = m.group(1), i, []
        elif line.startswith("```"):
            out.append((lang, heading, start, "\n".join(lines) + "\n"))
            lang = None
        else:
            lines.append(line)
    assert lang is None, f"README.md: the block opened at line {start} is not closed"
    return out


PYTHON_BLOCKS = [(start, text) for lang, _h, start, text in blocks() if lang == "python"]
SHELL_BLOCKS = [(start, text) for lang, h, start, text in blocks() if lang in ("", "bash", "sh", "shell")
                and h != "Layout"]


def _env(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", TMPDIR=str(tmp_path))
    env.pop("PYTHONSTARTUP", None)
    return env


def _run(args, tmp_path, what):
    try:
        p = subprocess.run(args, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what}: no end within {TIMEOUT} s") from None
    assert p.returncode == 0, f"{what}: exit code {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def test_readme_has_python_and_shell_blocks():
    assert PYTHON_BLOCKS and SHELL_BLOCKS


@pytest.mark.parametrize("start, code", PYTHON_BLOCKS, ids=[f"line{s}" for s, _ in PYTHON_BLOCKS])
def test_python_block_runs_as_written(start, code, tmp_path):
    script = tmp_path / f"readme_line{start}.py"
    script.write_text(code, encoding="utf-8")
    _run([sys.executable, str(script)], tmp_path, f"README.md's python block at line {start}")


# ------------------------------------------------------------------------------------------- shell lines


def _commands(text):
    """The commands of a shell block: comments dropped, continuation lines joined, `a; b` and `a && b` split."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        out += [part for part in _split_outside_quotes(line.strip()) if part]
    return out


def _split_outside_quotes(line):
    """``a; b && c || d`` -> ``[a, b, c, d]``, leaving ``;`` inside quotes alone."""
    parts, current, quote, i = [], "", None, 0
    while i < len(line):
        c = line[i]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == ";" or line.startswith(("&&", "||"), i):
            parts.append(current.strip())
            current, i = "", i + (1 if c == ";" else 2)
            continue
        current += c
        i += 1
    return parts + [current.strip()]


def _makefile_targets():
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def _console_scripts():
    text = (ROOT / "setup.py").read_text()
    return set(re.findall(r'"(\w+) = mbs_ros[\w.]*:\w+"', text))


def _relative_paths(words):
    """The words that look like paths into this repository (config/…, launch/…, a file name with a suffix)."""
    out = []
    for w in words:
        w = w.split(":=", 1)[-1]
        if re.match(r"^(config|launch|mbs_ros|test|tools|\.ci|mbs_ros_msgs)(/|$)", w):
            out.append(w)
    return out


def check_shell_command(command, tmp_path):
    """None when the command checks out, else what is wrong."""
    words = shlex.split(command)
    while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
        words = words[1:]
    if not words:
        return None
    cmd = words[0]
    for path in _relative_paths(words[1:]):
        if not (ROOT / path).exists():
            return f"no {path} in the repository"
    if cmd == "make":
        missing = [w for w in words[1:] if "=" not in w and not w.startswith("-") and w not in _makefile_targets()]
        return f"no Makefile target {missing}" if missing else None
    if cmd in ("python", "python3"):
        if words[1:2] != ["-m"] or not words[2].startswith("mbs_ros"):
            return "a python command that is not `python -m mbs_ros.X`"
        module = words[2]
        if module == "mbs_ros.bringup" and "--print" not in words:
            args = [sys.executable, *words[1:], "--print"]  # the same line, nothing started
        else:
            args = [sys.executable, "-m", module, "--help"]
        _run(args, tmp_path, " ".join(args[1:]))
        return None
    if cmd == "ros2":
        if words[1] == "run":
            return None if words[2] == "mbs_ros" and words[3] in _console_scripts() else f"no executable {words[3]}"
        if words[1] == "launch":
            return None if words[2] == "mbs_ros" and (ROOT / "launch" / words[3]).is_file() else f"no {words[3]}"
        return None if words[1] in ("topic", "node", "param", "service", "daemon", "doctor") else "unknown ros2 verb"
    if cmd == "colcon":
        for i, w in enumerate(words):
            if w == "--base-paths":
                paths = [p for p in words[i + 1:] if not p.startswith("-")]
                missing = [p for p in paths if not (ROOT / p).exists() and "src" not in p]
                if missing:
                    return f"colcon base paths {missing} do not exist"
        return None
    if cmd == "bash":
        return None if (ROOT / words[1]).is_file() else f"no script {words[1]}"
    if cmd in EXTERNAL:
        return None
    return f"command {cmd!r}: test/e2e/test_readme.py does not know how to check it (add a check)"


@pytest.mark.parametrize("start, text", SHELL_BLOCKS, ids=[f"line{s}" for s, _ in SHELL_BLOCKS])
def test_shell_block_names_existing_commands(start, text, tmp_path):
    problems = []
    for command in _commands(text):
        problem = check_shell_command(command, tmp_path)
        if problem:
            problems.append(f"{command}: {problem}")
    assert not problems, f"README.md's block at line {start}:\n" + "\n".join(problems)


def test_modules_and_targets_named_in_the_prose(tmp_path):
    text = README.read_text(encoding="utf-8")
    modules = sorted(m for m in set(re.findall(r"python -m (mbs_ros(?:\.\w+)+)", text))
                     if not m.endswith(".X"))  # `python -m mbs_ros.nodes.X`: a placeholder
    assert "mbs_ros.nodes.dynamics_node" in modules
    for module in modules:
        _run([sys.executable, "-m", module, "--help"], tmp_path, f"python -m {module} --help")
    targets = set(re.findall(r"`make ([\w-]+)", text))
    assert targets - _makefile_targets() == set(), targets - _makefile_targets()


def test_readme_says_how_to_run_its_commands_and_that_way_works_from_a_fresh_shell(tmp_path):
    """issue 31 item 19: README never said how to run its ``python -m …`` commands (``python3 -m mbs_ros.bringup``
    failed with ``No module named 'transforms3d'``). Near the top it names both ways, each line of the README uses
    ``python -m`` (the environment's interpreter, never ``python3 -m``), and the ways it names work from a shell
    with nothing set up: no PYTHONPATH, no VIRTUAL_ENV, a minimal PATH."""
    text = README.read_text(encoding="utf-8")
    top = "\n".join(text.splitlines()[:30])
    assert "bash tools/in_env.sh python -m mbs_ros." in top and ". .venv/bin/activate" in top, top
    assert not re.findall(r"python3 -m mbs_ros", text), "python3 -m: the system's interpreter, not the environment's"
    fresh = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
             "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "0")}
    ways = ["bash tools/in_env.sh python"]
    if (ROOT / ".venv" / "bin" / "activate").is_file():  # venv mode (no ROS install)
        ways.append(". .venv/bin/activate && python")
    for way in ways:
        p = subprocess.run(["bash", "--noprofile", "--norc", "-c",
                            f"{way} -m mbs_ros.headless vehicle --duration 0.05"],
                           cwd=ROOT, env=fresh, capture_output=True, text=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 0, (way, p.stdout[-2000:], p.stderr[-2000:])
        assert "vehicle: 0.050 s simulated" in p.stdout, (way, p.stdout)


def test_the_checks_catch_what_is_missing(tmp_path):
    assert "no Makefile target" in check_shell_command("make tset", tmp_path)
    assert "no config/nothing.yaml" in check_shell_command("ros2 run mbs_ros dynamics_node --ros-args "
                                                           "--params-file config/nothing.yaml", tmp_path)
    assert "no executable" in check_shell_command("ros2 run mbs_ros dynamic_node", tmp_path)
    assert "does not know" in check_shell_command("rm -rf out", tmp_path)
    with pytest.raises(AssertionError, match="No module named"):
        check_shell_command("python -m mbs_ros.nothing_here", tmp_path)


def test_node_help_starts_nothing(tmp_path):
    """`--help` of a node prints its parameters and exits at once (it used to start the node)."""
    p = _run([sys.executable, "-m", "mbs_ros.nodes.dynamics_node", "--help"], tmp_path, "dynamics_node --help")
    assert p.stdout.startswith("usage: python -m mbs_ros.nodes.dynamics_node")
    assert "physics_rate" in p.stdout and "[INFO]" not in p.stdout + p.stderr


def test_layout_names_existing_files():
    (layout,) = [text for lang, h, _s, text in blocks() if h == "Layout"]
    missing = []
    for line in layout.splitlines():
        if line[:1].isspace():  # a description's continuation line
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        folder = ""
        for name in re.split(r"[\s,]+", names):
            if not name:
                continue
            if (ROOT / name).exists() or list(ROOT.glob(name)):
                folder = str(Path(name).parent) if "/" in name.rstrip("/") else ""
            elif folder and (ROOT / folder / name).exists():
                pass
            else:
                missing.append(name)
    assert not missing, f"README.md's layout names what is not in the repository: {missing}"


def test_sources_cite_what_a_reader_can_open():
    """No comment or docstring points at a file outside the repository: a design document that is not in it, or
    an absolute path of the machine that built it."""
    pattern = re.compile(r"DESIGN\.md|/home/[a-z]|/work/[a-z]")
    found = []
    for folder in ("mbs_ros", "test", "tools", "launch"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".sh", ".md", ".txt", ".cfg") or "__pycache__" in path.parts:
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "cite what a reader can open (README.md, a paper, a file of this repository):\n" + "\n".join(found)
