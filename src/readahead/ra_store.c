#include "kp/ra_store.h"

#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/list.h"
#include "kp/log.h"
#include "kp/memconn.h"
#include "kp/stats.h"
#include "kp/table.h"

/* Pieces ahead before a fetch has been timed: the next, and one to cover its round trip. */
#define FIRST_DEPTH 2

/* The pieces held under one key. */
struct ra_shelf {
	struct table_node node;          /* in st->shelves, by key */
	struct ra_key key;               /* its strings are in text */
	struct ra_store *st;
	struct kp_list pieces;           /* struct held, the newest first */
	bool refused;                    /* a piece was not the one to serve (ra_store_take_refusal) */
	struct ra_path path;
	ev_tstamp used;                  /* last asked or answered */
	size_t charged;                  /* its record, counted in its client's share */
};

enum held_state {
	HELD_ARRIVING,    /* its fetch is on its way */
	HELD_WHOLE,       /* the whole answer is in memory */
	HELD_FAILED,      /* never served: the fetch failed, or the piece was refused */
};

/* A piece on a shelf: the fetch, and what read-ahead knows of it. */
struct held {
	struct kp_list link;             /* in the shelf's pieces */
	struct ra_shelf *shelf;
	struct ra_piece *piece;          /* the fetch (ra_fetch.h) */
	enum held_state state;
	struct byte_range range;         /* asked of the origin */
	bool to_end;                     /* range reaches the object's last byte */
	bool whole;                      /* a whole object, asked without a Range */
	unsigned readers;                /* clients reading it now */
	uint64_t served;                 /* the most body bytes one client was given */
	ev_tstamp held_since;
	uint64_t expect;                 /* body bytes it should bring; 0: not known */
	struct kept_identity identity;   /* the object it must be of, when known */
};

/* A client served from a piece: its slice of the memory, and what it asked. */
struct ra_reader {
	struct memsource m;
	struct held *held;
	struct byte_range asked;
	struct buf *ask;                 /* the client's request head, for Vary */
	bool joined;                     /* the piece was still arriving when the client asked */
};

struct ra_store {
	const struct proxy_env *env;
	struct ra_fetcher *fe;           /* fetches, and the memory everything here counts in */
	struct table shelves;
};

static const struct ra_piece_owner held_owner;

static const struct kp_config *
cfg_of(const struct ra_store *st)
{
	return st->env->cfg;
}

/* ---- shelves ----------------------------------------------------------------------- */

static bool
is_shelf(const struct table_node *n, const void *key)
{
	return ra_key_equal(key, &container_of(n, struct ra_shelf, node)->key);
}

static struct ra_shelf *
shelf_find(const struct ra_store *st, const struct ra_key *k)
{
	struct table_node *n = table_find_value(&st->shelves, ra_key_hash(k), is_shelf, k);

	return n ? container_of(n, struct ra_shelf, node) : NULL;
}

/* What a shelf for k is counted: its record and its key's strings. */
static size_t
shelf_cost(const struct ra_key *k)
{
	return ra_key_kept_size(k, sizeof(struct ra_shelf));
}

/* A new, empty shelf for k; NULL when its share is full, its path too long or memory exhausted. */
static struct ra_shelf *
shelf_new(struct ra_store *st, const struct ra_key *k)
{
	size_t size = shelf_cost(k);
	struct ra_shelf *s;

	if (k->path_len > RA_KEY_PATH_MAX || !ra_memory_charge(st->fe, k, size))
		return NULL;
	if (!(s = ra_key_keep(k, sizeof(*s), offsetof(struct ra_shelf, key)))) {
		ra_memory_discharge(st->fe, k, size);
		return NULL;
	}
	s->st = st;
	s->charged = size;
	kp_list_init(&s->pieces);
	table_add_value(&st->shelves, &s->node, ra_key_hash(k));
	return s;
}

