#!/usr/bin/env python3
"""Hardware counters end to end (issue 18, docs/counters.md): the unchanged libgpuacct.so with
GPUACCT_COUNTERS=1 on the simulated device, whose fake CUPTI PM sampling reads counters the
`counters` scenario planted per sampling interval (tests/sim/scenarios/counters.cc).

Usage: counters_e2e.py --build <build dir> <case>

Sampling starts on a device at its first launch there (docs/counters.md, "Devices"): the
scenario runs step 0 first and waits for the set-up before step 1 (or, with
GPUACCT_SIM_SCENARIO_START_MS=0, only pauses after step 0 as a real first step takes longer),
so step 0 is not covered and every case expects full coverage from step 1 (FIRST_COVERED_STEP).
The fake's samples are on a GPU timer 743,097,609 ns behind CUPTI's clock (what the H200 showed;
GPUACCT_SIM_PM_CLOCK_OFFSET_NS): the library must measure and undo that (its report says
`clock` "mapped" and the offset), or every row would be wrong.

Cases:
  planted            one device: each step row's counters (and the summary's) against the
                     scenario's truth within 0.5 percentage points, every compute nanosecond
                     covered, and `gpuacct analyze` of the recording giving the same numbers
  two_devices_late   two devices, samples reaching the decoder 40 ms (sim) after their end while
                     the worker ticks during the run: the watermark waits, nothing is dropped
  interval_offset    a 250 us interval and CUPTI on another clock (measured offset, and the
                     timestamp callback)
  overflow           a hardware buffer of 8 samples: samples lost are counted as data loss
                     (and carried by the recording), what was kept still matches where it covers
  refuse_<cause>     unsupported / privileges / busy: one line naming cause and fix, a
                     complete report without counters that says why
  refuse_one_device  two devices, device 1's counters held (busy): device 0 keeps its counters
  stray_context      a context on a second device that never gets work (another rank's GPU,
                     whose counters another process holds): not sampled, not even tried -- no
                     line, not listed in the report -- while device 0 is sampled
  no_gpu_collection  CUPTI subscription refused: the counters section says why
  off                GPUACCT_COUNTERS unset: no counters anywhere
  short_run          the whole run shorter than one flush period (like the H200's elementwise
                     check, 35 ms): no wait for the set-up, only a 40 ms pause after step 0 --
                     the device is found at its first launch and sampled from step 1 (a library
                     that waits for the device's first delivered records says "no device was
                     used")
  contexts_before_library
                     the same with the contexts made before the library started (no
                     CONTEXT_CREATED reaches it): sampled from step 1 all the same
  activity_clock     the samples on CUPTI's own clock (offset 0): recognised as such, not moved
  first_sample_from_enable
                     on CUPTI's own clock, the first sample open since a cuptiPmSamplingEnable
                     that took 50 ms, its values diluted (the other reading of the H200's
                     -743 ms first-sample lag): dropped and counted (samples_before_start), the
                     clock still found to be CUPTI's, every row from step 1 exact
  interval_unit      a GPU whose time trigger reads the interval as 4 ns units: the samples are
                     4x the interval set -- one line says so, the report gives interval_seen_ns
  debug              GPUACCT_COUNTERS_DEBUG=1: the report's per-device debug object (trigger and
                     interval set, set-up times, the first five samples' raw times against
                     cuptiGetTimestamp and raw values) -- what tests/gpu/check.sh prints
"""
import glob
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_harness  # noqa: E402  (BUILD, LIBRARY: the build every helper reads)
import run_e2e as e2e  # noqa: E402  (the shared helpers: paths, env, run, report, stats)
from run_e2e import Fail, check, one_report, stat  # noqa: E402

TOL_PP = 0.5  # percentage points (issue 18)
METRICS = ("sm_active", "tensor_active", "dram", "compute_sol", "memory_sol")
STEPS = 10
# Step 0 runs before sampling starts (the scenario waits for the set-up after it).
FIRST_COVERED_STEP = 1


