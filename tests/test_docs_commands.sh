#!/usr/bin/env bash
# Every command the README and the man pages (docs/man/*, EXAMPLES) show,
# run as written, and every C, C++ and Python block of the README built
# against the installed library (make install into a staging root, found
# through pkg-config) and run.
#
# How a command runs: from a scratch directory that has the tree's build/,
# tools/, python/ and docs/ under their names, with $BUILD/tools,
# $BUILD/loader and tools/ first on PATH (the man pages name the installed
# tools), counters files in the scratch directory.  Lines of a block run
# one after the other in one shell; a line ending in '&' runs in the
# background until the block ends.  The only substitutions: a command that
# names eth0, or udp or xdp, without a namespace runs in host 1 of the
# testbed "tb" (each host has an eth0), never on this machine's own
# network; the man pages' namespaces h1, h2 are tb-h1, tb-h2, and their
# example PID 4242 is a running flit process.  Where an example needs a
# peer (a publisher waiting for a receiver, a subscriber counting
# messages) the test starts one first (the feeders below).  Commands that run until stopped (--watch, --serve, the
# benchmark scripts, measurements of many points) are stopped after 3 s: they pass
# when they started without a usage error.  Each is checked for its exit
# status and, where the table below says, for what it prints.  What cannot
# run here is listed with the reason (SKIP lines).
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
# timeout: 900
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (testbeds, flit-loader)"; exit 77; }
[ "${SAN:-0}" = 1 ] && { echo "SKIP: the documented commands run the plain build, not SAN=1"; exit 77; }
for f in "$BUILD/tools/flit-pub" "$BUILD/loader/flit-loader"; do
	[ -x "$f" ] || { echo "SKIP: $f not built (make)"; exit 77; }
done

tmp=$(mktemp -d /tmp/flit-test-docs.XXXXXX)
cleanup() {
	pkill -P $$ 2>/dev/null
	for tb in tb lab; do tools/testbed down --name "$tb" >/dev/null 2>&1; done
	rm -rf "$tmp"
}
trap cleanup EXIT
failures=0 passed=0 skipped=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# ---- the scratch directory and the installed library --------------------------
work=$tmp/work
mkdir -p "$work"
for d in "$ROOT"/*; do [ "${d##*/}" = results ] || ln -s "$d" "$work/"; done
[ -e "$work/build" ] || ln -s "$ROOT/$BUILD" "$work/build"
make --no-print-directory install BUILD="$BUILD" DESTDIR="$tmp/inst" PREFIX=/usr/local \
	>"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL: make install"; exit 1; }
# the installed library, for the C/C++ blocks only (make and the tools use the system's)
inst_env=(PKG_CONFIG_SYSROOT_DIR=$tmp/inst PKG_CONFIG_LIBDIR=$tmp/inst/usr/local/lib/pkgconfig
	  LD_LIBRARY_PATH=$tmp/inst/usr/local/lib)
# python3 is Debian's (this VM's image puts a pyenv interpreter first)
export PATH=$ROOT/$BUILD/tools:$ROOT/$BUILD/loader:$ROOT/tools:/usr/bin:$PATH
export FLIT_LIBRARY=$tmp/inst/usr/local/lib/libflit.so.0
export FLIT_CONTEXT_STATS_DIR=$tmp/stats
# the network tools of the README need udp: contexts on the testbed hosts
unset FLIT_CONTEXT_TRANSPORTS
tools/testbed up --name tb --hosts 2 >"$tmp/tb.log" 2>&1 ||
	{ cat "$tmp/tb.log"; echo "FAIL: testbed tb"; exit 1; }

