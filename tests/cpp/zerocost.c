// SPDX-License-Identifier: BSD-2-Clause
/*
 * The C side of the zero-cost check (tests/test_cpp.sh, tools/bench-cpp.sh):
 * each function here has a twin in zerocost.cpp written with <flit/flit.hpp>;
 * compiled at -O2, each pair must disassemble to the same instructions.
 * `struct app` stands for where a C program keeps its handle: a struct whose
 * first member is the pointer, the layout of flit::publisher.
 */
#include <string.h>
#include <flit/flit.h>

struct app {
	flit_pub *pub;
};

int zc_send(struct app *a, const void *data, size_t len);
int zc_send_retry(struct app *a, const void *data, size_t len);
int zc_claim_commit(struct app *a, const void *data, size_t len);
void zc_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg);

int zc_send(struct app *a, const void *data, size_t len)
{
	return flit_pub_send(a->pub, data, len);
}

/* spin while back-pressured */
int zc_send_retry(struct app *a, const void *data, size_t len)
{
	int rc;

	while ((rc = flit_pub_send(a->pub, data, len)) == FLIT_BACK_PRESSURED)
		;
	return rc;
}

/* buf in a block of its own, as in publisher::claim(): with it still in
 * scope at the commit, gcc keeps the frame (buf's address escaped) and
 * calls flit_pub_commit instead of jumping to it */
int zc_claim_commit(struct app *a, const void *data, size_t len)
{
	{
		void *buf;
		int rc = flit_pub_claim(a->pub, len, &buf);

		if (rc)
			return rc;
		memcpy(buf, data, len);
	}
	return flit_pub_commit(a->pub, len);
}

struct tally {
	unsigned long long msgs, bytes;
};

/* the subscriber callback, arg = its state */
void zc_on_msg(flit_sub *sub, const struct flit_msg *m, void *arg)
{
	struct tally *t = arg;

	(void)sub;
	if (m->kind == FLIT_MSG_DATA) {
		t->msgs++;
		t->bytes += m->len;
	}
}
