#!/usr/bin/env bash
# The Wireshark dissector tools/wireshark/flit.lua, through tshark.
#
# 1. Crafted frames (a pcap written here, no privileges needed): the golden
#    frames of docs/PROTOCOL.md (DATA with and without timestamps and with
#    topic sequence numbers, HB, NAK,
#    NCF, INFO, QUERY, JOIN, LATE, JOIN with FLIT_JF_LATE, INFO of an ended
#    topic with its final number, INFO page with each topic's next number)
#    decode to the values the page gives, found by the
#    heuristic on any port; corrupt and truncated frames (short header, count
#    too large, len past the datagram, a payload past the frame, unknown flags,
#    a frame with topic numbers read without its flag, FINAL without ENDED,
#    FINAL without its numbers, NEXT with ENDED, NEXT without its numbers,
#    odd len, a non-zero reserved byte, a control byte in a name, an empty NAK
#    range, a trail after seq, 5 bytes) are flagged flit.malformed, each, and
#    no golden frame is; no Lua error anywhere; version 2 is left to UDP unless
#    its port is in the flit.ports preference; with the heuristic off only the
#    preference's ports are decoded.
# 2. Live traffic (root): a 2-host testbed (tools/testbed); tcpdump on host 1
#    while flit-sub -t udp 'dis.*' runs on host 2 and flit-pub -t udp publishes
#    on host 1 "hello" "world" with send timestamps (topic dis.ts) and
#    "one" "two" "three" batched (topic dis.batch).  tshark must show the INFO
#    frames naming both topics (index 0), DATA frames of those sessions whose
#    per-message sequence numbers run on without a gap, topic index 0, payload
#    lengths and bytes as sent, the timestamp flag only on dis.ts with stamps
#    inside the publishing window, the topic name carried over from INFO, the
#    receiver's QUERY (pattern dis.*) and JOINs, the sources' closing HB with
#    END, and nothing malformed.
# Skips (77) without tshark, or (part 2) without root, tcpdump or the tools.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
LUA=$PWD/tools/wireshark/flit.lua
T=${FLIT_TESTBED:-$PWD/tools/testbed}
[ -f "$LUA" ] || { echo "FAIL: $LUA not found"; exit 1; }
command -v tshark >/dev/null 2>&1 || skip "tshark not installed (apt-get install tshark)"
command -v python3 >/dev/null 2>&1 || skip "python3 not found (pcap writer)"
chmod 755 "$tmp"        # tshark/dumpcap may drop to another user
N="wd$(($$ % 100000))"
up=0 dump= sub=
cleanup() {
	[ -n "$dump" ] && kill -INT "$dump" 2>/dev/null && wait "$dump" 2>/dev/null
	[ -n "$sub" ] && kill "$sub" 2>/dev/null && wait "$sub" 2>/dev/null
	[ "$up" = 1 ] && "$T" down --name "$N" >/dev/null 2>&1
}
on_exit cleanup

# tshark with the dissector; stderr kept to look for Lua errors
ts() { tshark -n -X lua_script:"$LUA" "$@" 2>>"$tmp/tshark.err"; }
no_lua_errors() {
	if grep -qi "lua" "$tmp/tshark.err"; then
		fail "$1: Lua complained:"; sed 's/^/    | /' "$tmp/tshark.err" | head -10
	else
		ok "$1: no Lua error"
	fi
	: >"$tmp/tshark.err"
}

# ---- 1. crafted frames ----------------------------------------------------------
cat >"$tmp/mkpcap.py" <<'EOF'
import struct, sys

def csum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff

def udp_pkt(payload, dport):
    udp = struct.pack('!HHHH', 40000, dport, 8 + len(payload), 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     bytes([10, 77, 0, 1]), bytes([239, 192, 77, 1]))
    ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
    return b'\x01\x00\x5e\x40\x4d\x01\x02\x00\x00\x00\x00\x01\x08\x00' + ip + udp

def hx(s):
    return bytes.fromhex(''.join(s.split()))