# ---- what each command needs: the table ----------------------------------------
# skip_reason CMD: why CMD cannot run here, or nothing
skip_reason() {
	local hi
	hi=$(grep -oE -- '(--cpus|-c) [0-9,-]+' <<<"$1" | grep -oE '[0-9]+' | sort -n | tail -1)
	if [ -n "$hi" ] && [ "$hi" -ge "$(nproc)" ]; then
		echo "names CPU $hi; this machine has $(nproc) CPUs"; return
	fi
	case $1 in
	"make check"*) echo "this test runs inside make check" ;;
	*"-t rdma"*|*bench-rdma.sh*)
		echo "no RDMA device on this machine: test_rdma_vm runs the rdma transport, flit-pong and flit-thru -t rdma in a Soft-RoCE guest" ;;
	*ethtool\ -T\ eth1*|*ptp4l*|*phc2sys*|*"--timestamps hardware"*|*"interface = eth1"*)
		echo "needs a NIC with a PTP hardware clock (eth1); veth has none (test_ts_labels_vm checks the labels with e1000e in a guest)" ;;
	*"context.xdp.zerocopy"*|*zr-h1*)
		echo "needs AF_XDP zero-copy (veth has none): test_xdp_zerocopy_vm runs it on virtio NICs in a guest" ;;
	*"dpkg -i"*|*"apt-get install"*|*"systemctl"*|*"make install"*)
		echo "changes this system: test_deb installs the packages into a throw-away root and runs the unit's commands" ;;
	*/var/lib/prometheus/*) echo "writes node_exporter's directory: test_flit_stat_prom checks the same output with promtool" ;;
	*/tmp/flit-compare.*) compare_result_whole ||
		echo "reads what an earlier run of tools/flit-compare left in /tmp (no whole one here, with flit xdp and udp ping-pong lines; flit-compare runs for minutes)" ;;
	*"dmesg |"*) echo "reads the kernel log of this machine (flit-pub --file - is run by test_tools_pubsub's sibling lines here)" ;;
	*"jq "*) command -v jq >/dev/null || echo "jq is not installed" ;;
	esac
}
# compare_result_whole: some /tmp/flit-compare.*/results.json has the lines
# flit-plot --kind compare needs (flit-pong over xdp and over udp); a run
# stopped early (this test stops flit-compare's own example) leaves a part
compare_result_whole() {
	local f
	for f in /tmp/flit-compare.*/results.json; do
		[ -f "$f" ] || continue
		grep -q '"tool":"flit-pong","transport":"xdp"' "$f" &&
			grep -q '"tool":"flit-pong","transport":"udp"' "$f" && return 0
	done
	return 1
}
# is_long CMD: runs until stopped
is_long() {
	case $1 in
	*--watch*|*--serve*|*bench-*.sh*|*flit-compare*|*"flit-sub"*) [[ $1 != *"--count"* && $1 != *" -n "* && $1 != *" -e "* ]] ;;
	# measurements of many points (tens of seconds): started, then stopped
	*"flit-load"*"-d 1 --json"*) return 1 ;;
	*"flit-load"*"--rates"*|*"flit-load"*" -r "*|*"flit-thru"*"-n 50M"*) return 0 ;;
	*) return 1 ;;
	esac
}
# expect_of CMD: a regex its output must match (blank: exit status only)
expect_of() {
	case $1 in
	*"flit-pong"*"--json"*) echo '"p50_ns"' ;;
	*"flit-pong"*"--role pong"*) echo '' ;;
	*flit-pong*) echo 'median' ;;
	*"flit-thru"*"--json"*) echo '"msgs_per_sec"' ;;
	*flit-thru*) echo 'msgs/s|msg/s' ;;
	*"flit-load"*"--csv"*) echo '' ;;
	*flit-load*"--role"*) echo '' ;;
	*flit-floor*) echo 'ns' ;;
	*"flit-loader status"*) echo 'attached|flit' ;;
	*"flit-stat --gc"*) echo '' ;;
	esac
}

# needs_ns CMD: runs in testbed host 1 (names eth0, or the network)
needs_ns() {
	[[ $1 != *--netns* && $1 != *nsenter* && $1 != *"testbed "* && $1 != *flit-compare* ]] &&
	[[ $1 == *eth0* || $1 == *"-t udp"* || $1 == *"-t xdp"* ]]
}
# feeder CMD: a peer the example needs, started before it (in the background)
feeder() {
	case $1 in
	*"flit-sub --count 1 --timeout 5 demo.prices"*) echo "local:flit-pub -l 4000 demo.prices x" ;;
	*"flit-pub --wait-receivers 1 -S demo.prices"*) echo "local:flit-sub -e -T 10 demo.prices" ;;
	*"flit-pub -t udp"*"-w 1 demo.prices"*) echo "tb2:flit-sub -t udp -e -T 10 demo.prices" ;;
	# flit's program on lab-h1's eth0 for its counters (the README brought lab up)
	*"--xdp eth0 --netns lab-h1"*) echo "pre:tools/testbed up --name lab --hosts 2 --owner-pid 1 && nsenter --net=/run/netns/lab-h1 flit-loader attach eth0" ;;
	esac
}

