"""Command line: ``python -m gpuacct`` / ``gpuacct-py`` (main), and ``gpuacct`` (cli_main).

  run     [options] -- program args...   profile a program (sets the injection variables)
  report  FILE                           print the terminal summary of a report / stream
  plot    FILE -o walls.png              per-step wall chart
  where                                  which libgpuacct.so would be used, and why
  job-parquet EXPORT_DIR OUT_DIR         `gpuacct job --export` tables -> Parquet dataset
  job-export  INPUTS... -o OUT_DIR       runs `gpuacct job --export`, then job-parquet
  job-query   DATASET NAME               a job-view query (DuckDB; --engine spark)

  analyze, diff, job, synth, timeline    handed to the C++ ``gpuacct`` CLI (GPUACCT_CLI, the
                                         build tree next to the library, or any ``gpuacct`` on
                                         PATH that is not a Python script)

``gpuacct`` is also the C++ tool's name, so pip's ``gpuacct`` behaves as the C++ tool does:
every command this package does not implement (``report`` too, whose cost options are the C++
tool's, and ``--help``) goes to the C++ tool, which hands the Python commands back.  Whichever
comes first on PATH, one name does everything.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, NoReturn, Optional

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


class _Parser(argparse.ArgumentParser):
    """argparse whose usage error is one line (as the C++ tool's), exit status 2."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number > 0")
    return value


def _positive_number(text: str) -> float:
    value = _finite_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number > 0")
    return value


def _parser(prog: str = "gpuacct-py") -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
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
    pl.add_argument("--width", type=_positive_number, default=10.0, help="inches (default 10)")
    pl.add_argument("--height", type=_positive_number, default=5.0, help="inches (default 5)")
    pl.add_argument("--dpi", type=_positive_int, default=100, help="dots per inch (default 100)")

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
    except BrokenPipeError:
        raise
    except (OSError, job.JobDataError) as e:
        sys.stderr.write(f"gpuacct-py: {args.cmd}: {e}\n")
        return 1


# Commands of this package (the C++ tool hands them over: cli/cmd_python.cc; `report` is both:
# the C++ tool's with its cost options, this package's with --json or without the C++ tool),
# and the C++ tool's commands that this package hands to it.
PYTHON_COMMANDS = ("run", "plot", "where", "job-parquet", "job-export", "job-query")
CLI_COMMANDS = ("analyze", "diff", "job", "synth", "timeline")


def _find_cli() -> Optional[str]:
    from . import _lib
    from .launcher import find_cli
    return find_cli(_lib.find_library())


def _exec_cli(cli: str, argv: List[str]) -> int:
    import os
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(cli, [cli] + argv)
    except OSError as e:
        sys.stderr.write(f"gpuacct: cannot run the C++ gpuacct tool {cli}: {e.strerror}\n")
    return 2


def _cli_missing(what: str) -> int:
    sys.stderr.write(f"gpuacct: {what} is a command of the C++ gpuacct tool, which was not "
                     "found (looked at GPUACCT_CLI, the build tree next to libgpuacct.so and "
                     "every gpuacct on PATH; build it with scripts/run.sh, or set GPUACCT_CLI "
                     "to its path)\n")
    return 2


def _delegate_to_cli(argv: List[str]) -> int:
    cli = _find_cli()
    if cli is None:
        return _cli_missing(f"'{argv[0]}'")
    return _exec_cli(cli, argv)


def cli_main(argv: Optional[List[str]] = None) -> int:
    """pip's ``gpuacct`` console script: the C++ tool's name, so its behaviour.  The commands
    this package implements run here; every other one, ``report`` and ``--help`` included, goes
    to the C++ tool, found wherever it is on PATH (it hands ``report --json`` back).  Without
    the C++ tool, ``report`` and the help are this package's."""
    argv = sys.argv[1:] if argv is None else argv
    first = argv[0] if argv else ""
    if first in PYTHON_COMMANDS:
        return main(argv, prog="gpuacct")
    cli = _find_cli()
    if cli is not None:
        return _exec_cli(cli, argv)
    if first in ("", "-h", "--help", "help", "report"):
        return main(argv or ["--help"], prog="gpuacct")
    return _cli_missing(f"'{first}'" if first in CLI_COMMANDS else f"'{first}' (not one of "
                        f"this package's commands: {', '.join(PYTHON_COMMANDS)})")


def _finish_output() -> None:
    """stdout closed by the reader (``job-query ... | head``): the rest is not wanted, and
    Python's flush at exit must not print a BrokenPipeError either."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Optional[List[str]] = None, prog: str = "gpuacct-py") -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv, prog)
    except BrokenPipeError:
        _finish_output()
        return 141  # as a process SIGPIPE ended (128 + 13), quietly, like the C++ tool


def _main(argv: List[str], prog: str) -> int:
    if argv and argv[0] in CLI_COMMANDS:
        return _delegate_to_cli(argv)
    args = _parser(prog).parse_args(argv)
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
        except ValueError as e:  # a size out of range (ReportError is a ValueError too)
            sys.stderr.write(f"gpuacct-py: plot: {e}\n")
            return 2 if not isinstance(e, ReportError) else 1
        except OSError as e:
            sys.stderr.write(f"gpuacct-py: plot: {e}\n")
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
