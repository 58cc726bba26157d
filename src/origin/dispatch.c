/*
 * Dispatch, the proxy's connection pool: which request gets which
 * connection (the per-host queues, the cap, the connect race), every
 * upstream connection's life from connect to free, the idle pool, and the
 * checker that starts what a queue is owed at the end of each iteration.
 * Fetches ahead written on a busy connection are dispatch_pipeline.c's.
 */
#include "kp/dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "kp/buf.h"
#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/parent.h"
#include "kp/pool.h"
#include "kp/stats.h"

#include "dispatch_priv.h"

const char *const dispatch_source_names[4] = {
	[DISPATCH_FROM_POOL] = "pooled",
	[DISPATCH_FROM_CONNECT] = "new",
	[DISPATCH_FROM_FREED] = "freed-up",
	[DISPATCH_FROM_PIPELINE] = "pipelined",
};

static const struct source_ops conn_source_ops;
static const struct upstream_ops conn_upstream_ops;

static struct dispatch_conn *
conn_of(struct upstream *up)
{
	return container_of(up, struct dispatch_conn, up);
}

static struct dispatch_host *
host_get(struct dispatch *d, const struct dispatch_target *t)
{
	struct dispatch_host *h = TABLE_GET(&d->hosts, t->key, struct dispatch_host, node);

	if (h && !h->d) {
		h->d = d;
		kp_list_init(&h->queue);
		kp_list_init(&h->bg_queue);
		h->port = t->port;
		h->restricted = t->restricted;
		h->tls = t->tls;
		h->parent = t->parent;
		h->forward = t->forward;
		snprintf(h->name, sizeof(h->name), "%s", t->host);
	}
	return h;
}

/* The checker looks at h at the end of this loop iteration. */
void
schedule_check(struct dispatch_host *h)
{
	if (h->to_check)
		return;
	h->to_check = true;
	h->check_next = h->d->to_check;
	h->d->to_check = h;
}

/* Does h still have more connections open than it was shrunk to? The shrink ends once not. */
static bool
over_shrink(struct dispatch_host *h)
{
	if (h && h->shrinking && h->open <= h->keep)
		h->shrinking = false;
	return h && h->shrinking;
}

/*
 * Connections held by background requests do not count when a client
 * request asks; while shrinking, nothing opens.
 */
static bool
under_cap(struct dispatch_host *h)
{
	if (over_shrink(h))
		return false;
	return h->d->max_per_host == 0 || h->open - h->background_busy < h->d->max_per_host;
}

/* ---- the queues ----------------------------------------------------------- */

void
enqueue(struct dispatch_host *h, struct dispatch_waiter *w, bool background)
{
	w->host = h;
	w->background = background;
	kp_list_insert_tail(background ? &h->bg_queue : &h->queue, &w->link);
	if (background) {
		h->bg_queued++;
		return;
	}
	h->queued++;
	kp_stats.queued++;
}

void
dequeue(struct dispatch_waiter *w)
{
	struct dispatch_host *h = w->host;

	kp_list_unlink(&w->link);
	w->host = NULL;
	if (w->background) {
		h->bg_queued--;
	} else {
		h->queued--;
		kp_stats.queued--;
		kp_stats.queue_waits++;
		kp_stats.queue_wait_seconds += clock_now(h->d->clock) - w->since;
	}
	if (h->queued == 0 && h->bg_queued == 0 && h->open == 0)
		schedule_check(h);
}

/* Breaks the link between a waiter and the connect its arrival started. */
static void
unlink_connect(struct dispatch_waiter *w)
{
	if (w->connect) {
		w->connect->trigger = NULL;
		w->connect = NULL;
	}
}

/* ---- connections: open, counted, gone, freed ------------------------------- */

