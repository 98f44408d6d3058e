// SPDX-License-Identifier: BSD-2-Clause
/* The log-linear histogram of include/flit/hist.h against exact references:
 * percentiles against a sorted array's nearest rank on several distributions
 * (uniform, exponential, log-normal, Pareto heavy tail, bimodal) and
 * precisions, within the stated bound x * 2^-p and never below x; exactness
 * below 2^p; merge = recording both; record_n = n records; overflow above
 * `highest`; exact min/max/mean/stddev (also with a large mean and a tiny
 * spread, where a naive sum of squares cancels); the bucket walk; the full
 * 64-bit range; bad arguments.  Deterministic: a fixed-seed generator. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <flit/hist.h>

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)      /* splitmix64 */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rnd01(void)      /* (0, 1) */
{
	return ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0;
}

static double rnd_normal(void)
{
	return sqrt(-2 * log(rnd01())) * cos(2 * M_PI * rnd01());
}

enum dist { UNIFORM_SMALL, UNIFORM_WIDE, EXPONENTIAL, LOGNORMAL, PARETO, BIMODAL, NDIST };
static const char *const dist_name[NDIST] = {
	"uniform 0..999", "uniform 0..1e9", "exponential mean 5000", "log-normal around 4000 ns",
	"Pareto alpha 1.1 from 1000 (heavy tail)", "bimodal 800 / 60000 + 0.5 % at 5e6",
};

static uint64_t sample(enum dist d)
{
	double x;

	switch (d) {
	case UNIFORM_SMALL: return rnd() % 1000;
	case UNIFORM_WIDE: return rnd() % 1000000001ull;
	case EXPONENTIAL: return (uint64_t)(-5000.0 * log(rnd01()));
	case LOGNORMAL: return (uint64_t)exp(8.3 + 0.6 * rnd_normal());
	case PARETO:
		x = 1000.0 / pow(rnd01(), 1 / 1.1);
		return x > 1e15 ? (uint64_t)1e15 : (uint64_t)x;
	case BIMODAL:
		x = rnd01();
		if (x < 0.005)
			return 5000000 + rnd() % 1000000;
		return (uint64_t)((x < 0.6 ? 800.0 : 60000.0) * exp(0.1 * rnd_normal()));
	default: return 0;
	}
}

