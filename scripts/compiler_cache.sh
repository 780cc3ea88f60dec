# Sourced by scripts/build.sh and scripts/test.sh: compile through ccache when it is installed
# (scripts/install_deps.sh installs it).  Sets `launcher`, the CMake options to pass.
#
# CCACHE_BASEDIR defaults to this checkout: paths inside it enter the cache keys relative, so
# another clone, worktree or build directory of the same sources (a CI runner's fresh clone at
# a new path) hits the same entries.  CCACHE_NOHASHDIR: the build directory's name stays out of
# the keys of files with debug information (GPUACCT_DEBUG_INFO=1, the sanitizer builds).
launcher=()
if command -v ccache >/dev/null 2>&1 && [ "${GPUACCT_CCACHE:-1}" != 0 ]; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
