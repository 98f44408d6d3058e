/* SPDX-License-Identifier: BSD-2-Clause */
/* What every libFuzzer target of tests/fuzz/ shares: the entry point's
 * prototype and CHECK(), which aborts (a crash libFuzzer reports, with the
 * input) when an invariant of the code under test does not hold. */
#ifndef FLIT_FUZZ_H
#define FLIT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c))                                                      \
			abort();                                               \
	} while (0)

#endif /* FLIT_FUZZ_H */
