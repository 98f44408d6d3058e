// SPDX-License-Identifier: BSD-2-Clause
/*
 * Control frames (ctl.h): encoders, the validator and accessors.  The byte
 * layout and the order of the checks are in docs/PROTOCOL.md, "Control
 * frames"; tests/test_ctl.c pins both.
 *
 * The validator reads no byte it has not first checked to lie inside the
 * frame (and the frame inside the buffer).  The encoders check every argument
 * and the size before they write anything, so a refused call leaves buf
 * untouched, and an encoded frame is always one flit_ctl_check() accepts:
 * the encoding is canonical (one frame value, one byte string).  Two header
 * fields are not encoder arguments: the ignored seq of QUERY and JOIN frames
 * (written 0) and an HB's flags (written 0; a closing source sets
 * FLIT_HBF_END in the encoded frame).
 */
#include "ctl.h"

/* Offsets and sizes inside control frames (docs/PROTOCOL.md). */
#define CTL_BODY        FLIT_FRAME_HDR_LEN  /* 24: body start */
#define CTL_HB_LEN      32u
#define CTL_JOIN_LEN    32u
#define CTL_LATE_LEN    56u
#define CTL_RANGE_LEN   16u
#define CTL_INFO_FIXED  24u                 /* INFO body before the names */
#define CTL_QUERY_FIXED 8u                  /* QUERY body before the names */
#define CTL_NAME_HDR    8u                  /* name entry: idx, kind, rsvd, len */
#define CTL_NAME_MAX    255u

/* INFO fixed body, offsets from the frame start */
#define INFO_DOMAIN     24
#define INFO_MODE       28
#define INFO_RSVD8      29
#define INFO_DATA_PORT  30
#define INFO_DATA_ADDR  32
#define INFO_CTL_ADDR   36
#define INFO_CTL_PORT   40
#define INFO_RSVD16     42
#define INFO_PID        44

