#include "kp/upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kp/client.h"
#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/server.h"
#include "kp/stats.h"

static void connect_next(struct upstream *up);

static void
set_state(struct upstream *up, enum upstream_state next)
{
	log_trace("upstream %s fd %d: state %d -> %d", up->key, up->fd, up->state, next);
	up->state = next;
}

static void
stop_watchers(struct upstream *up)
{
	struct ev_loop *loop = up->srv->loop;

	ev_io_stop(loop, &up->rio);
	ev_io_stop(loop, &up->wio);
	ev_timer_stop(loop, &up->connect_timer);
}

void
upstream_close(struct upstream *up)
{
	if (up->state == UPSTREAM_CLOSED)
		return;
	if (up->state == UPSTREAM_IDLE) {
		pool_remove(&up->idle);
		kp_stats.pool_idle--;
	}
	dns_cancel(&up->dns);
	stop_watchers(up);
	net_close(&up->fd);
	buf_put(up->in);
	up->in = NULL;
	up->owner = NULL;
	set_state(up, UPSTREAM_CLOSED);
	kp_stats.upstreams_open--;
	/* Freed later: a caller up the stack may still hold the pointer. */
	up->dead_next = up->srv->dead_upstreams;
	up->srv->dead_upstreams = up;
}

void
upstream_reap(struct server *srv)
{
	while (srv->dead_upstreams) {
		struct upstream *up = srv->dead_upstreams;

		srv->dead_upstreams = up->dead_next;
		free(up);
	}
}

void
upstream_watch(struct upstream *up, bool readable, bool writable)
{
	io_watch(up->srv->loop, &up->rio, &up->wio, readable, writable);
}

/* ---- idle in the pool ----------------------------------------------------- */

/*
 * While idle, readability means the origin closed the connection (or sent
 * something nobody asked for); either way it can no longer be used.
 */
static void
idle_readable(struct upstream *up)
{
	log_debug("upstream %s fd %d: closed by the origin while idle", up->key, up->fd);
	kp_stats.upstream_stale++;
	upstream_close(up);
}

void
upstream_pool_dropped(struct pool_entry *e, enum pool_drop_reason why)
{
	struct upstream *up = container_of(e, struct upstream, idle);

	if (why == POOL_DROP_EXPIRED)
		kp_stats.pool_expired++;
	else
		kp_stats.pool_evicted++;
	log_debug("upstream %s fd %d: %s", up->key, up->fd,
	          why == POOL_DROP_EXPIRED ? "idle timeout" : "evicted by a pool cap");
	upstream_close(up);
}

static double
idle_timeout_for(const struct upstream *up)
{
	double t = up->srv->cfg->idle_timeout;

	/*
	 * Never outstay the origin's own hint: a second of margin, because the
	 * origin's clock started when it sent the response, before ours did.
	 */
	if (up->keep_alive_hint >= 0) {
		double hint = up->keep_alive_hint > 1 ? up->keep_alive_hint - 1 : up->keep_alive_hint / 2;

		if (hint < t)
			t = hint;
	}
	return t;
}

/*
 * How many idle connections the descriptor budget (two a client) affords
 * now: one for every connected client that holds no upstream, since each of
 * them may send its next request any moment. This one's client is counted
 * as holding it still, which errs by one on the safe side.
 */
static size_t
idle_ceiling(void)
{
	uint64_t busy = kp_stats.upstreams_open - kp_stats.pool_idle;

	return kp_stats.clients_active > busy ? (size_t)(kp_stats.clients_active - busy) : 0;
}

void
upstream_release(struct upstream *up, bool reusable)
{
	double timeout;

	up->owner = NULL;
	up->exchanges++;
	if (!reusable) {
		upstream_close(up);
		return;
	}
	timeout = idle_timeout_for(up);
	/* Unforwarded bytes or a deadline already gone mean it is not clean enough. */
	if ((up->in && buf_len(up->in)) || timeout <= 0) {
		upstream_close(up);
		return;
	}
	buf_put(up->in);
	up->in = NULL;
	/* A connection became free: today the pool takes it; a request queue will come first. */
	pool_set_ceiling(up->srv->pool, idle_ceiling());
	if (!pool_put(up->srv->pool, up->key, &up->idle, timeout)) {
		upstream_close(up);
		return;
	}
	kp_stats.pool_idle++;
	set_state(up, UPSTREAM_IDLE);
	upstream_watch(up, true, false);
	log_debug("upstream %s fd %d: idle, kept %.1fs", up->key, up->fd, timeout);
}

/* ---- connecting ----------------------------------------------------------- */

static void
connected(struct upstream *up)
{
	struct client *c = up->owner;

	ev_timer_stop(up->srv->loop, &up->connect_timer);
	upstream_watch(up, false, false);
	if (net_tune_upstream(up->fd, up->srv->cfg) < 0)
		log_debug("upstream %s: socket options: %s", up->key, strerror(errno));
	set_state(up, UPSTREAM_BUSY);
	up->reused = false;
	log_debug("upstream %s fd %d: connected", up->key, up->fd);
	client_upstream_ready(c, up);
}

static void
fail(struct upstream *up, int status, const char *why)
{
	struct client *c = up->owner;

	kp_stats.upstream_connect_failures++;
	upstream_close(up);
	client_upstream_failed(c, status, why);
}

