// SPDX-License-Identifier: BSD-2-Clause
/*
 * Configuration: syntax, precedence, validation at load time, and error
 * trails that name the file and line (userspace/config.c, docs/CONFIG.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "config.h"
#include "error.h"

/* ---- helpers ----------------------------------------------------------- */

/* A config file under /tmp holding `text` (len bytes; -1: strlen). */
struct tmpfile {
	char path[64];
};

static void tmp_write(struct tmpfile *t, const char *text, long len)
{
	size_t n = len < 0 ? strlen(text) : (size_t)len;
	int fd;

	strcpy(t->path, "/tmp/flit-test-config-XXXXXX");
	fd = mkstemp(t->path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	close(fd);
}

static void tmp_remove(struct tmpfile *t)
{
	unlink(t->path);
}

/* Load `text` as a file (removed again before returning; t->path stays
 * for checking messages); returns flit_cfg_load_file()'s result. */
static int load_as_file(struct flit_cfg *cfg, const char *text, struct tmpfile *t)
{
	int rc;

	tmp_write(t, text, -1);
	rc = flit_cfg_load_file(cfg, t->path);
	tmp_remove(t);
	return rc;
}

/* The trail contains "<path>:<line>: <what>". */
static void assert_trail(const char *origin, unsigned line, const char *what)
{
	char want[512];

	if (line)
		snprintf(want, sizeof(want), "%s:%u: %s", origin, line, what);
	else
		snprintf(want, sizeof(want), "%s: %s", origin, what);
	if (!strstr(flit_errmsg(), want))
		fail_msg("trail '%s' lacks '%s'", flit_errmsg(), want);
}

/* Loading `text` (as a file) fails with -EINVAL at `line` saying `what`,
 * and adds no entries. */
static void assert_file_rejected(const char *text, unsigned line, const char *what)
{
	struct flit_cfg cfg;
	struct tmpfile t;

	unsigned n;
	int rc;

	flit_cfg_init(&cfg);
	rc = load_as_file(&cfg, text, &t);
	n = cfg.n;
	flit_cfg_free(&cfg); /* before any assertion can leave the test */
	assert_int_equal(rc, -EINVAL);
	assert_trail(t.path, line, what);
	assert_int_equal(n, 0);
}

static void assert_source_eq(const struct flit_cfg_source *a,
			     const struct flit_cfg_source *b)
{
	assert_string_equal(a->transport, b->transport);
	assert_int_equal(a->shm_mode, b->shm_mode);
	assert_int_equal(a->shm_capacity, b->shm_capacity);
	assert_int_equal(a->shm_max_readers, b->shm_max_readers);
	assert_int_equal(a->shm_file_mode, b->shm_file_mode);
	assert_int_equal(a->shm_liveness_ms, b->shm_liveness_ms);
	assert_int_equal(a->timestamps, b->timestamps);
	assert_int_equal(a->batch, b->batch);
	assert_int_equal(a->batch_max, b->batch_max);
}

static void assert_receiver_eq(const struct flit_cfg_receiver *a,
			       const struct flit_cfg_receiver *b)
{
	assert_int_equal(a->timestamps, b->timestamps);
	assert_int_equal(a->shm_liveness_ms, b->shm_liveness_ms);
	assert_int_equal(a->discovery_ms, b->discovery_ms);
}

static void assert_context_eq(const struct flit_cfg_context *a,
			      const struct flit_cfg_context *b)
{
	assert_string_equal(a->domain, b->domain);
	assert_string_equal(a->shm_dir, b->shm_dir);
	assert_int_equal(a->log_level, b->log_level);
}

/* The source settings `text` gives topic `topic`. */
static struct flit_cfg_source source_from(const char *text, const char *topic)
{
	struct flit_cfg_source s;
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg, text, "<test>"), 0);
	assert_int_equal(flit_cfg_source(&cfg, topic, NULL, &s), 0);
	flit_cfg_free(&cfg);
	return s;
}

/* ---- defaults and plain settings --------------------------------------- */

static void defaults_are_documented_values(void **state)
{
	struct flit_cfg_context c;
	struct flit_cfg_source s;
	struct flit_cfg_receiver r;
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_context(&cfg, &c), 0);
	assert_string_equal(c.domain, "default");
	assert_string_equal(c.shm_dir, "/dev/shm/flit");
	assert_int_equal(c.log_level, FLIT_LOG_WARN);

	assert_int_equal(flit_cfg_source(&cfg, "any.topic", NULL, &s), 0);
	assert_string_equal(s.transport, "shm");
	assert_int_equal(s.shm_mode, FLIT_SHM_PACED);
	assert_int_equal(s.shm_capacity, 1 << 20);
	assert_int_equal(s.shm_max_readers, 16);
	assert_int_equal(s.shm_file_mode, 0600);
	assert_int_equal(s.shm_liveness_ms, 10);
	assert_false(s.timestamps);
	assert_false(s.batch);
	assert_int_equal(s.batch_max, 8192);

	assert_int_equal(flit_cfg_receiver(&cfg, NULL, NULL, &r), 0);
	assert_false(r.timestamps);
	assert_int_equal(r.shm_liveness_ms, 10);
	assert_int_equal(r.discovery_ms, 100);
	flit_cfg_free(&cfg);
	flit_cfg_free(NULL);
}

