/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The writer lock of a shm session (several publishers, one ring), biased
 * to the thread that takes it first.
 *
 * A spin lock costs a locked instruction per message, and on x86 a locked
 * instruction is a full barrier: it waits until the stores of the previous
 * message (ring lines that a reader on another core holds) are out.  At
 * tens of millions of messages a second that was a third of the sending
 * CPU.  Most sessions are written by one thread (a market-data handler's),
 * so the lock is biased to the first thread that takes it: that thread
 * takes and gives it with plain stores and a load (`in_cs`, `revoke`),
 * ordered by the compiler only.  Any other thread takes the spin lock and
 * then revokes the bias for good: it sets `revoke`, runs
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts a full barrier
 * into every running thread of the process, and waits until `in_cs` is 0.
 * Either the biased thread stored `in_cs` before that barrier, and the
 * revoker sees it and waits, or it loads `revoke` after it and sees 1, and
 * goes the spin lock's way (the asymmetric Dekker of userspace RCU).
 * Without membarrier (a kernel before 4.14, a seccomp filter) there is no
 * bias: every thread takes the spin lock.
 *
 * The lock is recursive for its holder (a claim holds it until its commit;
 * close and flush take it again).  A claim's hold is the spin lock's even
 * on the biased thread, and its commit must come from the same thread.
 */
#ifndef FLIT_SHM_LOCK_H
#define FLIT_SHM_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SHM_BIAS_NONE    0u          /* not biased yet */
#define SHM_BIAS_REVOKED UINT32_MAX  /* a second thread came: spin lock only */

struct shm_lock {
	_Atomic uint32_t in_cs;     /* the biased thread holds it */
	_Atomic uint32_t revoke;    /* another thread is taking the bias away */
	_Atomic uint32_t bias;      /* the thread (tid) it is biased to */
	_Atomic uint32_t owner;     /* the holder's tid, 0 */
	uint32_t depth;             /* how often the holder holds it */
	bool biased_hold;           /* the holder holds it through the bias */
	_Atomic int spin;           /* the spin lock */
};

/* Can this process revoke a bias (membarrier registered)? */
extern bool shm_lock_biasable;
/* Register for membarrier once per process; sets shm_lock_biasable. */
void shm_lock_init_process(void);

uint32_t shm_lock_tid_slow(void);
extern __thread uint32_t shm_lock_tid_cache;

static inline uint32_t shm_lock_tid(void)
{
	uint32_t t = shm_lock_tid_cache;
	return __builtin_expect(t != 0, 1) ? t : shm_lock_tid_slow();
}

/* Out of line: the spin lock, revoking another thread's bias. */
void shm_lock_take_spin(struct shm_lock *l, uint32_t me);
/* Out of line: try the spin lock once; on success as shm_lock_take_spin(). */
bool shm_lock_try_spin(struct shm_lock *l, uint32_t me);

/* The biased path: true if taken. */
static inline bool shm_lock_try_bias(struct shm_lock *l, uint32_t me)
{
	uint32_t b = atomic_load_explicit(&l->bias, memory_order_relaxed);

	if (__builtin_expect(b != me, 0)) {
		if (b != SHM_BIAS_NONE || !shm_lock_biasable)
			return false;
		uint32_t none = SHM_BIAS_NONE;
		if (!atomic_compare_exchange_strong(&l->bias, &none, me))
			return false;
	}
	atomic_store_explicit(&l->in_cs, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only */
	if (__builtin_expect(atomic_load_explicit(&l->revoke, memory_order_relaxed) != 0, 0)) {
		atomic_store_explicit(&l->in_cs, 0, memory_order_release);
		return false;
	}
	atomic_thread_fence(memory_order_acquire);
	return true;
}

static inline void shm_lock_take(struct shm_lock *l)
{
	uint32_t me = shm_lock_tid();

	if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me) {
		l->depth++;
		return;
	}
	if (__builtin_expect(shm_lock_try_bias(l, me), 1)) {
		atomic_store_explicit(&l->owner, me, memory_order_relaxed);
		l->depth = 1;
		l->biased_hold = true;
		return;
	}
	shm_lock_take_spin(l, me);
}

/* Without waiting (or again, by its holder): true if taken. */
static inline bool shm_lock_try(struct shm_lock *l)
{
	uint32_t me = shm_lock_tid();

	if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me) {
		l->depth++;
		return true;
	}
	if (shm_lock_try_bias(l, me)) {
		atomic_store_explicit(&l->owner, me, memory_order_relaxed);
		l->depth = 1;
		l->biased_hold = true;
		return true;
	}
	return shm_lock_try_spin(l, me);
}

/* For a claim: the spin lock even on the biased thread (see above). */
static inline void shm_lock_take_for_claim(struct shm_lock *l)
{
	uint32_t me = shm_lock_tid();

	if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me) {
		l->depth++;
		return;
	}
	shm_lock_take_spin(l, me);
}

static inline void shm_lock_give(struct shm_lock *l)
{
	if (--l->depth)
		return;
	atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
	if (l->biased_hold) {
		l->biased_hold = false;
		atomic_store_explicit(&l->in_cs, 0, memory_order_release);
	} else {
		atomic_store_explicit(&l->spin, 0, memory_order_release);
	}
}

#endif /* FLIT_SHM_LOCK_H */
