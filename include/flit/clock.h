/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * flit clocks: the calibrated time-stamp counter used by the measurement
 * tools (and the library's timestamps), and the system clocks beside it.
 *
 *	struct flit_tsc tsc;
 *	if (flit_tsc_calibrate(&tsc, 100) == 0) {
 *		uint64_t t0 = flit_tsc_ticks_ordered();
 *		...
 *		double ns = flit_tsc_ns(&tsc, flit_tsc_ticks_ordered() - t0);
 *	} else {
 *		... use flit_monotonic_raw_ns() and call the clock "monotonic_raw"
 *	}
 *
 * The TSC is only a clock when it is invariant (constant rate, keeps running
 * in deep C-states) and, for deltas taken on different CPUs, synchronised
 * across CPUs, which Linux checks at boot before choosing "tsc" as the
 * clocksource.  A measurement that takes both ends of a delta on the same
 * CPU only needs the first property.
 *
 * The struct is visible so that the conversions below inline; fill it with
 * flit_tsc_calibrate() and treat it as read-only.
 */
#ifndef FLIT_CLOCK_H
#define FLIT_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <flit/flit.h>

#ifdef __cplusplus
extern "C" {
#endif

struct flit_tsc {
	double ns_per_tick;     /* calibrated against CLOCK_MONOTONIC_RAW */
	uint64_t ref_tick;      /* a TSC reading ... */
	uint64_t ref_ns;        /* ... and CLOCK_MONOTONIC_RAW at that moment */
	bool invariant;         /* the CPU reports an invariant TSC */
};

/* Check that the TSC is invariant (CPUID leaf 0x80000007 EDX bit 8, or the
 * kernel's constant_tsc + nonstop_tsc flags: hypervisors often hide the CPUID
 * bit while the kernel knows better) and calibrate it against
 * CLOCK_MONOTONIC_RAW over about `ms` milliseconds (0: 100 ms; sleeps).
 * Returns 0, -ENOTSUP if the TSC is not usable as a clock (the caller should
 * fall back to flit_monotonic_raw_ns() and name its clock "monotonic_raw"),
 * or -EIO if calibration gave an implausible rate.  *c is filled in all
 * cases (on failure with ns_per_tick = 0). */
FLIT_API int flit_tsc_calibrate(struct flit_tsc *c, unsigned ms);

/* CLOCK_REALTIME in nanoseconds (the clock of flit_msg send/recv stamps). */
FLIT_API uint64_t flit_realtime_ns(void);

/* CLOCK_MONOTONIC_RAW in nanoseconds (vDSO, no system call). */
static inline uint64_t flit_monotonic_raw_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
/* Raw TSC read: cheap (~13 ns here) but not ordered with surrounding loads
 * and stores; for timestamps, not for bracketing a measured interval. */
static inline uint64_t flit_tsc_ticks(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* TSC read fenced on both sides: earlier instructions have completed before
 * the read, later ones don't start before it.  Use it at both ends of a
 * measured interval.  (lfence is dispatch-serialising on Intel, and on AMD
 * with the setting Linux enables for its Spectre mitigations.) */
static inline uint64_t flit_tsc_ticks_ordered(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("lfence\n\trdtsc\n\tlfence"
			     : "=a"(lo), "=d"(hi) : : "memory");
	return (uint64_t)hi << 32 | lo;
}
#else
/* No TSC: ticks are CLOCK_MONOTONIC_RAW nanoseconds (flit_tsc_calibrate()
 * still returns -ENOTSUP, so callers name the clock honestly). */
static inline uint64_t flit_tsc_ticks(void)
{
	return flit_monotonic_raw_ns();
}

static inline uint64_t flit_tsc_ticks_ordered(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return flit_monotonic_raw_ns();
}
#endif

/* Nanoseconds in a delta of ticks. */
static inline double flit_tsc_ns(const struct flit_tsc *c, uint64_t ticks_delta)
{
	return (double)ticks_delta * c->ns_per_tick;
}

/* The same, rounded to whole nanoseconds. */
static inline uint64_t flit_tsc_ns_u64(const struct flit_tsc *c,
				       uint64_t ticks_delta)
{
	return (uint64_t)((double)ticks_delta * c->ns_per_tick + 0.5);
}

/* Ticks in `ns` nanoseconds (for deadlines kept in ticks). */
static inline uint64_t flit_tsc_ticks_in(const struct flit_tsc *c, double ns)
{
	return c->ns_per_tick > 0 ? (uint64_t)(ns / c->ns_per_tick) : (uint64_t)ns;
}

/* A TSC reading as CLOCK_MONOTONIC_RAW nanoseconds (drifts from the real
 * clock by the calibration error: recalibrate for long runs). */
static inline uint64_t flit_tsc_mono_ns(const struct flit_tsc *c, uint64_t ticks)
{
	double d = ((double)ticks - (double)c->ref_tick) * c->ns_per_tick;

	return (uint64_t)((double)c->ref_ns + d);
}

#ifdef __cplusplus
}
#endif
#endif /* FLIT_CLOCK_H */