# run_line SRC CMD: one command, as written (in the background with '&')
declare -a bg=()
run_line() {
	local src=$1 cmd=$2 why rc t=60 out=$tmp/out.$RANDOM
	why=$(skip_reason "$cmd")
	if [ -n "$why" ]; then
		echo "SKIP-CMD: $src: $cmd: $why"; skipped=$((skipped + 1)); return
	fi
	cmd=${cmd//\/run\/netns\/h1/\/run\/netns\/tb-h1}
	cmd=${cmd//\/run\/netns\/h2/\/run\/netns\/tb-h2}
	cmd=${cmd//4242/$STAT_PID}
	local prefix=() f
	needs_ns "$cmd" && prefix=(tools/testbed exec --name tb --host 1 --)
	f=$(feeder "$cmd")
	case $f in
	local:*) (cd "$work" && exec setsid bash -c "${f#local:}") >/dev/null 2>&1 & feeders+=($!) ;;
	tb2:*) (exec setsid tools/testbed exec --name tb --host 2 -- bash -c "${f#tb2:}") >/dev/null 2>&1 & feeders+=($!) ;;
	pre:*) (cd "$work" && bash -c "${f#pre:}") >"$tmp/pre.log" 2>&1 ||
		{ fail "$src: setting up for '$cmd': $(tail -1 "$tmp/pre.log")"; return; }
		f= ;;
	esac
	[ -n "$f" ] && sleep 1
	if [[ $cmd == *"&" ]]; then
		cmd=${cmd%&}
		(cd "$work" && exec setsid "${prefix[@]}" bash -c "$cmd") >"$out" 2>&1 &
		bg+=("$!"$'\x1f'"$out"$'\x1f'"$src"$'\x1f'"$cmd")
		sleep 0.5   # let it start: the next lines use it
		return
	fi
	is_long "$cmd" && t=3
	[[ $cmd == "make demo"* ]] && t=400
	(cd "$work" && timeout -k 5 "$t" "${prefix[@]}" bash -c "$cmd") >"$out" 2>&1
	rc=$?
	local want; want=$(expect_of "$cmd")
	[[ $cmd == *">"* ]] && want=   # its output went to a file
	if [ $rc -eq 124 ] && [ $t -eq 3 ]; then
		if grep -q '^Usage:' "$out"; then fail "$src: $cmd: usage error"; sed 's/^/    | /' "$out" | head -5
		else echo "ok: $src: $cmd (runs until stopped: stopped after ${t}s)"; passed=$((passed + 1)); fi
	elif [ $rc -ne 0 ]; then
		fail "$src: $cmd: exit $rc"; sed 's/^/    | /' "$out" | tail -8
	elif [ -n "$want" ] && ! grep -Eq "$want" "$out"; then
		fail "$src: $cmd: output lacks /$want/"; sed 's/^/    | /' "$out" | tail -8
	else
		echo "ok: $src: $cmd"; passed=$((passed + 1))
	fi
}
# end_block: background jobs of the block must have run (or still run)
end_block() {
	local j pid out src cmd
	for j in "${bg[@]}"; do
		IFS=$'\x1f' read -r pid out src cmd <<<"$j"
		sleep 0.5
		if kill -0 "$pid" 2>/dev/null; then
			kill -- -"$pid" 2>/dev/null; wait "$pid" 2>/dev/null
			if grep -q '^Usage:' "$out"; then fail "$src: $cmd &: usage error"
			else echo "ok: $src: $cmd & (ran in the background)"; passed=$((passed + 1)); fi
		else
			wait "$pid"; local rc=$?
			[ $rc -eq 0 ] && { echo "ok: $src: $cmd &"; passed=$((passed + 1)); } ||
				{ fail "$src: $cmd &: exit $rc"; sed 's/^/    | /' "$out" | tail -5; }
		fi
	done
	bg=()
	for j in "${feeders[@]}"; do kill -- -"$j" 2>/dev/null; wait "$j" 2>/dev/null; done
	feeders=()
}
declare -a feeders=()
# a flit process for the examples that name one by PID
flit-sub -e 'stat.example' >/dev/null 2>&1 &
STAT_PID=$!

# join_lines: one command per line (continued with a backslash, or after a
# pipe or &&)
join_lines() {
	awk '{ if (acc != "") $0 = acc " " $0; acc = "" }
	     /\\$/ { acc = substr($0, 1, length($0) - 1); next }
	     /(\||&&)[[:space:]]*$/ { acc = $0; next }
	     { print } END { if (acc != "") print acc }'
}

