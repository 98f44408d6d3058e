/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The verifier's own reason for refusing a BPF program, read from its load
 * log, for error trails.  Pure text processing: no kernel, no libbpf.
 *
 * The log (log_level 1, which libbpf asks for when a load fails) is the
 * trace of the instructions the verifier walked, "N: (op) insn   ; register
 * state", each run of them preceded by its C source line as a comment
 * ("; data + l2 > data_end", with " @ file.c:line" on recent kernels).
 * Where it stops it writes why, one line or a few ("R8 invalid mem access
 * 'scalar'", "math between pkt pointer and register with unbounded min
 * value is not allowed"), then a summary that says nothing about the
 * failure: "processed N insns (limit ...) ...", and in some cases
 * "verification time N usec" and "stack depth N".  So the reason is the
 * lines after the last instruction, summary and trace lines left out, and
 * where it happened is that instruction and the source line before it.
 *
 * libbpf (1.x, this machine's 1.1.2) prints the whole log in one warning,
 * "prog 'NAME': -- BEGIN PROG LOAD LOG --\n<log>-- END PROG LOAD LOG --\n";
 * libbpf 0.x printed "-- BEGIN DUMP LOG ---", the log and "-- END LOG --"
 * in three calls (struct flit_vlog joins them).  A log without its end marker was
 * cut (a print callback or buffer that kept only part of it); the kernel
 * itself keeps the tail of a log too long for its buffer since Linux 6.4
 * (the reason survives), the head before (the reason is lost).
 */
#ifndef FLIT_VERIFIER_LOG_H
#define FLIT_VERIFIER_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* Longest text flit_vlog_reason() writes (NUL excluded), whatever len. */
#define FLIT_VLOG_REASON_MAX 400

/* From log (NUL-terminated: a bare kernel log, or libbpf's warning with its
 * markers, text before BEGIN and after END ignored), write to out (len
 * bytes, NUL-terminated, at most FLIT_VLOG_REASON_MAX characters, long parts
 * shortened with "...") the verifier's reason and where:
 *   REASON[; REASON2[; REASON3]] (insn N 'INSN', FILE:LINE 'SOURCE')
 * ("source 'SOURCE'" when the log has no file and line; the parenthesis
 * left out when the log has no instruction), then " [log cut off]" when
 * the log lacks its end marker.  Returns 1 with a reason, 0 without:
 * out is then "" (empty log, or only summary lines), or, for a log cut
 * before its reason, "log cut off before the reason, after insn N ...". */
int flit_vlog_reason(const char *log, char *out, size_t len);

/* Load logs out of a stream of libbpf warnings, one print call at a time.
 * A warning holding a begin marker starts a log; with its end marker too
 * (libbpf 1.x) it is read at once, else (0.x) the warnings are joined until
 * the end marker, keeping the begin marker's line and the last
 * FLIT_VLOG_KEEP / 2 bytes past FLIT_VLOG_KEEP (the reason is at the end).
 * reason: flit_vlog_reason() of the last log read, "" before any (or when
 * it had none).  Zero-initialize; flit_vlog_reset() frees. */
#define FLIT_VLOG_KEEP (256u << 10)
struct flit_vlog {
	char *buf;              /* a log begun and not ended yet, or NULL */
	size_t len;
	char reason[FLIT_VLOG_REASON_MAX + 1];
};

/* msg (one warning, NUL-terminated): whether it was part of a load log. */
bool flit_vlog_feed(struct flit_vlog *v, const char *msg);
/* A log begun and not ended is read as it is (cut: flit_vlog_reason() says
 * so); nothing else changes. */
void flit_vlog_flush(struct flit_vlog *v);
/* Forget everything, reason included. */
void flit_vlog_reset(struct flit_vlog *v);

#endif /* FLIT_VERIFIER_LOG_H */
