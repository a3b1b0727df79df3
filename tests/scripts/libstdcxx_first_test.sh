#!/usr/bin/env bash
# Every program that links LibTorch needs libstdc++ before any other library. PyPI's LibTorch
# exports copies of libstdc++'s std::filesystem and std::chrono::tzdb functions
# (pytorch/pytorch#133437); a program whose first definitions of them are LibTorch's crashes in them
# (docs/building.md, "libstdc++ copies in the wheel"). The build puts -lstdc++ first
# (cmake/PlacementTorch.cmake); this checks what the linker made of it, which a newer CMake or
# compiler may change.
#   libstdcxx_first_test.sh DIR...   (the build's bin/)
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: libstdcxx_first_test.sh DIR..." >&2; exit 2; }
checked=0
failures=0
while IFS= read -r -d '' file; do
  # Programs only: a library's own order matters less than the program's that loads it.
  readelf -l "$file" 2>/dev/null | grep -q 'program interpreter' || continue
  needed=$(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') || continue
  grep -q '^libtorch' <<<"$needed" || continue
  checked=$((checked + 1))
  first=$(head -n 1 <<<"$needed")
  if [ "$first" != libstdc++.so.6 ]; then
    echo "FAIL $file: needs $first before libstdc++.so.6:" $needed >&2
    failures=$((failures + 1))
  fi
done < <(find "$@" -type f -perm -u+x -print0)
if ((checked == 0)); then
  echo "no program in $* links LibTorch: nothing checked" >&2
  exit 1
fi
if ((failures)); then
  echo "$failures of $checked programs linking LibTorch need another library before libstdc++" >&2
  exit 1
fi
echo "libstdc++ first in all $checked programs linking LibTorch"
