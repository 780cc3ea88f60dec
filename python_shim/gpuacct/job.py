"""The job view's tables as a Parquet dataset, and the job-view queries on DuckDB or Spark.

``gpuacct job --export DIR`` (the C++ tool: the merge of every rank stays there, and needs no
Python) writes two CSV tables, ``job_steps.csv`` and ``job_collectives.csv``
(docs/job_view.md, *Formats*).  This module

* converts them into a Parquet dataset hive-partitioned by ``job``/``host``/``rank``
  (``export_parquet``), batch by batch: a table of 51 M collective rows never sits in memory;
* runs the C++ export and converts in one call (``export_job``);
* runs the named queries of ``job_queries.sql`` (``query``) with DuckDB, embedded, the default,
  or Spark (local mode, or a session on a cluster): one SQL text, identical answers.

Dataset layout (``OUT``)::

    OUT/_gpuacct_job.json                     manifest: schema, row counts, columns
    OUT/steps/job=J/host=H/rank=R/part-0-0.parquet      (part-<chunk>-<i>: one file per
    OUT/collectives/job=J/host=H/rank=R/part-0-0.parquet  512 Ki rows of the CSV read)

Column types: ``job``, ``host`` and the name columns (comm, collective, datatype, algo, proto,
source) are strings, ``flops``, ``tokens``, ``samples``, ``busbw_gbs`` and the counter columns
(``*_pct``, docs/counters.md) doubles, every other column int64 (an empty
field is NULL).  The collectives table has ``rank`` twice per the format (the job rank first,
then the rank in the communicator): the second is named ``comm_rank``.

pyarrow is needed to convert, duckdb or pyspark to query; ``import gpuacct`` never imports them.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

DATASET_SCHEMA = "gpuacct.job_parquet/1"
MANIFEST = "_gpuacct_job.json"
STEPS_CSV = "job_steps.csv"
COLLECTIVES_CSV = "job_collectives.csv"
# Table name in the dataset (and in the SQL) -> the export's file.
TABLES: Dict[str, str] = {"steps": STEPS_CSV, "collectives": COLLECTIVES_CSV}
PARTITION_COLUMNS: Tuple[str, ...] = ("job", "host", "rank")
STRING_COLUMNS = frozenset(
    ("job", "host", "comm", "collective", "datatype", "algo", "proto", "source"))
FLOAT_COLUMNS = frozenset(("flops", "tokens", "samples", "busbw_gbs", "sm_active_pct",
                           "tensor_active_pct", "dram_pct", "compute_sol_pct", "memory_sol_pct"))
ENGINES = ("duckdb", "spark")
QUERIES_FILE = Path(__file__).resolve().parent / "job_queries.sql"

# Columns a table must have: the partition columns and every column the queries read (the
# other columns of the export are carried as they come, typed by the rule above).
REQUIRED_COLUMNS: Dict[str, Tuple[str, ...]] = {
    "steps": PARTITION_COLUMNS + (
        "step_index", "warmup", "duration_ns", "wall_compute_ns", "wall_communication_ns",
        "wall_data_ns", "wall_launch_ns", "wall_other_ns", "clock_offset_ns", "job_step_ns",
        "waited_ns", "late_ns"),
    "collectives": PARTITION_COLUMNS + (
        "step_index", "comm", "seq", "collective", "bytes", "comm_rank", "gpu_start_ns",
        "gpu_end_ns", "arrival_ns", "last_rank", "wait_ns", "transfer_ns", "busbw_gbs"),
}

_BLOCK_SIZE = 4 << 20  # bytes of CSV parsed per batch
_ROWS_PER_WRITE = 1 << 19  # rows read before they are split among the partitions' files
_MAX_OPEN_WRITERS = 4096  # partition files open at once (file descriptors)
# Spark local mode's driver heap (the whole engine in one JVM): 4 GB ran the four queries on
# 10 M step rows and 51 M collective rows (docs/job_view.md); Spark's default is 1 GB.
SPARK_LOCAL_DRIVER_MEMORY = "4g"
_ROW_GROUP_ROWS = 1 << 17  # the most rows of one partition written as one Parquet row group
_MAX_BUFFERED_BYTES = 256 << 20  # rows held for all partitions' next row groups (Arrow bytes)


class JobDataError(ValueError):
    """Bad input: not an export directory, a table with missing or bad columns, not a dataset."""


# --- reading the export's CSV tables, batch by batch ----------------------------------------

class _Slice(io.RawIOBase):
    """[start, end) of a binary file: the CSV body without '#' header/trailer lines."""

    def __init__(self, f: Any, start: int, end: int) -> None:
        super().__init__()
        self._f = f
        self._f.seek(start)
        self._left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._left)
        if n <= 0:
            return 0
        got = self._f.readinto(memoryview(b)[:n]) or 0
        self._left -= got
        return got


def _body_bounds(path: str) -> Tuple[List[str], int, int]:
    """(column names, start of the first row, end of the last row) of a CSV table.  Lines that
    start with '#' before the header or after the rows (a schema line, an end trailer) are not
    part of the table."""
    with open(path, "rb") as f:
        header = b""
        while True:
            line = f.readline()
            if not line:
                break
            if not line.startswith(b"#") and line.strip():
                header = line
                break
        if not header:
            raise JobDataError(f"{path}: no header line (empty file)")
        start = f.tell()
        size = f.seek(0, os.SEEK_END)
        # Trailing '#' lines (an end trailer) are short: look at the last 64 KiB only.
        chunk_start = max(start, size - 65536)
        f.seek(chunk_start)
        tail = f.read(size - chunk_start)
        end = size
        while end > start:
            body = tail[:end - chunk_start].rstrip(b"\r\n")
            cut = body.rfind(b"\n")
            if not body.startswith(b"#", cut + 1) or (cut < 0 and chunk_start > start):
                break
            end = chunk_start + cut + 1 if cut >= 0 else start
    try:
        names = header.decode("utf-8").strip().split(",")
    except UnicodeDecodeError:
        raise JobDataError(f"{path}: the header line is not UTF-8 text") from None
    return names, start, end


def _columns(table: str, path: str, names: List[str]) -> List[str]:
    """The file's column names made unique (the collectives' second `rank` is comm_rank) and
    checked against the columns the table needs."""
    out: List[str] = []
    for n in names:
        n = n.strip()
        if table == "collectives" and n == "rank" and "rank" in out:
            n = "comm_rank"
        if not n:
            raise JobDataError(f"{path}: empty column name in the header")
        if n in out:
            raise JobDataError(f"{path}: column '{n}' appears twice in the header")
        out.append(n)
    missing = [c for c in REQUIRED_COLUMNS[table] if c not in out]
    if missing:
        raise JobDataError(f"{path}: missing column(s) {', '.join(missing)} "
                           f"(is it a `gpuacct job --export` {TABLES[table]}?)")
    return out


def _arrow_type(pa: Any, name: str) -> Any:
    if name in STRING_COLUMNS:
        return pa.string()
    if name in FLOAT_COLUMNS:
        return pa.float64()
    return pa.int64()


def table_schema(columns: Sequence[str]) -> Any:
    """The Arrow schema of a table with these columns (the rule in the module docstring)."""
    import pyarrow as pa
    return pa.schema([pa.field(c, _arrow_type(pa, c)) for c in columns])


def check_job_id(job_id: str) -> str:
    """A job id given by the user (``--job-id``): it names a partition directory, job=ID."""
    if not job_id or len(job_id) > 128 or any(c in job_id for c in '/\\\n\r\t"=,'):
        raise JobDataError(f"job id {job_id!r}: 1-128 characters without / \\ = , quotes or "
                           "line breaks (it names a partition directory)")
    return job_id


def _batches(table: str, path: str, schema: Any, start: int, end: int,
             counts: Dict[str, int], job_id: Optional[str] = None) -> Iterator[Any]:
    """The table's rows as record batches (bounded memory), partition keys checked; an empty
    ``job`` becomes ``job_id`` when given."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    if end <= start:  # a header and no rows
        return
    read = pcsv.ReadOptions(column_names=schema.names, block_size=_BLOCK_SIZE, use_threads=True)
    parse = pcsv.ParseOptions(delimiter=",", quote_char=False)
    convert = pcsv.ConvertOptions(column_types=schema, null_values=[""],
                                  strings_can_be_null=False, check_utf8=True)
    with open(path, "rb") as raw:
        body = io.BufferedReader(_Slice(raw, start, end), buffer_size=1 << 20)
        try:
            reader = pcsv.open_csv(body, read_options=read, parse_options=parse,
                                   convert_options=convert)
            for batch in reader:
                if job_id is not None:
                    at = schema.get_field_index("job")
                    col = batch.column(at)
                    empty = pc.or_(pc.is_null(col), pc.equal(pc.utf8_length(col), 0))
                    columns = list(batch.columns)
                    columns[at] = pc.if_else(empty, pa.scalar(job_id, pa.string()), col)
                    batch = pa.RecordBatch.from_arrays(columns, schema=batch.schema)
                for key in PARTITION_COLUMNS:
                    col = batch.column(schema.get_field_index(key))
                    bad = pc.is_null(col)
                    if pa.types.is_string(col.type):
                        bad = pc.or_(bad, pc.equal(pc.utf8_length(col), 0))
                    if pc.any(bad).as_py():
                        row = counts[table] + pc.index(bad, True).as_py() + 1
                        hint = (": the ranks carry no job id; `gpuacct job --export` names "
                                "one (nojob-<hash>, or --job-id ID), and so does job-parquet "
                                "--job-id ID" if key == "job" else "")
                        raise JobDataError(f"{path}: row {row}: empty '{key}' (every row needs "
                                           f"job, host and rank){hint}")
                counts[table] += batch.num_rows
                yield batch
        except pa.ArrowInvalid as e:
            text = str(e).strip().splitlines()[0] if str(e).strip() else "unreadable CSV"
            m = re.search(r"column #(\d+)", text)
            if m and int(m.group(1)) < len(schema.names):
                name = schema.names[int(m.group(1))]
                text = text.replace(m.group(0), f"column '{name}' (#{m.group(1)})")
            raise JobDataError(f"{path}: {text}") from None


