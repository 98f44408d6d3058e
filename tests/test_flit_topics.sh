#!/usr/bin/env bash
# flit-topics as tools/bench-topics.sh and a user run it: misuse exits 2
# with usage; pub over shm creates N topics and reports every figure (JSON
# keys, created = N, fds and RSS grown with N); a pattern subscriber finds
# all N of a running publisher, subscriber first and second; a subscriber
# that cannot find them all says how many and exits 1; pub stopped by its
# --timeout says so and exits 1; over udp across a direct testbed (root) a
# small N is found by a pattern subscriber on the other host, and 2,000
# topics in one shared session (--session) with a few fds; flit-thru and
# flit-load --topics 1000 (over shm too; misuse: not on rdma) deliver every
# message; and
# tools/bench-topics.sh prints its table for a small N; a publisher that
# never polls (--no-poll) is found, over shm and udp.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
# timeout: 180
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_tools flit-topics

# ---- misuse -----------------------------------------------------------------
expect 2 flit-topics
expect 2 flit-topics bogus
expect 2 flit-topics sub
expect 2 flit-topics -n 0 pub
expect 2 flit-topics --send sub 'x.*'
expect 2 flit-topics -p 'a*' pub
expect 2 flit-topics pub extra
expect 2 flit-topics --no-poll sub 'x.*'
# --topics of flit-thru and flit-load: 1 .. 65536 (every transport)
expect 2 flit-thru -t udp --topics 0
expect 2 flit-thru -t udp --topics 65537
expect 2 flit-load -t udp --topics 0
ok "misuse exits 2 with usage"

# ---- pub over shm --------------------------------------------------------------
# by default the topics share one ring (a few fds, one ring's memory); with
# --session own each has a ring of its own, named by its topic
P=t$$.
json() { python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); print(d[sys.argv[2]])' "$@"; }
export FLIT_CONTEXT_SHM_DIR="$tmp/shm"
for how in default own; do
	sarg=(); [ $how = own ] && sarg=(--session own)
	if expect 0 flit-topics -p "$P" -n 200 -i 0.3 "${sarg[@]}" --json pub; then
		cp "$tmp/out" "$tmp/p200"
		c=$(json "$tmp/p200" created) fds=$(json "$tmp/p200" fds) rss=$(json "$tmp/p200" rss_bytes)
		if [ $how = default ]; then want='[ "$fds" -lt 20 ] && [ "$rss" -lt $((64 << 20)) ]'
		else want='[ "$fds" -ge 200 ] && [ "$rss" -gt $((100 << 20)) ]'; fi
		if [ "$c" = 200 ] && eval "$want" &&
		   python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); [d[k] for k in ("create_s","us_per_topic_first","us_per_topic_last","idle_cpu_pct","idle_lib_pct","idle_floor_pct","idle_s","sent")]; assert 0 <= d["idle_lib_pct"] <= d["idle_cpu_pct"] + 0.1, "the library share is part of the process"' "$tmp/p200"; then
			ok "pub shm, sessions $how: 200 topics, $fds fds, RSS $((rss >> 20)) MiB, every key, the library's share within the process"
		else
			fail "pub shm, sessions $how: $(cat "$tmp/p200")"
		fi
	fi
	left=$(ls "$tmp/shm/default/" 2>/dev/null | grep -v '^\.registry$')
	[ -z "$left" ] || fail "pub shm, sessions $how: left rings behind: $(echo $left | head -c 200)"
done
unset FLIT_CONTEXT_SHM_DIR

# flit-thru --json's receiver row: every one of N messages over 1,000
# topics, no gap or duplicate
thru_all() {
	python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
rx = [x for x in r if x.get("side") == "receiver"]
assert len(rx) == 1 and rx[0]["count"] == int(sys.argv[2]) and rx[0]["gaps"] == 0 and rx[0]["dupes"] == 0, rx
assert "topics=1000" in rx[0]["mode"], rx[0]["mode"]' "$@"
}

# flit-thru with the messages spread over 1,000 topics of one shm session
if timeout 60 "$D/flit-thru" -t shm -s 16 -n 300000 --topics 1000 --json >"$tmp/sthru.json" 2>"$tmp/sthru.err" &&
   thru_all "$tmp/sthru.json" 300000 2>"$tmp/sthru.chk"; then
	ok "flit-thru --topics 1000 over shm: 300,000 messages, no gap or duplicate"
else
	fail "flit-thru -t shm --topics: $(cat "$tmp/sthru.err" "$tmp/sthru.chk" "$tmp/sthru.json" | tail -5)"
fi

