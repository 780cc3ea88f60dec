"""Change points (analysis/report/change_points.h, docs/change_points.md).

1. The C++ search agrees with an independent implementation: ruptures' Pelt with the L2 cost
   at the same penalty and minimum segment, on random piecewise-constant series (breakpoints
   within +-2 steps, and the C++ optimum is never worse).
2. End to end: a synthetic run with a planted data-wall shift and a periodic host pause,
   written by `gpuacct synth` and read by `gpuacct analyze`, has both in its report's
   `change_points` section and in the terminal summary.
"""
import json
import subprocess

import numpy as np
import pytest
import ruptures

from conftest import build_dir

MIN_SEGMENT = 5


def _tool() -> str:
    path = build_dir() / "analysis" / "change_points_tool"
    if not path.is_file():
        pytest.fail(f"{path} is missing: build the change_points_tool target")
    return str(path)


def _cli() -> str:
    path = build_dir() / "bin" / "gpuacct"
    if not path.is_file():
        pytest.fail(f"{path} is missing: build the gpuacct_cli target")
    return str(path)


def _cpp_breakpoints(y: np.ndarray, penalty: float, **extra: int) -> list:
    args = [_tool(), "--penalty", repr(penalty), "--min-segment", str(MIN_SEGMENT)]
    for k, v in extra.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    res = subprocess.run(args, input=" ".join(repr(float(v)) for v in y), text=True,
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["breakpoints"]


def _penalized_cost(y: np.ndarray, breaks: list, penalty: float) -> float:
    bounds = [0, *breaks, len(y)]
    cost = sum(float(((y[a:b] - y[a:b].mean()) ** 2).sum()) for a, b in zip(bounds, bounds[1:]))
    return cost + penalty * len(breaks)


def _random_piecewise(rng: np.random.Generator, n: int) -> np.ndarray:
    changes = int(rng.integers(0, 4))
    cuts = sorted(rng.choice(np.arange(30, n - 30), size=changes, replace=False).tolist())
    levels = rng.normal(0.0, 3.0, size=changes + 1)
    y = np.empty(n)
    for level, a, b in zip(levels, [0, *cuts], [*cuts, n]):
        y[a:b] = level
    return y + rng.normal(0.0, 1.0, size=n)


@pytest.mark.parametrize("seed", range(8))
def test_breakpoints_agree_with_ruptures_pelt(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(150, 400))
    y = _random_piecewise(rng, n)
    # The default penalty's form (ChangePointOptions): 4 sigma^2 ln n, sigma = 1 here.
    penalty = 4.0 * np.log(n)
    ours = _cpp_breakpoints(y, penalty)
    theirs = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(y).predict(pen=penalty)
    theirs = theirs[:-1]  # ruptures ends the list with n
    assert len(ours) == len(theirs), (ours, theirs)
    for a, b in zip(ours, theirs):
        assert abs(a - b) <= 2, (ours, theirs)
    # Both minimise the same objective; ours is exact, so never worse.
    assert _penalized_cost(y, ours, penalty) <= _penalized_cost(y, theirs, penalty) + 1e-6


def test_block_search_agrees_with_ruptures_on_a_long_series() -> None:
    """Past max-blocks values the search runs over blocks, then places each change exactly."""
    rng = np.random.default_rng(7)
    n = 1200
    y = np.r_[np.zeros(500), np.full(400, 3.0), np.full(300, -1.0)] + rng.normal(0, 1.0, n)
    penalty = 4.0 * np.log(n)
    blocked = _cpp_breakpoints(y, penalty, max_blocks=200)  # blocks of 6 steps
    theirs = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(y).predict(pen=penalty)
    assert len(blocked) == len(theirs) - 1 == 2, (blocked, theirs)
    for a, b in zip(blocked, theirs):
        assert abs(a - b) <= 2, (blocked, theirs)


def test_bad_input_is_one_line_and_nonzero() -> None:
    res = subprocess.run([_tool(), "--penalty", "3"], input="1 2 x", text=True,
                         capture_output=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "not a number" in res.stderr


def test_planted_run_end_to_end(tmp_path) -> None:
    rec = tmp_path / "run.gpuacct"
    subprocess.run([_cli(), "synth", "--preset", "balanced", "--steps", "1500",
                    "--shift-step", "900", "--shift-data-ms", "4",
                    "--spike-every", "100", "--spike-host-ms", "150", "-o", str(rec)],
                   check=True, capture_output=True, timeout=300)
    res = subprocess.run([_cli(), "analyze", str(rec), "--no-files", "--json"], text=True,
                         capture_output=True, timeout=300)
    assert res.returncode == 0, res.stderr
    section = json.loads(res.stdout)["change_points"]
    assert section["searched"] is True
    assert len(section["shifts"]) == 1, section["shifts"]
    shift = section["shifts"][0]
    assert abs(shift["step"] - 900) <= 2
    assert shift["wall"] == "data"
    assert shift["change_ms"] == pytest.approx(4.0, abs=0.3)
    assert shift["wall_change_ms"]["data"] == pytest.approx(4.0, abs=0.3)
    assert len(section["periodic"]) == 1, section["periodic"]
    spikes = section["periodic"][0]
    assert spikes["period_steps"] == 100
    # The pause ends loop step 99 + 100k on the host; the GPU's idle time after it belongs
    # to the next step's window (docs/accounting.md), so the slow step is 99 or 100.
    assert spikes["first_step"] % 100 in (99, 0)
    assert spikes["wall"] == "other"
    assert spikes["occurrences"] == spikes["expected"] >= 13
    # The terminal summary carries both, in at most three lines.
    text = subprocess.run([_cli(), "analyze", str(rec), "--no-files"], text=True,
                          capture_output=True, timeout=300, check=True).stdout
    assert "step time changed level: from step 90" in text
    assert "every 100 steps a slow step" in text and "checkpointing" in text