uint64_t flit_name_hash64(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

uint32_t flit_domain_id(const char *domain)
{
	uint32_t h = 2166136261u;

	if (!domain)
		return h;
	for (const unsigned char *p = (const unsigned char *)domain; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return h;
}

/* ---- shared helpers ------------------------------------------------------ */

static inline bool name_byte_ok(uint8_t c)
{
	return c >= 0x20 && c != 0x7f;
}

static bool name_bytes_ok(const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!name_byte_ok(s[i]))
			return false;
	return true;
}

static inline size_t name_wire_len(size_t len)
{
	return flit_ctl_name_len(len);
}

_Static_assert(CTL_BODY + CTL_INFO_FIXED == FLIT_CTL_INFO_HDR_LEN, "ctl.h: INFO before its names");
_Static_assert(CTL_NAME_HDR == 8, "ctl.h: flit_ctl_name_len()");

static inline bool mode_ok(unsigned mode)
{
	return mode >= FLIT_MODE_MCAST && mode <= FLIT_MODE_RDMA_MCAST;
}

/* [first, first + n) is a non-empty range whose end does not wrap. */
static inline bool range_ok(uint64_t first, uint32_t n)
{
	return n >= 1 && first <= UINT64_MAX - n;
}

/* ---- validation ---------------------------------------------------------- */

/* The header flags a control frame type may carry. */
static inline unsigned known_flags(uint8_t type)
{
	switch (type) {
	case FLIT_FT_HB:
		return FLIT_HBF_END;
	case FLIT_FT_JOIN:
		return FLIT_JF_LEAVE | FLIT_JF_LATE;
	case FLIT_FT_INFO:
		return FLIT_INFOF_PAGE | FLIT_INFOF_ENDED | FLIT_INFOF_FINAL | FLIT_INFOF_NEXT;
	default:
		return 0;
	}
}

/*
 * Walk `count` name entries from frame offset off to the frame's end (len).
 * query: idx must be 0 and kind EXACT or PATTERN; else (INFO) kind EXACT.
 */
static enum flit_frame_err check_names(const uint8_t *p, uint32_t len,
				       size_t off, unsigned count, bool query)
{
	for (unsigned i = 0; i < count; i++) {
		if (len - off < CTL_NAME_HDR)
			return FLIT_FE_COUNT;
		uint32_t idx = flit_ld32(p + off);
		uint8_t kind = p[off + 4];
		uint8_t rsvd = p[off + 5];
		uint16_t nlen = flit_ld16(p + off + 6);

		if (query ? (idx != 0 || kind > FLIT_NAME_PATTERN)
			  : kind != FLIT_NAME_EXACT)
			return FLIT_FE_MSG_FLAGS;
		if (rsvd != 0 || nlen == 0 || nlen > CTL_NAME_MAX)
			return FLIT_FE_MSG_FLAGS;
		off += CTL_NAME_HDR;
		if (flit_align8(nlen) > len - off)
			return FLIT_FE_MSG_LEN;
		if (!name_bytes_ok(p + off, nlen))
			return FLIT_FE_MSG_FLAGS;
		for (size_t j = nlen; j < flit_align8(nlen); j++)
			if (p[off + j] != 0)
				return FLIT_FE_MSG_FLAGS;
		off += flit_align8(nlen);
	}
	return off == len ? FLIT_FE_OK : FLIT_FE_COUNT;
}

static enum flit_frame_err check_ranges(const uint8_t *p,
					const struct flit_frame_hdr *h)
{
	if (h->count == 0 ||
	    (size_t)h->len - CTL_BODY != (size_t)h->count * CTL_RANGE_LEN)
		return FLIT_FE_COUNT;
	for (unsigned i = 0; i < h->count; i++) {
		const uint8_t *r = p + CTL_BODY + (size_t)i * CTL_RANGE_LEN;
		uint64_t first = flit_ld64(r);
		uint32_t n = flit_ld32(r + 8);
		uint32_t status = flit_ld32(r + 12);

		if (!range_ok(first, n))
			return FLIT_FE_COUNT;
		if (h->type == FLIT_FT_NAK ? status != 0 : status > FLIT_NCF_FUTURE)
			return FLIT_FE_MSG_FLAGS;
	}
	return FLIT_FE_OK;
}

enum flit_frame_err flit_ctl_check(const void *buf, size_t buflen,
				   struct flit_frame_hdr *h)
{
	const uint8_t *p = (const uint8_t *)buf;

	if (buflen < FLIT_FRAME_HDR_LEN)
		return FLIT_FE_SHORT;
	if (flit_ld16(p) != FLIT_WIRE_MAGIC)
		return FLIT_FE_MAGIC;
	h->version = p[2];
	h->type = p[3];
	h->flags = flit_ld16(p + 4);
	h->count = flit_ld16(p + 6);
	h->len = flit_ld32(p + 8);
	h->session_id = flit_ld32(p + 12);
	h->seq = flit_ld64(p + 16);
	if (h->version != FLIT_WIRE_VERSION)
		return FLIT_FE_VERSION;
	if (h->type < FLIT_FT_HB || h->type > FLIT_FT_LATE)
		return FLIT_FE_TYPE;
	if (h->flags & ~known_flags(h->type))
		return FLIT_FE_FLAGS;
	if (h->len < FLIT_FRAME_HDR_LEN || (h->len & 7) || h->len > buflen)
		return FLIT_FE_LEN;

	switch (h->type) {
	case FLIT_FT_HB:
		if (h->count != 0 || h->len != CTL_HB_LEN)
			return FLIT_FE_COUNT;
		if (flit_ld64(p + CTL_BODY) > h->seq)
			return FLIT_FE_COUNT;
		return FLIT_FE_OK;
	case FLIT_FT_NAK:
	case FLIT_FT_NCF:
		return check_ranges(p, h);
	case FLIT_FT_INFO:
		if (h->len - CTL_BODY < CTL_INFO_FIXED)
			return FLIT_FE_COUNT;
		if (!mode_ok(p[INFO_MODE]) || p[INFO_RSVD8] != 0 ||
		    flit_ld16(p + INFO_RSVD16) != 0)
			return FLIT_FE_MSG_FLAGS;
		/* FINAL: only of ENDED topics, NEXT only of live ones; their
		 * numbers after the names, which end that much before len */
		if ((h->flags & FLIT_INFOF_FINAL) && !(h->flags & FLIT_INFOF_ENDED))
			return FLIT_FE_FLAGS;
		if ((h->flags & FLIT_INFOF_NEXT) && (h->flags & FLIT_INFOF_ENDED))
			return FLIT_FE_FLAGS;
		if (h->flags & FLIT_INFOF_NUMS) {
			size_t nums = (size_t)h->count * 8;
			if (h->len - CTL_BODY - CTL_INFO_FIXED < nums)
				return FLIT_FE_COUNT;
			return check_names(p, h->len - (uint32_t)nums, CTL_BODY + CTL_INFO_FIXED,
					   h->count, false);
		}
		return check_names(p, h->len, CTL_BODY + CTL_INFO_FIXED,
				   h->count, false);
	case FLIT_FT_QUERY:
		if (h->len - CTL_BODY < CTL_QUERY_FIXED)
			return FLIT_FE_COUNT;
		if (flit_ld32(p + CTL_BODY + 4) != 0)
			return FLIT_FE_MSG_FLAGS;
		return check_names(p, h->len, CTL_BODY + CTL_QUERY_FIXED,
				   h->count, true);
	case FLIT_FT_JOIN:
		if (h->count != 0 || h->len != CTL_JOIN_LEN)
			return FLIT_FE_COUNT;
		if (flit_ld32(p + CTL_BODY + 4) != 0)
			return FLIT_FE_MSG_FLAGS;
		if ((h->flags & FLIT_JF_LEAVE) && (h->flags & FLIT_JF_LATE))
			return FLIT_FE_FLAGS;
		return FLIT_FE_OK;
	case FLIT_FT_LATE:
		if (h->count != 0 || h->len != CTL_LATE_LEN)
			return FLIT_FE_COUNT;
		if (flit_ld64(p + CTL_BODY) > h->seq || flit_ld64(p + CTL_BODY + 8) > h->seq)
			return FLIT_FE_COUNT;
		if (flit_ld32(p + CTL_BODY + 28) != 0)
			return FLIT_FE_MSG_FLAGS;
		return FLIT_FE_OK;
	}
	return FLIT_FE_TYPE; /* not reached */
}

/* ---- encoding ------------------------------------------------------------ */

static void put_hdr(uint8_t *p, uint8_t type, uint16_t flags, uint16_t count,
		    uint32_t len, uint32_t session, uint64_t seq)
{
	flit_frame_begin(p, type, flags, session, seq);
	flit_st16(p + 6, count);
	flit_st32(p + 8, len);
}

/* Bytes n name entries take, or 0 if one is out of range for the frame type
 * (query: idx 0, kind EXACT or PATTERN; INFO: kind EXACT). */
static size_t names_wire_len(const struct flit_ctl_name *names, unsigned n,
			     bool query)
{
	size_t sum = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct flit_ctl_name *e = &names[i];
		if (e->len == 0 || e->len > CTL_NAME_MAX || !e->name)
			return 0;
		if (query ? (e->idx != 0 || e->kind > FLIT_NAME_PATTERN)
			  : e->kind != FLIT_NAME_EXACT)
			return 0;
		if (!name_bytes_ok((const uint8_t *)e->name, e->len))
			return 0;
		sum += name_wire_len(e->len);
	}
	return sum;
}

