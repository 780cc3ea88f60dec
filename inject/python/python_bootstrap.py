# Runs inside the training process, on its interpreter's main thread, from libgpuacct.so's
# pending call (inject/python/python_hook.cc), with ARCHIVE (this library's copy of the gpuacct
# package: "<path>\n<size>\n<bytes>" entries) and LIBRARY (the library's own path) set in its
# namespace.  It must never raise and never print more than one line: STATUS says what happened.
#
# An installed gpuacct package wins (pip install ./python_shim: the user chose that one).  Else
# the package is served from ARCHIVE by a finder at the *end* of sys.meta_path -- nothing the
# program can import is shadowed, sys.path is not touched -- so `CUDA_INJECTION64_PATH=...
# python train.py` instruments the loop with no pip install, no PYTHONPATH, from any directory,
# in any virtualenv.


def _gpuacct_bootstrap():
    import importlib.abc
    import importlib.util
    import os
    import sys

    if os.environ.get("GPUACCT_PYTHON", "1").strip() == "0":
        return "off: GPUACCT_PYTHON=0"

    files = {}
    blob, pos = ARCHIVE, 0  # noqa: F821 (set by the library)
    while pos < len(blob):
        nl = blob.index(b"\n", pos)
        name = blob[pos:nl].decode()
        nl2 = blob.index(b"\n", nl + 1)
        size = int(blob[nl + 1:nl2])
        files[name] = blob[nl2 + 1:nl2 + 1 + size]
        pos = nl2 + 1 + size
    origin = "<libgpuacct: %s>" % LIBRARY  # noqa: F821

    class Loader(importlib.abc.Loader):
        def __init__(self, path):
            self.path = path

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            code = compile(files[self.path], origin + "/" + self.path, "exec")
            exec(code, module.__dict__)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            parts = fullname.split(".")
            if parts[0] != "gpuacct":
                return None
            base = "/".join(parts)
            if base + "/__init__.py" in files:
                spec = importlib.util.spec_from_loader(
                    fullname, Loader(base + "/__init__.py"), origin=origin, is_package=True)
                spec.submodule_search_locations = []
                return spec
            if base + ".py" in files:
                return importlib.util.spec_from_loader(fullname, Loader(base + ".py"),
                                                       origin=origin)
            return None

    try:
        import gpuacct._auto as auto
        where = "installed"
    except ModuleNotFoundError as e:
        if e.name not in ("gpuacct", "gpuacct._auto"):
            raise
        sys.meta_path.append(Finder())
        import gpuacct._lib as lib
        lib.bind(LIBRARY)  # noqa: F821 (the library that carries this copy)
        import gpuacct._auto as auto
        where = "embedded"
    describe = getattr(auto, "describe", None)
    return where + ": " + (describe() if describe else "instrumented")


try:
    STATUS = _gpuacct_bootstrap()
except BaseException as e:  # noqa: B902 (never break the training program)
    STATUS = "failed: %s: %s" % (type(e).__name__, e)
