// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rdma transport (design: rc.h): its devices, open and close, and its
 * operations.  Source side: rc_src.c; receive side: rc_rx.c; connection
 * messages: wire.c; RDMA multicast: ud_path.c under transports/dgram/.
 */
#include "rdma/rc.h"

int rc_dev_index(const struct flit_tp *tp, const struct ibv_context *verbs)
{
	for (unsigned i = 0; i < tp->ndev; i++)
		if (tp->dev[i].verbs == verbs)
			return (int)i;
	return -1;
}

const char *rc_dev_name(const struct ibv_context *verbs)
{
	return verbs && verbs->device ? ibv_get_device_name(verbs->device) : "?";
}

/* ibv_reg_mr with a readable failure (memlock limits are the usual cause). */
struct ibv_mr *rc_reg_mr(struct ibv_pd *pd, void *p, size_t len, int access,
			     const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, access);
	if (!mr) {
		int e = errno;
		flit_err(e, "rdma: cannot register %zu bytes of %s on %s: %s%s", len, what,
			 rc_dev_name(pd->context), strerror(e),
			 e == ENOMEM || e == EPERM ? " (locked-memory limit: raise ulimit -l)" : "");
		errno = e;
	}
	return mr;
}

int rc_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}


/* ---- the transport ------------------------------------------------------------ */

void rc_describe_update(struct flit_tp *tp, const struct rsess *s)
{
	char where[48] = "-";
	size_t off = 0;

	off += (size_t)snprintf(tp->desc + off, sizeof(tp->desc) - off, "rdma: RC, device%s",
				tp->ndev > 1 ? "s" : "");
	for (unsigned i = 0; i < tp->ndev && off < sizeof(tp->desc); i++)
		off += (size_t)snprintf(tp->desc + off, sizeof(tp->desc) - off, "%s%s", i ? "," : " ",
					rc_dev_name(tp->dev[i].verbs));
	if (tp->lid)
		flit_ep_str(&tp->laddr, where, sizeof(where));
	if (off < sizeof(tp->desc) && s)
		snprintf(tp->desc + off, sizeof(tp->desc) - off,
			 "; sources listen on %s, %s, frames <= %u B, %u slots, inline <= %u B",
			 where, s->mode == FLIT_RDMA_WIRE_WRITE ? "RDMA WRITE with immediate" : "SEND/RECV",
			 s->frame_max, s->nslots, s->inline_max);
}

static int rdma_open(struct flit_ctx *ctx, struct flit_tp **out)
{
	struct ibv_device **list;
	int n = 0;

	/* the library's own question first, for a clear answer */
	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (!list || n <= 0)
		return flit_err(ENODEV, "rdma: no RDMA device (ibv_get_device_list found none%s%s: no RDMA NIC, "
				"no Soft-RoCE/rxe device, or no RDMA support in this kernel)",
				list ? "" : ": ", list ? "" : strerror(errno));
	struct flit_tp *tp = calloc(1, sizeof(*tp));
	if (!tp)
		return flit_err(ENOMEM, "rdma: out of memory");
	tp->ctx = ctx;
	tp->cc = flit_ctx_cfg(ctx);
	tp->domain = flit_domain_id(tp->cc->domain);
	tp->wakefd = -1;
	while (!tp->rcv_id)
		if (getrandom(&tp->rcv_id, sizeof(tp->rcv_id), 0) != sizeof(tp->rcv_id))
			tp->rcv_id = mono() ^ (uint64_t)getpid() << 32 ^ (uintptr_t)tp;
	pthread_mutex_init(&tp->lock, NULL);
	int err;
	tp->devlist = rdma_get_devices(&n);
	if (!tp->devlist || n <= 0) {
		err = flit_err(ENODEV, "rdma: no RDMA device (rdma_get_devices found none)");
		goto fail;
	}
	for (int i = 0; i < n && i < MAX_DEVS; i++) {
		tp->dev[i].verbs = tp->devlist[i];
		tp->dev[i].pd = ibv_alloc_pd(tp->devlist[i]);
		if (!tp->dev[i].pd) {
			err = flit_err(errno, "rdma: cannot allocate a protection domain on %s: %s",
				       rc_dev_name(tp->devlist[i]), strerror(errno));
			goto fail;
		}
		tp->ndev++;
	}
	tp->rch = rdma_create_event_channel();
	if (!tp->rch) {
		err = flit_err(errno, "rdma: cannot create an event channel: %s (is rdma_ucm loaded?)",
			       strerror(errno));
		goto fail;
	}
	if ((err = rc_nonblock(tp->rch->fd))) {
		err = flit_err(-err, "rdma: event channel: %s", strerror(-err));
		goto fail;
	}
	rc_describe_update(tp, NULL);
	*out = tp;
	return 0;
fail:
	if (tp->rch)
		rdma_destroy_event_channel(tp->rch);
	for (unsigned i = 0; i < tp->ndev; i++)
		ibv_dealloc_pd(tp->dev[i].pd);
	if (tp->devlist)
		rdma_free_devices(tp->devlist);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
	return err;
}

static void rdma_close(struct flit_tp *tp)
{
	rc_rx_close(tp);
	rc_listen_stop(tp);
	rdma_destroy_event_channel(tp->rch);
	for (unsigned i = 0; i < tp->ndev; i++)
		ibv_dealloc_pd(tp->dev[i].pd);
	rdma_free_devices(tp->devlist);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
}

static const char *rdma_describe(const struct flit_tp *tp)
{
	return tp->desc;
}

const struct flit_transport_ops flit_rdma_ops = {
	.name = "rdma",
	.caps = FLIT_CAP_RELIABLE | FLIT_CAP_ZERO_COPY,
	.open = rdma_open,
	.close = rdma_close,
	.src_open = rdma_src_open,
	.src_close = rdma_src_close,
	.send = rdma_send,
	.claim = rdma_claim,
	.commit = rdma_commit,
	.abort = rdma_abort,
	.flush = rdma_flush,
	.receivers = rdma_receivers,
	.max_msg = rdma_max_msg,
	.next_seq = rdma_next_seq,
	.src_counters = rdma_src_counters,
	.subs_changed = rdma_subs_changed,
	.poll = rdma_poll,
	.describe = rdma_describe,
	.res_found = rdma_res_found,
};
