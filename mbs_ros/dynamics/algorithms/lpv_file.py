"""Reading an LPV family's MATLAB file (:meth:`mbs_ros.dynamics.algorithms.lpv.LPVFamily.load_mat`) safely: the
file's variables are listed from their headers first (name, class, dimensions; a compressed variable is
decompressed as a stream that is counted, never kept), so a small file that would decompress to gigabytes is
refused before scipy reads it; then every variable :meth:`save_mat` writes must be there with its type and a
shape consistent with the others, every number finite, ``dt`` finite and >= 0. Each refusal is one ValueError
line naming the file and the variable. MAT-file level 5 layout: MathWorks, "MAT-File Format" (2019), ch. 1.
"""
from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Dict, Tuple

import numpy as np

__all__ = ["MAX_MAT_BYTES", "VARIABLES", "scan", "read_family"]

#: The most bytes the variables of a family file may take once decompressed. A family of N grid points of an
#: n-state, m-input model holds N (n^2 + n m) doubles: 1000 points of a 36-state model are ~10 MB; a 630 kB file
#: that decompressed to ~1 GB is refused.
MAX_MAT_BYTES = 64 << 20
#: The variables save_mat writes, and the MATLAB class each must have.
VARIABLES = {"A": "double", "B": "double", "grid": "double", "q0": "double", "v0": "double", "tau0": "double",
             "state_names": "cell", "input_names": "cell", "parameter": "char", "dt": "double"}
_CLASSES = {1: "cell", 2: "struct", 3: "object", 4: "char", 5: "sparse", 6: "double", 7: "single", 8: "int8",
            9: "uint8", 10: "int16", 11: "uint16", 12: "int32", 13: "uint32", 14: "int64", 15: "uint64"}
_MI_MATRIX, _MI_COMPRESSED = 14, 15
_HEAD = 256  # decompressed bytes enough for a matrix's flags, dimensions and name


def _fail(path, where: str, reason: str):
    raise ValueError(f"{path}: {where}: {reason}" if where else f"{path}: {reason}")


def scan(path) -> Dict[str, Tuple[str, Tuple[int, ...]]]:
    """``{name: (class, dims)}`` of a level-5 MAT-file's variables from their headers, the decompressed size of
    all of them bounded by :data:`MAX_MAT_BYTES` (counted while streaming, nothing kept)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        f = open(path, "rb")
    except OSError as e:
        _fail(path, "", f"cannot be read ({e.strerror or type(e).__name__})")
    out: Dict[str, Tuple[str, Tuple[int, ...]]] = {}
    total = 0
    with f:
        header = f.read(128)
        if len(header) < 128 or header[126:128] not in (b"IM", b"MI"):
            _fail(path, "", "not a MATLAB level-5 .mat file (LPVFamily.save_mat writes one; v7.3/HDF5 and v4 "
                            "files are not read)")
        order = "<" if header[126:128] == b"IM" else ">"
        while f.tell() < size:
            tag = f.read(8)
            if len(tag) < 8:
                _fail(path, "", "truncated (a variable's header is cut off)")
            kind, nbytes = struct.unpack(order + "II", tag)
            if nbytes > size - f.tell():
                _fail(path, "", "truncated (a variable is longer than the file)")
            if kind == _MI_COMPRESSED:
                head, used = _inflate(path, f, nbytes, MAX_MAT_BYTES - total)
            elif kind == _MI_MATRIX:
                start = f.tell()
                head, used = tag + f.read(min(nbytes, _HEAD)), nbytes
                f.seek(start + nbytes + (-nbytes % 8))
            else:
                _fail(path, "", f"not a file of variables (a top-level element of type {kind})")
            total += used
            if total > MAX_MAT_BYTES:
                _fail(path, "", f"its variables take more than {MAX_MAT_BYTES >> 20} MiB once decompressed (the "
                                "bound of a family file)")
            name, cls, dims = _matrix_header(path, head, order)
            out[name] = (cls, dims)
    return out


def _inflate(path, f, nbytes: int, budget: int) -> Tuple[bytes, int]:
    """The first :data:`_HEAD` bytes of a compressed element and its decompressed size (stopping beyond
    ``budget``)."""
    d = zlib.decompressobj()
    head, used, left = b"", 0, nbytes
    try:
        while left > 0 and used <= budget:
            chunk = f.read(min(left, 1 << 16))
            if not chunk:
                break
            left -= len(chunk)
            data = chunk
            while data and used <= budget:
                piece = d.decompress(data, 1 << 20)
                if len(head) < _HEAD:
                    head += piece[:_HEAD - len(head)]
                used += len(piece)
                data = d.unconsumed_tail
    except zlib.error:
        _fail(path, "", "a compressed variable is damaged (zlib)")
    f.seek(f.tell() + left)
    return head, used


def _matrix_header(path, head: bytes, order: str) -> Tuple[str, str, Tuple[int, ...]]:
    """(name, class, dims) from a miMATRIX element's first bytes."""
    try:
        kind, _n = struct.unpack(order + "II", head[:8])
        if kind != _MI_MATRIX:
            raise ValueError
        pos = 8
        _t, _l = struct.unpack(order + "II", head[pos:pos + 8])  # array flags: miUINT32, 8 bytes
        flags = struct.unpack(order + "I", head[pos + 8:pos + 12])[0]
        cls = _CLASSES.get(flags & 0xFF, f"class {flags & 0xFF}")
        pos += 16
        _t, nd = struct.unpack(order + "II", head[pos:pos + 8])  # dimensions: miINT32
        if nd % 4 or not 8 <= nd <= 128:
            raise ValueError
        dims = struct.unpack(order + f"{nd // 4}i", head[pos + 8:pos + 8 + nd])
        pos += 8 + nd + (-nd % 8)
        first = struct.unpack(order + "I", head[pos:pos + 4])[0]
        if first >> 16:  # small data element: length in the upper half
            length = first >> 16
            name = head[pos + 4:pos + 4 + length]
        else:
            length = struct.unpack(order + "I", head[pos + 4:pos + 8])[0]
            name = head[pos + 8:pos + 8 + length]
        if len(name) != length or any(d < 0 for d in dims):
            raise ValueError
        return name.decode("ascii"), cls, tuple(int(d) for d in dims)
    except (ValueError, struct.error, UnicodeDecodeError):
        _fail(path, "", "a variable's header is not a MATLAB array's")


