#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# build-image.sh — build a guest of flit's guest harness (tests/vm/, docs/VM.md)
# into the cache directory (FLIT_VM_CACHE, default $BUILD/vm), one image per
# kernel, under k/KVER/:
#
#   vmlinuz, vmlinux    Debian's kernel (--kernel: 6.1, 6.12, newest or a
#                       linux-image package; tests/vm/lib.sh), fetched with
#                       `apt-get download` through the harness's own apt
#                       state (the .debs are kept in debs/); vmlinux is the
#                       ELF inside, which boots faster (PVH)
#   initramfs.cpio.gz   busybox (static) as the shell, tests/vm/guest-init.sh
#                       as PID 1, the kernel modules a guest may load
#                       (virtio, 9p, overlay, veth, e1000e; rdma_rxe,
#                       ib_uverbs, rdma_ucm where the host can drive them),
#                       decompressed, with a depmod of that subset, and this
#                       host's kmod, ip (and rdma, ibv_devices, ibv_devinfo
#                       with the rxe provider, where installed) with their
#                       libraries
# images/SPEC points at the image of the kernel SPEC resolved to.
#
# The tests themselves do not run from the initramfs: the guest chroots into
# this host's / (tests/vm/vm-exec.sh), so they see the same binaries and
# libraries as here.  Rebuilds only when an input changed (the kernel
# packages, these scripts, the host binaries copied); concurrent runs share
# the cache under a lock.
#
#   tests/vm/build-image.sh [--kernel SPEC] [--force] [--quiet]
#
# Exit: 0 image ready, 77 cannot be built here ("SKIP: reason" on stdout:
# a missing tool, the kernel package not downloadable), 1 failure, 2 misuse.
set -u -o pipefail
. "$(dirname "$0")/lib.sh"

FORCE= QUIET= SPEC=
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) [ $# -ge 2 ] || { echo "build-image: --kernel needs a value" >&2; exit 2; }
		SPEC=$2; shift ;;
	--force) FORCE=1 ;;
	--quiet) QUIET=1 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-image: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
SPEC=$(vm_kernel_spec "$SPEC")
valid_kernel_spec "$SPEC" ||
	{ echo "build-image: bad kernel '$SPEC' (6.1, 6.12, newest or linux-image-...-amd64)" >&2; exit 2; }

say() { [ -n "$QUIET" ] || echo "build-image: $*"; }
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "build-image: $*" >&2; exit 1; }

if why=$(vm_missing); then skip "$why"; fi
CACHE=$(vm_cache) || die "cannot create the cache directory $CACHE"
BUSYBOX=$(vm_busybox)
export PATH=$PATH:/usr/sbin:/sbin

# One builder at a time per cache; a second run waits (bounded) and then
# finds the image ready.
exec 9>"$CACHE/.lock"
flock -w 600 9 || die "timed out waiting for the lock on $CACHE (another build running?)"

