// SPDX-License-Identifier: BSD-2-Clause
/* The verifier's reason from a program load log.  Contract in verifier_log.h. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xdp/verifier_log.h"

/* Markers around the log in libbpf's warning: 1.x, then 0.x. */
static const char *const begin_marks[] = { "-- BEGIN PROG LOAD LOG --", "-- BEGIN DUMP LOG ---" };
static const char *const end_marks[] = { "-- END PROG LOAD LOG --", "-- END LOG --" };

#define MAX_REASONS 3
/* shares of FLIT_VLOG_REASON_MAX: the reason lines together, and the
 * instruction, file:line and source line of where */
#define REASON_PART 180
#define INSN_PART 48
#define FILE_PART 40
#define SOURCE_PART 80

struct span {
	const char *p;
	size_t n;
};

static bool starts(const struct span *l, const char *s)
{
	size_t k = strlen(s);

	return l->n >= k && !memcmp(l->p, s, k);
}

static bool has(const struct span *l, const char *s)
{
	size_t k = strlen(s);

	for (size_t i = 0; k <= l->n && i <= l->n - k; i++)
		if (!memcmp(l->p + i, s, k))
			return true;
	return false;
}

/* Digits then ": " (an instruction index): length of that prefix, or 0. */
static size_t insn_prefix(const struct span *l)
{
	size_t i = 0;

	while (i < l->n && isdigit((unsigned char)l->p[i]))
		i++;
	if (i == 0 || i + 2 > l->n || l->p[i] != ':' || l->p[i + 1] != ' ')
		return 0;
	return i + 2;
}

/* "151: (0f) r3 += r1", or libbpf's rewrite of a poisoned CO-RE
 * relocation, "195: <invalid CO-RE relocation>" */
static bool is_insn(const struct span *l)
{
	size_t k = insn_prefix(l);

	return k && k < l->n && (l->p[k] == '(' || l->p[k] == '<');
}

/* Lines that say nothing about why: the summary, and the trace around the
 * instructions (register states, branches taken, log_level 2 detail). */
static bool is_noise(const struct span *l)
{
	size_t k;

	if (l->n == 0 || isspace((unsigned char)l->p[0]))
		return true;
	if ((starts(l, "processed ") && has(l, " insns")) ||
	    starts(l, "verification time ") || starts(l, "stack depth ") ||
	    starts(l, "-- END "))
		return true;
	/* "0: R1=ctx() R10=fp0", "from 9 to 15: R0_w=...", "func#0 @0",
	 * "Func#1 ('f') is global and assumed valid.", "Validating f() func#1..." */
	k = insn_prefix(l);
	if (k && k < l->n && l->p[k] == 'R')
		return true;
	if (starts(l, "from ") && has(l, " to ") && has(l, ": "))
		return true;
	if (starts(l, "func#") || starts(l, "Validating ") ||
	    (starts(l, "Func#") && (has(l, " is global") || has(l, " is safe for"))))
		return true;
	if (starts(l, "frame")) {       /* "frame1: R1=...", not "frame pointer is read only" */
		size_t i = 5;

		while (i < l->n && isdigit((unsigned char)l->p[i]))
			i++;
		if (i > 5 && i < l->n && l->p[i] == ':')
			return true;
	}
	return starts(l, "last_idx ") || starts(l, "regs=") || starts(l, "mark_precise:") ||
	       starts(l, "propagating ") || starts(l, "parent didn't") ||
	       starts(l, "parent already") || starts(l, "caller:") || starts(l, "callee:") ||
	       starts(l, "Live regs") || starts(l, "returning from callee:") ||
	       starts(l, "to caller at ");
}

/* Append s (n bytes) to out, whitespace runs collapsed, at most max
 * characters of it ("..." when cut).  *o is the length so far. */
static void put(char *out, size_t len, size_t *o, const char *s, size_t n, size_t max)
{
	size_t w = 0;
	bool sp = false, cut = false;

	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	while (n && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (isspace(c)) {
			sp = true;
			continue;
		}
		if (w + sp + 1 > max || *o + sp + 1 + 3 >= len) {
			cut = true;
			break;
		}
		if (sp) {
			out[(*o)++] = ' ';
			w++;
			sp = false;
		}
		out[(*o)++] = isprint(c) ? (char)c : '?';
		w++;
	}
	if (cut)
		for (int i = 0; i < 3 && *o + 1 < len; i++)
			out[(*o)++] = '.';
	out[*o] = '\0';
}

static void puts_(char *out, size_t len, size_t *o, const char *s)
{
	size_t n = strlen(s);

	if (*o + n >= len)
		n = *o + 1 < len ? len - *o - 1 : 0;
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = '\0';
}

