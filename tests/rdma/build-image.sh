#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# build-image.sh — build the Soft-RoCE guest of flit's RDMA tests into the
# cache directory (FLIT_RDMA_VM_CACHE, default $BUILD/rdma-vm):
#
#   vmlinuz, vmlinux    Debian's linux-image-*-amd64 kernel (6.1 on Debian 12),
#                       the package resolved through linux-image-amd64 and
#                       fetched with `apt-get download` (FLIT_RDMA_VM_KPKG
#                       names another; a .deb already in the cache is reused);
#                       vmlinux is the ELF inside, which boots faster (PVH)
#   initramfs.cpio.gz   busybox (static) as the shell, tests/rdma/guest-init.sh
#                       as PID 1, the kernel modules the guest loads (virtio,
#                       9p, overlay, rdma_rxe, ib_uverbs, rdma_ucm and their
#                       dependencies) with a depmod of that subset, and this
#                       host's kmod, ip, rdma, ibv_devices and ibv_devinfo with
#                       their libraries and the rxe provider
#
# The tests themselves do not run from the initramfs: the guest chroots into
# this host's / (tests/rdma/vm-exec.sh), so they see the same binaries and
# libraries as here.  Rebuilds only when an input changed (the kernel package,
# these scripts, the host binaries copied); concurrent runs share the cache
# under a lock.
#
#   tests/rdma/build-image.sh [--force] [--quiet]
#
# Exit: 0 image ready, 77 cannot be built here ("SKIP: reason" on stdout:
# a missing tool, the kernel package not downloadable), 1 failure.
set -u -o pipefail
. "$(dirname "$0")/lib.sh"

FORCE= QUIET=
while [ $# -gt 0 ]; do
	case $1 in
	--force) FORCE=1 ;;
	--quiet) QUIET=1 ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-image: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done

say() { [ -n "$QUIET" ] || echo "build-image: $*"; }
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "build-image: $*" >&2; exit 1; }

if why=$(rdma_vm_missing); then skip "$why"; fi
CACHE=$(rdma_vm_cache) || die "cannot create the cache directory $CACHE"
BUSYBOX=$(rdma_vm_busybox)
export PATH=$PATH:/usr/sbin:/sbin

# One builder at a time per cache; a second run waits (bounded) and then
# finds the image ready.
exec 9>"$CACHE/.lock"
flock -w 600 9 || die "timed out waiting for the lock on $CACHE (another build running?)"

