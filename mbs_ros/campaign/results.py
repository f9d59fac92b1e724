"""A campaign's result table on disk, written as runs finish so that a killed campaign resumes where it stopped.

One row per run (CONTRACT: ``run``, ``status``, ``reason``, ``wall_s``, ``param.<path>``, ``metric.<name>``). In the
output directory:

- ``rows.jsonl``: the journal, one JSON line per finished row, appended and flushed as each run finishes (JSON keeps
  ints, floats, NaN, texts and booleans apart, which CSV does not); what ``resume`` reads, with ``results.parquet``.
- ``results.csv``: appended per row, header first (rewritten whole when a row brings a new column), rewritten sorted
  by run at the end.
- ``results.parquet`` (pyarrow): rewritten atomically (temporary file, then rename) at most every
  :data:`SNAPSHOT_SECONDS` while runs finish, and sorted at the end.
- ``campaign.yaml``: a copy of the campaign file the rows belong to.

Column order is stable: ``run status reason wall_s``, then the ``param.*`` columns, then the ``metric.*`` ones,
each group in order of first appearance with the rows taken by run, so the same rows give the same table whatever
order they finished in. On resume, rows that passed or failed are kept and "error" rows are dropped, so their runs
are tried again (an error is a worker that died or an exception, not a verdict on the controller).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

__all__ = ["ResultsError", "ResultsStore", "HEAD", "DONE", "column_order", "rows_to_table", "read_rows",
           "row_problem"]

HEAD = ("run", "status", "reason", "wall_s")
#: The statuses a resumed campaign keeps; an "error" row's run is tried again.
DONE = ("pass", "fail")
SNAPSHOT_SECONDS = 2.0
JOURNAL, CSV_FILE, PARQUET_FILE, CAMPAIGN_COPY = "rows.jsonl", "results.csv", "results.parquet", "campaign.yaml"


class ResultsError(ValueError):
    """An output directory that cannot hold this campaign's results (another campaign's, unreadable)."""


def column_order(rows: Iterable[dict]) -> List[str]:
    """Every column of ``rows`` in the stable order (module docstring); ``rows`` taken sorted by run."""
    seen: Dict[str, None] = dict.fromkeys(HEAD)
    for row in sorted(rows, key=lambda r: r["run"]):
        for key in row:
            seen.setdefault(key, None)
    keys = list(seen)
    group = {"param": 1, "metric": 2}
    return sorted(keys, key=lambda k: (0 if k in HEAD else group.get(k.partition(".")[0], 3), keys.index(k)))


def _missing(column: str):
    return math.nan if column.startswith("metric.") or column == "wall_s" else None


def rows_to_table(rows: Iterable[dict]):
    """The rows (any order) as a ``pyarrow.Table`` sorted by run, columns in :func:`column_order`. A column whose
    values pyarrow cannot hold in one type (a choice of numbers and texts) is stored as their JSON texts."""
    import pyarrow as pa

    rows = sorted(rows, key=lambda r: r["run"])
    columns = column_order(rows)
    arrays = []
    for c in columns:
        values = [_plain(r.get(c, _missing(c))) for r in rows]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays.append(pa.array([None if v is None else json.dumps(v) for v in values], pa.string()))
    if not columns or not rows:
        return pa.table({c: pa.array([], pa.null()) for c in columns or HEAD})
    return pa.table(dict(zip(columns, arrays)))


def _plain(value):
    """numpy scalars as Python ones (JSON, pyarrow and csv take those)."""
    item = getattr(value, "item", None)
    return item() if item is not None and not isinstance(value, (list, tuple, dict, str)) else value


def _csv_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


RESTART = "run without --resume to start afresh, or give another --out"
STATUSES = ("pass", "fail", "error")
#: The bound of a run index on disk (mbs_ros.campaign.spec.MAX_RUNS; kept here: results are below spec's layer).
MAX_RUN_INDEX = 100_000


def row_problem(row) -> Optional[str]:
    """Why ``row`` (read back from disk) is not a result row of any campaign, or None: a mapping with ``run`` a
    whole number in [0, MAX_RUN_INDEX), ``status`` one of pass, fail, error, ``reason`` a text (empty exactly when
    the run passed)."""
    if not isinstance(row, dict):
        return "not a mapping"
    run = row.get("run")
    if isinstance(run, bool) or not isinstance(run, int):
        return f"run must be a whole number, got {_shown(run)}"
    if not 0 <= run < MAX_RUN_INDEX:
        return f"run {run} is outside [0, {MAX_RUN_INDEX})"
    status, reason = row.get("status"), row.get("reason")
    if status not in STATUSES:
        return f"run {run}: status must be one of {', '.join(STATUSES)}, got {_shown(status)}"
    if not isinstance(reason, str):
        return f"run {run}: reason must be text, got {_shown(reason)}"
    if (status == "pass") != (reason == ""):
        return f"run {run}: status {status} with {'a' if reason else 'no'} reason"
    return None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_rows(out_dir: Path, check: Optional[Callable[[dict], Optional[str]]] = None) -> Dict[int, dict]:
    """The rows stored in ``out_dir`` by run: ``results.parquet``, then the journal's lines over them (a torn last
    line, from a kill in the middle of a write, is ignored). Every row must pass :func:`row_problem` and ``check``
    (the campaign's own: its metrics present, a pass consistent with the criteria); anything else is a
    :class:`ResultsError` of one line naming the file (and line) and saying what to do: nothing damaged or forged
    counts as a finished run."""
    out_dir = Path(out_dir)
    rows: Dict[int, dict] = {}

    def checked(row, where: str) -> dict:
        problem = row_problem(row) or (check(row) if check is not None else None)
        if problem is not None:
            raise ResultsError(f"{where}: not a result row of this campaign ({problem}); {RESTART}")
        return row

    parquet = out_dir / PARQUET_FILE
    if parquet.exists():
        import pyarrow.parquet as pq
        try:
            table = pq.read_table(parquet)
            if "run" not in table.column_names:
                raise ResultsError(f"{parquet}: a results table without a 'run' column; {RESTART}")
            found = table.to_pylist()
        except ResultsError:
            raise
        except Exception as e:  # noqa: BLE001 - pyarrow's errors have no common base
            raise ResultsError(f"{parquet}: not a readable results table ({type(e).__name__}); {RESTART}") from None
        for number, row in enumerate(found):
            row = checked(row, f"{parquet}: row {number}")
            rows[row["run"]] = row
    journal = out_dir / JOURNAL
    if journal.exists():
        try:
            with open(journal, "rb") as f:
                line, number = f.readline(), 1
                while line:
                    following = f.readline()
                    try:
                        row = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
                    except (ValueError, RecursionError):  # JSON, UTF-8 (UnicodeDecodeError is a ValueError), Infinity/NaN
                        if following or line.endswith(b"\n"):
                            raise ResultsError(f"{journal}:{number}: not a result row (damaged: not JSON text of "
                                               f"one row); {RESTART}") from None
                        break  # the torn last line of a kill in the middle of a write
                    row = checked(row, f"{journal}:{number}")
                    rows[row["run"]] = row
                    line, number = following, number + 1
        except OSError as e:
            raise ResultsError(f"{journal}: cannot be read ({e.strerror or type(e).__name__}); {RESTART}") from None
    return rows


def _no_constant(name: str):
    if name == "NaN":  # a metric not computed, as json.dumps writes it
        return math.nan
    raise ValueError(f"{name} is not a value of a result row")


class ResultsStore:
    """The rows of one campaign in ``out_dir``; :meth:`add` as each run finishes, :meth:`close` at the end.

    ``resume=False`` starts afresh (the previous results in ``out_dir`` are removed); ``resume=True`` keeps the
    finished rows (:data:`DONE`) that pass ``check`` (:func:`read_rows`) and refuses a directory holding another
    campaign file's results. A write that fails (a full disk) is a :class:`ResultsError` saying so; the rows
    written before stay (each file is appended to, or replaced whole), and a resumed campaign continues from them.
    """

    def __init__(self, out_dir, campaign_source: Optional[Path], *, resume: bool = False,
                 check: Optional[Callable[[dict], Optional[str]]] = None):
        self.out_dir = Path(out_dir)
        self.rows: Dict[int, dict] = {}
        self._broken: Optional[str] = None
        copy = self.out_dir / CAMPAIGN_COPY
        with _writing(self.out_dir, "the output directory"):
            self.out_dir.mkdir(parents=True, exist_ok=True)
        text = Path(campaign_source).read_text(encoding="utf-8") if campaign_source is not None else None
        if resume:
            if text is not None and copy.exists() and _read_copy(copy) != text:
                raise ResultsError(f"{copy}: the results in {self.out_dir} belong to another campaign file than "
                                   f"{campaign_source}: --resume continues the same campaign (choose another --out)")
            self.rows = {i: r for i, r in read_rows(self.out_dir, check).items() if r.get("status") in DONE}
        # each file replaced whole, so a kill here leaves either the old rows or the kept ones
        kept = "".join(json.dumps(_json_row(r)) + "\n" for r in sorted(self.rows.values(), key=lambda r: r["run"]))
        _write_atomic(self.out_dir / JOURNAL, kept.encode("utf-8"))
        if text is not None:
            _write_atomic(copy, text.encode("utf-8"))
        self._csv_columns: List[str] = []
        self._last_snapshot = -math.inf
        with _writing(self.out_dir / JOURNAL, "the journal"):
            self._journal = open(self.out_dir / JOURNAL, "a", encoding="utf-8")
        self._write_csv()
        self._snapshot()

    @property
    def done(self) -> set:
        """The run indices that have a row."""
        return set(self.rows)

    def add(self, row: dict) -> None:
        """Store one finished run's row: journal and CSV at once, the Parquet snapshot when it is due."""
        if self._broken is not None:
            raise ResultsError(self._broken)
        row = {k: _plain(v) for k, v in row.items()}
        try:
            with _writing(self.out_dir / JOURNAL, "a row", kept=len(self.rows)):
                self._journal.write(json.dumps(_json_row(row)) + "\n")
                self._journal.flush()
            self.rows[int(row["run"])] = row
            if set(row) - set(self._csv_columns):
                self._write_csv()
            else:
                with _writing(self.out_dir / CSV_FILE, "a row", kept=len(self.rows)):
                    with open(self.out_dir / CSV_FILE, "a", encoding="utf-8", newline="") as f:
                        csv.writer(f).writerow([_csv_text(row.get(c, _missing(c))) for c in self._csv_columns])
            if time.monotonic() - self._last_snapshot >= SNAPSHOT_SECONDS:
                self._snapshot()
        except ResultsError as e:
            self._broken = str(e)
            raise

    def table(self):
        """The rows so far as a ``pyarrow.Table`` sorted by run."""
        return rows_to_table(self.rows.values())

    def close(self):
        """Write ``results.parquet`` and ``results.csv`` sorted by run; returns the table. After a failed write
        the files are left as they are (the journal holds every row that was written) and the table of the rows
        in memory is returned."""
        if not self._journal.closed:
            try:
                self._journal.close()
            except OSError:  # the flush of a line a full disk refused: the line is not in the journal
                pass
        if self._broken is not None:
            return self.table()
        try:
            self._write_csv()
            return self._snapshot()
        except ResultsError as e:
            self._broken = str(e)
            raise

    def _write_csv(self):
        rows = sorted(self.rows.values(), key=lambda r: r["run"])
        self._csv_columns = column_order(rows)
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer)
        writer.writerow(self._csv_columns)
        for row in rows:
            writer.writerow([_csv_text(row.get(c, _missing(c))) for c in self._csv_columns])
        _write_atomic(self.out_dir / CSV_FILE, buffer.getvalue().encode("utf-8"), kept=len(self.rows))

    def _snapshot(self):
        import pyarrow.parquet as pq

        table = self.table()
        tmp = self.out_dir / (PARQUET_FILE + ".tmp")
        with _writing(self.out_dir / PARQUET_FILE, "the results table", tmp, kept=len(self.rows)):
            pq.write_table(table, tmp)
            os.replace(tmp, self.out_dir / PARQUET_FILE)
        self._last_snapshot = time.monotonic()
        return table


