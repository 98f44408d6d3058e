# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash
# Sourced by flit's shell tests on the host (tests/test_*.sh), first thing
# after `set -u`:
#   . "$(dirname "$0")/lib.sh"
# The scaffolding each of them would otherwise repeat.  (The guest suites
# have their own, tests/vm/suite.sh, with fail and ok of the same meaning:
# a test sources one of the two.)
#
#   D              the tools: $FLIT_TOOLS_DIR (tests/run-tests.sh sets it),
#                  else $BUILD/tools under the current directory
#   tmp            a temporary directory, removed at exit
#   on_exit CMD    run CMD at exit (before $tmp goes): kill a job, take a
#                  testbed down; the last registered runs first.  INT,
#                  TERM and HUP exit 1, so a timeout cleans up too.
#   fail MSG       "FAIL: MSG", counted in $failures (the test goes on)
#   ok MSG         "ok: MSG"
#   skip REASON    "SKIP: REASON" and exit 77; exit 1 instead when a check
#                  has already failed (a skip never hides a failure)
#   need_tools T.. skip unless each $D/T is built
#   need_root WHY  skip unless root: "needs root (WHY)"
#   expect RC TOOL ARGS...
#                  run $D/TOOL ARGS (stdin /dev/null, stdout in $tmp/out,
#                  stderr in $tmp/err, at most $EXPECT_TIMEOUT s, default
#                  30) and check its exit status is RC; for 2, its usage
#                  ("Usage: TOOL") must be on stderr.  Returns 1 on a failure.
#   finish         the verdict: "N failure(s)" and exit 1, or "PASS" and 0
#
# Exit status of a test: 0 pass, 77 skip, 1 fail (tests/run-tests.sh).

D=${FLIT_TOOLS_DIR:-$PWD/${BUILD:-build}/tools}
failures=0
tmp=$(mktemp -d "/tmp/flit-$(basename "$0" .sh).XXXXXX") ||
	{ echo "FAIL: mktemp -d in /tmp"; exit 1; }

_lib_on_exit=()
on_exit() { _lib_on_exit+=("$*"); }
_lib_exit() {
	local i
	for ((i = ${#_lib_on_exit[@]} - 1; i >= 0; i--)); do
		eval "${_lib_on_exit[i]}"
	done
	rm -rf "$tmp"
}
trap _lib_exit EXIT
trap 'exit 1' INT TERM HUP

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

skip() {
	echo "SKIP: $*"
	[ "$failures" -eq 0 ] && exit 77
	echo "$failures failure(s) before the skip"
	exit 1
}

need_tools() {
	local t
	for t; do
		[ -x "$D/$t" ] || skip "$D/$t not built (make tools)"
	done
}

need_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root ($*)"
}

expect() {
	local want=$1 tool=$2; shift 2
	timeout "${EXPECT_TIMEOUT:-30}" "$D/$tool" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "$tool $* exited $rc, expected $want"; sed 's/^/    | /' "$tmp/err" | head -5
		return 1
	fi
	if [ "$want" -eq 2 ] && ! grep -q "^Usage: $tool" "$tmp/err"; then
		fail "$tool $*: no usage on stderr"; return 1
	fi
	local args="$*"
	echo "ok: $tool ${args//$'\n'/\\n} -> $rc"
}

finish() {
	if [ "$failures" -gt 0 ]; then
		echo "$failures failure(s)"
		exit 1
	fi
	echo "PASS"
	exit 0
}