/* ---- exact references ---------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* tools/tool.c's nearest rank: the ceil(p/100 * n)-th smallest (1-based). */
static uint64_t ref_rank(const uint64_t *sorted, size_t n, double p)
{
	double r = ceil(p / 100.0 * (double)n);
	size_t rank = r < 1 ? 1 : (size_t)r;

	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

static void ref_moments(const uint64_t *v, size_t n, long double *mean, long double *sd)
{
	long double s = 0, m2 = 0;

	for (size_t i = 0; i < n; i++)
		s += (long double)v[i];
	*mean = s / (long double)n;
	for (size_t i = 0; i < n; i++) {
		long double d = (long double)v[i] - *mean;
		m2 += d * d;
	}
	*sd = sqrtl(m2 / (long double)n);
}

static const double pcts[] = { 0, 0.001, 0.1, 1, 10, 25, 50, 75, 90, 99, 99.5, 99.9, 99.99, 99.999, 100 };
#define NPCTS (sizeof(pcts) / sizeof(pcts[0]))

/* The contract: x <= got, got - x <= x * 2^-p (x >> p: strictly less than
 * one bucket), got = x below 2^p; exact at 0 and 100. */
static void check_percentiles(const flit_hist *h, const uint64_t *sorted, size_t n,
			      unsigned p, const char *what)
{
	for (size_t k = 0; k < NPCTS; k++) {
		uint64_t x = ref_rank(sorted, n, pcts[k]), got = flit_hist_percentile(h, pcts[k]);
		int ok = got >= x && got - x <= (x >> p);

		if (x < (1ull << p) || pcts[k] == 0 || pcts[k] == 100)
			ok = ok && got == x;
		if (!ok)
			fail_msg("%s, p = %u, n = %zu: p%g is %llu, reference %llu (allowed %llu ... %llu)",
				 what, p, n, pcts[k], (unsigned long long)got, (unsigned long long)x,
				 (unsigned long long)x, (unsigned long long)(x + (x >> p)));
	}
}

static void check_moments(const flit_hist *h, const uint64_t *v, size_t n, const char *what)
{
	long double mean, sd;
	uint64_t mn = UINT64_MAX, mx = 0;

	for (size_t i = 0; i < n; i++) {
		mn = v[i] < mn ? v[i] : mn;
		mx = v[i] > mx ? v[i] : mx;
	}
	ref_moments(v, n, &mean, &sd);
	assert_int_equal(flit_hist_count(h), n);
	assert_int_equal(flit_hist_min(h), mn);
	assert_int_equal(flit_hist_max(h), mx);
	if (fabsl((long double)flit_hist_mean(h) - mean) > 1e-12L * fabsl(mean) + 1e-12L)
		fail_msg("%s: mean %.17g, reference %.17Lg", what, flit_hist_mean(h), mean);
	if (fabsl((long double)flit_hist_stddev(h) - sd) > 1e-9L * fabsl(sd) + 1e-9L)
		fail_msg("%s: stddev %.17g, reference %.17Lg", what, flit_hist_stddev(h), sd);
}

/* ---- tests ---------------------------------------------------------------- */

#define N_SAMPLES 200000

static void hist_percentiles_match_sorted_reference(void **state)
{
	static const unsigned precisions[] = { 1, 3, 7, 10, 14 };
	uint64_t *v = malloc(N_SAMPLES * sizeof(*v));

	assert_non_null(v);
	for (int d = 0; d < NDIST; d++) {
		rng_state = 0x666c6974u + (uint64_t)d;
		for (size_t i = 0; i < N_SAMPLES; i++)
			v[i] = sample(d);
		for (size_t k = 0; k < sizeof(precisions) / sizeof(precisions[0]); k++) {
			unsigned p = precisions[k];
			flit_hist *h = flit_hist_new(p, UINT64_C(1) << 50);

			assert_non_null(h);
			for (size_t i = 0; i < N_SAMPLES; i++)
				flit_hist_record(h, v[i]);
			assert_int_equal(flit_hist_overflow(h), 0);
			check_moments(h, v, N_SAMPLES, dist_name[d]);
			qsort(v, N_SAMPLES, sizeof(*v), cmp_u64);
			check_percentiles(h, v, N_SAMPLES, p, dist_name[d]);
			/* small counts too, where one rank is a big share */
			flit_hist_reset(h);
			for (size_t i = 0; i < 7; i++)
				flit_hist_record(h, v[i * (N_SAMPLES / 7)]);
			uint64_t few[7];
			for (size_t i = 0; i < 7; i++)
				few[i] = v[i * (N_SAMPLES / 7)];
			check_percentiles(h, few, 7, p, dist_name[d]);
			flit_hist_free(h);
		}
	}
	free(v);
}

static void hist_values_below_2p_are_exact(void **state)
{
	for (unsigned p = 1; p <= 12; p++) {
		uint64_t lim = 1ull << p, v[4096];
		flit_hist *h = flit_hist_new(p, lim);
		size_t n = 0;

		assert_non_null(h);
		rng_state = p;
		for (size_t i = 0; i < 3 * lim && n < 4096; i++) {
			v[n] = rnd() % lim;
			flit_hist_record(h, v[n++]);
		}
		qsort(v, n, sizeof(*v), cmp_u64);
		for (double pct = 0; pct <= 100; pct += 0.25)
			assert_int_equal(flit_hist_percentile(h, pct), ref_rank(v, n, pct));
		flit_hist_free(h);
	}
	/* the largest precision: every value below 65536 keeps its own bucket */
	static uint64_t all[65536 / 7 + 1];
	flit_hist *h = flit_hist_new(16, 1ull << 40);
	size_t n = 0;

	assert_non_null(h);
	for (uint64_t x = 0; x < 65536; x += 7) {
		all[n++] = x;
		flit_hist_record(h, x);
	}
	for (double pct = 0; pct <= 100; pct += 0.125)
		assert_int_equal(flit_hist_percentile(h, pct), ref_rank(all, n, pct));
	flit_hist_free(h);
}

struct bucket { uint64_t lo, hi, count; };
struct walk { struct bucket b[8192]; size_t n; int stop_at; };

static int collect(uint64_t lo, uint64_t hi, uint64_t count, void *arg)
{
	struct walk *w = arg;

	if (w->n < 8192)
		w->b[w->n] = (struct bucket){ lo, hi, count };
	w->n++;
	return w->stop_at && (int)w->n == w->stop_at ? 42 : 0;
}

static void assert_same_hist(const flit_hist *a, const flit_hist *b)
{
	static struct walk wa, wb;

	memset(&wa, 0, sizeof(wa));
	memset(&wb, 0, sizeof(wb));
	assert_int_equal(flit_hist_foreach(a, collect, &wa), 0);
	assert_int_equal(flit_hist_foreach(b, collect, &wb), 0);
	assert_int_equal(wa.n, wb.n);
	assert_true(wa.n <= 8192);
	assert_memory_equal(wa.b, wb.b, wa.n * sizeof(wa.b[0]));
	assert_int_equal(flit_hist_count(a), flit_hist_count(b));
	assert_int_equal(flit_hist_min(a), flit_hist_min(b));
	assert_int_equal(flit_hist_max(a), flit_hist_max(b));
	assert_int_equal(flit_hist_overflow(a), flit_hist_overflow(b));
	assert_true(flit_hist_mean(a) == flit_hist_mean(b));
	assert_true(flit_hist_stddev(a) == flit_hist_stddev(b));
	for (size_t k = 0; k < NPCTS; k++)
		assert_int_equal(flit_hist_percentile(a, pcts[k]), flit_hist_percentile(b, pcts[k]));
}

static void hist_merge_equals_recording_both(void **state)
{
	flit_hist *a = flit_hist_new(7, 1000000), *b = flit_hist_new(7, 1000000);
	flit_hist *both = flit_hist_new(7, 1000000), *empty = flit_hist_new(7, 1000000);

	assert_non_null(a); assert_non_null(b); assert_non_null(both); assert_non_null(empty);
	rng_state = 99;
	for (int i = 0; i < 50000; i++) {
		uint64_t x = sample(LOGNORMAL), y = sample(PARETO);

		flit_hist_record(a, x);
		flit_hist_record(b, y);     /* Pareto passes 1e6 ~25 times: overflows too */
		flit_hist_record(both, x);
		flit_hist_record(both, y);
	}
	assert_true(flit_hist_overflow(b) > 0);
	assert_int_equal(flit_hist_merge(a, b), 0);
	assert_same_hist(a, both);
	/* merging an empty one changes nothing, into an empty one copies */
	assert_int_equal(flit_hist_merge(a, empty), 0);
	assert_same_hist(a, both);
	assert_int_equal(flit_hist_merge(empty, both), 0);
	assert_same_hist(empty, both);
	flit_hist_free(a); flit_hist_free(b); flit_hist_free(both); flit_hist_free(empty);
}

static void hist_record_n_equals_n_records(void **state)
{
	flit_hist *a = flit_hist_new(5, 1 << 20), *b = flit_hist_new(5, 1 << 20);

	assert_non_null(a); assert_non_null(b);
	const uint64_t vals[] = { 0, 1, 63, 64, 1000, 123456, 1 << 20, (1 << 20) + 1, 99999999 };
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		flit_hist_record_n(a, vals[i], i + 1);
		for (size_t j = 0; j <= i; j++)
			flit_hist_record(b, vals[i]);
	}
	flit_hist_record_n(a, 777, 0);      /* nothing: min/max untouched */
	assert_same_hist(a, b);
	assert_int_equal(flit_hist_overflow(a), 8 + 9);
	flit_hist_free(a); flit_hist_free(b);
}

