"""Auto-instrumentation of PyTorch training loops: no code change.

Importing this module installs it (idempotent).  Two things import it:

* libgpuacct.so itself, through ``Py_AddPendingCall``, when it is loaded into a CPython process
  (injected by the CUDA driver or LD_PRELOADed);
* ``gpuacct_auto.pth`` (installed by pip next to the package) at interpreter start, but only
  when CUDA_INJECTION64_PATH or GPUACCT_LIBRARY names libgpuacct.

``GPUACCT_PYTHON=0`` switches it off.  What it marks:

* step boundaries at the optimizer step: torch's global optimizer step post-hook
  (``torch.optim.optimizer.register_optimizer_step_post_hook``, torch >= 2.0) where it exists,
  else a wrapper around every ``Optimizer`` subclass's ``step`` (torch 1.13).  Each completed
  optimizer step calls ``gpuacct_step_begin(-1)``, which ends the open step and begins the
  next, so steps tile the loop; the step still open after the last optimizer step is dropped by
  the library at exit.  The first step begins at the first optimizer step: everything before
  it -- the model copied in, the first iteration's one-time work -- is set-up, which the
  library reports apart.  A loop that never steps an optimizer (inference) gets no step mark
  from here, and the library detects its steps;
* data-wait ranges around ``_BaseDataLoaderIter.__next__`` (single- and multi-process
  loaders): the main thread waiting for a batch.

Once the program marks steps itself (``gpuacct.step``/``mark_step``/``step_begin``), the automatic
step marks stand down.  torch need not be imported yet: a post-import hook patches it when it is.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _lib
from .api import state

_OPTIM = "torch.optim.optimizer"
_DATALOADER = "torch.utils.data.dataloader"
_WRAPPED = "__gpuacct_wrapped__"

_lock = threading.RLock()
_installed = False
_patched: Dict[str, bool] = {}
_tls = threading.local()
_DATA_NAME = b"DataLoader"


class _AutoState:
    __slots__ = ("step_open", "optimizer_steps", "data_waits", "mode")

    def __init__(self) -> None:
        self.step_open = False  # an automatic step has been begun
        self.optimizer_steps = 0
        self.data_waits = 0
        self.mode = ""  # "global-hook" or "patched-step"


auto = _AutoState()


def enabled() -> bool:
    return os.environ.get("GPUACCT_PYTHON", "1").strip() != "0"


# --- the marks ---------------------------------------------------------------------------------

def _on_optimizer_step() -> None:
    auto.optimizer_steps += 1
    if state.user_steps:
        return
    auto.step_open = True
    # step_begin ends the open step and begins the next (like step_mark), but the step left
    # open after the last optimizer step (evaluation, checkpointing, shutdown) stays an open
    # begin-step, which the library drops at exit instead of accounting it as a step.
    _lib.api.step_begin(-1)


def _global_post_hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
    _on_optimizer_step()


def _wrap_step(step: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(step, _WRAPPED, False):
        return step

    @functools.wraps(step)
    def gpuacct_step(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_tls, "depth", 0)
        _tls.depth = depth + 1
        try:
            result = step(*args, **kwargs)
        finally:
            _tls.depth = depth
        if depth == 0:  # outermost: a subclass calling super().step() marks once
            _on_optimizer_step()
        return result

    setattr(gpuacct_step, _WRAPPED, True)
    return gpuacct_step


def _wrap_next(next_fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(next_fn, _WRAPPED, False):
        return next_fn
    api = _lib.api

    @functools.wraps(next_fn)
    def __next__(self: Any) -> Any:
        auto.data_waits += 1
        api.data_push(_DATA_NAME)
        try:
            return next_fn(self)
        finally:
            api.data_pop()

    setattr(__next__, _WRAPPED, True)
    return __next__


# --- patching torch ----------------------------------------------------------------------------

def _all_subclasses(cls: type) -> List[type]:
    out: List[type] = []
    todo = [cls]
    while todo:
        c = todo.pop()
        for sub in c.__subclasses__():
            if sub not in out:
                out.append(sub)
                todo.append(sub)
    return out


def _wrap_class_step(cls: type) -> None:
    fn = cls.__dict__.get("step")
    if fn is not None and callable(fn) and not getattr(fn, _WRAPPED, False):
        setattr(cls, "step", _wrap_step(fn))


def _patch_optimizer(mod: ModuleType) -> None:
    register = getattr(mod, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(_global_post_hook)
        auto.mode = "global-hook"
        return
    opt = getattr(mod, "Optimizer", None)
    if opt is None:
        _warn("this torch has neither torch.optim's step hook nor its Optimizer class: steps "
              "come from the library's detection")
        auto.mode = "unknown-torch"
        return
    for cls in [opt] + _all_subclasses(opt):
        _wrap_class_step(cls)
    previous = opt.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if previous is not None:
            previous.__func__(cls, **kwargs)
        else:
            super(opt, cls).__init_subclass__(**kwargs)
        _wrap_class_step(cls)

    opt.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
    auto.mode = "patched-step"


def _patch_dataloader(mod: ModuleType) -> None:
    it = getattr(mod, "_BaseDataLoaderIter", None)
    if it is None:
        return
    it.__next__ = _wrap_next(it.__dict__["__next__"])


_PATCHERS: Dict[str, Callable[[ModuleType], None]] = {
    _OPTIM: _patch_optimizer,
    _DATALOADER: _patch_dataloader,
}


def describe() -> str:
    """What is instrumented, in one line (the report's collection section shows it)."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None) if torch is not None else None
    parts = [f"torch {version}" if version else "torch not imported yet"]
    if auto.mode == "global-hook":
        parts.append("optimizer steps (global step hook)")
    elif auto.mode == "patched-step":
        parts.append("optimizer steps (Optimizer.step wrapped)")
    elif auto.mode == "unknown-torch":
        parts.append("no optimizer hook (steps detected)")
    if _patched.get(_DATALOADER):
        parts.append("DataLoader waits")
    return ", ".join(parts)


def _report() -> None:
    try:
        _lib.api.python_status(describe().encode("utf-8", "replace"))
    except Exception:  # never break the training program
        pass


def _patch(name: str, mod: ModuleType) -> None:
    with _lock:
        if _patched.get(name):
            return
        _patched[name] = True
        try:
            _PATCHERS[name](mod)
        except Exception as e:  # never break the training program
            _warn(f"could not instrument {name}: {e!r}")
        _report()


class _PostImportLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, name: str) -> None:
        self._inner = inner
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)  # type: ignore[attr-defined]
        _patch(self._name, module)

    def __getattr__(self, attr: str) -> Any:  # get_code, get_source, is_package, ...
        return getattr(self._inner, attr)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the modules we patch so they are patched right after they run."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None
                  ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in _PATCHERS or _patched.get(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PostImportLoader(spec.loader, fullname)
                return spec
        return None


_finder = _PostImportFinder()


def _warn(msg: str) -> None:
    if os.environ.get("GPUACCT_QUIET", "0") != "1":
        sys.stderr.write(f"gpuacct: {msg}\n")


def install() -> bool:
    """Bind the library and instrument torch (now, or when it is imported).  Idempotent.

    Returns False when switched off (GPUACCT_PYTHON=0)."""
    global _installed
    if not enabled():
        return False
    with _lock:
        if _installed:
            return True
        _installed = True
        _lib.bind(retry=True)
        pending = False
        for name in _PATCHERS:
            mod = sys.modules.get(name)
            if mod is not None:
                _patch(name, mod)
            else:
                pending = True
        if pending and _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    return True


def uninstall_finder() -> None:
    """Remove the post-import hook (tests)."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


try:
    install()
except Exception as _e:  # pragma: no cover - never break interpreter start
    _warn(f"auto-instrumentation failed: {_e!r}")
