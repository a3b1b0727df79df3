#!/usr/bin/env bash
# Every benchmark and example program keeps examples/common/command_line.h's conventions:
#   - `--help` and `-h` exit 0 at once, printing a usage on stdout;
#   - an unknown option exits 2 with a message on stderr that names it, never through abort() (an
#     uncaught exception) or another signal.
# A program that ignores the option and starts its work runs into the timeout and fails the test.
#   help_test.sh PROGRAM...
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: help_test.sh PROGRAM..." >&2; exit 2; }
tmp=$(mktemp -d -t help-test.XXXXXX)  # mktemp fills in the X's
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}
# Runs PROGRAM ARGS... with a time limit, stdout and stderr in $tmp/out and $tmp/err; echoes its status.
run() {
  timeout 30 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  echo $?
}
show() { sed 's/^/    /' "$tmp/out" "$tmp/err" | head -20 >&2; }

for program in "$@"; do
  name=$(basename "$program")
  [ -x "$program" ] || { fail "$name: $program is not an executable"; continue; }
  for help in --help -h; do
    rc=$(run "$program" "$help")
    if [ "$rc" != 0 ]; then
      fail "$name $help: exit status $rc, expected 0"; show
    elif ! grep -qi 'usage' "$tmp/out"; then
      fail "$name $help: no usage on stdout"; show
    fi
  done
  rc=$(run "$program" --no-such-option)
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" -ge 128 ]; then
    fail "$name --no-such-option: exit status $rc (0: accepted it; 124: ran until the timeout; 128+N: signal N)"; show
  elif [ "$rc" != 2 ]; then
    fail "$name --no-such-option: exit status $rc, expected 2 (a usage error)"; show
  fi
  if grep -qiE 'terminate|abort|core dump' "$tmp/out" "$tmp/err"; then
    fail "$name --no-such-option: crashed"; show
  fi
  grep -q -- '--no-such-option' "$tmp/err" || { fail "$name --no-such-option: stderr does not name the option"; show; }
done
[ "$failures" = 0 ] || { echo "$failures failure(s) in $# programs" >&2; exit 1; }
echo "--help, -h and an unknown option: as expected in $# programs"