static void
shelf_free(struct ra_shelf *s)
{
	struct ra_store *st = s->st;

	table_remove(&st->shelves, &s->node);
	ra_memory_discharge(st->fe, &s->key, s->charged);
	free(s);
}

/* ---- pieces on shelves -------------------------------------------------------------- */

/* What a piece's record on a shelf is counted, beside the fetch's own. */
#define HELD_COST sizeof(struct held)

/* What was fetched and never given to a client. */
static uint64_t
unserved_bytes(const struct held *h)
{
	uint64_t body = ra_piece_body(h->piece);

	if (h->whole)
		return h->served ? 0 : body;
	return body > h->served ? body - h->served : 0;
}

/*
 * The one way a piece ends, never while a client reads it (the last reader
 * drops it): its fetch is let go (ra_piece_drop: a fetch still going ends
 * with its connection) and what no client was given counts as wasted.
 */
static void
held_drop(struct held *h)
{
	struct ra_shelf *s = h->shelf;

	kp_stats.readahead_wasted_bytes += unserved_bytes(h);
	ra_piece_drop(h->piece);
	kp_list_unlink(&h->link);
	ra_memory_discharge(s->st->fe, &s->key, HELD_COST);
	free(h);
}

/* A piece given to a client, or failed, is of no more use once nobody reads it. */
static void
drop_if_done(struct held *h)
{
	if (h->readers || h->state == HELD_ARRIVING)
		return;
	if (h->served || h->state == HELD_FAILED)
		held_drop(h);
}

/* Its head came: its connection tells the round trip of the key's path. */
static void
held_heard(void *arg, struct ra_piece *p, double rtt)
{
	struct held *h = arg;

	(void)p;
	if (rtt > 0)
		h->shelf->path.rtt = rtt;
}

/*
 * Its fetch ended. Whole, its rate is the path's if the fastest seen: a
 * fetch sharing the path with the client's own request or another fetch
 * sees only its share, and the path is what depth must cover.
 */
static void
held_ended(void *arg, struct ra_piece *p, enum ra_fetch_end why)
{
	struct held *h = arg;

	if (why != RA_FETCH_WHOLE) {
		kp_stats.readahead_failed++;
		h->state = HELD_FAILED;
		drop_if_done(h);
		return;
	}
	if (ra_piece_rate(p) > h->shelf->path.rate)
		h->shelf->path.rate = ra_piece_rate(p);
	/* Refused while it arrived (not the piece to serve): it stays refused. */
	if (h->state == HELD_ARRIVING)
		h->state = HELD_WHOLE;
	h->held_since = clock_now(h->shelf->st->env->clock);
	drop_if_done(h);
}

static const struct ra_piece_owner held_owner = {
	.heard = held_heard,
	.ended = held_ended,
};

static struct held *
held_whole(const struct ra_shelf *s)
{
	KP_LIST_EACH(h, &s->pieces, struct held, link)
		if (h->whole)
			return h;
	return NULL;
}

static struct held *
held_at(const struct ra_shelf *s, uint64_t first)
{
	KP_LIST_EACH(h, &s->pieces, struct held, link)
		if (h->range.first == first && !h->whole)
			return h;
	return NULL;
}

/*
 * The shelf a's piece goes on, made if it is new, but only when the piece
 * fits beside it: no shelf is left empty by a fetch never made. NULL (and
 * nothing counted) otherwise, *why saying whether for want of room.
 */
static struct ra_shelf *
shelf_for(struct ra_store *st, const struct ra_ahead *a, enum ra_fetch_start *why)
{
	struct ra_shelf *s = shelf_find(st, a->key);
	size_t piece = a->fetch.charge + ra_piece_footprint(buf_len(a->fetch.request)) + HELD_COST;

	*why = RA_FETCH_NO_ROOM;
	if (!s && (!a->fetch.charge || !ra_memory_fits(st->fe, a->key, shelf_cost(a->key) + piece)))
		return NULL;
	*why = RA_FETCH_NO_MEMORY;
	if (!s && !(s = shelf_new(st, a->key)))
		return NULL;
	s->used = clock_now(st->env->clock);
	*why = RA_FETCH_STARTED;
	return s;
}

