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
from typing import Dict, Iterable, List, Optional

__all__ = ["ResultsError", "ResultsStore", "HEAD", "DONE", "column_order", "rows_to_table", "read_rows"]

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


def read_rows(out_dir: Path) -> Dict[int, dict]:
    """The rows stored in ``out_dir`` by run: ``results.parquet``, then the journal's lines over them (a torn last
    line, from a kill in the middle of a write, is ignored)."""
    out_dir = Path(out_dir)
    rows: Dict[int, dict] = {}
    parquet = out_dir / PARQUET_FILE
    if parquet.exists():
        import pyarrow.parquet as pq
        try:
            table = pq.read_table(parquet)
        except Exception as e:  # noqa: BLE001 - pyarrow's errors have no common base
            raise ResultsError(f"{parquet}: not a readable results table ({type(e).__name__})") from None
        for row in table.to_pylist():
            rows[int(row["run"])] = row
    journal = out_dir / JOURNAL
    if journal.exists():
        lines = journal.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
                rows[int(row["run"])] = row
            except (ValueError, KeyError, TypeError):
                if number < len(lines):
                    raise ResultsError(f"{journal}:{number}: not a result row") from None
    return rows


class ResultsStore:
    """The rows of one campaign in ``out_dir``; :meth:`add` as each run finishes, :meth:`close` at the end.

    ``resume=False`` starts afresh (the previous results in ``out_dir`` are removed); ``resume=True`` keeps the
    finished rows (:data:`DONE`) and refuses a directory holding another campaign file's results.
    """

    def __init__(self, out_dir, campaign_source: Optional[Path], *, resume: bool = False):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.rows: Dict[int, dict] = {}
        copy = self.out_dir / CAMPAIGN_COPY
        text = Path(campaign_source).read_text(encoding="utf-8") if campaign_source is not None else None
        if resume:
            if text is not None and copy.exists() and copy.read_text(encoding="utf-8") != text:
                raise ResultsError(f"{copy}: the results in {self.out_dir} belong to another campaign file than "
                                   f"{campaign_source}: --resume continues the same campaign (choose another --out)")
            self.rows = {i: r for i, r in read_rows(self.out_dir).items() if r.get("status") in DONE}
        # each file replaced whole, so a kill here leaves either the old rows or the kept ones
        kept = "".join(json.dumps(_json_row(r)) + "\n" for r in sorted(self.rows.values(), key=lambda r: r["run"]))
        _write_atomic(self.out_dir / JOURNAL, kept.encode("utf-8"))
        if text is not None:
            _write_atomic(copy, text.encode("utf-8"))
        self._csv_columns: List[str] = []
        self._last_snapshot = -math.inf
        self._journal = open(self.out_dir / JOURNAL, "a", encoding="utf-8")
        self._write_csv()
        self._snapshot()

    @property
    def done(self) -> set:
        """The run indices that have a row."""
        return set(self.rows)

    def add(self, row: dict) -> None:
        """Store one finished run's row: journal and CSV at once, the Parquet snapshot when it is due."""
        row = {k: _plain(v) for k, v in row.items()}
        self.rows[int(row["run"])] = row
        self._journal.write(json.dumps(_json_row(row)) + "\n")
        self._journal.flush()
        if set(row) - set(self._csv_columns):
            self._write_csv()
        else:
            with open(self.out_dir / CSV_FILE, "a", encoding="utf-8", newline="") as f:
                csv.writer(f).writerow([_csv_text(row.get(c, _missing(c))) for c in self._csv_columns])
        if time.monotonic() - self._last_snapshot >= SNAPSHOT_SECONDS:
            self._snapshot()

    def table(self):
        """The rows so far as a ``pyarrow.Table`` sorted by run."""
        return rows_to_table(self.rows.values())

    def close(self):
        """Write ``results.parquet`` and ``results.csv`` sorted by run; returns the table."""
        if not self._journal.closed:
            self._journal.close()
        self._write_csv()
        return self._snapshot()

    def _write_csv(self):
        rows = sorted(self.rows.values(), key=lambda r: r["run"])
        self._csv_columns = column_order(rows)
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer)
        writer.writerow(self._csv_columns)
        for row in rows:
            writer.writerow([_csv_text(row.get(c, _missing(c))) for c in self._csv_columns])
        _write_atomic(self.out_dir / CSV_FILE, buffer.getvalue().encode("utf-8"))

    def _snapshot(self):
        import pyarrow.parquet as pq

        table = self.table()
        tmp = self.out_dir / (PARQUET_FILE + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.out_dir / PARQUET_FILE)
        self._last_snapshot = time.monotonic()
        return table


def _json_row(row: dict) -> dict:
    return {k: _plain(v) for k, v in row.items()}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