def run_counters(out: str, expect_rc=0, **env):
    _, _, sim_bin, _ = e2e.paths()
    base = dict(GPUACCT_COUNTERS="1", GPUACCT_COUNTERS_EXPERIMENTAL="1", GPUACCT_FLUSH_MS="20",
                GPUACCT_SIM_COUNTERS_TRUTH=os.path.join(out, "truth.json"))
    base.update(env)
    base = {k: v for k, v in base.items() if v is not None}  # None: left unset
    return e2e.run([os.path.join(sim_bin, "sim_scenario_counters"), "--marks=capi",
                    f"--steps={STEPS}"], e2e.base_env(out, **base), expect_rc=expect_rc)


def truth_of(out: str) -> dict:
    with open(os.path.join(out, "truth.json")) as f:
        t = json.load(f)
    return {(s["index"], s["device"]): s for s in t["steps"]}


def check_rows(rep: dict, truth: dict, devices: int, full_cover=True) -> int:
    """Every row against its planted truth; returns the rows checked."""
    rows = rep["steps"]
    check(len(rows) == STEPS * devices, f"{len(rows)} rows, expected {STEPS * devices}")
    checked = 0
    for r in rows:
        key = (r["step_index"], r["device"])
        check(key in truth, f"row {key} has no truth")
        t = truth[key]
        compute = r["categories"]["compute"]
        check(compute == t["compute_ns"], f"row {key}: compute {compute} ns, planted {t['compute_ns']}")
        c = r.get("counters")
        must_cover = full_cover and r["step_index"] >= FIRST_COVERED_STEP
        if c is None:
            check(not must_cover, f"row {key} has no counters")
            continue
        for m in METRICS:
            covered = c[f"{m}_covered_ns"]
            if must_cover:
                check(covered == compute, f"row {key}: {m} covered {covered} of {compute} ns")
            if covered == compute:
                got, want = c[f"{m}_pct"], t["expected"][m]
                check(abs(got - want) <= TOL_PP,
                      f"row {key}: {m} {got:.3f}% vs planted {want:.3f}% (tolerance {TOL_PP} pp)")
        checked += 1
    return checked


def check_summary(rep: dict, truth: dict) -> None:
    """The summary's compute-time means: the summary rows' planted values weighted by compute
    (the rows sampling covered: from FIRST_COVERED_STEP)."""
    s = rep["summary"]["counters"]["compute_time"]
    steps = {r["step_index"] for r in rep["steps"]
             if not r.get("warmup") and r["step_index"] >= FIRST_COVERED_STEP}
    for m in METRICS:
        num = sum(t["expected"][m] * t["compute_ns"] for k, t in truth.items() if k[0] in steps)
        den = sum(t["compute_ns"] for k, t in truth.items() if k[0] in steps)
        check(abs(s[f"{m}_pct"] - num / den) <= TOL_PP,
              f"summary {m} {s[f'{m}_pct']:.3f}% vs planted {num / den:.3f}%")


def analyze_recording(out: str) -> dict:
    cli = os.path.join(e2e_harness.BUILD, "bin", "gpuacct")
    recs = glob.glob(os.path.join(out, "*.gpuacct"))
    check(len(recs) == 1, f"recording missing: {os.listdir(out)}")
    e2e.run([cli, "analyze", recs[0], "--out", os.path.join(out, "re")], dict(os.environ))
    again = glob.glob(os.path.join(out, "re", "*.report.json"))
    check(len(again) == 1, f"no re-analysed report in {os.listdir(out)}")
    with open(again[0]) as f:
        return json.load(f)


def same_counters(live: dict, offline: dict) -> None:
    def by_key(rep):
        return {(r["step_index"], r["device"]): r.get("counters") for r in rep["steps"]}
    a, b = by_key(live), by_key(offline)
    check(a.keys() == b.keys(), f"rows differ: live {sorted(a)} analyze {sorted(b)}")
    for k in a:
        check((a[k] is None) == (b[k] is None), f"row {k}: counters only on one side")
        if a[k] is None:
            continue
        for m in METRICS:
            check(a[k][f"{m}_covered_ns"] == b[k][f"{m}_covered_ns"], f"row {k}: {m} covered differs")
            check(abs(a[k][f"{m}_pct"] - b[k][f"{m}_pct"]) < 1e-9,
                  f"row {k}: {m} live {a[k][f'{m}_pct']} analyze {b[k][f'{m}_pct']}")
    check(live["summary"]["counters"] == offline["summary"]["counters"],
          "summary counters differ between live and analyze")
    for name in ("counter_samples_lost", "late_counter_samples_dropped"):
        check(stat(live, name) == stat(offline, name), f"{name} differs live vs analyze")


