/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The counters file: a context's counters readable from outside the process
 * (flit-stat).  One file per context, <context.stats_dir>/<pid>-<n>, laid out
 * as docs/STATS.md says byte by byte: a header (magic, version, sizes, pid,
 * process start time, clock, context summary) and a fixed table of rows --
 * the context's totals, one row per open transport (its publishers' send
 * counters), one per publisher and one per subscriber.
 *
 * Writing.  Each row has its own seqlock word: odd while being written.  A
 * writer takes a row by a compare-and-swap from even to odd (so the poll
 * thread and a publisher's own thread never write one row at once: the
 * loser skips, the row is refreshed on the next tick) and releases it with
 * the next even value.  Counters in a row never go backwards: a writer
 * keeps the larger of the row's value and its own (two threads may hold
 * snapshots of different ages).  Nothing here takes a lock, makes a
 * syscall or allocates, except creating and removing rows and the file.
 *
 * When to write.  A tick (struct flit_stats_tick) counts calls: every
 * `period` calls it reads the clock (vDSO, no syscall) and adapts `period`
 * so that it reads the clock about four times per interval; a refresh is
 * due when context.stats_interval_ms has passed since the last one.  A hot
 * path pays one decrement and a predicted branch per call.
 *
 * Reading (flit_stats_read) uses pread() only: a truncated, foreign or
 * corrupt file gives -errno with a trail naming the file and the problem,
 * never a fault; a row being written is read again, a bounded number of
 * times.
 */
#ifndef FLIT_STATS_H
#define FLIT_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <flit/flit.h>

#include "config.h"

#define FLIT_STATS_MAGIC      "FLITSTAT"
#define FLIT_STATS_VERSION    1
#define FLIT_STATS_HDR_SIZE   1024
#define FLIT_STATS_ROW_SIZE   512
#define FLIT_STATS_NCOUNTERS  26

/* Counter slots of a row.  0..20 are struct flit_counters' fields, in its
 * order, 22 its field after them; which of them a row kind fills is in
 * docs/STATS.md. */
enum flit_stats_counter {
	FLIT_STATS_MSGS_SENT = 0,
	FLIT_STATS_BYTES_SENT,
	FLIT_STATS_FRAMES_SENT,
	FLIT_STATS_BACK_PRESSURED,
	FLIT_STATS_MSGS_RECEIVED,
	FLIT_STATS_BYTES_RECEIVED,
	FLIT_STATS_FRAMES_RECEIVED,
	FLIT_STATS_MALFORMED,
	FLIT_STATS_DUPLICATES,
	FLIT_STATS_MSGS_LOST,
	FLIT_STATS_LOSS_EVENTS,
	FLIT_STATS_READERS_EVICTED,
	FLIT_STATS_SOURCES_JOINED,
	FLIT_STATS_SOURCES_LEFT,
	FLIT_STATS_NAKS_SENT,
	FLIT_STATS_NAKS_RECEIVED,
	FLIT_STATS_RETRANSMISSIONS,
	FLIT_STATS_RETX_RECEIVED,
	FLIT_STATS_FOREIGN_DROPPED,
	FLIT_STATS_UNKNOWN_SESSION,
	FLIT_STATS_RATE_LIMITED,
	FLIT_STATS_SOURCES,       /* gauge: subscriber rows, sources delivering now */
	FLIT_STATS_MSGS_FILTERED, /* context row: flit_counters.msgs_filtered */
	FLIT_STATS_MSGS_FILTERED_EARLY, /* context row: ... msgs_filtered_early */
	FLIT_STATS_COUNTERS_USED, /* slots up to here have a name; the rest are 0 */
};

/* Row kinds (0: free). */
enum flit_stats_kind {
	FLIT_STATS_ROW_FREE = 0,
	FLIT_STATS_ROW_CONTEXT = 1,    /* the context's totals (flit_ctx_counters) */
	FLIT_STATS_ROW_TRANSPORT = 2,  /* send totals of one transport; name: its description */
	FLIT_STATS_ROW_PUBLISHER = 3,  /* name: topic */
	FLIT_STATS_ROW_SUBSCRIBER = 4, /* name: topic, or pattern (FLIT_STATS_RF_PATTERN) */
};

#define FLIT_STATS_RF_PATTERN  0x1u   /* subscriber: name is a pattern */

/* header flags */
#define FLIT_STATS_HF_CLOSING  0x1u   /* the context is closing: the file goes next */

/* The header, at offset 0 (all integers in the writer's byte order; the
 * endian word tells).  Fields up to `flags` are written once, before the
 * file gets its name; the three after it are updated one at a time. */