static void put_names(uint8_t *p, const struct flit_ctl_name *names,
		      unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct flit_ctl_name *e = &names[i];
		size_t padded = flit_align8(e->len);

		flit_st32(p, e->idx);
		p[4] = e->kind;
		p[5] = 0;
		flit_st16(p + 6, e->len);
		memset(p + CTL_NAME_HDR + padded - 8, 0, 8); /* padding */
		memcpy(p + CTL_NAME_HDR, e->name, e->len);
		p += CTL_NAME_HDR + padded;
	}
}

/* Writes flags 0: a closing source sets FLIT_HBF_END at offset 4 itself. */
size_t flit_ctl_hb_encode(void *buf, size_t cap, uint32_t session,
			  uint64_t next, uint64_t trail)
{
	uint8_t *p = (uint8_t *)buf;

	if (trail > next || cap < CTL_HB_LEN)
		return 0;
	put_hdr(p, FLIT_FT_HB, 0, 0, CTL_HB_LEN, session, next);
	flit_st64(p + CTL_BODY, trail);
	return CTL_HB_LEN;
}

size_t flit_ctl_ranges_encode(void *buf, size_t cap, uint8_t type,
			      uint32_t session, uint64_t seq,
			      const struct flit_seq_range *r, unsigned n)
{
	uint8_t *p = (uint8_t *)buf;

	if ((type != FLIT_FT_NAK && type != FLIT_FT_NCF) || n == 0 ||
	    n > UINT16_MAX)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (!range_ok(r[i].first, r[i].n))
			return 0;
		if (type == FLIT_FT_NCF && r[i].status > FLIT_NCF_FUTURE)
			return 0;
	}
	size_t need = CTL_BODY + (size_t)n * CTL_RANGE_LEN;
	if (need > cap)
		return 0;
	put_hdr(p, type, 0, (uint16_t)n, (uint32_t)need, session, seq);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *q = p + CTL_BODY + (size_t)i * CTL_RANGE_LEN;
		flit_st64(q, r[i].first);
		flit_st32(q + 8, r[i].n);
		flit_st32(q + 12, type == FLIT_FT_NCF ? r[i].status : 0);
	}
	return need;
}

