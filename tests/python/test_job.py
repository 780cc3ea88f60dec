"""gpuacct.job: the `gpuacct job --export` tables as a hive-partitioned Parquet dataset, and the
named job-view queries on DuckDB and on Spark (local mode).

The export is generated (job_export_fixture.py: 4 ranks on 2 hosts, a planted straggler); every
expected answer is computed here from the generated rows, in plain Python, not read from the
code under test.  DuckDB and Spark must give identical rows (the SQL's rules, job_queries.sql).
Needs pyarrow, duckdb, pyspark and Java 17 (scripts/install_deps.sh installs them).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import pytest

from conftest import SHIM, WALLS, check, clean_env, venv_env
from job_export_fixture import (COLLECTIVES_COLUMNS, COUNTER_COLUMNS, STEPS_HEADER, JobExport, make_job_export,
                                rewrite_column)

from gpuacct import job

# --- independent answers ---------------------------------------------------------------------


def pdisc(values: Sequence[Any], p: str) -> Any:
    """SQL percentile_disc: the smallest value whose cumulative share is >= p (exact)."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    k = math.ceil(Fraction(p) * len(vals))
    return vals[max(k, 1) - 1]


def mean(values: Sequence[int]) -> float:
    return float(sum(values)) / len(values)


def kept(export: JobExport, include_warmup: bool = False) -> List[Dict[str, Any]]:
    return [r for r in export.steps if include_warmup or r["warmup"] == 0]


def expect_slowest_ranks(export: JobExport, include_warmup: bool = False) -> List[Tuple]:
    by_rank: Dict[Tuple, List[Dict[str, Any]]] = defaultdict(list)
    for r in kept(export, include_warmup):
        by_rank[(r["job"], r["host"], r["rank"])].append(r)
    out = []
    for (j, h, rank), rows in by_rank.items():
        late = [r["late_ns"] for r in rows]
        dur = [r["duration_ns"] for r in rows]
        out.append((j, h, rank, len(rows), sum(late), sum(1 for x in late if x > 0), mean(late),
                    mean(dur), mean([r["duration_ns"] - r["waited_ns"] for r in rows]),
                    pdisc(dur, "0.5"), max(dur), sum(r["waited_ns"] for r in rows)))
    out.sort(key=lambda t: (-t[4], -t[7], t[0], t[1], t[2]))
    return out


