#!/usr/bin/env bash
# The Debian packages (`make deb`: libflit0, libflit-dev, flit-tools) install
# with dpkg into a throw-away root — an overlay of this Debian 12 system with
# a tmpfs on top, in a private mount namespace, so the host is never
# changed — and work there: dpkg's dependency checks pass, every installed
# binary resolves its libraries, flit-pub -> flit-sub carries messages over
# shm, a C program builds against the installed library through pkg-config
# (shared and static) and runs, the man pages and the unit are where man and
# systemd look.  Then the unit flit-loader@.service: `systemd-analyze verify`
# accepts it, and its ExecStart/ExecStop lines, run as written (%I = a veth
# of a network namespace made here), attach flit's XDP program and detach it.
# (systemd itself is not PID 1 on the machines this runs on, so the unit is
# not started through systemctl.)  Finally dpkg -r removes everything.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
# timeout: 300
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (CAP_SYS_ADMIN) for the overlay root and dpkg"; exit 77; }
[ "${SAN:-0}" = 1 ] && { echo "SKIP: the packages are built without sanitizers (make deb, not SAN=1)"; exit 77; }
for c in dpkg-deb dpkg-shlibdeps unshare ip; do
  command -v "$c" >/dev/null || { echo "SKIP: $c missing (make deps)"; exit 77; }
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || { echo "SKIP: no overlayfs in this kernel"; exit 77; }