def read_family(path):
    """The checked fields of a family file: ``(name, grid, A, B, q0, v0, tau0, state_names, input_names, dt)``
    (``dt`` None for a continuous family); ValueError of one line naming the file and the variable."""
    from scipy.io import loadmat

    path = Path(os.fspath(path))
    listed = scan(path)
    for var, cls in VARIABLES.items():
        if var not in listed:
            _fail(path, var, f"missing (a family file holds {', '.join(VARIABLES)})")
        if listed[var][0] != cls:
            _fail(path, var, f"must be a MATLAB {cls} array, got {listed[var][0]}")
    try:
        S = loadmat(path, variable_names=list(VARIABLES))
    except Exception as e:  # noqa: BLE001 - scipy's readers raise many types for a damaged file
        _fail(path, "", f"cannot be read ({type(e).__name__})")

    def numbers(var, ndim=None):
        x = np.asarray(S[var], dtype=float)
        if not np.all(np.isfinite(x)):
            _fail(path, var, f"{int(np.sum(~np.isfinite(x)))} entries are not finite")
        return x

    def names(var, n):
        out = []
        for e in np.asarray(S[var], dtype=object).ravel():
            e = np.asarray(e)
            if e.dtype.kind != "U" or e.size != 1:
                _fail(path, var, "must be a cell array of texts")
            out.append(str(e.ravel()[0]))
        if len(out) != n:
            _fail(path, var, f"must name {n} entries, got {len(out)}")
        return tuple(out)

    grid = numbers("grid").ravel()
    N = grid.size
    if N == 0 or np.any(np.diff(grid) <= 0.0):
        _fail(path, "grid", "must be a non-empty, strictly increasing list of parameter values")
    A, B = numbers("A"), numbers("B")
    A = A[..., None] if A.ndim == 2 else A
    B = B[..., None] if B.ndim == 2 else B
    if A.ndim != 3 or A.shape[0] != A.shape[1] or A.shape[2] != N:
        _fail(path, "A", f"must be n x n x {N} (one square matrix per grid point), got {A.shape}")
    n = A.shape[0]
    if B.ndim != 3 or B.shape[0] != n or B.shape[2] != N:
        _fail(path, "B", f"must be {n} x m x {N}, got {B.shape}")
    if n % 2:
        _fail(path, "A", f"must have 2 nv rows (dq, dv), got {n}")
    nv = n // 2
    q0, v0, tau0 = numbers("q0"), numbers("v0"), numbers("tau0")
    for var, x, rows in (("q0", q0, None), ("v0", v0, nv), ("tau0", tau0, nv)):
        if x.ndim != 2 or x.shape[1] != N or (rows is not None and x.shape[0] != rows) or x.shape[0] < nv:
            want = f"{rows} x {N}" if rows is not None else f"nq x {N} (nq >= {nv})"
            _fail(path, var, f"must be {want}, got {x.shape}")
    dt = numbers("dt").ravel()
    if dt.size != 1 or dt[0] < 0.0:
        _fail(path, "dt", "must be one number >= 0 (0: a continuous family)")
    parameter = np.asarray(S["parameter"]).ravel()
    if parameter.size != 1 or not str(parameter[0]).strip():
        _fail(path, "parameter", "must be the parameter's name")
    return (str(parameter[0]), grid, np.moveaxis(A, -1, 0).copy(), np.moveaxis(B, -1, 0).copy(), q0.T.copy(),
            v0.T.copy(), tau0.T.copy(), names("state_names", n), names("input_names", B.shape[1]),
            None if dt[0] == 0.0 else float(dt[0]))
