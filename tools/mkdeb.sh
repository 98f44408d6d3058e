#!/usr/bin/env bash
# Build flit's Debian packages from the tree (`make deb`):
#   libflit0     the shared library
#   libflit-dev  headers (C and C++), libflit.so, libflit.a, flit.pc
#   flit-tools   the tools, flit-loader, flit-plot, man pages, the
#                flit-loader@.service unit, the Wireshark dissector
# A `make install` into a staging root (PREFIX=/usr, Debian's multiarch
# libdir), split by package; dependencies from dpkg-shlibdeps; dpkg-deb.
# Out: $BUILD/deb/*.deb.  Environment: BUILD, VERSION, SOVERSION (from make),
# DEB_REVISION (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VERSION=${VERSION:?VERSION not set (run through make deb)}
SOVERSION=${SOVERSION:-0}
DEBVER="$VERSION-${DEB_REVISION:-1}"
for c in dpkg-deb dpkg-shlibdeps dpkg-architecture; do
  command -v "$c" >/dev/null || { echo "mkdeb: $c missing (apt-get install dpkg-dev)" >&2; exit 1; }
done
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
out="$BUILD/deb"; stage="$out/stage"
rm -rf "$out"; mkdir -p "$stage"
out=$(cd "$out" && pwd); stage="$out/stage"

echo "  DEB    staging make install (PREFIX=/usr LIBDIR=/usr/lib/$MA)"
make --no-print-directory install BUILD="$BUILD" DESTDIR="$stage" PREFIX=/usr \
  LIBDIR="/usr/lib/$MA" UNITDIR=/lib/systemd/system >"$out/install.log" 2>&1 ||
  { tail -20 "$out/install.log" >&2; exit 1; }

# mv_to PKG PATH...: move staged paths (relative to the root) into PKG's tree
mv_to() {
  local pkg=$1 p; shift
  for p in "$@"; do
    mkdir -p "$out/$pkg/$(dirname "$p")"
    mv "$stage/$p" "$out/$pkg/$p"
  done
}
lib="usr/lib/$MA"
mv_to libflit0 "$lib/libflit.so.$VERSION" "$lib/libflit.so.$SOVERSION"
mv_to libflit-dev usr/include/flit "$lib/libflit.so" "$lib/libflit.a" "$lib/pkgconfig"
mv_to flit-tools usr/bin usr/share/man usr/share/flit lib/systemd
left=$(cd "$stage" && find . -type f -o -type l)
[ -z "$left" ] || { echo "mkdeb: installed but in no package:" >&2; echo "$left" >&2; exit 1; }

# binaries without their debug sections (Debian keeps those in -dbgsym)
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$out/libflit0/$lib/libflit.so.$VERSION"
for f in "$out"/flit-tools/usr/bin/*; do
  file -b "$f" 2>/dev/null | grep -q '^ELF' && strip --strip-unneeded --remove-section=.comment "$f"
done
strip --strip-debug "$out/libflit-dev/$lib/libflit.a"
find "$out/flit-tools/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} +

for pkg in libflit0 libflit-dev flit-tools; do
  d="$out/$pkg/usr/share/doc/$pkg"; mkdir -p "$d"
  cat > "$d/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: flit
Files: *
License: BSD-2-Clause
EOF
  printf 'flit (%s) unstable; urgency=low\n\n  * Built from the tree by make deb.\n\n -- flit <flit@localhost>  %s\n' \
    "$DEBVER" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
    gzip -9n > "$d/changelog.Debian.gz"
done

# dependencies of the ELF files, as Debian's packaging would compute them
# (dpkg-shlibdeps wants a debian/control in the directory it runs in)
shdeps() {
  local pkg=$1 files
  files=$(find "$out/$pkg" -type f \( -name '*.so.*' -o -path '*/bin/*' \) -exec sh -c \
    'file -b "$1" | grep -q "^ELF" && echo "$1"' _ {} \;)
  [ -n "$files" ] || return 0
  mkdir -p "$out/shlibdeps/debian"
  printf 'Source: flit\n\nPackage: %s\nArchitecture: any\n' "$pkg" > "$out/shlibdeps/debian/control"
  # shellcheck disable=SC2086
  (cd "$out/shlibdeps" && dpkg-shlibdeps -O -e $files 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

size() { du -k -s "$out/$1" | cut -f1; }

control() {
  local pkg=$1 section=$2 depends=$3 desc=$4
  mkdir -p "$out/$pkg/DEBIAN"
  {
    echo "Package: $pkg"
    echo "Version: $DEBVER"
    echo "Architecture: $ARCH"
    echo "Maintainer: flit <flit@localhost>"
    echo "Installed-Size: $(size "$pkg")"
    [ -n "$depends" ] && echo "Depends: $depends"
    [ "$pkg" = flit-tools ] && echo "Recommends: gnuplot-nox, xdp-tools"
    echo "Section: $section"
    echo "Priority: optional"
    echo "Homepage: https://example.invalid/flit"
    echo "Description: $desc"
  } > "$out/$pkg/DEBIAN/control"
}

control libflit0 libs "$(shdeps libflit0)" "low-latency topic publish/subscribe library
 flit moves messages by topic name over shared memory, kernel UDP with NAK
 reliability, AF_XDP kernel bypass and RDMA.  This package holds the shared
 library."
echo "libflit $SOVERSION libflit0 (>= $VERSION)" > "$out/libflit0/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$out/libflit0/DEBIAN/triggers"

# the static library's own dependencies (flit.pc's Libs.private)
devdeps="libflit0 (= $DEBVER), libbpf-dev, libxdp-dev, liburing-dev"
grep -q -- '-libverbs' "$out/libflit-dev/$lib/pkgconfig/flit.pc" && devdeps+=", libibverbs-dev, librdmacm-dev"
control libflit-dev libdevel "$devdeps" \
  "low-latency topic publish/subscribe library (development files)
 Headers for C (flit/flit.h) and C++ (flit/flit.hpp), the static library and
 flit.pc for pkg-config."

# flit-plot is a python3 script
control flit-tools net "$(shdeps flit-tools), python3" "low-latency topic publish/subscribe tools and XDP loader
 flit-pub, flit-sub, flit-pong, flit-thru, flit-load, flit-floor, flit-stat, flit-topics,
 flit-plot, and flit-loader with its systemd unit flit-loader@IFACE.service,
 which attaches flit's XDP program to IFACE at boot and detaches it on stop."
# tell a running systemd about the unit (no instance is enabled by default)
for s in postinst postrm; do
  cat > "$out/flit-tools/DEBIAN/$s" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null 2>&1 || true
fi
exit 0
EOF
  chmod 755 "$out/flit-tools/DEBIAN/$s"
done

for pkg in libflit0 libflit-dev flit-tools; do
  dpkg-deb --root-owner-group -Zxz --build "$out/$pkg" "$out/${pkg}_${DEBVER}_$ARCH.deb" >/dev/null
  echo "  DEB    $out/${pkg}_${DEBVER}_$ARCH.deb"
done
rm -rf "$stage" "$out/shlibdeps"
