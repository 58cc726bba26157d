#include "kp/dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/server.h"
#include "kp/stats.h"
#include "kp/upstream.h"

/*
 * Everything dispatch knows about one host:port. It lives while the host
 * has a connection (connecting, busy or idle) or a waiting request, and is
 * freed by the checker once it has neither.
 */
struct dispatch_host {
	struct table_node node;          /* in d->hosts, keyed by key */
	struct dispatch *d;
	struct upstream_waiter *oldest, *newest;   /* the queue */
	unsigned queued;
	unsigned open;                   /* counted connections: connecting, busy or idle */
	unsigned racing;                 /* unbound connects in flight (race mode) */
	struct dispatch_host *check_next;
	bool to_check;                   /* on d->to_check */
	uint16_t port;
	bool restricted;                 /* its connections obey the destination rules */
	bool tls;                        /* its connections speak TLS */
	char name[256];
};

const char *const dispatch_source_names[3] = {
	[DISPATCH_FROM_POOL] = "pooled",
	[DISPATCH_FROM_CONNECT] = "new",
	[DISPATCH_FROM_FREED] = "freed-up",
};

static struct dispatch_host *
host_get(struct dispatch *d, const struct dispatch_target *t)
{
	struct dispatch_host *h = TABLE_GET(&d->hosts, t->key, struct dispatch_host, node);

	if (h && !h->d) {
		h->d = d;
		h->port = t->port;
		h->restricted = t->restricted;
		h->tls = t->tls;
		snprintf(h->name, sizeof(h->name), "%s", t->host);
	}
	return h;
}

/* The checker looks at h at the end of this loop iteration. */
static void
schedule_check(struct dispatch_host *h)
{
	if (h->to_check)
		return;
	h->to_check = true;
	h->check_next = h->d->to_check;
	h->d->to_check = h;
}

static bool
under_cap(const struct dispatch_host *h)
{
	return h->d->max_per_host == 0 || h->open < h->d->max_per_host;
}

/* ---- the queue ------------------------------------------------------------ */

static void
enqueue(struct dispatch_host *h, struct upstream_waiter *w)
{
	w->host = h;
	w->next = NULL;
	w->prev = h->newest;
	if (h->newest)
		h->newest->next = w;
	else
		h->oldest = w;
	h->newest = w;
	h->queued++;
	kp_stats.queued++;
}

static void
dequeue(struct upstream_waiter *w)
{
	struct dispatch_host *h = w->host;

	if (w->prev)
		w->prev->next = w->next;
	else
		h->oldest = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		h->newest = w->prev;
	w->prev = w->next = NULL;
	w->host = NULL;
	h->queued--;
	kp_stats.queued--;
	kp_stats.queue_waits++;
	kp_stats.queue_wait_seconds += ev_now(h->d->srv->loop) - w->since;
	if (h->queued == 0 && h->open == 0)
		schedule_check(h);
}

/* Breaks the link between a waiter and the connect its arrival started. */
static void
unlink_connect(struct upstream_waiter *w)
{
	if (w->connect) {
		w->connect->trigger = NULL;
		w->connect = NULL;
	}
}

/* ---- answers -------------------------------------------------------------- */

static void
serve(struct upstream_waiter *w, struct upstream *up, enum dispatch_source source)
{
	switch (source) {
	case DISPATCH_FROM_POOL:
		kp_stats.requests_on_reused++;
		kp_stats.upstream_reuses++;
		break;
	case DISPATCH_FROM_FREED:
		kp_stats.requests_on_freed++;
		kp_stats.upstream_reuses++;
		break;
	case DISPATCH_FROM_CONNECT:
		kp_stats.requests_on_new++;
		kp_stats.connects_won++;
		break;
	}
	upstream_hand_to(up, w);
	w->source = source;
	log_debug("upstream %s fd %d: %s (exchange %u)", up->key, up->conn.fd,
	          dispatch_source_names[source], up->exchanges + 1);
	w->ready(w, up);
}

/*
 * Starts a connection for h on w's behalf. bound: it is w's alone (a
 * fresh connection, or race mode off); otherwise it races for the queue.
 * The outcome may come back before this returns.
 */
static void
start_connect(struct dispatch_host *h, struct upstream_waiter *w, bool bound)
{
	struct upstream *up = upstream_open(h->d->srv, h->name, h->port, h->node.key, h->tls);

	if (!up) {
		if (w->host)
			dequeue(w);
		schedule_check(h);
		w->failed(w, 503, "out of memory");
		return;
	}
	kp_stats.connects_started++;
	up->host = h;
	up->restricted = h->restricted;
	h->open++;
	up->bound = bound;
	if (!bound)
		h->racing++;
	up->trigger = w;
	w->connect = up;
	upstream_connect(up);
}

void
dispatch_request(struct dispatch *d, struct upstream_waiter *w, const struct dispatch_target *t,
                 enum dispatch_how how)
{
	struct dispatch_host *h;
	struct upstream *up;