static void file_sets_scoped_keys(void **state)
{
	static const char text[] =
		"context.domain = lab-1.eu_west\n"
		"context.shm_dir = /run/flit\n"
		"context.log_level = debug\n"
		"source.transport = shm\n"
		"source.shm.mode = overwrite\n"
		"source.shm.capacity = 4M\n"
		"source.shm.max_readers = 1024\n"
		"source.shm.file_mode = 0660\n"
		"source.shm.liveness_ms = 10000\n"
		"source.timestamps = true\n"
		"source.batch = on\n"
		"source.batch_max = 64K\n"
		"receiver.timestamps = yes\n"
		"receiver.shm.liveness_ms = 1\n"
		"receiver.discovery_ms = 60000\n";
	struct flit_cfg_context c;
	struct flit_cfg_source s;
	struct flit_cfg_receiver r;
	struct flit_cfg cfg;
	struct tmpfile t;

	flit_cfg_init(&cfg);
	assert_int_equal(load_as_file(&cfg, text, &t), 0);
	assert_int_equal(cfg.n, 15);

	assert_int_equal(flit_cfg_context(&cfg, &c), 0);
	assert_string_equal(c.domain, "lab-1.eu_west");
	assert_string_equal(c.shm_dir, "/run/flit");
	assert_int_equal(c.log_level, FLIT_LOG_DEBUG);

	assert_int_equal(flit_cfg_source(&cfg, "t", NULL, &s), 0);
	assert_string_equal(s.transport, "shm");
	assert_int_equal(s.shm_mode, FLIT_SHM_OVERWRITE);
	assert_int_equal(s.shm_capacity, 4 << 20);
	assert_int_equal(s.shm_max_readers, 1024);
	assert_int_equal(s.shm_file_mode, 0660);
	assert_int_equal(s.shm_liveness_ms, 10000);
	assert_true(s.timestamps);
	assert_true(s.batch);
	assert_int_equal(s.batch_max, 65536);

	assert_int_equal(flit_cfg_receiver(&cfg, "t", NULL, &r), 0);
	assert_true(r.timestamps);
	assert_int_equal(r.shm_liveness_ms, 1);
	assert_int_equal(r.discovery_ms, 60000);
	flit_cfg_free(&cfg);
}

static void later_lines_override_earlier(void **state)
{
	struct flit_cfg_source s = source_from(
		"source.shm.max_readers = 4\n"
		"source.shm.max_readers = 8\n", "t");

	assert_int_equal(s.shm_max_readers, 8);
}

static void section_syntax_equivalent_to_prefixed(void **state)
{
	static const char prefixed[] =
		"context.domain = d1\n"
		"source.shm.mode = overwrite\n"
		"source.shm.capacity = 2M\n"
		"source.batch = yes\n"
		"receiver.discovery_ms = 7\n"
		"receiver.timestamps = on\n";
	static const char sections[] =
		"[context]\n"
		"domain = d1\n"
		"[source]\n"
		"shm.mode = overwrite\n"
		"source.shm.capacity = 2M   # qualified with its own scope\n"
		"  batch = yes\n"
		"[ receiver ]\n"
		"discovery_ms = 7\n"
		"receiver.timestamps = on\n";
	struct flit_cfg_context c1, c2;
	struct flit_cfg_source s1, s2;
	struct flit_cfg_receiver r1, r2;
	struct flit_cfg a, b;

	flit_cfg_init(&a);
	flit_cfg_init(&b);
	assert_int_equal(flit_cfg_load_string(&a, prefixed, "<a>"), 0);
	assert_int_equal(flit_cfg_load_string(&b, sections, "<b>"), 0);
	assert_int_equal(a.n, b.n);

	assert_int_equal(flit_cfg_context(&a, &c1), 0);
	assert_int_equal(flit_cfg_context(&b, &c2), 0);
	assert_context_eq(&c1, &c2);
	assert_string_equal(c2.domain, "d1");
	assert_int_equal(flit_cfg_source(&a, "t", NULL, &s1), 0);
	assert_int_equal(flit_cfg_source(&b, "t", NULL, &s2), 0);
	assert_source_eq(&s1, &s2);
	assert_int_equal(s2.shm_capacity, 2 << 20);
	assert_true(s2.batch);
	assert_int_equal(flit_cfg_receiver(&a, "t", NULL, &r1), 0);
	assert_int_equal(flit_cfg_receiver(&b, "t", NULL, &r2), 0);
	assert_receiver_eq(&r1, &r2);
	assert_int_equal(r2.discovery_ms, 7);
	flit_cfg_free(&a);
	flit_cfg_free(&b);
}