# ---- a pattern subscriber finds them, started first and second ----------------
# (and of a publisher that never polls, --no-poll: it need not)
for np in "" --no-poll; do for order in sub-first pub-first; do
	p="$P$order${np:+np}."
	if [ $order = sub-first ]; then
		"$D/flit-topics" -p "$p" -n 300 -T 20 --json sub "$p*" >"$tmp/sub" 2>"$tmp/sub.err" & sp=$!
		sleep 0.3
		"$D/flit-topics" -p "$p" -n 300 -i 0.2 -l 20 --send $np --json pub >"$tmp/pub" 2>&1 & pp=$!
	else
		"$D/flit-topics" -p "$p" -n 300 -i 0.2 -l 20 --send $np --json pub >"$tmp/pub" 2>&1 & pp=$!
		sleep 1
		"$D/flit-topics" -p "$p" -n 300 -T 20 --json sub "$p*" >"$tmp/sub" 2>"$tmp/sub.err" & sp=$!
	fi
	on_exit "kill $pp $sp 2>/dev/null"
	wait $sp; rc=$?
	kill -TERM $pp 2>/dev/null; wait $pp
	want_poll=1ms; [ -n "$np" ] && want_poll=none
	if [ $rc -eq 0 ] && [ "$(json "$tmp/sub" found)" = 300 ] && [ "$(json "$tmp/sub" complete)" = True ] &&
	   [ "$(json "$tmp/pub" poll)" = $want_poll ]; then
		ok "shm, $order${np:+, the publisher not polling}: the pattern subscriber found all 300 in $(json "$tmp/sub" find_s) s"
	else
		fail "shm, $order $np: exit $rc: $(cat "$tmp/sub" "$tmp/sub.err" "$tmp/pub")"
	fi
done; done

# ---- what cannot be done is said --------------------------------------------------
if expect 1 flit-topics -n 5 -T 0.3 sub "$P.none.*"; then
	grep -q "found 0 of 5 topics .* (timeout)" "$tmp/out" && ok "sub: fewer than N by the timeout: exit 1, says how many" ||
		fail "sub timeout: $(cat "$tmp/out")"
fi
# (rings of their own, to be slow enough: shared, 100,000 take ~0.1 s)
if expect 1 flit-topics -p "${P}slow." -n 100000 -T 0.2 -i 0 --session own -C 'source.shm.capacity = 64K' pub; then
	grep -q "stopped: stopped after 0.2 s (--timeout)" "$tmp/out" && ok "pub: stopped by --timeout, exit 1, says so" ||
		fail "pub timeout: $(cat "$tmp/out")"
fi

# ---- udp across a testbed, and the benchmark ---------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root for the udp testbed (the shm checks passed)"
tb=tt$$; tb=${tb:0:8}
tools/testbed up --name "$tb" --hosts 2 --link direct --owner-pid $$ >/dev/null || { fail "testbed up"; finish; }
on_exit "tools/testbed down --name $tb >/dev/null 2>&1"
U=(-t udp -C 'context.udp.interface = eth0')
tools/testbed exec --name "$tb" --host 2 -- "$D/flit-topics" "${U[@]}" -n 20 -T 20 sub 'md.*' >"$tmp/usub" 2>&1 & sp=$!
sleep 0.3
tools/testbed exec --name "$tb" --host 1 -- "$D/flit-topics" "${U[@]}" -n 20 -i 0.2 -l 20 --send pub >"$tmp/upub" 2>&1 & pp=$!
on_exit "kill $pp $sp 2>/dev/null"
wait $sp; rc=$?
kill -TERM $pp 2>/dev/null; wait $pp
if [ $rc -eq 0 ] && grep -q "^found 20 topics of 'md.\*'" "$tmp/usub"; then ok "udp: $(cat "$tmp/usub")"
else fail "udp: exit $rc: $(cat "$tmp/usub" "$tmp/upub")"; fi
# a publisher that never polls, started first: its service thread answers
tools/testbed exec --name "$tb" --host 1 -- "$D/flit-topics" "${U[@]}" -p np -n 20 -i 0.2 -l 20 --no-poll pub >"$tmp/upub" 2>&1 & pp=$!
sleep 1
tools/testbed exec --name "$tb" --host 2 -- "$D/flit-topics" "${U[@]}" -p np -n 20 -T 20 sub 'np*' >"$tmp/usub" 2>&1 & sp=$!
on_exit "kill $pp $sp 2>/dev/null"
wait $sp; rc=$?
kill -TERM $pp 2>/dev/null; wait $pp
if [ $rc -eq 0 ] && grep -q "^found 20 topics of 'np\*'" "$tmp/usub"; then ok "udp, the publisher not polling: $(cat "$tmp/usub")"
else fail "udp --no-poll: exit $rc: $(cat "$tmp/usub" "$tmp/upub")"; fi

