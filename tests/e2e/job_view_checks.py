"""The job view (`gpuacct job`, analysis/job/, docs/job_view.md) end to end on simulated jobs:
its job.json against what the fake NCCL's truth says happened (tests/sim/fake_nccl/README.md)
and the planted layout -- never against the library's own numbers.  The cases of run_job.py
call these after their own checks; docs/testing.md ("Job view end to end") lists what is
planted and asserted.

Expected failures: an assertion that fails because of a bug outside tests/ (analysis/job/,
inject/) is named in XFAIL with what fails and why; it is then reported (XFAIL) instead of
failing its case.  Strict: an XFAIL assertion that passes fails the case, so that the list is
emptied as soon as the bug is fixed.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess

import simjob
from simjob import MS, Fail, check, load_truth, truth_steps

# "case:assertion" -> why it is expected to fail (the integrator deletes the line once fixed).
# Empty: the p2p collision it held (p2p rows named by the communicator's own hash) is fixed --
# p2p rows are named by (communicator, sender, receiver).
XFAIL: dict = {}

CASE = ""  # the case being run (run_job.py sets it), for XFAIL names


def expect(name: str, cond: bool, msg: str) -> None:
    """check(), unless CASE:name is an expected failure."""
    key = f"{CASE}:{name}"
    if key in XFAIL:
        if cond:
            raise Fail(f"XPASS {key}: passes now; remove it from XFAIL ({XFAIL[key]})")
        print(f"XFAIL {key}: {msg} ({XFAIL[key]})")
        return
    check(cond, f"[{name}] {msg}")


def close(got: float, want: float, rel: float) -> bool:
    return abs(got - want) <= rel * abs(want)


# ---- running the job view -----------------------------------------------------------------------

def job_view(reports: str, *extra: str) -> tuple:
    """`gpuacct job REPORTS --json --no-files [EXTRA...]`: (exit status, job.json or None,
    stderr)."""
    exe = os.path.join(simjob.BUILD, "bin", "gpuacct")
    check(os.path.exists(exe), f"missing build output {exe}")
    res = subprocess.run([exe, "job", reports, "--json", "--no-files", *extra],
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    view = None
    if res.returncode == 0:
        try:
            view = json.loads(res.stdout)
        except ValueError as e:
            raise Fail(f"gpuacct job {reports}: stdout is not JSON ({e}): {res.stdout[:300]}")
        check(view.get("schema") == "gpuacct.job/1", f"job.json schema {view.get('schema')!r}")
    return res.returncode, view, res.stderr


def ok_view(reports: str, *extra: str) -> dict:
    rc, view, err = job_view(reports, *extra)
    check(rc == 0, f"gpuacct job {reports} exited {rc}: {err.strip()[-500:]}")
    return view


def by_rank(view: dict) -> dict:
    return {r["rank"]: r for r in view["ranks"]}


# ---- the truth's side ---------------------------------------------------------------------------

def summary_steps(out: str, nranks: int) -> list:
    """The steps the job view summarises: no rank's row is a warm-up step (docs/job_view.md)."""
    warm, seen = set(), {}
    for path in simjob.output_files(out, ".report.json"):
        with open(path) as f:
            rep = json.load(f)
        for s in rep["steps"]:
            if s["device"] != 0:
                continue
            seen.setdefault(s["step_index"], set()).add(rep["run"]["rank"])
            if s["warmup"]:
                warm.add(s["step_index"])
    return sorted(s for s, ranks in seen.items() if s not in warm and len(ranks) == nranks)