struct flit_stats_hdr {
	char magic[8];            /*   0 "FLITSTAT", no NUL */
	uint32_t version;         /*   8 FLIT_STATS_VERSION */
	uint32_t hdr_size;        /*  12 offset of row 0 */
	uint32_t row_size;        /*  16 */
	uint32_t row_cap;         /*  20 rows in the file */
	uint32_t ncounters;       /*  24 counter slots per row */
	uint32_t endian;          /*  28 0x01020304 */
	uint32_t pid;             /*  32 writer's pid (in its pid namespace) */
	uint32_t ctx_index;       /*  36 n of <pid>-<n> */
	uint64_t start_time;      /*  40 writer's start, clock ticks after boot (/proc/PID/stat field 22) */
	uint64_t pidns;           /*  48 inode of the writer's /proc/self/ns/pid */
	uint64_t created_mono_ns; /*  56 CLOCK_MONOTONIC at creation */
	uint64_t created_real_ns; /*  64 CLOCK_REALTIME at creation */
	uint32_t interval_ms;     /*  72 context.stats_interval_ms */
	uint32_t flags;           /*  76 FLIT_STATS_HF_* */
	uint64_t updated_ns;      /*  80 CLOCK_MONOTONIC of the last refresh */
	uint32_t rows_used;       /*  88 rows [0, rows_used) may be in use; only grows */
	uint32_t rows_dropped;    /*  92 objects left without a row: the table was full */
	uint64_t refreshes;       /*  96 context refreshes so far */
	uint8_t reserved[24];     /* 104 zero */
	char clock[16];           /* 128 "monotonic": the clock of every *_ns but created_real_ns */
	char comm[16];            /* 144 process name (/proc/self/comm) */
	char domain[64];          /* 160 context.domain */
	char transports[32];      /* 224 context.transports */
	char config[256];         /* 256 summary of the context's settings, "key=value ..." */
	char cmdline[512];        /* 512 the command line, arguments separated by blanks */
};

struct flit_stats_row {
	uint64_t seq;             /*   0 seqlock: odd while being written */
	uint32_t kind;            /*   8 enum flit_stats_kind */
	uint32_t flags;           /*  12 FLIT_STATS_RF_* */
	uint64_t updated_ns;      /*  16 CLOCK_MONOTONIC of the row's last write */
	uint64_t created_ns;      /*  24 CLOCK_MONOTONIC when the object got the row */
	char transport[16];       /*  32 "shm", "udp", "xdp"; "" in the context row */
	char name[256];           /*  48 topic, pattern, or a transport's description */
	uint64_t c[FLIT_STATS_NCOUNTERS]; /* 304 enum flit_stats_counter */
};

_Static_assert(sizeof(struct flit_stats_hdr) == FLIT_STATS_HDR_SIZE, "stats header layout");
_Static_assert(sizeof(struct flit_stats_row) == FLIT_STATS_ROW_SIZE, "stats row layout");

/* Name of counter slot i ("msgs_sent", ...), NULL past the named ones. */
const char *flit_stats_counter_name(unsigned i);
/* "context", "transport", "publisher", "subscriber", "free", "?" */
const char *flit_stats_kind_name(uint32_t kind);

/* ---- writer (the library) ------------------------------------------------ */

struct flit_stats; /* a context's counters file (or none: stats off) */

/* What a hot path touches (8 bytes: a publisher keeps it in the line a
 * send reads, beside its transport's state) ... */
struct flit_stats_tick {
	uint32_t countdown;  /* calls until the next clock check */
	uint32_t period;     /* calls between clock checks */
};

/* ... and what only a clock check reads. */
struct flit_stats_when {
	uint64_t checked_ns; /* last clock check */
	uint64_t written_ns; /* last refresh */
};

/* Call on every hot-path call; true when the clock must be looked at. */
static inline bool flit_stats_tick_hit(struct flit_stats_tick *t)
{
	return __builtin_expect(--t->countdown == 0, 0);
}

/* A publisher's place in the file (embedded in flit_pub). */
struct flit_stats_pub {
	struct flit_stats_when when; /* of its tick (in flit_pub's first line) */
	int row;             /* -1: none */
	unsigned transport;  /* index of its transport in the context */
	/* its counters as last added to the totals (under the context row's
	 * lock: the totals move by differences, from whichever thread writes) */
	uint64_t rep[21];
	bool written;        /* its row was written once: later, only changes */
};

/* A subscriber's counters (embedded in flit_sub; the poll thread's). */
struct flit_stats_sub {
	uint64_t msgs, bytes;     /* data delivered to it */
	uint64_t dups;            /* messages of its topics dropped as duplicates */
	uint64_t lost, loss_events;
	uint64_t bos, eos;
	int row;                  /* -1: none */
};

/* Create the context's counters file as cfg says (context.stats = off: a
 * handle without a file).  NULL + errno only when out of memory; a file
 * that cannot be made leaves the handle without one, and the reason is in
 * flit_stats_path()'s return (and logged as a warning). */
struct flit_stats *flit_stats_open(const struct flit_cfg_context *cfg);
/* Remove the file (only in the process that made it), free. */
void flit_stats_close(struct flit_stats *st);
/* The file's path into buf (truncated to len), its length; -ENOENT (stats
 * off) or the error that prevented the file, with the trail set. */
