"""Command line: ``python -m gpuacct`` / ``gpuacct`` / ``gpuacct-py``.

  run     [options] -- program args...   profile a program (sets the injection variables)
  report  FILE                           print the terminal summary of a report / stream
  plot    FILE -o walls.png              per-step wall chart
  where                                  which libgpuacct.so would be used, and why
  job-parquet EXPORT_DIR OUT_DIR         `gpuacct job --export` tables -> Parquet dataset
  job-export  INPUTS... -o OUT_DIR       runs `gpuacct job --export`, then job-parquet
  job-query   DATASET NAME               a job-view query (DuckDB; --engine spark)

  analyze, diff, synth, timeline         handed to the C++ ``gpuacct`` CLI (GPUACCT_CLI, the
                                         build tree next to the library, or PATH)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

# Subcommands import what they need; `python -m gpuacct run` never imports pandas or matplotlib
# before the program ran.


def _finite_number(text: str) -> float:
    """A decimal number (its range is the library's to check: inject/config.cc)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuacct-py",
        description="gpuacct (Python): where each training step's time goes.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    r = sub.add_parser("run", help="run a program with libgpuacct.so injected",
                       usage="%(prog)s [options] -- program [args...]")
    r.add_argument("--output", "-o", metavar="DIR", help="report directory (GPUACCT_OUTPUT_DIR)")
    r.add_argument("--warmup", type=int, metavar="N",
                   help="steps left out of the summary (GPUACCT_WARMUP_STEPS)")
    r.add_argument("--launch-latency-us", type=int, metavar="X",
                   help="launch-latency threshold in us (GPUACCT_LAUNCH_LATENCY_US)")
    r.add_argument("--host-pause-us", type=int, metavar="X",
                   help="host-pause threshold in us (GPUACCT_HOST_PAUSE_US)")
    r.add_argument("--record", action="store_true",
                   help="also write the raw event recording (GPUACCT_RECORD=1)")
    r.add_argument("--library", metavar="PATH", help="libgpuacct.so to inject")
    r.add_argument("--no-python", action="store_true",
                   help="no Python auto-instrumentation (GPUACCT_PYTHON=0)")
    r.add_argument("--no-summary", action="store_true", help="do not print the summary")
    r.add_argument("--gpu-hour-price", type=_finite_number, metavar="P",
                   help="price of one GPU-hour: the report gets its cost (GPUACCT_GPU_HOUR_PRICE)")
    r.add_argument("--tokens-per-step", type=_finite_number, metavar="N",
                   help="tokens one step of the whole job processes, for $ per million tokens "
                        "(GPUACCT_TOKENS_PER_STEP; gpuacct.set_step_work declared by the "
                        "program wins)")
    r.add_argument("--samples-per-step", type=_finite_number, metavar="N",
                   help="samples one step of the whole job processes (GPUACCT_SAMPLES_PER_STEP)")
    r.add_argument("command", nargs=argparse.REMAINDER, help="program and its arguments")

    rep = sub.add_parser("report", help="print the summary of a report or step stream")
    rep.add_argument("file")
    rep.add_argument("--json", action="store_true", help="print summary and verdict as JSON")

    pl = sub.add_parser("plot", help="stacked bar per step of the five walls")
    pl.add_argument("file")
    pl.add_argument("-o", "--output", default="walls.png", help="image file (default walls.png)")
    pl.add_argument("--device", type=int, help="one device instead of the mean over devices")
    pl.add_argument("--width", type=float, default=10.0, help="inches (default 10)")
    pl.add_argument("--height", type=float, default=5.0, help="inches (default 5)")
    pl.add_argument("--dpi", type=int, default=100, help="dots per inch (default 100)")

    sub.add_parser("where", help="which libgpuacct.so would be used")

    jp = sub.add_parser("job-parquet", help="`gpuacct job --export` tables -> Parquet dataset "
                        "(hive-partitioned by job/host/rank)")
    jp.add_argument("export_dir", help="directory written by `gpuacct job --export`")
    jp.add_argument("out_dir", help="dataset directory to create")
    jp.add_argument("--overwrite", action="store_true", help="replace an existing dataset")
    jp.add_argument("--job-id", metavar="ID",
                    help="the job of rows whose job is empty (an export of ranks without one)")

    je = sub.add_parser("job-export", help="run `gpuacct job --export` on the ranks' outputs, "
                        "then job-parquet")
    je.add_argument("inputs", nargs="+", help="what `gpuacct job` reads (rank outputs, dirs)")
    je.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="dataset directory")
    je.add_argument("--overwrite", action="store_true", help="replace an existing dataset")
    je.add_argument("--job-id", metavar="ID",
                    help="the job's id (default: the ranks' own, else `gpuacct job --export` "
                         "derives nojob-<hash>)")

    jq = sub.add_parser("job-query", help="a named job-view query on a dataset (docs/job_view.md)")
    jq.add_argument("dataset", nargs="?", help="dataset directory (job-parquet's OUT_DIR)")
    jq.add_argument("name", nargs="?", help="query name (--list shows them)")
    jq.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                    help="duckdb (embedded, default) or spark")
    jq.add_argument("--master", default="local[1]",
                    help="Spark master with --engine spark (default local[1])")
    jq.add_argument("--driver-memory", default=None,
                    help="Spark driver heap, e.g. 8g (local mode default: "
                         "gpuacct.job.SPARK_LOCAL_DRIVER_MEMORY)")
    jq.add_argument("--include-warmup", action="store_true", help="keep warm-up steps")
    jq.add_argument("--format", choices=("table", "csv", "json"), default="table")
    jq.add_argument("--list", action="store_true", help="list the queries and what they answer")
    jq.add_argument("--sql", action="store_true",
                    help="print the query's SQL (for spark-sql, duckdb) instead of running it")
    return p