static void key_in_other_scope_section_rejected(void **state)
{
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg,
		"[source]\nreceiver.timestamps = true\n", "<s>"), -EINVAL);
	assert_trail("<s>", 2, "key 'receiver.timestamps' not allowed in [source]");
	assert_int_equal(flit_cfg_load_string(&cfg,
		"[source]\ntimestamps = true\n[receiver]\nshm.mode = paced\n", "<s>"),
		-EINVAL);
	assert_trail("<s>", 4, "unknown key 'receiver.shm.mode'");
	assert_int_equal(cfg.n, 0);
	flit_cfg_free(&cfg);
}

/* ---- topic sections and precedence ------------------------------------- */

static void topic_section_applies_only_to_matching_topic(void **state)
{
	static const char text[] =
		"[source \"md.*\"]\n"
		"shm.capacity = 4M\n"
		"[source \"md.fx.[ab]*\"]\n"
		"shm.mode = overwrite\n"
		"[receiver \"md.*\"]\n"
		"timestamps = true\n"
		"[source]\n"
		"batch = true\n";
	struct flit_cfg_source s;
	struct flit_cfg_receiver r;
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg, text, "<t>"), 0);

	assert_int_equal(flit_cfg_source(&cfg, "md.eq.aapl", NULL, &s), 0);
	assert_int_equal(s.shm_capacity, 4 << 20);
	assert_int_equal(s.shm_mode, FLIT_SHM_PACED);
	assert_true(s.batch); /* [source] after a topic section is global again */

	assert_int_equal(flit_cfg_source(&cfg, "md.fx.aud", NULL, &s), 0);
	assert_int_equal(s.shm_capacity, 4 << 20);
	assert_int_equal(s.shm_mode, FLIT_SHM_OVERWRITE);

	assert_int_equal(flit_cfg_source(&cfg, "ref.md", NULL, &s), 0);
	assert_int_equal(s.shm_capacity, 1 << 20);
	assert_int_equal(s.shm_mode, FLIT_SHM_PACED);
	assert_true(s.batch);

	/* no topic: only entries outside topic sections */
	assert_int_equal(flit_cfg_source(&cfg, NULL, NULL, &s), 0);
	assert_int_equal(s.shm_capacity, 1 << 20);

	assert_int_equal(flit_cfg_receiver(&cfg, "md.x", NULL, &r), 0);
	assert_true(r.timestamps);
	assert_int_equal(flit_cfg_receiver(&cfg, "ref.x", NULL, &r), 0);
	assert_false(r.timestamps);
	assert_int_equal(flit_cfg_receiver(&cfg, NULL, NULL, &r), 0);
	assert_false(r.timestamps);
	flit_cfg_free(&cfg);
}

static void topic_section_beats_later_unscoped_entries(void **state)
{
	struct flit_cfg_source s;
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg,
		"[source \"a.*\"]\nshm.max_readers = 3\n", "<file>"), 0);
	assert_int_equal(flit_cfg_load_string(&cfg,
		"source.shm.max_readers = 9\n", "<ctx options>"), 0);
	assert_int_equal(flit_cfg_source(&cfg, "a.b", NULL, &s), 0);
	assert_int_equal(s.shm_max_readers, 3);
	assert_int_equal(flit_cfg_source(&cfg, "b.a", NULL, &s), 0);
	assert_int_equal(s.shm_max_readers, 9);

	/* among topic sections, load order decides */
	assert_int_equal(flit_cfg_load_string(&cfg,
		"[source \"*\"]\nshm.max_readers = 5\n", "<more>"), 0);
	assert_int_equal(flit_cfg_source(&cfg, "a.b", NULL, &s), 0);
	assert_int_equal(s.shm_max_readers, 5);
	flit_cfg_free(&cfg);
}

static void object_options_override_file(void **state)
{
	static const char text[] =
		"source.shm.mode = overwrite\n"
		"[source \"t.*\"]\n"
		"shm.max_readers = 2\n"
		"[receiver]\n"
		"discovery_ms = 50\n";
	struct flit_cfg_source s, before;
	struct flit_cfg_receiver r;
	struct flit_cfg cfg;
	struct tmpfile t;

	flit_cfg_init(&cfg);
	assert_int_equal(load_as_file(&cfg, text, &t), 0);

	assert_int_equal(flit_cfg_source(&cfg, "t.1",
		"shm.mode = paced\n# comment\nsource.shm.max_readers = 6\nbatch=1", &s), 0);
	assert_int_equal(s.shm_mode, FLIT_SHM_PACED);
	assert_int_equal(s.shm_max_readers, 6);
	assert_true(s.batch);

	assert_int_equal(flit_cfg_receiver(&cfg, "t.1", "discovery_ms = 5", &r), 0);
	assert_int_equal(r.discovery_ms, 5);

	/* bad object options: -EINVAL naming "<object options>:line", and
	 * *out untouched */
	assert_int_equal(flit_cfg_source(&cfg, "t.1", NULL, &before), 0);
	s = before;
	assert_int_equal(flit_cfg_source(&cfg, "t.1", "batch = 1\nshm.capacity = 3M\n", &s),
			 -EINVAL);
	assert_trail("<object options>", 2,
		     "bad value '3M' for source.shm.capacity: must be a power of two between 64K and 1G");
	assert_source_eq(&s, &before);

	assert_int_equal(flit_cfg_source(&cfg, "t.1", "foo = 1", &s), -EINVAL);
	assert_trail("<object options>", 1, "unknown key 'source.foo'");
	assert_int_equal(flit_cfg_source(&cfg, "t.1", "receiver.timestamps = 1", &s), -EINVAL);
	assert_trail("<object options>", 1,
		     "key 'receiver.timestamps' not allowed in source options");
	assert_int_equal(flit_cfg_receiver(&cfg, "t.1", "[receiver]\n", &r), -EINVAL);
	assert_trail("<object options>", 1, "sections are not allowed in receiver options");
	flit_cfg_free(&cfg);
}

