"""ctypes binding to libgpuacct.so (the C API in include/gpuacct/gpuacct.h).

Resolution order for the library path:

1. ``GPUACCT_LIBRARY``;
2. ``CUDA_INJECTION64_PATH`` when its file name contains ``libgpuacct``;
3. ``LD_PRELOAD`` entries naming ``libgpuacct``;
4. a copy shipped next to the package (``gpuacct/lib/libgpuacct.so``), ``$GPUACCT_BUILD_DIR``
   and, in a source checkout, the newest ``build*/inject/libgpuacct.so``.

For every candidate the binding first asks the dynamic loader for an instance that is already
loaded (``RTLD_NOLOAD``): the CUDA driver dlopen()s injected libraries with local symbol
visibility, so a plain symbol lookup in the process would not find them.  Only paths named by the
environment (1-3) are loaded when they are not loaded yet -- that is how a CPU-only run records
host ranges before (or without) CUDA.  The fallback copies (4) are only *found* here (the
launcher injects them); importing gpuacct never starts recording on its own.

When no library is reachable every entry point is a Python no-op.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Callable, List, Optional, Tuple

LIB_NAME = "libgpuacct.so"
API_VERSION = 1

_RTLD_NOW = getattr(os, "RTLD_NOW", 2)
_RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)


def _names_gpuacct(path: str) -> bool:
    return "libgpuacct" in os.path.basename(path)


def env_library_paths() -> List[str]:
    """Library paths named by the environment, most specific first."""
    out: List[str] = []
    lib = os.environ.get("GPUACCT_LIBRARY", "").strip()
    if lib:
        out.append(lib)
    inj = os.environ.get("CUDA_INJECTION64_PATH", "").strip()
    if inj and _names_gpuacct(inj):
        out.append(inj)
    for entry in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        if _names_gpuacct(entry):
            out.append(entry)
    return out


def _repo_root() -> Optional[Path]:
    root = Path(__file__).resolve().parent.parent.parent
    if (root / "include" / "gpuacct" / "gpuacct.h").is_file():
        return root
    return None


def fallback_library_paths() -> List[str]:
    """Copies that exist on disk but are not named by the environment."""
    pkg = Path(__file__).resolve().parent
    cands: List[Path] = [pkg / "lib" / LIB_NAME, pkg / LIB_NAME]
    build = os.environ.get("GPUACCT_BUILD_DIR", "").strip()
    if build:
        cands.append(Path(build) / "inject" / LIB_NAME)
    root = _repo_root()
    if root is not None:
        builds = [p for p in root.glob("build*/inject/" + LIB_NAME) if p.is_file()]
        builds.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        cands.extend(builds)
    return [str(p) for p in cands if p.is_file()]


def find_library() -> Optional[str]:
    """Absolute path of the library a launcher should inject, or None."""
    for p in env_library_paths() + fallback_library_paths():
        if os.path.isfile(p):
            return os.path.abspath(p)
    return None


def _noop() -> None:
    return None


def _noop1(_arg: object) -> None:
    return None


def _noop2(a: object, b: object) -> None:
    return None


def _zero() -> int:
    return 0


class Api:
    """The C entry points, or Python no-ops when the library is not reachable.

    Attributes are plain callables so a call costs one attribute lookup plus the call.
    """

    __slots__ = (
        "loaded", "path", "how", "handle", "step_begin", "step_end", "step_mark", "data_push",
        "data_pop", "range_push", "range_pop", "set_step_flops", "set_step_work", "flush",
        "is_active", "python_status",
        "api_version",
    )

    def __init__(self) -> None:
        self.loaded = False
        self.path: Optional[str] = None
        self.how = ""  # "attached" (already loaded), "loaded" (dlopen by us), "" (none)
        self.handle: Optional[ctypes.CDLL] = None
        self._set_noops()

    def _set_noops(self) -> None:
        self.step_begin: Callable[[int], None] = _noop1
        self.step_end: Callable[[], None] = _noop
        self.step_mark: Callable[[int], None] = _noop1
        self.data_push: Callable[[bytes], None] = _noop1
        self.data_pop: Callable[[], None] = _noop
        self.range_push: Callable[[bytes], None] = _noop1
        self.range_pop: Callable[[], None] = _noop
        self.set_step_flops: Callable[[float], None] = _noop1
        self.set_step_work: Callable[[float, float], None] = _noop2
        self.flush: Callable[[], None] = _noop
        self.is_active: Callable[[], int] = _zero
        self.python_status: Callable[[bytes], None] = _noop1
        self.api_version: Callable[[], int] = _zero

    def _bind(self, handle: ctypes.CDLL, path: str, how: str) -> None:
        i64, dbl, cstr, cint = ctypes.c_int64, ctypes.c_double, ctypes.c_char_p, ctypes.c_int

        def fn(name: str, argtypes: list, restype: object = None) -> Callable:
            f = getattr(handle, name)
            f.argtypes = argtypes
            f.restype = restype
            return f

        self.step_begin = fn("gpuacct_step_begin", [i64])
        self.step_end = fn("gpuacct_step_end", [])
        self.step_mark = fn("gpuacct_step_mark", [i64])
        self.data_push = fn("gpuacct_data_push", [cstr])
        self.data_pop = fn("gpuacct_data_pop", [])
        self.range_push = fn("gpuacct_range_push", [cstr])
        self.range_pop = fn("gpuacct_range_pop", [])
        self.set_step_flops = fn("gpuacct_set_step_flops", [dbl])
        # Added within API version 1: a library built before it lacks the symbol, and its
        # other calls still work (this one stays a no-op there).
        try:
            self.set_step_work = fn("gpuacct_set_step_work", [dbl, dbl])
        except AttributeError:
            self.set_step_work = _noop2
        self.flush = fn("gpuacct_flush", [])
        try:  # added within API version 1, like gpuacct_set_step_work
            self.python_status = fn("gpuacct_python_status", [cstr])
        except AttributeError:
            self.python_status = _noop1
        self.is_active = fn("gpuacct_is_active", [], cint)
        self.api_version = fn("gpuacct_api_version", [], cint)
        self.handle = handle
        self.path = path
        self.how = how
        self.loaded = True


api = Api()
_bind_lock = threading.Lock()
_tried = False


def _try_open(path: str, load: bool) -> Tuple[Optional[ctypes.CDLL], str]:
    """(handle, how): how is "attached" for an instance that was already loaded (injected by
    the driver, LD_PRELOAD), "loaded" when this call dlopen()ed it."""
    try:
        return ctypes.CDLL(path, mode=_RTLD_NOW | _RTLD_NOLOAD), "attached"
    except OSError:
        pass
    if not load:
        return None, ""
    try:
        return ctypes.CDLL(path, mode=_RTLD_NOW), "loaded"
    except OSError:
        return None, ""


def bind(path: Optional[str] = None, *, load: bool = True, retry: bool = False) -> Api:
    """Reach the library and bind the C API.

    path: an explicit library to use (loaded when not loaded yet).  Without it, the resolution
    order in the module docstring is used; ``load`` says whether environment-named paths may be
    loaded (True) or only reached when already loaded (False).  Idempotent: a bound API stays
    bound; an unbound one is retried only with ``retry`` or an explicit path.
    """
    global _tried
    with _bind_lock:
        if api.loaded:
            return api
        if _tried and not retry and path is None:
            return api
        _tried = True
        if path is not None:
            cands = [(path, True)]
        else:
            cands = [(p, load) for p in env_library_paths()]
            cands += [(p, False) for p in fallback_library_paths()]
        seen = set()
        for cand, may_load in cands:
            if cand in seen:
                continue
            seen.add(cand)
            handle, how = _try_open(cand, may_load)
            if handle is None:
                continue
            try:
                api._bind(handle, os.path.abspath(cand), how)
                ok = api.api_version() == API_VERSION
            except AttributeError:
                ok = False  # not a gpuacct library
            if ok:
                return api
            api.__init__()  # incompatible: stay no-op

        return api


def status() -> dict:
    """Diagnostics: where the library came from and whether it collects GPU activity."""
    return {
        "loaded": api.loaded,
        "path": api.path,
        "how": api.how,
        "active": bool(api.is_active()) if api.loaded else False,
        "api_version": api.api_version() if api.loaded else 0,
        "env_paths": env_library_paths(),
        "fallback_paths": fallback_library_paths(),
    }
