#!/usr/bin/env bash
# The Debian package `cpack -G DEB` builds, inspected and run without installing it:
# - control: name, version, dependencies from dpkg-shlibdeps, the maintainer scripts, the config
#   as a conffile;
# - contents: the binaries, every built plugin, the units, the sysusers entry, no stray .new config;
# - the units as packaged name the /usr binary and the /etc config;
# - extracted to a directory, its daemon loads its config and every plugin (the run paths hold).
# Leaves the package in BUILD/packages for deb_apt_install.sh.
set -euo pipefail
build=$1
tmp=$(mktemp -d /tmp/pdd.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "deb_package: $*" >&2; exit 1; }

rm -f "$build"/packages/placementd_*.deb
# As docs/operations.md shows it.
cpack --config "$build/CPackConfig.cmake" -B "$build/packages" -G DEB >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
debs=("$build"/packages/placementd_*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || fail "expected one placementd_*.deb in $build/packages, found: ${debs[*]}"
deb=${debs[0]}
echo "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = placementd ] || fail "Package: $(field Package)"
[[ "$(basename "$deb")" == "placementd_$(field Version)_$(field Architecture).deb" ]] || fail "file name $(basename "$deb")"
depends=$(field Depends)
for dep in systemd libspdlog libtomlplusplus libmetis libscotch; do
  [[ "$depends" == *"$dep"* ]] || fail "Depends lacks $dep: $depends"
done

dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$tmp"
grep -qx /etc/placementd/placementd.toml "$tmp/conffiles" || fail "the config is not a conffile"
for script in postinst prerm postrm; do
  [ -x "$tmp/$script" ] || fail "no $script"
done
grep -q "systemd-sysusers placementd.conf" "$tmp/postinst" || fail "postinst does not create the placement group"

root=$tmp/root
dpkg-deb -x "$deb" "$root"
built=$(find "$build/lib/placementd/plugins" -name '*.so' | wc -l)
packaged=$(find "$root/usr/lib/placementd/plugins" -name '*.so' | wc -l)
[ "$built" -eq "$packaged" ] || fail "$packaged plugins packaged, $built built"
for f in usr/bin/placementd usr/bin/placementctl etc/placementd/placementd.toml usr/lib/systemd/system/placementd.service \
         usr/lib/systemd/system/placementd.socket usr/lib/sysusers.d/placementd.conf usr/share/doc/placementd/README.md; do
  [ -e "$root/$f" ] || fail "not in the package: /$f"
done
[ ! -e "$root/etc/placementd/placementd.toml.new" ] || fail "the package carries placementd.toml.new"
cmp -s "$root/etc/placementd/placementd.toml" "$(dirname "$0")/../../etc/placementd.toml" || fail "the packaged config is not etc/placementd.toml"
grep -qx 'ExecStart=/usr/bin/placementd --config /etc/placementd/placementd.toml' \
  "$root/usr/lib/systemd/system/placementd.service" || fail "the packaged unit's ExecStart: $(grep ^ExecStart= "$root/usr/lib/systemd/system/placementd.service")"
out=$("$root/usr/bin/placementd" --check-config "$root/etc/placementd/placementd.toml" 2>&1) ||
  { echo "$out"; fail "the packaged daemon could not check the packaged config"; }
[[ "$out" == *"OK ($built plugins)"* ]] || { echo "$out"; fail "the packaged daemon did not load its $built plugins"; }
echo "$out"
echo "package OK: $(field Package) $(field Version), $packaged plugins, conffile /etc/placementd/placementd.toml"
