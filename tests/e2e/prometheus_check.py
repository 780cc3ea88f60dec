#!/usr/bin/env python3
"""The live metrics file (GPUACCT_PROM_DIR, docs/metrics.md) of the real libgpuacct.so on the
simulated device, read with the official Prometheus Python client's parser
(prometheus_client.parser.text_string_to_metric_families).

  prometheus_check.py --build <build dir> live
      A simulated training loop (tests/e2e/e2e_driver --mode=loop) runs with the library and
      GPUACCT_PROM_DIR set, the file rewritten every 20 ms.  While it runs a reader thread reads
      every file in the directory over and over, as node-exporter would: every read parses
      completely (all four families, the last line the data-loss sample, the histogram's +Inf
      bucket equal to its count, buckets never decreasing), only the one .prom file ever
      exists, and the counters never go back.  At the end the file's values are the report's:
      per device, steps and histogram count = the rows of the report's "steps" (warm-up rows
      included, docs/metrics.md), sum = their duration_ns, each bucket = the rows at most its
      bound, each wall = the rows' walls, data loss = the report's data-loss counters; no
      temporary file is left.
  prometheus_check.py --build <build dir> job
      A simulated 4-rank job on 2 hosts (the fake NCCL, tests/e2e/simjob.py) with one metrics
      directory for all: one file per rank (gpuacct_<job>_<host>_rank<N>.prom), each equal to
      its rank's report.
  prometheus_check.py --build <build dir> dashboard
      The same run, then examples/grafana/gpuacct_walls.json: valid JSON, every panel has
      queries, and every query (and template variable) names only metrics and labels the
      library wrote in that run.

Needs prometheus_client (scripts/install_deps.sh); run under /usr/bin/python3 by ctest.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_harness  # noqa: E402  (BUILD, LIBRARY: the build every helper reads)
import run_e2e  # noqa: E402  (the simulated-device helpers: paths, base_env, run)
from run_e2e import Fail, check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "examples", "grafana", "gpuacct_walls.json")
FAMILIES = {"gpuacct_step_seconds": "histogram", "gpuacct_wall_seconds": "counter",
            "gpuacct_steps": "counter", "gpuacct_data_loss": "counter"}
JOB = 'e2e "job"\\1'  # a quote and a backslash: the label escapes are exercised
RANK = "5"
STEPS = 200


def parse(text: str) -> dict:
    """name -> family, after checking the text is one whole file."""
    check(text.endswith("\n"), "the file does not end with a newline")
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    check(last.startswith("gpuacct_data_loss_total{"), f"last line {last!r}: not the last sample")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    check(set(fams) == set(FAMILIES), f"families {sorted(fams)}")
    for name, kind in FAMILIES.items():
        check(fams[name].type == kind, f"{name} is a {fams[name].type}")
    by_device = {}
    for s in fams["gpuacct_step_seconds"].samples:
        d = by_device.setdefault(s.labels["device"], {"buckets": []})
        if s.name.endswith("_bucket"):
            d["buckets"].append((float(s.labels["le"]), s.value))
        else:
            d[s.name.rsplit("_", 1)[-1]] = s.value
    for dev, d in by_device.items():
        counts = [v for _, v in d["buckets"]]
        check(counts == sorted(counts), f"device {dev}: buckets decrease {d['buckets']}")
        check(d["buckets"][-1][0] == float("inf") and counts[-1] == d["count"],
              f"device {dev}: +Inf bucket {d['buckets'][-1]} != count {d.get('count')}")
    return fams


def samples(fams: dict, family: str, suffix: str = "", identity=None) -> dict:
    """(device, wall or le or '') -> value of one family's samples (name ending `suffix`);
    each sample's job, host and rank labels checked against `identity` when given."""
    out = {}
    for s in fams[family].samples:
        if suffix and not s.name.endswith(suffix):
            continue
        if identity is not None:
            got = {k: s.labels.get(k) for k in identity}
            check(got == identity, f"labels {s.labels}, expected {identity}")
        extra = s.labels.get("wall", s.labels.get("le", ""))
        out[(s.labels.get("device", ""), extra)] = s.value
    return out