# --- the Parquet dataset ---------------------------------------------------------------------

def _write_table(table: str, csv_path: str, out_dir: str,
                 job_id: Optional[str] = None) -> Dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    names, start, end = _body_bounds(csv_path)
    columns = _columns(table, csv_path, names)
    schema = table_schema(columns)
    part_schema = pa.schema([schema.field(c) for c in PARTITION_COLUMNS])
    counts = {table: 0}
    base = os.path.join(out_dir, table)
    partitioning = ds.partitioning(part_schema, flavor="hive")
    data_schema = pa.schema([f for f in schema if f.name not in PARTITION_COLUMNS])
    keys = [schema.get_field_index(c) for c in PARTITION_COLUMNS]
    data_columns = [schema.get_field_index(f.name) for f in data_schema]
    # One file per partition (job, host, rank), written in row groups of up to
    # _ROW_GROUP_ROWS rows.  The export's rows come a window of steps at a time across every
    # rank, so each chunk holds a little of every partition: writing chunks as datasets gave
    # one small file per partition per chunk (600,733 files for 1024 ranks), and writing each
    # chunk's run as it came gave one row group of ~500 rows per partition per chunk (row-group
    # metadata of every open file held until it closed: 2.5 GB peak at 51 M rows).  So each
    # partition's rows are copied into its own buffer; a buffer is written as a row group when
    # it is full, and when all buffers together pass _MAX_BUFFERED_BYTES the largest are
    # written first.  Memory: one chunk, the buffers' bound, the writers' metadata (row groups
    # of thousands of rows).  More than _MAX_OPEN_WRITERS partitions: the writers are closed
    # and new files begun (part-1, part-2, ...).
    writers: Dict[Tuple[Any, ...], Any] = {}
    buffers: Dict[Tuple[Any, ...], List[Any]] = {}
    buffered_bytes = 0
    sizes: Dict[Tuple[Any, ...], Tuple[int, int]] = {}  # key -> (rows, bytes) buffered
    generation = 0

    def writer_for(key: Tuple[Any, ...]) -> Any:
        nonlocal generation
        w = writers.get(key)
        if w is None:
            if len(writers) >= _MAX_OPEN_WRITERS:
                for open_writer in writers.values():
                    open_writer.close()
                writers.clear()
                generation += 1
            expr = None
            for name, value in zip(PARTITION_COLUMNS, key):
                term = ds.field(name) == value
                expr = term if expr is None else expr & term
            directory = os.path.join(base, partitioning.format(expr)[0])
            os.makedirs(directory, exist_ok=True)
            w = pq.ParquetWriter(os.path.join(directory, f"part-{generation}.parquet"),
                                 data_schema, compression="zstd")
            writers[key] = w
        return w

    def flush(key: Tuple[Any, ...]) -> None:
        nonlocal buffered_bytes
        parts = buffers.pop(key, None)
        rows, nbytes = sizes.pop(key, (0, 0))
        if not parts:
            return
        buffered_bytes -= nbytes
        writer_for(key).write_table(pa.concat_tables(parts), row_group_size=max(rows, 1))

    def write(chunk: List[Any]) -> None:
        nonlocal buffered_bytes
        # One contiguous chunk first: a take from columns of many record batches concatenates
        # them on every call (25 ms a partition, the conversion twice as slow).
        t = pa.Table.from_batches(chunk, schema=schema).combine_chunks()
        n = t.num_rows
        order = pc.sort_indices(t, sort_keys=[(c, "ascending") for c in PARTITION_COLUMNS])
        sorted_keys = [t.column(i).take(order) for i in keys]
        changed = None  # row i + 1 begins another partition
        for col in sorted_keys:
            c = pc.not_equal(col.slice(1), col.slice(0, n - 1))
            changed = c if changed is None else pc.or_(changed, c)
        bounds = [0] + [i + 1 for i in pc.indices_nonzero(changed).to_pylist()] + [n]
        data = t.select(data_columns)
        for begin, end in zip(bounds, bounds[1:]):
            key = tuple(col[begin].as_py() for col in sorted_keys)
            part = data.take(order.slice(begin, end - begin))  # a copy: the chunk is not kept
            buffers.setdefault(key, []).append(part)
            rows, nbytes = sizes.get(key, (0, 0))
            sizes[key] = (rows + part.num_rows, nbytes + part.nbytes)
            buffered_bytes += part.nbytes
            if sizes[key][0] >= _ROW_GROUP_ROWS:
                flush(key)
        if buffered_bytes > _MAX_BUFFERED_BYTES:
            for key in sorted(sizes, key=lambda k: sizes[k][1], reverse=True):
                if buffered_bytes <= _MAX_BUFFERED_BYTES // 2:
                    break
                flush(key)

    chunk: List[Any] = []
    rows = 0
    try:
        for batch in _batches(table, csv_path, schema, start, end, counts, job_id):
            chunk.append(batch)
            rows += batch.num_rows
            if rows >= _ROWS_PER_WRITE:
                write(chunk)
                chunk, rows = [], 0
        if chunk:
            write(chunk)
        for key in list(buffers):
            flush(key)
    finally:
        for w in writers.values():
            w.close()
    if counts[table] == 0:
        # An empty table is one empty file (both engines then read zero rows of the right
        # types, where a directory without files is an error for DuckDB).
        empty = os.path.join(base, "job=none", "host=none", "rank=-1")
        os.makedirs(empty, exist_ok=True)
        pq.write_table(data_schema.empty_table(), os.path.join(empty, "part-0.parquet"))
    return {"rows": counts[table], "source": os.path.basename(csv_path),
            "columns": {f.name: str(f.type) for f in schema}}