# one shared session (--session): 2,000 topics, 2 file descriptors' worth,
# and the pattern subscriber finds them all
tools/testbed exec --name "$tb" --host 2 -- "$D/flit-topics" "${U[@]}" -p sh -n 2000 -T 20 sub 'sh*' >"$tmp/ssub" 2>&1 & sp=$!
sleep 0.3
tools/testbed exec --name "$tb" --host 1 -- "$D/flit-topics" "${U[@]}" -p sh -n 2000 -i 0.2 -l 20 --session md --json pub \
	>"$tmp/spub" 2>&1 & pp=$!
on_exit "kill $pp $sp 2>/dev/null"
wait $sp; rc=$?
for ((i = 0; i < 100; i++)); do [ -s "$tmp/spub" ] && break; sleep 0.1; done
kill -TERM $pp 2>/dev/null; wait $pp
fds=$(json "$tmp/spub" fds 2>/dev/null)
if [ $rc -eq 0 ] && grep -q "^found 2000 topics of 'sh\*'" "$tmp/ssub" && [ -n "$fds" ] && [ "$fds" -lt 40 ]; then
	ok "udp, one session: 2000 topics with $fds fds; $(cat "$tmp/ssub")"
else
	fail "udp, one session: exit $rc, fds '$fds': $(cat "$tmp/ssub" "$tmp/spub")"
fi

# without --session the topics share sessions as well (the library's
# default); with --session own each is a session of its own (two sockets)
for how in default own; do
	sarg=(); [ $how = own ] && sarg=(--session own)
	tools/testbed exec --name "$tb" --host 2 -- "$D/flit-topics" "${U[@]}" -p "d$how" -n 50 -T 20 sub "d$how*" \
		>"$tmp/dsub" 2>&1 & sp=$!
	sleep 0.3
	tools/testbed exec --name "$tb" --host 1 -- "$D/flit-topics" "${U[@]}" -p "d$how" -n 50 -i 0.2 -l 20 \
		"${sarg[@]}" --json pub >"$tmp/dpub" 2>&1 & pp=$!
	on_exit "kill $pp $sp 2>/dev/null"
	wait $sp; rc=$?
	for ((i = 0; i < 100; i++)); do [ -s "$tmp/dpub" ] && break; sleep 0.1; done
	kill -TERM $pp 2>/dev/null; wait $pp
	fds=$(json "$tmp/dpub" fds 2>/dev/null)
	if [ $how = default ]; then want_fds='[ "$fds" -lt 40 ]'; else want_fds='[ "$fds" -ge 100 ]'; fi
	if [ $rc -eq 0 ] && grep -q "^found 50 topics" "$tmp/dsub" && [ -n "$fds" ] && eval "$want_fds"; then
		ok "udp, sessions $how: 50 topics with $fds fds, all found"
	else
		fail "udp, sessions $how: exit $rc, fds '$fds': $(cat "$tmp/dsub" "$tmp/dpub")"
	fi
done

# flit-thru and flit-load with the messages spread over 1,000 topics of
# one session: every message in order at the receiver, which knew every
# topic before the stream started
if timeout 60 "$D/flit-thru" -t udp --netns "$tb-h1" --peer-netns "$tb-h2" -C 'context.udp.interface = eth0' \
	-s 32 -n 200000 --topics 1000 --json >"$tmp/thru.json" 2>"$tmp/thru.err" &&
   thru_all "$tmp/thru.json" 200000 2>"$tmp/thru.chk"; then
	ok "flit-thru --topics 1000 over udp: 200,000 messages, no gap or duplicate"
else
	fail "flit-thru --topics: $(cat "$tmp/thru.err" "$tmp/thru.chk" "$tmp/thru.json" | tail -5)"
fi
if timeout 60 "$D/flit-load" -t udp --netns "$tb-h1" --peer-netns "$tb-h2" -C 'context.udp.interface = eth0' \
	-s 32 -r 20k -d 1 --topics 1000 --json >"$tmp/load.json" 2>"$tmp/load.err" &&
   python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 1 and r[0]["gaps"] == 0 and r[0]["pings_lost"] == 0 and r[0]["p50_ns"] > 0, r
assert "topics=1000" in r[0]["mode"], r[0]["mode"]' "$tmp/load.json" 2>"$tmp/load.chk"; then
	ok "flit-load --topics 1000 over udp: no gap, no ping lost"
