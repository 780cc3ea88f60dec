"""User-facing marks: steps, data ranges, user ranges, step FLOPs, flush.

Every function is safe to call without the library (a Python no-op) and from any thread.
``step``, ``data`` and ``range`` return objects that are both context managers and decorators::

    for batch in loader:
        with gpuacct.step():
            ...

    @gpuacct.data("decode")
    def decode(x): ...

    @gpuacct.range
    def evaluate(): ...
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, TypeVar, Union, overload

from . import _lib

F = TypeVar("F", bound=Callable[..., Any])

_api = _lib.api


class _State:
    """Process-wide switches shared with the auto-instrumentation."""

    __slots__ = ("user_steps",)

    def __init__(self) -> None:
        # Set once the program marks steps itself; auto step marks then stand down so the two
        # never double-count.
        self.user_steps = False


state = _State()

_name_cache: Dict[str, bytes] = {}


def _encode(name: str) -> bytes:
    b = _name_cache.get(name)
    if b is None:
        b = name.encode("utf-8", "replace").replace(b"\0", b"?")
        if len(_name_cache) < 4096:
            _name_cache[name] = b
    return b


class _Mark:
    """Base of the context-manager/decorator objects.  Reusable and re-entrant: the object
    holds only its configuration, so one instance can decorate a function called from many
    threads."""

    __slots__ = ()

    def __enter__(self) -> "_Mark":  # pragma: no cover - overridden
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class _Step(_Mark):
    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        self.number = number

    def __enter__(self) -> "_Step":
        state.user_steps = True
        _api.step_begin(self.number)
        return self

    def __exit__(self, *exc: object) -> None:
        _api.step_end()


class _Data(_Mark):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = _encode(name)

    def __enter__(self) -> "_Data":
        _api.data_push(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        _api.data_pop()


class _Range(_Mark):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = _encode(name)

    def __enter__(self) -> "_Range":
        _api.range_push(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        _api.range_pop()


_STEP_AUTO = _Step(-1)
_DATA_DEFAULT = _Data("data")


@overload
def step(number: int = -1) -> _Step: ...
@overload
def step(number: F) -> F: ...


def step(number: Union[int, Callable[..., Any]] = -1) -> Any:
    """One training step: ``with gpuacct.step():`` or ``@gpuacct.step`` / ``@gpuacct.step(7)``.

    number < 0 numbers steps automatically.  Using it switches automatic step marks off.
    """
    if callable(number):
        return _STEP_AUTO(number)
    if number == -1:
        return _STEP_AUTO
    return _Step(int(number))


@overload
def data(name: str = "data") -> _Data: ...
@overload
def data(name: F) -> F: ...


def data(name: Union[str, Callable[..., Any]] = "data") -> Any:
    """The calling thread waits for input inside this range (counts towards the data wall)."""
    if callable(name):
        return _Data(getattr(name, "__qualname__", "data"))(name)
    if name == "data":
        return _DATA_DEFAULT
    return _Data(name)


@overload
def range(name: str) -> _Range: ...
@overload
def range(name: F) -> F: ...


def range(name: Union[str, Callable[..., Any]]) -> Any:  # noqa: A001 - public name by design
    """A user range shown in reports and timelines (not used for accounting)."""
    if callable(name):
        return _Range(getattr(name, "__qualname__", "range"))(name)
    return _Range(name)


def mark_step(number: int = -1) -> None:
    """End the open step (if any) and begin the next: one call per loop iteration."""
    state.user_steps = True
    _api.step_mark(number)


def step_begin(number: int = -1) -> None:
    state.user_steps = True
    _api.step_begin(number)


def step_end() -> None:
    _api.step_end()


def data_push(name: str = "data") -> None:
    _api.data_push(_encode(name))


def data_pop() -> None:
    _api.data_pop()


def range_push(name: str) -> None:
    _api.range_push(_encode(name))


def range_pop() -> None:
    _api.range_pop()


def set_step_flops(flops: float) -> None:
    """Model FLOPs of the current step (for MFU); the last value set inside a step wins."""
    _api.set_step_flops(float(flops))


def set_step_work(tokens: Optional[float] = None, samples: Optional[float] = None) -> None:
    """Tokens and/or samples the current step of the whole job processes (the global batch),
    for the cost per unit of work (docs/cost.md).  Calls inside one step add up (declare each
    micro-batch); None or 0 declares nothing for that unit."""
    _api.set_step_work(0.0 if tokens is None else float(tokens),
                       0.0 if samples is None else float(samples))


def flush() -> None:
    """Ask the library to flush buffers and stream finished steps now (non-blocking)."""
    _api.flush()


def attach(path: Optional[str] = None) -> bool:
    """Bind to the library now: ``path`` if given (loaded when needed), else the environment's.

    Returns True when the marks reach a library.  Import already does this; call it after
    setting GPUACCT_LIBRARY at run time, or to load a specific build.
    """
    return _lib.bind(path, retry=True).loaded


def is_loaded() -> bool:
    """True when the marks reach a libgpuacct instance."""
    return _api.loaded


def is_active() -> bool:
    """True when the library collects GPU activity (False: host ranges only, or no library)."""
    return bool(_api.is_active())