def expect_blame_by_wall(export: JobExport) -> List[Tuple]:
    rows = kept(export)
    median: Dict[Tuple, Dict[str, int]] = {}
    for key in {(r["job"], r["step_index"]) for r in rows}:
        step = [r for r in rows if (r["job"], r["step_index"]) == key]
        median[key] = {w: pdisc([r[f"wall_{w}_ns"] for r in step], "0.5") for w in WALLS}
    acc: Dict[Tuple, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        if r["late_ns"] <= 0:
            continue
        a = acc[(r["job"], r["host"], r["rank"])]
        a["late_steps"] += 1
        a["late_ns"] += r["late_ns"]
        for w in WALLS:
            a[w] += r[f"wall_{w}_ns"] - median[(r["job"], r["step_index"])][w]
    out = []
    for key, a in acc.items():
        excess = [a[w] for w in WALLS]
        blamed = WALLS[excess.index(max(excess))]  # the first of equal ones, as the CASE does
        out.append(key + (a["late_steps"], a["late_ns"], blamed, *excess))
    out.sort(key=lambda t: (-t[4], t[0], t[1], t[2]))
    return out


BUCKETS = [(0, "<1KiB"), (1024, "1KiB-64KiB"), (65536, "64KiB-1MiB"),
           (1 << 20, "1MiB-16MiB"), (16 << 20, "16MiB-256MiB"), (256 << 20, ">=256MiB")]


def bucket(size: Any) -> Tuple[int, str]:
    if size is None:
        return (-1, "unknown")
    return [b for b in BUCKETS if size >= b[0]][-1]


def expect_collective_bandwidth(export: JobExport) -> List[Tuple]:
    groups: Dict[Tuple, List[Dict[str, Any]]] = defaultdict(list)
    for c in export.collectives:
        groups[(c["job"], c["collective"]) + bucket(c["bytes"])].append(c)
    out = []
    for (j, kind, lo, label), rows in groups.items():
        bw = [c["busbw_gbs"] for c in rows if c["busbw_gbs"] is not None]
        wait = [c["wait_ns"] for c in rows]
        out.append((j, kind, lo, label, len(rows), len(bw), pdisc(bw, "0.5"), pdisc(bw, "0.99"),
                    pdisc([c["transfer_ns"] for c in rows], "0.5"), pdisc(wait, "0.5"),
                    pdisc(wait, "0.99")))
    out.sort(key=lambda t: (t[0], t[1], t[2]))
    return out


def expect_host_step_times(export: JobExport) -> List[Tuple]:
    groups: Dict[Tuple, List[Dict[str, Any]]] = defaultdict(list)
    for r in kept(export):
        groups[(r["job"], r["host"])].append(r)
    out = []
    for (j, h), rows in groups.items():
        dur = [r["duration_ns"] for r in rows]
        out.append((j, h, len({r["rank"] for r in rows}), len(rows), pdisc(dur, "0.5"),
                    pdisc(dur, "0.9"), pdisc(dur, "0.99"), max(dur), mean(dur)))
    out.sort(key=lambda t: (t[0], -t[4], t[1]))
    return out


EXPECTED = {
    "slowest_ranks": expect_slowest_ranks,
    "blame_by_wall": expect_blame_by_wall,
    "collective_bandwidth": expect_collective_bandwidth,
    "host_step_times": expect_host_step_times,
}

# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Tuple[JobExport, Path]:
    root = tmp_path_factory.mktemp("job")
    export = make_job_export(root / "export", ranks=4, hosts=2, steps=12, warmup=2, straggler=3)
    job.export_parquet(str(export.directory), str(root / "dataset"))
    return export, root / "dataset"


@pytest.fixture(scope="module")
def spark() -> Any:
    # The JVM is no code of ours to sanitize: without this a sanitized run (scripts/test.sh
    # --sanitize=address preloads libasan into the Python tests) hangs starting it.
    saved = os.environ.get("LD_PRELOAD")
    if saved is not None:
        os.environ["LD_PRELOAD"] = " ".join(
            p for p in saved.replace(":", " ").split()
            if not os.path.basename(p).startswith(("libasan", "libtsan", "libubsan")))
    try:
        session = job.spark_session("local[1]")
    finally:
        if saved is not None:
            os.environ["LD_PRELOAD"] = saved
    yield session
    session.stop()


def leftovers(parent: Path) -> List[str]:
    return [p.name for p in parent.iterdir()
            if ".tmp-" in p.name or ".old-" in p.name or "gpuacct_job_export" in p.name]


# --- the Parquet dataset ---------------------------------------------------------------------


def test_round_trip_keeps_every_column_row_and_type(dataset):
    export, ds_dir = dataset
    import pyarrow as pa
    for table, columns, rows in (("steps", STEPS_HEADER, export.steps),
                                 ("collectives", COLLECTIVES_COLUMNS, export.collectives)):
        t = job.open_table(str(ds_dir), table).to_table()
        assert sorted(t.column_names) == sorted(columns)
        assert t.num_rows == len(rows)
        for name in columns:
            want = (pa.string() if name in ("job", "host", "comm", "collective", "datatype",
                                            "algo", "proto", "source")
                    else pa.float64() if name in ("flops", "tokens", "samples", "busbw_gbs",
                                                  *COUNTER_COLUMNS)
                    else pa.int64())
            assert t.schema.field(name).type == want, (table, name)
        key = ("rank", "step_index") + (("seq", "comm") if table == "collectives" else ())
        got = sorted(t.select(columns).to_pylist(), key=lambda r: tuple(r[k] for k in key))
        assert got == sorted(rows, key=lambda r: tuple(r[k] for k in key))
    # the comm hash keeps its leading zeros; unknown sizes are NULL, not 0
    coll = job.open_table(str(ds_dir), "collectives").to_table().to_pylist()
    assert {c["comm"] for c in coll} == {c["comm"] for c in export.collectives}
    assert sum(c["bytes"] is None for c in coll) == sum(
        c["bytes"] is None for c in export.collectives) > 0


def test_dataset_is_hive_partitioned_by_job_host_rank(dataset):
    export, ds_dir = dataset
    import pyarrow.parquet as pq
    for table, rows in (("steps", export.steps), ("collectives", export.collectives)):
        files = sorted(p.relative_to(ds_dir / table) for p in (ds_dir / table).rglob("*.parquet"))
        want = sorted(Path(f"job={export.job}") / f"host={export.host_of(r)}" / f"rank={r}" /
                      "part-0.parquet" for r in range(export.ranks))
        assert files == want
        for r in range(export.ranks):
            part = pq.read_table(ds_dir / table / f"job={export.job}" /
                                 f"host={export.host_of(r)}" / f"rank={r}")
            assert "rank" not in part.column_names and "host" not in part.column_names
            assert part.num_rows == sum(1 for x in rows if x["rank"] == r)
    manifest = json.loads((ds_dir / job.MANIFEST).read_text())
    assert manifest["schema"] == job.DATASET_SCHEMA
    assert manifest["tables"]["steps"]["rows"] == len(export.steps)
    assert manifest["tables"]["collectives"]["rows"] == len(export.collectives)


def test_comment_lines_around_the_tables_are_not_rows(tmp_path):
    export = make_job_export(tmp_path / "export", comments=True, steps=5, warmup=1)
    manifest = job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    assert manifest["tables"]["steps"]["rows"] == len(export.steps)
    assert manifest["tables"]["collectives"]["rows"] == len(export.collectives)


# --- the queries: identical on both engines, and right -----------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_query_is_identical_on_duckdb_and_spark_and_right(dataset, spark, name):
    export, ds_dir = dataset
    duck = job.query(str(ds_dir), name, engine="duckdb")
    spk = job.query(str(ds_dir), name, engine="spark", session=spark)
    assert duck.columns == spk.columns
    assert duck.rows == spk.rows
    assert duck.rows == EXPECTED[name](export)
    assert duck.rows, "the query returned nothing: nothing compared"


def test_every_query_in_the_sql_file_is_tested():
    assert sorted(job.load_queries()) == sorted(EXPECTED)
    for q in job.load_queries().values():
        assert q.purpose, q.name


def test_planted_straggler_is_found(dataset):
    export, ds_dir = dataset
    slow = job.query(str(ds_dir), "slowest_ranks").records()
    assert slow[0]["rank"] == export.straggler
    assert slow[0]["host"] == export.host_of(export.straggler)
    others = [r for r in slow if r["rank"] != export.straggler]
    assert slow[0]["made_others_wait_ns"] > max(r["made_others_wait_ns"] for r in others)
    assert slow[0]["mean_own_ns"] > max(r["mean_own_ns"] for r in others)
    blame = job.query(str(ds_dir), "blame_by_wall").records()
    assert blame[0]["rank"] == export.straggler
    assert blame[0]["blamed_wall"] == "data"  # the planted extra is data wait
    bw = job.query(str(ds_dir), "collective_bandwidth").records()
    unknown = [b for b in bw if b["size_bucket"] == "unknown"]
    assert unknown and all(b["with_busbw"] == 0 and b["p50_busbw_gbs"] is None for b in unknown)


@pytest.mark.parametrize("ranks,hosts,straggler", [(8, 4, 1), (6, 3, 4)])
def test_planted_straggler_anywhere(tmp_path, ranks, hosts, straggler):
    export = make_job_export(tmp_path / "export", ranks=ranks, hosts=hosts, steps=8, warmup=1,
                             straggler=straggler, seed=ranks)
    job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    for name in ("slowest_ranks", "blame_by_wall", "host_step_times"):
        assert job.query(str(tmp_path / "ds"), name).rows == EXPECTED[name](export), name
    assert job.query(str(tmp_path / "ds"), "slowest_ranks").records()[0]["rank"] == straggler
    blame = job.query(str(tmp_path / "ds"), "blame_by_wall").records()
    assert (blame[0]["rank"], blame[0]["blamed_wall"]) == (straggler, "data")


def test_names_that_need_escaping_in_partition_paths(tmp_path, spark):
    """Partition values are URI-escaped in the paths (pyarrow's hive flavour); both engines
    read back the names as they were."""
    export = make_job_export(tmp_path / "export", steps=3, warmup=1, job="slurm 12/3",
                             host_pattern="node {}:a%b")
    job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    assert (tmp_path / "ds" / "steps" / "job=slurm%2012%2F3").is_dir()
    for engine in ("duckdb", "spark"):
        res = job.query(str(tmp_path / "ds"), "slowest_ranks", engine=engine, session=spark)
        assert res.rows == expect_slowest_ranks(export), engine


def test_include_warmup_parameter(dataset, spark):
    export, ds_dir = dataset
    duck = job.query(str(ds_dir), "slowest_ranks", include_warmup=1)
    spk = job.query(str(ds_dir), "slowest_ranks", engine="spark", session=spark,
                    include_warmup=True)
    assert duck.rows == spk.rows == expect_slowest_ranks(export, include_warmup=True)
    assert duck.rows != job.query(str(ds_dir), "slowest_ranks").rows


def test_empty_collectives_table_queries_to_no_rows(tmp_path, spark):
    export = make_job_export(tmp_path / "export", steps=4, warmup=1, with_collectives=False)
    job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    for engine in ("duckdb", "spark"):
        res = job.query(str(tmp_path / "ds"), "collective_bandwidth", engine=engine,
                        session=spark)
        assert res.rows == []
        assert job.query(str(tmp_path / "ds"), "slowest_ranks", engine=engine,
                         session=spark).rows == expect_slowest_ranks(export)


# --- bad input ---------------------------------------------------------------------------------


def test_not_an_export_dir(tmp_path):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "job_steps.csv").write_text("job,host,rank\n")
    with pytest.raises(job.JobDataError, match="job_collectives.csv"):
        job.export_parquet(str(tmp_path / "export"), str(tmp_path / "ds"))
    with pytest.raises(job.JobDataError, match="not a directory"):
        job.export_parquet(str(tmp_path / "nothing"), str(tmp_path / "ds"))
    assert not (tmp_path / "ds").exists() and not leftovers(tmp_path)