static void hist_overflow_counts_values_above_highest(void **state)
{
	flit_hist *h = flit_hist_new(3, 1000);
	struct walk w = { .n = 0 };

	assert_non_null(h);
	for (uint64_t x = 1; x <= 100; x++)
		flit_hist_record(h, x);
	flit_hist_record(h, 1001);
	flit_hist_record(h, 5000000);
	flit_hist_record_n(h, 1ull << 40, 3);
	assert_int_equal(flit_hist_count(h), 105);
	assert_int_equal(flit_hist_overflow(h), 5);
	assert_int_equal(flit_hist_max(h), 1ull << 40);               /* exact */
	assert_int_equal(flit_hist_percentile(h, 100), 1ull << 40);
	assert_true(flit_hist_mean(h) > 1e10);                         /* true values */
	/* p99 falls among the overflows: it reads as highest's bucket */
	uint64_t p99 = flit_hist_percentile(h, 99);
	assert_true(p99 >= 1000 && p99 - 1000 <= (1000 >> 3));
	/* they sit in the last bucket, which holds 1000 */
	assert_int_equal(flit_hist_foreach(h, collect, &w), 0);
	assert_true(w.b[w.n - 1].lo <= 1000 && 1000 <= w.b[w.n - 1].hi);
	assert_int_equal(w.b[w.n - 1].count, 5);
	/* reset clears the overflow too */
	flit_hist_reset(h);
	assert_int_equal(flit_hist_overflow(h), 0);
	assert_int_equal(flit_hist_count(h), 0);
	flit_hist_free(h);
}