def truth_blame(out: str, job: dict) -> dict:
    """Per step of the truth (true clock): per rank the time its collectives waited for a later
    rank and its lateness (last arrival - second-latest arrival, summed over the instances it
    arrived last at; the job view's definition, docs/job_view.md Blame), and per instance type
    the transfer.  {"waited": {step: {rank: ns}}, "late": {step: {rank: ns}},
    "instances": {step: {type: n}}, "transfer": {type: [ns]}}."""
    truth = load_truth(out)
    groups = simjob.check_truth(truth, job)
    steps = truth_steps(out, groups)
    res = {"waited": {}, "late": {}, "instances": {}, "transfer": {}}
    for rows in groups.values():
        for t in rows:
            s = steps[t["process_rank"]][t["host_enqueue_ns"]]
            res["waited"].setdefault(s, {}).setdefault(t["process_rank"], 0)
            res["waited"][s][t["process_rank"]] += t["wait_ns"]
        starts = sorted(rows, key=lambda t: t["true_gpu_start_ns"])
        last = starts[-1]
        step = steps[last["process_rank"]][last["host_enqueue_ns"]]
        late = last["true_gpu_start_ns"] - starts[-2]["true_gpu_start_ns"] if len(rows) > 1 else 0
        res["late"].setdefault(step, {}).setdefault(last["process_rank"], 0)
        res["late"][step][last["process_rank"]] += late
        kind = last["collective"]
        # A p2p group's instances are its transfers: each send of a to b (the job view names a
        # transfer by its sender and receiver, docs/job_view.md Identity).
        n = 1 if last["kind"] != "p2p" else sum(
            1 for t in rows for o in t.get("ops", []) if o["func"].lower().startswith("send"))
        res["instances"].setdefault(step, {}).setdefault(kind, 0)
        res["instances"][step][kind] += n
        res["transfer"].setdefault(kind, []).append(last["transfer_ns"])
    return res


def truth_last_share(out: str, job: dict, rank: int, steps: list, tie_ns: int = 1000) -> tuple:
    """(share of the summary steps' AllReduce instances where `rank` truly arrives last, more
    than `tie_ns` after the second-latest -- a tie has no last rank; its lateness per step over
    those instances)."""
    truth = load_truth(out)
    groups = simjob.check_truth(truth, job)
    where = truth_steps(out, groups)
    wanted = set(steps)
    last, instances, late = 0, 0, 0
    for rows in groups.values():
        if rows[0]["collective"] != "AllReduce":
            continue
        starts = sorted(rows, key=lambda t: t["true_gpu_start_ns"])
        step = where[starts[-1]["process_rank"]][starts[-1]["host_enqueue_ns"]]
        if step not in wanted:
            continue
        instances += 1
        lateness = starts[-1]["true_gpu_start_ns"] - starts[-2]["true_gpu_start_ns"]
        if starts[-1]["process_rank"] == rank and lateness > tie_ns:
            last += 1
            late += lateness
    return last / instances, late / len(steps)


def per_step_mean(table: dict, steps: list, rank: int) -> float:
    return sum(table.get(s, {}).get(rank, 0) for s in steps) / len(steps)


# ---- what the cases assert ----------------------------------------------------------------------

def check_clocks(view: dict, job: dict, tolerance_ns: int = 50_000) -> str:
    """The hosts' recovered offsets are the planted ones (relative to rank 0's host) within the
    tolerance; ranks of one host share one offset; the residual is reported."""
    clocks = view["clocks"]
    planted = {}
    for r in job["ranks"]:
        planted.setdefault(r["host"], set()).add(r["clock_offset_ns"])
    check(all(len(v) == 1 for v in planted.values()), f"layout: a host with two clocks {planted}")
    ref = job["ranks"][0]["host"]
    expect("reference_host", clocks["reference_host"] == ref,
           f"reference host {clocks['reference_host']!r}, rank 0's is {ref!r}")
    hosts = {h["host"]: h for h in clocks["hosts"]}
    expect("hosts", sorted(hosts) == sorted(planted), f"hosts {sorted(hosts)}, planted "
                                                      f"{sorted(planted)}")
    lines = []
    for host, offs in planted.items():
        want = next(iter(offs)) - next(iter(planted[ref]))
        got = hosts.get(host, {}).get("clock_offset_ns")
        expect("host_offset", got is not None and hosts[host]["aligned"]
               and abs(got - want) <= tolerance_ns,
               f"host {host}: recovered offset {got} ns, planted {want} ns (within "
               f"{tolerance_ns} ns)")
        want_ranks = sorted(r["rank"] for r in job["ranks"] if r["host"] == host)
        expect("host_ranks", sorted(hosts.get(host, {}).get("ranks", [])) == want_ranks,
               f"host {host}: ranks {hosts.get(host, {}).get('ranks')}, planted {want_ranks}")
        lines.append(f"{host} {got / MS:+.4f} ms (planted {want / MS:+.4f})")
    ranks = by_rank(view)
    for r in job["ranks"]:
        got = ranks[r["rank"]]["clock_offset_ns"]
        expect("one_clock_per_host", got == hosts[r["host"]]["clock_offset_ns"],
               f"rank {r['rank']} shifted by {got} ns, its host {r['host']} by "
               f"{hosts[r['host']]['clock_offset_ns']}")
    expect("residual", isinstance(clocks.get("residual_p50_ns"), (int, float))
           and isinstance(clocks.get("residual_p99_ns"), (int, float))
           and clocks["residual_p99_ns"] <= tolerance_ns,
           f"residual p50 {clocks.get('residual_p50_ns')} p99 {clocks.get('residual_p99_ns')} "
           f"(ends are one true instant in the fake: only alignment error is left)")
    return "; ".join(lines) + f"; residual p99 {clocks['residual_p99_ns'] / 1000:.1f} us"


