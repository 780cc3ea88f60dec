#!/usr/bin/env python3
"""PyTorch training loops with known walls, timed by their own clock, for the GPU check.

    python3 tests/gpu/loops.py SCENARIO [--iters 25] [--window 5:20] [--clock FILE] [--device cuda]
                                        [--profile]
    python3 tests/gpu/loops.py --serve   (tests/gpu/overhead_matrix.py: runs many, one torch import)

No gpuacct call anywhere: this is what a user's loop looks like.  Run it under
`CUDA_INJECTION64_PATH=.../libgpuacct.so` exactly as typed (no PYTHONPATH), from any directory.

Every loop: fetch a batch (where there is a DataLoader) -> forward -> backward -> loss.item()
-> optimizer.step().  The loop's own clock (no profiler) goes to --clock, one JSON line per
iteration: `step_ms` from one optimizer.step() return to the next (iteration 0 from the loop's
start) and `fetch_ms` (time inside next() on the DataLoader), then a summary line with the
mean over iterations 5-19 (the window the overhead figures use; --window A:B for others).
--profile runs the loop under torch.profiler (CPU and CUDA activities), as a user would.

--serve: reads one JSON request a line on stdin ({"scenario", "iters", "window", "clock",
"profile", "env": {...}, "log", "timeout_s"}) and runs each in a child forked from this
process, which imported torch once and never touched CUDA: the child sets `env` (e.g.
CUDA_INJECTION64_PATH) before its first CUDA call, so the driver loads what it names, and
exits normally (the library's exit handlers run).  A first line says the import is done
({"ready": true}); one JSON line answers each request ({"rc", "wall_s", "timed_out"}).  A child
past timeout_s is killed.

Scenarios (what a user expects to read):
  launch    MLP of 200 x (Linear(512, 512), ReLU), batch 32, fp32, SGD(foreach): ~2,000 small
            kernels per step; launch-bound.  400 parameter copies before the loop (.to()).
  compute   4 x Linear(8192, 8192) in bf16 on 16,384 rows: compute-bound.
  graph     the launch MLP through torch.cuda.make_graphed_callables; optimizer outside.
  data      ResNet-50 (bf16 autocast, channels_last, batch 64) fed by JPEG decode +
            RandomResizedCrop in the main process (num_workers=0, pin_memory): data-bound.
  accum     gradient accumulation: 4 micro-batches (forward+backward) per optimizer step, a
            slow DataLoader (15 ms per micro-batch): data-bound, one step per optimizer step.
  syncs     the launch MLP made smaller (50 layers) with ten .item() syncs per iteration: the
            same steps as one sync (a sync is not an iteration); launch-bound.
  compile   torch.compile of an MLP (first iterations compile: set-up, not steps).
  tiny      a small CPU-friendly MLP (smoke tests without a GPU: --device cpu).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from typing import Any, Callable, Iterator, Optional, Tuple

import torch
from torch import nn


def mlp(layers: int, width: int) -> nn.Sequential:
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


class SleepDataset(torch.utils.data.Dataset):
    """Each item costs `delay_s` of host time (a decode stand-in)."""

    def __init__(self, n: int, delay_s: float, shape: Tuple[int, ...]):
        self.n, self.delay_s, self.shape = n, delay_s, shape

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return torch.randn(self.shape), torch.randn(1)


class JpegDataset(torch.utils.data.Dataset):
    """Real JPEG decode + RandomResizedCrop on the host (PIL + torchvision)."""

    def __init__(self, n: int, size: int = 224):
        from PIL import Image  # noqa: F401  (torchvision needs it)
        import numpy as np
        from torchvision import transforms

        rng = np.random.default_rng(0)
        self.blobs = []
        for _ in range(16):
            img = Image.fromarray(rng.integers(0, 255, (500, 375, 3), dtype=np.uint8))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=90)
            self.blobs.append(buf.getvalue())
        self.n = n
        self.tf = transforms.Compose([
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, int]:
        from PIL import Image
        img = Image.open(io.BytesIO(self.blobs[i % len(self.blobs)])).convert("RGB")
        return self.tf(img), i % 1000


class Clock:
    """The loop's own clock: optimizer.step() return to return, and time inside next()."""

    def __init__(self, path: Optional[str], scenario: str, window: Tuple[int, int] = (5, 20)):
        self.path, self.scenario, self.window = path, scenario, window
        self.rows: list = []
        self.t_last = time.perf_counter()
        self.fetch = 0.0

    def start(self) -> None:
        """The loop begins: iteration 0 is timed from here (set-up before it is not)."""
        self.t_last, self.fetch = time.perf_counter(), 0.0

    def timed_next(self, it: Iterator[Any]) -> Any:
        t = time.perf_counter()
        try:
            return next(it)
        finally:
            self.fetch += time.perf_counter() - t

    def step_done(self, loss: float) -> None:
        now = time.perf_counter()
        self.rows.append({"step": len(self.rows), "step_ms": (now - self.t_last) * 1e3,
                          "fetch_ms": self.fetch * 1e3, "loss": loss})
        self.t_last, self.fetch = now, 0.0

    def close(self) -> None:
        lo, hi = self.window
        win = [r for r in self.rows if lo <= r["step"] < hi]
        summ = {"scenario": self.scenario, "steps": len(self.rows), "window": [lo, hi],
                "window_ms_per_step": sum(r["step_ms"] for r in win) / max(1, len(win)),
                "window_fetch_ms_per_step": sum(r["fetch_ms"] for r in win) / max(1, len(win)),
                "injected": os.environ.get("CUDA_INJECTION64_PATH", ""),
                "sample": os.environ.get("GPUACCT_SAMPLE", ""),
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
        lines = [json.dumps(r) for r in self.rows] + [json.dumps({"summary": summ})]
        if self.path:
            with open(self.path, "w") as f:
                f.write("\n".join(lines) + "\n")
        print(json.dumps({"summary": summ}), flush=True)


def run_plain(model: nn.Module, opt: torch.optim.Optimizer, batch: Callable[[], Any],
              iters: int, clock: Clock, syncs: int = 1,
              forward: Optional[Callable[..., torch.Tensor]] = None) -> None:
    fwd = forward or model
    clock.start()
    for _ in range(iters):
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        out = fwd(x)
        loss = (out.float() - y).pow(2).mean()
        loss.backward()
        value = 0.0
        for _ in range(syncs):
            value = loss.item()
        opt.step()
        clock.step_done(value)


def scenario(name: str, dev: torch.device, iters: int, clock: Clock) -> None:
    torch.manual_seed(0)
    if name in ("launch", "syncs", "tiny"):
        layers, width, rows = {"launch": (200, 512, 32), "syncs": (50, 512, 32),
                               "tiny": (8, 64, 16)}[name]
        model = mlp(layers, width).to(dev)  # parameter copies before the loop
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
        x = torch.randn(rows, width, device=dev)
        y = torch.randn(rows, width, device=dev)
        run_plain(model, opt, lambda: (x, y), iters, clock, syncs=10 if name == "syncs" else 1)
    elif name == "compute":
        model = nn.Sequential(*[nn.Linear(8192, 8192, bias=False) for _ in range(4)])
        model = model.to(dev, dtype=torch.bfloat16)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
        x = torch.randn(16384, 8192, device=dev, dtype=torch.bfloat16)
        y = torch.randn(16384, 8192, device=dev, dtype=torch.bfloat16)
        run_plain(model, opt, lambda: (x, y), iters, clock)
    elif name == "graph":
        model = mlp(200, 512).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
        x = torch.randn(32, 512, device=dev)
        y = torch.randn(32, 512, device=dev)
        graphed = torch.cuda.make_graphed_callables(model, (x,))
        run_plain(model, opt, lambda: (x, y), iters, clock, forward=graphed)
    elif name == "compile":
        model = mlp(24, 1024).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
        x = torch.randn(64, 1024, device=dev)
        y = torch.randn(64, 1024, device=dev)
        run_plain(model, opt, lambda: (x, y), iters, clock, forward=torch.compile(model))
    elif name == "data":
        import torchvision
        model = torchvision.models.resnet50().to(dev, memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)
        loader = torch.utils.data.DataLoader(JpegDataset(64 * (iters + 1)), batch_size=64,
                                             num_workers=0, pin_memory=True)
        it = iter(loader)
        crit = nn.CrossEntropyLoss()
        clock.start()
        for _ in range(iters):
            x, y = clock.timed_next(it)
            x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
            y = y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = crit(model(x), y)
            loss.backward()
            value = loss.item()
            opt.step()
            clock.step_done(value)
    elif name == "accum":
        model = mlp(8, 1024).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
        micro = 4
        loader = torch.utils.data.DataLoader(SleepDataset(micro * (iters + 1) * 8, 0.015 / 8,
                                                          (1024,)),
                                             batch_size=8, num_workers=0, pin_memory=dev.type == "cuda")
        it = iter(loader)
        clock.start()
        for _ in range(iters):
            opt.zero_grad(set_to_none=True)
            value = 0.0
            for _ in range(micro):
                x, y = clock.timed_next(it)
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                loss = (model(x) - y).pow(2).mean() / micro
                loss.backward()
                value += loss.item()
            opt.step()
            clock.step_done(value)
    else:
        raise SystemExit(f"loops.py: unknown scenario {name!r}")


def parse_window(text: str) -> Tuple[int, int]:
    lo, _, hi = text.partition(":")
    try:
        w = (int(lo), int(hi))
    except ValueError:
        raise SystemExit(f"loops.py: --window {text!r} is not A:B")
    if not 0 <= w[0] < w[1]:
        raise SystemExit(f"loops.py: --window {text!r}: need 0 <= A < B")
    return w


def run_one(name: str, device: str, iters: int, clock_path: Optional[str],
            window: Tuple[int, int], profile: bool) -> int:
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("loops.py: CUDA is not available (use --device cpu for a smoke run)",
              file=sys.stderr)
        return 2
    clock = Clock(clock_path, name, window)
    if profile:
        from torch.profiler import ProfilerActivity, profile as torch_profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with torch_profile(activities=acts):
            scenario(name, dev, iters, clock)
            if dev.type == "cuda":
                torch.cuda.synchronize()
    else:
        scenario(name, dev, iters, clock)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    clock.close()
    return 0


def serve() -> int:
    """--serve (module docstring): one forked child per request line."""
    import signal
    print(json.dumps({"ready": True, "torch": torch.__version__}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            name, iters = str(req["scenario"]), int(req["iters"])
            window = parse_window(str(req.get("window", "5:20")))
            timeout = float(req.get("timeout_s", 120))
        except (ValueError, KeyError, TypeError, SystemExit) as e:
            print(json.dumps({"rc": 2, "wall_s": 0.0, "timed_out": False, "error": str(e)}),
                  flush=True)
            continue
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the loop
            code = 1
            try:
                log = os.open(req.get("log") or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                              0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                for k, v in (req.get("env") or {}).items():
                    os.environ[str(k)] = str(v)
                code = run_one(name, str(req.get("device", "cuda")), iters,
                               req.get("clock") or None, window, bool(req.get("profile")))
            except BaseException:  # noqa: BLE001: anything the loop raised, said in its log
                import traceback
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            sys.exit(code)  # a normal exit: C atexit handlers (the library's report) run
        timed_out = False
        status = 0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        rc = os.waitstatus_to_exitcode(status)
        print(json.dumps({"rc": rc, "wall_s": round(time.monotonic() - t0, 3),
                          "timed_out": timed_out}), flush=True)
    return 0


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        return serve()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--iters", type=int, default=25)
    ap.add_argument("--window", default="5:20", help="iterations A..B-1 make the summary's mean")
    ap.add_argument("--clock", default="")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--profile", action="store_true", help="run under torch.profiler")
    a = ap.parse_args()
    if a.iters < 1:
        ap.error("--iters must be >= 1")
    return run_one(a.scenario, a.device, a.iters, a.clock or None, parse_window(a.window),
                   a.profile)


if __name__ == "__main__":
    sys.exit(main())