@pytest.mark.parametrize("table,column", [("job_steps.csv", "late_ns"),
                                          ("job_collectives.csv", "busbw_gbs"),
                                          ("job_steps.csv", "host")])
def test_missing_column_is_an_error_and_nothing_is_written(tmp_path, table, column):
    export = make_job_export(tmp_path / "export", steps=3, warmup=1)
    rewrite_column(export.directory / table, column, drop=True)
    with pytest.raises(job.JobDataError, match=f"missing column.*{column}"):
        job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    assert not (tmp_path / "ds").exists() and not leftovers(tmp_path)


@pytest.mark.parametrize("column,value,match", [("bytes", "12x", "bytes"),
                                                ("rank", "", "empty 'rank'"),
                                                ("host", "", "empty 'host'")])
def test_bad_value_late_in_the_file_leaves_no_partial_dataset(tmp_path, column, value, match):
    export = make_job_export(tmp_path / "export", steps=12, warmup=1)
    rewrite_column(export.directory / "job_collectives.csv", column, fn=lambda _: value,
                   row=len(export.collectives) - 3)
    with pytest.raises(job.JobDataError, match=match):
        job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    assert not (tmp_path / "ds").exists() and not leftovers(tmp_path)


def test_existing_output_is_kept_unless_overwrite(dataset, tmp_path):
    export, _ = dataset
    out = tmp_path / "ds"
    out.mkdir()
    (out / "mine.txt").write_text("not a dataset")
    with pytest.raises(job.JobDataError, match="already exists"):
        job.export_parquet(str(export.directory), str(out))
    with pytest.raises(job.JobDataError, match="not a gpuacct job dataset"):
        job.export_parquet(str(export.directory), str(out), overwrite=True)
    assert (out / "mine.txt").is_file()
    out2 = tmp_path / "ds2"
    job.export_parquet(str(export.directory), str(out2))
    job.export_parquet(str(export.directory), str(out2), overwrite=True)
    assert job.is_dataset(str(out2)) and not leftovers(tmp_path)