def active_section(rep: dict, devices: int, planted=None) -> None:
    c = rep["collection"]["counters"]
    check(c["state"] == "active", f"counters state {c['state']}: {c.get('why')}")
    check(len(c["devices"]) == devices, f"counter devices {c['devices']}")
    for d in c["devices"]:
        check(d["state"] == "active" and d["samples"] > 0, f"device {d}")
        check(len(d["metrics"]) == 5, f"metrics chosen {d['metrics']}")
        on_clock(d) if planted is None else on_clock(d, planted=planted)


# The fake's sample clock minus CUPTI's (tests/sim/sim_cupti_pmsampling.cc default).
PLANTED_CLOCK_OFFSET_NS = -743_097_609


def on_clock(device: dict, planted=PLANTED_CLOCK_OFFSET_NS, interval_ns=1_000_000) -> None:
    # The first sample begins at the start on the samples' own clock, planted off CUPTI's; the
    # library measured the offset to within an interval and moved them by it.
    lag = device.get("first_sample_lag_ns")
    check(lag is not None and abs(lag - planted) < 200_000_000, f"first sample lag {lag} ns: {device}")
    check(device.get("clock") == ("activity" if planted == 0 else "mapped"),
          f"clock {device.get('clock')!r} with the samples {planted} ns off CUPTI's: {device}")
    off = device.get("clock_offset_ns")
    check(off is not None and abs(off - planted) <= interval_ns,
          f"clock offset {off} ns, planted {planted} (interval {interval_ns}): {device}")
    check(device.get("trigger") == "gpu_time_interval" and device.get("interval_set") == interval_ns,
          f"trigger {device.get('trigger')} interval {device.get('interval_set')}")
    due, got = device.get("samples_due", 0), device.get("samples", 0)
    check(due > 0 and got >= 0.9 * due - 2, f"{got} samples decoded of {due} due: {device}")


def case_planted() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        run_counters(out, GPUACCT_RECORD="1")
        live = one_report(out)
        truth = truth_of(out)
        active_section(live, 1)
        n = check_rows(live, truth, 1)
        check_summary(live, truth)
        check(stat(live, "counter_samples_lost") == 0, "samples lost")
        check(stat(live, "late_counter_samples_dropped") == 0, "late samples dropped")
        same_counters(live, analyze_recording(out))
        t = live["summary"]["counters"]["compute_time"]["tensor_active_pct"]
        print(f"ok: planted: {n} rows within {TOL_PP} pp, summary tensor {t:.2f}%, "
              "live = analyze")


def case_two_devices_late() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_RECORD="1", GPUACCT_SIM_SCENARIO_DEVICES="2",
                           GPUACCT_FLUSH_MS="10", GPUACCT_SIM_SCENARIO_PAUSE_MS="15",
                           GPUACCT_SIM_PM_DECODE_LAG_NS="40000000")
        live = one_report(out, res)
        truth = truth_of(out)
        active_section(live, 2)
        n = check_rows(live, truth, 2)
        check(stat(live, "late_counter_samples_dropped") == 0,
              f"{stat(live, 'late_counter_samples_dropped')} late samples dropped")
        check(stat(live, "counter_samples_lost") == 0, "samples lost")
        # The devices were planted apart (tensor 80/10 vs 60/20): rows must not mix them.
        sampled = [r for r in live["steps"] if r["step_index"] >= FIRST_COVERED_STEP]
        d0 = [r["counters"]["tensor_active_pct"] for r in sampled if r["device"] == 0]
        d1 = [r["counters"]["tensor_active_pct"] for r in sampled if r["device"] == 1]
        check(min(d0) > max(d1) + 1, f"devices mixed: {d0} {d1}")
        same_counters(live, analyze_recording(out))
        print(f"ok: two devices, late decode: {n} rows within {TOL_PP} pp, none dropped")


