// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * flit's XDP steering program: maps as in bpf/flit_xdp.h.  (Steering logic
 * being written; for now every packet passes and is counted.)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "flit_xdp.h"

/* read by user space before reusing a pinned program */
const volatile __u32 flit_xdp_version = FLIT_XDP_VERSION;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLIT_XDP_FLOWS_MAX);
	__type(key, struct flit_xdp_flow_key);
	__type(value, struct flit_xdp_flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, FLIT_XDP_XSKS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLIT_XDP_SESSIONS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLIT_XDP_TOPICS_MAX);
	__type(key, struct flit_xdp_topic_key);
	__type(value, __u32);
} topics SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLIT_XDP_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} version SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
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
