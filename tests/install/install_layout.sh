#!/usr/bin/env bash
# What `cmake --install` lays out, at two prefixes:
# - a temporary prefix P: everything under P, the units naming P's binary and P/etc's config, and
#   the daemon finding its plugins relative to itself (the tree can be moved);
# - --prefix /usr staged under DESTDIR, as a package would: the config in /etc/placementd, units
#   that name only paths the install created, which systemd-analyze verifies, and the installed
#   daemon started the way the unit starts it (--check-config, then socket activation). A second
#   install keeps an edited config and puts the shipped one next to it.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/pdi.XXXXXX)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "install_layout: $*" >&2; exit 1; }
built=$(find "$build/lib/placementd/plugins" -name '*.so' | wc -l)

# Every absolute path the service unit names (binaries, config, documentation) exists under $1.
check_unit_paths() {
  local root=$1 unit=$2 path
  for path in $(grep -oE '(^ExecStart(Pre)?=|--config |--check-config |file://)/[^ ]+' "$unit" |
                sed -E 's#^(ExecStart(Pre)?=|--config |--check-config |file://)##' | sort -u); do
    [ -e "$root$path" ] || fail "$unit names $path, which the install did not create under ${root:-/}"
  done
}

# 1. A prefix of its own (the build's configured prefix is another).
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/placementd bin/placementctl etc/placementd/placementd.toml \
         lib/placementd/plugins/groupers/colocation.so lib/placementd/plugins/placers/single_device.so \
         lib/placementd/plugins/algorithms/reinforce.so lib/systemd/system/placementd.service \
         lib/systemd/system/placementd.socket lib/sysusers.d/placementd.conf \
         share/doc/placementd/README.md share/doc/placementd/protocol.md include/placement/grouper.h; do
  [ -e "$prefix/$f" ] || { find "$prefix" -type f | sort; fail "missing after install: $f"; }
done
grep -q "^ExecStart=$prefix/bin/placementd --config $prefix/etc/placementd/placementd.toml$" \
  "$prefix/lib/systemd/system/placementd.service" || fail "ExecStart does not name the install's own paths"
check_unit_paths "" "$prefix/lib/systemd/system/placementd.service"
out=$("$prefix/bin/placementd" --check-config "$prefix/etc/placementd/placementd.toml")
echo "$out"
[[ "$out" == *"OK ($built plugins)"* ]] || fail "installed daemon did not find its $built plugins"
# Without --config the installed daemon reads the config its install laid out, not the one the
# build was configured for.
"$prefix/bin/placementd" --help | grep -qF "$prefix/etc/placementd/placementd.toml" ||
  fail "the installed daemon's default config is not $prefix/etc/placementd/placementd.toml"
"$prefix/bin/placementd" --socket "$tmp/own.sock" --state-dir "$tmp/own-state" 2>"$tmp/own.log" &
daemon=$!
for _ in $(seq 200); do [ -S "$tmp/own.sock" ] && break; sleep 0.05; done
"$prefix/bin/placementctl" --socket "$tmp/own.sock" status | grep -qF "$prefix/etc/placementd/placementd.toml" ||
  { cat "$tmp/own.log"; fail "the installed daemon started without --config did not read its install's config"; }
kill "$daemon" && wait "$daemon" || true
daemon=
mv "$prefix" "$prefix.moved"
"$prefix.moved/bin/placementctl" config check "$prefix.moved/etc/placementd/placementd.toml"

# 2. --prefix /usr, staged.
stage=$tmp/stage
DESTDIR=$stage cmake --install "$build" --prefix /usr >/dev/null
unit=$stage/usr/lib/systemd/system/placementd.service
[ -f "$stage/etc/placementd/placementd.toml" ] || fail "--prefix /usr did not put the config in /etc/placementd"
[ ! -e "$stage/usr/etc" ] || fail "--prefix /usr created /usr/etc"
grep -q '^ExecStart=/usr/bin/placementd --config /etc/placementd/placementd.toml$' "$unit" ||
  fail "ExecStart for --prefix /usr: $(grep '^ExecStart=' "$unit")"
check_unit_paths "$stage" "$unit"
"$here/../systemd/verify_units.sh" "$unit" "$stage/usr/lib/systemd/system/placementd.socket" \
  "$stage/usr/bin/placementd" || [ $? -eq 77 ]
# As ExecStartPre and ExecStart run it, with the staged paths.
"$stage/usr/bin/placementd" --check-config "$stage/etc/placementd/placementd.toml" | grep -q "OK ($built plugins)" ||
  fail "the staged daemon's --check-config failed"
if command -v systemd-socket-activate >/dev/null; then
  socket=$tmp/pd.sock
  systemd-socket-activate -l "$socket" "$stage/usr/bin/placementd" --config "$stage/etc/placementd/placementd.toml" \
    --state-dir "$tmp/state" 2>"$tmp/daemon.log" &
  daemon=$!
  for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
  # The first connection starts the daemon (socket activation); status answers once it runs. The
  # socket file exists a moment before systemd-socket-activate listens on it (refused meanwhile).
  answered=no
  for _ in $(seq 20); do
    if "$stage/usr/bin/placementctl" --socket "$socket" --timeout-ms 10000 status >/dev/null 2>"$tmp/status.err"; then
      answered=yes
      break
    fi
    grep -q "Connection refused" "$tmp/status.err" || break
    sleep 0.1
  done
  [ "$answered" = yes ] ||
    { cat "$tmp/status.err" "$tmp/daemon.log"; fail "the socket-activated staged daemon did not answer"; }
  grep -q "using the socket systemd passed" "$tmp/daemon.log" || { cat "$tmp/daemon.log"; fail "not socket-activated"; }
fi
# Reinstalling keeps what the admin edited.
echo "# edited by the admin" >>"$stage/etc/placementd/placementd.toml"
DESTDIR=$stage cmake --install "$build" --prefix /usr >/dev/null
grep -q "edited by the admin" "$stage/etc/placementd/placementd.toml" || fail "a reinstall overwrote the edited config"
cmp -s "$stage/etc/placementd/placementd.toml.new" "$here/../../etc/placementd.toml" ||
  fail "the shipped config was not put next to the edited one as placementd.toml.new"
echo "install layout OK at a private prefix and at /usr (staged)"