static void env_overrides_file(void **state)
{
	struct flit_cfg_context c;
	struct flit_cfg_source s;
	struct flit_cfg_receiver r;
	struct flit_cfg cfg;
	struct tmpfile t;

	flit_cfg_init(&cfg);
	assert_int_equal(load_as_file(&cfg,
		"source.shm.mode = paced\n"
		"source.shm.max_readers = 4\n"
		"context.domain = from-file\n", &t), 0);

	setenv("FLIT_SOURCE_SHM_MODE", "overwrite", 1);
	setenv("FLIT_SOURCE_SHM_MAX_READERS", "32", 1);
	setenv("FLIT_CONTEXT_DOMAIN", "from-env", 1);
	setenv("FLIT_CONTEXT_SHM_DIR", "/tmp/flit-env", 1);
	setenv("FLIT_RECEIVER_DISCOVERY_MS", "250", 1);
	/* not keys: the file name, and variables outside the three scopes */
	setenv("FLIT_CONFIG", "/nonexistent/flit.conf", 1);
	setenv("FLIT_TOOLS_DIR", "/somewhere", 1);
	assert_int_equal(flit_cfg_load_env(&cfg), 0);
	unsetenv("FLIT_SOURCE_SHM_MODE");
	unsetenv("FLIT_SOURCE_SHM_MAX_READERS");
	unsetenv("FLIT_CONTEXT_DOMAIN");
	unsetenv("FLIT_CONTEXT_SHM_DIR");
	unsetenv("FLIT_RECEIVER_DISCOVERY_MS");
	unsetenv("FLIT_CONFIG");
	unsetenv("FLIT_TOOLS_DIR");

	assert_int_equal(flit_cfg_source(&cfg, "t", NULL, &s), 0);
	assert_int_equal(s.shm_mode, FLIT_SHM_OVERWRITE);
	assert_int_equal(s.shm_max_readers, 32);
	assert_int_equal(flit_cfg_context(&cfg, &c), 0);
	assert_string_equal(c.domain, "from-env");
	assert_string_equal(c.shm_dir, "/tmp/flit-env");
	assert_int_equal(flit_cfg_receiver(&cfg, "t", NULL, &r), 0);
	assert_int_equal(r.discovery_ms, 250);
	flit_cfg_free(&cfg);
}

static void env_unknown_key_or_bad_value_names_variable(void **state)
{
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	setenv("FLIT_SOURCE_FOO", "1", 1);
	assert_int_equal(flit_cfg_load_env(&cfg), -EINVAL);
	assert_trail("environment FLIT_SOURCE_FOO", 0, "unknown key 'source.foo'");
	unsetenv("FLIT_SOURCE_FOO");

	setenv("FLIT_SOURCE_SHM_MODE", "fast", 1);
	assert_int_equal(flit_cfg_load_env(&cfg), -EINVAL);
	assert_trail("environment FLIT_SOURCE_SHM_MODE", 0,
		     "bad value 'fast' for source.shm.mode: must be paced or overwrite");
	unsetenv("FLIT_SOURCE_SHM_MODE");
	assert_int_equal(cfg.n, 0);

	assert_int_equal(flit_cfg_load_env(&cfg), 0);
	flit_cfg_free(&cfg);
}

/* ---- errors ------------------------------------------------------------ */

static void unknown_key_names_file_and_line(void **state)
{
	assert_file_rejected("# comment\nsource.batch = true\nsource.foo = 1\n",
			     3, "unknown key 'source.foo'");
	assert_file_rejected("[source]\n\nfoo = 1\n", 3, "unknown key 'source.foo'");
	assert_file_rejected("domain = x\n", 1, "unknown key 'domain'");
	assert_file_rejected("receiver.shm.mode = paced\n", 1,
			     "unknown key 'receiver.shm.mode'");
}