static struct dispatch_conn *
conn_new(struct dispatch *d, const struct upstream_target *target)
{
	struct upstream_target t = *target;
	const char *key = t.key;
	size_t len = strlen(key) + 1;
	struct dispatch_conn *dc = slab_get(&d->conns);

	if (!dc)
		return NULL;
	kp_list_init(&dc->pipelined);
	if (len <= sizeof(dc->key)) {
		memcpy(dc->key, key, len);
	} else if ((dc->long_key = malloc(len)) != NULL) {
		memcpy(dc->long_key, key, len);
	} else {
		slab_put(&d->conns, dc);
		return NULL;
	}
	t.key = dc->long_key ? dc->long_key : dc->key;
	if (upstream_init(&dc->up, &d->up_ctx, &t) < 0) {
		free(dc->long_key);
		slab_put(&d->conns, dc);
		return NULL;
	}
	dc->up.src.ops = &conn_source_ops;
	dc->d = d;
	kp_list_insert_head(&d->live, &dc->link);
	d->open++;
	kp_stats.upstreams_open++;
	kp_stats.connects_started++;
	return dc;
}

/* Its idle count goes wherever an entry leaves the pool. */
static void
count_unpooled(struct dispatch *d)
{
	d->idle--;
	d->fds->idle--;
	kp_stats.pool_idle--;
}

/* No longer counted against its host: closed, or turned into a tunnel. */
static void
uncount(struct dispatch_conn *dc)
{
	struct dispatch_host *h = dc->host;

	if (dc->trigger)
		unlink_connect(dc->trigger);
	if (!h)
		return;
	if (dc->racing)
		h->racing--;
	if (dc->background)
		h->background_busy--;
	dc->racing = dc->background = false;
	h->open--;
	dc->host = NULL;
	schedule_check(h);
}

/* The connection closed: forget it; it is freed at the end of the iteration. */
static void
conn_gone(struct upstream *up)
{
	struct dispatch_conn *dc = conn_of(up);
	struct dispatch *d = dc->d;

	requeue_piped(dc, dc->host);
	uncount(dc);
	if (pool_entry_pooled(&dc->idle)) {
		pool_remove(&dc->idle);
		count_unpooled(d);
	}
	kp_list_unlink(&dc->link);
	d->open--;
	kp_stats.upstreams_open--;
	kp_list_insert_head(&d->dead, &dc->link);
}

static void
reap(struct dispatch *d)
{
	struct dispatch_conn *dc;

	while ((dc = KP_LIST_FIRST(&d->dead, struct dispatch_conn, link)) != NULL) {
		kp_list_unlink(&dc->link);
		free(dc->long_key);
		slab_put(&d->conns, dc);
	}
}

/* ---- the idle pool -------------------------------------------------------- */

static void
pool_dropped(struct pool_entry *e, enum pool_drop_reason why)
{
	struct dispatch_conn *dc = container_of(e, struct dispatch_conn, idle);

	count_unpooled(dc->d);
	if (why == POOL_DROP_EXPIRED)
		kp_stats.pool_expired++;
	else
		kp_stats.pool_evicted++;
	log_debug("upstream %s fd %d: %s", dc->up.key, dc->up.src.conn.fd,
	          why == POOL_DROP_EXPIRED ? "idle timeout" : "evicted by a pool cap");
	upstream_close(&dc->up);
}

void
dispatch_shrink_host(struct dispatch *d, const char *key, unsigned keep)
{
	struct table_node *n = table_find(&d->hosts, key);
	struct dispatch_host *h = n ? container_of(n, struct dispatch_host, node) : NULL;

	if (!h || h->open <= keep)
		return;
	h->shrinking = true;
	h->keep = keep;
	log_debug("upstream %s: %u connections open, shrinking to %u", key, h->open, keep);
	/* The least recently used go first: the one kept has the warmest window. */
	while (over_shrink(h) && d->pool && pool_evict_oldest_of(d->pool, key))
		;
}

bool
dispatch_free_descriptor(struct dispatch *d)
{
	if (!d->pool || !pool_evict_oldest(d->pool))
		return false;
	kp_stats.fd_evictions++;
	return true;
}

static bool
conn_need_descriptor(struct upstream *up)
{
	return dispatch_free_descriptor(conn_of(up)->d);
}

