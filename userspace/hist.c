// SPDX-License-Identifier: BSD-2-Clause
/* Log-linear histogram.  See include/flit/hist.h for the precision contract.
 *
 * Bucket index of v, with p precision bits: let e be the top bit of
 * (v | 2^p), so e >= p, and s = e - p; the index is (s << p) + (v >> s).
 * For v < 2^(p+1) that is v itself (s = 0: one bucket per value); above,
 * each power of two [2^e, 2^(e+1)) gets the 2^p indices
 * [(s+1) << p, (s+2) << p), each covering 2^s values.  The index grows with
 * v, so the buckets of 0 .. highest are 0 .. idx(highest). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <flit/hist.h>

#include "error.h"

typedef unsigned __int128 u128;

struct flit_hist {
	unsigned p;
	uint64_t highest;
	size_t top;             /* bucket of `highest`: the last one */
	uint64_t n, overflow, min, max;
	u128 sum, sumsq;        /* exact while sums_lost is false */
	bool sums_lost;
	uint64_t counts[];      /* top + 1 */
};

static inline size_t bucket_of(unsigned p, uint64_t v)
{
	unsigned s = (unsigned)(63 - __builtin_clzll(v | (1ull << p))) - p;

	return ((size_t)s << p) + (size_t)(v >> s);
}

static void bucket_range(unsigned p, size_t i, uint64_t *lo, uint64_t *hi)
{
	if (i < (2ull << p)) {
		*lo = *hi = i;
		return;
	}
	unsigned s = (unsigned)(i >> p) - 1;
	uint64_t m = (uint64_t)i - ((uint64_t)s << p);

	*lo = m << s;
	*hi = *lo + ((1ull << s) - 1);
}

flit_hist *flit_hist_new(unsigned precision_bits, uint64_t highest)
{
	unsigned p = precision_bits;

	if (p < 1 || p > 16)
		return flit_err_null(EINVAL, "histogram: precision of %u bits (1 ... 16)", p);
	if (highest < (1ull << p))
		return flit_err_null(EINVAL,
				     "histogram: highest value %llu below 2^%u (the exact range of that precision)",
				     (unsigned long long)highest, p);
	size_t top = bucket_of(p, highest);
	flit_hist *h = calloc(1, sizeof(*h) + (top + 1) * sizeof(h->counts[0]));

	if (!h)
		return flit_err_null(ENOMEM, "histogram: %zu buckets", top + 1);
	h->p = p;
	h->highest = highest;
	h->top = top;
	h->min = UINT64_MAX;
	return h;
}

void flit_hist_free(flit_hist *h)
{
	free(h);
}

void flit_hist_reset(flit_hist *h)
{
	if (!h)
		return;
	memset(h->counts, 0, (h->top + 1) * sizeof(h->counts[0]));
	h->n = h->overflow = h->max = 0;
	h->min = UINT64_MAX;
	h->sum = h->sumsq = 0;
	h->sums_lost = false;
}

static inline void add_sums(flit_hist *h, u128 s, u128 sq)
{
	if (FLIT_UNLIKELY(__builtin_add_overflow(h->sum, s, &h->sum) |
			  __builtin_add_overflow(h->sumsq, sq, &h->sumsq)))
		h->sums_lost = true;
}

void flit_hist_record(flit_hist *h, uint64_t v)
{
	size_t i;

	if (FLIT_LIKELY(v <= h->highest)) {
		i = bucket_of(h->p, v);
	} else {
		i = h->top;
		h->overflow++;
	}
	h->counts[i]++;
	h->n++;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	add_sums(h, v, (u128)v * v);
}

void flit_hist_record_n(flit_hist *h, uint64_t v, uint64_t n)
{
	u128 sq;

	if (!n)
		return;
	if (v <= h->highest) {
		h->counts[bucket_of(h->p, v)] += n;
	} else {
		h->counts[h->top] += n;
		h->overflow += n;
	}
	h->n += n;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	if (__builtin_mul_overflow((u128)v * v, (u128)n, &sq))
		h->sums_lost = true;
	add_sums(h, (u128)v * n, sq);
}

int flit_hist_merge(flit_hist *dst, const flit_hist *src)
{
	if (!dst || !src)
		return flit_err(EINVAL, "histogram merge: NULL histogram");
	if (dst->p != src->p || dst->highest != src->highest)
		return flit_err(EINVAL,
				"histogram merge: geometry differs (precision %u, highest %llu; precision %u, highest %llu)",
				dst->p, (unsigned long long)dst->highest, src->p,
				(unsigned long long)src->highest);
	if (!src->n)
		return 0;
	for (size_t i = 0; i <= src->top; i++)
		dst->counts[i] += src->counts[i];
	dst->n += src->n;
	dst->overflow += src->overflow;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	if (src->sums_lost)
		dst->sums_lost = true;
	add_sums(dst, src->sum, src->sumsq);
	return 0;
}

uint64_t flit_hist_count(const flit_hist *h)
{
	return h ? h->n : 0;
}

uint64_t flit_hist_min(const flit_hist *h)
{
	return h && h->n ? h->min : 0;
}

uint64_t flit_hist_max(const flit_hist *h)
{
	return h && h->n ? h->max : 0;
}