size_t flit_ctl_info_encode(void *buf, size_t cap, uint32_t session,
			    uint64_t next, const struct flit_ctl_info *info,
			    const struct flit_ctl_name *topics, unsigned n)
{
	return flit_ctl_info_encode_flags(buf, cap, 0, session, next, info, topics, n);
}

size_t flit_ctl_info_encode_flags(void *buf, size_t cap, uint16_t flags, uint32_t session,
				  uint64_t next, const struct flit_ctl_info *info,
				  const struct flit_ctl_name *topics, unsigned n)
{
	if (flags & FLIT_INFOF_NUMS)
		return 0;  /* flit_ctl_info_encode_final() */
	return flit_ctl_info_encode_final(buf, cap, flags, session, next, info, topics, n, NULL);
}

size_t flit_ctl_info_encode_final(void *buf, size_t cap, uint16_t flags, uint32_t session,
				  uint64_t next, const struct flit_ctl_info *info,
				  const struct flit_ctl_name *topics, unsigned n,
				  const uint64_t *final)
{
	uint8_t *p = (uint8_t *)buf;

	if (!info || !mode_ok(info->mode) || n > UINT16_MAX || (n && !topics) ||
	    (flags & ~known_flags(FLIT_FT_INFO)) || !(flags & FLIT_INFOF_NUMS) != !final ||
	    ((flags & FLIT_INFOF_FINAL) && !(flags & FLIT_INFOF_ENDED)) ||
	    ((flags & FLIT_INFOF_NEXT) && (flags & FLIT_INFOF_ENDED)))
		return 0;
	size_t names = names_wire_len(topics, n, false);
	if (n && !names)
		return 0;
	size_t nums = final ? (size_t)n * 8 : 0;
	size_t need = CTL_BODY + CTL_INFO_FIXED + names + nums;
	if (need > cap || need > FLIT_FRAME_LEN_MAX)
		return 0;
	put_hdr(p, FLIT_FT_INFO, flags, (uint16_t)n, (uint32_t)need, session, next);
	flit_st32(p + INFO_DOMAIN, info->domain);
	p[INFO_MODE] = info->mode;
	p[INFO_RSVD8] = 0;
	flit_st16(p + INFO_DATA_PORT, info->data_port);
	memcpy(p + INFO_DATA_ADDR, &info->data_addr, 4); /* network order */
	memcpy(p + INFO_CTL_ADDR, &info->ctl_addr, 4);
	flit_st16(p + INFO_CTL_PORT, info->ctl_port);
	flit_st16(p + INFO_RSVD16, 0);
	flit_st32(p + INFO_PID, info->pid);
	put_names(p + CTL_BODY + CTL_INFO_FIXED, topics, n);
	for (size_t i = 0; final && i < n; i++)
		flit_st64(p + CTL_BODY + CTL_INFO_FIXED + names + i * 8, final[i]);
	return need;
}

uint64_t flit_ctl_info_final(const void *frame, const struct flit_frame_hdr *h, unsigned i)
{
	const uint8_t *p = (const uint8_t *)frame;
	return flit_ld64(p + h->len - (size_t)(h->count - i) * 8);
}

size_t flit_ctl_query_encode(void *buf, size_t cap, uint32_t session,
			     uint32_t domain, const struct flit_ctl_name *names,
			     unsigned n)
{
	uint8_t *p = (uint8_t *)buf;

	if (n > UINT16_MAX || (n && !names))
		return 0;
	size_t nl = names_wire_len(names, n, true);
	if (n && !nl)
		return 0;
	size_t need = CTL_BODY + CTL_QUERY_FIXED + nl;
	if (need > cap || need > FLIT_FRAME_LEN_MAX)
		return 0;
	put_hdr(p, FLIT_FT_QUERY, 0, (uint16_t)n, (uint32_t)need, session, 0);
	flit_st32(p + CTL_BODY, domain);
	flit_st32(p + CTL_BODY + 4, 0);
	put_names(p + CTL_BODY + CTL_QUERY_FIXED, names, n);
	return need;
}

