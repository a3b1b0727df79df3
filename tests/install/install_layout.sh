#!/usr/bin/env bash
# `cmake --install` into a temporary prefix lays out what an admin expects, and the installed
# daemon finds its plugins relative to itself (the install is relocatable).
set -euo pipefail
build=$1
configured_prefix=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/placementd bin/placementctl etc/placementd/placementd.toml \
         lib/placementd/plugins/groupers/colocation.so lib/placementd/plugins/placers/single_device.so \
         lib/placementd/plugins/algorithms/reinforce.so lib/systemd/system/placementd.service \
         lib/systemd/system/placementd.socket lib/sysusers.d/placementd.conf \
         share/doc/placementd/README.md share/doc/placementd/protocol.md include/placement/grouper.h; do
  [ -e "$prefix/$f" ] || { echo "missing after install: $f"; find "$prefix" -type f | sort; exit 1; }
done
grep -q "^ExecStart=$configured_prefix/bin/placementd --config $configured_prefix/etc/placementd/placementd.toml" \
  "$prefix/lib/systemd/system/placementd.service" || { echo "ExecStart does not name the configured prefix"; exit 1; }
out=$("$prefix/bin/placementd" --check-config "$prefix/etc/placementd/placementd.toml")
echo "$out"
built=$(find "$build/lib/placementd/plugins" -name '*.so' | wc -l)
[[ "$out" == *"OK ($built plugins)"* ]] || { echo "installed daemon did not find its $built plugins"; exit 1; }
mv "$prefix" "$prefix.moved" && trap 'rm -rf "$prefix.moved"' EXIT
"$prefix.moved/bin/placementctl" config check "$prefix.moved/etc/placementd/placementd.toml"
