/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The rdma transport's connection messages: the private data of rdma_cm's
 * connect request, accept and reject (docs/PROTOCOL.md, "RDMA connections").
 * Frames on a connection are the codec's frames (DATA, and the control
 * frames INFO and HB); credits go back as an RDMA WRITE of a counter.
 * All integers little-endian.
 */
#ifndef FLIT_RDMA_H
#define FLIT_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLIT_RDMA_MAGIC   0x5246u /* bytes 'F' 'R' */
#define FLIT_RDMA_VERSION 3u /* 2: late join (REQF_LATE, sub_age_ms, REP late);
				* 3: sessions of several topics (INFO pages and
				* ENDED on the connection, FLIT_FF_TSEQ) */

/* rdma_cm carries at most 56 bytes of private data in a connect request
 * (IB CM REQ: 92 bytes, 36 of them rdma_cm's own header), 196 in an accept
 * and 148 in a reject: every message below fits with room to spare. */
#define FLIT_RDMA_REQ_LEN 48u
#define FLIT_RDMA_REP_LEN 32u
#define FLIT_RDMA_REJ_LEN 16u

/* REQ flags */
#define FLIT_RDMA_REQF_RING 0x01u /* ring_addr/ring_rkey name the receive buffers */
#define FLIT_RDMA_REQF_LATE 0x02u /* the receiver asks for late join */
#define FLIT_RDMA_REQF_ANEW 0x04u /* the receiving context has no connection to the
				   * topic's session: the source drops any it counts */

/* data path of a connection (REP mode) */
enum flit_rdma_wire_mode {
	FLIT_RDMA_WIRE_SEND = 1,  /* SEND into the receiver's posted buffers */
	FLIT_RDMA_WIRE_WRITE = 2, /* RDMA WRITE with immediate into buffer ring slot */
};

/* why a source refused a connection (REJ reason) */
enum flit_rdma_rej {
	FLIT_RDMA_REJ_NO_TOPIC = 1,  /* no source of that topic listens there */
	FLIT_RDMA_REJ_VERSION = 2,   /* unknown magic or version (value: ours) */
	FLIT_RDMA_REJ_DOMAIN = 3,    /* another domain (value: the source's domain id) */
	FLIT_RDMA_REJ_FRAME = 4,     /* receive buffers too small (value: frame_max) */
	FLIT_RDMA_REJ_RESOURCES = 5, /* the source could not set up (value: errno) */
	FLIT_RDMA_REJ_BAD = 6,       /* malformed request (depth, sizes) */
	FLIT_RDMA_REJ_SESSION = 7,   /* that receiving context is connected to the
				      * topic's session already (value: the session) */
};

/* Receiver -> source: rdma_connect() private data. */
struct flit_rdma_req {
	uint8_t flags;        /* FLIT_RDMA_REQF_* */
	uint32_t domain;      /* flit_domain_id() of the receiver's domain */
	uint64_t topic_hash;  /* flit_rdma_topic_hash() of the topic wanted */
	uint32_t depth;       /* receive buffers posted (= the credits) */
	uint32_t buf_size;    /* bytes per buffer (multiple of 64) */
	uint64_t ring_addr;   /* the buffers, back to back (REQF_RING) */
	uint32_t ring_rkey;
	uint32_t sub_age_ms;  /* age of the receiver's oldest subscriber of the topic */
	uint64_t rcv_id;      /* the receiving context (random): one connection to a
			       * session for all its topics */
};

/* Source -> receiver: rdma_accept() private data. */
struct flit_rdma_rep {
	uint8_t mode;         /* enum flit_rdma_wire_mode */
	uint32_t session_id;
	uint64_t credit_addr; /* where the receiver RDMA-WRITEs its counter */
	uint32_t credit_rkey;
	uint32_t frame_max;   /* the source's largest frame */
	uint32_t depth;       /* the receiver's depth, echoed */
	uint32_t late;        /* messages retained for late join before the live
			       * stream, from INFO's seq on (0: none) */
};

/* Source -> receiver: rdma_reject() private data. */
struct flit_rdma_rej_msg {
	uint8_t reason;       /* enum flit_rdma_rej */
	uint32_t value;
};

/* FNV-1a 64 of a topic name's bytes. */
uint64_t flit_rdma_topic_hash(const char *topic);

void flit_rdma_req_encode(uint8_t out[FLIT_RDMA_REQ_LEN], const struct flit_rdma_req *r);
void flit_rdma_rep_encode(uint8_t out[FLIT_RDMA_REP_LEN], const struct flit_rdma_rep *r);
void flit_rdma_rej_encode(uint8_t out[FLIT_RDMA_REJ_LEN], const struct flit_rdma_rej_msg *r);
/* Decoders: 0, or -EPROTO (too short, wrong magic or version: `*version`
 * gets the peer's version byte when the magic matched, else 0), or -EINVAL
 * (a field out of range: REQ depth 0 or buf_size not a multiple of 64,
 * unknown flags; REP unknown mode). */
int flit_rdma_req_decode(const void *buf, size_t len, struct flit_rdma_req *r,
			 unsigned *version);
int flit_rdma_rep_decode(const void *buf, size_t len, struct flit_rdma_rep *r);
int flit_rdma_rej_decode(const void *buf, size_t len, struct flit_rdma_rej_msg *r);
/* A reject reason in words, for messages. */
const char *flit_rdma_rej_str(unsigned reason);

#endif /* FLIT_RDMA_H */
