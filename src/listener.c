#include "kp/listener.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/cidr.h"
#include "kp/evglue.h"
#include "kp/net.h"
#include "kp/stats.h"

/* Accepts per readiness event: a burst of connects must not starve established clients. */
#define ACCEPTS_PER_EVENT 64
/* After descriptors ran out with nothing to give back: try again this much later. */
#define RETRY_SECONDS 0.1

/*
 * Closed at once, before it holds a slot or is read from: a stranger
 * learns nothing, not even which program listens.
 */
static bool
refused(struct listener *l, int fd, const struct sockaddr *peer)
{
	const struct kp_config *cfg = l->cfg;
	char who[64];

	if (!cfg->nallow || cidr_any_match(cfg->allow, cfg->nallow, peer))
		return false;
	close(fd);
	kp_stats.errors[KP_ERR_REFUSED]++;
	if (log_enabled(KP_LOG_INFO))
		log_limited(&l->refused_log, KP_LOG_INFO,
		            "%s: %s may not connect (see --allow): closed", l->what,
		            net_addr_text(peer, who, sizeof(who)));
	return true;
}

/*
 * No descriptor for a new connection: the owner frees one if it can;
 * otherwise the socket is left alone for a moment and peers wait in the
 * kernel's backlog. True: try accepting again now.
 */
static bool
out_of_descriptors(struct listener *l, int err)
{
	if (l->ops->free_descriptor && l->ops->free_descriptor(l))
		return true;
	log_limited(&l->short_log, KP_LOG_WARN,
	            "%s: accept: %s; new connections wait %g s (raise the fd limit or lower "
	            "--max-clients)",
	            l->what, strerror(err), RETRY_SECONDS);
	ev_io_stop(l->loop, &l->io);
	ev_timer_set(&l->retry, RETRY_SECONDS, 0.);
	ev_timer_start(l->loop, &l->retry);
	return false;
}

static void
accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct listener *l = container_of(w, struct listener, io);

	(void)loop;
	(void)revents;
	for (int i = 0; i < ACCEPTS_PER_EVENT && l->ops->has_room(l); i++) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = accept4(l->fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				if (out_of_descriptors(l, errno))
					continue;
				return;
			}
			if (!net_would_block() && errno != ECONNABORTED)
				log_limited(&l->error_log, KP_LOG_WARN, "%s: accept: %s", l->what,
				            strerror(errno));
			break;
		}
		if (!refused(l, fd, (struct sockaddr *)&peer))
			l->ops->accepted(l, fd, (struct sockaddr *)&peer);
	}
	/* At the cap, further peers wait in the kernel's backlog. */
	if (!l->ops->has_room(l))
		ev_io_stop(l->loop, &l->io);
}

static void
retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	listener_resume(container_of(w, struct listener, retry));
}

void
listener_start(struct listener *l, struct ev_loop *loop, int fd, const struct kp_config *cfg,
               const struct listener_ops *ops, const char *what)
{
	memset(l, 0, sizeof(*l));
	l->loop = loop;
	l->fd = fd;
	l->cfg = cfg;
	l->ops = ops;
	l->what = what;
	l->refused_log = (struct log_limit)LOG_LIMIT(10);
	l->short_log = (struct log_limit)LOG_LIMIT(10);
	l->error_log = (struct log_limit)LOG_LIMIT(10);
	ev_io_init(&l->io, accept_cb, fd, EV_READ);
	ev_init(&l->retry, retry_cb);
	ev_io_start(loop, &l->io);
}

void
listener_resume(struct listener *l)
{
	if (l->fd >= 0 && !ev_is_active(&l->io) && !ev_is_active(&l->retry) &&
	    l->ops->has_room(l))
		ev_io_start(l->loop, &l->io);
}

void
listener_close(struct listener *l)
{
	if (l->fd < 0)
		return;
	ev_io_stop(l->loop, &l->io);
	ev_timer_stop(l->loop, &l->retry);
	net_close(&l->fd);
}
