# Shared by the CLI's shell tests (sourced): counters, `expect` and `one_line`.
#   expect <exit code> <output substring> <command...>
# runs the command, and passes when it exits with that code and its stdout + stderr contain the
# substring; a failure prints the command, its exit code and the first lines of its output.
#   one_line <exit code> <stderr substring> <command...>
# the same, and stderr must be exactly one line (a bad input's one clear message).
fails=0
pass=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

expect() {
  local want_rc="$1" want_text="$2"
  shift 2
  local out rc
  out="$("$@" 2>&1)"
  rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want_text" <<<"$out"; then
    fail "$* -> rc=$rc (want $want_rc), output:"
    echo "$out" | head -5
  else
    pass=$((pass + 1))
  fi
}

one_line() {
  local want_rc="$1" want_text="$2"
  shift 2
  local err rc
  err="$("$@" 2>&1 >/dev/null)"
  rc=$?
  if [ "$rc" -ne "$want_rc" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] ||
    ! grep -qF -- "$want_text" <<<"$err"; then
    fail "$* -> rc=$rc (want $want_rc and one line with '$want_text'):"
    printf '%s\n' "$err" | head -5
  else
    pass=$((pass + 1))
  fi
}