def case_interval_offset() -> None:
    # CUPTI 5000 s ahead of the host: moved by the measured offset, or read through the
    # timestamp callback (samples then on the host clock, like the activity records).
    for source, faults in (("measured_offset", "error:cuptiActivityRegisterTimestampCallback"),
                           ("cupti_timestamp_callback", None)):
        with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
            run_counters(out, GPUACCT_COUNTERS_INTERVAL_US="250",
                         GPUACCT_SIM_CUPTI_CLOCK="offset:5000000000000", GPUACCT_SIM_FAULTS=faults)
            live = one_report(out)
            check(live["collection"]["clock"]["source"] == source, str(live["collection"]))
            check(live["collection"]["counters"]["interval_us"] == 250, "interval not taken")
            on_clock(live["collection"]["counters"]["devices"][0], interval_ns=250_000)
            n = check_rows(live, truth_of(out), 1)
            print(f"ok: 250 us interval, CUPTI 5000 s ahead ({source}): {n} rows within {TOL_PP} pp")


def case_overflow() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        # 64 MiB / 8 MiB a sample = 8 samples; the run makes ~150 between two ticks.  The
        # first decode then says the buffer overflowed: its first sample is not the first
        # after the start and bounds the samples' clock from one side only -- on CUPTI's own
        # clock (offset 0) that still tells it; another clock would be known only to within
        # the tick (docs/counters.md, "Clock").
        run_counters(out, GPUACCT_FLUSH_MS="200", GPUACCT_SIM_PM_RECORD_BYTES=str(8 << 20),
                     GPUACCT_SIM_PM_CLOCK_OFFSET_NS="0", GPUACCT_RECORD="1")
        live = one_report(out)
        lost = stat(live, "counter_samples_lost")
        check(lost > 0, "an overflowing buffer lost nothing")
        check(live["data_loss"] is True, "samples lost but data_loss false")
        decoded = live["collection"]["counters"]["devices"][0]["samples"]
        # Every interval from the start (after step 0) to the stop is either decoded or counted
        # lost: at least the steps' span, and more by the time the sampler runs past the last
        # step until it is stopped at exit (a few ms; longer on a loaded machine: 8 of 99 seen
        # under ctest -j4).
        sampled = [r for r in live["steps"] if r["step_index"] >= FIRST_COVERED_STEP]
        span = max(r["window_end_ns"] for r in sampled) - min(r["window_begin_ns"] for r in sampled)
        check(span / 1e6 - 2 <= decoded + lost <= 1.25 * span / 1e6 + 2,
              f"{decoded} decoded + {lost} lost samples of 1 ms over {span} ns")
        check_rows(live, truth_of(out), 1, full_cover=False)
        same_counters(live, analyze_recording(out))  # the loss is carried by the recording
        print(f"ok: overflow: {lost} samples lost counted, {decoded} decoded, kept ones match")


def case_decode_fails() -> None:
    # Every cuptiPmSamplingDecodeData fails: after 10 ticks (5 ms each, the run lasts ~250 ms)
    # the device is given up -- one line, state failed, the samples since the start counted
    # lost -- and the run's rows are all there.
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_FLUSH_MS="5", GPUACCT_SIM_SCENARIO_PAUSE_MS="15",
                           GPUACCT_SIM_FAULTS="error:cuptiPmSamplingDecodeData")
        lines = [l for l in res.stderr.splitlines() if "hardware counters off" in l]
        check(len(lines) == 1, f"expected one line, got:\n{res.stderr}")
        check("cuptiPmSamplingDecodeData failed 10 times in a row" in lines[0], lines[0])
        rep = one_report(out, res)
        c = rep["collection"]["counters"]
        check(c["state"] == "refused" and c["why"] == lines[0][len("gpuacct: "):], str(c))
        check([d["state"] for d in c["devices"]] == ["failed"], str(c["devices"]))
        lost = stat(rep, "counter_samples_lost")
        # The 1 ms intervals from the start to the give-up: 9 tick periods of about 5 ms.
        check(20 <= lost <= 100, f"{lost} samples counted lost in 10 ticks of 5 ms at 1 ms")
        check(rep["data_loss"] is True, "samples lost but data_loss false")
        check_rows(rep, truth_of(out), 1, full_cover=False)
        print(f"ok: decode fails: given up after 10 ticks, {lost} samples counted lost, "
              f"{len(rep['steps'])} rows")


