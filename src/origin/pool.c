#include "kp/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kp/evglue.h"
#include "kp/table.h"

/*
 * How long a cap may be exceeded. Exchanges that end in the same loop
 * iteration all give their connections back before the clients' next
 * requests arrive; closing the surplus at once would make those requests
 * connect anew. One sweep a little later trims what is still idle.
 */
#define POOL_SWEEP_DELAY 1.0

struct pool_host {
	struct table_node node;      /* in the pool's table, keyed by key */
	struct kp_list entries;      /* its idle entries, newest first */
	struct pool_host *sweep_next;   /* on the pool's sweep list */
	bool to_sweep;               /* over its cap or empty: the sweep looks at it */
	unsigned count;
};

struct pool {
	struct clock *clock;
	struct table hosts;          /* including empty ones not yet swept */
	size_t count;
	struct kp_list all;          /* every host's idle entries, oldest first */
	unsigned max_per_host, max_total;
	size_t ceiling;              /* at this many the oldest goes at once */
	struct clock_timer sweep;    /* armed while the sweep list or the total is over */
	struct pool_host *sweep_list;
	pool_drop_fn on_drop;
};

static void sweep_cb(struct clock_timer *t);

struct pool *
pool_new(struct clock *clock, unsigned max_per_host, unsigned max_total, pool_drop_fn on_drop)
{
	struct pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	if (table_init(&p->hosts) < 0) {
		free(p);
		return NULL;
	}
	kp_list_init(&p->all);
	p->clock = clock;
	p->max_per_host = max_per_host;
	p->max_total = max_total;
	p->ceiling = 2 * (size_t)max_total;
	p->on_drop = on_drop;
	clock_timer_init(&p->sweep, clock, sweep_cb);
	return p;
}

static struct pool_host *
host_find(const struct pool *p, const char *key)
{
	struct table_node *n = table_find(&p->hosts, key);

	return n ? container_of(n, struct pool_host, node) : NULL;
}

static struct pool_host *
host_get(struct pool *p, const char *key)
{
	return TABLE_GET(&p->hosts, key, struct pool_host, node);
}

static void
schedule_sweep(struct pool *p, struct pool_host *h)
{
	if (h && !h->to_sweep) {
		h->to_sweep = true;
		h->sweep_next = p->sweep_list;
		p->sweep_list = h;
	}
	if (!clock_timer_armed(&p->sweep))
		clock_timer_start(&p->sweep, POOL_SWEEP_DELAY);
}

/*
 * An empty host stays in the table until the sweep: a host whose only
 * connection is taken for every request and put back after it would
 * otherwise cost an allocation per request.
 */
static void
host_free(struct pool *p, struct pool_host *h)
{
	table_remove(&p->hosts, &h->node);
	free(h);
}

/* The entry a cap evicts first: of every host's, and of one host's. */
static struct pool_entry *
oldest_of_all(const struct pool *p)
{
	return KP_LIST_FIRST(&p->all, struct pool_entry, all_link);
}

static struct pool_entry *
oldest_of_host(const struct pool_host *h)
{
	return KP_LIST_LAST(&h->entries, struct pool_entry, host_link);
}

static void
unlink_entry(struct pool_entry *e)
{
	struct pool *p = e->pool;
	struct pool_host *h = e->host;

	clock_timer_stop(&e->expiry);
	kp_list_unlink(&e->host_link);
	kp_list_unlink(&e->all_link);
	e->host = NULL;
	h->count--;
	p->count--;
	if (h->count == 0)
		schedule_sweep(p, h);
}

static void
drop(struct pool_entry *e, enum pool_drop_reason why)
{
	struct pool *p = e->pool;

	unlink_entry(e);
	p->on_drop(e, why);
}

static void
expiry_cb(struct clock_timer *t)
{
	drop(container_of(t, struct pool_entry, expiry), POOL_DROP_EXPIRED);
}

/*
 * Has e been idle through a whole sweep delay? Only such entries are surplus:
 * under steady load the connections given back a moment ago are the ones
 * about to be taken again.
 */
static bool
stale_enough(const struct pool *p, const struct pool_entry *e, bool force)
{
	return force || clock_now(p->clock) - e->idle_since >= POOL_SWEEP_DELAY - 0.001;
}

/*
 * Evicts the oldest entries until every cap holds, then frees empty hosts.
 * Entries that went idle too recently to judge are kept and the sweep comes
 * back for them; force (the tests) judges everything now.
 */
