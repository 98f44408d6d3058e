// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * flit's XDP program.  For now it passes every packet to the kernel and
 * counts it; flow steering to AF_XDP sockets and the topic filter come with
 * the xdp transport (bpf/flit_xdp.h holds the shared layouts).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "flit_xdp.h"

/* read by the loader before reusing a pinned program */
const volatile __u32 flit_xdp_version = FLIT_XDP_VERSION;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLIT_XDP_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} flit_counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&flit_counters, &idx);
	if (v)
		(*v)++;
}

SEC("xdp")
int flit_xdp_steer(struct xdp_md *ctx)
{
	count(FLIT_XDP_PASSED);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