def _json_row(row: dict) -> dict:
    return {k: _plain(v) for k, v in row.items()}


def _read_copy(copy: Path) -> Optional[str]:
    try:
        return copy.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:
        raise ResultsError(f"{copy}: cannot be read ({getattr(e, 'strerror', None) or type(e).__name__}); "
                           f"{RESTART}") from None


class _writing:
    """Turns an OSError of a write (ENOSPC, EDQUOT, a directory in the way) into a ResultsError of one line naming
    the file; removes the temporary file ``tmp`` it leaves. ``kept``: the rows on disk so far."""

    def __init__(self, path: Path, what: str, tmp: Optional[Path] = None, kept: Optional[int] = None):
        self.path, self.what, self.tmp, self.kept = path, what, tmp, kept

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or not isinstance(error, OSError):
            return False
        if self.tmp is not None:
            try:
                self.tmp.unlink()
            except OSError:
                pass
        why = error.strerror or type(error).__name__
        kept = ("" if self.kept is None else
                f"; the {self.kept} rows before are kept: free space and run again with --resume")
        raise ResultsError(f"{self.path}: cannot write {self.what} ({why}){kept}") from None


def _write_atomic(path: Path, data: bytes, kept: Optional[int] = None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with _writing(path, path.name, tmp, kept):
        tmp.write_bytes(data)
        os.replace(tmp, path)