class Reader(threading.Thread):
    """Reads every file in the directory until stopped, as a collector polling it would."""

    def __init__(self, prom_dir: str):
        super().__init__(daemon=True)
        self.prom_dir = prom_dir
        self.stop = threading.Event()
        self.reads = 0
        self.versions = set()
        self.names = set()
        self.error = None
        self.last_steps = 0.0
        self.last_loss = 0.0
        self.step_counts = set()  # gpuacct_steps_total as the reads saw it

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.read_once()
                time.sleep(0.002)  # hundreds of reads a second, leaving the job its CPU
        except Exception as e:  # reported by the main thread
            self.error = e

    def read_once(self) -> None:
        for name in os.listdir(self.prom_dir):
            self.names.add(name)
            if not name.endswith(".prom"):
                continue  # a temporary file: node-exporter reads *.prom only
            try:
                with open(os.path.join(self.prom_dir, name)) as f:
                    text = f.read()
            except FileNotFoundError:
                continue  # renamed away between listdir and open: the next one is there
            fams = parse(text)  # whole, every time
            steps = sum(samples(fams, "gpuacct_steps").values())
            loss = sum(samples(fams, "gpuacct_data_loss").values())
            check(steps >= self.last_steps and loss >= self.last_loss,
                  f"counters went back: steps {self.last_steps} -> {steps}")
            self.last_steps, self.last_loss = steps, loss
            self.step_counts.add(steps)
            self.reads += 1
            self.versions.add(text)


def live_run(out: str):
    """Runs the loop with the metrics on; returns (report, final text, reader)."""
    _, _, _, driver = run_e2e.paths()
    prom_dir = os.path.join(out, "prom")
    os.mkdir(prom_dir)
    env = run_e2e.base_env(out, GPUACCT_PROM_DIR=prom_dir, GPUACCT_PROM_PERIOD_MS="20",
                           GPUACCT_FLUSH_MS="20", GPUACCT_JOB_ID=JOB, RANK=RANK)
    reader = Reader(prom_dir)
    reader.start()
    try:
        run_e2e.run([driver, "--mode=loop", f"--steps={STEPS}", "--sleep-ms=10"], env)
    finally:
        reader.stop.set()
        reader.join(30)
    if reader.error is not None:
        raise Fail(f"a reader during the run: {reader.error}")
    files = os.listdir(prom_dir)
    check(len(files) == 1 and files[0].endswith("_rank5.prom") and files[0].startswith("gpuacct_"),
          f"the directory holds {files}: one file named by job, host and rank, no temporary")
    # While it ran: the file and its temporary ("<name>.prom.tmp.<pid>", which the collector
    # does not read), nothing else.
    check(all(n == files[0] or n.startswith(files[0] + ".tmp.") for n in reader.names),
          f"names seen while it ran: {sorted(reader.names)}")
    with open(os.path.join(prom_dir, files[0])) as f:
        text = f.read()
    return run_e2e.one_report(out), text, reader


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def check_against_report(fams: dict, rep: dict) -> dict:
    """The file's values are the report's rows summed per device, warm-up included; returns
    a few totals for the message."""
    run = rep["run"]
    identity = {"job": run["job_id"], "host": run["hostname"], "rank": str(run["rank"])}
    rows = rep["steps"]
    devices = sorted({str(r["device"]) for r in rows})
    steps = samples(fams, "gpuacct_steps", identity=identity)
    count = samples(fams, "gpuacct_step_seconds", "_count", identity)
    total = samples(fams, "gpuacct_step_seconds", "_sum", identity)
    buckets = samples(fams, "gpuacct_step_seconds", "_bucket", identity)
    walls = samples(fams, "gpuacct_wall_seconds", identity=identity)
    check(sorted(d for d, _ in steps) == devices, f"devices {steps} vs the report's {devices}")
    for dev in devices:
        mine = [r for r in rows if str(r["device"]) == dev]
        check(steps[(dev, "")] == len(mine) == count[(dev, "")],
              f"device {dev}: steps {steps[(dev, '')]}, count {count[(dev, '')]}, "
              f"report rows {len(mine)} (warm-up included)")
        want = sum(r["duration_ns"] for r in mine) / 1e9
        check(close(total[(dev, "")], want), f"device {dev}: sum {total[(dev, '')]} != {want}")
        for (d, le), v in buckets.items():
            if d != dev:
                continue
            bound = float(le)
            n = sum(1 for r in mine if r["duration_ns"] <= bound * 1e9 + 0.5)
            check(v == n, f"device {dev} le={le}: {v} rows, the report has {n}")
        for (d, wall), v in walls.items():
            if d != dev:
                continue
            want = sum(r["walls"][wall] for r in mine) / 1e9
            check(close(v, want), f"device {dev} wall {wall}: {v} != {want}")
        check({w for d, w in walls if d == dev} == set(mine[0]["walls"]),
              f"walls {sorted(walls)} vs the report's {sorted(mine[0]['walls'])}")
    loss = sum(s["value"] for s in rep["stats"] if s["severity"] == "data_loss")
    got = samples(fams, "gpuacct_data_loss", identity=identity)
    check(list(got.values()) == [loss], f"data loss {got}, the report's counters {loss}")
    return {"rows": int(sum(count.values())), "seconds": sum(total.values()),
            "walls": {w: v for (_, w), v in walls.items()}}