# ---- README blocks ----------------------------------------------------------------
# blocks as files: $tmp/readme/N.LANG, first line "# line L"
mkdir -p "$tmp/readme"
awk -v dir="$tmp/readme" '
	/^```/ { if (inb) { inb = 0; close(f); next }
		 lang = substr($0, 4); inb = 1; n++; f = sprintf("%s/%03d.%s", dir, n, lang == "" ? "text" : lang)
		 printf "# line %d\n", NR + 1 > f; next }
	inb { print > f }' README.md

# files some blocks read: a capture of flit traffic (tshark), JSON results (flit-plot)
mkdir -p "$work/results"
(cd "$work" && flit-pong -t shm -s 64 -n 20k --json > results/pong.json 2>/dev/null)
tools/testbed exec --name tb --host 2 -- timeout 8 tcpdump -i eth0 -w "$work/cap.pcap" udp >/dev/null 2>&1 &
cap=$!
sleep 1
tools/testbed exec --name tb --host 2 -- flit-sub -t udp -e -T 6 'cap.*' >/dev/null 2>&1 &
tools/testbed exec --name tb --host 1 -- flit-pub -t udp -w 1 cap.a one two >/dev/null 2>&1
sleep 1; kill "$cap" 2>/dev/null; wait "$cap" 2>/dev/null

for f in "$tmp"/readme/*; do
	lang=${f##*.}
	line=$(head -1 "$f" | sed 's/^# line //')
	src="README.md:$line"
	case $lang in
	sh)
		# joined continuation lines, comments dropped
		sed 1d "$f" | sed -e 's/[[:space:]]#.*$//' -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' | join_lines >"$f.lines"
		# an xdp block on eth0: a publisher on the other host feeds its subscriber
		if grep -q 'flit-sub -t xdp' "$f.lines"; then
			tools/testbed exec --name tb --host 2 -- flit-pub -t udp -w 1 -T 30 md.eur 1.0842 >/dev/null 2>&1 &
		fi
		while IFS= read -r cmd; do run_line "$src" "$cmd"; done <"$f.lines"
		end_block
		;;
	c|cpp)
		cc=gcc std=-std=gnu11; [ "$lang" = cpp ] && cc=g++ std=-std=c++20
		sed 1d "$f" >"$tmp/app.$lang"
		if ! $cc $std -Wall -Werror "$tmp/app.$lang" -o "$tmp/app" $(env "${inst_env[@]}" pkg-config --cflags --libs flit) >"$tmp/cc.log" 2>&1; then
			fail "$src: the $lang block does not build against the installed library"; sed 's/^/    | /' "$tmp/cc.log" | head -10
		elif ! (cd "$work" && env "${inst_env[@]}" FLIT_CONTEXT_TRANSPORTS=shm timeout 20 "$tmp/app") >"$tmp/app.out" 2>&1; then
			fail "$src: the $lang block's program failed"; sed 's/^/    | /' "$tmp/app.out" | tail -5
		elif ! grep -q '^prices.eur #' "$tmp/app.out"; then
			fail "$src: the $lang block printed no message"; sed 's/^/    | /' "$tmp/app.out" | tail -5
		else
			echo "ok: $src: the $lang block builds with pkg-config flit and prints: $(head -1 "$tmp/app.out")"
			passed=$((passed + 1))
		fi
		;;
	python)
		sed 1d "$f" >"$tmp/app.py"
		if (cd "$work" && PYTHONPATH=$ROOT/python FLIT_CONTEXT_TRANSPORTS=shm timeout 30 python3 "$tmp/app.py") >"$tmp/py.out" 2>&1 &&
		   grep -q 'prices.eur' "$tmp/py.out"; then
			echo "ok: $src: the Python block runs: $(head -1 "$tmp/py.out")"; passed=$((passed + 1))
		else
			fail "$src: the Python block"; sed 's/^/    | /' "$tmp/py.out" | tail -8
		fi
		;;
	*) ;;   # output shown, layouts: not commands
	esac
done

# ---- man pages: EXAMPLES ---------------------------------------------------------
for m in docs/man/*.[0-9]; do
	# the examples as shell lines: roff escapes undone, continuations joined
	awk '/^\.SH EXAMPLES?/ { p = 1; next } /^\.SH/ { p = 0 } p' "$m" |
		grep -v '^\.' | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\(aq/'"'"'/g' |
		sed -e 's/[[:space:]]#.*$//' -e '/^[[:space:]]*$/d' | join_lines >"$tmp/man.lines"
	n=0
	while IFS= read -r cmd; do
		n=$((n + 1))
		case $cmd in flit-*|tools/*|nsenter*|bpftool*|dmesg*|make*) ;; *) continue ;; esac
		run_line "$(basename "$m") example $n" "$cmd"
		# a background line belongs to the next one
		[[ $cmd == *"&" ]] || end_block
	done <"$tmp/man.lines"
	end_block
done

echo "# $passed ran as written, $skipped listed with the reason they cannot run here"
[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS"