size_t flit_ctl_join_encode(void *buf, size_t cap, uint32_t session,
			    uint32_t domain, uint16_t flags)
{
	uint8_t *p = (uint8_t *)buf;

	if ((flags & ~(FLIT_JF_LEAVE | FLIT_JF_LATE)) ||
	    flags == (FLIT_JF_LEAVE | FLIT_JF_LATE) || cap < CTL_JOIN_LEN)
		return 0;
	put_hdr(p, FLIT_FT_JOIN, flags, 0, CTL_JOIN_LEN, session, 0);
	flit_st32(p + CTL_BODY, domain);
	flit_st32(p + CTL_BODY + 4, 0);
	return CTL_JOIN_LEN;
}

size_t flit_ctl_late_encode(void *buf, size_t cap, uint32_t session,
			    uint64_t next, const struct flit_ctl_late *late)
{
	uint8_t *p = (uint8_t *)buf;

	if (cap < CTL_LATE_LEN || late->trail > next || late->origin > next)
		return 0;
	put_hdr(p, FLIT_FT_LATE, 0, 0, CTL_LATE_LEN, session, next);
	flit_st64(p + CTL_BODY, late->trail);
	flit_st64(p + CTL_BODY + 8, late->origin);
	flit_st64(p + CTL_BODY + 16, late->age_ns);
	flit_st32(p + CTL_BODY + 24, late->late_join);
	flit_st32(p + CTL_BODY + 28, 0);
	return CTL_LATE_LEN;
}

/* ---- accessors ----------------------------------------------------------- */

void flit_ctl_late_get(const void *frame, struct flit_ctl_late *late)
{
	const uint8_t *p = frame;

	late->trail = flit_ld64(p + CTL_BODY);
	late->origin = flit_ld64(p + CTL_BODY + 8);
	late->age_ns = flit_ld64(p + CTL_BODY + 16);
	late->late_join = flit_ld32(p + CTL_BODY + 24);
}

uint64_t flit_ctl_hb_trail(const void *frame)
{
	return flit_ld64((const uint8_t *)frame + CTL_BODY);
}

void flit_ctl_range(const void *frame, unsigned i, struct flit_seq_range *r)
{
	const uint8_t *q = (const uint8_t *)frame + CTL_BODY +
			   (size_t)i * CTL_RANGE_LEN;

	r->first = flit_ld64(q);
	r->n = flit_ld32(q + 8);
	r->status = flit_ld32(q + 12);
}

void flit_ctl_info_get(const void *frame, struct flit_ctl_info *info)
{
	const uint8_t *p = (const uint8_t *)frame;

	info->domain = flit_ld32(p + INFO_DOMAIN);
	info->mode = p[INFO_MODE];
	info->data_port = flit_ld16(p + INFO_DATA_PORT);
	memcpy(&info->data_addr, p + INFO_DATA_ADDR, 4);
	memcpy(&info->ctl_addr, p + INFO_CTL_ADDR, 4);
	info->ctl_port = flit_ld16(p + INFO_CTL_PORT);
	info->pid = flit_ld32(p + INFO_PID);
}

uint32_t flit_ctl_domain(const void *frame)
{
	/* INFO, QUERY and JOIN all carry the domain id at body offset 0 */
	return flit_ld32((const uint8_t *)frame + CTL_BODY);
}

void flit_ctl_names_init(struct flit_ctl_name_iter *it, const void *frame,
			 const struct flit_frame_hdr *h)
{
	const uint8_t *p = (const uint8_t *)frame;

	switch (h->type) {
	case FLIT_FT_INFO:
		it->p = p + CTL_BODY + CTL_INFO_FIXED;
		it->left = h->count;
		break;
	case FLIT_FT_QUERY:
		it->p = p + CTL_BODY + CTL_QUERY_FIXED;
		it->left = h->count;
		break;
	default:
		it->p = p;
		it->left = 0;
		break;
	}
}

bool flit_ctl_names_next(struct flit_ctl_name_iter *it,
			 struct flit_ctl_name *out)
{
	if (!it->left)
		return false;
	const uint8_t *p = it->p;
	out->idx = flit_ld32(p);
	out->kind = p[4];
	out->len = flit_ld16(p + 6);
	out->name = (const char *)(p + CTL_NAME_HDR);
	it->p = p + name_wire_len(out->len);
	it->left--;
	return true;
}
