"""Auto-instrumentation of torch loops (optimizer step -> step marks, DataLoader -> data ranges),
checked against the fake library's call log."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from conftest import SHIM, check, clean_env, read_fake_log, run_py

# A training loop with no gpuacct code in it.  argv: num_workers, sleep_s, batches, import_first
LOOP = r"""
import sys
num_workers, sleep_s, batches, import_first = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
if import_first:
    import gpuacct._auto           # what gpuacct_auto.pth / the library does before torch loads
import time, torch
from torch.utils.data import DataLoader, Dataset
if not import_first:
    import gpuacct._auto           # what the library's pending call does mid-run
class Slow(Dataset):
    def __len__(self): return batches * 2
    def __getitem__(self, i):
        time.sleep(sleep_s)
        return torch.randn(8), torch.randn(1)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=2, num_workers=num_workers):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
from gpuacct._auto import auto
print(auto.mode, auto.optimizer_steps, auto.data_waits)
"""


def _run_loop(fake_lib: str, tmp_path: Path, *, workers: int = 0, sleep_s: float = 0.02,
              batches: int = 6, import_first: bool = True, **env: str):
    log = tmp_path / "calls.txt"
    res = check(run_py(LOOP, clean_env(GPUACCT_LIBRARY=fake_lib, FAKE_GPUACCT_LOG=str(log), **env),
                       args=[str(workers), str(sleep_s), str(batches),
                             "1" if import_first else "0"]))
    return res, (read_fake_log(str(log)) if log.exists() else [])


def _data_ranges(calls):
    out, start = [], None
    for t, c, _ in calls:
        if c == "data_push":
            start = t
        elif c == "data_pop":
            out.append((t - start) / 1e9)
    return out


@pytest.mark.requires_torch
@pytest.mark.parametrize("import_first", [True, False], ids=["hook-at-import", "patch-loaded"])
def test_steps_and_data_waits(fake_lib: str, tmp_path: Path, import_first: bool) -> None:
    res, calls = _run_loop(fake_lib, tmp_path, import_first=import_first)
    mode, steps, waits = res.stdout.split()
    import torch.optim.optimizer as o
    assert mode == ("global-hook" if hasattr(o, "register_optimizer_step_post_hook")
                    else "patched-step")
    assert int(steps) == 6
    assert int(waits) == 7  # 6 batches + the fetch that raises StopIteration
    kinds = [c for _, c, _ in calls]
    # One mark per optimizer step, the first at the first optimizer step: what comes before it
    # (the first fetch, the first iteration) is set-up.
    assert kinds.count("step_begin") == 6
    assert kinds[0] == "data_push"
    assert kinds.count("data_push") == kinds.count("data_pop") == 7
    names = {a for _, c, a in calls if c == "data_push"}
    assert names == {"DataLoader"}
    # Each batch is 2 samples x 20 ms of planted sleep.  The first fetch also builds the loader's
    # iterator and runs its first-use imports: on a loaded machine that took 0.8 s once, and it
    # is time the loop did wait for data, so only its lower bound is checked tightly.
    waits_s = _data_ranges(calls)[:6]
    assert 0.035 <= waits_s[0] <= 10.0, waits_s
    for w in waits_s[1:]:
        assert 0.035 <= w <= 0.5, waits_s
    # Every later fetch lies inside a step: after the first step_begin, pushes and marks
    # alternate (a fetch, then that iteration's optimizer step).
    first = kinds.index("step_begin")
    assert kinds[first:].count("data_push") == 6
    assert kinds.index("data_push") < first


@pytest.mark.requires_torch
def test_multiprocess_loader(fake_lib: str, tmp_path: Path) -> None:
    res, calls = _run_loop(fake_lib, tmp_path, workers=2, sleep_s=0.03, batches=5)
    assert res.stdout.split()[1:] == ["5", "6"]
    kinds = [c for _, c, _ in calls]
    assert kinds.count("step_begin") == 5
    assert kinds.count("data_push") == 6
    # Workers prefetch in parallel; the first batch still waits for a worker to start.
    assert _data_ranges(calls)[0] >= 0.05


@pytest.mark.requires_torch
def test_switched_off(fake_lib: str, tmp_path: Path) -> None:
    res, calls = _run_loop(fake_lib, tmp_path, GPUACCT_PYTHON="0")
    assert res.stdout.split() == ["", "0", "0"] or res.stdout.split()[-2:] == ["0", "0"]
    assert calls == []


@pytest.mark.requires_torch
def test_user_steps_win(fake_lib: str, tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    check(run_py(r"""
import gpuacct._auto, gpuacct, torch
m = torch.nn.Linear(2, 1); opt = torch.optim.Adam(m.parameters())
for i in range(4):
    with gpuacct.step():
        m(torch.randn(3, 2)).sum().backward(); opt.step()
""", clean_env(GPUACCT_LIBRARY=fake_lib, FAKE_GPUACCT_LOG=str(log))))
    kinds = [c for _, c, _ in read_fake_log(str(log))]
    assert kinds == ["step_begin", "step_end"] * 4


@pytest.mark.requires_torch
def test_subclass_calling_super_marks_once(fake_lib: str, tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    res = check(run_py(r"""
import gpuacct._auto, torch
class Clipped(torch.optim.SGD):          # defined after the patch
    def step(self, closure=None):
        return super().step(closure)
m = torch.nn.Linear(2, 1)
opts = [Clipped(m.parameters(), lr=0.1), torch.optim.AdamW(m.parameters())]
for opt in opts:
    for i in range(3):
        m(torch.randn(3, 2)).sum().backward(); opt.step()
from gpuacct._auto import auto
print(auto.optimizer_steps)
""", clean_env(GPUACCT_LIBRARY=fake_lib, FAKE_GPUACCT_LOG=str(log))))
    assert res.stdout.strip() == "6"
    kinds = [c for _, c, _ in read_fake_log(str(log))]
    assert kinds == ["step_begin"] * 6


def test_global_hook_preferred() -> None:
    """torch >= 2.0: the global post-hook is used instead of patching classes."""
    from gpuacct import _auto
    hooks = []
    mod = types.ModuleType("fake_optim")
    mod.register_optimizer_step_post_hook = hooks.append  # type: ignore[attr-defined]
    mode = _auto.auto.mode
    try:
        _auto._patch_optimizer(mod)
        assert hooks == [_auto._global_post_hook]
        assert _auto.auto.mode == "global-hook"
    finally:
        _auto.auto.mode = mode


def test_pth_file(tmp_path: Path, fake_lib: str) -> None:
    """gpuacct_auto.pth imports gpuacct._auto only when the environment names libgpuacct."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "gpuacct_auto.pth").write_text((SHIM / "gpuacct_auto.pth").read_text())
    code = ("import site, sys; site.addsitedir(sys.argv[1]); "
            "print('gpuacct._auto' in sys.modules)")
    cases = [
        ({}, "False"),
        ({"CUDA_INJECTION64_PATH": "/opt/other/libinjection.so"}, "False"),
        ({"CUDA_INJECTION64_PATH": fake_lib}, "True"),
        ({"GPUACCT_LIBRARY": fake_lib}, "True"),
        ({"GPUACCT_LIBRARY": fake_lib, "GPUACCT_PYTHON": "0"}, "False"),
    ]
    for env, want in cases:
        res = check(run_py(code, clean_env(**env), args=[str(site_dir)]))
        assert res.stdout.strip() == want, (env, res.stderr)