/* "insn N 'INSN', FILE:LINE 'SOURCE'" */
static void put_where(char *out, size_t len, size_t *o, const struct span *insn,
		      const struct span *src)
{
	size_t k = insn_prefix(insn);
	const char *text = insn->p + k, *end = insn->p + insn->n, *semi, *at;
	char num[24];

	/* "(0f) r3 += r1      ; R1_w=..." -> "r3 += r1" */
	if (*text == '(') {
		const char *close = memchr(text, ')', (size_t)(end - text));
		if (close)
			text = close + 1;
	}
	semi = memchr(text, ';', (size_t)(end - text));
	if (semi)
		end = semi;
	snprintf(num, sizeof(num), "%.*s", (int)(k - 2), insn->p);
	puts_(out, len, o, "insn ");
	puts_(out, len, o, num);
	puts_(out, len, o, " '");
	put(out, len, o, text, (size_t)(end - text), INSN_PART);
	puts_(out, len, o, "'");
	if (src->p) {
		/* "; if (x) @ flit_xdp.bpf.c:254" */
		const char *s = src->p + 1, *se = src->p + src->n;

		at = NULL;
		for (const char *q = se; q - s >= 3; q--)
			if (q[-3] == ' ' && q[-2] == '@' && q[-1] == ' ') {
				at = q - 3;
				break;
			}
		if (at && memchr(at + 3, ':', (size_t)(se - at - 3))) {
			puts_(out, len, o, ", ");
			put(out, len, o, at + 3, (size_t)(se - at - 3), FILE_PART);
			se = at;
		} else {
			puts_(out, len, o, ", source");
		}
		puts_(out, len, o, " '");
		put(out, len, o, s, (size_t)(se - s), SOURCE_PART);
		puts_(out, len, o, "'");
	}
}

int flit_vlog_reason(const char *log, char *out, size_t len)
{
	const char *p = log ? log : "", *end;
	struct span insn = { 0 }, src = { 0 }, insn_src = { 0 }, reasons[MAX_REASONS];
	int nreasons = 0;
	bool cut = false, last_partial = false;
	size_t o = 0;

	if (!out || !len)
		return 0;
	if (len > FLIT_VLOG_REASON_MAX + 1)
		len = FLIT_VLOG_REASON_MAX + 1;
	out[0] = '\0';
	/* the log between the markers, when they are there */
	end = p + strlen(p);
	for (size_t i = 0; i < sizeof(begin_marks) / sizeof(begin_marks[0]); i++) {
		const char *b = strstr(p, begin_marks[i]), *e;

		if (!b)
			continue;
		b = strchr(b, '\n');
		p = b ? b + 1 : end;
		e = strstr(p, end_marks[i]);
		if (e)
			end = e;
		else
			cut = true;
		break;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct span l = { p, nl ? (size_t)(nl - p) : (size_t)(end - p) };

		if (l.n && l.p[l.n - 1] == '\r')
			l.n--;
		/* libbpf 0.x: the log's first line and the end marker's line
		 * come after libbpf's "libbpf: " print prefix */
		if (starts(&l, "libbpf: ")) {
			l.p += 8;
			l.n -= 8;
		}
		p = nl ? nl + 1 : end;
		last_partial = !nl;
		if (is_insn(&l)) {
			insn = l;
			insn_src = src;
			nreasons = 0;   /* what came before was not the end */
		} else if (l.n && l.p[0] == ';') {
			src = l;
		} else if (!is_noise(&l) && nreasons < MAX_REASONS) {
			reasons[nreasons++] = l;
		}
	}
	if (!nreasons) {
		if (cut && insn.p) {
			puts_(out, len, &o, "log cut off before the reason, after ");
			put_where(out, len, &o, &insn, &insn_src);
		}
		return 0;
	}
	for (int i = 0; i < nreasons; i++) {
		if (i && o + 2 + 8 > REASON_PART)
			break;
		if (i)
			puts_(out, len, &o, "; ");
		put(out, len, &o, reasons[i].p, reasons[i].n, REASON_PART - o);
		if (cut && last_partial && reasons[i].p + reasons[i].n == end)
			puts_(out, len, &o, "...");
	}
	if (insn.p) {
		puts_(out, len, &o, " (");
		put_where(out, len, &o, &insn, &insn_src);
		puts_(out, len, &o, ")");
	}
	if (cut)
		puts_(out, len, &o, " [log cut off]");
	return 1;
}

/* ---- joining a log printed in several warnings ------------------------------- */

static bool has_mark(const char *msg, const char *const *marks)
{
	return strstr(msg, marks[0]) || strstr(msg, marks[1]);
}

static void drop(struct flit_vlog *v)
{
	free(v->buf);
	v->buf = NULL;
	v->len = 0;
}

static void add(struct flit_vlog *v, const char *msg)
{
	size_t n = strlen(msg);
	bool nl = n && msg[n - 1] == '\n';
	char *b = realloc(v->buf, v->len + n + 2);

	if (!b)
		return;
	v->buf = b;
	memcpy(v->buf + v->len, msg, n);
	v->len += n;
	if (!nl)
		v->buf[v->len++] = '\n';
	v->buf[v->len] = '\0';
	if (v->len > FLIT_VLOG_KEEP) {
		/* the begin marker's line, then the tail */
		size_t head = strcspn(v->buf, "\n") + 1, tail = FLIT_VLOG_KEEP / 2;

		memmove(v->buf + head, v->buf + v->len - tail, tail + 1);
		v->len = head + tail;
	}
}

void flit_vlog_flush(struct flit_vlog *v)
{
	if (v->buf) {
		flit_vlog_reason(v->buf, v->reason, sizeof(v->reason));
		drop(v);
	}
}

bool flit_vlog_feed(struct flit_vlog *v, const char *msg)
{
	bool begins = has_mark(msg, begin_marks), ends = has_mark(msg, end_marks);

	if (begins) {
		drop(v);
		v->reason[0] = '\0';
		if (ends) {     /* libbpf 1.x: all of it in one warning */
			flit_vlog_reason(msg, v->reason, sizeof(v->reason));
			return true;
		}
	} else if (!v->buf) {
		return false;
	}
	add(v, msg);
	if (ends)
		flit_vlog_flush(v);
	return true;
}

void flit_vlog_reset(struct flit_vlog *v)
{
	drop(v);
	v->reason[0] = '\0';
}
