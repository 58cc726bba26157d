#include "kp/ra_range.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/ranges.h"
#include "kp/stats.h"
#include "kp/table.h"

/*
 * A piece this short is a probe (a player asking for the length, or for a
 * file's first bytes), not a chunk of a download: what the client asks next
 * is seldom another piece of its length, and each fetched ahead would cost
 * the origin a request for nothing.
 */
#define PROBE_MAX 511

/* One client's reading of one object, in ranges. */
struct ra_series {
	struct table_node node;          /* in r->series, by key */
	struct ra_key key;               /* its strings are in text */
	uint64_t largest;                /* the longest piece answered */
	uint64_t last_length;            /* the length of the last piece answered */
	unsigned pieces;                 /* pieces answered */
	bool uniform;                    /* every piece answered so far had one length */
	bool stopped;                    /* a piece was refused: nothing more is predicted */
	struct kept_identity identity;   /* of the last piece answered */
	ev_tstamp used;                  /* last answered */
	size_t charged;                  /* its record, counted in its client's share */
};

struct ra_range {
	const struct proxy_env *env;
	struct ra_store *st;
	struct ra_fetcher *fe;           /* the memory series count in */
	struct table series;
};

static bool
is_series(const struct table_node *n, const void *key)
{
	return ra_key_equal(key, &container_of(n, struct ra_series, node)->key);
}

/*
 * The series of key, made if it is new; NULL when its client's share is
 * full, its path too long to keep, or memory is exhausted.
 */
static struct ra_series *
series_get(struct ra_range *r, const struct ra_key *k)
{
	uint32_t hash = ra_key_hash(k);
	struct table_node *n = table_find_value(&r->series, hash, is_series, k);
	size_t size = ra_key_kept_size(k, sizeof(struct ra_series));
	struct ra_series *s;

	if (n)
		return container_of(n, struct ra_series, node);
	if (k->path_len > RA_KEY_PATH_MAX || !ra_memory_charge(r->fe, k, size))
		return NULL;
	if (!(s = ra_key_keep(k, sizeof(*s), offsetof(struct ra_series, key)))) {
		ra_memory_discharge(r->fe, k, size);
		return NULL;
	}
	s->uniform = true;
	s->charged = size;
	table_add_value(&r->series, &s->node, hash);
	return s;
}

static void
series_free(struct ra_range *r, struct ra_series *s)
{
	table_remove(&r->series, &s->node);
	ra_memory_discharge(r->fe, &s->key, s->charged);
	free(s);
}

/* The one way a series ends: nothing more predicted, its unread pieces dropped. */
static void
series_stop(struct ra_range *r, struct ra_series *s)
{
	if (!s->stopped)
		log_debug("read-ahead %.*s: series stopped: a piece was not the one to serve",
		          (int)s->key.path_len, s->key.path);
	s->stopped = true;
	ra_store_drop(r->st, &s->key, RA_DROP_HELD);
}

/*
 * Asks the store for next, a range of an object of complete bytes: the
 * request is the one the proxy sent for the piece before, its Range moved
 * on. Every other field stays: the origin must see the same client it
 * answered.
 */
static bool
fetch_next(struct ra_range *r, struct ra_series *s, const struct ra_ask *ask,
           const struct http_head *req, const char *base, const struct byte_range *next,
           uint64_t complete)
{
	static const char *const drop[] = {"range", "content-length", "transfer-encoding", "expect",
	                                   "upgrade", NULL};
	uint64_t length = next->last - next->first + 1;
	struct http_head_edit edit = {
		.drop = drop, .range = true, .first = next->first, .last = next->last,
	};
	struct ra_ahead a = {
		.fetch = {.ask = ask, .range = *next, .expect = length,
		          .charge = ra_charge_range(r->env->cfg, length)},
		.key = &s->key, .to_end = next->last == complete - 1,
		.identity = &s->identity.id, .identity_base = s->identity.text,
	};

	return ra_fetch_request(&a.fetch, req, base, &edit) && ra_store_fetch(r->st, &a);
}