static void hist_min_max_mean_stddev_exact_vs_reference(void **state)
{
	uint64_t v[3000];
	flit_hist *h = flit_hist_new(2, 1ull << 62);

	assert_non_null(h);
	/* a large mean with a tiny spread: sum of squares ~1e33, stddev ~0.8 */
	for (size_t i = 0; i < 3000; i++) {
		v[i] = 1000000000000000ull + i % 3;
		flit_hist_record(h, v[i]);
	}
	check_moments(h, v, 3000, "1e15 + {0,1,2}");
	assert_true(fabs(flit_hist_stddev(h) - sqrt(2.0 / 3.0)) < 1e-12);
	/* one value: stddev 0 */
	flit_hist_reset(h);
	flit_hist_record(h, 12345);
	assert_int_equal(flit_hist_min(h), 12345);
	assert_int_equal(flit_hist_max(h), 12345);
	assert_true(flit_hist_mean(h) == 12345.0);
	assert_true(flit_hist_stddev(h) == 0.0);
	/* the extremes of uint64_t */
	flit_hist_reset(h);
	flit_hist_record(h, 0);
	flit_hist_record(h, UINT64_MAX);
	assert_int_equal(flit_hist_min(h), 0);
	assert_int_equal(flit_hist_max(h), UINT64_MAX);
	assert_true(fabs(flit_hist_mean(h) - 9223372036854775807.5) < 1e4);
	assert_true(fabs(flit_hist_stddev(h) - 9223372036854775807.5) < 1e4);
	flit_hist_free(h);
}

static void hist_empty_reads_zero(void **state)
{
	flit_hist *h = flit_hist_new(7, 1000);
	struct walk w = { .n = 0 };

	assert_non_null(h);
	assert_int_equal(flit_hist_count(h), 0);
	assert_int_equal(flit_hist_min(h), 0);
	assert_int_equal(flit_hist_max(h), 0);
	assert_true(flit_hist_mean(h) == 0.0);
	assert_true(flit_hist_stddev(h) == 0.0);
	assert_int_equal(flit_hist_percentile(h, 50), 0);
	assert_int_equal(flit_hist_percentile(h, 100), 0);
	assert_int_equal(flit_hist_foreach(h, collect, &w), 0);
	assert_int_equal(w.n, 0);
	assert_int_equal(flit_hist_precision(h), 7);
	assert_int_equal(flit_hist_highest(h), 1000);
	flit_hist_free(h);
}

static void hist_foreach_walks_buckets_in_order_and_stops(void **state)
{
	static struct walk w;
	flit_hist *h = flit_hist_new(4, 1ull << 40);
	uint64_t total = 0;

	assert_non_null(h);
	rng_state = 7;
	for (int i = 0; i < 100000; i++)
		flit_hist_record(h, sample(PARETO) - 900);
	memset(&w, 0, sizeof(w));
	assert_int_equal(flit_hist_foreach(h, collect, &w), 0);
	assert_true(w.n > 1 && w.n <= 8192);
	for (size_t i = 0; i < w.n; i++) {
		assert_true(w.b[i].lo <= w.b[i].hi);
		assert_true(w.b[i].hi - w.b[i].lo <= (w.b[i].lo >> 4));    /* the bound */
		assert_true(w.b[i].count > 0);
		if (i)
			assert_true(w.b[i].lo > w.b[i - 1].hi);
		total += w.b[i].count;
	}
	assert_int_equal(total, flit_hist_count(h));
	assert_true(w.b[0].lo <= flit_hist_min(h) && flit_hist_min(h) <= w.b[0].hi);
	assert_true(w.b[w.n - 1].lo <= flit_hist_max(h) && flit_hist_max(h) <= w.b[w.n - 1].hi);
	/* stops at the first non-zero return and returns it */
	memset(&w, 0, sizeof(w));
	w.stop_at = 3;
	assert_int_equal(flit_hist_foreach(h, collect, &w), 42);
	assert_int_equal(w.n, 3);
	flit_hist_free(h);
}

