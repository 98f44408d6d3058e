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
 * The program knows the topic indexes below the session's xnamed (every one
 * of them has been named here); a message of a higher index is steered up,
 * since it may be a topic a subscriber wants that its INFO page has not
 * named yet.  A wanted topic is put in the program's table before xnamed
 * passes it, so none of its messages is dropped on the way.
 *
 * The program's tables are the interface's (one context owns them); a
 * session they cannot take is left to user space (part_failed).
 */
#include "dgram/session.h"
#include "xdp/xdp_path.h"

/* Some topic named here is nobody's. */
static bool any_unwanted(const struct rsess *s)
{
	for (unsigned i = 0; i < s->ntopics; i++)
		if (!flit_ctx_wants(s->tp->ctx, s->tname[i]))
			return true;
	return false;
}

static void part_fail(struct rsess *s, const char *what)
{
	flit_debug("xdp: session %08x left to user space (%s): %s", s->id, what,
		   flit_errmsg());
	dg_part_end(s);
	s->part_failed = s->part_eval = true;
}

/* How far the session's indexes are all named. */
static uint32_t named_upto(const struct rsess *s)
{
	uint32_t n = s->xnamed;

	while (n < s->npos && s->pos[n])
		n++;
	return n;
}

/* Part s if it has started (its numbers are placed) and carries a topic
 * nobody here wants; decided once for the topics named so far (a topic
 * named later that nobody wants decides again: dg_part_topic()). */
void dg_part_sync(struct rsess *s)
{
	struct flit_tp *tp = s->tp;

	if (s->parted || s->part_failed || !tp->xp || !s->core || s->lj_wait ||
	    !flit_rel_rx_started(s->rel))
		return;
	s->part_eval = true;
	if (!any_unwanted(s))
		return;
	/* wanted topics first, then the session (and named): nothing wanted
	 * is dropped meanwhile */
	for (unsigned i = 0; i < s->ntopics; i++)
		if (flit_ctx_wants(tp->ctx, s->tname[i]) &&
		    flit_xdp_path_part_topic(tp->xp, s->id, s->tidx[i], true)) {
			part_fail(s, "a wanted topic");
			return;
		}
	s->xnamed = named_upto(s);
	if (flit_xdp_path_part(tp->xp, s->id, s->xnamed)) {
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
	struct flit_tp *tp = s->tp;

	int at = idx < s->npos ? (int)s->pos[idx] - 1 : -1;
	bool want = added && at >= 0 && flit_ctx_wants(tp->ctx, s->tname[at]);
	if (!s->parted) {
		if (added && !want)
			dg_part_sync(s);  /* perhaps the first topic nobody wants */
		return;
	}
	if (flit_xdp_path_part_topic(tp->xp, s->id, idx, want))
		part_fail(s, "a topic");
}

/* After a page: the program learns the indexes named since. */
void dg_part_flush(struct rsess *s)
{
	if (!s->parted)
		return;
	uint32_t n = named_upto(s);
	if (n == s->xnamed)
		return;
	s->xnamed = n;
	if (flit_xdp_path_part(s->tp->xp, s->id, n))
		part_fail(s, "the session");
}

void dg_part_end(struct rsess *s)
{
	if (!s->parted)
		return;
	flit_xdp_path_unfilter(s->tp->xp, s->id);
	s->parted = false;
	s->tp->nparted--;
}

static struct rsess *find(struct flit_tp *tp, uint32_t id)
{
	if (tp->last && tp->last->id == id)
		return tp->last;
	for (struct rsess *s = tp->sess; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static void on_report(void *arg, uint32_t session, uint64_t seq, uint32_t count)
{
	struct flit_tp *tp = arg;
	struct rsess *s = find(tp, session);

	/* a session parted no longer (unbound, subscriptions changed): its
	 * frames come up again, and so do repairs of these */
	if (!s || !s->parted || !s->core || !count)
		return;
	int n = flit_rel_rx_skip(s->rel, seq, count, tp->part_now);
	if (n > 0)
		tp->part_ev += n;
	uint64_t dl = flit_rel_rx_deadline(s->rel);
	if (dl < tp->next_house)
		tp->next_house = dl;
}

int dg_part_reports(struct flit_tp *tp, uint64_t now)
{
	if (!tp->nparted)
		return 0;
	tp->part_ev = 0;
	tp->part_now = now;
	int n = flit_xdp_path_reports(tp->xp, on_report, tp);
	if (n < 0)
		flit_debug("xdp: %s", flit_errmsg());
	return tp->part_ev;
}
