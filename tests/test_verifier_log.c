// SPDX-License-Identifier: BSD-2-Clause
/*
 * flit_vlog_reason() (transports/xdp/verifier_log.h): the verifier's reason
 * and where, from canned load logs — Debian 6.12's refusal of flit's
 * program (the reason hidden above the "processed N insns" summary), a
 * 6.18-style "R8 invalid mem access 'scalar'" with file:line, reasons of
 * several lines, a reason with no instruction, summary-only and empty logs,
 * logs cut with and without their reason, libbpf 0.x's markers, long lines
 * bounded; logs out of a stream of libbpf warnings (one warning, libbpf
 * 0.x's three, an end that never came, a log longer than what is kept) —
 * and from real ones: this kernel's log of a one-instruction program, and
 * flit's own program loaded as the wrong type through libbpf, whose
 * warnings (the log in one print call, both markers) go through struct
 * flit_vlog as the library's print callback sends them.  The real loads
 * need CAP_BPF: a skip without.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "xdp/verifier_log.h"
#include "flit_xdp.skel.h"

#define BEGIN "libbpf: prog 'flit_xdp_steer': -- BEGIN PROG LOAD LOG --\n"
#define END "-- END PROG LOAD LOG --\n"

static char out[FLIT_VLOG_REASON_MAX + 64];

static void assert_has(const char *s, const char *want)
{
	if (!strstr(s, want))
		fail_msg("'%s' lacks '%s'", s, want);
}

static void assert_lacks(const char *s, const char *bad)
{
	if (strstr(s, bad))
		fail_msg("'%s' has '%s'", s, bad);
}

/* Debian 6.12 (bookworm-backports) on flit_xdp.bpf.c before e274860 */
static const char log_612[] =
	"libbpf: prog 'flit_xdp_steer': BPF program load failed: Permission denied\n"
	BEGIN
	"0: R1=ctx() R10=fp0\n"
	"; int flit_xdp_steer(struct xdp_md *ctx)\n"
	"0: (bf) r6 = r1                       ; R1=ctx() R6_w=ctx()\n"
	"from 38 to 47: R0=pkt(id=0,off=14,r=14) R10=fp0\n"
	"; if (ulen < sizeof(*udp) || data + l2 + hlen + ulen > data_end ||\n"
	"149: (2d) if r3 > r1 goto pc-102      ; R1_w=scalar(umin=8) R3_w=8\n"
	"150: (79) r3 = *(u64 *)(r10 -40)      ; R3_w=pkt(id=10,off=22,r=34,imm=0)\n"
	"; if (ulen < sizeof(*udp) || data + l2 + hlen + ulen > data_end ||\n"
	"151: (0f) r3 += r1\n"
	"math between pkt pointer and register with unbounded min value is not allowed\n"
	"processed 155 insns (limit 1000000) max_states_per_insn 0 total_states 15 peak_states 15 mark_read 4\n"
	END;

static void reason_of_612_log_is_the_line_above_the_summary(void **state)
{
	assert_int_equal(flit_vlog_reason(log_612, out, sizeof(out)), 1);
	assert_string_equal(out, "math between pkt pointer and register with unbounded min "
			    "value is not allowed (insn 151 'r3 += r1', source 'if (ulen < "
			    "sizeof(*udp) || data + l2 + hlen + ulen > data_end ||')");
	assert_lacks(out, "processed");
	assert_lacks(out, "Permission denied");
}

static const char log_618[] =
	BEGIN
	"0: R1=ctx() R10=fp0\n"
	"; int flit_xdp_steer(struct xdp_md *ctx) @ flit_xdp.bpf.c:404\n"
	"0: (bf) r6 = r1                       ; R1=ctx() R6=ctx()\n"
	"; void *data = (void *)(long)ctx->data; @ flit_xdp.bpf.c:187\n"
	"3: (61) r8 = *(u32 *)(r6 +0)          ; R6=ctx() R8=scalar()\n"
	"; proto = *(__be16 *)(data + 12); @ flit_xdp.bpf.c:200\n"
	"8: (69) r7 = *(u16 *)(r8 +12)\n"
	"R1 invalid mem access 'scalar'\n"
	"verification time 35 usec\n"
	"stack depth 8\n"
	"processed 9 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
	END
	"libbpf: prog 'flit_xdp_steer': failed to load: -13\n";

