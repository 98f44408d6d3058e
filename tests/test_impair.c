// SPDX-License-Identifier: BSD-2-Clause
/* test_impair — the receive-side impairment of dgram/ (transports/dgram/
 * impair.c): the context.udp.impair spec, and the impairment around a path
 * that is only a receive function (the AF_XDP path's shape: a buffer reused
 * on every call). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "testlib.h"
#include "dgram/dgram.h"

static void impair_parse_accepts_the_documented_forms(void **state)
{
	(void)state;
	struct flit_dgram_impair v;

	assert_int_equal(flit_dgram_impair_parse("loss=5%,dup=1%,reorder=2.5%,seed=7", &v), 0);
	assert_int_equal(v.loss_bp, 500);
	assert_int_equal(v.dup_bp, 100);
	assert_int_equal(v.reorder_bp, 250);
	assert_int_equal(v.seed, 7);

	assert_int_equal(flit_dgram_impair_parse("seed=18446744073709551615, reorder=0.01,loss=100", &v), 0);
	assert_int_equal(v.loss_bp, 10000);
	assert_int_equal(v.dup_bp, 0);
	assert_int_equal(v.reorder_bp, 1);
	assert_int_equal(v.seed, UINT64_MAX);

	assert_int_equal(flit_dgram_impair_parse("dup=12.34", &v), 0);
	assert_int_equal(v.dup_bp, 1234);
	assert_int_equal(v.loss_bp, 0);

	assert_int_equal(flit_dgram_impair_parse("loss=0%,seed=0", &v), 0);
	assert_int_equal(v.loss_bp, 0);

	assert_int_equal(flit_dgram_impair_parse("", &v), 0);
	assert_int_equal(v.loss_bp + v.dup_bp + v.reorder_bp, 0);
}

static void impair_parse_rejects_bad_items_naming_them(void **state)
{
	(void)state;
	static const struct {
		const char *s, *names;
	} bad[] = {
		{ "loss=101", "loss=101" },
		{ "loss=100.01", "loss=100.01" },
		{ "loss=1.234", "loss=1.234" },
		{ "loss=-1", "loss=-1" },
		{ "loss=abc", "loss=abc" },
		{ "loss=", "loss=" },
		{ "loss=5%%", "loss=5%%" },
		{ "loss=5.%", "loss=5.%" },
		{ "loss=.5", "loss=.5" },
		{ "loss", "loss" },
		{ "jitter=1", "jitter=1" },
		{ "dup=1,foo=2", "foo=2" },
		{ "seed=x", "seed=x" },
		{ "seed=1.5", "seed=1.5" },
		{ "seed=18446744073709551616", "seed=18446744073709551616" },
		{ "loss=1,loss=2", "loss=2" },
		{ "loss=1,,dup=2", "empty" },
		{ "loss=1,", "empty" },
	};
	struct flit_dgram_impair v = { .loss_bp = 77 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = flit_dgram_impair_parse(bad[i].s, &v);
		if (r != -EINVAL)
			fail_msg("\"%s\" gave %d, want -EINVAL", bad[i].s, r);
		if (!strstr(flit_errmsg(), bad[i].names))
			fail_msg("\"%s\": trail \"%s\" does not name \"%s\"", bad[i].s,
				 flit_errmsg(), bad[i].names);
		assert_int_equal(v.loss_bp, 77);   /* untouched on failure */
	}
}

/* A fake data path: hands out datagrams numbered 0..total-1, in batches,
 * from a buffer it reuses on every call (like the AF_XDP path's frames). */
struct fake_path {
	unsigned next, total, calls;
	uint8_t buf[8][64];
};

static int fake_recv(void *arg, struct flit_dgram *d, unsigned n)
{
	struct fake_path *f = arg;
	unsigned k = 0;
	f->calls++;
	memset(f->buf, 0xee, sizeof(f->buf));   /* last call's views expire */
	while (k < n && k < 8 && f->next < f->total) {
		memset(f->buf[k], 0, sizeof(f->buf[k]));
		memcpy(f->buf[k], &f->next, sizeof(f->next));
		d[k] = (struct flit_dgram){ .buf = f->buf[k], .len = 64 };
		k++;
		f->next++;
	}
	return (int)k;
}