def check_late_rank(view: dict, out: str, job: dict, late: int, wall: str,
                    steps=None) -> str:
    """`late` is the last to arrive, with `wall`, in every summarised step; its lateness per step
    and every other rank's waiting per step are the truth's within 1%; every other rank's
    correction line says it waits for `late` (`wall`)."""
    present = sorted(by_rank(view))
    steps = steps if steps is not None else summary_steps(out, job["nranks"])
    blame = truth_blame(out, job)
    expect("summary_steps", view["steps"]["count"] == len(steps),
           f"{view['steps']['count']} steps summarised, {len(steps)} non-warm-up steps of all "
           "ranks in the reports")
    expect("headline", view["headline"].startswith(f"rank {late} arrives last")
           and (wall in view["headline"]), f"headline {view['headline']!r}: expected rank "
                                           f"{late} with its {wall}")
    ranks = by_rank(view)
    me = ranks[late]
    expect("late_every_step", me["late_steps"] == len(steps)
           and view["steps"]["with_a_late_rank"] == len(steps),
           f"rank {late} late in {me['late_steps']} of {len(steps)} steps "
           f"({view['steps']['with_a_late_rank']} steps with a late rank)")
    expect("top_steps", all(t["late_rank"] == late and t["cause"] == wall
                            for t in view["steps"]["top"]) and view["steps"]["top"],
           f"top steps {[(t['step_index'], t['late_rank'], t['cause']) for t in view['steps']['top']]}")
    walls = me["late_by_wall_ms"]
    expect("late_wall", max(walls, key=walls.get) == wall, f"rank {late}: lateness by wall {walls}")
    want_late = per_step_mean(blame["late"], steps, late) / MS
    expect("lateness", close(me["late_ms"], want_late, 0.01),
           f"rank {late}: late {me['late_ms']:.4f} ms/step, truth {want_late:.4f}")
    worst = 0.0
    for r in present:
        if r == late:
            continue
        want = per_step_mean(blame["waited"], steps, r) / MS
        got = ranks[r]["waited_ms"]
        worst = max(worst, abs(got - want) / want if want else 0)
        expect("waited", close(got, want, 0.01),
               f"rank {r}: waited {got:.4f} ms/step, truth {want:.4f}")
        top = max(ranks[r]["waited_for_ms"], key=ranks[r]["waited_for_ms"].get, default=None)
        expect("waited_for", top == str(late), f"rank {r} waited most for {top!r}: "
                                               f"{ranks[r]['waited_for_ms']}")
        expect("late_others", ranks[r]["late_steps"] == 0 or r not in present,
               f"rank {r} late in {ranks[r]['late_steps']} steps")
        line = [c for c in view["corrections"] if c.startswith(f"rank {r}:")]
        expect("correction", len(line) == 1 and f"waiting for rank {late} ({wall})" in line[0],
               f"rank {r}: correction lines {line}")
    expect("no_correction_for_late", not [c for c in view["corrections"]
                                          if c.startswith(f"rank {late}:")],
           f"the late rank has a correction: {view['corrections']}")
    return (f"rank {late} late {me['late_ms']:.3f} ms/step (truth {want_late:.3f}) by "
            f"{wall}; others' waits within {worst * 100:.2f}% of the truth")