void
ra_range_heard(struct ra_range *r, const struct ra_ask *ask, const struct http_head *req,
               const char *base, const struct http_head *resp, const char *rbase, double rtt)
{
	const struct kp_config *cfg = r->env->cfg;
	struct byte_range asked, got, from, next;
	struct object_identity id;
	uint64_t complete, length, margin;
	struct ra_series *s;
	struct ra_path path;
	struct ra_key key;
	enum range_form form;
	unsigned depth;

	form = ranges_requested(req, base, &asked);
	if (resp->status != 206 || (form != RANGE_SINGLE && form != RANGE_OPEN) ||
	    !ranges_answered(resp, rbase, &got, &complete) || got.first != asked.first ||
	    ranges_response_private(resp, rbase) || !ranges_identity(resp, rbase, &id))
		return;
	ra_key_make(&key, ask, base + req->url.off, req->url.len);
	if (!(s = series_get(r, &key)))
		return;
	s->used = clock_now(r->env->clock);
	ra_store_note_rtt(r->st, &s->key, rtt);
	if (ra_store_take_refusal(r->st, &s->key))
		series_stop(r, s);
	/* Another object at the same URL: what is held belongs to the old one. */
	if (s->identity.known && !ranges_same_object(&s->identity.id, s->identity.text, &id, rbase)) {
		ra_store_drop(r->st, &s->key, RA_DROP_HELD);
		s->stopped = false;
		s->largest = s->last_length = 0;
		s->pieces = 0;
		s->uniform = true;
	}
	if (!ranges_identity_keep(&s->identity, &id, rbase) || s->stopped)
		return;
	length = got.last - got.first + 1;
	if (s->last_length && length != s->last_length && got.last != complete - 1)
		s->uniform = false;
	s->last_length = length;
	s->pieces++;
	if (length > s->largest)
		s->largest = length;
	if (length <= PROBE_MAX)
		return;
	from = got;
	/*
	 * Pieces of one length seen twice: the next is that long, and fetching
	 * more would only delay the one after on the same connection. Otherwise
	 * the longest seen / 0.95 covers a client that varies its lengths.
	 */
	margin = s->uniform && s->pieces >= 2 ? 0 : s->largest;
	path = ra_store_path(r->st, &s->key);
	depth = s->uniform ? ra_depth(&path, length, cfg->read_ahead_depth) : 1;
	for (unsigned i = 0; i < depth; i++) {
		if (!ranges_next(&from, complete, margin, cfg->fetch_memory / 2, &next))
			break;
		/* Shorter than the piece before, short of the end: the client would miss it. */
		if (next.last - next.first + 1 < length && next.last != complete - 1) {
			kp_stats.readahead_throttled++;
			break;
		}
		if (!ra_store_has(r->st, &s->key, &next) &&
		    !fetch_next(r, s, ask, req, base, &next, complete))
			break;
		from.first = next.first;
		from.last = next.first + length - 1;
		if (from.last >= complete - 1)
			break;
	}
}

static void
sweep_series(struct table_node *n, void *arg)
{
	struct ra_series *s = container_of(n, struct ra_series, node);
	struct ra_range *r = ((void **)arg)[0];
	ev_tstamp now = *(const ev_tstamp *)((void **)arg)[1];

	if (now - s->used > r->env->cfg->read_ahead_ttl)
		series_free(r, s);
}

void
ra_range_sweep(struct ra_range *r, ev_tstamp now)
{
	void *arg[2] = {r, &now};

	table_each(&r->series, sweep_series, arg);
}

struct ra_range *
ra_range_new(const struct proxy_env *env, struct ra_store *st, struct ra_fetcher *fe)
{
	struct ra_range *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (table_init(&r->series) < 0) {
		free(r);
		return NULL;
	}
	r->env = env;
	r->st = st;
	r->fe = fe;
	return r;
}

static void
free_series(struct table_node *n, void *arg)
{
	struct ra_series *s = container_of(n, struct ra_series, node);
	struct ra_range *r = arg;

	ra_memory_discharge(r->fe, &s->key, s->charged);
	free(s);
}

void
ra_range_free(struct ra_range *r)
{
	if (!r)
		return;
	table_each(&r->series, free_series, r);
	table_free(&r->series);
	free(r);
}