tmp=$(mktemp -d /tmp/flit-test-deb.XXXXXX)
ns=flitdeb$$
cleanup() { ip netns del "$ns" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# the packages, from this tree's build (its own BUILD dir: make deb rebuilds
# nothing that is up to date)
make --no-print-directory deb BUILD="$BUILD" >"$tmp/mkdeb.log" 2>&1 ||
  { cat "$tmp/mkdeb.log"; echo "FAIL: make deb"; exit 1; }
debs=("$BUILD"/deb/*.deb)
[ ${#debs[@]} -eq 3 ] || { echo "FAIL: make deb made ${#debs[@]} packages, not 3"; exit 1; }
mkdir "$tmp/debs"; cp "${debs[@]}" "$tmp/debs/"
echo "ok: make deb: $(cd "$tmp/debs" && echo *.deb)"

# ---- install into a throw-away root and use it -----------------------------
cat > "$tmp/inroot.sh" <<'EOF'
# runs in the throw-away root (chroot): install, use, remove
set -u
f=0; bad() { echo "FAIL: $*"; f=$((f + 1)); }
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
dpkg -s libflit0 >/dev/null 2>&1 && { echo "FAIL: libflit0 already installed in the root"; exit 1; }
dpkg -i /debs/*.deb > /tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; echo "FAIL: dpkg -i"; exit 1; }
for p in libflit0 libflit-dev flit-tools; do
  [ "$(dpkg-query -W -f '${db:Status-Abbrev}' "$p")" = "ii " ] || bad "$p not installed"
done
echo "ok: dpkg -i libflit0 libflit-dev flit-tools"
for b in /usr/bin/flit-* /usr/lib/*/libflit.so.0; do
  file -b "$b" | grep -q '^ELF' || continue
  ldd "$b" 2>&1 | grep -q 'not found' && bad "$b: $(ldd "$b" | grep 'not found')"
done
ldconfig -p | grep -q 'libflit.so.0 ' || bad "ldconfig does not know libflit.so.0"
for t in flit-pub flit-sub flit-pong flit-thru flit-load flit-floor flit-stat flit-loader; do
  [ "$(command -v $t)" = /usr/bin/$t ] || bad "$t not on PATH from /usr/bin"
  $t --help >/dev/null 2>&1 || bad "$t --help"
done
echo "ok: the tools run from /usr/bin"
# pub -> sub over shm, with the installed tools and library
mkdir -p /dev/shm
flit-sub -t shm -n 3 -T 10 deb.topic > /tmp/sub.out 2>&1 &
sub=$!
sleep 0.5
flit-pub -t shm -w 1 deb.topic one two three > /tmp/pub.out 2>&1 || bad "flit-pub: $(cat /tmp/pub.out)"
wait $sub || bad "flit-sub: $(cat /tmp/sub.out)"
n=$(grep -c '^deb.topic seq=' /tmp/sub.out)
[ "$n" = 3 ] && grep -q '"three"' /tmp/sub.out || bad "flit-sub got $n of 3: $(cat /tmp/sub.out)"
echo "ok: flit-pub -> flit-sub over shm: $n of 3"
# a program against the installed library
cat > /tmp/app.c <<'C'
#include <stdio.h>
#include <flit/flit.h>
int main(void)
{
	flit_ctx *ctx = flit_ctx_new(NULL);
	if (!ctx) { fprintf(stderr, "flit_ctx_new: %s\n", flit_errmsg()); return 1; }
	flit_pub *pub = flit_pub_new(ctx, "deb.app", NULL);
	if (!pub) { fprintf(stderr, "flit_pub_new: %s\n", flit_errmsg()); return 1; }
	int rc = flit_pub_send(pub, "x", 1);
	printf("sent %d next_seq %llu\n", rc, (unsigned long long)flit_pub_next_seq(pub));
	flit_pub_close(pub);
	flit_ctx_close(ctx);
	return rc < 0;
}
C
gcc -Wall -Werror /tmp/app.c -o /tmp/app $(pkg-config --cflags --libs flit) 2>/tmp/cc.log || bad "cc (shared): $(cat /tmp/cc.log)"
ldd /tmp/app | grep -Eq 'libflit.so.0 => (/usr)?/lib/[^ ]*/libflit.so.0 ' || bad "app is not linked to the installed libflit.so.0"
FLIT_CONTEXT_TRANSPORTS=shm /tmp/app > /tmp/app.out 2>&1 && grep -q 'sent 0 next_seq 1' /tmp/app.out ||
  bad "app (shared): $(cat /tmp/app.out)"
gcc -Wall -Werror -static-libgcc /tmp/app.c -o /tmp/app-static $(pkg-config --cflags flit) \
  -Wl,-Bstatic -lflit -Wl,-Bdynamic $(pkg-config --libs-only-l --static flit | sed 's/-lflit//') -lm 2>/tmp/cc.log ||
  bad "cc (static libflit.a): $(cat /tmp/cc.log)"
ldd /tmp/app-static | grep -q libflit && bad "app-static still needs libflit.so"
FLIT_CONTEXT_TRANSPORTS=shm /tmp/app-static > /tmp/app.out 2>&1 && grep -q 'sent 0 next_seq 1' /tmp/app.out ||
  bad "app (static): $(cat /tmp/app.out)"
echo "ok: a C program builds with pkg-config flit (shared and static) and runs"
if [ -f /usr/include/flit/flit.hpp ]; then
  printf '#include <flit/flit.hpp>\nint main() { return 0; }\n' > /tmp/app.cpp
  g++ -std=c++20 -Wall -Werror /tmp/app.cpp -o /tmp/appxx $(pkg-config --cflags --libs flit) 2>/tmp/cc.log ||
    bad "c++ (flit.hpp): $(cat /tmp/cc.log)"
  echo "ok: flit/flit.hpp compiles from the installed package"
fi
for m in man1/flit-pub.1 man1/flit-sub.1 man1/flit-stat.1 man8/flit-loader.8; do
  [ -f /usr/share/man/$m.gz ] || bad "no /usr/share/man/$m.gz"
done
[ -f /lib/systemd/system/flit-loader@.service ] || bad "no /lib/systemd/system/flit-loader@.service"
grep -q '^ExecStart=/usr/bin/flit-loader attach %I' /lib/systemd/system/flit-loader@.service ||
  bad "the unit does not run /usr/bin/flit-loader"
echo "ok: man pages and the systemd unit in place"
dpkg -r flit-tools libflit-dev libflit0 > /tmp/dpkg.log 2>&1 || bad "dpkg -r: $(cat /tmp/dpkg.log)"
left=$(ls /usr/bin/flit-* /usr/lib/*/libflit* /usr/include/flit /lib/systemd/system/flit-loader@.service 2>/dev/null)
[ -z "$left" ] || bad "left after dpkg -r: $left"
echo "ok: dpkg -r removes them"
exit $f
EOF

# A private mount namespace: the overlay, its tmpfs and the binds vanish with it
unshare -m --propagation private bash -c '
  set -e
  t=$1; m=$t/root
  mkdir -p "$t/ov" "$m"
  mount -t tmpfs -o size=512m tmpfs "$t/ov"
  mkdir "$t/ov/upper" "$t/ov/work"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$t/ov/upper,workdir=$t/ov/work" "$m"
  mount -t proc proc "$m/proc"
  mount --rbind /dev "$m/dev"
  mount -t tmpfs tmpfs "$m/dev/shm"
  mount -t tmpfs tmpfs "$m/tmp"
  mount -t tmpfs tmpfs "$m/run"
  mkdir "$m/debs"; cp "$t"/debs/*.deb "$m/debs/"
  cp "$t/inroot.sh" "$m/inroot.sh"
  chroot "$m" env -i HOME=/root TERM=dumb bash /inroot.sh
' _ "$tmp" > "$tmp/root.log" 2>&1
rc=$?
cat "$tmp/root.log"
[ $rc -eq 0 ] || fail "in the throw-away root (exit $rc)"
grep -q '^ok: dpkg -r' "$tmp/root.log" || fail "the throw-away root did not get to the end"

# ---- the systemd unit -----------------------------------------------------
x="$tmp/x"; mkdir "$x"
dpkg-deb -x "$tmp"/debs/flit-tools_*.deb "$x"
unit="$x/lib/systemd/system/flit-loader@.service"
if command -v systemd-analyze >/dev/null; then
  # verify an instance of the template, with the binary where it points
  mkdir -p "$tmp/units"
  sed "s|/usr/bin/flit-loader|$x/usr/bin/flit-loader|g" "$unit" > "$tmp/units/flit-loader@veth0.service"
  if systemd-analyze verify --man=no "$tmp/units/flit-loader@veth0.service" > "$tmp/verify.log" 2>&1; then
    echo "ok: systemd-analyze verify flit-loader@veth0.service"
  else
    # the device unit it binds to does not exist here: that alone is fine
    if grep -v -e 'sys-subsystem-net-devices' -e '^$' "$tmp/verify.log" | grep -q .; then
      fail "systemd-analyze verify: $(cat "$tmp/verify.log")"
    else
      echo "ok: systemd-analyze verify (only the absent device noted)"
    fi
  fi
else
  echo "note: systemd-analyze not installed: the unit is not verified"
fi

# ExecStart / ExecStop as written, %I = the interface, FLIT_LOADER_ARGS empty
exec_line() { sed -n "s/^$1=//p" "$unit" | sed -e "s/%I/veth0/g" -e 's/\$FLIT_LOADER_ARGS//'; }
start=$(exec_line ExecStart); stop=$(exec_line ExecStop)
[ -n "$start" ] && [ -n "$stop" ] || fail "the unit has no ExecStart/ExecStop"
if ip netns add "$ns" 2>/dev/null && ip -n "$ns" link add veth0 type veth peer name veth1 &&
   ip -n "$ns" link set veth0 up && ip -n "$ns" link set veth1 up; then
  # the binary from the package, libraries from this system (as installed)
  # (nsenter, not ip netns exec: pins must land in the system's bpffs)
  run() { nsenter --net="/run/netns/$ns" ${1/\/usr\/bin\//$x/usr/bin/}; }
  # shellcheck disable=SC2086
  if run "$start" > "$tmp/start.log" 2>&1; then
    if nsenter --net="/run/netns/$ns" "$x/usr/bin/flit-loader" status veth0 --json > "$tmp/status" 2>&1 &&
       grep -q '"attached":true' "$tmp/status" && grep -q '"flit":true' "$tmp/status"; then
      echo "ok: ExecStart ($start) attached flit's program"
    else
      fail "after ExecStart, status: $(cat "$tmp/status")"
    fi
    if run "$stop" > "$tmp/stop.log" 2>&1; then
      nsenter --net="/run/netns/$ns" "$x/usr/bin/flit-loader" status veth0 --json > "$tmp/status" 2>&1
      if grep -q '"attached":false' "$tmp/status"; then
        echo "ok: ExecStop ($stop) detached it"
      else
        fail "after ExecStop, status: $(cat "$tmp/status")"
      fi
    else
      fail "ExecStop ($stop): $(cat "$tmp/stop.log")"
    fi
  else
    fail "ExecStart ($start): $(cat "$tmp/start.log")"
  fi
else
  echo "note: no network namespace here: the unit's commands are not run"
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS"