static void bad_value_names_file_and_line(void **state)
{
	static const struct {
		const char *line, *what;
	} cases[] = {
		{ "source.shm.capacity = 96K",
		  "bad value '96K' for source.shm.capacity: must be a power of two between 64K and 1G" },
		{ "source.shm.capacity = 2G",
		  "bad value '2G' for source.shm.capacity: must be a power of two between 64K and 1G" },
		{ "source.shm.capacity = 32K", "bad value '32K' for source.shm.capacity" },
		{ "source.shm.capacity = 99999999999999999999G",
		  "bad value '99999999999999999999G' for source.shm.capacity" },
		{ "source.shm.capacity = 1T", "bad value '1T' for source.shm.capacity" },
		{ "source.shm.capacity = K", "bad value 'K' for source.shm.capacity" },
		{ "source.shm.max_readers = 0",
		  "bad value '0' for source.shm.max_readers: must be an integer between 1 and 1024" },
		{ "source.shm.max_readers = 1025", "bad value '1025' for source.shm.max_readers" },
		{ "source.shm.max_readers = -1", "bad value '-1' for source.shm.max_readers" },
		{ "source.shm.max_readers = 12abc", "bad value '12abc' for source.shm.max_readers" },
		{ "source.shm.max_readers = 99999999999999999999999",
		  "bad value '99999999999999999999999' for source.shm.max_readers" },
		{ "source.shm.liveness_ms = 10001", "bad value '10001' for source.shm.liveness_ms" },
		{ "receiver.discovery_ms = 60001",
		  "bad value '60001' for receiver.discovery_ms: must be an integer between 1 and 60000" },
		{ "source.shm.mode = fast",
		  "bad value 'fast' for source.shm.mode: must be paced or overwrite" },
		{ "context.log_level = verbose",
		  "bad value 'verbose' for context.log_level: must be error, warn, info or debug" },
		{ "source.timestamps = maybe",
		  "bad value 'maybe' for source.timestamps: must be true or false" },
		{ "receiver.timestamps = 2", "bad value '2' for receiver.timestamps" },
		{ "source.shm.file_mode = 0644",
		  "bad value '0644' for source.shm.file_mode: must be 0600, 0640 or 0660" },
		{ "source.shm.file_mode = 0999", "bad value '0999' for source.shm.file_mode" },
		{ "source.shm.file_mode = rw", "bad value 'rw' for source.shm.file_mode" },
		{ "context.shm_dir = dev/shm",
		  "bad value 'dev/shm' for context.shm_dir: must be an absolute path" },
		{ "context.domain = bad domain!",
		  "bad value 'bad domain!' for context.domain: must be 1 to 63 characters" },
		{ "context.domain = a234567890123456789012345678901234567890123456789012345678901234",
		  "bad value 'a234567890123456789012345678901234567890123456789012345678901234' for context.domain" },
		{ "context.domain =", "bad value '' for context.domain" },
		{ "source.batch_max = 255",
		  "bad value '255' for source.batch_max: must be between 256 and 1M" },
		{ "source.batch_max = 2M", "bad value '2M' for source.batch_max" },
		{ "source.transport = carrier-pigeon",
		  "bad value 'carrier-pigeon' for source.transport: must be shm, udp or xdp" },
		/* udp: addresses, ports, interfaces */
		{ "context.udp.resolver = 10.0.0.1:14400",
		  "bad value '10.0.0.1:14400' for context.udp.resolver: must be a multicast group:port" },
		{ "context.udp.resolver = 239.1.1.1", "bad value '239.1.1.1' for context.udp.resolver" },
		{ "context.udp.resolver = 239.1.1.1:0", "bad value '239.1.1.1:0' for context.udp.resolver" },
		{ "context.udp.resolver = 239.1.1.1:70000", "bad value '239.1.1.1:70000' for context.udp.resolver" },
		{ "context.udp.resolver = 239.1.1:14400", "bad value '239.1.1:14400' for context.udp.resolver" },
		{ "context.udp.resolver = 239.1.1.256:1", "bad value '239.1.1.256:1' for context.udp.resolver" },
		{ "context.udp.interface = nosuchif0",
		  "bad value 'nosuchif0' for context.udp.interface: must name an existing network interface" },
		{ "context.udp.interface = a-name-much-too-long-for-linux",
		  "bad value 'a-name-much-too-long-for-linux' for context.udp.interface" },
		{ "context.udp.backend = dpdk",
		  "bad value 'dpdk' for context.udp.backend: must be sockets or io_uring" },
		{ "context.udp.impair = loss=200%", "bad value 'loss=200%' for context.udp.impair" },
		{ "context.transports = shm,tcp", "bad value 'shm,tcp' for context.transports" },
		{ "context.transports = udp,xdp",
		  "bad value 'udp,xdp' for context.transports: must list transports from shm, udp, xdp "
		  "(comma-separated; udp or xdp, not both)" },
		{ "context.xdp.mode = turbo", "bad value 'turbo' for context.xdp.mode: must be auto, native or skb" },
		{ "context.xdp.frames = 1000",
		  "bad value '1000' for context.xdp.frames: must be a power of two, an integer between 64 and 1048576" },
		{ "context.xdp.frame_size = 3000", "bad value '3000' for context.xdp.frame_size" },
		{ "context.xdp.zerocopy = maybe", "bad value 'maybe' for context.xdp.zerocopy: must be auto, off or on" },
		{ "source.udp.group = 10.1.2.3", "bad value '10.1.2.3' for source.udp.group: must be a multicast group" },
		{ "source.udp.group = 239.1.0.0/8", "bad value '239.1.0.0/8' for source.udp.group" },
		{ "source.udp.port = 0", "bad value '0' for source.udp.port: must be an integer between 1 and 65535" },
		{ "source.udp.port = 65536", "bad value '65536' for source.udp.port" },
		{ "source.udp.ctl_port = http", "bad value 'http' for source.udp.ctl_port" },
		{ "source.udp.max_datagram = 70000", "bad value '70000' for source.udp.max_datagram" },
		{ "source.udp.mode = broadcast",
		  "bad value 'broadcast' for source.udp.mode: must be multicast or unicast" },
		{ "source.udp.rate_limit = 10Mbps", "bad value '10Mbps' for source.udp.rate_limit: must be bits per second" },
		{ "receiver.udp.static = 10.0.0.1", "bad value '10.0.0.1' for receiver.udp.static: must be address:port" },
		{ "receiver.udp.static = host:1", "bad value 'host:1' for receiver.udp.static" },
	};
	char text[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text),
			 "source.batch = true\n\n%s  # the bad one\nsource.batch = false\n",
			 cases[i].line);
		assert_file_rejected(text, 3, cases[i].what);
	}
}