uint64_t flit_hist_overflow(const flit_hist *h)
{
	return h ? h->overflow : 0;
}

unsigned flit_hist_precision(const flit_hist *h)
{
	return h ? h->p : 0;
}

uint64_t flit_hist_highest(const flit_hist *h)
{
	return h ? h->highest : 0;
}

/* Fallback once the exact sums have wrapped: bucket midpoints (overflows at
 * `highest`), so within the precision bound. */
static void approx_moments(const flit_hist *h, long double *mean, long double *var)
{
	long double s = 0, sq = 0, n = (long double)h->n;

	for (size_t i = 0; i <= h->top; i++) {
		uint64_t lo, hi;

		if (!h->counts[i])
			continue;
		bucket_range(h->p, i, &lo, &hi);
		long double mid = ((long double)lo + (long double)hi) / 2;
		s += mid * (long double)h->counts[i];
		sq += mid * mid * (long double)h->counts[i];
	}
	*mean = s / n;
	*var = sq / n - *mean * *mean;
	if (*var < 0)
		*var = 0;
}

double flit_hist_mean(const flit_hist *h)
{
	if (!h || !h->n)
		return 0;
	if (h->sums_lost) {
		long double m, v;

		approx_moments(h, &m, &v);
		return (double)m;
	}
	return (double)((long double)h->sum / (long double)h->n);
}

/* Square root of x >= 0 without libm (the library links none): Newton's
 * iteration from 2^ceil(bits/2) >= sqrt(x) decreases monotonically and
 * doubles the correct bits each step; it stops when it no longer decreases. */
static long double sqrt_ld(long double x, unsigned bits)
{
	long double r = 1, next;

	if (x <= 0)
		return 0;
	for (unsigned i = 0; i < (bits + 1) / 2; i++)
		r *= 2;
	for (int i = 0; i < 200; i++) {
		next = (r + x / r) / 2;
		if (next >= r)
			break;
		r = next;
	}
	return r;
}

static unsigned bits_128(u128 x)
{
	uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;

	return hi ? 128 - (unsigned)__builtin_clzll(hi) : lo ? 64 - (unsigned)__builtin_clzll(lo) : 0;
}

/* 128 x 128 -> 256 bits, as (hi, lo). */
static void mul_128(u128 a, u128 b, u128 *hi, u128 *lo)
{
	u128 a0 = (uint64_t)a, a1 = a >> 64, b0 = (uint64_t)b, b1 = b >> 64;
	u128 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
	u128 mid = (p00 >> 64) + (uint64_t)p01 + (uint64_t)p10;    /* < 3 * 2^64 */

	*lo = (mid << 64) | (uint64_t)p00;
	*hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
}

double flit_hist_stddev(const flit_hist *h)
{
	if (!h || !h->n)
		return 0;
	if (h->sums_lost) {
		long double m, v;

		approx_moments(h, &m, &v);
		return (double)sqrt_ld(v, 256);
	}
	/* n^2 var = n sumsq - sum^2, exactly (>= 0 by Cauchy-Schwarz), in 256
	 * bits: no cancellation, whatever the mean is next to the spread. */
	u128 ah, al, bh, bl, dh, dl;

	mul_128(h->sumsq, h->n, &ah, &al);
	mul_128(h->sum, h->sum, &bh, &bl);
	dl = al - bl;
	dh = ah - bh - (al < bl);
	long double num = (long double)dh * 0x1p128L + (long double)dl;
	unsigned bits = dh ? 128 + bits_128(dh) : bits_128(dl);

	return (double)(sqrt_ld(num, bits) / (long double)h->n);
}

uint64_t flit_hist_percentile(const flit_hist *h, double pct)
{
	if (!(pct >= 0 && pct <= 100)) {
		errno = EINVAL;
		return 0;
	}
	if (!h || !h->n)
		return 0;
	if (pct == 0)
		return h->min;
	if (pct == 100)
		return h->max;
	/* rank ceil(pct/100 * n), in [1, n] (no libm: r < n < 2^64 here) */
	double r = pct / 100.0 * (double)h->n;
	uint64_t rank, cum = 0;

	if (r >= (double)h->n) {
		rank = h->n;
	} else {
		rank = (uint64_t)r;
		rank += (double)rank < r;
		rank += !rank;
	}

	for (size_t i = 0; i <= h->top; i++) {
		cum += h->counts[i];
		if (cum >= rank) {
			uint64_t lo, hi;

			bucket_range(h->p, i, &lo, &hi);
			return hi < h->max ? hi : h->max;
		}
	}
	return h->max;  /* not reached: the counts add up to n */
}

int flit_hist_foreach(const flit_hist *h,
		      int (*fn)(uint64_t lo, uint64_t hi, uint64_t count, void *arg),
		      void *arg)
{
	if (!h || !fn)
		return -EINVAL;
	for (size_t i = 0; i <= h->top; i++) {
		uint64_t lo, hi;
		int rc;

		if (!h->counts[i])
			continue;
		bucket_range(h->p, i, &lo, &hi);
		rc = fn(lo, hi, h->counts[i], arg);
		if (rc)
			return rc;
	}
	return 0;
}
