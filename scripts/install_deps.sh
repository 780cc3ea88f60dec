#!/usr/bin/env bash
# Installs what gpuacct needs from Debian's packages (idempotent: does nothing when all are
# present).  The CUDA 13 toolkit is expected at /usr/local/cuda (or CUDA_HOME); without it the
# injected library is not built and the build says so.
#
#   scripts/install_deps.sh          everything: the tool, the library, every test and benchmark
#   scripts/install_deps.sh --main   only what the main job (scripts/run.sh) needs: the gpuacct
#                                    tool and libgpuacct.so (no test frameworks, no torch)
set -euo pipefail

# The tool and the injected library.
main_packages=(cmake g++ make pkg-config nlohmann-json3-dev libunwind-dev zlib1g-dev)
# Tests, fuzzing and benchmarks (scripts/test.sh).
test_packages=(
  clang libclang-rt-14-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-pytest python3-numpy python3-pandas python3-matplotlib python3-pil
  python3-torch python3-pip python3-venv python3-setuptools
)

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

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/cupti.h" ]; then
  echo "install_deps: note: no CUDA toolkit at $cuda: libgpuacct.so will not be built" >&2
fi