int flit_stats_path(const struct flit_stats *st, char *buf, size_t len);
/* Is there a file? */
bool flit_stats_on(const struct flit_stats *st);

/* Start a tick (period 1: the first call looks at the clock).  With no
 * file the tick looks only every 2^32 calls. */
void flit_stats_tick_init(const struct flit_stats *st, struct flit_stats_tick *t,
			  struct flit_stats_when *w);
/* After flit_stats_tick_hit(): read the clock, adapt the period; true (and
 * *now) when a refresh is due: every `every` intervals (>= 1). */
bool flit_stats_tick_due(const struct flit_stats *st, struct flit_stats_tick *t,
			 struct flit_stats_when *w, unsigned every, uint64_t *now);

/* Rows.  A row that does not fit (table full) is counted in the header's
 * rows_dropped and warned about once; the object works without it. */
void flit_stats_pub_add(struct flit_stats *st, struct flit_stats_pub *p,
			struct flit_stats_tick *tick, unsigned transport,
			const char *tname, const char *topic);
/* Write the publisher's row from its transport's counters.  Any thread
 * that may drive the publisher (or the poll thread). */
void flit_stats_pub_write(struct flit_stats *st, struct flit_stats_pub *p,
			  const struct flit_counters *c, uint64_t now);
/* Last counters of a closing publisher: kept in its transport's totals. */
void flit_stats_pub_remove(struct flit_stats *st, struct flit_stats_pub *p,
			   const struct flit_counters *last);
void flit_stats_sub_add(struct flit_stats *st, struct flit_stats_sub *s,
			const char *topic, bool pattern);
void flit_stats_sub_write(struct flit_stats *st, struct flit_stats_sub *s,
			  uint64_t now);
void flit_stats_sub_remove(struct flit_stats *st, struct flit_stats_sub *s);
/* Transport t's row (made on first use): its description; its counters
 * (the send counters of its publishers, closed ones included) move with
 * the publishers' writes. */
void flit_stats_transport_write(struct flit_stats *st, unsigned t,
				const char *tname, const char *desc, uint64_t now);
/* The context row: the receive side (the poll thread's counters, rx) plus
 * every publisher's send counters; and the header's refresh time.  Poll
 * thread only. */
void flit_stats_ctx_write(struct flit_stats *st, const struct flit_counters *rx,
			  uint64_t now);
/* flags |= FLIT_STATS_HF_CLOSING */
void flit_stats_closing(struct flit_stats *st);

/* to += c, every counter */
void flit_stats_counters_add(struct flit_counters *to, const struct flit_counters *c);

/* ---- reader (flit-stat, tests) ------------------------------------------- */

struct flit_stats_snap {
	char path[FLIT_PATH_MAX + 32];
	struct flit_stats_hdr hdr;   /* validated; strings NUL-terminated */
	struct flit_stats_row *rows; /* the rows in use, each a consistent copy */
	unsigned nrows;
	unsigned torn;               /* rows still being written after every retry */
};

/* How many times a row being written is read again before it counts as
 * torn (its writer may have died in the middle). */
#define FLIT_STATS_READ_RETRIES 1000

/* Read and validate the file.  0, or -errno with a trail "PATH: what is
 * wrong": -ENOENT and other open errors, -EPROTO not a counters file
 * (magic, byte order), -EPROTONOSUPPORT another version, -EBADMSG impossible
 * sizes or truncated.  snap->rows must be freed (flit_stats_snap_free). */
int flit_stats_read(const char *path, struct flit_stats_snap *snap);
void flit_stats_snap_free(struct flit_stats_snap *snap);

enum flit_stats_liveness {
	FLIT_STATS_LIVE = 0,      /* its writer holds it */
	FLIT_STATS_STALE = 1,     /* nobody holds it: the writer died */
};

/* Is the writer of the file alive?  The writer holds an open-file-
 * description lock on the file's first byte from creation to removal; the
 * kernel drops it when the process dies, whatever the pid namespace.  why
 * (may be NULL) gets the reason for a stale file: "pid N is gone", "pid N
 * is another process now (start time differs)", or "its writer died".
 * Returns enum flit_stats_liveness, or -errno. */
int flit_stats_liveness(const char *path, const struct flit_stats_hdr *h,
			char *why, size_t len);

/* Remove the counters files in dir whose writer died (and unfinished
 * creations); fn (may be NULL) is told each one, with why it was stale.
 * Returns how many, or -errno.  flit_stats_open() does this too, for files
 * of pids that no longer exist. */
int flit_stats_gc(const char *dir,
		  void (*fn)(void *arg, const char *path, const char *why), void *arg);

/* Start time of pid (clock ticks after boot, /proc/PID/stat field 22), or
 * -errno (-ENOENT: no such process). */
int64_t flit_stats_proc_start(int pid);

#endif /* FLIT_STATS_H */
