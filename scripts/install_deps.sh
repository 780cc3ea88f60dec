#!/usr/bin/env bash
# Installs what gpuacct needs from Debian's packages (idempotent: does nothing when all are
# present).  The CUDA 13 toolkit is expected at /usr/local/cuda (or CUDA_HOME); without it the
# injected library is not built and the build says so.
set -euo pipefail

packages=(
  cmake g++ make clang libclang-rt-14-dev pkg-config
  nlohmann-json3-dev libunwind-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev
  python3 python3-pytest python3-numpy python3-pandas python3-matplotlib python3-pil
  python3-torch python3-pip python3-venv python3-setuptools
)

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