def test_query_errors(dataset, tmp_path):
    _, ds_dir = dataset
    with pytest.raises(job.JobDataError, match="not a gpuacct job dataset"):
        job.query(str(tmp_path), "slowest_ranks")
    with pytest.raises(job.JobDataError, match="no query named"):
        job.query(str(ds_dir), "fastest_ranks")
    with pytest.raises(job.JobDataError, match="engine"):
        job.query(str(ds_dir), "slowest_ranks", engine="sqlite")
    with pytest.raises(job.JobDataError, match="parameter"):
        job.query(str(ds_dir), "slowest_ranks", limit="1; DROP TABLE steps")
    with pytest.raises(job.JobDataError, match="integer"):
        job.query(str(ds_dir), "slowest_ranks", include_warmup="1 OR 1=1")


# --- export_job: the C++ export, then the conversion --------------------------------------------


def fake_cli(tmp_path: Path, body: str) -> str:
    """A stand-in for the C++ tool (export_job's `cli`): a shell script."""
    p = tmp_path / "fake-gpuacct"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def test_export_job_runs_the_cli_and_converts(tmp_path):
    export = make_job_export(tmp_path / "made", steps=3, warmup=1)
    # `gpuacct job INPUTS... --export DIR`: the export dir is the last argument.
    cli = fake_cli(tmp_path, 'for a; do last="$a"; done\n'
                             f'[ "$1" = job ] && [ "$2" = rank0 ] || exit 9\n'
                             f'mkdir -p "$last" && cp {export.directory}/*.csv "$last"/\n')
    manifest = job.export_job(["rank0", "rank1"], str(tmp_path / "ds"), cli=cli)
    assert not leftovers(tmp_path)
    assert manifest["tables"]["steps"]["rows"] == len(export.steps)
    assert job.query(str(tmp_path / "ds"), "slowest_ranks").rows == expect_slowest_ranks(export)