def check_types(view: dict, out: str, job: dict) -> str:
    """The per-collective table has the types the job ran, with the truth's instance counts
    over the summarised steps."""
    steps = summary_steps(out, job["nranks"])
    blame = truth_blame(out, job)
    want = {}
    for s in steps:
        for kind, n in blame["instances"].get(s, {}).items():
            want[kind] = want.get(kind, 0) + n
    got = {t["collective"]: t["instances"] for t in view["collectives"]["by_type"]}
    expect("types", sorted(got) == sorted(want), f"types {sorted(got)}, the job ran "
                                                 f"{sorted(want)}")
    expect("type_counts", got == want, f"instances per type {got}, truth {want}")
    return f"types {got}"


def rows_identity(out: str) -> set:
    ids = set()
    for path in simjob.output_files(out, ".collectives.csv"):
        with open(path) as f:
            header = json.loads(f.readline().split(" ", 2)[2])
        ids.add(header.get("identity"))
    return ids


def check_slow_link(slow: dict, fast: dict, out_slow: str, out_fast: str, job: dict,
                    link_peak_gbs: float) -> str:
    """A job with one slow link against the same job (same seed) without it.  The time shows as
    transfer, not waiting; transfer and bus bandwidth change by the truth's ratio.  Both views
    were given the planted link speed as the peak (--link-peak-gbs): a ring all-reduce's bus
    bandwidth reaches it without the slow link, and the slow link's share of it."""
    t_slow = truth_blame(out_slow, job)["transfer"]["AllReduce"]
    t_fast = truth_blame(out_fast, job)["transfer"]["AllReduce"]
    want_ratio = (sum(t_slow) / len(t_slow)) / (sum(t_fast) / len(t_fast))
    check(1.9 < want_ratio < 2.0, f"truth: slow link transfer ratio {want_ratio}")
    ar = {v["collective"]: v for v in slow["collectives"]["by_type"]}["AllReduce"]
    ar_fast = {v["collective"]: v for v in fast["collectives"]["by_type"]}["AllReduce"]
    expect("transfer_abs", close(ar["transfer_ms_mean"] * MS, sum(t_slow) / len(t_slow), 0.01),
           f"AllReduce transfer {ar['transfer_ms_mean']:.4f} ms, truth "
           f"{sum(t_slow) / len(t_slow) / MS:.4f}")
    ratio = ar["transfer_ms_mean"] / ar_fast["transfer_ms_mean"]
    expect("transfer_ratio", close(ratio, want_ratio, 0.01),
           f"transfer {ratio:.4f}x the job without the slow link, truth {want_ratio:.4f}x")
    bw = ar["busbw_gbs_mean"] / ar_fast["busbw_gbs_mean"]
    expect("busbw_halved", close(bw, 1 / want_ratio, 0.01),
           f"bus bandwidth {bw:.4f}x the job without the slow link, truth {1 / want_ratio:.4f}x")
    share, share_fast = ar["busbw_share_of_peak"], ar_fast["busbw_share_of_peak"]
    expect("peak_share", share_fast is not None and 0.95 < share_fast <= 1.0
           and close(share, share_fast / want_ratio, 0.01),
           f"bus bandwidth of the {link_peak_gbs:.1f} GB/s planted link: {share_fast} without "
           f"the slow link, {share} with it (truth ratio {want_ratio:.4f})")
    ranks, ranks_fast = by_rank(slow), by_rank(fast)
    for r, x in ranks.items():
        expect("waiting_small", x["waited_ms"] < 0.1 * x["transfer_ms"],
               f"rank {r}: waited {x['waited_ms']:.3f} ms/step vs transfer "
               f"{x['transfer_ms']:.3f}")
        expect("rank_transfer_ratio", close(x["transfer_ms"] / ranks_fast[r]["transfer_ms"],
                                            want_ratio, 0.01),
               f"rank {r}: transfer {x['transfer_ms']:.3f} vs {ranks_fast[r]['transfer_ms']:.3f} "
               "ms/step without the slow link")
    expect("no_waiting_story", not slow["corrections"]
           and not slow["headline"].startswith("rank "),
           f"the slow link is told as waiting: {slow['headline']!r} {slow['corrections'][:2]}")
    return (f"AllReduce transfer {ar['transfer_ms_mean']:.3f} ms = {ratio:.4f}x (truth "
            f"{want_ratio:.4f}x), busbw {ar['busbw_gbs_mean']:.1f} vs "
            f"{ar_fast['busbw_gbs_mean']:.1f} GB/s, waits <= "
            f"{max(x['waited_ms'] for x in ranks.values()):.3f} ms/step")


