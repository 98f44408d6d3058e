// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer target for what a shm reader takes from a ring file that
 * another process writes (transports/shm/shm_ring.h): the geometry, a
 * session ring's topic table and the records of the data ring.
 *
 * A small session ring is set up (4 KiB data ring, 64 topics, 4 KiB of
 * names, 2 reader slots) in a buffer of exactly its size, and the input
 * is laid over it: byte 0 chooses whether the first part of the input
 * replaces the geometry (0x000 .. 0x14f, the check value recomputed when
 * bit 0 of byte 1 is set, so that damage past the check is reached), the
 * rest is copied over the topics line, the table (entries, ended log,
 * names) and the data ring in turn.  Then, as a reader does:
 *  - shm_ring_validate() on the buffer; if it accepts, the geometry is in
 *    range and the file's size is exactly what it says;
 *  - every published table entry (the count bounded by topics_max) through
 *    shm_ring_topic_get(): an accepted one gives a valid topic name of
 *    name_len bytes; every ended-log entry through shm_ring_ended_get():
 *    an accepted one names an index below topics_max;
 *  - a copying reader walks the data ring from position 0 for at most 256
 *    records: every frame it returns lies inside the ring and is no longer
 *    than max_frame.
 * The buffer is malloc'd at its exact size, so ASan flags any read past
 * it.  Any violation abort()s.
 *
 *   make fuzz-build && build/fuzz/fuzz_shm_ring tests/fuzz/corpus/shm_ring
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "shm/shm_ring.h"
#include "fuzz.h"

#define CAP     4096u
#define READERS 2u
#define TOPICS  64u
#define NAMES   4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t hsz = shm_hdr_size(READERS);
	uint64_t len = hsz + CAP + shm_table_size(TOPICS, NAMES, READERS);
	uint8_t *mem = aligned_alloc(4096, len);
	struct shm_hdr *h = (struct shm_hdr *)mem;
	char name[FLIT_TOPIC_MAX + 1];
	uint64_t first, created;

	if (!mem)
		return 0;
	memset(mem, 0, len);
	CHECK(shm_ring_init_session(mem, CAP, READERS, FLIT_SHM_OVERWRITE, 7, "f.ring",
				    TOPICS, NAMES) == 0);
	if (size >= 2 && (data[0] & 1)) {
		/* damage the geometry itself */
		size_t n = size - 2 < offsetof(struct shm_geom, check) ? size - 2
			: offsetof(struct shm_geom, check);
		memcpy(mem, data + 2, n);
		if (data[1] & 1)
			h->geom.check = shm_geom_check(&h->geom);
		data += 2 + n;
		size -= 2 + n;
	} else if (size) {
		data++;
		size--;
	}
	/* the rest over the topics line, the table and the data ring */
	struct { uint64_t off, n; } parts[] = {
		{ offsetof(struct shm_hdr, tl), sizeof(struct shm_topics_line) },
		{ hsz + CAP, len - hsz - CAP },
		{ hsz, CAP },
	};
	for (size_t i = 0; i < 3 && size; i++) {
		size_t n = size < parts[i].n ? size : parts[i].n;
		memcpy(mem + parts[i].off, data, n);
		data += n;
		size -= n;
	}

	if (shm_ring_validate(mem, len) == 0) {
		const struct shm_geom *g = &h->geom;
		CHECK(g->capacity >= 4096 && !(g->capacity & (g->capacity - 1)));
		CHECK(g->max_frame <= g->capacity / 4);
		CHECK((uint64_t)g->hdr_size + g->capacity +
		      shm_table_size(g->topics_max, g->names_size, g->max_readers) == len);
		if (g->topics_max) {
			uint32_t nt = atomic_load(&h->tl.ntopics), ne = atomic_load(&h->tl.nended);
			if (nt > g->topics_max)
				nt = g->topics_max;
			if (ne > g->topics_max)
				ne = g->topics_max;
			for (uint32_t i = 0; i < nt; i++)
				if (shm_ring_topic_get(mem, &h->geom, i, name, sizeof(name), &first, &created) == 0)
					CHECK(flit_topic_valid(name) &&
					      strlen(name) == shm_topic_ents(mem)[i].name_len);
			struct shm_ended e;
			for (uint32_t i = 0; i < ne; i++)
				if (shm_ring_ended_get(mem, &h->geom, i, &e) == 0)
					CHECK(e.idx < g->topics_max);
			/* out-of-range asks are refused, not read */
			CHECK(shm_ring_topic_get(mem, &h->geom, g->topics_max, name, sizeof(name),
						 &first, &created) == -EBADMSG);
			CHECK(shm_ring_ended_get(mem, &h->geom, g->topics_max, &e) == -EBADMSG);
		}
		/* a copying reader over the data ring */
		uint8_t *scratch = malloc(g->max_frame);
		if (scratch) {
			struct shm_rd r;
			shm_rd_init(&r, mem, NULL, scratch, true, 0);
			for (int k = 0; k < 256; k++) {
				const void *f;
				uint32_t fl;
				uint64_t p = r.pos;
				enum shm_rd_res res = shm_rd_next(&r, &f, &fl);
				if (res != SHM_RD_FRAME)
					break;
				CHECK(fl >= 24 && fl <= g->max_frame && (p & r.mask) + 8 + fl <= g->capacity);
				CHECK(r.pos > p);
			}
			free(scratch);
		}
	}
	free(mem);
	return 0;
}