def export_parquet(export_dir: str, out_dir: str, overwrite: bool = False,
                   job_id: Optional[str] = None) -> Dict[str, Any]:
    """Converts ``export_dir`` (``gpuacct job --export``'s job_steps.csv, job_collectives.csv)
    into the Parquet dataset ``out_dir``; returns the manifest.  The dataset is written into a
    temporary directory beside ``out_dir`` and renamed into place: a failure leaves no partial
    dataset.  ``out_dir`` must not exist unless ``overwrite``.  ``job_id``: the job of the rows
    whose ``job`` is empty (an export of ranks that carry no id, written before `gpuacct job
    --export` named one); rows that carry one keep it."""
    export_dir, out_dir = os.fspath(export_dir), os.fspath(out_dir)
    if job_id is not None:
        check_job_id(job_id)
    if not os.path.isdir(export_dir):
        raise JobDataError(f"{export_dir}: not a directory")
    missing = [f for f in TABLES.values() if not os.path.isfile(os.path.join(export_dir, f))]
    if missing:
        raise JobDataError(f"{export_dir}: not a `gpuacct job --export` directory (no "
                           f"{', '.join(missing)})")
    target = os.path.abspath(out_dir)
    if os.path.exists(target) and not overwrite:
        raise JobDataError(f"{out_dir}: already exists (overwrite=True, --overwrite: replace "
                           "it)")
    if os.path.exists(target) and not is_dataset(target):
        raise JobDataError(f"{out_dir}: exists and is not a gpuacct job dataset; not replacing it")
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(target) + ".tmp-", dir=parent)
    try:
        manifest: Dict[str, Any] = {"schema": DATASET_SCHEMA,
                                    "partitioning": list(PARTITION_COLUMNS), "tables": {}}
        for table, name in TABLES.items():
            manifest["tables"][table] = _write_table(table, os.path.join(export_dir, name), tmp,
                                                     job_id)
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        os.chmod(tmp, 0o755)
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(target) + ".old-", dir=parent)
            os.rename(target, os.path.join(old, "d"))
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def export_job(inputs: Sequence[str], out_dir: str, cli: Optional[str] = None,
               extra_args: Sequence[str] = (), overwrite: bool = False,
               timeout: float = 3600, job_id: Optional[str] = None) -> Dict[str, Any]:
    """Runs ``gpuacct job INPUTS... --export TMP`` (the C++ CLI, found as the package finds it:
    GPUACCT_CLI, the build tree next to the library, PATH) and converts TMP into ``out_dir``.
    ``job_id``: the job's id (``--job-id``; by default the ranks' own, else the export derives
    one)."""
    if job_id is not None:
        extra_args = [*extra_args, "--job-id", check_job_id(job_id)]
    if cli is None:
        from . import _lib
        from .launcher import find_cli
        cli = find_cli(_lib.find_library())
        if cli is None:
            raise JobDataError("the C++ gpuacct tool was not found (build it, or set "
                               "GPUACCT_CLI to its path): `gpuacct job --export` writes the tables")
    if not inputs:
        raise JobDataError("no inputs: give the ranks' output files or directories")
    # The CSV tables go beside the dataset (a big job's export is big; /tmp may be small).
    parent = os.path.dirname(os.path.abspath(os.fspath(out_dir)))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".gpuacct_job_export_", dir=parent) as tmp:
        export = os.path.join(tmp, "export")
        # --no-files: the tables are the output; job.json would land in the caller's directory.
        cmd = [cli, "job", *[os.fspath(i) for i in inputs], *extra_args, "--no-files",
               "--export", export]
        try:
            res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            raise JobDataError(f"{cli} job: {e}") from None
        if res.returncode != 0:
            why = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise JobDataError(f"`gpuacct job --export` failed (exit {res.returncode})"
                               + (": " + why[-1] if why else ""))
        return export_parquet(export, out_dir, overwrite=overwrite)