# ---- the kernel packages ---------------------------------------------------------
# The harness's own apt state: Debian 12, its backports and trixie-backports.
APT=$CACHE/apt DEBS=$CACHE/debs
mkdir -p "$APT/lists/partial" "$APT/archives/partial" "$DEBS" "$CACHE/images" "$CACHE/k"
MIRROR=${FLIT_VM_MIRROR:-http://deb.debian.org/debian}
cat >"$APT/sources.list.new" <<EOF_SRC
deb $MIRROR bookworm main
deb $MIRROR bookworm-backports main
deb $MIRROR trixie-backports main
deb ${FLIT_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
EOF_SRC
cmp -s "$APT/sources.list.new" "$APT/sources.list" || { mv "$APT/sources.list.new" "$APT/sources.list"; rm -f "$APT/updated"; }
rm -f "$APT/sources.list.new"
apt_o=(-o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT" -o "Dir::Cache::archives=$APT/archives"
       -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root -q)
apt_update() {
	say "apt-get update (the harness's own lists: bookworm, bookworm-backports, trixie-backports)"
	timeout 120 apt-get "${apt_o[@]}" update >"$APT/update.log" 2>&1 && date +%s >"$APT/updated"
}
# a day-old list may name packages the archive has dropped: refresh then
stale() { [ ! -s "$APT/updated" ] || [ $(( $(date +%s) - $(cat "$APT/updated") )) -gt 86400 ]; }

# resolve SPEC: the .deb packages of that kernel, one per line (the image
# package; since Debian's 6.19 packaging also its linux-base/-binary/-modules)
resolve() {
	local ver img
	case $SPEC in
	linux-image-*) img=$SPEC ;;
	*)
		# linux-image-amd64's versions, highest first: "7.3.4-1~bpo13+1",
		# "6.12.95-1~bpo12+1", "6.1.176-1"
		ver=$(apt-cache "${apt_o[@]}" madison linux-image-amd64 2>/dev/null | awk -F' *[|] *' '
			{ v = $2; s = $3 }
			spec == "6.1" && v ~ /^6\.1\./ && v !~ /bpo/ { print v; exit }
			spec == "6.12" && v ~ /^6\.12\./ && v ~ /bpo12/ { print v; exit }
			spec == "newest" && s ~ /trixie-backports/ { print v; exit }' spec="$SPEC")
		[ -n "$ver" ] || return 1
		img=$(apt-cache "${apt_o[@]}" show "linux-image-amd64=$ver" 2>/dev/null |
			sed -n 's/^Depends: //p' | tr ',' '\n' | sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -1)
		;;
	esac
	[ -n "$img" ] || return 1
	apt-cache "${apt_o[@]}" show "$img" >/dev/null 2>&1 || return 1
	echo "$img"
	apt-cache "${apt_o[@]}" show "$img" 2>/dev/null | sed -n '1,/^$/s/^Depends: //p' | tr ',' '\n' |
		sed -n 's/^ *\(linux-\(base\|binary\|modules\)-[0-9][^ ]*\).*/\1/p'
}
PKGS=
stale && apt_update
PKGS=$(resolve)
if [ -z "$PKGS" ] && [ -s "$APT/updated" ] && ! stale; then
	apt_update; PKGS=$(resolve)
fi
if [ -z "$PKGS" ]; then
	# offline: what an earlier run resolved SPEC to, if its .debs are here
	if [ -s "$CACHE/images/$SPEC.pkgs" ]; then
		PKGS=$(cat "$CACHE/images/$SPEC.pkgs")
		say "cannot resolve $SPEC now ($(grep -E '^(E|W|Err):' "$APT/update.log" 2>/dev/null | tail -1)); using the packages of an earlier run"
	else
		skip "cannot resolve the guest kernel $SPEC through Debian's archive" \
			"($(grep -E '^(E|W|Err):' "$APT/update.log" 2>/dev/null | tail -1 || echo 'no package lists')) and $CACHE holds none"
	fi
fi
DEB_FILES=()
for p in $PKGS; do
	d=$(ls -t "$DEBS/${p}_"*.deb 2>/dev/null | head -1)
	if [ -z "$d" ]; then
		say "downloading $p from Debian's archive"
		t0=$(now_ms)
		(cd "$DEBS" && timeout 300 apt-get "${apt_o[@]}" download "$p") >"$DEBS/download.log" 2>&1 ||
			skip "cannot download the guest kernel package $p from Debian's archive" \
				"(apt-get download: $(grep -E '^(E|W|Err):' "$DEBS/download.log" | tail -1))"
		d=$(ls -t "$DEBS/${p}_"*.deb 2>/dev/null | head -1)
		[ -n "$d" ] || skip "apt-get download $p left no .deb in $DEBS"
		say "downloaded $(basename "$d") ($(du -m "$d" | cut -f1) MB) in $(( ($(now_ms) - t0) / 1000 )) s"
	fi
	DEB_FILES+=("$d")
done
echo "$PKGS" >"$CACHE/images/$SPEC.pkgs"
# .debs no kernel spec resolves to any more (an older point release) are dead weight
for d in "$DEBS"/*.deb; do
	[ -e "$d" ] || continue
	p=$(basename "$d"); p=${p%%_*}
	cat "$CACHE"/images/*.pkgs 2>/dev/null | grep -qxF "$p" || rm -f "$d"
done

# ---- what goes into the initramfs, and the cache key -------------------------
# Needed by every guest; then what some guests use, taken where the kernel
# has it: veth and e1000e (the XDP tests), Soft-RoCE (crc32: rdma_rxe's
# ICRC; the kernel asks for it by name, either serves).
MODS_NEED="virtio_pci virtio_net 9pnet_virtio 9p overlay"
MODS_OPT="veth e1000e rdma_rxe ib_uverbs rdma_ucm crc32_generic"
BINS=()
for b in kmod ip rdma ibv_devices ibv_devinfo; do
	p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$b") || {
		case $b in kmod|ip) die "$b not found" ;; esac
		continue; }
	BINS+=("$(readlink -f "$p")")
done
# The rxe provider is dlopen()ed by libibverbs, libgcc_s by glibc for
# pthread_exit/cancel: ldd lists neither.
EXTRA=()
for f in /usr/lib/*-linux-gnu/libibverbs/librxe-rdmav*.so /usr/lib64/libibverbs/librxe-rdmav*.so \
         /usr/lib/*-linux-gnu/libgcc_s.so.1 /lib/*-linux-gnu/libgcc_s.so.1; do
	[ -e "$f" ] && EXTRA+=("$(readlink -f "$f")")
done
HERE=$VM_HOME
key=$( {
	echo "debs ${DEB_FILES[*]##*/} mods $MODS_NEED $MODS_OPT busybox $BUSYBOX pvh ${FLIT_VM_PVH:-${FLIT_RDMA_VM_PVH:-1}}"
	sha256sum "$HERE/build-image.sh" "$HERE/guest-init.sh" "$HERE/lib.sh"
	for f in "$BUSYBOX" "${BINS[@]}" "${EXTRA[@]}"; do stat -Lc '%n %s %Y' "$f"; done
} | sha256sum | cut -c1-16)
if [ -z "$FORCE" ] && [ -L "$CACHE/images/$SPEC" ]; then
	IMG=$(readlink -f "$CACHE/images/$SPEC")
	if [ -f "$IMG/image.key" ] && [ "$(cat "$IMG/image.key")" = "$key" ] &&
	   [ -s "$IMG/vmlinuz" ] && [ -s "$IMG/initramfs.cpio.gz" ]; then
		say "image of $SPEC up to date in $IMG ($(cat "$IMG/kernel.version"))"
		exit 0
	fi
