"""Parameter files and scenario files that cannot be used give one clear line (issue 9).

- unit (:mod:`mbs_ros.cores.paramsfile`): missing, a directory, bad YAML, not UTF-8, a byte-order mark inside,
  the wrong shape (a list or text at the top, a value outside ``ros__parameters``, an empty or mixed-type list)
  -> one line ``FILE:LINE:COLUMN: reason``; UTF-8 and UTF-16 files with a byte-order mark and the shipped
  parameter files read;
- real node processes (``python -m mbs_ros.nodes.X --ros-args --params-file F``, as ``ros2 run`` starts them):
  each bad file -> exit code 2 and exactly one line on stderr naming the file, the place and the reason, no
  traceback (rclpy.init used to raise RCLError, and a file with text or a list at the top was silently
  ignored); a file with a byte-order mark is read (the node uses its value);
- the scenario loader and ``python -m mbs_ros.bringup``: a scenario or a robot's ``params`` file that is bad YAML,
  UTF-16 or has a byte-order mark inside -> one line with file:line:column and exit code 2; a scenario with a
  byte-order mark at the start loads;
- unknown parameters (a ``--params-file`` typo, a ``-p`` typo, another node's parameter) stop each node at start
  with one fatal line naming the source and the name meant, exit code 2; a section for every node (``/**``) may
  carry the other node's parameters;
- foreign files (password-file lines carrying a secret token) as a node's ``--params-file``, as a scenario and as a
  robot's ``params``: exit code 2, one line, never the token;
- YAML bombs (a billion-laughs alias bomb, 100,000 nested ``[``) as a scenario: exit code 2 and the one-line error
  with the place, in bounded memory (the child runs under a data-size limit far below what the attacks took).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from mbs_ros.bringup import ScenarioError, load_scenario
from mbs_ros.cores.paramsfile import YamlFileError, read_params_file, read_yaml

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0  # s for a node process to start and refuse its file on a loaded 2-core machine
BOM = b"\xef\xbb\xbf"

GOOD = "/**:\n  ros__parameters:\n    mass: 2.5\n    inertia: [0.02, 0.0, 0.0, 0.03, 0.0, 0.04]\n"
# name -> (file bytes, or None: no file; the place FILE:LINE:COLUMN must name, or "" for none; reason fragment)
BAD = {
    "missing": (None, "", "no such file"),
    "bad_yaml": (b"/**:\n  ros__parameters:\n    mass: [1.0,\n      2.0\n", ":5:1", "not valid YAML"),
    "tab_indent": (b"/**:\n  ros__parameters:\n\tmass: 2.0\n", ":3:1", "not valid YAML"),
    "top_list": (b"- mass: 2.0\n", ":1:1", "not a ROS parameter file: a list at the top"),
    "top_text": (b"mass 2.0\n", ":1:1", "not a ROS parameter file: text at the top"),
    "no_ros_parameters": (b"/**:\n  mass: 2.0\n", ":2:3", "'mass' is a value outside ros__parameters"),
    "ros_parameters_text": (b"/**:\n  ros__parameters: 5\n", ":2:20", "must be a mapping"),
    "mixed_list": (b"/**:\n  ros__parameters:\n    com: [0, 0.5, 0.0]\n", ":3:14",
                   "com: a list mixing integer and double values"),
    "empty_list": (b"/**:\n  ros__parameters:\n    com: []\n", ":3:10", "com: an empty list"),
    "not_utf8": (b"/**:\n  ros__parameters:\n    world_frame: w\xe9rld\n", ":3:19", "not UTF-8 text"),
    "bom_inside": (GOOD.encode() + BOM + GOOD.encode(), ":5:1", "byte-order mark (U+FEFF) inside"),
}


def write(tmp_path, name, data):
    path = tmp_path / f"{name}.yaml"
    if data is not None:
        path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------------------ unit


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_params_file_is_one_line_with_the_place(tmp_path, case):
    data, place, reason = BAD[case]
    path = write(tmp_path, case, data)
    with pytest.raises(YamlFileError) as e:
        read_params_file(path)
    text = str(e.value)
    assert text.startswith(f"{path}{place}: "), text
    assert reason in text and "\n" not in text, text


def test_directory_and_good_files(tmp_path):
    with pytest.raises(YamlFileError, match="is a directory"):
        read_params_file(tmp_path)
    expected = {"/**": {"mass": 2.5, "inertia": [0.02, 0.0, 0.0, 0.03, 0.0, 0.04]}}
    for name, data in (("plain", GOOD.encode()), ("bom8", BOM + GOOD.encode()), ("bom16", GOOD.encode("utf-16")),
                       ("comment_first_bom", BOM + b"# parameters\n" + GOOD.encode())):
        assert read_params_file(write(tmp_path, name, data)) == expected, name
    assert read_params_file(write(tmp_path, "empty", b"")) == {}
    nested = read_params_file(write(tmp_path, "nested", b"arm:\n  dynamics_node:\n    ros__parameters:\n"
                                                        b"      a: {b: 1}\n"))
    assert nested == {"arm/dynamics_node": {"a": {"b": 1}}}
    for path in sorted((ROOT / "config").glob("*.yaml")):  # every shipped parameter file
        assert read_params_file(path), path


def test_lists_launch_ros_writes_as_tuples_are_lists(tmp_path):
    """launch_ros writes a Node's parameter dict with yaml.dump after turning its lists into tuples; rcl reads a
    ``!!python/tuple`` sequence as a list, and so must the check before rclpy.init (it refused every launch)."""
    import yaml

    text = yaml.dump({"/**": {"ros__parameters": {"inertia": (0.02, 0.0, 0.03), "names": ("a", "b"), "mass": 2.5,
                                                  "nested": {"gains": (1.0, 2.0)}}}}, default_flow_style=False)
    assert "!!python/tuple" in text
    assert read_params_file(write(tmp_path, "launch_ros", text.encode())) == {
        "/**": {"inertia": [0.02, 0.0, 0.03], "names": ["a", "b"], "mass": 2.5, "nested": {"gains": [1.0, 2.0]}}}
    mixed = yaml.dump({"/**": {"ros__parameters": {"gains": (1, 2.0)}}})
    with pytest.raises(YamlFileError, match="mixing integer and double"):
        read_params_file(write(tmp_path, "mixed", mixed.encode()))


# ------------------------------------------------------------------------------ node processes

NODE_CASES = [("controller_node", c) for c in ("missing", "bad_yaml", "top_list", "top_text", "no_ros_parameters",
                                               "mixed_list", "not_utf8")]
NODE_CASES += [("dynamics_node", "bad_yaml"), ("dynamics_node", "missing"), ("reference_node", "top_list")]


def test_nodes_refuse_bad_params_files_in_one_line(tmp_path):
    """Every case at once (each process exits right after reading its arguments)."""
    procs = []
    for node, case in NODE_CASES:
        data, place, reason = BAD[case]
        path = write(tmp_path, f"{node}_{case}", data)
        cmd = [sys.executable, "-m", f"mbs_ros.nodes.{node}", "--ros-args", "-r", f"__ns:=/pf_{case}",
               "--params-file", str(path)]
        procs.append((node, case, path, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                         text=True)))
    try:
        for node, case, path, p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            _data, place, reason = BAD[case]
            lines = [line for line in (out + err).splitlines() if line.strip()]
            assert p.returncode == 2, (node, case, p.returncode, out + err)
            assert len(lines) == 1, (node, case, out + err)
            assert lines[0].startswith(f"[FATAL] [{node}]: --params-file {path}{place}: "), lines[0]
            assert reason in lines[0], lines[0]
    finally:
        for *_rest, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("encoding", ["utf-8-bom", "utf-16"])
def test_node_reads_a_params_file_with_a_byte_order_mark(tmp_path, encoding):
    from mbs_ros.process import NodeProcess

    data = BOM + GOOD.encode() if encoding == "utf-8-bom" else GOOD.encode("utf-16")
    path = write(tmp_path, "bom", data)
    with NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace=f"bom_{encoding.replace('-', '_')}",
                     params_file=path, parameters={"physics_rate": 100.0, "publish_rate": 10.0},
                     log_file=tmp_path / "node.log") as p:
        assert p.wait_for_log("mass 2.5 kg", timeout=TIMEOUT), p.log_text()
        assert p.running
    assert p.returncode == 0, p.log_text()


# ------------------------------------------------------------------------------ scenario files

SCENARIO = "robots:\n  - namespace: asv\n    model: config/robots/asv_2link.yaml\n"


@pytest.mark.parametrize("data, place, reason", [
    (SCENARIO.replace("namespace: asv", "namespace: [asv").encode(), ":3:10", "not valid YAML"),
    (SCENARIO.encode("utf-16"), None, None),  # a UTF-16 scenario loads like any other
    (b"robots:\n  - namespace: asv\n    model: config/robots/asv_2link.yaml\n    \xff\n", ":4:5", "not UTF-8"),
    (SCENARIO.encode() + BOM + b"duration: 1.0\n", ":4:1", "byte-order mark (U+FEFF) inside"),
], ids=["syntax", "utf16", "not_utf8", "bom_inside"])
def test_scenario_file_errors_are_one_line_with_the_place(tmp_path, capsys, data, place, reason):
    from mbs_ros.bringup import runner

    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    if reason is None:
        assert load_scenario(path).robots[0].name == "asv"
        return
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert str(e.value).startswith(f"{path}{place}: ") and reason in str(e.value), str(e.value)
    assert runner.main([str(path), "--print"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bringup: scenario error: {path}{place}: "), err


def test_scenario_with_a_byte_order_mark_loads(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(BOM + SCENARIO.encode())
    assert load_scenario(path).robots[0].name == "asv"
    assert read_yaml(path) == {"robots": [{"namespace": "asv", "model": "config/robots/asv_2link.yaml"}]}


def test_runner_names_a_bad_robot_params_file(tmp_path):
    """Through ``python -m mbs_ros.bringup`` (a process: no traceback can hide): exit 2, one line."""
    params = tmp_path / "p.yaml"
    params.write_text("/**/dynamics_node:\n  ros__parameters:\n    model_file: config/robots/asv_2link.yaml\n"
                      "    integrator: [rk4\n")
    path = tmp_path / "s.yaml"
    path.write_text("robots:\n  - {namespace: asv, params: p.yaml}\n")
    out = subprocess.run([sys.executable, "-m", "mbs_ros.bringup", str(path)], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"bringup: scenario error: {path}: robots[0].params: parameter file {params}:5:1: "
                               "not valid YAML"), lines[0]


# ------------------------------------------------------------------------------ unknown parameters


def _one_line_exit_2(cmd, timeout=TIMEOUT):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2, (cmd, out.returncode, out.stdout + out.stderr)
    assert len(lines) == 1 and "Traceback" not in out.stderr, (cmd, out.stdout + out.stderr)
    return lines[0]


def test_nodes_refuse_unknown_parameters_with_the_name_meant(tmp_path):
    """``physics_rat`` in a parameter file used to be a warning and the node ran at the 1000 Hz default."""
    typo = tmp_path / "typo.yaml"
    typo.write_text("/**/dynamics_node:\n  ros__parameters:\n    physics_rat: 10.0\n")
    cases = [  # node, arguments after --ros-args, the fatal line's end
        ("dynamics_node", ["--params-file", str(typo)],
         f"--params-file {typo}: physics_rat: unknown dynamics_node parameter (did you mean 'physics_rate'?)"),
        ("dynamics_node", ["-p", "physic_rate:=10.0"],
         "-p: physic_rate: unknown dynamics_node parameter (did you mean 'physics_rate'?)"),
        ("dynamics_node", ["-p", "kp:=1.0"], "-p: kp: not a dynamics_node parameter: a controller node's"),
        ("controller_node", ["-p", "kpp:=2.0"], "-p: kpp: unknown controller_node parameter (did you mean 'kp'?)"),
        ("reference_node", ["-p", "base_time:=[1.0]"],
         "-p: base_time: unknown reference_node parameter (did you mean 'base_times'?)"),
    ]
    procs = [(node, end, subprocess.Popen([sys.executable, "-m", f"mbs_ros.nodes.{node}", "--ros-args", "-r",
                                           f"__ns:=/unknown{i}"] + args, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
             for i, (node, args, end) in enumerate(cases)]
    try:
        for node, end, p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            lines = [line for line in (out + err).splitlines() if line.strip()]
            assert p.returncode == 2, (node, end, p.returncode, out + err)
            assert len(lines) == 1 and lines[0].startswith("[FATAL] "), (node, out + err)
            assert f".{node}]: invalid parameters: {end}" in lines[0], lines[0]  # [unknownN.node]
    finally:
        for *_rest, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_number_out_of_range_gets_the_tables_range_in_one_message():
    """issue 31 item 24: ``mass:=-1.0`` gave rclpy's "out of range Min: 0.0, Max: 1000000000.0" while ``mass:=0.0``
    gave "mass must be >= 1e-06" and ``--help`` said [0, 1e+09]; >= 1e-06. Now every value outside the table's
    range (which is the descriptor's) gets the settings' one message with the one range, exit code 2."""
    cases = [  # node, -p argument, the fatal line's end
        ("dynamics_node", "mass:=-1.0", "invalid parameters: mass must be >= 1e-06, got -1"),
        ("dynamics_node", "mass:=0.0", "invalid parameters: mass must be >= 1e-06, got 0"),
        ("dynamics_node", "mass:=2.0e9", "invalid parameters: mass must be <= 1e+09, got 2e+09"),
        ("dynamics_node", "publish_rate:=0.01", "invalid parameters: publish_rate must be >= 0.1, got 0.01"),
        ("controller_node", "mass:=-1.0", "invalid parameters: mass must be >= 1e-06, got -1"),
    ]
    procs = [(node, end, subprocess.Popen([sys.executable, "-m", f"mbs_ros.nodes.{node}", "--ros-args", "-r",
                                           f"__ns:=/range{i}", "-p", arg], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
             for i, (node, arg, end) in enumerate(cases)]
    try:
        for node, end, p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            lines = [line for line in (out + err).splitlines() if line.strip()]
            assert p.returncode == 2, (node, end, p.returncode, out + err)
            assert len(lines) == 1 and lines[0].startswith("[FATAL] "), (node, out + err)
            assert lines[0].endswith(f".{node}]: {end}"), lines[0]
            assert "out of range" not in lines[0] and "Min:" not in lines[0], lines[0]
    finally:
        for *_rest, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_section_for_every_node_may_carry_the_other_nodes_parameters(tmp_path):
    from mbs_ros.process import NodeProcess

    path = tmp_path / "both.yaml"
    path.write_text("/**:\n  ros__parameters:\n    physics_rate: 100.0\n    publish_rate: 10.0\n    kp: 5.0\n")
    with NodeProcess("mbs_ros.nodes.dynamics_node", name="dynamics_node", namespace="every_node", params_file=path,
                     log_file=tmp_path / "node.log") as p:
        assert p.wait_for_log("rk4 at 100 Hz", timeout=TIMEOUT), p.log_text()
        assert p.running
    assert p.returncode == 0, p.log_text()


# ------------------------------------------------------------------------------ foreign files

SECRET = "s3cr3tT0ken"
FOREIGN = {"passwd": f"{SECRET}:x:0:0:root:root:bash\nu:x:1000:1000:{SECRET}:home:bash\n",
           "shadow": f"root:$6$salt${SECRET}:20228:0:99999:7:::\n"}


def test_foreign_files_are_refused_without_their_content(tmp_path):
    """What ``--params-file /etc/shadow`` did: its FATAL line quoted a line of the file."""
    cmds = []
    for name, text in FOREIGN.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        scenario = tmp_path / f"scenario_{name}.yaml"
        scenario.write_text(f"robots:\n  - {{namespace: asv, params: {path}}}\n")
        cmds += [[sys.executable, "-m", "mbs_ros.nodes.dynamics_node", "--ros-args", "--params-file", str(path)],
                 [sys.executable, "-m", "mbs_ros.bringup", str(scenario), "--print"],
                 [sys.executable, "-m", "mbs_ros.bringup", str(path), "--print"]]
    for cmd in cmds:
        line = _one_line_exit_2(cmd)
        assert SECRET not in line, (cmd, line)
        assert f"{tmp_path}/" in line, (cmd, line)  # the file is named


# ------------------------------------------------------------------------------ YAML bombs

DATA_LIMIT = 1 << 30  # bytes of heap for the bringup process: ~0.1 GB used; the alias bomb took 5.9 GB


def _limited():
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))


def _bomb(levels: int = 9) -> str:
    lines = ["description:", "  a0: &a0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\nrobots:\n  - {namespace: asv, model: config/robots/asv_2link.yaml}\n"


@pytest.mark.parametrize("attack", ["alias_bomb", "deep_nesting"])
def test_yaml_bombs_are_refused_in_one_line_and_bounded_memory(tmp_path, attack):
    path = tmp_path / f"{attack}.yaml"
    path.write_text(_bomb() if attack == "alias_bomb" else "description: " + "[" * 100_000 + "\n")
    p = subprocess.Popen([sys.executable, "-m", "mbs_ros.bringup", str(path), "--print"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_limited)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, (out + err)[-2000:])
    place, reason = {"alias_bomb": (":7:", "aliases expanded"), "deep_nesting": (":1:", "nested deeper than")}[attack]
    assert lines[0].startswith(f"bringup: scenario error: {path}{place}") and reason in lines[0], lines[0]
