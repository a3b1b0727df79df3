#!/usr/bin/env bash
# `apt install ./placementd_*.deb` on this machine, as an admin would, then remove and purge. It
# changes the system, so it runs only as root with PLACEMENT_TEST_APT_INSTALL=1 (CI sets it; see
# .ci/run) and only where no placementd is installed; otherwise it is skipped (exit 77).
# Checks: the group from sysusers, the installed units verified, the installed daemon's default
# config, the daemon started the way the unit starts it, an edited conffile kept across a
# reinstall, remove keeping the config and purge deleting it.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "deb_apt_install skipped: $*"; exit 77; }
fail() { echo "deb_apt_install: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "not root"
[ "${PLACEMENT_TEST_APT_INSTALL:-}" = 1 ] || skip "PLACEMENT_TEST_APT_INSTALL=1 is not set (this test installs a package)"
if dpkg-query -W -f='${Status}' placementd 2>/dev/null | grep -q installed || [ -e /usr/bin/placementd ]; then
  skip "placementd is already installed here; this test does not replace it"
fi
debs=("$build"/packages/placementd_*.deb)
[ -f "${debs[0]}" ] || fail "no package in $build/packages (package.deb builds it)"
deb=$(realpath "${debs[0]}")
tmp=$(mktemp -d /tmp/pda.XXXXXX)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  apt-get purge -y -q placementd >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
apt() { DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Options::=--force-confold "$@" >"$tmp/apt.log" 2>&1 ||
          { cat "$tmp/apt.log"; fail "apt-get $* failed"; }; }

apt install "$deb"
dpkg-query -W -f='${Status}' placementd | grep -q "install ok installed" || fail "dpkg does not list placementd as installed"
getent group placement >/dev/null || fail "postinst did not create the placement group"
getent group placement-admin >/dev/null || fail "postinst did not create the placement-admin group"
"$here/../systemd/verify_units.sh" /usr/lib/systemd/system/placementd.service /usr/lib/systemd/system/placementd.socket \
  /usr/bin/placementd || [ $? -eq 77 ]
/usr/bin/placementd --help | grep -qF /etc/placementd/placementd.toml || fail "the installed daemon's default config is not /etc/placementd/placementd.toml"
/usr/bin/placementd --check-config /etc/placementd/placementd.toml
if command -v systemd-socket-activate >/dev/null; then
  systemd-socket-activate -l "$tmp/pd.sock" /usr/bin/placementd --config /etc/placementd/placementd.toml \
    --state-dir "$tmp/state" 2>"$tmp/daemon.log" &
  daemon=$!
  for _ in $(seq 100); do [ -S "$tmp/pd.sock" ] && break; sleep 0.05; done
  placementctl --socket "$tmp/pd.sock" --timeout-ms 10000 status >/dev/null ||
    { cat "$tmp/daemon.log"; fail "the installed daemon, socket-activated, did not answer"; }
  kill "$daemon" && wait "$daemon" || true
  daemon=
fi

echo "# edited by the admin" >>/etc/placementd/placementd.toml
apt install --reinstall "$deb"
grep -q "edited by the admin" /etc/placementd/placementd.toml || fail "a reinstall replaced the edited conffile"

apt remove placementd
[ ! -e /usr/bin/placementd ] || fail "remove left /usr/bin/placementd"
[ -f /etc/placementd/placementd.toml ] || fail "remove deleted the config (only purge should)"
apt purge placementd
[ ! -e /etc/placementd ] || fail "purge left /etc/placementd"
echo "apt install, reinstall, remove and purge of $(basename "$deb") OK"