static double
idle_timeout_for(const struct dispatch_conn *dc)
{
	double t = dc->d->cfg->idle_timeout;
	double hint = dc->up.src.keep_alive_hint;

	/*
	 * Never outstay the origin's own hint: a second of margin, because the
	 * origin's clock started when it sent the response, before ours did.
	 */
	if (hint >= 0) {
		hint = hint > 1 ? hint - 1 : hint / 2;
		if (hint < t)
			t = hint;
	}
	return t;
}

/*
 * How many idle connections may stay beyond the caps for now: one for
 * every connected client that holds no connection, since each of them may
 * send its next request any moment. The connection being parked counts as
 * still held, which errs by one on the safe side.
 */
static size_t
idle_ceiling(const struct dispatch *d)
{
	unsigned busy = d->open - d->idle;

	return d->fds->clients > busy ? d->fds->clients - busy : 0;
}

static void
park(struct dispatch_conn *dc)
{
	struct dispatch *d = dc->d;
	double timeout = idle_timeout_for(dc);
	size_t room;

	/* Unforwarded bytes or a deadline already gone mean it is not clean enough. */
	if ((dc->up.src.in && buf_len(dc->up.src.in)) || timeout <= 0) {
		upstream_close(&dc->up);
		return;
	}
	/* Clients come first: keep no more idle connections than descriptors allow. */
	room = fd_budget_idle_room(d->fds);
	while (pool_count(d->pool) > 0 && pool_count(d->pool) >= room)
		dispatch_free_descriptor(d);
	if (room == 0) {
		upstream_close(&dc->up);
		return;
	}
	pool_set_ceiling(d->pool, idle_ceiling(d));
	if (!pool_put(d->pool, dc->up.key, &dc->idle, timeout)) {
		upstream_close(&dc->up);
		return;
	}
	d->idle++;
	d->fds->idle++;
	kp_stats.pool_idle++;
	upstream_idle(&dc->up);
	log_debug("upstream %s fd %d: idle, kept %.1fs", dc->up.key, dc->up.src.conn.fd, timeout);
}

/* The freshest pooled connection for key that still looks alive; or NULL. */
static struct dispatch_conn *
take_pooled(struct dispatch *d, const char *key)
{
	struct pool_entry *e;

	while ((e = pool_take(d->pool, key)) != NULL) {
		struct dispatch_conn *dc = container_of(e, struct dispatch_conn, idle);

		count_unpooled(d);
		if (upstream_usable(&dc->up))
			return dc;
		upstream_close(&dc->up);
	}
	return NULL;
}

size_t
dispatch_idle_count(const struct dispatch *d, const char *key)
{
	return d->pool ? pool_count_key(d->pool, key) : 0;
}

void
dispatch_each_idle_host(const struct dispatch *d,
                        void (*fn)(const char *key, size_t idle, void *arg), void *arg)
{
	if (d->pool)
		pool_each_host(d->pool, fn, arg);
}

/* ---- answers -------------------------------------------------------------- */

/* What the counters say of a client request's connection (the proxy's own are not counted). */
static void
count_source(enum dispatch_source source)
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
	case DISPATCH_FROM_PIPELINE:
		break;   /* only the proxy's own requests are pipelined */
	}
}

static void
serve(struct dispatch_waiter *w, struct dispatch_conn *dc, enum dispatch_source source)
{
	if (!w->background)
		count_source(source);
	dc->trigger = NULL;
	if (w->background && dc->host) {
		dc->background = true;
		dc->host->background_busy++;
	}
	dc->sent = dc->from_pipeline = false;
	upstream_begin(&dc->up);
	w->source = source;
	log_debug("upstream %s fd %d: %s (exchange %u)", dc->up.key, dc->up.src.conn.fd,
	          dispatch_source_names[source], dc->up.exchanges + 1);
	w->ready(w, &dc->up.src);
}

/*
 * A connection for its host is free: a connect completed, or an exchange
 * left it reusable. Its own requester first if it was bound to one, then
 * the oldest client request, then the oldest background one, then the pool.
 */
