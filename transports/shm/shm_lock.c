// SPDX-License-Identifier: BSD-2-Clause
/* The session writer lock's slow paths (see shm_lock.h). */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm/shm_lock.h"

bool shm_lock_biasable;
__thread uint32_t shm_lock_tid_cache;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_membarrier(void)
{
	shm_lock_biasable = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

void shm_lock_init_process(void)
{
	pthread_once(&once, register_membarrier);
}

uint32_t shm_lock_tid_slow(void)
{
	shm_lock_tid_cache = (uint32_t)syscall(SYS_gettid);
	return shm_lock_tid_cache;
}

/* We hold the spin lock: take the bias away from the thread that has it,
 * for good. */
static void bias_revoke(struct shm_lock *l, uint32_t me)
{
	uint32_t b = atomic_load(&l->bias);

	if (b == SHM_BIAS_REVOKED || b == me)
		return;
	if (b == SHM_BIAS_NONE) {
		/* nobody has it: nobody gets it any more (a CAS, against a
		 * first taker racing us) */
		if (atomic_compare_exchange_strong(&l->bias, &b, SHM_BIAS_REVOKED))
			return;
		if (b == SHM_BIAS_REVOKED || b == me)
			return;
	}
	atomic_store(&l->revoke, 1);
	/* a full barrier in every running thread of the process: the biased
	 * thread either stored in_cs before it (we see it, and wait) or
	 * loads revoke after it (and leaves the biased path) */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		__builtin_trap(); /* registered: cannot fail */
	while (atomic_load_explicit(&l->in_cs, memory_order_acquire))
		__builtin_ia32_pause();
	atomic_store(&l->bias, SHM_BIAS_REVOKED);
}

void shm_lock_take_spin(struct shm_lock *l, uint32_t me)
{
	while (atomic_exchange_explicit(&l->spin, 1, memory_order_acquire))
		while (atomic_load_explicit(&l->spin, memory_order_relaxed))
			__builtin_ia32_pause();
	bias_revoke(l, me);
	atomic_store_explicit(&l->owner, me, memory_order_relaxed);
	l->depth = 1;
	l->biased_hold = false;
}

bool shm_lock_try_spin(struct shm_lock *l, uint32_t me)
{
	if (atomic_exchange_explicit(&l->spin, 1, memory_order_acquire))
		return false;
	bias_revoke(l, me);
	atomic_store_explicit(&l->owner, me, memory_order_relaxed);
	l->depth = 1;
	l->biased_hold = false;
	return true;
}
