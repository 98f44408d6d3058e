-- SPDX-License-Identifier: BSD-2-Clause
--
-- Wireshark / tshark dissector for the flit wire protocol, version 1
-- (docs/PROTOCOL.md): the 24-byte frame header, DATA messages (topic index,
-- length, flags, send timestamp, payload and padding, the sequence number of
-- each message) and the control frames of the udp transport (HB, NAK, NCF,
-- INFO, QUERY, JOIN, with their ranges and name entries).
--
--   tshark -X lua_script:tools/wireshark/flit.lua -r cap.pcap -Y flit
--   wireshark -X lua_script:tools/wireshark/flit.lua cap.pcap
--   (or copy it to ~/.local/lib/wireshark/plugins/)
--
-- It finds flit in UDP by itself (a heuristic: the magic "FL", version 1 and a
-- type 1 ... 15 at the start of the datagram; xdp and kernel udp send the same
-- datagrams), and also decodes the UDP ports of the preference "flit.ports"
-- (default 14400, the resolver channel, and 14401, the data port).
--
-- Every check of the protocol page is made; a frame a flit receiver would drop
-- gets an expert item (filter: flit.malformed, or _ws.expert.severity == error)
-- saying which check failed (FLIT_FE_*), and decoding stops where the bytes stop
-- making sense.  Nothing here reads past the captured bytes, and a Lua error in
-- the decoder is turned into an expert item too, never a failed dissection.
--
-- DATA messages carry a topic index; the topic names come in INFO frames.  The
-- dissector remembers (session, index) -> name from the INFO frames it has seen
-- and shows the name of later messages (flit.msg.topic_name).

local flit = Proto("flit", "flit wire protocol")

local MAGIC = 0x4c46
local HDR = 24

local type_names = {
	[1] = "DATA", [2] = "HB", [3] = "NAK", [4] = "NCF", [5] = "INFO", [6] = "QUERY", [7] = "JOIN", [8] = "LATE",
}
local type_vs = {}
for k, v in pairs(type_names) do type_vs[k] = v end
for t = 9, 15 do type_vs[t] = "reserved control frame" end
local status_vs = { [0] = "RETX", [1] = "GONE", [2] = "FUTURE" }
local mode_vs = { [1] = "MCAST", [2] = "UNICAST", [3] = "RDMA", [4] = "RDMA_MCAST" }
local kind_vs = { [0] = "EXACT", [1] = "PATTERN" }