	w->host = NULL;
	w->connect = NULL;
	w->prev = w->next = NULL;
	w->since = ev_now(d->srv->loop);
	if (how == DISPATCH_TUNNEL) {
		/* Raw bytes to host:port: never pooled, so never counted per host. */
		if (!(up = upstream_open(d->srv, t->host, t->port, t->key, false))) {
			w->failed(w, 503, "out of memory");
			return;
		}
		kp_stats.connects_started++;
		up->restricted = t->restricted;
		up->bound = true;
		up->trigger = w;
		w->connect = up;
		upstream_connect(up);
		return;
	}
	if (!(h = host_get(d, t))) {
		w->failed(w, 503, "out of memory");
		return;
	}
	if (how == DISPATCH_FRESH) {
		/* It replaces a connection that just died, so the cap does not apply. */
		start_connect(h, w, true);
		return;
	}
	if ((up = upstream_take_pooled(d->srv, t->key)) != NULL) {
		serve(w, up, DISPATCH_FROM_POOL);
		return;
	}
	if (!under_cap(h)) {
		enqueue(h, w);   /* a connection that frees up, or a slot, comes later */
		return;
	}
	if (!d->race) {
		start_connect(h, w, true);
		return;
	}
	enqueue(h, w);
	/* One connect per waiter at most: connects already racing may serve it. */
	if (h->racing < h->queued)
		start_connect(h, w, false);
}

void
dispatch_cancel(struct upstream_waiter *w)
{
	struct upstream *up = w->connect;

	if (w->host)
		dequeue(w);
	if (!up)
		return;
	unlink_connect(w);
	if (!up->host) {
		upstream_close(up);   /* a tunnel's: nobody else wants it */
	} else if (up->bound) {
		/* Not wasted: it joins the race for the queue, or lands in the pool. */
		up->bound = false;
		up->host->racing++;
	}
}

/* ---- what upstream.c reports ---------------------------------------------- */

void
dispatch_connection_free(struct upstream *up)
{
	struct dispatch_host *h = up->host;
	bool fresh = up->exchanges == 0;
	struct upstream_waiter *w = up->trigger;

	if (fresh && !up->bound && h)
		h->racing--;
	if (up->bound) {
		up->bound = false;
		if (w) {
			unlink_connect(w);
			if (w->host)
				dequeue(w);
			serve(w, up, DISPATCH_FROM_CONNECT);
			return;
		}
		if (!h) {
			upstream_close(up);   /* a tunnel whose client left */
			return;
		}
	}
	if (w)
		unlink_connect(w);
	w = h ? h->oldest : NULL;
	if (w) {
		enum dispatch_source source = fresh ? DISPATCH_FROM_CONNECT
		                              : w->connect ? DISPATCH_FROM_FREED
		                                           : DISPATCH_FROM_POOL;

		unlink_connect(w);
		dequeue(w);
		serve(w, up, source);
		return;
	}
	if (fresh)
		kp_stats.connects_unused++;
	upstream_park(up);
}

void
dispatch_connect_failed(struct upstream *up, int status, const char *why)
{
	struct upstream_waiter *w = up->trigger;

	log_debug("upstream %s: %s", up->key, why);
	if (w) {
		unlink_connect(w);
		if (w->host)
			dequeue(w);
	}
	upstream_close(up);
	if (w)
		w->failed(w, status, why);
}

void
dispatch_connection_gone(struct upstream *up)
{
	struct dispatch_host *h = up->host;

	if (up->trigger)
		unlink_connect(up->trigger);
	if (!h)
		return;
	if (!up->bound && up->exchanges == 0 &&
	    (up->state == UPSTREAM_RESOLVING || up->state == UPSTREAM_CONNECTING ||
	     up->state == UPSTREAM_HANDSHAKING))
		h->racing--;
	h->open--;
	up->host = NULL;
	schedule_check(h);
}

/* ---- the checker ---------------------------------------------------------- */

static struct upstream_waiter *
oldest_without_connect(const struct dispatch_host *h)
{
	struct upstream_waiter *w;

	for (w = h->oldest; w && w->connect; w = w->next)
		;
	return w;
}

/* Starts the connects a host's queue is owed now that a slot is free. */
static void
check_host(struct dispatch_host *h)
{
	struct dispatch *d = h->d;
	struct upstream_waiter *w;

	while (under_cap(h) && h->queued > 0) {
		if (!d->race) {
			w = h->oldest;
			dequeue(w);
			start_connect(h, w, true);
		} else if (h->racing < h->queued && (w = oldest_without_connect(h)) != NULL) {
			start_connect(h, w, false);
		} else {
			break;
		}
	}
	if (h->queued == 0 && h->open == 0 && !h->to_check) {
		table_remove(&d->hosts, &h->node);
		free(h);
	}
}

static void
checker_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct dispatch *d = container_of(w, struct dispatch, checker);

	(void)loop;
	(void)revents;
	while (d->to_check) {
		struct dispatch_host *h = d->to_check;

		d->to_check = h->check_next;
		h->to_check = false;
		check_host(h);
	}
}

int
dispatch_init(struct dispatch *d, struct server *srv)
{
	memset(d, 0, sizeof(*d));
	d->srv = srv;
	d->max_per_host = srv->cfg->max_conns_per_host;
	d->race = !srv->cfg->no_connect_race;
	if (table_init(&d->hosts) < 0)
		return -1;
	ev_prepare_init(&d->checker, checker_cb);
	ev_prepare_start(srv->loop, &d->checker);
	return 0;
}

static void
free_host(struct table_node *n, void *arg)
{
	struct dispatch *d = arg;
	struct dispatch_host *h = container_of(n, struct dispatch_host, node);

	while (h->oldest) {
		struct upstream_waiter *w = h->oldest;

		unlink_connect(w);
		dequeue(w);
		w->failed(w, 503, "shutting down");
	}
	table_remove(&d->hosts, n);
	free(h);
}

void
dispatch_shutdown(struct dispatch *d)
{
	if (!d->hosts.buckets)
		return;
	ev_prepare_stop(d->srv->loop, &d->checker);
	d->to_check = NULL;
	table_each(&d->hosts, free_host, d);
	table_free(&d->hosts);
}