# ---- the kernel package ------------------------------------------------------
# Resolve linux-image-amd64's dependency (linux-image-6.1.0-NN-amd64 on Debian
# 12); the name moves with every point release.
resolve_kpkg() {
	timeout 60 apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
cached_deb() {   # newest cached linux-image .deb (of package $1 if given)
	ls -t "$CACHE"/${1:-linux-image-[0-9]*}_*.deb 2>/dev/null | head -1
}
KPKG=${FLIT_RDMA_VM_KPKG:-}
if [ -z "$KPKG" ]; then
	KPKG=$(resolve_kpkg)
	if [ -z "$KPKG" ] && [ -z "$(cached_deb)" ] && command -v apt-get >/dev/null; then
		say "apt-cache does not know linux-image-amd64; apt-get update"
		timeout 60 apt-get update -q >"$CACHE/apt-update.log" 2>&1
		KPKG=$(resolve_kpkg)
	fi
	if [ -z "$KPKG" ]; then
		DEB=$(cached_deb)
		[ -n "$DEB" ] || skip "cannot resolve the guest kernel: apt-cache knows no linux-image-amd64" \
			"(no Debian package lists; apt-get update) and $CACHE holds no linux-image .deb"
		KPKG=$(basename "$DEB"); KPKG=${KPKG%%_*}
		say "offline: using the cached $(basename "$DEB")"
	fi
fi
DEB=$(cached_deb "$KPKG")
if [ -z "$DEB" ]; then
	command -v apt-get >/dev/null || skip "apt-get not found: cannot download $KPKG"
	say "downloading $KPKG from Debian's archive"
	t0=$(now_ms)
	dl() { (cd "$CACHE" && timeout 120 apt-get download -q "$KPKG") >"$CACHE/download.log" 2>&1; }
	if ! dl; then
		say "apt-get download failed; apt-get update and retry"
		timeout 60 apt-get update -q >"$CACHE/apt-update.log" 2>&1
		dl || skip "cannot download the guest kernel $KPKG from Debian's archive" \
			"(apt-get download: $(grep -E '^(E|W):' "$CACHE/download.log" | tail -1))"
	fi
	DEB=$(cached_deb "$KPKG")
	[ -n "$DEB" ] || skip "apt-get download $KPKG left no .deb in $CACHE"
	say "downloaded $(basename "$DEB") in $(( ($(now_ms) - t0) / 1000 )) s"
	# older kernel packages are dead weight now
	for old in "$CACHE"/linux-image-[0-9]*_*.deb; do
		[ "$old" = "$DEB" ] || rm -f "$old"
	done
fi

# ---- what goes into the initramfs, and the cache key -------------------------
# (crc32: rdma_rxe's ICRC; the kernel asks for it by name, either serves)
MODS="virtio_pci virtio_net 9pnet_virtio 9p overlay rdma_rxe ib_uverbs rdma_ucm crc32_generic"
BINS=()
for b in kmod ip rdma ibv_devices ibv_devinfo; do
	p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$b") || die "$b not found"
	BINS+=("$(readlink -f "$p")")
done
# The rxe provider is dlopen()ed by libibverbs, libgcc_s by glibc for
# pthread_exit/cancel: ldd lists neither.
EXTRA=()
for f in /usr/lib/*-linux-gnu/libibverbs/librxe-rdmav*.so /usr/lib64/libibverbs/librxe-rdmav*.so \
         /usr/lib/*-linux-gnu/libgcc_s.so.1 /lib/*-linux-gnu/libgcc_s.so.1; do
	[ -e "$f" ] && EXTRA+=("$(readlink -f "$f")")
done
HERE=$RDMA_VM_HOME
key=$( {
	echo "deb $(basename "$DEB") mods $MODS busybox $BUSYBOX pvh ${FLIT_RDMA_VM_PVH:-1}"
	sha256sum "$HERE/build-image.sh" "$HERE/guest-init.sh" "$HERE/lib.sh"
	for f in "$BUSYBOX" "${BINS[@]}" "${EXTRA[@]}"; do stat -Lc '%n %s %Y' "$f"; done
} | sha256sum | cut -c1-16)
if [ -z "$FORCE" ] && [ -f "$CACHE/image.key" ] && [ "$(cat "$CACHE/image.key")" = "$key" ] &&
   [ -s "$CACHE/vmlinuz" ] && [ -s "$CACHE/initramfs.cpio.gz" ]; then
	say "image up to date in $CACHE ($(cat "$CACHE/kernel.version"))"
	exit 0
fi
rm -f "$CACHE/image.key"

# ---- kernel: extract, depmod (the .deb ships no modules.dep) -----------------
t0=$(now_ms)
KDIR=$CACHE/kernel.tmp
R=$CACHE/initramfs.tmp
trap 'rm -rf "$KDIR" "$R"' EXIT
rm -rf "$KDIR" "$R"; mkdir -p "$KDIR"
dpkg-deb -x "$DEB" "$KDIR" || die "dpkg-deb -x $DEB failed"
KVER=$(ls "$KDIR/lib/modules" 2>/dev/null | head -1)
[ -n "$KVER" ] && [ -f "$KDIR/boot/vmlinuz-$KVER" ] || die "$DEB holds no kernel (lib/modules, boot/vmlinuz)"
depmod -b "$KDIR" "$KVER" || die "depmod of $KVER failed"

# ---- staging root ------------------------------------------------------------
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,mnt/host,usr/bin,usr/sbin,usr/lib,lib/modules/"$KVER"}
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do
	[ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
done

# modules and their dependencies, then depmod of the subset
for m in $MODS; do
	modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" { print $2 }'
done | sort -u | while read -r ko; do
	rel=${ko#"$KDIR"}; rel=${rel#/./}; rel=${rel#/}
	mkdir -p "$R/$(dirname "$rel")" && cp "$ko" "$R/$rel"
done
for m in rdma_rxe ib_uverbs virtio_net 9p overlay; do
	find "$R/lib/modules" -name "$m.ko*" | grep -q . || die "module $m missing from $KPKG"
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
mkdir -p "$R/etc/libibverbs.d" && cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
echo '127.0.0.1 localhost' >"$R/etc/hosts"
install -m 755 "$HERE/guest-init.sh" "$R/init"

(cd "$R" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$CACHE/initramfs.cpio.gz.tmp" ||
	die "cpio of the initramfs failed"
cp "$KDIR/boot/vmlinuz-$KVER" "$CACHE/vmlinuz.tmp" || die "cannot copy vmlinuz"
mv "$CACHE/vmlinuz.tmp" "$CACHE/vmlinuz"
# The kernel ELF inside the bzImage, booted directly through its PVH entry
# point: under TCG that saves the decompression, 3-8 s of every boot.
# Without python3, or if the kernel has no PVH note, the bzImage boots.
rm -f "$CACHE/vmlinux"
if [ "${FLIT_RDMA_VM_PVH:-1}" != 0 ] && command -v python3 >/dev/null 2>&1; then
	python3 - "$CACHE/vmlinuz" "$CACHE/vmlinux.tmp" <<'EOF_PY' && mv "$CACHE/vmlinux.tmp" "$CACHE/vmlinux"
import gzip, lzma, re, sys, zlib
data = open(sys.argv[1], "rb").read()
for magic, unpack in ((b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(b)),
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
	rm -f "$CACHE/vmlinux.tmp"
fi
mv "$CACHE/initramfs.cpio.gz.tmp" "$CACHE/initramfs.cpio.gz"
echo "$KVER" >"$CACHE/kernel.version"
echo "$key" >"$CACHE/image.key"
say "built kernel $KVER$([ -s "$CACHE/vmlinux" ] && echo " (PVH ELF)") + initramfs ($(du -k "$CACHE/initramfs.cpio.gz" | cut -f1) KiB) in" \
    "$(( ($(now_ms) - t0) / 1000 )) s into $CACHE"