/*
 * A new piece on s for a, its fetch started (a's request is taken either
 * way): RA_FETCH_STARTED, though a fetch that failed at once (its head too
 * large) is counted failed and dropped already.
 */
static enum ra_fetch_start
held_start(struct ra_store *st, struct ra_shelf *s, struct ra_ahead *a)
{
	enum ra_fetch_start why = RA_FETCH_NO_ROOM;
	struct held *h;

	if (!ra_memory_charge(st->fe, a->key, HELD_COST)) {
		buf_put(a->fetch.request);
		return why;
	}
	if (!(h = calloc(1, sizeof(*h))) ||
	    (a->identity && !ranges_identity_keep(&h->identity, a->identity, a->identity_base))) {
		free(h);
		ra_memory_discharge(st->fe, a->key, HELD_COST);
		buf_put(a->fetch.request);
		return RA_FETCH_NO_MEMORY;
	}
	h->shelf = s;
	h->expect = a->fetch.expect;
	h->range = a->fetch.whole ? (struct byte_range){0, UINT64_MAX} : a->fetch.range;
	h->to_end = a->to_end;
	h->whole = a->fetch.whole;
	a->fetch.owner = &held_owner;
	a->fetch.owner_arg = h;
	if (!(h->piece = ra_fetch_start(st->fe, &a->fetch, &why))) {
		free(h);
		ra_memory_discharge(st->fe, a->key, HELD_COST);
		return why;
	}
	kp_list_insert_head(&s->pieces, &h->link);
	log_debug("read-ahead %.*s %.*s", (int)s->key.dispatch_key_len, s->key.dispatch_key,
	          (int)s->key.path_len, s->key.path);
	/* Its owner is told of no end within ra_fetch_start: seen here. */
	if (ra_piece_ended(h->piece)) {
		kp_stats.readahead_failed++;
		h->state = HELD_FAILED;
		drop_if_done(h);
	}
	return RA_FETCH_STARTED;
}

bool
ra_store_fetch(struct ra_store *st, struct ra_ahead *a)
{
	struct ra_shelf *s = shelf_find(st, a->key);
	enum ra_fetch_start why;

	if (s && (a->fetch.whole ? held_whole(s) : held_at(s, a->fetch.range.first))) {
		s->used = clock_now(st->env->clock);
		buf_put(a->fetch.request);
		return true;
	}
	if ((s = shelf_for(st, a, &why)) != NULL)
		why = held_start(st, s, a);
	else
		buf_put(a->fetch.request);
	switch (why) {
	case RA_FETCH_STARTED:
		kp_stats.readahead_predicted++;
		return true;
	case RA_FETCH_NO_ROOM:
		kp_stats.readahead_throttled++;
		return false;
	case RA_FETCH_NO_MEMORY:
		break;
	}
	return false;
}

/* ---- dropping by key ----------------------------------------------------------- */

static void
drop_far(struct ra_shelf *s)
{
	KP_LIST_EACH_SAFE(h, next, &s->pieces, struct held, link) {
		uint64_t left = ra_piece_left(h->piece);

		if (h->state != HELD_ARRIVING || h->readers || ra_piece_ended(h->piece) ||
		    left <= h->expect / 4)
			continue;
		log_debug("read-ahead %.*s: a fetch dropped, %s to come", (int)s->key.path_len,
		          s->key.path, left == UINT64_MAX ? "an unknown length" : "more than a quarter");
		kp_stats.readahead_cut++;
		h->state = HELD_FAILED;
		held_drop(h);
	}
}

static void
drop_held(struct ra_shelf *s)
{
	KP_LIST_EACH_SAFE(h, next, &s->pieces, struct held, link)
		if (!h->readers && h->state != HELD_ARRIVING)
			held_drop(h);
}