# docs/PROTOCOL.md: worked example and control frame examples
good = [
    ('data_ts', hx('464c 0101 0100 0200 4800 0000 4d3c 2b1a e803 0000 0000 0000 0700 0000 0500 0000'
                   '15cd 853d fe9c 9717 6865 6c6c 6f00 0000 0800 0000 0100 0000 fdd0 853d fe9c 9717'
                   '2100 0000 0000 0000')),
    ('data_nots', hx('464c 0101 0000 0200 3800 0000 4d3c 2b1a e803 0000 0000 0000 0700 0000 0500 0000'
                     '6865 6c6c 6f00 0000 0800 0000 0100 0000 2100 0000 0000 0000')),
    ('hb', hx('464c0102 0000 0000 20000000 4d3c2b1a e803000000000000 8403000000000000')),
    ('nak', hx('464c0103 0000 0200 38000000 4d3c2b1a 0000000000000000 de03000000000000 05000000'
               '00000000 e403000000000000 02000000 00000000')),
    ('ncf', hx('464c0104 0000 0300 48000000 4d3c2b1a e803000000000000 6400000000000000 0a000000'
               '01000000 de03000000000000 05000000 00000000 e803000000000000 02000000 02000000')),
    ('info', hx('464c0105 0000 0200 58000000 4d3c2b1a e803000000000000 de5b3b93 01 00 c05d ef010203'
                'c0a8010a c15d 0000 92100000 00000000 00 00 0d00 7072696365732e65 7572757364000000'
                '01000000 00 00 0400 6e65777300000000')),
    ('query', hx('464c0106 0000 0200 48000000 00000000 0000000000000000 de5b3b93 00000000 00000000'
                 '00 00 0d00 7072696365732e65 7572757364000000 00000000 01 00 0600 6e6577732e2a0000')),
    ('join', hx('464c0107 0000 0000 20000000 4d3c2b1a 0000000000000000 de5b3b93 00000000')),
    ('late', hx('464c0108 0000 0000 38000000 4d3c2b1a e803000000000000 8403000000000000'
                '0000000000000000 00f9029500000000 f4010000 00000000')),
    ('join_late', hx('464c0107 0200 0000 20000000 4d3c2b1a 0000000000000000 de5b3b93 00000000')),
    ('info_page', hx('464c0105 0100 0200 60000000 4d3c2b1a e803000000000000 de5b3b93 01 00 c05d ef010203'
                     'c0a8010a c15d 0000 92100000 2c010000 00 00 0b00 6d642e73796d3030 3330300000000000'
                     '2d010000 00 00 0b00 6d642e73796d3030 3330310000000000')),
    ('info_rdma_mc', hx('464c0105 0000 0100 48000000 4d3c2b1a 0000000000000000 de5b3b93 04 00 4138 efc04e09'
                        'c0a83201 409c 0000 92100000 00000000 00 00 0900 6d642e6575727573 6400000000000000')),
    ('data_tseq', hx('464c 0101 0400 0200 4800 0000 4d3c 2b1a e803 0000 0000 0000 0700 0000 0500 0000'
                     '0c00 0000 0000 0000 6865 6c6c 6f00 0000 0800 0000 0100 0000 0300 0000 0000 0000'
                     '2100 0000 0000 0000')),
    ('info_ended_final', hx('464c0105 0700 0100 50000000 4d3c2b1a e803000000000000 de5b3b93 01 00 c05d ef010203'
                            'c0a8010a c15d 0000 92100000 2c010000 00 00 0b00 6d642e73796d3030 3330300000000000'
                            '2a00000000000000')),
    ('info_page_next', hx('464c0105 0900 0100 50000000 4d3c2b1a e803000000000000 de5b3b93 01 00 c05d ef010203'
                          'c0a8010a c15d 0000 92100000 2c010000 00 00 0b00 6d642e73796d3030 3330300000000000'
                          '2a00000000000000')),
    ('data_short', hx('464c 0101 0c00 0200 3800 0000 4d3c 2b1a e803 0000 0000 0000 0700 0500 0c00 0000'
                      '6865 6c6c 6f00 0000 0800 0100 0300 0000 2100 0000 0000 0000')),
]
g = dict(good)
d = g['data_nots']
bad = [
    ('short_header', d[:20]),
    ('count_too_large', d[:6] + b'\x03\x00' + d[8:]),
    ('len_past_datagram', d[:8] + struct.pack('<I', 64) + d[12:]),
    ('payload_past_frame', d[:28] + struct.pack('<I', 200) + d[32:]),
    ('unknown_flag', d[:4] + b'\x10\x00' + d[6:]),
    ('short_without_tseq', g['data_short'][:4] + b'\x08\x00' + g['data_short'][6:]),
    ('short_len_past_frame', g['data_short'][:26] + struct.pack('<H', 30) + g['data_short'][28:]),
    ('short_read_as_long', g['data_short'][:4] + b'\x04\x00' + g['data_short'][6:]),
    ('tseq_flag_cleared', g['data_tseq'][:4] + b'\x00\x00' + g['data_tseq'][6:]),
    ('odd_len', d[:8] + struct.pack('<I', 51) + d[12:]),
    ('info_reserved', g['info'][:29] + b'\x01' + g['info'][30:]),
    ('query_control_byte', g['query'][:0x28] + b'\x01' + g['query'][0x29:]),
    ('nak_empty_range', g['nak'][:0x20] + b'\x00\x00\x00\x00' + g['nak'][0x24:]),
    ('hb_trail_after_seq', g['hb'][:24] + struct.pack('<Q', 5000)),
    ('msg_flags', d[:31] + b'\x80' + d[32:]),
    ('five_bytes', d[:5]),
    ('late_trail_after_seq', g['late'][:24] + struct.pack('<Q', 5000) + g['late'][32:]),
    ('join_leave_and_late', g['join'][:4] + b'\x03\x00' + g['join'][6:]),
    ('info_unknown_flag', g['info'][:4] + b'\x10\x00' + g['info'][6:]),
    ('info_next_with_ended', g['info_page_next'][:4] + b'\x0b\x00' + g['info_page_next'][6:]),
    ('info_next_numbers_missing', g['info_page'][:4] + b'\x09\x00' + g['info_page'][6:]),
    ('info_next_count_too_large', g['info_page_next'][:6] + b'\x02\x00' + g['info_page_next'][8:]),
    ('info_final_without_ended', g['info_ended_final'][:4] + b'\x05\x00' + g['info_ended_final'][6:]),
    ('info_final_numbers_missing', g['info_page'][:4] + b'\x07\x00' + g['info_page'][6:]),
    ('info_final_count_too_large', g['info_ended_final'][:6] + b'\x02\x00' + g['info_ended_final'][8:]),
    ('info_mode_5', g['info'][:28] + b'\x05' + g['info'][29:]),
]
other = [('version2', d[:2] + b'\x02' + d[3:])]     # to port 14401: decoded with a warning
frames = good + bad + other
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i, (name, p) in enumerate(frames):
        # odd frames to a random port (the heuristic), even ones to flit's data port
        pkt = udp_pkt(p, 14401 if i % 2 == 0 else 33000 + i)
        f.write(struct.pack('<IIII', 1700000000 + i, 0, len(pkt), len(pkt)) + pkt)