static void
connection_free(struct dispatch_conn *dc)
{
	struct dispatch_host *h = dc->host;
	bool fresh = dc->up.exchanges == 0;
	struct dispatch_waiter *w = dc->trigger;

	if (dc->racing) {
		h->racing--;
		dc->racing = false;
	}
	if (dc->bound) {
		dc->bound = false;
		if (w) {
			unlink_connect(w);
			if (w->host)
				dequeue(w);
			serve(w, dc, DISPATCH_FROM_CONNECT);
			return;
		}
		if (!h) {
			upstream_close(&dc->up);   /* a tunnel whose client left */
			return;
		}
	}
	if (w)
		unlink_connect(w);
	if (h && (w = oldest_in(&h->queue)) != NULL) {
		enum dispatch_source source = fresh ? DISPATCH_FROM_CONNECT
		                              : w->connect ? DISPATCH_FROM_FREED
		                                           : DISPATCH_FROM_POOL;

		unlink_connect(w);
		dequeue(w);
		serve(w, dc, source);
		return;
	}
	if (h && (w = oldest_in(&h->bg_queue)) != NULL) {
		dequeue(w);
		serve(w, dc, fresh ? DISPATCH_FROM_CONNECT : DISPATCH_FROM_FREED);
		return;
	}
	if (fresh)
		kp_stats.connects_unused++;
	park(dc);
}

static void
conn_ready(struct upstream *up)
{
	struct dispatch_conn *dc = conn_of(up);

	/* A connect nobody needs to keep, to an origin that allows fewer. */
	if (!dc->bound && over_shrink(dc->host)) {
		upstream_close(up);
		return;
	}
	connection_free(dc);
}