fi

# ---- kernel: extract, depmod (the .deb ships no modules.dep) -----------------
t0=$(now_ms)
KDIR=$CACHE/kernel.tmp
R=$CACHE/initramfs.tmp
trap '[ -n "${FLIT_VM_KEEP_TMP:-}" ] || rm -rf "$KDIR" "$R"' EXIT
rm -rf "$KDIR" "$R"; mkdir -p "$KDIR"
for d in "${DEB_FILES[@]}"; do
	dpkg-deb -x "$d" "$KDIR" || die "dpkg-deb -x $d failed"
done
# Debian's packaging since 6.19 puts the modules and vmlinuz under
# usr/lib/modules/KVER/; depmod -b and modprobe -d want lib/modules
if [ -d "$KDIR/usr/lib/modules" ]; then
	mkdir -p "$KDIR/lib/modules" && cp -a "$KDIR/usr/lib/modules/." "$KDIR/lib/modules/" &&
		rm -rf "$KDIR/usr/lib/modules"
fi
KVER=$(ls "$KDIR/lib/modules" 2>/dev/null | head -1)
VMLINUZ=$KDIR/boot/vmlinuz-$KVER
[ -f "$VMLINUZ" ] || VMLINUZ=$KDIR/lib/modules/$KVER/vmlinuz
[ -n "$KVER" ] && [ -f "$VMLINUZ" ] || die "${DEB_FILES[*]##*/} hold no kernel (lib/modules, vmlinuz)"
depmod -b "$KDIR" "$KVER" || die "depmod of $KVER failed"
IMG=$CACHE/k/$KVER

# ---- staging root ------------------------------------------------------------
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,mnt/host,usr/bin,usr/sbin,usr/lib,lib/modules/"$KVER"}
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do
	[ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
done

# modules and their dependencies, decompressed (the guest's insmod then
# needs no xz or zstd), then depmod of the subset
for m in $MODS_NEED $MODS_OPT; do
	# (an optional module the kernel lacks: nothing; a built-in one: "builtin")
	modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" { print $2 }' || :
done | sort -u | while read -r ko; do
	rel=${ko#"$KDIR"}; rel=${rel#/./}; rel=${rel#/}
	mkdir -p "$R/$(dirname "$rel")" || exit 1
	case $rel in
	*.ko.xz) xz -dc "$ko" >"$R/${rel%.xz}" ;;
	*.ko.zst) zstd -qdc "$ko" >"$R/${rel%.zst}" ;;
	*.ko.gz) gzip -dc "$ko" >"$R/${rel%.gz}" ;;
	*) cp "$ko" "$R/$rel" ;;
	esac || exit 1
done || die "cannot copy the modules of $KVER"
for m in $MODS_NEED; do
	find "$R/lib/modules" -name "$m.ko" | grep -q . ||
		grep -q "/$m.ko" "$KDIR/lib/modules/$KVER/modules.builtin" 2>/dev/null || die "module $m missing from ${DEB_FILES[*]##*/}"
done
cp "$KDIR/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KVER/" 2>/dev/null
depmod -b "$R" "$KVER" || die "depmod of the initramfs modules failed"