REFUSALS = {
    "unsupported": "PM sampling is not supported here",
    "privileges": "NVreg_RestrictProfilingToAdminUsers",
    "busy": "DCGM",
}


def case_refuse(cause: str) -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_SIM_PM_REFUSE=cause, GPUACCT_SIM_SCENARIO_DEVICES="2")
        lines = [l for l in res.stderr.splitlines() if "hardware counters off" in l]
        check(len(lines) == 1, f"expected one refusal line, got:\n{res.stderr}")
        line = lines[0]
        for needle in (REFUSALS[cause], "; fix: ", "tracing continues without counters"):
            check(needle in line, f"{needle!r} not in {line!r}")
        rep = one_report(out, res)
        c = rep["collection"]["counters"]
        check(c["state"] == "refused", f"state {c['state']}")
        check(c["why"] == line[len("gpuacct: "):], f"report why {c['why']!r} vs line {line!r}")
        check(all(d["samples"] == 0 for d in c["devices"]), str(c))
        truth = truth_of(out)
        check_rows(rep, truth, 2, full_cover=False)
        check(all("counters" not in r for r in rep["steps"]), "a refused run has counters")
        check("counters" not in rep["summary"], "summary has counters")
        check(not rep["data_loss"], "a refusal is not data loss")
        print(f"ok: refuse {cause}: {line}")


def case_refuse_one_device() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_SIM_PM_REFUSE="busy:1", GPUACCT_SIM_SCENARIO_DEVICES="2")
        lines = [l for l in res.stderr.splitlines() if "hardware counters off" in l]
        check(len(lines) == 1 and "device 1" in lines[0], f"refusal lines:\n{res.stderr}")
        rep = one_report(out, res)
        c = rep["collection"]["counters"]
        check(c["state"] == "partial", f"state {c['state']}")
        states = {d["device"]: d["state"] for d in c["devices"]}
        check(states == {0: "active", 1: "busy"}, f"device states {states}")
        truth = truth_of(out)
        check_rows(rep, truth, 2, full_cover=False)
        check(all(("counters" in r) == (r["device"] == 0) for r in rep["steps"]
                  if r["step_index"] >= FIRST_COVERED_STEP),
              "counters only on device 0's rows")
        for r in rep["steps"]:
            if r["device"] == 0 and r["step_index"] >= FIRST_COVERED_STEP:
                check(r["counters"]["tensor_active_covered_ns"] == r["categories"]["compute"],
                      f"device 0 row {r['step_index']} not covered")
        print(f"ok: one device refused (busy), the other's rows from step {FIRST_COVERED_STEP} "
              f"within {TOL_PP} pp")


def case_stray_context() -> None:
    # Device 1's counters are held by another process (busy): a library that set up every
    # device with a context would be refused there (and, in the real job, take them from the
    # rank that runs on it when it came first).
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_SIM_SCENARIO_STRAY_CONTEXT="1",
                           GPUACCT_SIM_PM_REFUSE="busy:1")
        lines = [l for l in res.stderr.splitlines() if "hardware counters" in l]
        check(not lines, f"lines about counters:\n{res.stderr}")
        with open(os.path.join(out, "truth.json")) as f:
            settled = json.load(f)["pm_settled"]
        check(settled == [1, 0], f"PM sampling set up (started or refused) per device: {settled}")
        rep = one_report(out, res)
        active_section(rep, 1)  # device 0 only: the stray device is not listed
        check(rep["collection"]["counters"]["devices"][0]["device"] == 0, "not device 0")
        n = check_rows(rep, truth_of(out), 1)
        check_summary(rep, truth_of(out))
        check(stat(rep, "counter_samples_lost") == 0, "samples lost")
        print(f"ok: stray context on device 1: not sampled, not listed; device 0's {n} rows "
              f"within {TOL_PP} pp")