with open(sys.argv[1] + '.names', 'w') as f:
    for i, (name, p) in enumerate(frames):
        kind = 'good' if i < len(good) else 'bad' if i < len(good) + len(bad) else 'other'
        f.write(f"{i + 1} {kind} {name} {14401 if i % 2 == 0 else 33000 + i}\n")
EOF
python3 "$tmp/mkpcap.py" "$tmp/crafted.pcap" || { echo "FAIL: cannot write the crafted pcap"; exit 1; }

# every frame: number, protocol column, malformed?, type
ts -r "$tmp/crafted.pcap" -T fields -E separator='|' -e frame.number -e _ws.col.Protocol \
	-e flit.malformed -e flit.type >"$tmp/crafted.txt" || fail "tshark failed on the crafted pcap"
while read -r no kind name port; do
	line=$(sed -n "${no}p" "$tmp/crafted.txt")
	IFS='|' read -r _ proto mal _ <<<"$line"
	case $kind in
	good) [ "$proto" = FLIT ] && [ -z "$mal" ] && ok "golden $name decoded, not flagged (port $port)" ||
		fail "golden $name: protocol '$proto', malformed '$mal'" ;;
	bad) [ "$proto" = FLIT ] && [ -n "$mal" ] && ok "corrupt $name flagged malformed" ||
		fail "corrupt $name: protocol '$proto', malformed '$mal' (expected FLIT, flagged)" ;;
	other) [ "$proto" = FLIT ] && [ -z "$mal" ] && ok "version 2 on port 14401: decoded, not malformed" ||
		fail "version 2 on port 14401: protocol '$proto', malformed '$mal'" ;;
	esac
