// SPDX-License-Identifier: BSD-2-Clause
/*
 * shm transport: the directory, the registry, discovery and the operations
 * table.  The design: shm.h; the writer side: shm_src.c; the reader side:
 * shm_rx.c; the ring: shm_ring.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "shm/shm.h"

/* ---- helpers ------------------------------------------------------------ */

int shm_ofd_lock(int fd, off_t byte, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

int shm_ofd_held(int fd, off_t byte)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

static int mkdir_shared(const char *path)
{
	if (mkdir(path, 01777) == 0) {
		chmod(path, 01777); /* umask applies to mkdir */
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	return -errno;
}

/* Topic -> file name: [A-Za-z0-9_.-] kept (no leading '.'), others %XX;
 * names that would be too long become "#<hash>" (the header holds the name). */
void shm_topic_to_name(const char *topic, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)topic; *p; p++) {
		bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
			    (*p == '.' && p != (const unsigned char *)topic);
		if (o + 4 > ENC_NAME_MAX)
			goto hashed;
		if (keep) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	snprintf(out + o, cap - o, ".ring");
	return;
hashed:
	snprintf(out, cap, "#%016llx.ring", (unsigned long long)flit_name_hash64(topic));
}

/* File name -> topic; false for hashed names (read the header instead). */
static bool name_to_topic(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name), o = 0;

	if (n < 6 || strcmp(name + n - 5, ".ring") || name[0] == '#' || name[0] == '.')
		return false;
	for (size_t i = 0; i < n - 5; i++) {
		unsigned v;
		if (o + 1 >= cap)
			return false;
		if (name[i] == '%') {
			if (i + 2 >= n - 5 || sscanf(name + i + 1, "%2x", &v) != 1)
				return false;
			out[o++] = (char)v;
			i += 2;
		} else {
			out[o++] = name[i];
		}
	}
	out[o] = 0;
	return o > 0;
}

void shm_registry_bump(struct flit_tp *tp)
{
	if (tp->reg)
		atomic_fetch_add(&tp->reg->gen, 1);
}

bool shm_is_stale(const struct flit_tp *tp, dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < tp->nstale; i++)
		if (tp->stale[i].dev == dev && tp->stale[i].ino == ino)
			return true;
	return false;
}

void shm_mark_stale(struct flit_tp *tp, dev_t dev, ino_t ino)
{
	if (tp->nstale == tp->capstale) {
		unsigned cap = tp->capstale ? tp->capstale * 2 : 8;
		void *p = realloc(tp->stale, cap * sizeof(*tp->stale));
		if (!p)
			return;
		tp->stale = p;
		tp->capstale = cap;
	}
	tp->stale[tp->nstale].dev = dev;
	tp->stale[tp->nstale].ino = ino;
	tp->nstale++;
}


void shm_remove_dead(struct flit_tp *tp, const char *path, dev_t dev, ino_t ino)
{
	struct stat st;

	/* only a session ring: an own ring's name is taken over by the
	 * topic's next writer (renamed over), never removed by readers */
	const char *base = strrchr(path, '/');
	if (!base || base[1] != '@')
		return;
	/* still that file, and its writer's lock free: dead (a ring is linked
	 * under its name only once its writer holds byte 0) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino &&
	    shm_ofd_held(fd, 0) == 0 && unlink(path) == 0) {
		flit_info("shm: removed %s: its writer died", path);
		shm_registry_bump(tp);
	}
	close(fd);
}

void shm_sweep_dead(struct flit_tp *tp)
{
	char path[PATH_MAX + 256];
	struct dirent *de;
	DIR *d = opendir(tp->dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		struct stat st;
		if (de->d_name[0] != '@' || n < 6 || strcmp(de->d_name + n - 5, ".ring"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tp->dir, de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		/* linked only once its writer held byte 0: free now, it died
		 * (or closed: then it unlinks it itself, unless it died first) */
		if (fstat(fd, &st) == 0 && shm_ofd_held(fd, 0) == 0) {
			struct shm_status_line stl;
			if (pread(fd, &stl, sizeof(stl), offsetof(struct shm_hdr, st)) == (ssize_t)sizeof(stl) &&
			    !atomic_load(&stl.closed))
				shm_remove_dead(tp, path, st.st_dev, st.st_ino);
		}
		close(fd);
	}
	closedir(d);
}

/* ---- transport instance ------------------------------------------------- */

