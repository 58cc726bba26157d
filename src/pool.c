#include "kp/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kp/evglue.h"

struct pool_host {
	struct pool_host *chain;     /* next in the hash bucket */
	struct pool_entry *newest;   /* head of this host's list */
	struct pool_entry *oldest;   /* tail */
	unsigned count;
	uint32_t hash;
	char key[];
};

struct pool {
	struct ev_loop *loop;
	struct pool_host **buckets;
	size_t nbuckets;             /* a power of two */
	size_t nhosts;
	size_t count;
	struct pool_entry *all_oldest, *all_newest;
	unsigned max_per_host, max_total;
	pool_drop_fn on_drop;
};

static uint32_t
hash_key(const char *key)
{
	uint32_t h = 2166136261u;   /* FNV-1a: short keys, no adversary worth SipHash */

	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 16777619u;
	return h;
}

struct pool *
pool_new(struct ev_loop *loop, unsigned max_per_host, unsigned max_total, pool_drop_fn on_drop)
{
	struct pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->nbuckets = 64;
	p->buckets = calloc(p->nbuckets, sizeof(*p->buckets));
	if (!p->buckets) {
		free(p);
		return NULL;
	}
	p->loop = loop;
	p->max_per_host = max_per_host;
	p->max_total = max_total;
	p->on_drop = on_drop;
	return p;
}

static struct pool_host **
find_slot(struct pool *p, const char *key, uint32_t hash)
{
	struct pool_host **slot = &p->buckets[hash & (p->nbuckets - 1)];

	while (*slot && ((*slot)->hash != hash || strcmp((*slot)->key, key) != 0))
		slot = &(*slot)->chain;
	return slot;
}

static void
grow(struct pool *p)
{
	size_t n = p->nbuckets * 2;
	struct pool_host **b = calloc(n, sizeof(*b));

	if (!b)
		return;   /* longer chains, still correct */
	for (size_t i = 0; i < p->nbuckets; i++) {
		struct pool_host *h = p->buckets[i], *next;

		for (; h; h = next) {
			next = h->chain;
			h->chain = b[h->hash & (n - 1)];
			b[h->hash & (n - 1)] = h;
		}
	}
	free(p->buckets);
	p->buckets = b;
	p->nbuckets = n;
}

static struct pool_host *
host_get(struct pool *p, const char *key)
{
	uint32_t hash = hash_key(key);
	struct pool_host **slot = find_slot(p, key, hash);
	size_t len;

	if (*slot)
		return *slot;
	len = strlen(key);
	*slot = calloc(1, sizeof(**slot) + len + 1);
	if (!*slot)
		return NULL;
	(*slot)->hash = hash;
	memcpy((*slot)->key, key, len + 1);
	p->nhosts++;
	if (p->nhosts > p->nbuckets)
		grow(p);
	return host_get(p, key);
}

/* Hosts with no idle connection are freed: the table holds only live keys. */
static void
host_release_if_empty(struct pool *p, struct pool_host *h)
{
	struct pool_host **slot;

	if (h->count)
		return;
	slot = find_slot(p, h->key, h->hash);
	*slot = h->chain;
	p->nhosts--;
	free(h);
}

static void
unlink_entry(struct pool_entry *e)
{
	struct pool *p = e->pool;
	struct pool_host *h = e->host;

	ev_timer_stop(p->loop, &e->expiry);
	if (e->host_prev)
		e->host_prev->host_next = e->host_next;
	else
		h->newest = e->host_next;
	if (e->host_next)
		e->host_next->host_prev = e->host_prev;
	else
		h->oldest = e->host_prev;
	if (e->all_prev)
		e->all_prev->all_next = e->all_next;
	else
		p->all_oldest = e->all_next;
	if (e->all_next)
		e->all_next->all_prev = e->all_prev;
	else
		p->all_newest = e->all_prev;
	e->host_prev = e->host_next = e->all_prev = e->all_next = NULL;
	e->host = NULL;
	h->count--;
	p->count--;
	host_release_if_empty(p, h);
}

static void
drop(struct pool_entry *e, enum pool_drop_reason why)
{
	struct pool *p = e->pool;

	unlink_entry(e);
	p->on_drop(e, why);
}

static void
expiry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct pool_entry *e = container_of(w, struct pool_entry, expiry);

	(void)loop;
	(void)revents;
	drop(e, POOL_DROP_EXPIRED);
}

bool
pool_put(struct pool *p, const char *key, struct pool_entry *e, double timeout)
{
	struct pool_host *h;

	if (p->max_per_host == 0 || p->max_total == 0)
		return false;
	h = host_get(p, key);
	if (!h)
		return false;
	if (h->count >= p->max_per_host)
		drop(h->oldest, POOL_DROP_EVICTED);
	else if (p->count >= p->max_total && p->all_oldest->host != h)
		drop(p->all_oldest, POOL_DROP_EVICTED);
	else if (p->count >= p->max_total)
		drop(h->oldest, POOL_DROP_EVICTED);
	/* The drop may have freed h when it held one entry; look it up again. */
	h = host_get(p, key);
	if (!h)
		return false;
	e->pool = p;
	e->host = h;
	e->host_prev = NULL;
	e->host_next = h->newest;
	if (h->newest)
		h->newest->host_prev = e;
	else
		h->oldest = e;
	h->newest = e;
	e->all_next = NULL;
	e->all_prev = p->all_newest;
	if (p->all_newest)
		p->all_newest->all_next = e;
	else
		p->all_oldest = e;
	p->all_newest = e;
	h->count++;
	p->count++;
	ev_timer_init(&e->expiry, expiry_cb, timeout, 0.);
	ev_timer_start(p->loop, &e->expiry);
	return true;
}

struct pool_entry *
pool_take(struct pool *p, const char *key)
{
	struct pool_host **slot = find_slot(p, key, hash_key(key));
	struct pool_entry *e;

	if (!*slot)
		return NULL;
	e = (*slot)->newest;
	unlink_entry(e);
	return e;
}

void
pool_remove(struct pool_entry *e)
{
	if (e->host)
		unlink_entry(e);
}

size_t
pool_count(const struct pool *p)
{
	return p->count;
}

size_t
pool_count_key(const struct pool *p, const char *key)
{
	struct pool_host **slot = find_slot((struct pool *)p, key, hash_key(key));

	return *slot ? (*slot)->count : 0;
}

void
pool_free(struct pool *p)
{
	if (!p)
		return;
	while (p->all_oldest)
		drop(p->all_oldest, POOL_DROP_EVICTED);
	free(p->buckets);
	free(p);
}