def case_no_gpu_collection() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        run_counters(out, GPUACCT_SIM_FAULTS="subscribe_refused", GPUACCT_SIM_SCENARIO_START_MS="0")
        rep = one_report(out)
        c = rep["collection"]["counters"]
        check(c["state"] == "off" and "no GPU collection" in c["why"], str(c))
        print(f"ok: no GPU collection: {c['why']}")


def case_off() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        run_counters(out, GPUACCT_COUNTERS=None, GPUACCT_SIM_SCENARIO_START_MS="0")
        rep = one_report(out)
        check("counters" not in rep["collection"], "counters section without GPUACCT_COUNTERS")
        check(all("counters" not in r for r in rep["steps"]), "counters without GPUACCT_COUNTERS")
        print("ok: off by default")


def case_held_back() -> None:
    """GPUACCT_COUNTERS=1 alone: held back with one line, the run accounted without counters --
    on an H200 the counters read 0 % and crashed a program inside libnvperf_host.so."""
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_COUNTERS_EXPERIMENTAL=None, GPUACCT_SIM_SCENARIO_START_MS="0")
        rep = one_report(out)
        c = rep["collection"]["counters"]
        check(c["state"] == "held_back" and "GPUACCT_COUNTERS_EXPERIMENTAL" in c["why"], str(c))
        check(all("counters" not in r for r in rep["steps"]), "counters although held back")
        lines = [l for l in res.stderr.splitlines() if "held back" in l]
        check(len(lines) == 1, f"{len(lines)} lines say the counters are held back")
        print("ok: held back without GPUACCT_COUNTERS_EXPERIMENTAL")


def short_run(out: str, **env):
    # 10 steps of 11 ms (sim) with 2 ms pauses after a 40 ms one: ~60 ms of real time, under the
    # 100 ms flush period (the default), so no tick comes before the exit.
    return run_counters(out, GPUACCT_FLUSH_MS=None, GPUACCT_SIM_SCENARIO_START_MS="0",
                        GPUACCT_SIM_SCENARIO_FIRST_PAUSE_MS="40",
                        GPUACCT_SIM_SCENARIO_PAUSE_MS="2", **env)


def case_short_run() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = short_run(out)
        rep = one_report(out, res)
        active_section(rep, 1)
        n = check_rows(rep, truth_of(out), 1)
        check(stat(rep, "counter_samples_lost") == 0, "samples lost")
        print(f"ok: short run: device found at its first launch, {n} rows within {TOL_PP} pp")


def case_contexts_before_library() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = short_run(out, GPUACCT_SIM_CONTEXTS_BEFORE_INJECTION="1")
        rep = one_report(out, res)
        active_section(rep, 1)
        n = check_rows(rep, truth_of(out), 1)
        print(f"ok: contexts made before the library: {n} rows within {TOL_PP} pp")


def case_activity_clock() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        run_counters(out, GPUACCT_SIM_PM_CLOCK_OFFSET_NS="0")
        rep = one_report(out)
        c = rep["collection"]["counters"]
        check(c["state"] == "active", str(c))
        on_clock(c["devices"][0], planted=0)
        n = check_rows(rep, truth_of(out), 1)
        print(f"ok: samples on CUPTI's clock: not moved, {n} rows within {TOL_PP} pp")


