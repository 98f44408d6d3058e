#!/usr/bin/env bash
# Check flit's build and test dependencies; install what is missing from
# Debian's archive when run as root, else print the apt-get line and fail.
set -u
declare -A pc=(            # pkg-config module -> Debian package
  [libbpf]=libbpf-dev [libxdp]=libxdp-dev [liburing]=liburing-dev
  [cmocka]=libcmocka-dev [libibverbs]=libibverbs-dev [librdmacm]=librdmacm-dev
)
declare -A cmd=(           # command -> Debian package
  [pkg-config]=pkg-config [gcc]=gcc [make]=make [clang]=clang [llc]=llvm
  [bpftool]=bpftool [xdp-loader]=xdp-tools [ip]=iproute2 [timeout]=coreutils
  [nft]=nftables [ethtool]=ethtool [sockperf]=sockperf [gnuplot]=gnuplot-nox [capsh]=libcap2-bin
  [tshark]=tshark [tcpdump]=tcpdump
  # bindings, exporter and packages (issue 17): g++ for flit.hpp, pytest for
  # python/, promtool to validate flit-stat --prometheus, dpkg-dev for make deb
  [g++]=g++ [pytest-3]=python3-pytest [promtool]=prometheus [curl]=curl [file]=file
  [dpkg-shlibdeps]=dpkg-dev [systemd-analyze]=systemd
  # RDMA: verbs tools and perftest (the reference), and the Soft-RoCE guest
  # of tests/rdma (qemu, a static busybox, cpio and kmod for its initramfs)
  [ibv_devinfo]=ibverbs-utils [ib_send_lat]=perftest [rping]=rdmacm-utils [rdma]=iproute2
  [qemu-system-x86_64]=qemu-system-x86 [cpio]=cpio [depmod]=kmod [busybox]=busybox-static
)
# files -> Debian package (clang's sanitizer/fuzzer runtime for `make fuzz`)
declare -A file=(
  [/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a]=libclang-rt-14-dev
  [/usr/include/elf.h]=libc6-dev [/usr/include/zlib.h]=zlib1g-dev [/usr/include/libelf.h]=libelf-dev
  [/etc/libibverbs.d/rxe.driver]=ibverbs-providers
  # pip install ./python offline: the setuptools backend, wheels, venvs
  [/usr/lib/python3/dist-packages/setuptools/__init__.py]=python3-setuptools
  [/usr/lib/python3/dist-packages/wheel/__init__.py]=python3-wheel
  [/usr/lib/python3/dist-packages/pip/__init__.py]=python3-pip
  [/usr/share/doc/python3-venv/copyright]=python3-venv
)
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
for m in "${!pc[@]}"; do
  command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$m" 2>/dev/null || missing+=("${pc[$m]}")
done
for c in "${!cmd[@]}"; do
  command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing+=("${cmd[$c]}")
done
for f in "${!file[@]}"; do [ -e "$f" ] || missing+=("${file[$f]}"); done
[ ${#missing[@]} -eq 0 ] && { echo "  DEPS   all present"; exit 0; }
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "flit: missing dependencies; as root run:" >&2
  echo "  apt-get update && $line" >&2
  exit 1
fi
echo "  DEPS   installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# packages install, services do not start (prometheus is here for promtool):
# policy-rc.d's "101" tells invoke-rc.d/deb-systemd-invoke not to start them
policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  policy=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
{ apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } >/tmp/flit-deps.log 2>&1 || {
  echo "flit: apt-get failed (log: /tmp/flit-deps.log); run: apt-get update && $line" >&2
  tail -5 /tmp/flit-deps.log >&2; exit 1; }
echo "  DEPS   installed"