# host binaries with the libraries ldd names, at the same paths
copy() {
	local f=$1 l
	mkdir -p "$R$(dirname "$f")" && cp -L "$f" "$R$f" || die "cannot copy $f"
	ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]*ld-linux/ { print $1 }' |
	while read -r l; do
		[ -e "$R$l" ] || { mkdir -p "$R$(dirname "$l")" && cp -L "$l" "$R$l"; }
	done
}
for f in "${BINS[@]}" "${EXTRA[@]}"; do copy "$f"; done
# Debian is usr-merged (/lib -> usr/lib, /bin/ip is /usr/bin/ip): give the
# initramfs the same spellings
for d in lib lib64; do
	if [ -d "$R/$d" ] && [ ! -L "$R/$d" ] && [ "$d" != lib ]; then
		mkdir -p "$R/usr/$d" && cp -a "$R/$d/." "$R/usr/$d/" && rm -rf "${R:?}/$d" && ln -s "usr/$d" "$R/$d"
	fi
done
for d in "$R"/lib/*-linux-gnu; do
	[ -d "$d" ] || continue
	n=$(basename "$d"); mkdir -p "$R/usr/lib/$n" && cp -a "$d/." "$R/usr/lib/$n/" && rm -rf "$d"
	ln -s "../usr/lib/$n" "$R/lib/$n"
done
# the kernel's request_module() runs /sbin/modprobe (rdma_rxe asks for crc32)
for t in modprobe insmod rmmod lsmod modinfo depmod; do
	rm -f "$R/sbin/$t" "$R/bin/$t"; ln -s "$(readlink -f /usr/bin/kmod 2>/dev/null || echo /usr/bin/kmod)" "$R/sbin/$t"
done
for b in "${BINS[@]}"; do   # on PATH under their usual names
	n=$(basename "$b"); [ "$n" = kmod ] && continue
	[ -e "$R/usr/bin/$n" ] || ln -s "$b" "$R/usr/bin/$n"
done
if [ -e /etc/libibverbs.d/rxe.driver ]; then
	mkdir -p "$R/etc/libibverbs.d" && cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
fi
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
echo '127.0.0.1 localhost' >"$R/etc/hosts"
install -m 755 "$HERE/guest-init.sh" "$R/init"

rm -rf "$IMG"; mkdir -p "$IMG" || die "cannot create $IMG"
(cd "$R" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$IMG/initramfs.cpio.gz" ||
	die "cpio of the initramfs failed"
cp "$VMLINUZ" "$IMG/vmlinuz" || die "cannot copy vmlinuz"
# The kernel ELF inside the bzImage, booted directly through its PVH entry
# point: under TCG that saves the decompression, 3-8 s of every boot.
# Without python3, or if the kernel has no PVH note, the bzImage boots.
if [ "${FLIT_VM_PVH:-${FLIT_RDMA_VM_PVH:-1}}" != 0 ] && command -v python3 >/dev/null 2>&1; then
	python3 - "$IMG/vmlinuz" "$IMG/vmlinux.tmp" <<'EOF_PY' && mv "$IMG/vmlinux.tmp" "$IMG/vmlinux"
import lzma, re, subprocess, sys, zlib
def unzstd(b):   # (no zstd module in Python 3.11: the zstd command)
    return subprocess.run(["zstd", "-qdc"], input=b, capture_output=True).stdout
data = open(sys.argv[1], "rb").read()
for magic, unpack in ((b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(b)),
                      (b"\x28\xb5\x2f\xfd", unzstd),
                      (b"\x1f\x8b\x08", lambda b: zlib.decompressobj(31).decompress(b))):
    i = data.find(magic)
    if i < 0:
        continue
    try:
        elf = unpack(data[i:])
    except Exception:
        continue
    # an ELF note "Xen" of type 18 (XEN_ELFNOTE_PHYS32_ENTRY): the PVH entry
    if elf[:4] == b"\x7fELF" and re.search(rb"\x04\x00\x00\x00[\x04\x08]\x00\x00\x00\x12\x00\x00\x00Xen\x00", elf):
        open(sys.argv[2], "wb").write(elf)
        sys.exit(0)
sys.exit(1)
EOF_PY
	rm -f "$IMG/vmlinux.tmp"
fi
echo "$KVER" >"$IMG/kernel.version"
echo "$key" >"$IMG/image.key"
ln -sfn "../k/$KVER" "$CACHE/images/$SPEC"
for k in "$CACHE"/k/*; do   # images no spec points at
	[ -d "$k" ] || continue
	for l in "$CACHE"/images/*; do [ "$(readlink -f "$l")" = "$k" ] && continue 2; done
	rm -rf "$k"
done
say "built kernel $KVER$([ -s "$IMG/vmlinux" ] && echo " (PVH ELF)") + initramfs ($(du -k "$IMG/initramfs.cpio.gz" | cut -f1) KiB) in" \
    "$(( ($(now_ms) - t0) / 1000 )) s into $IMG"