static void reason_names_file_and_line_when_the_log_has_them(void **state)
{
	assert_int_equal(flit_vlog_reason(log_618, out, sizeof(out)), 1);
	assert_string_equal(out, "R1 invalid mem access 'scalar' (insn 8 'r7 = *(u16 *)(r8 "
			    "+12)', flit_xdp.bpf.c:200 'proto = *(__be16 *)(data + 12);')");
}

static void reason_of_several_lines_keeps_them_in_order(void **state)
{
	static const char log[] =
		"; if (data + 16 > data_end)\n"
		"12: (71) r2 = *(u8 *)(r8 +14)\n"
		"invalid access to packet, off=14 size=1, R8(id=0,off=14,r=14)\n"
		"R8 offset is outside of the packet\n"
		"processed 13 insns (limit 1000000) max_states_per_insn 0 total_states 1 peak_states 1 mark_read 1\n";

	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	assert_string_equal(out, "invalid access to packet, off=14 size=1, R8(id=0,off=14,r=14); "
			    "R8 offset is outside of the packet (insn 12 'r2 = *(u8 *)(r8 +14)', "
			    "source 'if (data + 16 > data_end)')");
}

static void reason_before_any_instruction_stands_alone(void **state)
{
	static const char log[] =
		BEGIN
		"metadata kfuncs require device-bound program\n"
		"processed 0 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
		END;
	static const char stack[] =
		BEGIN
		"combined stack size of 4 calls is 544. Too large\n"
		"verification time 1344153 usec\n"
		"stack depth 24+440+0+32\n"
		"processed 51008 insns (limit 1000000) max_states_per_insn 19 total_states 1467 peak_states 303 mark_read 146\n"
		END;

	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	assert_string_equal(out, "metadata kfuncs require device-bound program");
	assert_int_equal(flit_vlog_reason(stack, out, sizeof(out)), 1);
	assert_string_equal(out, "combined stack size of 4 calls is 544. Too large");
}

static void trace_lines_after_a_branch_are_not_a_reason(void **state)
{
	/* the last instruction walked is followed by the reason, not by the
	 * states of earlier branches */
	static const char log[] =
		"reg type unsupported for arg#0 function sys_enter#75\n"
		"0: R1=ctx(off=0,imm=0) R10=fp0\n"
		"; int sys_enter(struct syscall_enter_args *args)\n"
		"0: (bf) r6 = r1           ; R1=ctx(off=0,imm=0) R6=ctx(off=0,imm=0)\n"
		"from 9 to 15: R0_w=map_value(id=0,off=0,ks=4,vs=4,imm=0) R10=fp0\n"
		"23: (bf) r3 = r6              ; R3_w=ctx(off=0,imm=0) R6=ctx(off=0,imm=0)\n"
		"24: (85) call bpf_probe_read#4\n"
		"unknown func bpf_probe_read#4\n"
		"processed 23 insns (limit 1000000) max_states_per_insn 0 total_states 2 peak_states 2 mark_read 2\n";

	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	assert_string_equal(out, "unknown func bpf_probe_read#4 (insn 24 'call bpf_probe_read#4', "
			    "source 'int sys_enter(struct syscall_enter_args *args)')");
}

