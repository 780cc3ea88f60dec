#!/usr/bin/env python3
"""A PyTorch training loop with one designed bottleneck, for trying gpuacct on a real GPU -- or
on the CPU, where there is no GPU wall to find but the steps, their data waits, the live step
stream, the report, the metrics and the plot are the same (README, "Try it without a GPU").

    CUDA_INJECTION64_PATH=build/inject/libgpuacct.so python examples/train.py --wall data
    gpuacct-py run -- python examples/train.py --wall launch          (the launcher)
    torchrun --nproc-per-node 2 examples/train.py --wall comm          (needs >= 2 GPUs)
    gpuacct run -- python3 examples/train.py --device cpu             (no GPU: host-side rows)

--wall picks the bottleneck:
  data     each batch takes ~30 ms to "decode" in Dataset.__getitem__ (num_workers=0)
  launch   hundreds of tiny element-wise ops per step on a 32-element tensor
  compute  large bf16 matmuls
  comm     an all-reduce of 256 MiB per step (torch.distributed, NCCL), little compute

No gpuacct call is needed: the library imports gpuacct._auto in CPython, which marks a step at
every optimizer step and a data wait around every DataLoader fetch.  --marks nvtx instead
wraps steps in NVTX ranges named "train_step"; to see the library's own step detection
(repeating kernel sequence) run with GPUACCT_PYTHON=0 and --marks none.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

try:
    import torch
    from torch.utils.data import DataLoader, Dataset
except ImportError:
    sys.exit(f"examples/train.py needs PyTorch, which {sys.executable} cannot import: "
             "pip install torch (CPU wheels: --index-url https://download.pytorch.org/whl/cpu), "
             "or run it with an interpreter that has it (Debian: apt install python3-torch, "
             "then python3 from /usr/bin)")


class SlowDataset(Dataset):
    def __init__(self, n: int, delay_s: float, dim: int):
        self.n, self.delay_s, self.dim = n, delay_s, dim

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.randn(self.dim), torch.randn(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wall", choices=["data", "launch", "compute", "comm"], default="data")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--marks", choices=["auto", "nvtx", "none"], default="auto")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                    help="auto: cuda when a GPU is there, else cpu")
    a = ap.parse_args()
    on_gpu = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    if not on_gpu and a.wall in ("comm", "compute"):
        ap.error(f"--wall {a.wall} needs a GPU (on the CPU: --wall data or launch)")
    if not on_gpu and a.marks == "nvtx":
        ap.error("--marks nvtx needs CUDA (on the CPU: --marks auto)")

    dist = a.wall == "comm"
    if dist:
        import torch.distributed as td
        if int(os.environ.get("WORLD_SIZE", "1")) < 2:
            raise SystemExit("--wall comm needs torchrun with >= 2 processes (GPUs)")
        td.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device("cuda" if on_gpu else "cpu")

    dim = 4096 if a.wall == "compute" else 256
    batch = 8
    delay = 0.03 / batch if a.wall == "data" else 0.0
    loader = DataLoader(SlowDataset(a.steps * batch, delay, dim), batch_size=batch)
    model = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.ReLU(),
                                torch.nn.Linear(dim, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    big = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16) if a.wall == "compute" else None
    tiny = torch.randn(32, device=dev)
    comm_buf = torch.randn(64 << 20, device=dev) if dist else None

    t0 = time.time()
    for step, (x, y) in enumerate(loader):
        if a.marks == "nvtx":
            torch.cuda.nvtx.range_push("train_step")
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        if a.wall == "launch":
            t = tiny
            for _ in range(400):
                t = t * 1.0001 + 0.0001
            loss = loss + t.sum() * 0
        elif a.wall == "compute":
            for _ in range(8):
                big = (big @ big).clamp_(-1, 1)
            loss = loss + big[0, 0].float() * 0
        elif dist:
            import torch.distributed as td
            td.all_reduce(comm_buf)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the step's sync
        if a.marks == "nvtx":
            torch.cuda.nvtx.range_pop()
    if on_gpu:
        torch.cuda.synchronize()
    print(f"{a.wall}: {a.steps} steps on {dev.type} in {time.time() - t0:.2f} s")
    if dist:
        import torch.distributed as td
        td.destroy_process_group()


if __name__ == "__main__":
    main()