static void udp_values_are_parsed(void **state)
{
	struct flit_cfg cfg;
	struct flit_cfg_context cc;
	struct flit_cfg_source sc;
	struct flit_cfg_receiver rc;
	(void)state;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg,
		"context.transports = udp, shm\n"
		"context.udp.interface = lo\n"
		"context.udp.resolver = off\n"
		"context.udp.backend = io_uring\n"
		"context.udp.impair = loss=2.5%,dup=1,seed=9\n"
		"source.transport = udp\n"
		"source.udp.group = 239.10.0.0/16\n"
		"source.udp.rate_limit = 250M\n"
		"source.udp.retx_rate_limit = 5k\n"
		"[receiver \"st.*\"]\n"
		"udp.static = 10.0.0.1:14600\n", "<t>"), 0);
	assert_int_equal(flit_cfg_context(&cfg, &cc), 0);
	assert_string_equal(cc.transports, "udp, shm");
	assert_string_equal(cc.udp_interface, "lo");
	assert_string_equal(cc.udp_resolver, "off");
	assert_int_equal(cc.udp_backend, 1);
	assert_int_equal(flit_cfg_source(&cfg, "x", NULL, &sc), 0);
	assert_string_equal(sc.transport, "udp");
	assert_string_equal(sc.udp_group, "239.10.0.0/16");
	assert_int_equal(sc.udp_rate_limit, 250000000ull);
	assert_int_equal(sc.udp_retx_rate_limit, 5000ull);
	assert_int_equal(sc.udp_max_datagram, 1472);
	assert_int_equal(flit_cfg_receiver(&cfg, "st.a", NULL, &rc), 0);
	assert_string_equal(rc.udp_static, "10.0.0.1:14600");
	assert_int_equal(flit_cfg_receiver(&cfg, "other", NULL, &rc), 0);
	assert_string_equal(rc.udp_static, "");
	flit_cfg_free(&cfg);
}