def _print_result(columns: List[str], rows: List[tuple], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps([dict(zip(columns, r)) for r in rows], indent=1))
        return
    if fmt == "csv":
        import csv
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(columns)
        w.writerows(["" if v is None else v for v in r] for r in rows)
        return
    def cell(v: object) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, float):  # ns means: whole ns and one decimal; GB/s: 6 digits
            return f"{v:.1f}" if abs(v) >= 1e4 else f"{v:.6g}"
        return str(v)

    text = [columns] + [[cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(columns))]
    for r in text:
        print("  ".join(c.rjust(w) if i > 1 else c.ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths))).rstrip())


def _job_command(args: argparse.Namespace) -> int:
    from . import job
    try:
        if args.cmd == "job-parquet":
            m = job.export_parquet(args.export_dir, args.out_dir, overwrite=args.overwrite,
                                   job_id=args.job_id)
            print(f"{args.out_dir}: steps {m['tables']['steps']['rows']} rows, collectives "
                  f"{m['tables']['collectives']['rows']} rows")
            return 0
        if args.cmd == "job-export":
            m = job.export_job(args.inputs, args.output, overwrite=args.overwrite,
                               job_id=args.job_id)
            print(f"{args.output}: steps {m['tables']['steps']['rows']} rows, collectives "
                  f"{m['tables']['collectives']['rows']} rows")
            return 0
        if args.list:
            for q in job.load_queries().values():
                print(f"{q.name}: {q.purpose}")
            return 0
        params = {"include_warmup": int(args.include_warmup)}
        if args.sql:
            name = args.name or args.dataset  # `job-query --sql NAME` needs no dataset
            if not name:
                raise job.JobDataError("job-query --sql NAME: which query?")
            print(job.render_query(name, **params) + ";")
            return 0
        if not args.dataset or not args.name:
            raise job.JobDataError("job-query DATASET NAME: both are needed (--list: the names)")
        session = job.spark_session(args.master, driver_memory=args.driver_memory) if args.engine == "spark" else None
        res = job.query(args.dataset, args.name, engine=args.engine, session=session, **params)
        _print_result(res.columns, res.rows, args.format)
        return 0
    except ImportError as e:
        sys.stderr.write(f"gpuacct-py: {args.cmd} needs {e.name or e} "
                         "(pip install pyarrow duckdb; pyspark for --engine spark)\n")
        return 3
    except (OSError, job.JobDataError) as e:
        sys.stderr.write(f"gpuacct-py: {args.cmd}: {e}\n")
        return 1


# Commands that only the C++ CLI implements.
_CLI_COMMANDS = ("analyze", "diff", "synth", "timeline")


def _delegate_to_cli(argv: List[str]) -> int:
    import os

    from . import _lib
    from .launcher import find_cli
    cli = find_cli(_lib.find_library())
    if cli is None:
        sys.stderr.write(f"gpuacct: '{argv[0]}' is a command of the C++ gpuacct tool, which was "
                         "not found (build it, or set GPUACCT_CLI to its path)\n")
        return 2
    os.execv(cli, [cli] + argv)
    return 2  # not reached


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _CLI_COMMANDS:
        return _delegate_to_cli(argv)
    args = _parser().parse_args(argv)
    if args.cmd == "run":
        from .launcher import LauncherError, RunOptions, run
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        opts = RunOptions(command=command, output=args.output, warmup=args.warmup,
                          launch_latency_us=args.launch_latency_us,
                          host_pause_us=args.host_pause_us, record=args.record,
                          library=args.library, python=not args.no_python,
                          summary=not args.no_summary, gpu_hour_price=args.gpu_hour_price,
                          tokens_per_step=args.tokens_per_step,
                          samples_per_step=args.samples_per_step)
        try:
            return run(opts)
        except LauncherError as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 2
    if args.cmd == "report":
        from .results import ReportError, load
        from .summary import render
        try:
            run_ = load(args.file)
        except (OSError, ReportError) as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 1
        if args.json:
            print(json.dumps({"summary": run_.summary, "verdict": run_.verdict,
                              "provisional": run_.provisional,
                              "summary_rows": run_.summary_rows, "data_loss": run_.data_loss,
                              "rows_lost": run_.rows_lost}, indent=2))
        else:
            sys.stdout.write(render(run_))
        return 0
    if args.cmd == "plot":
        from .plot import MissingDependency, plot_walls
        from .results import ReportError
        try:
            plot_walls(args.file, args.output, device=args.device, width=args.width,
                       height=args.height, dpi=args.dpi)
        except MissingDependency as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 3
        except (OSError, ReportError) as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 1
        print(args.output)
        return 0
    if args.cmd in ("job-parquet", "job-export", "job-query"):
        return _job_command(args)
    if args.cmd == "where":
        from . import _lib
        from .launcher import find_cli
        lib = _lib.find_library()
        info = {"library": lib, "cli": find_cli(lib), "binding": _lib.status()}
        print(json.dumps(info, indent=2))
        return 0 if lib else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
