// SPDX-License-Identifier: BSD-2-Clause
/*
 * xdp: the program's topic filter for sessions this context receives.
 *
 * A shared session carries topics nobody here wants.  Once the session has
 * started, it is "parted": the program drops its DATA frames that hold no
 * wanted topic (before the copy into the UMEM) and writes each drop into
 * its filtered ring; dg_part_reports() hands them to the reliability layer
 * as skipped (userspace/rel.h flit_rel_rx_skip()), so the dropped numbers
 * are neither NAKed nor lost.  A frame with any wanted message still comes
 * whole, and the core drops the others (msgs_filtered).
 *
 * What the program steers up: indexes at or above the session's bound
 * (xnamed: the highest index named here + 1), and below it those in its
 * topics table: the wanted ones, and the ones not named here (never named,
 * or whose topic ended: a new topic may take the index, and its page may be
 * lost).  A topic is put in the table before the bound passes it, so none
 * of its messages is dropped on the way.
 *
 * Each parting has its generation, which the program copies into the
 * session's records: a record left in the ring by an earlier parting of the
 * same session (another binding, or another process) is not taken for this
 * one's.  Before a session is unparted, the ring is read: its last drops
 * are told, not NAKed.
 *
 * The program's tables are the interface's (one context owns them); a
 * session they cannot take is left to user space (part_failed).
 */
#include "dgram/session.h"
#include "xdp/xdp_path.h"

/* The program steers index i of s (wanted, or not named here). */
static bool steer_of(const struct rsess *s, uint32_t i)
{
	int at = i < s->npos ? (int)s->pos[i] - 1 : -1;
	return at < 0 || flit_ctx_wants(s->tp->ctx, s->tname[at]);
}

static void part_fail(struct rsess *s, const char *what)
{
	flit_debug("xdp: session %08x left to user space (%s): %s", s->id, what,
		   flit_errmsg());
	dg_part_end(s);
	/* what a parting that failed half way wrote */
	flit_xdp_path_unpart(s->tp->xp, s->id);
	s->part_failed = s->part_eval = true;
}

/* Put indexes [from, to) that the program must steer into its table. */
static int steer_range(struct rsess *s, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++)
		if (steer_of(s, i)) {
			int err = flit_xdp_path_part_topic(s->tp->xp, s->id, i, true);
			if (err)
				return err;
		}
	return 0;
}

/* Part s if it has started (its numbers are placed) and carries a topic
 * nobody here wants; decided once for the topics named so far (a topic
 * named later that nobody wants decides again: dg_part_topic()). */
void dg_part_sync(struct rsess *s)
{
	struct flit_tp *tp = s->tp;
	bool unwanted = false;

	if (s->parted || s->part_failed || !tp->xp || !s->core || s->lj_wait ||
	    !flit_rel_rx_started(s->rel))
		return;
	s->part_eval = true;
	s->xtop = 0;
	for (unsigned i = 0; i < s->ntopics; i++) {
		unwanted |= !flit_ctx_wants(tp->ctx, s->tname[i]);
		if (s->tidx[i] + 1 > s->xtop)
			s->xtop = s->tidx[i] + 1;
	}
	if (!unwanted)
		return;
	if (steer_range(s, 0, s->xtop)) {
		part_fail(s, "a topic");
		return;
	}
	s->xnamed = s->xtop;
	s->xgen = ++tp->part_gen ? tp->part_gen : ++tp->part_gen;
	if (flit_xdp_path_part(tp->xp, s->id, s->xnamed, s->xgen)) {
		part_fail(s, "the session");
		return;
	}
	s->parted = true;
	tp->nparted++;
	flit_debug("xdp: session %08x parted: topics below %u known", s->id, s->xnamed);
}

/* Topic idx of s was named (added) or ended (!added). */
void dg_part_topic(struct rsess *s, uint32_t idx, bool added)
{
	if (!s->parted) {
		if (added && !steer_of(s, idx))
			dg_part_sync(s);  /* perhaps the first topic nobody wants */
		return;
	}
	if (added && idx + 1 > s->xtop)
		s->xtop = idx + 1;
	/* above the bound: dg_part_flush() puts it in before raising it */
	if (idx >= s->xnamed)
		return;
	/* ended: steered (a new topic may take the index) */
	if (flit_xdp_path_part_topic(s->tp->xp, s->id, idx, !added || steer_of(s, idx)))
		part_fail(s, "a topic");
}

/* After a page: the program learns the indexes named since. */
void dg_part_flush(struct rsess *s)
{
	if (!s->parted || s->xtop <= s->xnamed)
		return;
	if (steer_range(s, s->xnamed, s->xtop)) {
		part_fail(s, "a topic");
		return;
	}
	s->xnamed = s->xtop;
	if (flit_xdp_path_part(s->tp->xp, s->id, s->xnamed, s->xgen))
		part_fail(s, "the session");
}

void dg_part_end(struct rsess *s)
{
	struct flit_tp *tp = s->tp;

	if (!s->parted)
		return;
	/* its last drops told first */
	dg_part_reports(tp, mono());
	flit_xdp_path_unpart(tp->xp, s->id);
	s->parted = false;
	tp->nparted--;
}

static void on_report(void *arg, uint32_t session, uint32_t gen, uint64_t seq, uint32_t count)
{
	struct flit_tp *tp = arg;
	struct rsess *s = dg_sess_find(tp, session);

	/* another parting's (an earlier binding, another process) */
	if (!s || !s->parted || gen != s->xgen || !s->core || !count)
		return;
	/* the source is busy: the drop shows it alive as a frame would */
	s->last_heard = tp->part_now;
	int n = flit_rel_rx_skip(s->rel, seq, count, tp->part_now);
	if (n > 0)
		tp->part_ev += n;
	if (s->npend_end)
		dg_sess_pending_ends(s);
	uint64_t dl = flit_rel_rx_deadline(s->rel);
	if (dl < tp->next_house)
		tp->next_house = dl;
}

int dg_part_reports(struct flit_tp *tp, uint64_t now)
{
	/* not from inside a record's handling (an EOS it brings may unpart:
	 * the records after it are read by the call under way) */
	if (tp->in_reports)
		return 0;
	/* nothing parted: what is there is stale (another parting's gen); a
	 * session parted later reads it then, and the receive path pays
	 * nothing for the ring meanwhile */
	if (!tp->nparted)
		return 0;
	tp->in_reports = true;
	tp->part_ev = 0;
	tp->part_now = now;
	int n = flit_xdp_path_reports(tp->xp, on_report, tp);
	tp->in_reports = false;
	if (n < 0)
		flit_debug("xdp: %s", flit_errmsg());
	return tp->part_ev;
}