done <"$tmp/crafted.pcap.names"
# a Lua error inside a dissection shows as an expert item, not on stderr
n=$(ts -r "$tmp/crafted.pcap" -T fields -e _ws.expert.message | grep -ci "lua error\|dissector error")
[ "$n" -eq 0 ] && ok "crafted frames: no Lua error in any dissection" || fail "$n frames with a Lua error"
no_lua_errors "crafted frames"

# golden values, as docs/PROTOCOL.md spells them
check_fields() {  # N "fields" WANT DESCRIPTION
	local got
	got=$(ts -r "$tmp/crafted.pcap" -Y "frame.number == $1" -T fields -E separator='|' $2)
	[ "$got" = "$3" ] && ok "golden $4" || { fail "golden $4:"; echo "    got    $got"; echo "    wanted $3"; }
}
check_fields 1 "-e flit.type -e flit.flags.ts -e flit.session -e flit.seq -e flit.count -e flit.len -e flit.msg.seq -e flit.msg.topic -e flit.msg.len -e flit.msg.payload -e flit.msg.ts" \
	"1|1|0x1a2b3c4d|1000|2|72|1000,1001|7,8|5,1|68656c6c6f,21|1700000000123456789,1700000000123457789" \
	"DATA with timestamps: header, per-message seq, topic, length, payload, stamp"
check_fields 2 "-e flit.flags.ts -e flit.len -e flit.msg.seq -e flit.msg.payload -e flit.padding" \
	"0|56|1000,1001|68656c6c6f,21|000000,00000000000000" "DATA without timestamps, padding"
check_fields 3 "-e flit.type -e flit.seq -e flit.hb.trail -e flit.flags.end" "2|1000|900|0" "HB"
check_fields 4 "-e flit.type -e flit.count -e flit.range.first -e flit.range.n -e flit.range.last -e flit.range.status" \
	"3|2|990,996|5,2|994,997|0,0" "NAK ranges"
check_fields 5 "-e flit.type -e flit.range.first -e flit.range.n -e flit.range.status" \
	"4|100,990,1000|10,5,2|1,0,2" "NCF ranges and statuses"
check_fields 6 "-e flit.type -e flit.domain -e flit.info.mode -e flit.info.data_addr -e flit.info.data_port -e flit.info.ctl_addr -e flit.info.ctl_port -e flit.info.pid -e flit.name.idx -e flit.name.text" \
	"5|0x933b5bde|1|239.1.2.3|24000|192.168.1.10|24001|4242|0,1|prices.eurusd,news" "INFO advertisement and topics"
check_fields 7 "-e flit.type -e flit.session -e flit.name.kind -e flit.name.text" \
	"6|0x00000000|0,1|prices.eurusd,news.*" "QUERY names and pattern"