void
ra_store_drop(struct ra_store *st, const struct ra_key *key, enum ra_drop which)
{
	struct ra_shelf *s = shelf_find(st, key);

	if (!s)
		return;
	if (which == RA_DROP_FAR)
		drop_far(s);
	else
		drop_held(s);
}

bool
ra_store_take_refusal(struct ra_store *st, const struct ra_key *key)
{
	struct ra_shelf *s = shelf_find(st, key);
	bool refused = s && s->refused;

	if (s)
		s->refused = false;
	return refused;
}

bool
ra_store_has(const struct ra_store *st, const struct ra_key *key, const struct byte_range *range)
{
	const struct ra_shelf *s = shelf_find(st, key);

	return s && (range ? held_at(s, range->first) : held_whole(s)) != NULL;
}

void
ra_store_note_rtt(struct ra_store *st, const struct ra_key *key, double rtt)
{
	struct ra_shelf *s = shelf_find(st, key);

	if (rtt > 0 && s)
		s->path.rtt = rtt;
}

struct ra_path
ra_store_path(const struct ra_store *st, const struct ra_key *key)
{
	const struct ra_shelf *s = shelf_find(st, key);

	return s ? s->path : (struct ra_path){0, 0};
}

unsigned
ra_depth(const struct ra_path *path, uint64_t length, unsigned most)
{
	double in_flight = path->rtt * path->rate;
	uint64_t depth;

	/*
	 * A request reaches the origin half a round trip after it is sent and
	 * its answer comes back half a round trip later: the path stays busy
	 * only if the pieces asked for hold rtt x rate bytes on top of the one
	 * the client reads now.
	 */
	if (path->rtt <= 0 || path->rate <= 0 || length == 0)
		return FIRST_DEPTH < most ? FIRST_DEPTH : most;
	if (in_flight >= (double)length * most)
		return most;
	depth = 1 + ((uint64_t)in_flight + length - 1) / length;
	return depth < most ? (unsigned)depth : most;
}

/* ---- serving ---------------------------------------------------------------------- */

/*
 * The client's request and the proxy's carry the same credentials and
 * agree on every field resp (spans into rbase) varies on; counted as
 * unsafe when not.
 */
static bool
same_requester(const struct ra_reader *r, const struct http_head *resp, const char *rbase)
{
	size_t max = cfg_of(r->held->shelf->st)->max_header_bytes, len;
	const char *mine_text = ra_piece_request(r->held->piece, &len);
	struct http_parser ps;
	struct http_head mine, theirs;

	if (http_parse_held_head(HTTP_REQUEST, mine_text, len, max, &ps, &mine) &&
	    http_parse_held_head(HTTP_REQUEST, buf_head(r->ask), buf_len(r->ask), max, &ps,
	                         &theirs) &&
	    ranges_same_requester(&mine, mine_text, &theirs, buf_head(r->ask), resp, rbase))
		return true;
	kp_stats.readahead_unsafe++;
	return false;
}

/* A client is served from memory; counted only then, since a refused piece sent it away. */
static void
count_served(const struct ra_reader *r)
{
	if (r->joined)
		kp_stats.readahead_joins++;
	else
		kp_stats.readahead_hits++;
}

/* Not the piece to serve: never served, and its series should stop. */
static enum memsource_step
refuse(struct held *h, const char *why)
{
	h->state = HELD_FAILED;
	h->shelf->refused = true;
	kp_stats.readahead_unsafe++;
	log_debug("read-ahead %.*s: refused: %s", (int)h->shelf->key.path_len, h->shelf->key.path,
	          why);
	drop_held(h->shelf);
	return MEMSOURCE_CUT;
}

/*
 * The piece's answer head, once it is in memory: READ with resp set, else
 * NOT_YET while more may come, or CUT (malformed, or the fetch ended
 * without one).
 */