def case_live() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_prom_") as out:
        rep, text, reader = live_run(out)
        fams = parse(text)
        rows = rep["steps"]
        check(rep["run"]["job_id"] == JOB and rep["run"]["rank"] == int(RANK),
              f"the report's run {rep['run']}")
        # Rewritten while the job ran: reads saw several totals between none and the last.
        between = sorted(s for s in reader.step_counts if 0 < s < len(rows))
        check(len(between) >= 4, f"{reader.reads} reads saw steps_total {sorted(reader.step_counts)}"
                                 f" ({len(rows)} at the end): the file was not rewritten as the "
                                 "job ran")
        check(len(rows) >= STEPS - 1, f"{len(rows)} rows in the report, {STEPS} steps run")
        check(any(r["warmup"] for r in rows), "no warm-up row: the definition is not exercised")
        t = check_against_report(fams, rep)
        print(f"ok: {reader.reads} whole reads of {len(reader.versions)} versions while it ran "
              f"({len(between)} totals between 0 and {len(rows)} rows); final file = report "
              f"({t['rows']} rows, mean step {t['seconds'] / t['rows'] * 1e3:.3f} ms, walls "
              f"{sorted(t['walls'])})")


def case_job() -> None:
    """A simulated 4-rank job on 2 hosts (tests/e2e/simjob.py, the fake NCCL) sharing one
    metrics directory, as the ranks of one node share node-exporter's: one file per rank, named
    by job, host and rank, each equal to that rank's report."""
    import simjob
    simjob.configure(e2e_harness.BUILD)
    with tempfile.TemporaryDirectory(prefix="gpuacct_prom_job_") as out:
        prom_dir = os.path.join(out, "prom")
        os.mkdir(prom_dir)
        nranks = 4
        env = {"GPUACCT_PROM_DIR": prom_dir, "GPUACCT_PROM_PERIOD_MS": "50"}
        simjob.run_job(out, nranks, simjob.plan(nranks, 2), steps=20,
                       rank_env={r: env for r in range(nranks)})
        reports = simjob.rank_reports(out, nranks)
        files = sorted(os.listdir(prom_dir))
        want = sorted(f"gpuacct_{simjob.JOB_ID}_simhost{r // 2}_rank{r}.prom"
                      for r in range(nranks))
        check(files == want, f"files {files}, expected {want}")
        comm = 0.0
        for r in range(nranks):
            with open(os.path.join(prom_dir, f"gpuacct_{simjob.JOB_ID}_simhost{r // 2}_rank{r}.prom")) as f:
                t = check_against_report(parse(f.read()), reports[r])
            comm += t["walls"].get("communication", 0.0)
        check(comm > 0, "no communication time in a job of collectives")
        print(f"ok: {nranks} ranks on 2 hosts, one file each equal to its report "
              f"(communication {comm:.4f} s in all)")