check_fields 8 "-e flit.type -e flit.session -e flit.domain -e flit.flags.leave" "7|0x1a2b3c4d|0x933b5bde|0" "JOIN"
check_fields 9 "-e flit.type -e flit.seq -e flit.hb.trail -e flit.late.origin -e flit.late.age_ns -e flit.late.late_join" \
	"8|1000|900|0|2500000000|500" "LATE: live start, trail, origin, age, late_join"
check_fields 10 "-e flit.type -e flit.flags.leave -e flit.flags.late" "7|0|1" "JOIN asking for LATE"
check_fields 11 "-e flit.type -e flit.flags.page -e flit.flags.ended -e flit.name.idx -e flit.name.text" \
	"5|1|0|300,301|md.sym00300,md.sym00301" "INFO page of a shared session"
check_fields 13 "-e flit.flags.ts -e flit.flags.tseq -e flit.len -e flit.msg.seq -e flit.msg.tseq -e flit.msg.topic -e flit.msg.payload" \
	"0|1|72|1000,1001|12,3|7,8|68656c6c6f,21" "DATA of a session of several topics: topic sequence numbers"
check_fields 14 "-e flit.flags.page -e flit.flags.ended -e flit.flags.final -e flit.name.idx -e flit.name.text -e flit.name.final" \
	"1|1|1|300|md.sym00300|42" "INFO of an ended topic with its final number"
check_fields 15 "-e flit.flags.page -e flit.flags.ended -e flit.flags.next -e flit.name.idx -e flit.name.text -e flit.name.next" \
	"1|0|1|300|md.sym00300|42" "INFO page with each topic's next number"
check_fields 16 "-e flit.flags.tseq -e flit.flags.short -e flit.len -e flit.msg.seq -e flit.msg.tseq -e flit.msg.topic -e flit.msg.len -e flit.msg.payload" \
	"1|1|56|1000,1001|12,3|7,8|5,1|68656c6c6f,21" "DATA in short headers: topic, length and topic number in 8 bytes"
# the malformed reasons are named
ts -r "$tmp/crafted.pcap" -Y flit.malformed -T fields -e _ws.expert.message >"$tmp/reasons.txt"
for r in FLIT_FE_SHORT FLIT_FE_COUNT FLIT_FE_LEN FLIT_FE_MSG_LEN FLIT_FE_FLAGS FLIT_FE_MSG_FLAGS; do
	grep -q "$r" "$tmp/reasons.txt" && ok "a malformed frame is explained with $r" || fail "no expert message names $r"
done
# heuristic off: only the preference's ports (14401: the even frames)
ts -o flit.heuristic:FALSE -r "$tmp/crafted.pcap" -T fields -e frame.number -e _ws.col.Protocol >"$tmp/noheur.txt"
if awk '($1 % 2 == 1) != ($2 == "FLIT") { bad = 1 } END { exit bad }' "$tmp/noheur.txt"; then
	ok "heuristic off: exactly the frames to port 14401 are flit"
else
	fail "heuristic off: wrong frames decoded"; sed 's/^/    | /' "$tmp/noheur.txt" | head -30
fi
ts -o flit.heuristic:FALSE -o flit.ports:33001 -r "$tmp/crafted.pcap" -T fields -e frame.number \
	-e _ws.col.Protocol >"$tmp/port.txt"
if grep -qx "2	FLIT" "$tmp/port.txt" && ! grep -qx "1	FLIT" "$tmp/port.txt"; then
	ok "the flit.ports preference moves the port"
else
	fail "flit.ports:33001 did not decode frame 2 alone among the first two"
fi
no_lua_errors "preferences"

# ---- 2. live traffic ------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || skip "live capture needs root (network namespaces); the crafted frames passed"
command -v tcpdump >/dev/null 2>&1 || skip "tcpdump not installed"
need_tools flit-pub flit-sub
"$T" up --name "$N" --hosts 2 --owner-pid $$ >"$tmp/tb.log" 2>&1
rc=$?
[ "$rc" -eq 4 ] && skip "$(tail -1 "$tmp/tb.log")"
[ "$rc" -eq 0 ] || { cat "$tmp/tb.log"; echo "FAIL: testbed up exited $rc"; exit 1; }
up=1

