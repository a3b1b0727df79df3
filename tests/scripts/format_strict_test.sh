#!/usr/bin/env bash
# scripts/format.sh --check without its formatter, and scripts/python-style.sh --check without ruff:
# skipped (77) on a developer's machine, failed (1), saying why, where PLACEMENT_STRICT_CHECKS=1 (CI),
# so that CI never passes a check it skipped.
#   format_strict_test.sh SOURCE_DIR
set -uo pipefail
format=$1/scripts/format.sh
missing=no-such-clang-format-$$
CLANG_FORMAT=$missing PLACEMENT_STRICT_CHECKS=0 "$format" --check 2>/dev/null
rc=$?
[ "$rc" = 77 ] || { echo "without the formatter the check exited $rc, not 77 (skipped)"; exit 1; }
said=$(CLANG_FORMAT=$missing PLACEMENT_STRICT_CHECKS=1 "$format" --check 2>&1)
rc=$?
[ "$rc" = 1 ] || { echo "with PLACEMENT_STRICT_CHECKS=1 the check exited $rc, not 1: $said"; exit 1; }
grep -q "no $missing .*PLACEMENT_STRICT_CHECKS=1: failed" <<<"$said" || { echo "it says: $said"; exit 1; }
# The same for the Python sources' check without ruff.
style=$1/scripts/python-style.sh
nopython=/nonexistent/python-$$
PLACEMENT_PYTHON=$nopython PLACEMENT_STRICT_CHECKS=0 "$style" --check 2>/dev/null
rc=$?
[ "$rc" = 77 ] || { echo "without ruff the Python check exited $rc, not 77 (skipped)"; exit 1; }
said=$(PLACEMENT_PYTHON=$nopython PLACEMENT_STRICT_CHECKS=1 "$style" --check 2>&1)
rc=$?
[ "$rc" = 1 ] || { echo "with PLACEMENT_STRICT_CHECKS=1 the Python check exited $rc, not 1: $said"; exit 1; }
grep -q "no ruff for $nopython .*PLACEMENT_STRICT_CHECKS=1: failed" <<<"$said" || { echo "it says: $said"; exit 1; }
echo "format.sh and python-style.sh: a missing formatter is skipped, and fails under PLACEMENT_STRICT_CHECKS=1"