def test_export_job_cli_failure_is_an_error(tmp_path):
    cli = fake_cli(tmp_path, 'echo "gpuacct job: rank0: no such file" >&2\nexit 1\n')
    with pytest.raises(job.JobDataError, match="exit 1.*no such file"):
        job.export_job(["rank0"], str(tmp_path / "ds"), cli=cli)
    assert not (tmp_path / "ds").exists() and not leftovers(tmp_path)


# --- the command line ----------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuacct", *args], env=clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def test_cli_job_parquet_and_job_query(dataset, tmp_path):
    export, _ = dataset
    out = tmp_path / "ds"
    check(run_cli("job-parquet", str(export.directory), str(out)))
    assert job.is_dataset(str(out))
    res = check(run_cli("job-query", str(out), "slowest_ranks", "--format", "json"))
    got = json.loads(res.stdout)
    want = expect_slowest_ranks(export)
    assert [r["rank"] for r in got] == [t[2] for t in want]
    assert got[0]["made_others_wait_ns"] == want[0][4]
    res = check(run_cli("job-query", str(out), "host_step_times"))
    assert res.stdout.splitlines()[0].split()[:3] == ["job", "host", "ranks"]
    assert len(res.stdout.splitlines()) == 1 + export.hosts
    res = check(run_cli("job-query", "--list"))
    assert all(name in res.stdout for name in EXPECTED)
    res = check(run_cli("job-query", "--sql", "blame_by_wall"))
    assert "percentile_disc" in res.stdout and "{include_warmup}" not in res.stdout


@pytest.mark.parametrize("args,message", [
    (("job-parquet", "{tmp}/none", "{tmp}/ds"), "not a directory"),
    (("job-parquet", "{tmp}", "{tmp}/ds"), "not a `gpuacct job --export` directory"),
    (("job-query", "{tmp}", "slowest_ranks"), "not a gpuacct job dataset"),
    (("job-query", "{tmp}/ds0", "no_such_query"), "no query named"),
])
def test_cli_bad_input_is_one_line_and_non_zero(dataset, tmp_path, args, message):
    _, ds_dir = dataset
    os.symlink(ds_dir, tmp_path / "ds0")
    res = run_cli(*[a.format(tmp=tmp_path) for a in args])
    assert res.returncode != 0
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "ds").exists()


def test_import_gpuacct_does_not_import_the_engines():
    res = check(subprocess.run(
        [sys.executable, "-c", "import sys, gpuacct, gpuacct.job; "
         "print(sorted(m for m in ('pyarrow', 'duckdb', 'pyspark') if m in sys.modules))"],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60))
    assert res.stdout.strip() == "[]"
    assert SHIM.is_dir()


def test_installed_package_has_the_queries(venv, dataset):
    """pip's copy carries job_queries.sql (package data) and its job-query command works."""
    export, ds_dir = dataset
    res = check(subprocess.run([str(venv / "bin" / "gpuacct-py"), "job-query", str(ds_dir),
                                "slowest_ranks", "--format", "csv"], env=venv_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300))
    lines = res.stdout.splitlines()
    assert len(lines) == 1 + export.ranks
    assert lines[1].split(",")[2] == str(export.straggler)


# --- the real chain: the C++ merge's export, Parquet, both engines -------------------------------

