/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit histograms: log-linear buckets in the manner of HdrHistogram, for
 * latency distributions of any length in constant memory.
 *
 *	flit_hist *h = flit_hist_new(7, 60000000000ull);  // 1/128 precision, up to 60 s
 *	for (...)
 *		flit_hist_record(h, rtt_ns);            // O(1), no allocation
 *	printf("p99.9 %llu\n", (unsigned long long)flit_hist_percentile(h, 99.9));
 *	flit_hist_free(h);
 *
 * Precision.  With precision_bits p, a value v below 2^(p+1) has a bucket of
 * its own (exact).  A larger value v, with 2^e <= v < 2^(e+1), shares a
 * bucket of width 2^(e-p) <= v * 2^-p with its neighbours: the buckets of
 * each power of two split it into 2^p equal parts.  So every value is known
 * to a relative error below 2^-p (p = 7: 0.8 %, p = 10: 0.1 %), and values
 * below 2^(p+1), so in particular below 2^p, are exact.  The memory is at
 * most (e_max - p + 2) * 2^p counters of 8 bytes, e_max being the top bit of
 * `highest`: p = 7 and highest 2^36 take 31 KiB, p = 16 and highest
 * 2^64 - 1 take 25 MiB.
 *
 * Exact besides the buckets: the count, the minimum, the maximum, the sum and
 * the sum of squares (128-bit integers), hence the mean and the standard
 * deviation.  (Should the sums ever pass 2^128, which takes e.g. 2^64
 * samples of 2^32, mean and stddev fall back to bucket values and lose their
 * exactness, not their precision bound.)
 *
 * Values above `highest` are counted in the bucket of `highest` and in
 * flit_hist_overflow(); min, max, mean and stddev still use their true
 * value.  A percentile that falls among them reads as the bucket of
 * `highest` (at most the exact max).
 *
 * A histogram is not thread-safe: give each thread its own and merge them
 * (flit_hist_merge) when reading.
 */
#ifndef FLIT_HIST_H
#define FLIT_HIST_H

#include <stdint.h>

#include <flit/flit.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flit_hist flit_hist;

/* precision_bits p in [1, 16]: a value v is counted in a bucket no wider
 * than v * 2^-p (values below 2^p exactly); highest >= 2^p: the largest
 * value tracked with that precision.  Returns the histogram (empty), or NULL
 * with errno EINVAL (p out of range, highest < 2^p) or ENOMEM, and the
 * reason in flit_errmsg(). */
FLIT_API flit_hist *flit_hist_new(unsigned precision_bits, uint64_t highest);
/* NULL is accepted. */
FLIT_API void flit_hist_free(flit_hist *h);
/* Empty it again (same geometry). */
FLIT_API void flit_hist_reset(flit_hist *h);

/* Count v once: O(1), no allocation, no system call (a hot path). */
FLIT_API void flit_hist_record(flit_hist *h, uint64_t v);
/* Count v n times (n = 0: nothing changes). */
FLIT_API void flit_hist_record_n(flit_hist *h, uint64_t v, uint64_t n);
/* Add src's counts, overflow, sums, min and max to dst.  0, or -EINVAL if
 * either is NULL or their precision or highest differ (nothing changes). */
FLIT_API int flit_hist_merge(flit_hist *dst, const flit_hist *src);

/* Values recorded (overflows included). */
FLIT_API uint64_t flit_hist_count(const flit_hist *h);
/* Exact smallest and largest value recorded; 0 if empty. */
FLIT_API uint64_t flit_hist_min(const flit_hist *h);
FLIT_API uint64_t flit_hist_max(const flit_hist *h);
/* Exact mean (from the kept sum); 0 if empty. */
FLIT_API double flit_hist_mean(const flit_hist *h);
/* Population standard deviation, from the kept sums; 0 if empty. */
FLIT_API double flit_hist_stddev(const flit_hist *h);
/* Values recorded above `highest`. */
FLIT_API uint64_t flit_hist_overflow(const flit_hist *h);
/* The geometry flit_hist_new() was given. */
FLIT_API unsigned flit_hist_precision(const flit_hist *h);
FLIT_API uint64_t flit_hist_highest(const flit_hist *h);

/* Nearest-rank percentile, pct in [0, 100]: the smallest recorded value x
 * with at least pct % of the samples at or below it (rank ceil(pct/100 * n),
 * at least 1), to within x * 2^-p: the result is the highest value of x's
 * bucket, but not above the exact max, so it never reads low and is exact
 * below 2^(p+1).  pct 0 gives the exact min, 100 the exact max.  0 if the
 * histogram is empty; 0 with errno EINVAL if pct is outside [0, 100] or NaN. */
FLIT_API uint64_t flit_hist_percentile(const flit_hist *h, double pct);

/* Calls fn for each non-empty bucket in ascending order with its range
 * [lo, hi] (inclusive) and count; stops at, and returns, fn's first non-zero
 * return.  0 when every bucket was visited, -EINVAL if h or fn is NULL. */
FLIT_API int flit_hist_foreach(const flit_hist *h,
			       int (*fn)(uint64_t lo, uint64_t hi, uint64_t count, void *arg),
			       void *arg);

#ifdef __cplusplus
}
#endif

#endif /* FLIT_HIST_H */