static void malformed_line_names_line(void **state)
{
	char *long_line;

	assert_file_rejected("source.batch = 1\nsource.batch true\n", 2,
			     "expected 'key = value'");
	assert_file_rejected("\n\n = 5\n", 3, "expected 'key = value'");
	assert_file_rejected("[source\nbatch = 1\n", 1,
			     "unterminated section header");
	assert_file_rejected("[sauce]\n", 1, "unknown section 'sauce'");
	assert_file_rejected("[source] batch = 1\n", 1,
			     "unexpected text after section header");
	assert_file_rejected("[source \"abc]\n", 1, "unterminated quoted string");
	assert_file_rejected("[source \"\"]\n", 1, "empty topic pattern");
	assert_file_rejected("[source x]\n", 1, "bad section header");
	assert_file_rejected("context.shm_dir = \"/tmp/x\n", 1,
			     "unterminated quoted string");
	assert_file_rejected("context.shm_dir = \"/tmp/x\" y\n", 1,
			     "unexpected text after quoted value");
	{
		static const char nul[] = "source.batch = 1\nsource.b\0atch = 1\n";
		struct flit_cfg cfg;
		struct tmpfile t;
		int rc;

		flit_cfg_init(&cfg);
		tmp_write(&t, nul, sizeof(nul) - 1);
		rc = flit_cfg_load_file(&cfg, t.path);
		tmp_remove(&t);
		assert_int_equal(rc, -EINVAL);
		assert_trail(t.path, 2, "NUL byte in line");
		assert_int_equal(cfg.n, 0);
		flit_cfg_free(&cfg);
	}

	/* 4096 bytes per line are fine, 4097 are not */
	long_line = malloc(8192);
	assert_non_null(long_line);
	memset(long_line, ' ', 8192);
	memcpy(long_line + 4096 - 16, "source.batch = 1", 16);
	strcpy(long_line + 4096, "\n");
	{
		struct flit_cfg cfg;
		struct tmpfile t;

		flit_cfg_init(&cfg);
		assert_int_equal(load_as_file(&cfg, long_line, &t), 0);
		assert_int_equal(flit_cfg_load_string(&cfg, long_line, "<s>"), 0);
		assert_int_equal(cfg.n, 2);
		flit_cfg_free(&cfg);
	}
	memset(long_line, ' ', 8192);
	memcpy(long_line + 4097 - 16, "source.batch = 1", 16);
	strcpy(long_line + 4097, "\n");
	assert_file_rejected(long_line, 1, "line too long");
	{
		struct flit_cfg cfg;

		flit_cfg_init(&cfg);
		assert_int_equal(flit_cfg_load_string(&cfg, long_line, "<s>"), -EINVAL);
		assert_trail("<s>", 1, "line too long");
		flit_cfg_free(&cfg);
	}
	free(long_line);
}

static void missing_file_names_path(void **state)
{
	static const char path[] = "/tmp/flit-test-config-does-not-exist.conf";
	char want[256];
	struct flit_cfg cfg;

	unlink(path);
	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_file(&cfg, path), -ENOENT);
	snprintf(want, sizeof(want), "config file %s: cannot open (%s)", path,
		 strerror(ENOENT));
	if (!strstr(flit_errmsg(), want))
		fail_msg("trail '%s' lacks '%s'", flit_errmsg(), want);

	/* a directory opens but cannot be read */
	assert_true(flit_cfg_load_file(&cfg, "/tmp") < 0);
	assert_non_null(strstr(flit_errmsg(), "config file /tmp: "));
	assert_int_equal(cfg.n, 0);
	flit_cfg_free(&cfg);
}

static void context_key_in_topic_section_rejected(void **state)
{
	assert_file_rejected("[source \"md.*\"]\nshm.mode = paced\ncontext.domain = x\n",
			     3, "context key 'context.domain' not allowed in topic section [source \"md.*\"]");
	assert_file_rejected("[receiver \"*\"]\ncontext.log_level = info\n",
			     2, "context key 'context.log_level' not allowed in topic section");
	assert_file_rejected("[context \"x\"]\n", 1, "section [context] cannot be topic-specific");
}

static void failed_load_leaves_config_unchanged(void **state)
{
	struct flit_cfg_source s;
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg, "source.shm.max_readers = 5\n", "<a>"), 0);
	assert_int_equal(flit_cfg_load_string(&cfg,
		"source.shm.max_readers = 7\n[source \"x\"]\nbatch = 1\nbogus = 1\n", "<b>"),
		-EINVAL);
	assert_trail("<b>", 4, "unknown key 'source.bogus'");
	assert_int_equal(cfg.n, 1);
	assert_int_equal(flit_cfg_source(&cfg, "x", NULL, &s), 0);
	assert_int_equal(s.shm_max_readers, 5);
	assert_false(s.batch);
	flit_cfg_free(&cfg);
}

/* ---- syntax details ---------------------------------------------------- */

static void quoted_values_and_comments(void **state)
{
	static const char text[] =
		"# full-line comment\n"
		"; another one\n"
		"   \t# indented comment\n"
		"\n"
		"context.shm_dir = \"/tmp/a b # not a comment\"  # but this is\n"
		"context.domain = \"quoted\" ; trailing\n"
		"source.shm.mode = overwrite # trailing\n"
		"\tsource.batch\t=\tyes\t;\ttrailing\r\n"
		"[receiver] # after a section\n"
		"discovery_ms = \"42\"\n";
	struct flit_cfg_context c;
	struct flit_cfg_source s;
	struct flit_cfg_receiver r;
	struct flit_cfg cfg;
	struct tmpfile t;

	flit_cfg_init(&cfg);
	assert_int_equal(load_as_file(&cfg, text, &t), 0);
	assert_int_equal(flit_cfg_context(&cfg, &c), 0);
	assert_string_equal(c.shm_dir, "/tmp/a b # not a comment");
	assert_string_equal(c.domain, "quoted");
	assert_int_equal(flit_cfg_source(&cfg, "t", NULL, &s), 0);
	assert_int_equal(s.shm_mode, FLIT_SHM_OVERWRITE);
	assert_true(s.batch);
	assert_int_equal(flit_cfg_receiver(&cfg, "t", NULL, &r), 0);
	assert_int_equal(r.discovery_ms, 42);
	flit_cfg_free(&cfg);

	/* '#' inside a word is part of the value; escapes in quotes */
	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg,
		"context.shm_dir = /tmp/a#b\n"
		"context.shm_dir = \"/tmp/q\\\"uote\\\\d\"\n", "<s>"), 0);
	assert_int_equal(cfg.n, 2);
	assert_int_equal(flit_cfg_context(&cfg, &c), 0);
	assert_string_equal(c.shm_dir, "/tmp/q\"uote\\d");
	flit_cfg_free(&cfg);
	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg, "context.shm_dir = /tmp/a#b", "<s>"), 0);
	assert_int_equal(flit_cfg_context(&cfg, &c), 0);
	assert_string_equal(c.shm_dir, "/tmp/a#b");
	flit_cfg_free(&cfg);
}