static void
sweep(struct pool *p, bool force)
{
	struct pool_host *list, *h;

	while (p->count > p->max_total && stale_enough(p, oldest_of_all(p), force))
		drop(oldest_of_all(p), POOL_DROP_EVICTED);
	if (p->count > p->max_total)
		schedule_sweep(p, NULL);
	/* Taken only now: the drops above may have emptied hosts and listed them. */
	list = p->sweep_list;
	p->sweep_list = NULL;
	while ((h = list) != NULL) {
		list = h->sweep_next;
		h->to_sweep = false;
		while (h->count > p->max_per_host && stale_enough(p, oldest_of_host(h), force))
			drop(oldest_of_host(h), POOL_DROP_EVICTED);
		if (h->count > p->max_per_host)
			schedule_sweep(p, h);
		else if (h->count == 0)
			host_free(p, h);
	}
}

static void
sweep_cb(struct clock_timer *t)
{
	sweep(container_of(t, struct pool, sweep), false);
}

void
pool_sweep(struct pool *p)
{
	clock_timer_stop(&p->sweep);
	sweep(p, true);
}

void
pool_set_ceiling(struct pool *p, size_t idle)
{
	size_t floor = 2 * (size_t)p->max_total;

	p->ceiling = idle > floor ? idle : floor;
}

bool
pool_put(struct pool *p, const char *key, struct pool_entry *e, double timeout)
{
	struct pool_host *h;

	if (p->max_per_host == 0 || p->max_total == 0)
		return false;
	/*
	 * At the ceiling the oldest goes at once: every idle connection holds a
	 * descriptor, and the descriptor budget allows only so many.
	 */
	while (p->count >= p->ceiling)
		drop(oldest_of_all(p), POOL_DROP_EVICTED);
	h = host_get(p, key);
	if (!h)
		return false;
	/* A new host is zeroed, an emptied one empty: either way its list starts now. */
	if (h->count == 0)
		kp_list_init(&h->entries);
	e->pool = p;
	e->host = h;
	kp_list_insert_head(&h->entries, &e->host_link);
	kp_list_insert_tail(&p->all, &e->all_link);
	h->count++;
	p->count++;
	e->idle_since = clock_now(p->clock);
	clock_timer_init(&e->expiry, p->clock, expiry_cb);
	clock_timer_start(&e->expiry, timeout);
	if (h->count > p->max_per_host)
		schedule_sweep(p, h);
	else if (p->count > p->max_total)
		schedule_sweep(p, NULL);
	return true;
}

bool
pool_evict_oldest(struct pool *p)
{
	struct pool_entry *e = oldest_of_all(p);

	if (!e)
		return false;
	drop(e, POOL_DROP_EVICTED);
	return true;
}

bool
pool_evict_oldest_of(struct pool *p, const char *key)
{
	struct pool_host *h = host_find(p, key);
	struct pool_entry *e = h ? KP_LIST_LAST(&h->entries, struct pool_entry, host_link) : NULL;

	if (!e)
		return false;
	drop(e, POOL_DROP_EVICTED);
	return true;
}

struct pool_entry *
pool_take(struct pool *p, const char *key)
{
	struct pool_host *h = host_find(p, key);
	struct pool_entry *e;

	if (!h || !(e = KP_LIST_FIRST(&h->entries, struct pool_entry, host_link)))
		return NULL;
	unlink_entry(e);
	return e;
}

void
pool_remove(struct pool_entry *e)
{
	if (e->host)
		unlink_entry(e);
}

struct each_host {
	void (*fn)(const char *key, size_t idle, void *arg);
	void *arg;
};

static void
visit_host(struct table_node *n, void *arg)
{
	struct each_host *e = arg;
	struct pool_host *h = container_of(n, struct pool_host, node);

	if (h->count)
		e->fn(n->key, h->count, e->arg);
}

void
pool_each_host(const struct pool *p, void (*fn)(const char *key, size_t idle, void *arg),
               void *arg)
{
	struct each_host e = {fn, arg};

	table_each((struct table *)&p->hosts, visit_host, &e);
}

size_t
pool_count(const struct pool *p)
{
	return p->count;
}

size_t
pool_count_key(const struct pool *p, const char *key)
{
	struct pool_host *h = host_find(p, key);

	return h ? h->count : 0;
}

static void
free_host(struct table_node *n, void *arg)
{
	struct pool *p = arg;

	table_remove(&p->hosts, n);
	free(container_of(n, struct pool_host, node));
}

void
pool_free(struct pool *p)
{
	struct pool_entry *e;

	if (!p)
		return;
	while ((e = oldest_of_all(p)) != NULL)
		drop(e, POOL_DROP_EVICTED);
	/* Only now: the drops above schedule a sweep for the hosts they empty. */
	clock_timer_stop(&p->sweep);
	table_each(&p->hosts, free_host, p);
	table_free(&p->hosts);
	free(p);
}
