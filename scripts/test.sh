#!/usr/bin/env bash
# Builds everything and runs every test (unit, property, golden, CLI, simulated-device
# end-to-end, disk-full, Python), after short libFuzzer runs of the trace importer and the
# recording reader.  This is what CI runs.
#
#   scripts/test.sh                               the CI run (build/, build-fuzz/)
#   scripts/test.sh --sanitize=address,undefined  every test built with ASan + UBSan (build-asan/)
#   scripts/test.sh --sanitize=thread             the injected library, the simulated device and
#                                                 the end-to-end tests under TSan (build-tsan/)
#   scripts/test.sh --long                        the CI run, then the differential fuzzer's long
#                                                 run: 3000 programs (seeds 1001-4000), 2-4 min
# docs/testing.md says what each sanitizer run covers, what it leaves out and why, and how long
# it takes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
jobs="${GPUACCT_JOBS:-$(nproc)}"
sanitize=""
long=""
for arg in "$@"; do
  case "$arg" in
    --sanitize=*) sanitize="${arg#--sanitize=}" ;;
    --long) long=1 ;;
    -h | --help)
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "scripts/test.sh: unknown option '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done
"$root/scripts/install_deps.sh"
# shellcheck source=scripts/compiler_cache.sh
. "$root/scripts/compiler_cache.sh"

# Configures <dir> with -fsanitize=<kinds> on every C/C++ target (GCC: its runtimes are shared
# libraries, so the injected library and the shim load into sanitized programs).
configure_sanitized() {
  local dir="$1" kinds="$2"
  shift 2
  local flags="-fsanitize=$kinds -fno-omit-frame-pointer -fno-sanitize-recover=all"
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUACCT_BUILD_BENCH=OFF \
    -DGPUACCT_BUILD_FUZZ=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$kinds" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=$kinds" \
    "${launcher[@]}" "$@" >/dev/null
}

if [ -n "$sanitize" ]; then
  case "$sanitize" in
    address | undefined | address,undefined | undefined,address)
      dir="$build-asan"
      configure_sanitized "$dir" "$sanitize"
      cmake --build "$dir" -j "$jobs"
      # Sanitizer findings fail the test: UBSan and ASan stop at the first report, LeakSanitizer
      # makes the process exit non-zero.  verify_asan_link_order=0: the e2e and disk-full tests
      # LD_PRELOAD the library / the ENOSPC shim into sanitized programs, which still have the
      # runtime ahead of libc (it is their first DT_NEEDED).
      asan="halt_on_error=1:verify_asan_link_order=0:detect_stack_use_after_return=1"
      export ASAN_OPTIONS="detect_leaks=1:$asan"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      cd "$dir"
      ctest --output-on-failure -j "$jobs" --timeout 900 -LE python -E '^e2e_fork$'
      # e2e_fork without the leak check: the forked child of a multithreaded parent can hang in
      # LeakSanitizer's exit-time check (an allocator lock another thread held at fork; GCC 12's
      # runtime has no fork handler for it).
      ASAN_OPTIONS="detect_leaks=0:$asan" ctest --output-on-failure --timeout 900 -R '^e2e_fork$'
      # The Python tests load the sanitized library into the system interpreter, which is not
      # sanitized: the runtime must be preloaded, and the interpreter's own allocations at exit
      # are not ours to report (no leak check there).
      LD_PRELOAD="$(${CC:-gcc} -print-file-name=libasan.so)" \
        ASAN_OPTIONS="detect_leaks=0:$asan" \
        ctest --output-on-failure -j "$jobs" --timeout 900 -L python
      ;;
    thread)
      dir="$build-tsan"
      # Without libunwind (the library then unwinds with glibc's backtrace()): libunwind frees
      # its per-thread trace cache in a pthread-key destructor at thread exit, where TSan's
      # interceptors crash (SIGSEGV in __tsan::MutexPreLock, libunwind is not instrumented).
      configure_sanitized "$dir" thread -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
      cmake --build "$dir" -j "$jobs" --target e2e_all enospc_shim
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
      cd "$dir"
      ctest --output-on-failure -j "$jobs" --timeout 900 -L e2e
      ;;
    *)
      echo "scripts/test.sh: --sanitize=$sanitize: use address,undefined or thread" >&2
      exit 2
      ;;
  esac
  exit 0
fi

# 1. Fuzz smoke tests (clang + libFuzzer, analysis sources only): 20 s each on the seed corpora.
if command -v clang++ >/dev/null 2>&1; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUACCT_BUILD_FUZZ=ON -DGPUACCT_BUILD_INJECT=OFF -DGPUACCT_BUILD_BENCH=OFF \
    -DGPUACCT_BUILD_E2E=OFF "${launcher[@]}" >/dev/null
  cmake --build "$build-fuzz" -j "$jobs" \
    --target kineto_importer_fuzz recording_reader_fuzz collective_rows_fuzz >/dev/null
  ctest --test-dir "$build-fuzz" -L fuzz --output-on-failure -j 2
fi

# 2. Everything else.
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 600

# 3. --long: thousands of random programs on the live path (docs/testing.md, "Differential
# fuzzer"); the CI run above has 300 of them (ctest differential_live_path, seeds 1-300).
if [ -n "$long" ]; then
  python3 "$root/tests/e2e/differential.py" --build "$build" --start 1001 --count 3000 \
    --jobs "$jobs"
fi