static int failing_recv(void *arg, struct flit_dgram *d, unsigned n)
{
	(void)arg; (void)d; (void)n;
	return -EIO;
}

static void impairment_wraps_any_path_and_counts_what_it_did(void **state)
{
	(void)state;
	struct fake_path f = { .total = 5000 };
	struct flit_dgram_impair c = { .loss_bp = 1000, .dup_bp = 500, .reorder_bp = 500, .seed = 3 };
	struct flit_impair *im;
	struct flit_dgram d[8];
	unsigned seen[5000] = { 0 }, got = 0, idle = 0;

	assert_true(flit_dgram_impair_on(&c));
	assert_int_equal(flit_impair_open(&c, 8, 64, &im), 0);
	assert_string_equal(flit_impair_describe(im),
			    "impaired (loss 10.00%, dup 5.00%, reorder 5.00%, seed 3)");
	while (idle < 10) {
		int n = flit_impair_recv(im, fake_recv, &f, d, 8);
		assert_true(n >= 0);
		idle = n ? 0 : idle + 1;
		for (int i = 0; i < n; i++) {
			unsigned v;
			memcpy(&v, d[i].buf, sizeof(v));
			assert_true(v < 5000);   /* a view still valid, not recycled */
			seen[v]++;
			got++;
		}
	}
	struct flit_impair_stats st;
	flit_impair_stats(im, &st);
	unsigned twice = 0, never = 0;
	for (unsigned i = 0; i < 5000; i++) {
		twice += seen[i] == 2;
		never += seen[i] == 0;
	}
	printf("# got %u, never %u, twice %u (dropped %llu dup %llu reordered %llu)\n",
	       got, never, twice, (unsigned long long)st.dropped,
	       (unsigned long long)st.duplicated, (unsigned long long)st.reordered);
	assert_int_equal(f.next, 5000);
	assert_int_equal(never, st.dropped);
	assert_int_equal(twice, st.duplicated);
	assert_int_equal(got, 5000 - st.dropped + st.duplicated);
	assert_true(st.dropped > 300 && st.dropped < 700);
	assert_true(st.reordered > 0);
	flit_impair_close(im);
}

static void fetches_no_more_than_its_batch_and_passes_errors_through(void **state)
{
	(void)state;
	struct fake_path f = { .total = 100 };
	struct flit_dgram_impair c = { .loss_bp = 1, .seed = 1 };
	struct flit_impair *im;
	struct flit_dgram d[8];

	assert_int_equal(flit_impair_open(&c, 4, 64, &im), 0);
	assert_int_equal(flit_impair_recv(im, fake_recv, &f, d, 8) <= 4, true);
	assert_int_equal(f.next, 4);
	assert_int_equal(flit_impair_recv(im, failing_recv, NULL, d, 8), -EIO);
	flit_impair_close(im);
}

static void open_refuses_more_than_100_percent(void **state)
{
	(void)state;
	struct flit_impair *im = (void *)1;
	struct flit_dgram_impair c = { .loss_bp = 10001 };
	assert_int_equal(flit_impair_open(&c, 8, 64, &im), -EINVAL);
	assert_null(im);
	assert_non_null(strstr(flit_errmsg(), "above 100%"));
	c = (struct flit_dgram_impair){ 0 };
	assert_false(flit_dgram_impair_on(&c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(impair_parse_accepts_the_documented_forms),
		cmocka_unit_test(impair_parse_rejects_bad_items_naming_them),
		cmocka_unit_test(impairment_wraps_any_path_and_counts_what_it_did),
		cmocka_unit_test(fetches_no_more_than_its_batch_and_passes_errors_through),
		cmocka_unit_test(open_refuses_more_than_100_percent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