local F = {
	magic      = ProtoField.uint16("flit.magic", "Magic", base.HEX),
	version    = ProtoField.uint8("flit.version", "Version", base.DEC),
	type       = ProtoField.uint8("flit.type", "Type", base.DEC, type_vs),
	flags      = ProtoField.uint16("flit.flags", "Flags", base.HEX),
	flag_ts    = ProtoField.bool("flit.flags.ts", "Send timestamps (FLIT_FF_TS)", 16, nil, 0x0001),
	flag_retx  = ProtoField.bool("flit.flags.retx", "Retransmission (FLIT_FF_RETX)", 16, nil, 0x0002),
	flag_tseq  = ProtoField.bool("flit.flags.tseq", "Topic sequence numbers (FLIT_FF_TSEQ)", 16, nil, 0x0004),
	flag_short = ProtoField.bool("flit.flags.short", "Short message headers (FLIT_FF_SHORT)", 16, nil, 0x0008),
	flag_end   = ProtoField.bool("flit.flags.end", "End of session (FLIT_HBF_END)", 16, nil, 0x0001),
	flag_leave = ProtoField.bool("flit.flags.leave", "Leave (FLIT_JF_LEAVE)", 16, nil, 0x0001),
	flag_late  = ProtoField.bool("flit.flags.late", "Late join: answer with LATE", 16, nil, 0x0002),
	flag_page  = ProtoField.bool("flit.flags.page", "A page of a shared session's topics (FLIT_INFOF_PAGE)", 16, nil, 0x0001),
	flag_ended = ProtoField.bool("flit.flags.ended", "The topics listed ended (FLIT_INFOF_ENDED)", 16, nil, 0x0002),
	flag_final = ProtoField.bool("flit.flags.final", "Each ended topic's message count follows (FLIT_INFOF_FINAL)", 16, nil, 0x0004),
	flag_next  = ProtoField.bool("flit.flags.next", "Each topic's next number at seq follows (FLIT_INFOF_NEXT)", 16, nil, 0x0008),
	count      = ProtoField.uint16("flit.count", "Count", base.DEC),
	len        = ProtoField.uint32("flit.len", "Frame length", base.DEC),
	session    = ProtoField.uint32("flit.session", "Session", base.HEX),
	seq        = ProtoField.uint64("flit.seq", "Sequence number", base.DEC),
	trailing   = ProtoField.bytes("flit.trailing", "Bytes after the frame (not part of it)"),
	-- DATA
	msg        = ProtoField.none("flit.msg", "Message"),
	msg_seq    = ProtoField.uint64("flit.msg.seq", "Sequence number", base.DEC),
	msg_topic  = ProtoField.uint32("flit.msg.topic", "Topic index", base.DEC),
	msg_tname  = ProtoField.string("flit.msg.topic_name", "Topic (from INFO)"),
	msg_len    = ProtoField.uint32("flit.msg.len", "Payload length", base.DEC, nil, 0x00ffffff),
	msg_flags  = ProtoField.uint32("flit.msg.flags", "Message flags (reserved)", base.HEX, nil, 0xff000000),
	msg_tseq   = ProtoField.uint64("flit.msg.tseq", "Topic sequence number", base.DEC),
	msg_ts     = ProtoField.uint64("flit.msg.ts", "Send timestamp (ns since the epoch)", base.DEC),
	msg_time   = ProtoField.absolute_time("flit.msg.time", "Send time", base.UTC),
	payload    = ProtoField.bytes("flit.msg.payload", "Payload"),
	padding    = ProtoField.bytes("flit.padding", "Padding"),
	-- HB
	trail      = ProtoField.uint64("flit.hb.trail", "Retention trail", base.DEC),
	-- NAK / NCF
	range      = ProtoField.none("flit.range", "Range"),
	r_first    = ProtoField.uint64("flit.range.first", "First", base.DEC),
	r_n        = ProtoField.uint32("flit.range.n", "Count", base.DEC),
	r_last     = ProtoField.uint64("flit.range.last", "Last", base.DEC),
	r_status   = ProtoField.uint32("flit.range.status", "Status", base.DEC, status_vs),
	-- LATE
	l_origin   = ProtoField.uint64("flit.late.origin", "Origin (first sequence number)", base.DEC),
	l_age      = ProtoField.uint64("flit.late.age_ns", "Source age (ns)", base.DEC),
	l_count    = ProtoField.uint32("flit.late.late_join", "Messages offered to late joiners", base.DEC),
	-- INFO / QUERY / JOIN
	domain     = ProtoField.uint32("flit.domain", "Domain id", base.HEX),
	reserved   = ProtoField.bytes("flit.reserved", "Reserved"),
	mode       = ProtoField.uint8("flit.info.mode", "Mode", base.DEC, mode_vs),
	data_port  = ProtoField.uint16("flit.info.data_port", "Data port", base.DEC),
	data_addr  = ProtoField.ipv4("flit.info.data_addr", "Data address"),
	ctl_addr   = ProtoField.ipv4("flit.info.ctl_addr", "Control address"),
	ctl_port   = ProtoField.uint16("flit.info.ctl_port", "Control port", base.DEC),
	pid        = ProtoField.uint32("flit.info.pid", "Source process id", base.DEC),
	-- name entries
	name       = ProtoField.none("flit.name", "Name"),
	n_idx      = ProtoField.uint32("flit.name.idx", "Topic index", base.DEC),
	n_kind     = ProtoField.uint8("flit.name.kind", "Kind", base.DEC, kind_vs),
	n_res      = ProtoField.uint8("flit.name.reserved", "Reserved", base.HEX),
	n_len      = ProtoField.uint16("flit.name.len", "Length", base.DEC),
	n_text     = ProtoField.string("flit.name.text", "Name"),
	n_final    = ProtoField.uint64("flit.name.final", "Messages sent (its next number)", base.DEC),
	n_next     = ProtoField.uint64("flit.name.next", "Its next message's number (at seq)", base.DEC),
}
local field_list = {}
for _, f in pairs(F) do field_list[#field_list + 1] = f end
flit.fields = field_list

local E = {
	malformed = ProtoExpert.new("flit.malformed", "Malformed flit frame (a receiver drops it)",
		expert.group.MALFORMED, expert.severity.ERROR),
	version   = ProtoExpert.new("flit.unknown_version", "Unknown flit version (not decoded)",
		expert.group.PROTOCOL, expert.severity.WARN),
	type      = ProtoExpert.new("flit.unknown_type", "Unknown or reserved flit frame type",
		expert.group.PROTOCOL, expert.severity.WARN),
	lua       = ProtoExpert.new("flit.dissector_bug", "flit dissector failed on this frame",
		expert.group.MALFORMED, expert.severity.ERROR),
	retx      = ProtoExpert.new("flit.retransmission", "Retransmission",
		expert.group.SEQUENCE, expert.severity.NOTE),
	gone      = ProtoExpert.new("flit.loss", "Messages no longer retained (NCF GONE)",
		expert.group.SEQUENCE, expert.severity.WARN),
}
flit.experts = { E.malformed, E.version, E.type, E.lua, E.retx, E.gone }

flit.prefs.ports = Pref.range("UDP ports", "14400,14401",
	"UDP ports always decoded as flit (flit is also found on any port by its magic)", 65535)
flit.prefs.heuristic = Pref.bool("Find flit on any UDP port", true,
	"Try every UDP datagram for the flit magic and version (heuristic)")

-- (session, topic index) -> name, from INFO frames seen so far
local topic_names = {}
function flit.init()
	topic_names = {}
end

local function align8(n)
	return n + (8 - n % 8) % 8
end

-- set while a frame is dissected: did it fail a check?
local malformed = false

local function bad(tree, fmt, ...)
	malformed = true
	tree:add_proto_expert_info(E.malformed, string.format(fmt, ...))
end

-- Name entries of INFO (from 48) and QUERY (from 32): the name walk.
local function name_walk(tvb, tree, off, flen, count, ftype, session, names_out)
	for i = 0, count - 1 do
		if flen - off < 8 then
			bad(tree, "name %d of %d: no room for its 8-byte header (count too large: FLIT_FE_COUNT)", i, count)
			return false
		end
		local idx = tvb(off, 4):le_uint()
		local kind = tvb(off + 4, 1):uint()
		local res = tvb(off + 5, 1):uint()
		local L = tvb(off + 6, 2):le_uint()
		local fits = align8(L) <= flen - off - 8
		local st = tree:add(F.name, tvb(off, fits and 8 + align8(L) or flen - off))
		st:set_text(string.format("Name %d", i))
		local it = st:add_le(F.n_idx, tvb(off, 4))
		if ftype == 6 and idx ~= 0 then
			bad(it, "QUERY name with index %d, not 0 (FLIT_FE_MSG_FLAGS)", idx)
		end
		it = st:add(F.n_kind, tvb(off + 4, 1))
		if kind > 1 or (ftype == 5 and kind ~= 0) then
			bad(it, "kind %d not allowed in %s (FLIT_FE_MSG_FLAGS)", kind, type_names[ftype])
		end
		it = st:add(F.n_res, tvb(off + 5, 1))
		if res ~= 0 then bad(it, "reserved byte is %d, must be 0 (FLIT_FE_MSG_FLAGS)", res) end
		it = st:add_le(F.n_len, tvb(off + 6, 2))
		if L < 1 or L > 255 then
			bad(it, "name length %d, must be 1 ... 255 (FLIT_FE_MSG_FLAGS)", L)
			return false
		end
		off = off + 8
		if not fits then
			bad(st, "name of %d bytes (%d padded) runs past the frame end, %d bytes left (FLIT_FE_MSG_LEN)",
				L, align8(L), flen - off)
			return false
		end
		local text = tvb(off, L):string()
		local nit = st:add(F.n_text, tvb(off, L))
		local raw = tvb(off, L):bytes()
		for j = 0, L - 1 do
			local b = raw:get_index(j)
			if b < 0x20 or b == 0x7f then
				bad(nit, "name byte %d is 0x%02x: NUL, control characters and DEL are not allowed (FLIT_FE_MSG_FLAGS)", j, b)
				break
			end
		end
		if align8(L) > L then
			local pit = st:add(F.padding, tvb(off + L, align8(L) - L))
			local praw = tvb(off + L, align8(L) - L):bytes()
			for j = 0, praw:len() - 1 do
				if praw:get_index(j) ~= 0 then
					bad(pit, "padding byte is not 0 (FLIT_FE_MSG_FLAGS)")
					break
				end
			end
		end
		st:append_text(string.format(": %s%s%s", text,
			ftype == 5 and string.format(" (index %d)", idx) or "",
			kind == 1 and " (pattern)" or ""))
		if ftype == 5 then
			topic_names[string.format("%08x:%d", session, idx)] = text
		end
		names_out[#names_out + 1] = text
		off = off + align8(L)
	end
	if off ~= flen then
		bad(tree, "%d bytes left after %d names (FLIT_FE_COUNT)", flen - off, count)
		return false
	end
	return true
end

local function check_zero(tvb, tree, off, n, what)
	local it = tree:add(F.reserved, tvb(off, n))
	local raw = tvb(off, n):bytes()
	for j = 0, n - 1 do
		if raw:get_index(j) ~= 0 then
			bad(it, "%s is not 0 (FLIT_FE_MSG_FLAGS)", what)
			return
		end
	end
end

local function dissect_data(tvb, pinfo, tree, flags, count, flen, session, seq)
	local ts = flags % 2 == 1
	local tseq = flags % 8 >= 4
	local short = flags % 16 >= 8     -- with tseq: the number in an 8-byte header
	local mh = 8 + (ts and 8 or 0) + ((tseq and not short) and 8 or 0)
	local off = HDR
	local lens = {}
	for i = 0, count - 1 do
		if flen - off < mh then
			bad(tree, "message %d of %d: no room for its %d-byte header, %d bytes left (count too large: FLIT_FE_COUNT)",
				i, count, mh, flen - off)
			return
		end
		local topic, L, mflags, tsq
		if short then
			topic = tvb(off, 2):le_uint()
			L = tvb(off + 2, 2):le_uint()
			mflags = 0
			tsq = tvb(off + 4, 4):le_uint64()
		else
			topic = tvb(off, 4):le_uint()
			local lf = tvb(off + 4, 4):le_uint()
			L = lf % 0x1000000
			mflags = math.floor(lf / 0x1000000)
			tsq = tseq and tvb(off + mh - 8, 8):le_uint64() or nil
		end
		local fits = align8(L) <= flen - off - mh
		local st = tree:add(F.msg, tvb(off, fits and mh + align8(L) or flen - off))
		local mseq = seq + i
		st:set_text(string.format("Message %d: seq %s, topic %d%s, %d byte%s", i, tostring(mseq), topic,
			tsq and (" #" .. tostring(tsq)) or "", L, L == 1 and "" or "s"))
		st:add(F.msg_seq, tvb(off, mh), mseq):set_generated()
		local tw = short and 2 or 4
		st:add(F.msg_topic, tvb(off, tw), topic)
		local tname = topic_names[string.format("%08x:%d", session, topic)]
		if tname then
			st:add(F.msg_tname, tvb(off, tw), tname):set_generated()
			st:append_text(" (" .. tname .. ")")
		end
		if short then
			st:add(F.msg_len, tvb(off + 2, 2), L)
			st:add(F.msg_tseq, tvb(off + 4, 4), tsq)
		else
			st:add_le(F.msg_len, tvb(off + 4, 4))
			local fit = st:add_le(F.msg_flags, tvb(off + 4, 4))
			if mflags ~= 0 then
				bad(fit, "reserved message flags 0x%02x set (FLIT_FE_MSG_FLAGS)", mflags)
				return
			end
		end
		if ts then
			local t = tvb(off + 8, 8):le_uint64()
			st:add_le(F.msg_ts, tvb(off + 8, 8))
			if t:tonumber() ~= 0 then
				local secs = (t / 1000000000):tonumber()
				local ns = (t % 1000000000):tonumber()
				st:add(F.msg_time, tvb(off + 8, 8), NSTime.new(secs, ns))
			end
		end
		if tseq and not short then
			st:add_le(F.msg_tseq, tvb(off + mh - 8, 8))
		end
		off = off + mh
		if not fits then
			bad(st, "payload of %d bytes (%d padded) runs past the frame end, %d bytes left (FLIT_FE_MSG_LEN)",
				L, align8(L), flen - off)
			return
		end
		if L > 0 then st:add(F.payload, tvb(off, L)) end
		if align8(L) > L then st:add(F.padding, tvb(off + L, align8(L) - L)) end
		lens[#lens + 1] = tostring(L)
		off = off + align8(L)
	end
	if off ~= flen then
		bad(tree, "%d bytes left after %d messages (count too small: FLIT_FE_COUNT)", flen - off, count)
		return
	end
	local info = string.format("DATA session 0x%08x ", session)
	if count == 0 then
		info = info .. string.format("seq %s, no message", tostring(seq))
	elseif count == 1 then
		info = info .. string.format("seq %s, 1 message (%s B)", tostring(seq), lens[1])
	else
		info = info .. string.format("seq %s..%s, %d messages", tostring(seq), tostring(seq + (count - 1)), count)
	end
	if ts then info = info .. ", timestamps" end
	if tseq then info = info .. (short and ", topic numbers (short headers)" or ", topic numbers") end
	if flags >= 2 and flags % 4 >= 2 then
		info = info .. ", RETX"
		tree:add_proto_expert_info(E.retx)
	end
	pinfo.cols.info:set(info)
end

local function dissect_ranges(tvb, pinfo, tree, ftype, count, flen, session, seq)
	if count < 1 or flen ~= HDR + 16 * count then
		bad(tree, "%s with %d ranges must be %d bytes, is %d (FLIT_FE_COUNT)", type_names[ftype], count,
			HDR + 16 * count, flen)
		if count < 1 then return end
	end
	local parts = {}
	local off = HDR
	for i = 0, count - 1 do
		if flen - off < 16 then
			bad(tree, "range %d does not fit (FLIT_FE_COUNT)", i)
			return
		end
		local first = tvb(off, 8):le_uint64()
		local n = tvb(off + 8, 4):le_uint()
		local status = tvb(off + 12, 4):le_uint()
		local st = tree:add(F.range, tvb(off, 16))
		st:add_le(F.r_first, tvb(off, 8))
		local nit = st:add_le(F.r_n, tvb(off + 8, 4))
		local sit = st:add_le(F.r_status, tvb(off + 12, 4))
		local text
		if n == 0 then
			bad(nit, "empty range (FLIT_FE_COUNT)")
			text = tostring(first) .. " (empty)"
		elseif first > UInt64.max() - n then
			bad(nit, "range wraps past 2^64 - 1 (FLIT_FE_COUNT)")
			text = tostring(first) .. "+" .. n
		else
			local last = first + (n - 1)
			st:add(F.r_last, tvb(off, 12), last):set_generated()
			text = n == 1 and tostring(first) or (tostring(first) .. ".." .. tostring(last))
		end
		if ftype == 3 and status ~= 0 then
			bad(sit, "NAK range status %d, must be 0 (FLIT_FE_MSG_FLAGS)", status)
		elseif ftype == 4 and status > 2 then
			bad(sit, "NCF status %d, must be 0 ... 2 (FLIT_FE_MSG_FLAGS)", status)
		end
		if ftype == 4 then
			text = text .. " " .. (status_vs[status] or tostring(status))
			if status == 1 then st:add_proto_expert_info(E.gone) end
		end
		st:set_text(string.format("Range %d: %s", i, text))
		parts[#parts + 1] = text
		off = off + 16
	end
	local info = string.format("%s session 0x%08x: %s", type_names[ftype], session, table.concat(parts, ", "))
	if ftype == 4 then info = info .. string.format(" (next %s)", tostring(seq)) end
	pinfo.cols.info:set(info)
end

local function dissect_control(tvb, pinfo, tree, ftype, flags, count, flen, session, seq)
	if ftype == 2 then          -- HB
		if count ~= 0 or flen ~= 32 then
			bad(tree, "HB must have count 0 and length 32 (count %d, length %d: FLIT_FE_COUNT)", count, flen)
			if flen < 32 then return end
		end
		local trail = tvb(24, 8):le_uint64()
		local it = tree:add_le(F.trail, tvb(24, 8))
		if trail > seq then bad(it, "trail %s after seq %s (FLIT_FE_COUNT)", tostring(trail), tostring(seq)) end
		pinfo.cols.info:set(string.format("HB session 0x%08x next %s trail %s%s", session, tostring(seq),
			tostring(trail), flags % 2 == 1 and ", END" or ""))
	elseif ftype == 3 or ftype == 4 then
		dissect_ranges(tvb, pinfo, tree, ftype, count, flen, session, seq)
	elseif ftype == 5 then      -- INFO
		if flen < 48 then
			bad(tree, "INFO shorter than 48 bytes (FLIT_FE_COUNT)")
			return
		end
		tree:add_le(F.domain, tvb(24, 4))
		local mode = tvb(28, 1):uint()
		local mit = tree:add(F.mode, tvb(28, 1))
		if mode < 1 or mode > 4 then bad(mit, "mode %d, must be 1 .. 4 (FLIT_FE_MSG_FLAGS)", mode) end
		check_zero(tvb, tree, 29, 1, "reserved byte 29")
		tree:add_le(F.data_port, tvb(30, 2))
		tree:add(F.data_addr, tvb(32, 4))
		tree:add(F.ctl_addr, tvb(36, 4))
		tree:add_le(F.ctl_port, tvb(40, 2))
		check_zero(tvb, tree, 42, 2, "reserved bytes 42 ... 43")
		tree:add_le(F.pid, tvb(44, 4))
		local names = {}
		-- FINAL (ended topics) or NEXT (live ones): one 8-byte number
		-- per topic after the names
		local final = math.floor(flags / 4) % 2 == 1
		local nxt = math.floor(flags / 8) % 2 == 1
		local ended = math.floor(flags / 2) % 2 == 1
		local nums = final or nxt
		local nend = nums and flen - 8 * count or flen
		if final and not ended then
			bad(tree, "FLIT_INFOF_FINAL without FLIT_INFOF_ENDED (FLIT_FE_FLAGS)")
		elseif nxt and ended then
			bad(tree, "FLIT_INFOF_NEXT with FLIT_INFOF_ENDED (FLIT_FE_FLAGS)")
		elseif nend < 48 then
			bad(tree, "no room for %d %s numbers (FLIT_FE_COUNT)", count, final and "final" or "next")
		elseif name_walk(tvb, tree, 48, nend, count, 5, session, names) and nums then
			for i = 0, count - 1 do
				local it = tree:add_le(final and F.n_final or F.n_next, tvb(nend + 8 * i, 8))
				it:prepend_text(string.format("%s: ", names[i + 1] or "?"))
			end
		end
		local where = mode == 1 and string.format("%s:%d", tostring(tvb(32, 4):ipv4()), tvb(30, 2):le_uint())
			or mode == 3 and string.format("rdma %s:%d", tvb(32, 4):uint() == 0 and "(sender)"
				or tostring(tvb(32, 4):ipv4()), tvb(30, 2):le_uint())
			or "unicast"
		pinfo.cols.info:set(string.format("INFO%s session 0x%08x %s next %s topics%s: %s",
			flags % 2 == 1 and " (page)" or "", session, where, tostring(seq),
			math.floor(flags / 2) % 2 == 1 and " ended" or "", table.concat(names, ", ")))
	elseif ftype == 6 then      -- QUERY
		if flen < 32 then
			bad(tree, "QUERY shorter than 32 bytes (FLIT_FE_COUNT)")
			return
		end
		tree:add_le(F.domain, tvb(24, 4))
		check_zero(tvb, tree, 28, 4, "reserved bytes 28 ... 31")
		local names = {}
		name_walk(tvb, tree, 32, flen, count, 6, session, names)
		if session ~= 0 then
			pinfo.cols.info:set(string.format("QUERY session 0x%08x?%s", session,
				#names > 0 and (" " .. table.concat(names, ", ")) or ""))
		else
			pinfo.cols.info:set("QUERY " .. table.concat(names, ", "))
		end
	elseif ftype == 7 then      -- JOIN
		if count ~= 0 or flen ~= 32 then
			bad(tree, "JOIN must have count 0 and length 32 (count %d, length %d: FLIT_FE_COUNT)", count, flen)
			if flen < 32 then return end
		end
		tree:add_le(F.domain, tvb(24, 4))
		check_zero(tvb, tree, 28, 4, "reserved bytes 28 ... 31")
		if flags == 3 then
			bad(tree, "JOIN with both LEAVE and LATE (FLIT_FE_FLAGS)")
		end
		pinfo.cols.info:set(string.format("%s session 0x%08x", flags % 2 == 1 and "LEAVE" or
			(flags == 2 and "JOIN (late join: asks where to start)" or "JOIN"), session))
	elseif ftype == 8 then      -- LATE
		if count ~= 0 or flen ~= 56 then
			bad(tree, "LATE must have count 0 and length 56 (count %d, length %d: FLIT_FE_COUNT)", count, flen)
			if flen < 56 then return end
		end
		local trail = tvb(24, 8):le_uint64()
		local origin = tvb(32, 8):le_uint64()
		tree:add_le(F.trail, tvb(24, 8))
		tree:add_le(F.l_origin, tvb(32, 8))
		tree:add_le(F.l_age, tvb(40, 8))
		tree:add_le(F.l_count, tvb(48, 4))
		check_zero(tvb, tree, 52, 4, "reserved bytes 52 ... 55")
		if trail > seq or origin > seq then
			bad(tree, "trail or origin after seq (FLIT_FE_COUNT)")
		end
		pinfo.cols.info:set(string.format("LATE session 0x%08x live from %s, retains from %s, offers %d",
			session, tostring(seq), tostring(trail), tvb(48, 4):le_uint()))
	end
end

local function dissect_frame(tvb, pinfo, root)
	local caplen = tvb:len()
	pinfo.cols.protocol:set("FLIT")
	local tree = root:add(flit, tvb(0, math.min(caplen, math.max(HDR, 4))))
	if caplen < 4 then
		bad(tree, "%d bytes: not even magic, version and type", caplen)
		return
	end
	tree:add_le(F.magic, tvb(0, 2))
	local version = tvb(2, 1):uint()
	local vit = tree:add(F.version, tvb(2, 1))
	local ftype = tvb(3, 1):uint()
	local tit = tree:add(F.type, tvb(3, 1))
	if version ~= 1 then
		vit:add_proto_expert_info(E.version, string.format("version %d: this dissector knows 1", version))
		pinfo.cols.info:set(string.format("flit version %d (not decoded)", version))
		return
	end
	local tname = type_names[ftype] or ("type " .. ftype)
	pinfo.cols.info:set(tname)
	if caplen < HDR then
		bad(tree, "%d bytes, shorter than the 24-byte header (FLIT_FE_SHORT)", caplen)
		pinfo.cols.info:set(tname .. " [truncated: " .. caplen .. " bytes]")
		return
	end
	local flags = tvb(4, 2):le_uint()
	local fit = tree:add_le(F.flags, tvb(4, 2))
	local count = tvb(6, 2):le_uint()
	tree:add_le(F.count, tvb(6, 2))
	local flen = tvb(8, 4):le_uint()
	local lit = tree:add_le(F.len, tvb(8, 4))
	local session = tvb(12, 4):le_uint()
	tree:add_le(F.session, tvb(12, 4))
	local seq = tvb(16, 8):le_uint64()
	tree:add_le(F.seq, tvb(16, 8))
	tree:set_text(string.format("flit %s, session 0x%08x, seq %s, count %d, len %d", tname, session,
		tostring(seq), count, flen))

	-- flags, by type
	local allowed
	if ftype == 1 then
		fit:add_le(F.flag_ts, tvb(4, 2))
		fit:add_le(F.flag_retx, tvb(4, 2))
		fit:add_le(F.flag_tseq, tvb(4, 2))
		fit:add_le(F.flag_short, tvb(4, 2))
		allowed = 15
	elseif ftype == 2 then
		fit:add_le(F.flag_end, tvb(4, 2))
		allowed = 1
	elseif ftype == 5 then
		fit:add_le(F.flag_page, tvb(4, 2))
		fit:add_le(F.flag_ended, tvb(4, 2))
		fit:add_le(F.flag_final, tvb(4, 2))
		fit:add_le(F.flag_next, tvb(4, 2))
		allowed = 15
	elseif ftype == 7 then
		fit:add_le(F.flag_leave, tvb(4, 2))
		fit:add_le(F.flag_late, tvb(4, 2))
		allowed = 3
	else
		allowed = 0
	end
	if not type_names[ftype] then
		tit:add_proto_expert_info(E.type, string.format("frame type %d is %s", ftype,
			(ftype >= 9 and ftype <= 15) and "reserved for control frames" or "unassigned"))
		return
	end
	if flags - flags % (allowed + 1) ~= 0 then
		bad(fit, "flags 0x%04x: only 0x%04x allowed for %s (FLIT_FE_FLAGS); the layout cannot be trusted",
			flags, allowed, tname)
		return
	end
	if ftype == 1 and flags % 16 >= 8 and flags % 8 < 4 then
		bad(fit, "flags 0x%04x: short headers (0x0008) without topic numbers (0x0004) (FLIT_FE_FLAGS); the layout cannot be trusted",
			flags)
		return
	end

	-- length
	if flen < HDR or flen % 8 ~= 0 then
		bad(lit, "frame length %d: must be at least 24 and a multiple of 8 (FLIT_FE_LEN)", flen)
		return
	end
	if flen > caplen then
		bad(lit, "frame length %d, but the datagram holds %d bytes (FLIT_FE_LEN); decoding what is there",
			flen, caplen)
		pinfo.cols.info:append(" [truncated]")
		flen = caplen - caplen % 8
	else
		tree:set_len(flen)
		if caplen > flen then
			root:add(F.trailing, tvb(flen, caplen - flen))
		end
	end

	if ftype == 1 then
		dissect_data(tvb, pinfo, tree, flags, count, flen, session, seq)
	else
		dissect_control(tvb, pinfo, tree, ftype, flags, count, flen, session, seq)
	end
end

function flit.dissector(tvb, pinfo, root)
	local caplen = tvb:len()
	-- a port match that is not flit at all is left to others
	if caplen < 2 or tvb(0, 2):le_uint() ~= MAGIC then
		return 0
	end
	malformed = false
	local ok, err = pcall(dissect_frame, tvb, pinfo, root)
	if not ok then
		root:add_proto_expert_info(E.lua, "flit dissector error: " .. tostring(err))
		malformed = true
	end
	if malformed then
		pinfo.cols.info:append(" [Malformed]")
	end
	return caplen
end

local function heuristic(tvb, pinfo, root)
	if not flit.prefs.heuristic then return false end
	if tvb:len() < 4 then return false end
	if tvb(0, 2):le_uint() ~= MAGIC or tvb(2, 1):uint() ~= 1 then return false end
	local t = tvb(3, 1):uint()
	if t < 1 or t > 15 then return false end
	flit.dissector(tvb, pinfo, root)
	return true
end

flit:register_heuristic("udp", heuristic)

local registered_ports = nil
local function register_ports()
	local udp = DissectorTable.get("udp.port")
	if registered_ports then
		udp:remove(registered_ports, flit)
	end
	registered_ports = flit.prefs.ports
	if registered_ports and registered_ports ~= "" then
		udp:add(registered_ports, flit)
	end
end

function flit.prefs_changed()
	register_ports()
end

register_ports()