static void
conn_failed(struct upstream *up, int status, const char *why)
{
	struct dispatch_waiter *w = conn_of(up)->trigger;

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

static const struct upstream_ops conn_upstream_ops = {
	.ready = conn_ready,
	.failed = conn_failed,
	.gone = conn_gone,
	.need_descriptor = conn_need_descriptor,
};

/* ---- what an exchange does with the source it was given -------------------- */

static struct dispatch_conn *
conn_of_source(struct source *src)
{
	return container_of(src, struct dispatch_conn, up.src);
}

/* Its background request is over: it counts against the cap again. */
static void
end_background(struct dispatch_conn *dc)
{
	if (dc->background && dc->host)
		dc->host->background_busy--;
	dc->background = false;
}

static void
source_release(struct source *src, bool reusable)
{
	struct dispatch_conn *dc = conn_of_source(src);

	end_background(dc);
	if (reusable && dc->from_pipeline)
		dc->pipelines = true;
	if (!kp_list_empty(&dc->pipelined)) {
		serve_piped(dc, reusable);
		return;
	}
	if (!upstream_end(&dc->up) || !reusable || dc->spoiled || over_shrink(dc->host)) {
		upstream_close(&dc->up);
		return;
	}
	connection_free(dc);
}

/* The request in progress is all written: fetches ahead may follow it on the connection. */
static void
source_sent(struct source *src)
{
	struct dispatch_conn *dc = conn_of_source(src);

	dc->sent = true;
	pipeline_waiting(dc);
}

static void
source_close(struct source *src)
{
	struct dispatch_conn *dc = conn_of_source(src);

	end_background(dc);
	upstream_close(&dc->up);
}

/* A tunnel is never pooled: it stops counting against the host's cap. */
static void
source_detach(struct source *src)
{
	struct dispatch_conn *dc = conn_of_source(src);

	dc->spoiled = true;
	requeue_piped(dc, dc->host);
	uncount(dc);
}

static const struct source_ops conn_source_ops = {
	.release = source_release,
	.sent = source_sent,
	.close = source_close,
	.detach = source_detach,
};

/* ---- requests ------------------------------------------------------------- */

/*
 * Starts a connection for h on w's behalf. bound: it is w's alone (a
 * fresh connection, or race mode off); otherwise it races for the queue.
 * The outcome may come back before this returns.
 */
static void
start_connect(struct dispatch_host *h, struct dispatch_waiter *w, bool bound)
{
	struct upstream_target t = {
		.host = h->name, .port = h->port, .key = h->node.key, .tls = h->tls,
		.restricted = h->restricted, .parent = h->parent, .forward = h->forward,
	};
	struct dispatch_conn *dc = conn_new(h->d, &t);

	if (!dc) {
		if (w->host)
			dequeue(w);
		schedule_check(h);
		w->failed(w, 503, "out of memory");
		return;
	}
	dc->host = h;
	h->open++;
	dc->bound = bound;
	if (!bound) {
		dc->racing = true;
		h->racing++;
	}
	dc->trigger = w;
	w->connect = dc;
	upstream_connect(&dc->up);
}

/*
 * Through a parent the proxy never connects to the origin itself, so an
 * address named in the request is held to the destination rules here,
 * before the parent is asked for it. A name the parent resolves cannot be.
 */
static bool
parent_may_reach(const struct dispatch *d, const struct dispatch_target *t)
{
	union net_addr a;

	if (!net_literal(t->host, &a))
		return true;
	return policy_dest_allowed(d->up_ctx.cfg, d->up_ctx.own->addr, d->up_ctx.own->count,
	                           t->restricted, &a.sa);
}

void
dispatch_request(struct dispatch *d, struct dispatch_waiter *w, const struct dispatch_target *t,
                 enum dispatch_how how)
{
	struct dispatch_host *h;
	struct dispatch_conn *dc;

	w->host = NULL;
	w->connect = NULL;
	w->piped_on = NULL;
	kp_list_init_link(&w->link);
	w->background = false;
	w->since = clock_now(d->clock);
	if (t->parent && !parent_may_reach(d, t)) {
		w->failed(w, 403, "the destination is not reachable from your network through this "
		                  "proxy (see --allow-dest)");
		return;
	}
	if (t->parent)
		t->parent->counts.requests++;
	if (how == DISPATCH_TUNNEL) {
		/* Raw bytes to host:port: never pooled, so never counted per host. */
		struct upstream_target raw = {
			.host = t->host, .port = t->port, .key = t->key,
			.restricted = t->restricted, .parent = t->parent,
		};

		if (!(dc = conn_new(d, &raw))) {
			w->failed(w, 503, "out of memory");
			return;
		}
		dc->bound = true;
		dc->trigger = w;
		w->connect = dc;
		upstream_connect(&dc->up);
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
	if (how == DISPATCH_AHEAD && pipeline_somewhere(h, w))
		return;
	if ((dc = take_pooled(d, t->key)) != NULL) {
		w->background = how == DISPATCH_BACKGROUND || how == DISPATCH_AHEAD;
		serve(w, dc, DISPATCH_FROM_POOL);
		return;
	}
	if (how == DISPATCH_BACKGROUND || how == DISPATCH_AHEAD || !under_cap(h)) {
		/* A connection that frees up, or (client requests) a slot, comes later. */
		enqueue(h, w, how == DISPATCH_BACKGROUND || how == DISPATCH_AHEAD);
		return;
	}
	if (!d->race) {
		start_connect(h, w, true);
		return;
	}
	enqueue(h, w, false);
	/* One connect per waiter at most: connects already racing may serve it. */
	if (h->racing < h->queued)
		start_connect(h, w, false);
}

void
dispatch_cancel(struct dispatch_waiter *w)
{
	struct dispatch_conn *dc = w->connect;

	if (w->host)
		dequeue(w);
	if (w->piped_on) {
		unpipe(w);
		return;
	}
	if (!dc)
		return;
	unlink_connect(w);
	if (!dc->host) {
		upstream_close(&dc->up);   /* a tunnel's: nobody else wants it */
	} else if (dc->bound) {
		/* Not wasted: it joins the race for the queue, or lands in the pool. */
		dc->bound = false;
		dc->racing = true;
		dc->host->racing++;
	}
}

/* ---- the checker ---------------------------------------------------------- */

static struct dispatch_waiter *
oldest_without_connect(const struct dispatch_host *h)
{
	KP_LIST_EACH(w, &h->queue, struct dispatch_waiter, link)
		if (!w->connect)
			return w;
	return NULL;
}

/* Starts the connects a host's queue is owed now that a slot is free. */
static void
check_host(struct dispatch_host *h)
{
	struct dispatch *d = h->d;
	struct dispatch_conn *dc;
	struct dispatch_waiter *w;

	/*
	 * Requests back in the queue (a pipelined fetch whose connection ended)
	 * take what idles in the pool before anything connects: otherwise they
	 * would wait for the next exchange of their host to end, while the idle
	 * connection expires unused.
	 */
	while ((!kp_list_empty(&h->queue) || !kp_list_empty(&h->bg_queue)) &&
	       (dc = take_pooled(d, h->node.key)) != NULL)
		connection_free(dc);
	while (under_cap(h) && h->queued > 0) {
		if (!d->race) {
			w = oldest_in(&h->queue);
			dequeue(w);
			start_connect(h, w, true);
		} else if (h->racing < h->queued && (w = oldest_without_connect(h)) != NULL) {
			start_connect(h, w, false);
		} else {
			break;
		}
	}
	if (h->queued == 0 && h->bg_queued == 0 && h->open == 0 && !h->to_check) {
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
	reap(d);
}

int
dispatch_init(struct dispatch *d, struct ev_loop *loop, struct clock *clock,
              const struct kp_config *cfg, struct tls *tls, const struct own_addresses *own,
              struct fd_budget *fds)
{
	memset(d, 0, sizeof(*d));
	kp_list_init(&d->live);
	kp_list_init(&d->dead);
	d->up_ctx.loop = loop;
	d->up_ctx.cfg = cfg;
	d->up_ctx.tls = tls;
	d->up_ctx.own = own;
	d->up_ctx.ops = &conn_upstream_ops;
	d->clock = clock;
	d->cfg = cfg;
	d->fds = fds;
	d->max_per_host = cfg->max_conns_per_host;
	d->race = !cfg->no_connect_race;
	slab_init(&d->conns, sizeof(struct dispatch_conn));
	if (table_init(&d->hosts) < 0)
		return -1;
	if (!(d->pool = pool_new(clock, cfg->max_idle_per_host, cfg->max_idle_total, pool_dropped)))
		return -1;
	ev_prepare_init(&d->checker, checker_cb);
	ev_prepare_start(loop, &d->checker);
	return 0;
}

static void
free_host(struct table_node *n, void *arg)
{
	struct dispatch *d = arg;
	struct dispatch_host *h = container_of(n, struct dispatch_host, node);
	struct dispatch_waiter *w;

	/* Client requests first, then the background ones: each is told, in queue order. */
	while ((w = oldest_in(&h->queue)) != NULL || (w = oldest_in(&h->bg_queue)) != NULL) {
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
	struct dispatch_conn *dc;

	if (!d->hosts.buckets)
		return;
	ev_prepare_stop(d->up_ctx.loop, &d->checker);
	/* Connects nobody waits for any more, busy ones, and the idle pool. */
	while ((dc = KP_LIST_FIRST(&d->live, struct dispatch_conn, link)) != NULL)
		upstream_close(&dc->up);
	pool_free(d->pool);
	d->pool = NULL;
	d->to_check = NULL;
	table_each(&d->hosts, free_host, d);
	table_free(&d->hosts);
	reap(d);
	slab_drain(&d->conns);
}

const char *
dispatch_key_compose(char *out, const char *host_port, bool tls, bool restricted,
                     const struct parent *parent, bool forward)
{
	/* The parent's number, not its label: a key stays short, and the table never changes. */
	if (forward)
		snprintf(out, DISPATCH_KEY_MAX, "http parent %u", parent->id);
	else if (parent)
		snprintf(out, DISPATCH_KEY_MAX, "%s%s%s via parent %u", tls ? "https://" : "",
		         host_port, restricted ? " (lan)" : "", parent->id);
	else
		snprintf(out, DISPATCH_KEY_MAX, "%s%s%s", tls ? "https://" : "", host_port,
		         restricted ? " (lan)" : "");
	return out;
}