def case_first_sample_from_enable() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        # On CUPTI's own clock: a first sample open since an enable that took 50 ms (the other
        # reading of the H200's -743 ms).  Another clock as well would leave the mapping to
        # within half an interval (counter_sampler_test covers that).
        run_counters(out, GPUACCT_SIM_PM_FIRST_SAMPLE_FROM="enable",
                     GPUACCT_SIM_PM_ENABLE_NS="50000000", GPUACCT_SIM_PM_CLOCK_OFFSET_NS="0")
        rep = one_report(out)
        active_section(rep, 1, planted=0)
        d = rep["collection"]["counters"]["devices"][0]
        check(d["samples_before_start"] == 1, f"samples before the start: {d}")
        check(d["clock"] == "activity" and d["first_sample_lag_ns"] <= -50_000_000,
              f"clock {d['clock']}, first sample lag {d['first_sample_lag_ns']}")
        n = check_rows(rep, truth_of(out), 1)
        check(stat(rep, "counter_samples_lost") == 0, "samples lost")
        print(f"ok: first sample open since the enable: dropped, {n} rows within {TOL_PP} pp")


def case_interval_unit() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        res = run_counters(out, GPUACCT_SIM_PM_TIME_UNIT_NS="4")
        lines = [l for l in res.stderr.splitlines() if "samples are" in l]
        check(len(lines) == 1, f"expected one line on the sample length:\n{res.stderr}")
        check("4000 us long" in lines[0] and "1000000 ns" in lines[0], lines[0])
        d = one_report(out, res)["collection"]["counters"]["devices"][0]
        check(abs(d["interval_seen_ns"] - 4_000_000) <= 1000, f"interval seen: {d}")
        print(f"ok: interval unit: {lines[0]}")


def case_debug() -> None:
    with tempfile.TemporaryDirectory(prefix="gpuacct_ctr_") as out:
        run_counters(out, GPUACCT_COUNTERS_DEBUG="1")
        d = one_report(out)["collection"]["counters"]["devices"][0]
        g = d["debug"]
        check(g["trigger_mode"] == "gpu_time_interval" and g["sampling_interval"] == 1_000_000
              and g["interval_unit"] == "ns", f"trigger: {g}")
        check(0 < g["setup_began"] <= g["enable_before"] <= g["enable_after"]
              <= g["set_config_after"] <= g["start_before"] <= g["start_after"] <= g["stop_at"],
              f"set-up times out of order: {g}")
        check(len(g["first_samples"]) == 5, f"{len(g['first_samples'])} first samples")
        for s in g["first_samples"]:
            check(s["start"] < s["end"] and s["decode_before"] <= s["decode_after"], str(s))
            # raw: on the GPU timer, before its decode returned
            check(s["end"] - PLANTED_CLOCK_OFFSET_NS <= s["decode_after"], str(s))
            check(len(s["values"]) == 5, f"raw values {s['values']}")
        check(g["decodes"] >= g["decodes_with_samples"] >= 1, str(g))
        check(g["offset_low_ns"] <= PLANTED_CLOCK_OFFSET_NS <= g["offset_high_ns"], str(g))
        lag = g["start_to_first_sample_ns"]
        check(abs(lag - PLANTED_CLOCK_OFFSET_NS) < 1_000_000, f"start to first sample {lag}")
        print(f"ok: debug: {len(g['first_samples'])} raw samples, {g['decodes']} decodes, "
              f"bracket [{g['offset_low_ns']}, {g['offset_high_ns']}]")


CASES = {
    "planted": case_planted,
    "two_devices_late": case_two_devices_late,
    "interval_offset": case_interval_offset,
    "overflow": case_overflow,
    "decode_fails": case_decode_fails,
    "refuse_unsupported": lambda: case_refuse("unsupported"),
    "refuse_privileges": lambda: case_refuse("privileges"),
    "refuse_busy": lambda: case_refuse("busy"),
    "refuse_one_device": case_refuse_one_device,
    "stray_context": case_stray_context,
    "no_gpu_collection": case_no_gpu_collection,
    "off": case_off,
    "held_back": case_held_back,
    "short_run": case_short_run,
    "contexts_before_library": case_contexts_before_library,
    "activity_clock": case_activity_clock,
    "first_sample_from_enable": case_first_sample_from_enable,
    "interval_unit": case_interval_unit,
    "debug": case_debug,
}


if __name__ == "__main__":
    sys.exit(e2e.run_case_main(CASES))