static void
connect_next(struct upstream *up)
{
	char addr[64];

	while (up->next_addr < up->addrs.count) {
		union dns_addr *a = &up->addrs.addr[up->next_addr++];
		socklen_t len = a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);

		if (a->sa.sa_family == AF_INET6)
			a->in6.sin6_port = htons(up->port);
		else
			a->in.sin_port = htons(up->port);
		net_close(&up->fd);
		up->fd = net_connect_start(&a->sa, len);
		if (up->fd < 0) {
			up->last_error = errno;
			log_debug("upstream %s: connect %s: %s", up->key,
			          net_addr_text(&a->sa, addr, sizeof(addr)), strerror(errno));
			continue;
		}
		kp_stats.upstream_connects++;
		set_state(up, UPSTREAM_CONNECTING);
		ev_io_set(&up->rio, up->fd, EV_READ);
		ev_io_set(&up->wio, up->fd, EV_WRITE);
		upstream_watch(up, false, true);
		ev_timer_set(&up->connect_timer, up->srv->cfg->connect_timeout, 0.);
		ev_timer_start(up->srv->loop, &up->connect_timer);
		return;
	}
	if (up->last_error == ETIMEDOUT)
		fail(up, 504, "timed out connecting to the origin");
	else
		fail(up, 502, up->last_error ? strerror(up->last_error) : "cannot connect to the origin");
}

static void
connect_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct upstream *up = container_of(w, struct upstream, connect_timer);

	(void)loop;
	(void)revents;
	log_debug("upstream %s: connect timed out", up->key);
	up->last_error = ETIMEDOUT;
	connect_next(up);
}

static void
resolved(struct dns_waiter *w, const struct dns_addrs *addrs, int error)
{
	struct upstream *up = container_of(w, struct upstream, dns);
	char why[300];

	if (error) {
		snprintf(why, sizeof(why), "cannot resolve %s: %s", up->host, dns_error_text(error));
		fail(up, 502, why);
		return;
	}
	up->addrs = *addrs;
	up->next_addr = 0;
	connect_next(up);
}

/* ---- I/O ------------------------------------------------------------------ */

static void
io_event(struct upstream *up, int revents)
{
	switch (up->state) {
	case UPSTREAM_CONNECTING:
		if (net_connect_finish(up->fd) < 0) {
			up->last_error = errno;
			log_debug("upstream %s: connect failed: %s", up->key, strerror(errno));
			connect_next(up);
		} else {
			connected(up);
		}
		break;
	case UPSTREAM_BUSY:
		client_upstream_event(up->owner, revents);
		break;
	case UPSTREAM_IDLE:
		idle_readable(up);
		break;
	case UPSTREAM_RESOLVING:
	case UPSTREAM_CLOSED:
		break;
	}
}

static void
read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	io_event(container_of(w, struct upstream, rio), revents);
}

static void
write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	io_event(container_of(w, struct upstream, wio), revents);
}

static struct upstream *
upstream_new(struct server *srv, struct client *c, const char *host, uint16_t port,
             const char *key)
{
	struct upstream *up = calloc(1, sizeof(*up));

	if (!up)
		return NULL;
	kp_stats.upstreams_open++;
	up->srv = srv;
	up->owner = c;
	up->fd = -1;
	up->port = port;
	up->keep_alive_hint = -1;
	snprintf(up->host, sizeof(up->host), "%s", host);
	snprintf(up->key, sizeof(up->key), "%s", key);
	ev_io_init(&up->rio, read_cb, -1, EV_READ);
	ev_io_init(&up->wio, write_cb, -1, EV_WRITE);
	ev_init(&up->connect_timer, connect_timeout_cb);
	up->dns.done = resolved;
	http_parser_init(&up->parser, HTTP_RESPONSE, srv->cfg->max_header_bytes,
	                 srv->cfg->max_header_bytes);
	set_state(up, UPSTREAM_RESOLVING);
	return up;
}

/* The freshest pooled connection that still looks alive, or NULL. */
static struct upstream *
take_pooled(struct server *srv, const char *key)
{
	struct pool_entry *e;

	while ((e = pool_take(srv->pool, key)) != NULL) {
		struct upstream *up = container_of(e, struct upstream, idle);

		kp_stats.pool_idle--;
		set_state(up, UPSTREAM_BUSY);
		if (net_idle_alive(up->fd))
			return up;
		log_debug("upstream %s fd %d: dead at reuse (peek)", up->key, up->fd);
		kp_stats.upstream_stale++;
		upstream_close(up);
	}
	return NULL;
}

struct upstream *
upstream_acquire(struct server *srv, struct client *c, const char *host, uint16_t port,
                 const char *key, bool allow_pooled)
{
	struct upstream *up;
	int error = 0;

	if (allow_pooled && (up = take_pooled(srv, key)) != NULL) {
		upstream_watch(up, false, false);
		up->owner = c;
		up->reused = true;
		up->keep_alive_hint = -1;
		kp_stats.upstream_reuses++;
		log_debug("upstream %s fd %d: reused (exchange %u)", up->key, up->fd,
		          up->exchanges + 1);
		client_upstream_ready(c, up);
		return NULL;
	}
	up = upstream_new(srv, c, host, port, key);
	if (!up) {
		client_upstream_failed(c, 503, "out of memory");
		return NULL;
	}
	switch (dns_lookup(host, &up->addrs, &error, &up->dns)) {
	case DNS_DONE:
		up->next_addr = 0;
		connect_next(up);
		break;
	case DNS_FAILED:
		resolved(&up->dns, NULL, error);
		break;
	case DNS_PENDING:
		break;
	}
	/* Answered already (a synchronous failure)? Then there is nothing to wait for. */
	return up->state == UPSTREAM_RESOLVING || up->state == UPSTREAM_CONNECTING ? up : NULL;
}
