/*
 * Idle upstream connections, in a hash table keyed by "host:port".
 *
 * Each host keeps its idle connections most recently used first: the warmest
 * congestion window goes out first and the coldest is the one a cap evicts.
 * A second list across all hosts, oldest first, enforces the total cap. Each
 * entry carries its own expiry timer because every connection may have its
 * own deadline (the origin's Keep-Alive hint).
 *
 * The caps are enforced by a sweep about a second after they are first
 * exceeded, not at the put that exceeds them, and the sweep evicts only
 * entries idle for that whole second: many exchanges ending together give
 * back more connections than a cap allows, and their clients' next requests,
 * a moment later, want them all again. Only a ceiling evicts at once (twice
 * the total cap, or more when the owner says the descriptors are there),
 * because each idle connection holds a descriptor.
 *
 * The pool knows nothing of sockets: the owner embeds a pool_entry in its
 * connection object and is told through on_drop when the pool lets go of an
 * entry by itself (expired or evicted); it then closes the connection.
 */
#ifndef KP_POOL_H
#define KP_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>

#include "kp/clock.h"
#include "kp/list.h"

struct pool;
struct pool_host;

enum pool_drop_reason {
	POOL_DROP_EXPIRED,   /* the idle timer ran out */
	POOL_DROP_EVICTED,   /* a cap was still exceeded at the sweep */
};

struct pool_entry {
	struct clock_timer expiry;        /* started when the entry goes in */
	ev_tstamp idle_since;             /* when it went in; the sweep spares the young */
	struct pool_host *host;           /* NULL while not in the pool */
	struct kp_list host_link;         /* in this host's list, newest first */
	struct kp_list all_link;          /* in every host's list, oldest first */
	struct pool *pool;
};

typedef void (*pool_drop_fn)(struct pool_entry *e, enum pool_drop_reason why);

/* Expiry and sweeps on clock's time. NULL when memory is exhausted. */
struct pool *pool_new(struct clock *clock, unsigned max_per_host, unsigned max_total,
                      pool_drop_fn on_drop);
/* Drops (through on_drop, as EVICTED) every entry, then frees the pool. */
void pool_free(struct pool *p);

/*
 * Takes in an idle connection for key, to expire after timeout seconds.
 * Exceeding a cap schedules a sweep; at the ceiling the oldest entry of all
 * is evicted at once. Returns false (and keeps nothing) when the caps
 * are 0 or memory is exhausted; the caller then closes the connection.
 */
bool pool_put(struct pool *p, const char *key, struct pool_entry *e, double timeout);

/*
 * The count at which pool_put() evicts the oldest at once, instead of
 * leaving it to the sweep: idle, or twice the total cap if that is more.
 */
void pool_set_ceiling(struct pool *p, size_t idle);

/*
 * Evicts the oldest entries until both caps hold and forgets hosts left
 * empty, judging every entry now however recently it went idle. The pool's
 * own timer runs a patient sweep; tests call this one to skip the wait.
 */
void pool_sweep(struct pool *p);

/*
 * Lets go of the oldest idle entry of all (through on_drop, as EVICTED):
 * descriptors ran short. False when the pool is empty.
 */
bool pool_evict_oldest(struct pool *p);

/*
 * Lets go of key's least recently used idle entry (through on_drop, as
 * EVICTED): the origin allows fewer connections. False when key has none.
 */
bool pool_evict_oldest_of(struct pool *p, const char *key);

/* The most recently used idle entry for key, removed from the pool; or NULL. */
struct pool_entry *pool_take(struct pool *p, const char *key);

/* Removes e (the origin closed it, say). No on_drop call. */
void pool_remove(struct pool_entry *e);

static inline bool
pool_entry_pooled(const struct pool_entry *e)
{
	return e->host != NULL;
}

/* Calls fn for every host with idle entries: its key and how many. */
void pool_each_host(const struct pool *p, void (*fn)(const char *key, size_t idle, void *arg),
                    void *arg);

/* Idle entries in the pool, and for one key. */
size_t pool_count(const struct pool *p);
size_t pool_count_key(const struct pool *p, const char *key);

#endif