# --- reading the dataset back ----------------------------------------------------------------

def is_dataset(path: str) -> bool:
    try:
        with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
            return json.load(f).get("schema") == DATASET_SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def read_manifest(dataset_dir: str) -> Dict[str, Any]:
    dataset_dir = os.fspath(dataset_dir)
    if not is_dataset(dataset_dir):
        raise JobDataError(f"{dataset_dir}: not a gpuacct job dataset (no {MANIFEST} of schema "
                           f"{DATASET_SCHEMA}; make one with `gpuacct-py job-parquet`)")
    with open(os.path.join(dataset_dir, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    for table in TABLES:
        if table not in manifest.get("tables", {}) or not os.path.isdir(
                os.path.join(dataset_dir, table)):
            raise JobDataError(f"{dataset_dir}: table '{table}' is missing")
    return manifest


def _manifest_schema(manifest: Dict[str, Any], table: str) -> Any:
    return table_schema(list(manifest["tables"][table]["columns"]))


def open_table(dataset_dir: str, table: str) -> Any:
    """One table as a pyarrow.dataset.Dataset (hive partitions typed as written)."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    manifest = read_manifest(dataset_dir)
    schema = _manifest_schema(manifest, table)
    part = pa.schema([schema.field(c) for c in PARTITION_COLUMNS])
    return ds.dataset(os.path.join(dataset_dir, table), schema=schema, format="parquet",
                      partitioning=ds.partitioning(part, flavor="hive"))


# --- the named queries -----------------------------------------------------------------------

@dataclass
class NamedQuery:
    name: str
    purpose: str
    sql: str  # with {include_warmup} placeholders


def load_queries(path: Optional[str] = None) -> Dict[str, NamedQuery]:
    """The named blocks of job_queries.sql, in file order."""
    text = Path(path or QUERIES_FILE).read_text(encoding="utf-8")
    out: Dict[str, NamedQuery] = {}
    for block in re.split(r"^-- name:", text, flags=re.M)[1:]:
        head, _, rest = block.partition("\n")
        purpose = " ".join(m.group(1).strip()
                           for m in re.finditer(r"^-- purpose:(.*)$", rest, flags=re.M))
        body = "\n".join(ln for ln in rest.splitlines() if not ln.startswith("--")).strip()
        out[head.strip()] = NamedQuery(head.strip(), purpose, body.rstrip(";").strip())
    return out


QUERY_PARAMS: Dict[str, int] = {"include_warmup": 0}


def render_query(name: str, **params: Any) -> str:
    """The SQL of a named query with its parameters (integers only) filled in."""
    queries = load_queries()
    if name not in queries:
        raise JobDataError(f"no query named '{name}' (known: {', '.join(queries)})")
    values = dict(QUERY_PARAMS)
    for k, v in params.items():
        if k not in QUERY_PARAMS:
            raise JobDataError(f"unknown query parameter '{k}' (known: {', '.join(QUERY_PARAMS)})")
        if isinstance(v, bool):
            v = int(v)
        if not isinstance(v, int):
            raise JobDataError(f"query parameter {k}={v!r}: an integer is needed")
        values[k] = v
    sql = queries[name].sql
    for k, v in values.items():
        sql = sql.replace("{" + k + "}", str(int(v)))
    return sql


@dataclass
class QueryResult:
    columns: List[str]
    rows: List[Tuple[Any, ...]]
    engine: str

    def records(self) -> List[Dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    def to_pandas(self) -> Any:
        import pandas as pd
        return pd.DataFrame(self.rows, columns=self.columns)


def _sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _duckdb_views(con: Any, dataset_dir: str) -> None:
    # The partition columns' types are given, not guessed from the directory names (a job id
    # "42" would otherwise become a number).
    hive_types = ", ".join(
        f"{_sql_string(n)}: {_sql_string('VARCHAR' if n in STRING_COLUMNS else 'BIGINT')}"
        for n in PARTITION_COLUMNS)
    for table in TABLES:
        glob = os.path.join(os.path.abspath(dataset_dir), table, "**", "*.parquet")
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet("
                    f"{_sql_string(glob)}, hive_partitioning = true, "
                    f"hive_types = {{{hive_types}}}, union_by_name = true)")


_SPARK_TYPES = {"string": "STRING", "int64": "BIGINT", "double": "DOUBLE"}


def spark_session(master: str = "local[1]", app_name: str = "gpuacct-job",
                  driver_memory: Optional[str] = None) -> Any:
    """A Spark session for the queries: local mode by default (one JVM, no cluster); pass
    ``master`` (e.g. ``yarn``, ``spark://host:7077``) to use a cluster.  ``driver_memory``
    (Spark's size text, e.g. ``8g``): the driver JVM's heap; in local mode it holds all the
    query's data, and Spark's 1 GB default ran out on a 10 M-row percentile (default
    SPARK_LOCAL_DRIVER_MEMORY in local mode, Spark's own otherwise).  getOrCreate: an active
    session (spark-submit's, pyspark's) is reused as it is (its memory cannot change)."""
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    local = re.fullmatch(r"local\[(\d+)\]", master)
    if local:
        # Local mode talks to itself only: no lookup of the host's outside address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # One small JVM: as many shuffle partitions as threads (not 200), and the JIT's quick
        # tier and the serial collector (half the start and query time of the defaults for
        # these short queries, measured on 2 cores).
        driver_memory = driver_memory or SPARK_LOCAL_DRIVER_MEMORY
        builder = (builder.config("spark.sql.shuffle.partitions", local.group(1))
                   .config("spark.driver.extraJavaOptions",
                           "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _spark_views(spark: Any, dataset_dir: str, manifest: Dict[str, Any]) -> None:
    for table in TABLES:
        cols = manifest["tables"][table]["columns"]
        ddl = ", ".join(f"`{c}` {_SPARK_TYPES[t]}" for c, t in cols.items())
        path = os.path.join(os.path.abspath(dataset_dir), table)
        (spark.read.schema(ddl).option("basePath", path).parquet(path)
         .createOrReplaceTempView(table))


def query(dataset_dir: str, name: str, engine: str = "duckdb", session: Any = None,
          **params: Any) -> QueryResult:
    """Runs the named query (job_queries.sql) on the dataset.  engine: "duckdb" (embedded, the
    default) or "spark" (``session``, else a local-mode session from spark_session()).
    params: include_warmup=0|1."""
    if engine not in ENGINES:
        raise JobDataError(f"engine '{engine}': use one of {', '.join(ENGINES)}")
    sql = render_query(name, **params)
    manifest = read_manifest(os.fspath(dataset_dir))
    if engine == "duckdb":
        import duckdb
        con = duckdb.connect(":memory:")
        try:
            _duckdb_views(con, os.fspath(dataset_dir))
            cur = con.execute(sql)
            columns = [d[0] for d in cur.description]
            rows = [tuple(r) for r in cur.fetchall()]
        finally:
            con.close()
        return QueryResult(columns, rows, engine)
    spark = session if session is not None else spark_session()
    _spark_views(spark, os.fspath(dataset_dir), manifest)
    df = spark.sql(sql)
    columns = list(df.columns)
    rows = [tuple(r) for r in df.collect()]
    return QueryResult(columns, rows, engine)