def test_real_export_through_parquet_names_the_planted_straggler(tmp_path, spark):
    """A planted job written by bench/job_bench (8 ranks on 2 hosts, rank 5 waiting 15 ms for
    data every step), merged by the real `gpuacct job --export`, converted and queried: both
    engines give the same rows, and the straggler comes first on each."""
    build = os.environ.get("GPUACCT_BUILD_DIR", "")
    cli, bench = Path(build, "bin", "gpuacct"), Path(build, "bench", "job_bench")
    assert cli.exists() and bench.exists(), f"build outputs missing under {build!r}"
    ranks = tmp_path / "ranks"
    subprocess.run([str(bench), str(ranks), "--ranks", "8", "--hosts", "2", "--steps", "40",
                    "--collectives", "4", "--every", "2", "--straggler", "5", "--seed", "3"],
                   check=True, stdout=subprocess.DEVNULL, cwd=tmp_path)
    manifest = job.export_job([str(ranks)], str(tmp_path / "ds"), cli=str(cli))
    assert manifest["tables"]["steps"]["rows"] == 8 * 40
    assert not (tmp_path / "gpuacct-out").exists()  # --no-files: nothing beside the caller
    for name in ("slowest_ranks", "blame_by_wall"):
        duck = job.query(str(tmp_path / "ds"), name, engine="duckdb")
        spk = job.query(str(tmp_path / "ds"), name, engine="spark", session=spark)
        assert (duck.columns, duck.rows) == (spk.columns, spk.rows), name
        first = dict(zip(duck.columns, duck.rows[0]))
        assert first["rank"] == 5, (name, first)
        if name == "blame_by_wall":
            assert first["blamed_wall"] == "data", first


def test_rows_of_a_partition_land_in_one_file_whatever_the_chunks(tmp_path, monkeypatch):
    """The export interleaves ranks (a window of steps at a time), so every chunk read holds
    rows of every partition.  One file per partition all the same (at 1024 ranks, writing
    each chunk as a dataset left 600,733 small files), and every row is kept."""
    export = make_job_export(tmp_path / "export", ranks=6, hosts=3, steps=40, warmup=2,
                             straggler=4)
    # Small CSV blocks and chunks: dozens of chunks, each across partitions.
    monkeypatch.setattr(job, "_BLOCK_SIZE", 1024)
    monkeypatch.setattr(job, "_ROWS_PER_WRITE", 7)
    manifest = job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    for table, rows in (("steps", export.steps), ("collectives", export.collectives)):
        files = list((tmp_path / "ds" / table).rglob("*.parquet"))
        assert len(files) == export.ranks, (table, len(files))
        assert manifest["tables"][table]["rows"] == len(rows)
        assert job.open_table(str(tmp_path / "ds"), table).count_rows() == len(rows)
    slow = job.query(str(tmp_path / "ds"), "slowest_ranks", engine="duckdb")
    assert dict(zip(slow.columns, slow.rows[0]))["rank"] == 4


@pytest.mark.parametrize("row_group_rows,max_buffered_bytes", [
    (1 << 20, 1 << 30),  # nothing forces a flush before the end: one row group per file
    (9, 1 << 30),        # full buffers written as they fill
    (1 << 20, 1),        # the byte bound reached at every chunk: the largest buffers written
])
def test_partition_rows_keep_their_order_in_few_row_groups(tmp_path, monkeypatch,
                                                           row_group_rows, max_buffered_bytes):
    """Each partition's rows are buffered across chunks and written as row groups: the order of
    the export is kept within a partition whatever forces the writes, and row groups are not
    one per chunk (at 51 M rows, a ~500-row group per partition per chunk held 2.5 GB of
    row-group metadata in the open writers)."""
    import pyarrow.parquet as pq
    export = make_job_export(tmp_path / "export", ranks=6, hosts=2, steps=60, warmup=2,
                             straggler=1)
    monkeypatch.setattr(job, "_BLOCK_SIZE", 1024)
    monkeypatch.setattr(job, "_ROWS_PER_WRITE", 7)
    monkeypatch.setattr(job, "_ROW_GROUP_ROWS", row_group_rows)
    monkeypatch.setattr(job, "_MAX_BUFFERED_BYTES", max_buffered_bytes)
    job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    # Chunks of at least 7 rows: at most this many.
    chunks = -(-len(export.steps) // 7)
    for path in (tmp_path / "ds" / "steps").rglob("*.parquet"):
        rank = int(path.parent.name.split("=")[1])
        want = [r["step_index"] for r in export.steps if r["rank"] == rank]
        f = pq.ParquetFile(str(path))
        assert f.read(columns=["step_index"]).column(0).to_pylist() == want, rank
        groups = f.metadata.num_row_groups
        if row_group_rows >= len(want) and max_buffered_bytes > 1:
            assert groups == 1, (rank, groups)
        elif max_buffered_bytes > 1:
            assert groups == -(-len(want) // row_group_rows), (rank, groups)
        else:
            assert 1 <= groups <= chunks, (rank, groups)
