// SPDX-License-Identifier: BSD-2-Clause
/* TSC calibration against CLOCK_MONOTONIC_RAW.  See include/flit/clock.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <flit/clock.h>

#include "error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* Paired readings taken per calibration end; the tightest bracket wins. */
#define CAL_SAMPLES 32

uint64_t flit_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
static bool cpuid_invariant_tsc(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return false;
	if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
		return false;
	return d & (1u << 8);
}

/* The kernel's view: it sets constant_tsc and nonstop_tsc from CPUID and
 * from what it knows of the model and the hypervisor. */
static bool cpuinfo_invariant_tsc(void)
{
	char line[4096];
	bool constant = false, nonstop = false, found = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok;

		if (strncmp(line, "flags", 5) != 0)
			continue;
		found = true;   /* the first CPU's flags line is enough */
		for (tok = strtok_r(line, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save)) {
			if (!strcmp(tok, "constant_tsc"))
				constant = true;
			else if (!strcmp(tok, "nonstop_tsc"))
				nonstop = true;
		}
	}
	fclose(f);
	return constant && nonstop;
}

/* One paired reading: a TSC value and the CLOCK_MONOTONIC_RAW time at the
 * same instant, within +-width/2.  The clock reads bracket the TSC read. */
struct pair {
	uint64_t tick;
	uint64_t ns;
	uint64_t width;
};

static struct pair best_pair(void)
{
	struct pair best = { .width = UINT64_MAX };

	for (int i = 0; i < CAL_SAMPLES; i++) {
		uint64_t a = flit_monotonic_raw_ns();
		uint64_t t = flit_tsc_ticks_ordered();
		uint64_t b = flit_monotonic_raw_ns();

		if (b < a)
			continue;
		if (b - a < best.width) {
			best.width = b - a;
			best.tick = t;
			best.ns = a + (b - a) / 2;
		}
	}
	return best;
}

int flit_tsc_calibrate(struct flit_tsc *c, unsigned ms)
{
	struct pair p0, p1;
	struct timespec nap;
	double ns_per_tick;

	memset(c, 0, sizeof(*c));
	c->invariant = cpuid_invariant_tsc() || cpuinfo_invariant_tsc();
	if (!c->invariant)
		return flit_err(ENOTSUP, "tsc: not invariant (no CPUID 80000007h "
				"EDX[8], no constant_tsc+nonstop_tsc)");
	if (ms == 0)
		ms = 100;

	p0 = best_pair();
	nap.tv_sec = ms / 1000;
	nap.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&nap, &nap) && errno == EINTR)
		;
	p1 = best_pair();

	if (p0.width == UINT64_MAX || p1.width == UINT64_MAX ||
	    p1.tick <= p0.tick || p1.ns <= p0.ns)
		return flit_err(EIO, "tsc: calibration: clock or tsc went backwards");
	ns_per_tick = (double)(p1.ns - p0.ns) / (double)(p1.tick - p0.tick);
	/* 10 MHz .. 20 GHz: anything else is a broken counter or clock. */
	if (!(ns_per_tick > 0.05 && ns_per_tick < 100.0))
		return flit_err(EIO, "tsc: calibration gave %.4f ns/tick", ns_per_tick);

	c->ns_per_tick = ns_per_tick;
	c->ref_tick = p1.tick;
	c->ref_ns = p1.ns;
	return 0;
}
#else
int flit_tsc_calibrate(struct flit_tsc *c, unsigned ms)
{
	(void)ms;
	memset(c, 0, sizeof(*c));
	return flit_err(ENOTSUP, "tsc: no time-stamp counter on this architecture");
}
#endif