def check_link_blamed(view: dict, base_view: dict, slow_steps: list, tolerance: float = 0.05) -> str:
    """The link is the wall (docs/job_view.md, Slow links): the headline and the first
    slow_links line name it, the steps it is blamed on are the planted slow ones (`slow_steps`,
    summary steps), and its what-if -- the job step at the reference bandwidth -- is the job
    step of the same job without the slowdown (`base_view`) within `tolerance`."""
    link = view["link"]
    expect("link_blamed", link["blamed"] and view["headline"].startswith("the link is the wall"),
           f"link blamed {link['blamed']}, headline {view['headline']!r}")
    expect("link_line", bool(view["slow_links"]) and view["slow_links"][0].startswith("the link:"),
           f"slow_links {view['slow_links'][:2]}")
    worst = sorted(w["step_index"] for w in link["worst_steps"])
    expect("link_steps", link["steps_slow"] == len(slow_steps) and set(worst) <= set(slow_steps)
           and len(worst) == min(len(slow_steps), 10),
           f"link blamed on {link['steps_slow']} steps (worst {worst}), planted slow {slow_steps}")
    got, want = link["what_if_step_ms_mean"], base_view["steps"]["job_step_ms_mean"]
    expect("link_what_if", close(got, want, tolerance),
           f"what-if at the reference {got:.4f} ms, the job without the slowdown "
           f"{want:.4f} ms/step")
    expect("link_not_waiting", not view["corrections"], f"corrections {view['corrections'][:2]}")
    return (f"link blamed on {link['steps_slow']} steps ({link['transfer_over_expected']:.2f}x "
            f"expected, busbw share {link['busbw_share_of_expected']:.2f}); job step "
            f"{view['steps']['job_step_ms_mean']:.3f} ms, what-if {got:.3f} ms vs "
            f"{want:.3f} without the slowdown ({100 * (got - want) / want:+.2f}%)")


def check_balanced(view: dict, name: str) -> str:
    """Nobody to blame: no rank stands out, no link, and both what-ifs are the job step."""
    steps, link = view["steps"], view["link"]
    expect(f"{name}_headline", view["headline"].startswith("no rank stands out"),
           f"{name}: headline {view['headline']!r}")
    expect(f"{name}_what_if", steps["what_if_step_ms_mean"] == steps["job_step_ms_mean"],
           f"{name}: what-if {steps['what_if_step_ms_mean']:.4f} ms for a "
           f"{steps['job_step_ms_mean']:.4f} ms step with nothing to remove")
    expect(f"{name}_link", not link["blamed"] and link["slow_instances"] == 0
           and link["what_if_step_ms_mean"] == steps["job_step_ms_mean"] and not view["slow_links"],
           f"{name}: link {link}, slow_links {view['slow_links']}")
    return f"{name}: what-if = job step {steps['job_step_ms_mean']:.3f} ms"


# ---- bad input on real rank outputs -------------------------------------------------------------

def rank_files(reports: str, rank: int) -> list:
    return sorted(glob.glob(os.path.join(reports, f"gpuacct_*_rank{rank}.*")))