static void summary_only_and_empty_logs_give_no_reason(void **state)
{
	static const char summary[] =
		BEGIN
		"processed 0 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
		END;

	strcpy(out, "junk");
	assert_int_equal(flit_vlog_reason(summary, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	strcpy(out, "junk");
	assert_int_equal(flit_vlog_reason("", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(flit_vlog_reason(BEGIN END, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(flit_vlog_reason(NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* no room: nothing written, nothing overrun */
	assert_int_equal(flit_vlog_reason(log_612, out, 0), 0);
}

static void log_cut_after_its_reason_says_so(void **state)
{
	/* the head is gone (the kernel keeps a long log's tail since 6.4),
	 * and the end marker with it */
	static const char log[] =
		BEGIN
		"_w=scalar(umin=8) R3_w=8\n"
		"; if (ulen < sizeof(*udp) || data + l2 + hlen + ulen > data_end ||\n"
		"151: (0f) r3 += r1\n"
		"math between pkt pointer and register with unbounded min value is not allowed\n"
		"processed 155 insns (limit 1000000) max_states_per_insn 0 total_states 15 peak_states 15 mark_read 4\n";

	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	assert_has(out, "math between pkt pointer and register with unbounded min value is not allowed (insn 151 'r3 += r1'");
	assert_has(out, " [log cut off]");
	assert_lacks(out, "_w=scalar");
}

static void log_cut_before_its_reason_names_the_last_instruction(void **state)
{
	static const char mid_trace[] =
		BEGIN
		"; if (ulen < sizeof(*udp) || data + l2 + hlen + ulen > data_end ||\n"
		"149: (2d) if r3 > r1 goto pc-102      ; R1_w=scalar(umin=8) R3_w=8\n"
		"150: (79) r3 = *(u64 *)(r10 -40)      ; R3_w=pkt(id=10,off=22,r=34,im";
	/* cut inside the reason's line: what there is of it, marked */
	static const char mid_reason[] =
		BEGIN
		"151: (0f) r3 += r1\n"
		"math between pkt pointer and regi";

	assert_int_equal(flit_vlog_reason(mid_trace, out, sizeof(out)), 0);
	assert_string_equal(out, "log cut off before the reason, after insn 150 "
			    "'r3 = *(u64 *)(r10 -40)', source 'if (ulen < sizeof(*udp) || "
			    "data + l2 + hlen + ulen > data_end ||'");
	assert_int_equal(flit_vlog_reason(mid_reason, out, sizeof(out)), 1);
	assert_string_equal(out, "math between pkt pointer and regi... (insn 151 'r3 += r1') "
			    "[log cut off]");
}

static void libbpf_0x_markers_are_understood(void **state)
{
	/* libbpf 0.x: three print calls, which the library joins */
	static const char log[] =
		"libbpf: -- BEGIN DUMP LOG ---\n"
		"libbpf: \n"
		"0: (95) exit\n"
		"R0 !read_ok\n"
		"processed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
		"\n"
		"libbpf: -- END LOG --\n";

	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	assert_string_equal(out, "R0 !read_ok (insn 0 'exit')");
}

static void long_lines_are_bounded_and_marked(void **state)
{
	char log[8192], small[16];
	size_t o = 0;

	o += (size_t)snprintf(log + o, sizeof(log) - o, "; ");
	for (int i = 0; i < 300; i++)
		o += (size_t)snprintf(log + o, sizeof(log) - o, "s%d ", i);
	o += (size_t)snprintf(log + o, sizeof(log) - o, "\n7: (bf) r1 = r2");
	for (int i = 0; i < 300; i++)
		o += (size_t)snprintf(log + o, sizeof(log) - o, " r%d", i % 10);
	o += (size_t)snprintf(log + o, sizeof(log) - o, "\n");
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < 200; i++)
			o += (size_t)snprintf(log + o, sizeof(log) - o, "w%d ", i);
		o += (size_t)snprintf(log + o, sizeof(log) - o, "\n");
	}
	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	assert_true(strlen(out) <= FLIT_VLOG_REASON_MAX);
	assert_has(out, "w0 w1 w2");
	assert_has(out, "... (insn 7 'r1 = r2 r0 r1");
	assert_has(out, "...', source 's0 s1 s2");
	assert_true(out[strlen(out) - 1] == ')');
	/* a small buffer: cut, terminated */
	memset(small, 'x', sizeof(small));
	assert_int_equal(flit_vlog_reason(log_612, small, sizeof(small)), 1);
	assert_true(memchr(small, '\0', sizeof(small)) != NULL);
	assert_true(strlen(small) < sizeof(small));
	assert_int_equal(strncmp(small, "math", 4), 0);
}

/* ---- logs out of a stream of warnings (struct flit_vlog) ------------------- */

static void one_warning_log_is_read_at_once(void **state)
{
	struct flit_vlog v = { 0 };

	assert_false(flit_vlog_feed(&v, "libbpf: prog 'flit_xdp_steer': BPF program load failed: Permission denied"));
	assert_true(flit_vlog_feed(&v, log_618 + 0));
	assert_null(v.buf);
	assert_string_equal(v.reason, "R1 invalid mem access 'scalar' (insn 8 'r7 = *(u16 *)(r8 "
			    "+12)', flit_xdp.bpf.c:200 'proto = *(__be16 *)(data + 12);')");
	/* what follows is not a log, and leaves the reason */
	assert_false(flit_vlog_feed(&v, "libbpf: failed to load object 'flit_xdp'"));
	assert_non_null(strstr(v.reason, "invalid mem access"));
	flit_vlog_reset(&v);
	assert_string_equal(v.reason, "");
}

static void log_in_three_warnings_is_joined(void **state)
{
	/* libbpf 0.x, as forwarded (trailing newlines stripped) */
	struct flit_vlog v = { 0 };

	assert_true(flit_vlog_feed(&v, "libbpf: -- BEGIN DUMP LOG ---"));
	assert_string_equal(v.reason, "");
	assert_true(flit_vlog_feed(&v, "libbpf: \n"
				   "; if (data + 16 > data_end)\n"
				   "12: (71) r2 = *(u8 *)(r8 +14)\n"
				   "invalid access to packet, off=14 size=1, R8(id=0,off=14,r=14)\n"
				   "R8 offset is outside of the packet\n"
				   "processed 13 insns (limit 1000000) max_states_per_insn 0 total_states 1 peak_states 1 mark_read 1\n"));
	assert_non_null(v.buf);
	assert_true(flit_vlog_feed(&v, "libbpf: -- END LOG --"));
	assert_null(v.buf);
	assert_string_equal(v.reason, "invalid access to packet, off=14 size=1, R8(id=0,off=14,r=14); "
			    "R8 offset is outside of the packet (insn 12 'r2 = *(u8 *)(r8 +14)', "
			    "source 'if (data + 16 > data_end)')");
	assert_false(flit_vlog_feed(&v, "libbpf: load bpf program failed: Permission denied"));
	flit_vlog_reset(&v);
}

static void log_whose_end_never_came_is_read_as_cut(void **state)
{
	struct flit_vlog v = { 0 };

	assert_true(flit_vlog_feed(&v, "libbpf: -- BEGIN DUMP LOG ---"));
	assert_true(flit_vlog_feed(&v, "151: (0f) r3 += r1\n"
				   "math between pkt pointer and register with unbounded min value is not allowed"));
	flit_vlog_flush(&v);
	assert_null(v.buf);
	assert_string_equal(v.reason, "math between pkt pointer and register with unbounded min "
			    "value is not allowed (insn 151 'r3 += r1') [log cut off]");
	/* a new log starts afresh */
	assert_true(flit_vlog_feed(&v, "libbpf: -- BEGIN DUMP LOG ---"));
	assert_string_equal(v.reason, "");
	flit_vlog_reset(&v);
	assert_null(v.buf);
}

static void long_joined_log_keeps_its_tail(void **state)
{
	/* more than FLIT_VLOG_KEEP of trace: the reason at the end survives */
	struct flit_vlog v = { 0 };
	char line[128];

	assert_true(flit_vlog_feed(&v, "libbpf: -- BEGIN DUMP LOG ---"));
	for (unsigned i = 0; i < 2 * FLIT_VLOG_KEEP / 64; i++) {
		snprintf(line, sizeof(line), "%u: (bf) r1 = r2                 ; R1_w=scalar() R2=scalar()", i);
		assert_true(flit_vlog_feed(&v, line));
		assert_true(v.len <= FLIT_VLOG_KEEP + sizeof(line));
	}
	assert_true(flit_vlog_feed(&v, "R2 !read_ok"));
	assert_true(flit_vlog_feed(&v, "libbpf: -- END LOG --"));
	assert_int_equal(strncmp(v.reason, "R2 !read_ok (insn ", 18), 0);
	assert_has(v.reason, "'r1 = r2'");
	flit_vlog_reset(&v);
}

/* ---- this kernel's logs --------------------------------------------------- */

static char *printed;           /* libbpf's warnings, joined */
static int prints_with_log;     /* print calls that held a BEGIN marker */
static int prints_with_both;    /* ... and its END marker too */
static struct flit_vlog fed;    /* each warning fed as the library does */

__attribute__((format(printf, 2, 0)))
static int collect(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	char *m = NULL, *j = NULL;

	if (lvl != LIBBPF_WARN || vasprintf(&m, fmt, ap) < 0)
		return 0;
	flit_vlog_feed(&fed, m);
	if (strstr(m, "-- BEGIN PROG LOAD LOG --")) {
		prints_with_log++;
		prints_with_both += strstr(m, "-- END PROG LOAD LOG --") != NULL;
	}
	if (asprintf(&j, "%s%s", printed ? printed : "", m) >= 0) {
		free(printed);
		printed = j;
	}
	free(m);
	return 0;
}

static void this_kernels_log_of_a_bare_exit_names_r0(void **state)
{
	/* "exit" with r0 never written */
	struct bpf_insn insns[] = { { .code = 0x95 } };
	char log[4096] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log),
		    .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "flit_vlog", "GPL", insns, 1, &o);

	if (fd >= 0)
		close(fd);
	if (fd == -EPERM) {
		printf("SKIP: loading BPF programs needs CAP_BPF (or CAP_SYS_ADMIN)\n");
		skip();
	}
	assert_true(fd < 0);
	assert_int_equal(flit_vlog_reason(log, out, sizeof(out)), 1);
	printf("# this kernel: %s\n", out);
	assert_has(out, "R0 !read_ok");
	assert_has(out, "(insn 0 'exit')");
}

static void this_kernels_refusal_of_flit_program_through_libbpf(void **state)
{
	/* flit's steering program as a socket filter: the verifier refuses
	 * its first xdp_md access.  libbpf prints the log as one warning. */
	libbpf_print_fn_t old = libbpf_set_print(collect);
	struct flit_xdp *skel = flit_xdp__open();
	int err;

	assert_non_null(skel);
	bpf_program__set_type(skel->progs.flit_xdp_steer, BPF_PROG_TYPE_SOCKET_FILTER);
	err = flit_xdp__load(skel);
	flit_xdp__destroy(skel);
	libbpf_set_print(old);
	if (err == -EPERM && !prints_with_log) {
		free(printed);
		printed = NULL;
		printf("SKIP: loading BPF programs needs CAP_BPF (or CAP_SYS_ADMIN)\n");
		skip();
	}
	assert_true(err < 0);
	assert_non_null(printed);
	assert_int_equal(prints_with_log, 1);
	assert_int_equal(prints_with_both, 1);
	assert_int_equal(flit_vlog_reason(printed, out, sizeof(out)), 1);
	printf("# flit_xdp_steer as a socket filter: %s\n", out);
	assert_lacks(out, "processed");
	assert_has(out, "(insn ");
	assert_has(out, "flit_xdp.bpf.c:");      /* clang -g: line info */
	flit_vlog_flush(&fed);
	assert_string_equal(fed.reason, out);
	flit_vlog_reset(&fed);
	free(printed);
	printed = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reason_of_612_log_is_the_line_above_the_summary),
		cmocka_unit_test(reason_names_file_and_line_when_the_log_has_them),
		cmocka_unit_test(reason_of_several_lines_keeps_them_in_order),
		cmocka_unit_test(reason_before_any_instruction_stands_alone),
		cmocka_unit_test(trace_lines_after_a_branch_are_not_a_reason),
		cmocka_unit_test(summary_only_and_empty_logs_give_no_reason),
		cmocka_unit_test(log_cut_after_its_reason_says_so),
		cmocka_unit_test(log_cut_before_its_reason_names_the_last_instruction),
		cmocka_unit_test(libbpf_0x_markers_are_understood),
		cmocka_unit_test(long_lines_are_bounded_and_marked),
		cmocka_unit_test(one_warning_log_is_read_at_once),
		cmocka_unit_test(log_in_three_warnings_is_joined),
		cmocka_unit_test(log_whose_end_never_came_is_read_as_cut),
		cmocka_unit_test(long_joined_log_keeps_its_tail),
		cmocka_unit_test(this_kernels_log_of_a_bare_exit_names_r0),
		cmocka_unit_test(this_kernels_refusal_of_flit_program_through_libbpf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