static void size_suffixes(void **state)
{
	static const struct {
		const char *text;
		uint64_t want;
	} cap[] = {
		{ "65536", 65536 }, { "64K", 64 << 10 }, { "64k", 64 << 10 },
		{ "1M", 1 << 20 }, { "512m", 512u << 20 }, { "1G", 1u << 30 },
		{ "1024K", 1 << 20 }, { "\"2M\"", 2 << 20 },
	};
	static const struct {
		const char *text;
		uint32_t want;
	} bmax[] = {
		{ "256", 256 }, { "1000", 1000 }, { "1K", 1024 }, { "1M", 1 << 20 },
	};
	char text[128];

	for (size_t i = 0; i < sizeof(cap) / sizeof(cap[0]); i++) {
		snprintf(text, sizeof(text), "source.shm.capacity = %s", cap[i].text);
		assert_int_equal(source_from(text, "t").shm_capacity, cap[i].want);
	}
	for (size_t i = 0; i < sizeof(bmax) / sizeof(bmax[0]); i++) {
		snprintf(text, sizeof(text), "source.batch_max = %s", bmax[i].text);
		assert_int_equal(source_from(text, "t").batch_max, bmax[i].want);
	}
}

static void bool_and_enum_spellings(void **state)
{
	static const char *const yes[] = { "true", "yes", "on", "1", "TRUE", "Yes" };
	static const char *const no[] = { "false", "no", "off", "0", "OFF" };
	char text[128];

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		snprintf(text, sizeof(text), "source.timestamps = %s", yes[i]);
		assert_true(source_from(text, "t").timestamps);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		snprintf(text, sizeof(text), "source.timestamps = on\nsource.timestamps = %s", no[i]);
		assert_false(source_from(text, "t").timestamps);
	}
	assert_int_equal(source_from("source.shm.mode = Overwrite", "t").shm_mode,
			 FLIT_SHM_OVERWRITE);
	assert_int_equal(source_from("source.shm.file_mode = 640", "t").shm_file_mode, 0640);
	assert_int_equal(source_from("Source.Shm.Mode = overwrite", "t").shm_mode,
			 FLIT_SHM_OVERWRITE);
}

static void string_origin_named_in_errors(void **state)
{
	struct flit_cfg cfg;

	flit_cfg_init(&cfg);
	assert_int_equal(flit_cfg_load_string(&cfg, "source.batch = 1\nsource.batch = 2\n",
					      "<ctx options>"), -EINVAL);
	assert_trail("<ctx options>", 2, "bad value '2' for source.batch");
	assert_int_equal(flit_cfg_load_string(&cfg, NULL, "<ctx options>"), 0);
	assert_int_equal(flit_cfg_load_string(&cfg, "", "<ctx options>"), 0);
	assert_int_equal(cfg.n, 0);
	flit_cfg_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_documented_values),
		cmocka_unit_test(file_sets_scoped_keys),
		cmocka_unit_test(later_lines_override_earlier),
		cmocka_unit_test(section_syntax_equivalent_to_prefixed),
		cmocka_unit_test(key_in_other_scope_section_rejected),
		cmocka_unit_test(topic_section_applies_only_to_matching_topic),
		cmocka_unit_test(topic_section_beats_later_unscoped_entries),
		cmocka_unit_test(object_options_override_file),
		cmocka_unit_test(env_overrides_file),
		cmocka_unit_test(env_unknown_key_or_bad_value_names_variable),
		cmocka_unit_test(unknown_key_names_file_and_line),
		cmocka_unit_test(bad_value_names_file_and_line),
		cmocka_unit_test(udp_values_are_parsed),
		cmocka_unit_test(malformed_line_names_line),
		cmocka_unit_test(missing_file_names_path),
		cmocka_unit_test(context_key_in_topic_section_rejected),
		cmocka_unit_test(failed_load_leaves_config_unchanged),
		cmocka_unit_test(quoted_values_and_comments),
		cmocka_unit_test(size_suffixes),
		cmocka_unit_test(bool_and_enum_spellings),
		cmocka_unit_test(string_origin_named_in_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