static enum memsource_step
answer_head(struct memsource *m, size_t max, struct http_head *resp)
{
	struct http_parser ps;

	if (http_parse_held_head(HTTP_RESPONSE, m->store->data, m->store->len, max, &ps, resp))
		return MEMSOURCE_READ;
	return m->store->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? MEMSOURCE_NOT_YET
	                                                                    : MEMSOURCE_CUT;
}

/*
 * A client's slice is ready once the piece's head is in memory: only a 206
 * that is exactly the piece asked for, of the object expected, not private,
 * and varying on nothing the client's request does not share with the
 * proxy's. Anything else fails the slice before its first byte, and the
 * client's request goes to the origin.
 */
static enum memsource_step
prepare_slice(struct memsource *m)
{
	static const char *const drop[] = {"content-range", "content-length", NULL};
	struct ra_reader *r = m->owner;
	struct held *h = r->held;
	struct http_head_edit edit = {.drop = drop, .content_range = true, .content_length = true};
	struct http_head resp;
	struct object_identity id;
	enum memsource_step head = answer_head(m, cfg_of(h->shelf->st)->max_header_bytes, &resp);
	uint64_t complete;
	ssize_t n;

	if (head != MEMSOURCE_READ)
		return head;
	if (!ranges_piece_fits(&h->range, &resp, m->store->data, &complete) ||
	    ranges_response_private(&resp, m->store->data) ||
	    !ranges_identity(&resp, m->store->data, &id) ||
	    (h->identity.known &&
	     !ranges_same_object(&h->identity.id, h->identity.text, &id, m->store->data)))
		return refuse(h, "a piece fetched ahead is not the one to serve");
	if (!same_requester(r, &resp, m->store->data))
		return MEMSOURCE_CUT;
	edit.first = r->asked.first;
	edit.last = r->asked.last < complete - 1 ? r->asked.last : complete - 1;
	edit.complete = complete;
	edit.length = edit.last - edit.first + 1;
	if (!(m->prefix = buf_get()) ||
	    (n = http_write_edited_head(buf_tail(m->prefix), buf_room(m->prefix), &resp,
	                                m->store->data, &edit)) < 0)
		return MEMSOURCE_CUT;
	m->prefix->end += (size_t)n;
	m->offset = resp.head_len;
	m->until = resp.head_len + (size_t)edit.length;
	if (edit.length > h->served)
		h->served = edit.length;
	count_served(r);
	return MEMSOURCE_READ;
}

/*
 * A whole object is served as the origin answered it, once its head is in
 * memory: only a 200, not private, varying on nothing the client's
 * request does not share with the proxy's.
 */
static enum memsource_step
prepare_whole(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct held *h = r->held;
	struct http_head resp;
	enum memsource_step head = answer_head(m, cfg_of(h->shelf->st)->max_header_bytes, &resp);

	if (head != MEMSOURCE_READ)
		return head;
	if (resp.status != 200 || ranges_response_private(&resp, m->store->data))
		return refuse(h, "a whole object fetched ahead is not a public 200");
	if (!same_requester(r, &resp, m->store->data))
		return MEMSOURCE_CUT;
	h->served = 1;
	count_served(r);
	return MEMSOURCE_READ;
}

static void
reader_done(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct held *h = r->held;

	buf_put(r->ask);
	free(r);
	h->readers--;
	drop_if_done(h);
}

/*
 * Fetches under the key still arriving, that no client reads, before h:
 * pipelined on one connection, h comes after them. A client skipping more
 * than one of them would wait behind wrong guesses: it asks the origin.
 */
static unsigned
guesses_ahead(const struct ra_shelf *s, const struct held *h)
{
	unsigned n = 0;

	KP_LIST_EACH(o, &s->pieces, const struct held, link)
		if (o->state == HELD_ARRIVING && !o->readers && o->range.first < h->range.first)
			n++;
	return n;
}

/* Does h answer a request for asked (form: without a Range, or with one)? */
static bool
answers(const struct held *h, enum range_form form, const struct byte_range *asked)
{
	if (h->state == HELD_FAILED)
		return false;
	if (form == RANGE_NONE || h->whole)
		return true;
	/* Past what is fetched: an open range only if the piece runs to the end. */
	return asked->last <= h->range.last || (asked->last == UINT64_MAX && h->to_end);
}

