// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rdma transport's connection messages (rdma.h): the private data of
 * rdma_cm's connect request, accept and reject.
 */
#include <errno.h>
#include <string.h>

#include "core.h"
#include "ctl.h"
#include "rdma/rdma.h"

/* ---- wire: connection private data ------------------------------------------ */

uint64_t flit_rdma_topic_hash(const char *topic)
{
	return flit_name_hash64(topic);
}

static void wire_hdr(uint8_t *p, uint8_t byte3)
{
	flit_st16(p, FLIT_RDMA_MAGIC);
	p[2] = FLIT_RDMA_VERSION;
	p[3] = byte3;
}

void flit_rdma_req_encode(uint8_t out[FLIT_RDMA_REQ_LEN], const struct flit_rdma_req *r)
{
	memset(out, 0, FLIT_RDMA_REQ_LEN);
	wire_hdr(out, r->flags);
	flit_st32(out + 4, r->domain);
	flit_st64(out + 8, r->topic_hash);
	flit_st32(out + 16, r->depth);
	flit_st32(out + 20, r->buf_size);
	flit_st64(out + 24, r->ring_addr);
	flit_st32(out + 32, r->ring_rkey);
	flit_st32(out + 36, r->sub_age_ms);
	flit_st64(out + 40, r->rcv_id);
}

void flit_rdma_rep_encode(uint8_t out[FLIT_RDMA_REP_LEN], const struct flit_rdma_rep *r)
{
	memset(out, 0, FLIT_RDMA_REP_LEN);
	wire_hdr(out, r->mode);
	flit_st32(out + 4, r->session_id);
	flit_st64(out + 8, r->credit_addr);
	flit_st32(out + 16, r->credit_rkey);
	flit_st32(out + 20, r->frame_max);
	flit_st32(out + 24, r->depth);
	flit_st32(out + 28, r->late);
}

void flit_rdma_rej_encode(uint8_t out[FLIT_RDMA_REJ_LEN], const struct flit_rdma_rej_msg *r)
{
	memset(out, 0, FLIT_RDMA_REJ_LEN);
	wire_hdr(out, r->reason);
	flit_st32(out + 4, r->value);
}

static int wire_check(const uint8_t *p, size_t len, size_t need, unsigned *version)
{
	if (version)
		*version = 0;
	if (len < 4 || flit_ld16(p) != FLIT_RDMA_MAGIC)
		return -EPROTO;
	if (version)
		*version = p[2];
	if (p[2] != FLIT_RDMA_VERSION || len < need)
		return -EPROTO;
	return 0;
}

int flit_rdma_req_decode(const void *buf, size_t len, struct flit_rdma_req *r,
			 unsigned *version)
{
	const uint8_t *p = buf;
	int err = wire_check(p, len, FLIT_RDMA_REQ_LEN, version);

	if (err)
		return err;
	r->flags = p[3];
	r->domain = flit_ld32(p + 4);
	r->topic_hash = flit_ld64(p + 8);
	r->depth = flit_ld32(p + 16);
	r->buf_size = flit_ld32(p + 20);
	r->ring_addr = flit_ld64(p + 24);
	r->ring_rkey = flit_ld32(p + 32);
	r->sub_age_ms = flit_ld32(p + 36);
	r->rcv_id = flit_ld64(p + 40);
	if ((r->flags & ~(FLIT_RDMA_REQF_RING | FLIT_RDMA_REQF_LATE | FLIT_RDMA_REQF_ANEW)) || r->depth < 4 ||
	    r->depth > 65536 || r->buf_size < 64 || (r->buf_size & 63))
		return -EINVAL;
	return 0;
}

int flit_rdma_rep_decode(const void *buf, size_t len, struct flit_rdma_rep *r)
{
	const uint8_t *p = buf;
	int err = wire_check(p, len, FLIT_RDMA_REP_LEN, NULL);

	if (err)
		return err;
	r->mode = p[3];
	r->session_id = flit_ld32(p + 4);
	r->credit_addr = flit_ld64(p + 8);
	r->credit_rkey = flit_ld32(p + 16);
	r->frame_max = flit_ld32(p + 20);
	r->depth = flit_ld32(p + 24);
	r->late = flit_ld32(p + 28);
	if ((r->mode != FLIT_RDMA_WIRE_SEND && r->mode != FLIT_RDMA_WIRE_WRITE) ||
	    r->frame_max < FLIT_FRAME_HDR_LEN)
		return -EINVAL;
	return 0;
}

int flit_rdma_rej_decode(const void *buf, size_t len, struct flit_rdma_rej_msg *r)
{
	const uint8_t *p = buf;
	int err = wire_check(p, len, FLIT_RDMA_REJ_LEN, NULL);

	if (err)
		return err;
	r->reason = p[3];
	r->value = flit_ld32(p + 4);
	return 0;
}

const char *flit_rdma_rej_str(unsigned reason)
{
	switch (reason) {
	case FLIT_RDMA_REJ_NO_TOPIC: return "no source of that topic listens there";
	case FLIT_RDMA_REJ_VERSION: return "protocol version mismatch";
	case FLIT_RDMA_REJ_DOMAIN: return "the source is in another domain (context.domain)";
	case FLIT_RDMA_REJ_FRAME: return "the source's frames are larger than our receive buffers";
	case FLIT_RDMA_REJ_RESOURCES: return "the source could not set the connection up";
	case FLIT_RDMA_REJ_BAD: return "the source refused our request as malformed";
	case FLIT_RDMA_REJ_SESSION: return "connected to that topic's session already";
	default: return "refused";
	}
}