static int shm_open_tp(struct flit_ctx *ctx, struct flit_tp **out)
{
	const struct flit_cfg_context *c = flit_ctx_cfg(ctx);
	struct flit_cfg_receiver rc;
	struct flit_tp *tp;
	char path[PATH_MAX + 16];
	int err;

	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return flit_err(ENOMEM, "shm: out of memory");
	tp->ctx = ctx;
	tp->reg_fd = -1;
	pthread_mutex_init(&tp->lock, NULL);
	shm_lock_init_process();
	flit_ctx_rcv_cfg(ctx, "", &rc);
	tp->discovery_ms = rc.discovery_ms;
	if ((err = mkdir_shared(c->shm_dir))) {
		free(tp);
		return flit_err(-err, "shm: cannot create directory %s", c->shm_dir);
	}
	if ((size_t)snprintf(tp->dir, sizeof(tp->dir), "%s/%s", c->shm_dir, c->domain) >= sizeof(tp->dir)) {
		free(tp);
		return flit_err(ENAMETOOLONG, "shm: directory name too long");
	}
	if ((err = mkdir_shared(tp->dir))) {
		free(tp);
		return flit_err(-err, "shm: cannot create directory %s", tp->dir);
	}

	/* The registry only speeds up discovery: without it (no permission),
	 * the periodic rescan still finds every source. */
	snprintf(path, sizeof(path), "%s/" REGISTRY_NAME, tp->dir);
	tp->reg_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (tp->reg_fd >= 0) {
		struct stat st;
		if (fstat(tp->reg_fd, &st) == 0 && st.st_size < 4096 &&
		    ftruncate(tp->reg_fd, 4096) < 0)
			flit_warn("shm: %s: cannot size registry", path);
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, tp->reg_fd, 0);
		if (m != MAP_FAILED) {
			tp->reg = m;
			if (tp->reg->magic != REGISTRY_MAGIC)
				tp->reg->magic = REGISTRY_MAGIC;
			tp->seen_gen = atomic_load(&tp->reg->gen) - 1; /* scan once */
		}
	}
	if (!tp->reg)
		flit_warn("shm: registry %s unavailable; discovery falls back to rescans every %u ms",
			  path, tp->discovery_ms);
	*out = tp;
	return 0;
}

static void shm_close_tp(struct flit_tp *tp)
{
	while (tp->atts)
		shm_att_detach(tp, tp->atts, 0);
	if (tp->reg)
		munmap(tp->reg, 4096);
	if (tp->reg_fd >= 0)
		close(tp->reg_fd);
	free(tp->stale);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
}

/* Read a hashed-name ring's topic from its header (bounded, validated). */
static bool header_topic(int fd, char *out, size_t cap)
{
	struct shm_geom g;

	if (pread(fd, &g, sizeof(g), 0) != (ssize_t)sizeof(g) || g.magic != SHM_MAGIC ||
	    g.check != shm_geom_check(&g) || g.topic_len >= sizeof(g.topic) ||
	    g.topic[g.topic_len] != 0 || g.topic_len >= cap)
		return false;
	memcpy(out, g.topic, g.topic_len + 1);
	return true;
}

/* Scan the directory and attach to every ring a subscriber wants.  Returns
 * the number of BOS events delivered; problems with single files are logged
 * (and remembered, so they are reported once). */
int shm_rescan(struct flit_tp *tp)
{
	char topic[FLIT_TOPIC_MAX + 1], path[PATH_MAX + 256];
	struct dirent *de;
	int events = 0;
	DIR *d = opendir(tp->dir);

	if (!d) {
		flit_warn("shm: cannot read directory %s: %s", tp->dir, strerror(errno));
		return 0;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool hashed = de->d_name[0] == '#';
		/* a session ring: watched for the topics it names */
		bool session = de->d_name[0] == '@';
		size_t nl = strlen(de->d_name);
		bool writable = true;
		int fd, err;

		if (session && (nl < 6 || strcmp(de->d_name + nl - 5, ".ring")))
			continue;
		if (!session && !hashed && !name_to_topic(de->d_name, topic, sizeof(topic)))
			continue;
		if (!session && !hashed && !flit_ctx_wants(tp->ctx, topic))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tp->dir, de->d_name);
		if (stat(path, &st) || !S_ISREG(st.st_mode) ||
		    shm_attached(tp, st.st_dev, st.st_ino) || shm_is_stale(tp, st.st_dev, st.st_ino))
			continue;
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == EACCES) {
			writable = false; /* e.g. group-readable ring: passive reader */
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		}
		if (fd < 0)
			continue; /* removed meanwhile, or not ours to read */
		if (hashed && (!header_topic(fd, topic, sizeof(topic)) ||
			       !flit_ctx_wants(tp->ctx, topic))) {
			close(fd);
			continue;
		}
		if (fstat(fd, &st)) {
			close(fd);
			continue;
		}
		err = shm_att_open(tp, fd, writable, path, &st);
		if (err < 0)
			flit_warn("%s", flit_errmsg());
		else
			events += err;
	}
	closedir(d);
	return events;
}

static int shm_subs_changed(struct flit_tp *tp)
{
	return shm_rx_subs_changed(tp);
}

static int shm_poll(struct flit_tp *tp, int limit, flit_frame_fn fn, void *arg)
{
	return shm_rx_poll(tp, limit, fn, arg);
}

const struct flit_transport_ops flit_shm_ops = {
	.name = "shm",
	.caps = FLIT_CAP_ZERO_COPY | FLIT_CAP_RELIABLE | FLIT_CAP_LOCAL,
	.open = shm_open_tp,
	.close = shm_close_tp,
	.src_size = sizeof(struct shm_topic),
	.src_open = shm_src_open,
	.src_close = shm_src_close,
	.send = shm_send,
	.claim = shm_claim,
	.commit = shm_commit,
	.abort = shm_abort,
	.flush = shm_flush,
	.receivers = shm_receivers,
	.max_msg = shm_max_msg,
	.next_seq = shm_next_seq,
	.src_counters = shm_src_counters,
	.subs_changed = shm_subs_changed,
	.poll = shm_poll,
};
