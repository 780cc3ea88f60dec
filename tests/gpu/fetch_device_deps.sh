#!/usr/bin/env bash
# Run on a machine with apt (the dev VM), before a device run: downloads the build-time
# packages a bare GPU image may lack (nlohmann-json, zlib headers, libunwind) into
# .device-deps/ (git-ignored).  Pass `.device-deps` in the device tool's `carry`; check.sh
# unpacks them into its build directory and points CMake at them.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/.device-deps"
cd "$root/.device-deps"
apt-get download nlohmann-json3-dev zlib1g-dev zlib1g libunwind-dev libunwind8 liblzma5 \
  pkgconf pkgconf-bin libpkgconf3 2>&1 | tail -1 || true
ls -1 "$root/.device-deps"