def cut_in_middle(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    cut = len(data) // 2
    while data[cut - 1:cut] == b"\n":  # in the middle of a line, not between two
        cut += 1
    with open(path, "wb") as f:
        f.write(data[:cut])


def set_job_id(path: str, job_id: str) -> None:
    with open(path) as f:
        text = f.read()
    check(f'"{simjob.JOB_ID}"' in text, f"{path}: no job id to change")
    with open(path, "w") as f:
        f.write(text.replace(f'"job_id":"{simjob.JOB_ID}"', f'"job_id":"{job_id}"')
                .replace(f'"job_id": "{simjob.JOB_ID}"', f'"job_id": "{job_id}"'))


def damaged_copies(out: str) -> dict:
    """Copies of out/reports, each damaged one way: name -> (dir, what stderr must say (all of
    the words, one line), ranks present)."""
    src = os.path.join(out, "reports")
    made = {}

    def copy(name):
        d = os.path.join(out, "damaged", name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        return d

    d = copy("missing_rank")
    for p in rank_files(d, 5):
        os.remove(p)
    made["missing_rank"] = (d, ["rank", "5", "missing"], 7)
    d = copy("cut_collectives")
    cut_in_middle(next(p for p in rank_files(d, 4) if p.endswith(".collectives.csv")))
    made["cut_collectives"] = (d, ["rank4.collectives.csv", "cut"], 8)
    d = copy("cut_steps")  # the report gone, the step stream is the rank's steps: cut it
    os.remove(next(p for p in rank_files(d, 3) if p.endswith(".json")))
    cut_in_middle(next(p for p in rank_files(d, 3) if p.endswith(".steps.jsonl")))
    made["cut_steps"] = (d, ["rank3.steps.jsonl", "cut"], 8)
    d = copy("other_job")
    for p in rank_files(d, 6):
        set_job_id(p, "otherjob7")
    made["other_job"] = (d, ["rank 6", "otherjob7"], 7)
    d = copy("duplicate_rank")
    for p in rank_files(d, 1):
        # Another process of rank 1 (a restart): its files under another name and pid.  (One
        # process's files under two names are one rank: analysis/job/rank_files.h.)
        name = os.path.basename(p).replace("gpuacct_", "gpuacct_copy_", 1)
        with open(p) as f:
            text = f.read()
        with open(os.path.join(d, name), "w") as f:
            f.write(re.sub(r'"pid": ?(\d+)', lambda m: m.group(0).replace(m.group(1), "999999"),
                           text))
    made["duplicate_rank"] = (d, ["rank 1", "twice"], 8)
    return made


def check_bad_inputs(out: str, job: dict, late: int, wall: str) -> list:
    """Each damaged copy: exit 0 (the job view of the ranks there, docs/job_view.md), one clear
    stderr line saying what is wrong, the problem in job.json, the straggler still named."""
    said = []
    for name, (d, words, present) in damaged_copies(out).items():
        rc, view, err = job_view(d)
        expect(f"{name}_exit", rc == 0, f"{name}: exit {rc} (documented: 0 when a rank is "
                                        f"usable): {err.strip()[-300:]}")
        if view is None:
            continue
        lines = [x for x in err.splitlines() if all(w in x for w in words)]
        expect(f"{name}_stderr", len(lines) >= 1,
               f"{name}: no stderr line with {words}: {err.strip()[-600:]!r}")
        expect(f"{name}_problem", any(all(w in p for w in words) for p in view["problems"]),
               f"{name}: job.json problems {view['problems']}")
        expect(f"{name}_present", view["ranks_present"] == present,
               f"{name}: {view['ranks_present']} ranks merged, expected {present}")
        expect(f"{name}_straggler", view["headline"].startswith(f"rank {late} arrives last")
               and wall in view["headline"], f"{name}: headline {view['headline']!r}")
        said.append(f"{name}: {lines[0] if lines else '?'}")
    # No rank usable at all: exit 1 and one line, nothing on stdout.
    d = os.path.join(out, "damaged", "nothing_usable")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gpuacct_x_rank0.steps.jsonl"), "w") as f:
        f.write("not a step stream\n")
    rc, _, err = job_view(d)
    expect("nothing_usable_exit", rc == 1 and err.strip() != "",
           f"no usable rank: exit {rc} (documented: 1), stderr {err.strip()[-300:]!r}")
    said.append(f"nothing usable: exit {rc}, {err.strip().splitlines()[-1] if err.strip() else ''}")
    return said
