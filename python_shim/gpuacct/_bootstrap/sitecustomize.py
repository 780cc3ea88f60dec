"""Interpreter-start hook of ``gpuacct-py run`` (the launcher puts this directory first on the
program's PYTHONPATH).  It does what gpuacct_auto.pth does for a pip-installed package --
import gpuacct._auto -- so a run from a source checkout, or a CPU-only run where CUDA never
loads the library, is instrumented too; then it runs the sitecustomize module this one hides
(the distribution's, a virtualenv's), so nothing else changes."""

import importlib.machinery
import importlib.util
import os
import sys


def _gpuacct_bootstrap() -> None:
    if os.environ.get("GPUACCT_PYTHON", "1").strip() != "0":
        try:
            import gpuacct._auto  # noqa: F401  (installs itself; idempotent)
        except Exception as e:  # never break interpreter start
            sys.stderr.write(f"gpuacct: auto-instrumentation not started: {e!r}\n")
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.stderr.write(f"Error in sitecustomize ({spec.origin}): {e!r}\n")


_gpuacct_bootstrap()
del _gpuacct_bootstrap
