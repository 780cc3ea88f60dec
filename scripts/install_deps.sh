#!/usr/bin/env bash
# Installs what gpuacct needs from Debian's packages (idempotent: does nothing when all are
# present).  The CUDA 13 toolkit is expected at /usr/local/cuda (or CUDA_HOME); without it the
# injected library is not built and the build says so.
#
#   scripts/install_deps.sh          everything: the tool, the library, every test and benchmark
#   scripts/install_deps.sh --main   only what the main job (scripts/run.sh) needs: the gpuacct
#                                    tool and libgpuacct.so, and ccache (no test frameworks, no
#                                    torch)
set -euo pipefail

# The tool and the injected library; ccache: scripts/build.sh compiles through it, so the main
# build and the test build, and every later clone on this machine, share compiled objects.
main_packages=(cmake g++ make pkg-config ccache nlohmann-json3-dev libunwind-dev zlib1g-dev)
# Tests, fuzzing and benchmarks (scripts/test.sh).  libisal-dev: gzip traces inflate with ISA-L
# when it is there (zlib otherwise, so the main build does not need it); with it the tests
# cover both decoders (analysis/import/byte_source_test.cc).
test_packages=(
  clang libclang-rt-14-dev googletest libgtest-dev libgmock-dev libbenchmark-dev libisal-dev
  python3 python3-pytest python3-numpy python3-scipy python3-pandas python3-matplotlib python3-pil
  python3-torch python3-pip python3-venv python3-setuptools
  openjdk-17-jre-headless
)
# Python packages Debian 12 does not have, for the job-view tests (tests/python/test_job.py:
# Parquet, DuckDB, Spark local mode -- Spark runs on the Java above), installed with pip into
# the interpreter the Python tests use.  Pinned: the versions the tests were written against;
# pyarrow 26 needs NumPy 2, and Debian 12's torch and pandas are built on NumPy 1.24.
# prometheus-client parses the textfile the library writes (issue 16); ruptures is the independent
# change-point implementation the C++ one is checked against.
pip_packages=(pyarrow==25.0.1 duckdb==2.0.1 pyspark==4.3.0 prometheus-client==0.26.0 ruptures==1.1.10)
test_python="${GPUACCT_PYTEST_PYTHON:-/usr/bin/python3}"

packages=("${main_packages[@]}")
case "${1:-}" in
  --main) ;;
  "") packages+=("${test_packages[@]}") ;;
  *)
    echo "install_deps: unknown option '$1' (use --main or nothing)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# pip packages: only those missing or at another version (a check of the installed metadata,
# well under a second when all are there).
if [ "${1:-}" != "--main" ]; then
  pip_missing=()
  for spec in "${pip_packages[@]}"; do
    name="${spec%%==*}" want="${spec#*==}"
    have="$("$test_python" -c "import importlib.metadata as m; print(m.version('$name'))" \
      2>/dev/null || true)"
    [ "$have" = "$want" ] || pip_missing+=("$spec")
  done
  if ((${#pip_missing[@]})); then
    echo "install_deps: pip installing ${pip_missing[*]} for $test_python" >&2
    # Debian's Python is externally managed (PEP 668): these go to /usr/local, beside it.
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
      "$test_python" -m pip install -q "${pip_missing[@]}"
  fi
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/cupti.h" ]; then
  echo "install_deps: note: no CUDA toolkit at $cuda: libgpuacct.so will not be built" >&2
fi