else
	fail "flit-load --topics: $(cat "$tmp/load.err" "$tmp/load.chk" "$tmp/load.json" | tail -5)"
fi

tools/bench-topics.sh -n "1 20" -t "shm udp" -T 10 -R 3 --settle 0 --spread 0 --exact 2000 --one 0 --json "$tmp/bench.json" >"$tmp/bench" 2>&1 || fail "bench-topics exited $?"
# udp rows count the resolution traffic (adverts at least: > 0 B/s)
res=$(python3 -c 'import json,sys; print(" ".join(str(j["resolution"].get("bytes_per_s", "none")) for j in map(json.loads, open(sys.argv[1])) if j["transport"] == "udp" and "resolution" in j))' "$tmp/bench.json" 2>/dev/null)
# every row the publisher's CPU at rest (its threads' time over the -R seconds)
rest=$(python3 -c 'import json,sys; print(" ".join(str(j["rest"].get("rest_cpu_pct", "none")) for j in map(json.loads, open(sys.argv[1])) if "rest" in j))' "$tmp/bench.json" 2>/dev/null)
if [ "$(grep -cE '^(shm|udp) +(1|20) +[0-9.]+ ' "$tmp/bench")" = 4 ] && [ "$(wc -l <"$tmp/bench.json")" = 6 ] &&
   python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; sys.exit(not (len(v) == 2 and min(v) > 0))' $res 2>/dev/null &&
   python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; sys.exit(not (len(v) == 4 and min(v) > 0 and max(v) < 100))' $rest 2>/dev/null; then
	ok "bench-topics: 4 rows, udp resolution $res B/s, the publisher at rest $rest % of a core"
else
	fail "bench-topics: $(cat "$tmp/bench")"
fi
# the exact subscribers among 2,000: each found its topic, started before
# the publisher (of the last topic) and after (of the middle one)
if python3 -c '
import json, sys
r = [j for j in map(json.loads, open(sys.argv[1])) if "exact_of" in j]
assert [j["transport"] for j in r] == ["shm", "udp"], r
for j in r:
    assert j["before_ms"] is not None and j["after_ms"] is not None, j
    assert j["sub_before"]["pattern"] == "md.sym01999" and j["sub_after"]["pattern"] == "md.sym01000", j
    assert j["before_ms"] > -1000 and j["after_ms"] > 0, j' "$tmp/bench.json" 2>"$tmp/exact.chk" &&
   grep -qE '^udp +2000 +[0-9.]+ ms +[0-9.]+ ms +\([0-9., ]+\)$' "$tmp/bench"; then
	ok "bench-topics --exact 2000: shm and udp, the subscriber first and after, each found its topic"
else
	fail "bench-topics --exact: $(cat "$tmp/bench" "$tmp/exact.chk" | tail -8)"
fi

# one wanted topic among 2,000 of a session, over xdp: its 5 messages, and
# none of the other topics' reaches user space (the program drops them);
# batched, only the others in its own frames (one a round, <= 180 each)
tools/bench-topics.sh -n "" -t xdp --spread 0 --exact 0 --one 2000 --one-rounds 5 --json "$tmp/one.json" >"$tmp/one" 2>&1 || fail "bench-topics --one exited $?"
if python3 -c '
import json, sys
r = [j for j in map(json.loads, open(sys.argv[1])) if "one_of" in j]
assert [(j["transport"], j["batched"]) for j in r] == [("xdp", False), ("xdp", True)], r
for j in r:
    s = j["sub"]
    assert s["complete"] and s["msgs"] == 5 and s["msgs_lost"] == 0, s
    assert j["others_in_session"] == 5 * 1999 and s["xdp_report_full"] == 0, j
u, b = r
assert u["others_in_user_space"] == 0 and u["sub"]["xdp_filtered"] == 5 * 1999, u
assert b["others_in_user_space"] <= 5 * 180, b
assert b["sub"]["msgs_filtered_early"] == 5 * 1999 - b["others_in_user_space"], b' "$tmp/one.json" 2>"$tmp/one.chk"; then
	ok "bench-topics --one 2000 over xdp: 5 of 5 delivered, the other 9,995 messages dropped in XDP; batched, all but the $(python3 -c 'import json,sys; print([j for j in map(json.loads, open(sys.argv[1])) if "one_of" in j][1]["others_in_user_space"])' "$tmp/one.json") in its own frames"
else
	fail "bench-topics --one: $(cat "$tmp/one" "$tmp/one.chk" | tail -8)"
fi
finish
