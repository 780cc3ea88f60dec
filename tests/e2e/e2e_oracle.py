"""What the end-to-end cases expect, computed from what the simulated program planted: the
verdict the planted walls imply, the work e2e_driver --work declares, and the cost section's
work computed from it.
"""

from __future__ import annotations

TOL = 0.01  # of the step time

BANDS = {"data": (0.05, 0.20), "launch": (0.03, 0.15), "communication": (0.03, 0.15),
         "other": (0.10, 0.25)}


def expected_verdict(truth: dict, marks: str) -> str:
    """The verdict run_summary.h's bands give for the truth's walls (the scenarios' copies are
    host-to-device input copies: data wall).  Without marks, data waits are host_other."""
    t = truth["totals_ns"]
    total = sum(t[c] for c in truth["categories"])
    data = t["copy"] + (t["data_wait"] if marks != "none" else 0)
    other = t["host_other"] + (t["data_wait"] if marks == "none" else 0)
    if marks == "none":  # the pause before an input copy: inferred data wait (accounting.md)
        inferred = truth.get("params", {}).get("unmarked_input_pause_ns", 0) * truth["num_steps"]
        data += inferred
        other -= inferred
    walls = {"data": data, "launch": t["launch_gap"],
             "communication": t["communication_exposed"], "other": other}
    best = None
    for bound, (moderate, high) in BANDS.items():
        share = walls[bound] / total
        sev = 2 if share >= high else 1 if share >= moderate else 0
        if sev and (best is None or (sev, share) > best[:2]):
            best = (sev, share, bound)
    return best[2] if best else "compute"


def planted_work(step_number: int):
    """(tokens, samples) e2e_driver --work declares in step `step_number`."""
    return 1000.0 * (step_number + 1) + 0.5, float(step_number % 3 + 1)


def expected_work(rep: dict, price: float) -> dict:
    """The cost section's `work` computed here from the planted work and the report's rows:
    the summary steps (warm-up and slow start left out), each step's time its slowest row."""
    slow = set(rep["summary"]["warmup"].get("slow_start", {}).get("steps", []))
    step_s, number = {}, {}
    for r in rep["steps"]:
        if r["warmup"] or r["step_index"] in slow:
            continue
        step_s[r["step_index"]] = max(step_s.get(r["step_index"], 0), r["duration_ns"] / 1e9)
        number[r["step_index"]] = r["step_number"]
    gpus = rep["cost"]["gpus"]
    seconds = sum(step_s.values())
    out = {}
    for unit, i, per, key in (("tokens", 0, 1e6, "per_million_tokens"),
                              ("samples", 1, 1e3, "per_1000_samples")):
        total = sum(planted_work(n)[i] for n in number.values())
        out[unit] = {"steps": len(number), "total": total, "per_second_per_gpu":
                     total / (seconds * gpus), key: price * gpus * seconds / 3600 / total * per}
    return out