/* A reader of h for the client's request (head h, spans into base); NULL when memory is short. */
static struct ra_reader *
reader_new(struct held *h, const struct http_head *req, const char *base,
           const struct byte_range *asked)
{
	struct ra_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (!(r->ask = buf_get())) {
		free(r);
		return NULL;
	}
	memcpy(buf_tail(r->ask), base, req->head_len);
	r->ask->end = req->head_len;
	r->held = h;
	r->asked = *asked;
	r->m.owner = r;
	r->m.done = reader_done;
	memsource_open_slice(&r->m, ra_piece_memory(h->piece), h->whole ? prepare_whole
	                                                               : prepare_slice);
	h->readers++;
	r->joined = h->state == HELD_ARRIVING;
	/* A client waits for it now: no longer behind other clients' requests. */
	if (r->joined)
		ra_piece_promote(h->piece);
	return r;
}

struct source *
ra_store_serve(struct ra_store *st, const struct ra_ask *ask, const struct http_head *h,
               const char *base)
{
	struct ra_key key;
	struct ra_shelf *s;
	struct held *held;
	struct ra_reader *r;
	struct byte_range asked;
	enum range_form form;

	if (h->method != HTTP_GET)
		return NULL;
	form = ranges_requested(h, base, &asked);
	if (form != RANGE_SINGLE && form != RANGE_OPEN && form != RANGE_NONE)
		return NULL;
	ra_key_make(&key, ask, ask->target->path, ask->target->path_len);
	if (!(s = shelf_find(st, &key)))
		return NULL;
	s->used = clock_now(st->env->clock);
	held = form == RANGE_NONE ? held_whole(s) : held_at(s, asked.first);
	if (!held || !answers(held, form, &asked) || guesses_ahead(s, held) > 1 ||
	    h->head_len > buf_capacity()) {
		if (!kp_list_empty(&s->pieces)) {
			kp_stats.readahead_misses++;
			drop_far(s);
		}
		return NULL;
	}
	return (r = reader_new(held, h, base, &asked)) ? &r->m.src : NULL;
}

/* ---- sweeping ----------------------------------------------------------------------- */

static void
sweep_shelf(struct table_node *n, void *arg)
{
	struct ra_shelf *s = container_of(n, struct ra_shelf, node);
	ev_tstamp now = *(const ev_tstamp *)arg;
	double ttl = cfg_of(s->st)->read_ahead_ttl;

	KP_LIST_EACH_SAFE(h, next, &s->pieces, struct held, link)
		if (h->state == HELD_WHOLE && !h->readers && now - h->held_since > ttl)
			held_drop(h);
	if (kp_list_empty(&s->pieces) && now - s->used > ttl)
		shelf_free(s);
}

void
ra_store_sweep(struct ra_store *st, ev_tstamp now)
{
	table_each(&st->shelves, sweep_shelf, &now);
}

struct ra_store *
ra_store_new(const struct proxy_env *env, struct ra_fetcher *fe)
{
	struct ra_store *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	if (table_init(&st->shelves) < 0) {
		free(st);
		return NULL;
	}
	st->env = env;
	st->fe = fe;
	return st;
}

static void
free_shelf(struct table_node *n, void *arg)
{
	struct ra_shelf *s = container_of(n, struct ra_shelf, node);
	struct held *h;

	(void)arg;
	/* Readers still open are failed when the fetcher frees the memory they read. */
	while ((h = KP_LIST_FIRST(&s->pieces, struct held, link)) != NULL)
		held_drop(h);
	shelf_free(s);
}

void
ra_store_free(struct ra_store *st)
{
	if (!st)
		return;
	table_each(&st->shelves, free_shelf, NULL);
	table_free(&st->shelves);
	free(st);
}
