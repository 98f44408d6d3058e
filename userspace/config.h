/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Configuration: "scope.key = value" lines (or "[scope]" sections followed by
 * "key = value" lines, and topic-specific sections '[source "glob"]' /
 * '[receiver "glob"]').  Scopes: context, source, receiver.  Reference of
 * every key: docs/CONFIG.md.
 *
 * Precedence, lowest first: built-in defaults < config file (opts->config_file
 * or $FLIT_CONFIG) < environment FLIT_<SCOPE>_<KEY> (dots become '_', upper
 * case, e.g. FLIT_SOURCE_SHM_MODE=overwrite) < the context's inline config
 * string < topic sections of all of those, in the same order < the object's
 * own options string.
 *
 * Every key and value is validated when it is loaded: an unknown key or a bad
 * value fails with -EINVAL and a trail naming "file:line: ..." (or
 * "environment FLIT_X: ..." or "<origin>:line: ...").
 */
#ifndef FLIT_CONFIG_H
#define FLIT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#define FLIT_NAME_MAX 64
#define FLIT_PATH_MAX 256

enum flit_shm_mode {
	FLIT_SHM_PACED = 0,     /* lossless: writer waits for the slowest reader */
	FLIT_SHM_OVERWRITE = 1, /* writer never waits; lapped readers see loss */
};

struct flit_cfg_context {
	char domain[FLIT_NAME_MAX];    /* context.domain = default ([A-Za-z0-9_.-]+) */
	char shm_dir[FLIT_PATH_MAX];   /* context.shm_dir = /dev/shm/flit (absolute) */
	int log_level;                 /* context.log_level = warn (error|warn|info|debug) */
};

struct flit_cfg_source {
	char transport[16];            /* source.transport = shm (shm) */
	enum flit_shm_mode shm_mode;   /* source.shm.mode = paced (paced|overwrite) */
	uint64_t shm_capacity;         /* source.shm.capacity = 1M: power of two, 64K..1G, suffixes K M G */
	uint32_t shm_max_readers;      /* source.shm.max_readers = 16 (1..1024) */
	uint32_t shm_file_mode;        /* source.shm.file_mode = 0600 (octal; 0600, 0640 or 0660) */
	uint32_t shm_liveness_ms;      /* source.shm.liveness_ms = 10: how often a blocked writer checks readers (1..10000) */
	bool timestamps;               /* source.timestamps = false: stamp messages with CLOCK_REALTIME */
	bool batch;                    /* source.batch = false: pack messages into frames until batch_max or flush */
	uint32_t batch_max;            /* source.batch_max = 8K: largest frame, bytes (256..1M) */
};

struct flit_cfg_receiver {
	bool timestamps;               /* receiver.timestamps = false: stamp arrival with CLOCK_REALTIME */
	uint32_t shm_liveness_ms;      /* receiver.shm.liveness_ms = 10: how often an idle reader checks its writer (1..10000) */
	uint32_t discovery_ms;         /* receiver.discovery_ms = 100: rescan for new sources at least this often (1..60000) */
};

struct flit_cfg_entry;

/* A loaded configuration: validated entries, applied per object. */
struct flit_cfg {
	struct flit_cfg_entry *entries;
	unsigned n, cap;
};

void flit_cfg_init(struct flit_cfg *cfg);
void flit_cfg_free(struct flit_cfg *cfg);

/* Append the file's entries.  -ENOENT etc. if unreadable, -EINVAL with
 * "path:line: ..." on a bad line. */
int flit_cfg_load_file(struct flit_cfg *cfg, const char *path);
/* Append entries from text; origin names it in errors ("<ctx options>"). */
int flit_cfg_load_string(struct flit_cfg *cfg, const char *text,
			 const char *origin);
/* Append entries from FLIT_<SCOPE>_<KEY> environment variables
 * (FLIT_CONFIG itself is the file name and is not a key). */
int flit_cfg_load_env(struct flit_cfg *cfg);

/* Resolve the effective settings.  `extra` is an object's own options text
 * (may be NULL), validated here: -EINVAL with "<origin>:line: ..." on error. */
int flit_cfg_context(const struct flit_cfg *cfg, struct flit_cfg_context *out);
int flit_cfg_source(const struct flit_cfg *cfg, const char *topic,
		    const char *extra, struct flit_cfg_source *out);
int flit_cfg_receiver(const struct flit_cfg *cfg, const char *topic,
		      const char *extra, struct flit_cfg_receiver *out);

#endif /* FLIT_CONFIG_H */