# ---- the Grafana dashboard --------------------------------------------------------------------

PROMQL_FUNCTIONS = {"rate", "irate", "increase", "sum", "avg", "max", "min", "count", "scalar",
                    "histogram_quantile", "topk", "bottomk", "clamp_min", "label_values"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset"}


def query_names(expr: str) -> tuple[set, set]:
    """(metric names, label names) a PromQL query (or a Grafana label_values()) uses."""
    labels = set()
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    for body in re.findall(r"\{([^}]*)\}", expr):  # selectors: label names before the operator
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", body))
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # ranges ([$__rate_interval], [5m])
    for body in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        labels |= {x.strip() for x in body.split(",") if x.strip()}
    expr = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", " ", expr)
    m = re.match(r"\s*label_values\s*\((.*),\s*([A-Za-z_]\w*)\s*\)\s*$", expr)
    if m:  # Grafana's label_values(metric, label)
        labels.add(m.group(2))
        expr = m.group(1)
    metrics = set()
    for tok in re.finditer(r"[A-Za-z_:][\w:]*", expr):
        name = tok.group(0)
        if expr[tok.end():].lstrip().startswith("("):
            check(name in PROMQL_FUNCTIONS, f"unknown function {name!r} in {expr!r}")
        elif name not in PROMQL_WORDS:
            metrics.add(name)
    return metrics, labels


def case_dashboard() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_prom_") as out:
        _, text, _ = live_run(out)
    written, written_labels = set(), set()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            written.add(s.name)
            written_labels |= set(s.labels)
    with open(DASHBOARD) as f:
        dash = json.load(f)
    check(dash.get("title") and dash.get("uid") and isinstance(dash.get("schemaVersion"), int),
          "a dashboard needs title, uid, schemaVersion")
    panels = dash.get("panels", [])
    check(len(panels) >= 4, f"{len(panels)} panels")
    exprs = []
    for p in panels:
        targets = p.get("targets", [])
        check(p.get("title") and p.get("gridPos") and targets, f"panel {p.get('title')!r}")
        exprs += [t["expr"] for t in targets]
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            exprs.append(v["query"]["query"] if isinstance(v["query"], dict) else v["query"])
    used = set()
    for e in exprs:
        metrics, labels = query_names(e)
        check(metrics, f"no metric in {e!r}")
        check(metrics <= written, f"{sorted(metrics - written)} in {e!r}: not written by the "
                                  f"library ({sorted(written)})")
        check(labels <= written_labels, f"labels {sorted(labels - written_labels)} in {e!r}: "
                                        f"not written ({sorted(written_labels)})")
        used |= metrics
    # The three views: walls per rank over time, step-time quantiles, data loss.
    check(any("gpuacct_wall_seconds_total" in e and "rank" in e and "rate(" in e for e in exprs),
          "no walls-per-rank panel")
    check(any("histogram_quantile(0.99" in e for e in exprs), "no p99 panel")
    check("gpuacct_data_loss_total" in used, "no data-loss panel")
    print(f"ok: {len(panels)} panels, {len(exprs)} queries name only {sorted(used)} "
          f"and labels the library wrote")


CASES = {"live": case_live, "job": case_job, "dashboard": case_dashboard}


if __name__ == "__main__":
    sys.exit(run_e2e.run_case_main(CASES))
