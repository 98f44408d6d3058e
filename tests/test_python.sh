#!/usr/bin/env bash
# The Python package (python/): pip-installed into a fresh virtual
# environment (python3 -m venv --system-site-packages, pip install
# --no-build-isolation --no-index: offline, setuptools and pytest from
# Debian), then its pytest suite (python/tests) against $BUILD/libflit.so.0
# (FLIT_LIBRARY) and the C tools of $FLIT_TOOLS_DIR:
#  - the API in one process: pub/sub, patterns, events, claim/commit,
#    statuses, errors (bad transport, bad config key, use after close,
#    claim above max_msg), counters, logging, the iterator's timeout;
#  - shm between two Python processes, a publisher killed with -9;
#  - Python against flit-pub, flit-sub and flit-pong over shm;
#  - udp across a 2-host testbed cabled back to back (as root; built here
#    and always taken down):
#        NAME-h1 (10.77.0.1) eth0 <--- veth ---> eth0 (10.77.0.2) NAME-h2
#  - the ctypes structures against include/flit/flit.h.
# The installed copy is the one tested (FLIT_EXPECT_INSTALLED).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
# timeout: 300
set -u
BUILD=${BUILD:-build}
ROOT=$PWD
LIB=$ROOT/$BUILD/libflit.so.0
T=${FLIT_TESTBED:-$ROOT/tools/testbed}
export FLIT_TOOLS_DIR=${FLIT_TOOLS_DIR:-$ROOT/$BUILD/tools}
[ -e "$LIB" ] || { echo "SKIP: $LIB not built (make lib)"; exit 77; }

# An interpreter with venv, setuptools, wheel and pytest (Debian's python3 with
# python3-venv, python3-setuptools, python3-wheel, python3-pytest; a python3 earlier in
# PATH may lack them).
PY=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null 2>&1 &&
	   "$p" -c 'import venv, ensurepip, setuptools, wheel, pytest' >/dev/null 2>&1; then
		PY=$p; break
	fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with venv, setuptools, wheel and pytest (apt-get install python3-venv python3-setuptools python3-wheel python3-pytest)"; exit 77; }

tmp=$(mktemp -d /tmp/flit-test-python.XXXXXX)
N="py$(($$ % 100000))"
up=0
cleanup() {
	[ "$up" = 1 ] && "$T" down --name "$N" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

echo "python: $PY ($("$PY" --version 2>&1))"
"$PY" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1 ||
	{ cat "$tmp/venv.log"; echo "FAIL: python3 -m venv"; exit 1; }
# install from a copy: setuptools builds in the source directory
mkdir "$tmp/src" && cp -r python/pyproject.toml python/README.md python/flit "$tmp/src/"
rm -rf "$tmp/src/flit/__pycache__"
"$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-index "$tmp/src" \
	>"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; echo "FAIL: pip install ./python"; exit 1; }
echo "ok: pip install --no-build-isolation --no-index ./python into a venv"

# The udp tests' testbed: here, so that a trap takes it down whatever happens
if [ "$(id -u)" -eq 0 ] && [ -x "$T" ]; then
	"$T" up --name "$N" --hosts 2 --link direct --owner-pid $$ >"$tmp/tb.log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		up=1; export FLIT_PY_TESTBED=$N
	elif [ "$rc" -ne 4 ]; then
		cat "$tmp/tb.log"; echo "FAIL: testbed up exited $rc"; exit 1
	fi
fi

# SAN=1: a sanitized libflit.so needs the sanitizer's runtime first in the
# process (python3 is not built with it); python's own allocations are not
# the library's leaks
san_env=()
if [ "${SAN:-}" = 1 ]; then
	asan=$(${CC:-gcc} -print-file-name=libasan.so)
	[ -f "$asan" ] || { echo "SKIP: SAN=1, and no libasan.so to preload into python3 ($asan)"; exit 77; }
	san_env=(LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0:abort_on_error=0)
fi

cd "$tmp" || exit 1       # nothing of the tree on sys.path: the installed flit
env "${san_env[@]}" FLIT_LIBRARY=$LIB FLIT_EXPECT_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 \
	"$tmp/venv/bin/python" -m pytest -v -p no:cacheprovider -rs "$ROOT/python/tests" 2>&1 |
	tee "$tmp/pytest.log"
rc=${PIPESTATUS[0]}
# the pytest cases that skipped, with their reason, under this test's line
grep -E '^SKIPPED ' "$tmp/pytest.log" | sed 's|^SKIPPED \[[0-9]*\] \([^ ]*/\)\{0,1\}|RESULT: skipped: |'
[ "$rc" -eq 0 ] || { echo "FAIL: pytest exited $rc"; exit 1; }
echo "RESULT: $(grep -E '^=+ .*(passed|failed).* in ' "$tmp/pytest.log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')"
exit 0