# tcpdump on host 1 (testbed exec ends in exec nsenter ... exec tcpdump: $! is tcpdump)
"$T" exec --name "$N" --host 1 -- tcpdump -i eth0 -n -U --immediate-mode -s 0 -w "$tmp/live.pcap" udp \
	2>"$tmp/tcpdump.err" &
dump=$!
for _ in $(seq 1 100); do
	grep -q "listening on" "$tmp/tcpdump.err" 2>/dev/null && break
	sleep 0.05
done
grep -q "listening on" "$tmp/tcpdump.err" || { cat "$tmp/tcpdump.err"; echo "FAIL: tcpdump did not start"; exit 1; }

"$T" exec --name "$N" --host 2 -- "$D/flit-sub" -t udp --count 5 --timeout 20 'dis.*' \
	>"$tmp/sub.out" 2>"$tmp/sub.err" &
sub=$!
t0=$(date +%s%N)
"$T" exec --name "$N" --host 1 -- "$D/flit-pub" -t udp -w 1 -T 10 -S dis.ts hello world \
	>"$tmp/pub1.out" 2>&1 || { cat "$tmp/pub1.out"; fail "flit-pub dis.ts failed"; }
t1=$(date +%s%N)
"$T" exec --name "$N" --host 1 -- "$D/flit-pub" -t udp -w 1 -T 10 -C 'batch = true' dis.batch one two three \
	>"$tmp/pub2.out" 2>&1 || { cat "$tmp/pub2.out"; fail "flit-pub dis.batch failed"; }
wait "$sub"; rc=$?; sub=
[ "$rc" -eq 0 ] || { sed 's/^/    | /' "$tmp/sub.err"; fail "flit-sub exited $rc (5 messages expected)"; }
sleep 0.5         # the closing HBs, and tcpdump writing them
kill -INT "$dump"; wait "$dump" 2>/dev/null; dump=
n=$(ts -r "$tmp/live.pcap" -Y flit | wc -l)
[ "$n" -gt 0 ] || { sed 's/^/    | /' "$tmp/tcpdump.err"; echo "FAIL: no flit frame captured"; exit 1; }
ok "captured $n flit frames of live traffic"

# sessions from the INFO frames
ts -r "$tmp/live.pcap" -Y 'flit.type == 5' -T fields -E separator='|' -e flit.session -e flit.name.idx \
	-e flit.name.text | sort -u >"$tmp/info.txt"
s_ts=$(awk -F'|' '$3 == "dis.ts" && $2 == "0" { print $1 }' "$tmp/info.txt" | head -1)
s_batch=$(awk -F'|' '$3 == "dis.batch" && $2 == "0" { print $1 }' "$tmp/info.txt" | head -1)
[ -n "$s_ts" ] && [ -n "$s_batch" ] && ok "INFO frames name dis.ts ($s_ts) and dis.batch ($s_batch), index 0" ||
	{ fail "INFO frames for dis.ts and dis.batch not found"; sed 's/^/    | /' "$tmp/info.txt"; }

