"""gpuacct: where each training step's time goes (compute, communication, data, launch, other).

Marks (no-ops when libgpuacct.so is not loaded)::

    import gpuacct
    with gpuacct.step(): ...          # or @gpuacct.step, gpuacct.mark_step()
    with gpuacct.data("decode"): ...  # time waiting for input
    with gpuacct.range("eval"): ...   # shown in reports, not used for accounting
    gpuacct.set_step_flops(6 * n_params * tokens)
    gpuacct.set_step_work(tokens=tokens)   # for $ per million tokens

Results::

    run = gpuacct.load("gpuacct-report.json")   # or the .jsonl stream of a running job
    run.steps, run.summary, run.verdict

Importing gpuacct never imports torch, pandas or matplotlib.  See docs/python.md.
"""

from __future__ import annotations

from typing import Any

from . import _lib
from .api import (attach, data, data_pop, data_push, flush, is_active, is_loaded, mark_step,
                  range, range_pop, range_push, set_step_flops, set_step_work, step, step_begin,
                  step_end)

__version__ = "0.1.0"

__all__ = [
    "attach", "data", "data_pop", "data_push", "flush", "is_active", "is_loaded", "mark_step",
    "range", "range_pop", "range_push", "set_step_flops", "set_step_work", "step", "step_begin",
    "step_end",
    "load", "Run", "plot_walls", "find_library", "__version__",
]

find_library = _lib.find_library

# Reach an instance that is already loaded (injected by the driver, LD_PRELOAD), or load the one
# the environment names.  Never raises.
try:
    _lib.bind()
except Exception:  # pragma: no cover
    pass


def __getattr__(name: str) -> Any:  # PEP 562: heavy parts load on first use
    if name in ("load", "Run"):
        from . import results
        return getattr(results, name)
    if name == "plot_walls":
        from . import plot
        return plot.plot_walls
    raise AttributeError(f"module 'gpuacct' has no attribute {name!r}")
