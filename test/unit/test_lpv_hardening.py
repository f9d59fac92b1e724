"""Issue 31 item 16: LPVFamily.load_mat on hostile files (NaN A, mismatched shapes, dt inf or -1, text arrays, a
missing variable, a small file that decompresses to ~1 GB) and linearize at v = 1e300, tau = 1e308 and a zero
quaternion. The files are written here with scipy.io.savemat from hand-made arrays (not by save_mat); each
refusal is one ValueError line naming the file and the variable. The decompression-bomb test measures a fresh
interpreter's peak RSS (marked e2e: it starts a process)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from mbs_ros.dynamics import Model
from mbs_ros.dynamics.algorithms.linear import linearize
from mbs_ros.dynamics.algorithms.lpv import LPVFamily

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
ARM = ROBOTS / "arm_2link_planar.urdf"
N, NV, M = 3, 2, 2  # grid points, velocities (4 states), inputs


def _valid() -> dict:
    rng = np.random.default_rng(3)
    return {"A": rng.normal(size=(2 * NV, 2 * NV, N)), "B": rng.normal(size=(2 * NV, M, N)),
            "grid": np.array([[0.5, 1.0, 2.0]]), "q0": np.zeros((NV, N)), "v0": np.zeros((NV, N)),
            "tau0": np.ones((NV, N)), "state_names": np.array(["dq_a", "dq_b", "dv_a", "dv_b"], dtype=object),
            "input_names": np.array(["a", "b"], dtype=object), "parameter": "payload", "dt": 0.0}


def _file(tmp_path, change=None, drop=None, name="f.mat"):
    d = _valid()
    d.update(change or {})
    d.pop(drop, None)
    path = tmp_path / name
    savemat(path, d, do_compression=True)
    return path


def test_a_valid_hand_made_file_loads_into_its_fields(tmp_path):
    d = _valid()
    fam = LPVFamily.load_mat(_file(tmp_path))
    assert fam.name == "payload" and fam.dt is None and fam.grid.tolist() == [0.5, 1.0, 2.0]
    np.testing.assert_array_equal(fam.A[1], d["A"][:, :, 1])
    np.testing.assert_array_equal(fam.B[2], d["B"][:, :, 2])
    assert fam.state_names == ("dq_a", "dq_b", "dv_a", "dv_b") and fam.input_names == ("a", "b")
    assert LPVFamily.load_mat(_file(tmp_path, {"dt": 0.01})).dt == 0.01


A_NAN = _valid()["A"].copy()
A_NAN[1, 2, 0] = np.nan


@pytest.mark.parametrize("change,drop,var,words", [
    ({"A": A_NAN}, None, "A", "1 entries are not finite"),
    ({"B": np.zeros((3, M, N))}, None, "B", "must be 4 x m x 3"),
    ({"A": np.zeros((4, 3, N))}, None, "A", "must be n x n x 3"),
    ({"q0": np.zeros((NV, N + 1))}, None, "q0", "must be nq x 3"),
    ({"dt": np.inf}, None, "dt", "not finite"),
    ({"dt": -1.0}, None, "dt", "must be one number >= 0"),
    ({"A": "not a matrix"}, None, "A", "must be a MATLAB double array, got char"),
    ({"grid": np.array([[2.0, 1.0, 3.0]])}, None, "grid", "strictly increasing"),
    ({"state_names": np.array(["a", "b"], dtype=object)}, None, "state_names", "must name 4 entries, got 2"),
    (None, "B", "B", "missing"),
    (None, "dt", "dt", "missing"),
])
def test_a_hostile_family_file_is_one_line_naming_the_file_and_variable(tmp_path, change, drop, var, words):
    path = _file(tmp_path, change, drop)
    with pytest.raises(ValueError) as e:
        LPVFamily.load_mat(path)
    text = str(e.value)
    assert text.startswith(f"{path}: {var}: ") and words in text and "\n" not in text, text


def test_not_a_mat_file_is_one_line(tmp_path):
    for data in (b"", b"hello" * 100, b"\x00" * 128):
        path = tmp_path / "x.mat"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=r"x.mat: not a MATLAB level-5 .mat file"):
            LPVFamily.load_mat(path)
    with pytest.raises(ValueError, match=r"nowhere.mat: cannot be read"):
        LPVFamily.load_mat(tmp_path / "nowhere.mat")


BOMB = """
import sys
from mbs_ros.dynamics.algorithms.lpv import LPVFamily
try:
    LPVFamily.load_mat(sys.argv[1])
except ValueError as e:
    print("refused:", e)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]  # this process image's peak RSS
print("maxrss_mib", int(hwm.split()[1]) / 1024)
"""


@pytest.mark.e2e
def test_a_small_file_that_decompresses_to_a_gigabyte_is_refused_before_it_is_in_memory(tmp_path):
    """The probe's 630 kB file reached ~1 GB of RSS: 800 MB of zeros compress to under 1 MB. The loader counts
    the decompressed bytes as a stream and refuses beyond 64 MiB; the child process's peak RSS stays far below
    the variable's size (measured in a fresh interpreter, so this test's own memory does not count)."""
    path = tmp_path / "bomb.mat"
    d = _valid()
    d["A"] = np.zeros((1000, 1000, 100))  # 800 MB
    savemat(path, d, do_compression=True)
    assert path.stat().st_size < 2 << 20
    out = subprocess.run([sys.executable, "-c", BOMB, str(path)], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[2])
    assert "refused:" in out.stdout and "more than 64 MiB once decompressed" in out.stdout, out.stdout + out.stderr
    rss = float(out.stdout.split("maxrss_mib")[1])
    assert rss < 400, f"peak RSS {rss:.0f} MiB while refusing an 800 MB variable"


# --- linearize ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def floating():
    return Model.from_urdf(str(ARM), base="se3")


def test_linearize_refuses_a_zero_quaternion(floating):
    q = floating.neutral().copy()
    q[3:7] = 0.0
    with pytest.raises(ValueError, match=r"quaternion \(q\[3:7\]\) must have unit norm, got 0"):
        linearize(floating, q, np.zeros(floating.nv), np.zeros(floating.nv))


@pytest.mark.parametrize("what", ["v", "tau"])
def test_linearize_refuses_an_operating_point_whose_model_is_not_finite(floating, what):
    v, tau = np.zeros(floating.nv), np.zeros(floating.nv)
    if what == "v":
        v[:] = 1e300
    else:
        tau[:] = 1e308
    with pytest.raises(ValueError, match="the linear model is not finite at this operating point"):
        linearize(floating, floating.neutral(), v, tau)
    with pytest.raises(ValueError, match="the linear model is not finite"):
        linearize(floating, floating.neutral(), v, tau, dt=0.01)
    lm = linearize(floating, floating.neutral(), np.zeros(floating.nv), np.zeros(floating.nv))
    assert np.all(np.isfinite(lm.A)) and np.all(np.isfinite(lm.B))
