// SPDX-License-Identifier: BSD-2-Clause
/* The BPF build (vmlinux.h, clang --target=bpf, bpftool skeleton) produces a
 * program the kernel verifies and runs: load the embedded skeleton and run it
 * on a crafted frame with BPF_PROG_TEST_RUN.  Needs CAP_BPF (skips without). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "flit_xdp.skel.h"
#include "../bpf/flit_xdp.h"

static struct flit_xdp *skel;

static int setup(void **state)
{
	skel = flit_xdp__open_and_load();
	return skel ? 0 : -1;
}

static int teardown(void **state)
{
	flit_xdp__destroy(skel);
	return 0;
}

static uint64_t counter_sum(int idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t vals[ncpu], sum = 0;
	uint32_t key = (uint32_t)idx;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &key, vals), 0);
	for (int i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

static void skeleton_program_passes_and_counts(void **state)
{
	unsigned char pkt[64] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x00 };
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = 3);
	uint64_t before = counter_sum(FLIT_XDP_PASSED);

	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(skel->progs.flit_xdp_steer), &run), 0);
	assert_int_equal(run.retval, XDP_PASS);
	assert_int_equal(counter_sum(FLIT_XDP_PASSED) - before, 3);
	assert_int_equal(counter_sum(FLIT_XDP_MALFORMED), 0);
}

static void skeleton_carries_its_version(void **state)
{
	assert_int_equal(skel->rodata->flit_xdp_version, FLIT_XDP_VERSION);
}

int main(void)
{
	struct flit_xdp *probe = flit_xdp__open_and_load();
	if (!probe) {
		int e = errno;
		printf("SKIP: cannot load the XDP program (%s): needs CAP_BPF and CAP_NET_ADMIN\n",
		       strerror(e));
		return 77;
	}
	flit_xdp__destroy(probe);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(skeleton_program_passes_and_counts),
		cmocka_unit_test(skeleton_carries_its_version),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