/* Buckets tile 0 ... 2^64 - 1 without gaps or overlaps, at every precision. */
static int tile(uint64_t lo, uint64_t hi, uint64_t count, void *arg)
{
	uint64_t *next = arg;

	if (lo != *next || hi < lo)
		return -1;
	*next = hi + 1;
	return 0;
}

static void hist_buckets_tile_the_full_64_bit_range(void **state)
{
	for (unsigned p = 1; p <= 16; p += 5) {
		flit_hist *h = flit_hist_new(p, UINT64_MAX);
		uint64_t next = 0;

		assert_non_null(h);
		/* one value per bucket: the low ones, then 2^p per power of two */
		for (uint64_t x = 0; x < (2ull << p); x++)
			flit_hist_record(h, x);
		for (unsigned e = p + 1; e < 64; e++)
			for (uint64_t m = 0; m < (1ull << p); m++)
				flit_hist_record(h, (1ull << e) + (m << (e - p)));
		assert_int_equal(flit_hist_foreach(h, tile, &next), 0);
		assert_int_equal(next, 0);      /* wrapped: the last hi was 2^64 - 1 */
		assert_int_equal(flit_hist_overflow(h), 0);
		assert_int_equal(flit_hist_percentile(h, 100), UINT64_MAX - (1ull << (63 - p)) + 1);
		flit_hist_record(h, UINT64_MAX);
		assert_int_equal(flit_hist_percentile(h, 100), UINT64_MAX);
		flit_hist_free(h);
	}
}

static void hist_rejects_bad_arguments(void **state)
{
	flit_hist *a, *b;

	errno = 0;
	assert_null(flit_hist_new(0, 1000));
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(flit_errmsg(), "precision"));
	errno = 0;
	assert_null(flit_hist_new(17, UINT64_MAX));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(flit_hist_new(10, 1023));          /* highest < 2^p */
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(flit_errmsg(), "highest"));
	a = flit_hist_new(10, 1024);                    /* = 2^p: fine */
	assert_non_null(a);
	flit_hist_free(a);

	a = flit_hist_new(7, 1000000);
	b = flit_hist_new(8, 1000000);
	assert_non_null(a); assert_non_null(b);
	flit_hist_record(b, 5);
	assert_int_equal(flit_hist_merge(a, b), -EINVAL);      /* precision differs */
	assert_non_null(strstr(flit_errmsg(), "geometry"));
	assert_int_equal(flit_hist_count(a), 0);               /* unchanged */
	flit_hist_free(b);
	b = flit_hist_new(7, 2000000);
	assert_non_null(b);
	assert_int_equal(flit_hist_merge(a, b), -EINVAL);      /* highest differs */
	assert_int_equal(flit_hist_merge(NULL, b), -EINVAL);
	assert_int_equal(flit_hist_merge(a, NULL), -EINVAL);

	flit_hist_record(a, 500);
	errno = 0;
	assert_int_equal(flit_hist_percentile(a, -0.1), 0);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(flit_hist_percentile(a, 100.01), 0);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(flit_hist_percentile(a, NAN), 0);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(flit_hist_foreach(a, NULL, NULL), -EINVAL);
	assert_int_equal(flit_hist_foreach(NULL, collect, NULL), -EINVAL);
	flit_hist_free(a);
	flit_hist_free(b);
	flit_hist_free(NULL);
	flit_hist_reset(NULL);
	assert_int_equal(flit_hist_count(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hist_percentiles_match_sorted_reference),
		cmocka_unit_test(hist_values_below_2p_are_exact),
		cmocka_unit_test(hist_merge_equals_recording_both),
		cmocka_unit_test(hist_record_n_equals_n_records),
		cmocka_unit_test(hist_overflow_counts_values_above_highest),
		cmocka_unit_test(hist_min_max_mean_stddev_exact_vs_reference),
		cmocka_unit_test(hist_empty_reads_zero),
		cmocka_unit_test(hist_foreach_walks_buckets_in_order_and_stops),
		cmocka_unit_test(hist_buckets_tile_the_full_64_bit_range),
		cmocka_unit_test(hist_rejects_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