# check_session SESSION "payload ..." TS(0|1): DATA messages of the session
check_session() {
	local s=$1 want=$2 wts=$3
	ts -r "$tmp/live.pcap" -Y "flit.type == 1 && flit.session == $s && flit.flags.retx == 0" -T fields \
		-E separator='|' -e flit.seq -e flit.count -e flit.flags.ts -e flit.msg.seq -e flit.msg.topic \
		-e flit.msg.len -e flit.msg.payload -e flit.msg.ts -e flit.msg.topic_name >"$tmp/data-$s.txt"
	python3 - "$tmp/data-$s.txt" "$want" "$wts" "$t0" "$t1" <<'EOF'
import sys
rows = [l.rstrip('\n').split('|') for l in open(sys.argv[1]) if l.strip()]
want = sys.argv[2].split()
wts = sys.argv[3] == '1'
t0, t1 = int(sys.argv[4]), int(sys.argv[5])
msgs = []
errs = []
for seq, count, tsflag, mseqs, topics, lens, pays, stamps, names in rows:
    mseqs, topics, lens, pays = mseqs.split(','), topics.split(','), lens.split(','), pays.split(',')
    if len(mseqs) != int(count):
        errs.append(f"frame seq {seq}: {len(mseqs)} messages decoded, count {count}")
    if mseqs and int(mseqs[0]) != int(seq):
        errs.append(f"frame seq {seq}: first message seq {mseqs[0]}")
    if (tsflag == '1') != wts:
        errs.append(f"frame seq {seq}: timestamp flag {tsflag}")
    stamps = stamps.split(',') if stamps else []
    if wts and len(stamps) != len(mseqs):
        errs.append(f"frame seq {seq}: {len(stamps)} stamps for {len(mseqs)} messages")
    for st in stamps:
        if not t0 - 10**9 <= int(st) <= t1 + 10**9:
            errs.append(f"stamp {st} outside the publishing window {t0} .. {t1}")
    for i in range(len(mseqs)):
        msgs.append((int(mseqs[i]), int(topics[i]), int(lens[i]), bytes.fromhex(pays[i]).decode(),
                     names.split(',')[i] if names else ''))
if [m[3] for m in msgs] != want:
    errs.append(f"payloads {[m[3] for m in msgs]}, sent {want}")
for a, b in zip(msgs, msgs[1:]):
    if b[0] != a[0] + 1:
        errs.append(f"sequence {a[0]} then {b[0]}")
for m in msgs:
    if m[1] != 0 or m[2] != len(m[3]):
        errs.append(f"message {m}: topic index or length wrong")
if errs:
    print("\n".join(errs))
    sys.exit(1)
print(f"{len(msgs)} messages in {len(rows)} frames, seq {msgs[0][0]}..{msgs[-1][0]}, topic names {sorted({m[4] for m in msgs})}")
EOF
}
if [ -n "$s_ts" ]; then
	out=$(check_session "$s_ts" "hello world" 1) && ok "dis.ts DATA: $out" || { fail "dis.ts DATA:"; echo "$out" | sed 's/^/    | /'; }
	grep -q "dis.ts" "$tmp/data-$s_ts.txt" && ok "dis.ts messages carry the topic name from INFO" ||
		fail "dis.ts messages: no topic name from INFO"
fi
if [ -n "$s_batch" ]; then
	out=$(check_session "$s_batch" "one two three" 0) && ok "dis.batch DATA: $out" || { fail "dis.batch DATA:"; echo "$out" | sed 's/^/    | /'; }
fi
# the receiver's side: QUERY with the pattern, JOINs; the sources' closing HB
ts -r "$tmp/live.pcap" -Y 'flit.type == 6 && flit.name.kind == 1 && flit.name.text == "dis.*"' \
	-T fields -e frame.number | grep -q . && ok "QUERY for the pattern dis.* (kind PATTERN)" ||
	fail "no QUERY with pattern dis.*"
for s in $s_ts $s_batch; do
	ts -r "$tmp/live.pcap" -Y "flit.type == 7 && flit.session == $s && ip.src == 10.77.0.2" -T fields \
		-e frame.number | grep -q . && ok "JOIN from host 2 for session $s" || fail "no JOIN for session $s"
	ts -r "$tmp/live.pcap" -Y "flit.type == 2 && flit.session == $s && flit.flags.end == 1" -T fields \
		-e flit.seq | grep -q . && ok "closing HB with END for session $s" || fail "no HB END for session $s"
done
n=$(ts -r "$tmp/live.pcap" -Y 'flit.malformed || flit.dissector_bug' | wc -l)
[ "$n" -eq 0 ] && ok "no live frame flagged malformed" || fail "$n live frames flagged malformed"
no_lua_errors "live capture"

finish
