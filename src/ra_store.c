#include "kp/ra_store.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/evglue.h"
#include "kp/exchange.h"
#include "kp/hls.h"
#include "kp/list.h"
#include "kp/log.h"
#include "kp/memconn.h"
#include "kp/stats.h"
#include "kp/table.h"

/* Room for the stored head beside the body a piece may hold. */
#define HEAD_ROOM 1024
/* Pieces ahead before a fetch has been timed: the next, and one to cover its round trip. */
#define FIRST_DEPTH 2
/* An object's ETag and Last-Modified, as a series remembers them. */
#define IDENTITY_MAX 512

enum piece_state {
	PIECE_FETCHING,   /* the proxy's request is on its way or its response arriving */
	PIECE_HELD,       /* the whole response is in memory */
	PIECE_FAILED,     /* nothing of it is served: the fetch failed, or the piece was refused */
};

/* A client address's part of the memory; freed with the last thing counted in it. */
struct ra_share {
	struct table_node node;          /* in st->shares, by address */
	uint8_t family;
	uint8_t addr[16];
	size_t charged;
	unsigned holds;                  /* pieces, shelves, series and playlists counted in it */
	struct ra_path path;             /* as its fetches found the path */
};

/* The pieces held under one key. */
struct ra_shelf {
	struct table_node node;          /* in st->shelves, by key */
	struct ra_key key;               /* its strings are in text */
	struct ra_store *st;
	struct kp_list pieces;           /* the newest first */
	bool refused;                    /* a piece was not the one to serve (ra_store_take_refusal) */
	struct ra_path path;
	ev_tstamp used;                  /* last asked or answered */
	size_t charged;                  /* its record, counted in its client's share */
};

struct ra_piece {
	struct ra_shelf *shelf;
	struct kp_list link;             /* in the shelf's pieces until freed */
	struct ra_piece *dead_next;      /* the reaper's list */
	struct byte_range range;         /* asked of the origin */
	bool to_end;                     /* range reaches the object's last byte */
	bool whole;                      /* a whole object, asked without a Range */
	bool dead;                       /* dropped: on the reaper's list */
	bool owned;                      /* an owner's (a split download's), never served here */
	bool uncharged;                  /* it no longer counts (an owned piece dropped) */
	void (*on_end)(void *arg, struct ra_piece *p);   /* an owned piece's fetch ended */
	void *on_end_arg;
	enum piece_state state;
	uint64_t expect;                 /* body bytes it should bring; 0: not known */
	unsigned readers;                /* clients reading it now */
	uint64_t served;                 /* the most body bytes one client was given */
	size_t charged;                  /* its answer's memory, counted against --read-ahead-memory */
	size_t footprint;                /* its record and request, counted as records */
	struct ra_share *share;          /* whose share they count in */
	ev_tstamp held_since;
	ev_tstamp head_at;               /* its response head arrived; 0: not yet */
	char *req;                       /* the request the proxy sent: compared with clients' */
	size_t req_len;
	struct buf *in, *out;            /* the fetch exchange's buffers */
	bool has_identity;               /* the object it must be of */
	struct object_identity id;       /* spans into id_text */
	char id_text[IDENTITY_MAX];
	struct memstore mem;
	struct exchange ex;
};

/* A client served from a piece: its slice of the memory, and what it asked. */
struct ra_reader {
	struct memsource m;
	struct ra_piece *piece;
	struct byte_range asked;
	struct buf *ask;                 /* the client's request head, for Vary */
	bool joined;                     /* the piece was still arriving when the client asked */
};

struct ra_store {
	const struct proxy_env *env;
	struct table shelves;
	struct table shares;
	size_t charged;                  /* bytes counted against the memory cap: both below */
	size_t answers;                  /* ... for the pieces' answers */
	size_t records;                  /* ... for what is kept about them (ra_store_charge) */
	unsigned long freed;             /* things counted out since ra_store_take_freed */
	struct ra_piece *dead;           /* pieces to free at the end of the iteration */
	ev_prepare reaper;
};

static const struct exchange_ops fetch_ops;

static const struct kp_config *
cfg_of(const struct ra_store *st)
{
	return st->env->cfg;
}

/* ---- shelves and shares ------------------------------------------------------ */

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

	if (k->path_len > RA_KEY_PATH_MAX || !ra_store_charge(st, k, size))
		return NULL;
	if (!(s = ra_key_keep(k, sizeof(*s), offsetof(struct ra_shelf, key)))) {
		ra_store_discharge(st, k, size);
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
	ra_store_discharge(st, &s->key, s->charged);
	free(s);
}

struct address {
	uint8_t family;
	uint8_t addr[16];
};

static bool
is_share(const struct table_node *n, const void *value)
{
	const struct address *a = value;
	const struct ra_share *s = container_of(n, struct ra_share, node);

	return s->family == a->family && memcmp(s->addr, a->addr, sizeof(a->addr)) == 0;
}

static uint32_t
address_hash(const struct address *a)
{
	return table_hash_more(table_hash_more(TABLE_HASH_START, &a->family, 1), a->addr,
	                       sizeof(a->addr));
}

static struct ra_share *
share_find(const struct ra_store *st, const struct ra_key *k)
{
	struct address a = {k->family, {0}};
	struct table_node *n;

	memcpy(a.addr, k->addr, sizeof(a.addr));
	n = table_find_value(&st->shares, address_hash(&a), is_share, &a);
	return n ? container_of(n, struct ra_share, node) : NULL;
}

static struct ra_share *
share_get(struct ra_store *st, const struct ra_key *k)
{
	struct ra_share *s = share_find(st, k);
	struct address a = {k->family, {0}};

	if (s)
		return s;
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	s->family = k->family;
	memcpy(s->addr, k->addr, sizeof(s->addr));
	memcpy(a.addr, k->addr, sizeof(a.addr));
	table_add_value(&st->shares, &s->node, address_hash(&a));
	return s;
}

/* What a charge is for: the gauges tell answers held apart from what is kept about them. */
enum charge_kind {
	CHARGE_ANSWER,     /* a piece's answer, arriving or held */
	CHARGE_RECORD,     /* a piece's record and request, a shelf, a series, a playlist */
};

/*
 * Something's bytes are counted in, or out (and when sh counts nothing
 * more, it is freed: whoever counted in it no longer points at it).
 */
static void
charge(struct ra_store *st, struct ra_share *sh, enum charge_kind kind, size_t bytes, bool add)
{
	size_t *gauge = kind == CHARGE_ANSWER ? &st->answers : &st->records;

	*gauge = add ? *gauge + bytes : *gauge - bytes;
	st->charged = st->answers + st->records;
	sh->charged = add ? sh->charged + bytes : sh->charged - bytes;
	kp_stats.readahead_bytes_held = st->answers;
	kp_stats.readahead_records_bytes = st->records;
	if (add) {
		sh->holds++;
		return;
	}
	st->freed++;
	if (--sh->holds == 0) {
		table_remove(&st->shares, &sh->node);
		free(sh);
	}
}

static bool fits(const struct ra_store *st, const struct ra_share *sh, size_t charge);

bool
ra_store_charge(struct ra_store *st, const struct ra_key *key, size_t bytes)
{
	struct ra_share *sh = share_find(st, key);

	if (!fits(st, sh, bytes)) {
		kp_stats.readahead_throttled++;
		return false;
	}
	if (!sh && !(sh = share_get(st, key)))
		return false;
	charge(st, sh, CHARGE_RECORD, bytes, true);
	return true;
}

void
ra_store_discharge(struct ra_store *st, const struct ra_key *key, size_t bytes)
{
	struct ra_share *sh = share_find(st, key);

	if (sh)
		charge(st, sh, CHARGE_RECORD, bytes, false);
}

/* A piece's answer and its record are counted in its share, or out. */
static void
count_piece(struct ra_piece *p, bool add)
{
	struct ra_store *st = p->shelf->st;

	charge(st, p->share, CHARGE_ANSWER, p->charged, add);
	charge(st, p->share, CHARGE_RECORD, p->footprint, add);
}

/* ---- pieces: dropped, and freed at a known point ----------------------------------- */

/* Parses the head at the start of len bytes into h; false if it is not one whole head. */
static bool
parse_head(llhttp_type_t type, const char *p, size_t len, size_t max, struct http_parser *ps,
           struct http_head *h)
{
	http_parser_init(ps, type, max, max);
	http_parser_start(ps, h);
	return http_parse_head(ps, p, len) == HTTP_PARSE_DONE;
}

/* What was fetched and never given to a client. */
static uint64_t
unserved_bytes(const struct ra_piece *p)
{
	struct http_parser ps;
	struct http_head h;
	uint64_t body;

	/* The head is not the download's: the body only, none before the head is whole. */
	if (!p->mem.data || !parse_head(HTTP_RESPONSE, p->mem.data, p->mem.len,
	                                cfg_of(p->shelf->st)->max_header_bytes, &ps, &h))
		return 0;
	body = p->mem.len - h.head_len;
	if (p->whole)
		return p->served ? 0 : body;
	return body > p->served ? body - p->served : 0;
}

static void
piece_free(struct ra_piece *p)
{
	exchange_release(&p->ex);
	/* Counted before the memory goes: its length is what was fetched. */
	kp_stats.readahead_wasted_bytes += unserved_bytes(p);
	memstore_free(&p->mem);
	if (!p->uncharged)
		count_piece(p, false);
	free(p->req);
	buf_put(p->in);
	buf_put(p->out);
	kp_list_unlink(&p->link);
	free(p);
}

/*
 * The one way a piece ends: marked to be freed at the end of this
 * iteration, never while a client reads it (the last reader drops it).
 */
static void
piece_drop(struct ra_piece *p)
{
	struct ra_store *st = p->shelf->st;

	if (p->dead || p->readers)
		return;
	p->dead = true;
	p->dead_next = st->dead;
	st->dead = p;
	if (!ev_is_active(&st->reaper))
		ev_prepare_start(st->env->loop, &st->reaper);
}

static void
reaper_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct ra_store *st = container_of(w, struct ra_store, reaper);

	(void)revents;
	while (st->dead) {
		struct ra_piece *p = st->dead;

		st->dead = p->dead_next;
		piece_free(p);
	}
	ev_prepare_stop(loop, w);
}

/* A piece given to a client, or failed, is of no more use once nobody reads it. */
static void
drop_if_done(struct ra_piece *p)
{
	/* An owned piece is its owner's to drop; it hears that the fetch ended. */
	if (p->owned) {
		if (p->state != PIECE_FETCHING && p->on_end)
			p->on_end(p->on_end_arg, p);
		return;
	}
	if (p->readers || p->state == PIECE_FETCHING)
		return;
	if (p->served || p->state == PIECE_FAILED)
		piece_drop(p);
}

/* ---- the fetch: an exchange of the proxy's own, into memory ------------------------ */

static struct ra_piece *
piece_of(struct exchange *ex)
{
	return container_of(ex, struct ra_piece, ex);
}

static void
fetch_failed(struct ra_piece *p, const char *why)
{
	log_debug("read-ahead %s bytes=%llu-%llu: %s", p->ex.target.key,
	          (unsigned long long)p->range.first, (unsigned long long)p->range.last, why);
	kp_stats.readahead_failed++;
	p->state = PIECE_FAILED;
	memstore_fail(&p->mem);
	drop_if_done(p);
}

static void
fetch_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	(void)status;
	(void)keep_alive;
	fetch_failed(piece_of(ex), why);
}

static void
fetch_abort(struct exchange *ex, const char *why)
{
	fetch_failed(piece_of(ex), why ? why : "closed");
}

/* Its head came: the clock for its rate starts, and its connection tells the round trip. */
static void
fetch_heard(struct exchange *ex)
{
	struct ra_piece *p = piece_of(ex);
	double rtt = exchange_path(ex).rtt;

	p->head_at = clock_now(p->shelf->st->env->clock);
	if (rtt > 0)
		p->shelf->path.rtt = p->share->path.rtt = rtt;
}

/*
 * The rate one fetch's body arrived at, head to end. The fastest seen is
 * kept: a fetch sharing the path with the client's own request or another
 * fetch sees only its share, and the path is what depth must cover.
 */
static void
time_fetch(struct ra_piece *p)
{
	double took = clock_now(p->shelf->st->env->clock) - p->head_at;
	double rate;

	if (p->head_at <= 0 || took <= 0)
		return;
	rate = (double)(p->whole ? p->mem.len : p->range.last - p->range.first + 1) / took;
	if (rate > p->shelf->path.rate)
		p->shelf->path.rate = rate;
	if (rate > p->share->path.rate)
		p->share->path.rate = rate;
}

static void
fetch_finished(struct exchange *ex)
{
	struct ra_piece *p = piece_of(ex);

	/* An error, or a whole object for a range: the client asks the origin itself. */
	if (exchange_status(ex) != (p->whole ? 200 : 206)) {
		fetch_failed(p, "the origin did not answer with the piece");
		return;
	}
	time_fetch(p);
	/* Its end is the end of the memory: readers past the last byte see EOF. */
	conn_shutdown_write(&p->mem.writer);
	/* Refused while it arrived (not the piece to serve): it stays refused. */
	if (p->state == PIECE_FETCHING)
		p->state = PIECE_HELD;
	p->held_since = clock_now(p->shelf->st->env->clock);
	drop_if_done(p);
}

static void
fetch_tunnel_opened(struct exchange *ex)
{
	/* The plan refuses a 101 to memory; should one get here, it is a failure. */
	fetch_failed(piece_of(ex), "the origin switched protocols");
}

static void
fetch_wait(struct exchange *ex)
{
	struct ra_piece *p = piece_of(ex);
	bool rd, wr;

	exchange_watch(ex, &rd, &wr);
	conn_watch(&p->mem.writer, rd, wr);
}

static void
fetch_io(struct conn *c, int revents)
{
	(void)revents;
	exchange_run(&container_of(c, struct ra_piece, mem.writer)->ex);
}

static const struct exchange_ops fetch_ops = {
	.reply = fetch_reply,
	.abort = fetch_abort,
	.finished = fetch_finished,
	.tunnel_opened = fetch_tunnel_opened,
	.wait = fetch_wait,
	.heard = fetch_heard,
};

static struct ra_piece *
piece_whole(const struct ra_shelf *s)
{
	KP_LIST_EACH(p, &s->pieces, struct ra_piece, link)
		if (p->whole && !p->dead && !p->owned)
			return p;
	return NULL;
}

static struct ra_piece *
piece_at(const struct ra_shelf *s, uint64_t first)
{
	KP_LIST_EACH(p, &s->pieces, struct ra_piece, link)
		if (p->range.first == first && !p->dead && !p->whole && !p->owned)
			return p;
	return NULL;
}

bool
ra_fetch_request(struct ra_fetch *f, const struct http_head *req, const char *base,
                 const struct http_head_edit *edit)
{
	ssize_t n;

	if (!(f->request = buf_get()))
		return false;
	n = http_write_edited_head(buf_tail(f->request), buf_room(f->request), req, base, edit);
	if (n < 0) {
		buf_put(f->request);
		f->request = NULL;
		return false;
	}
	f->request->end += (size_t)n;
	return true;
}

size_t
ra_charge_range(const struct kp_config *cfg, uint64_t length)
{
	if (length > cfg->read_ahead_memory / 2)
		return 0;
	return (size_t)length + cfg->max_header_bytes + HEAD_ROOM;
}

size_t
ra_charge_whole(const struct kp_config *cfg, uint64_t length)
{
	uint64_t cap = cfg->read_ahead_memory / 2, charged;

	if (length > cap)
		return 0;
	charged = length ? length + length / 2 + cfg->max_header_bytes + HEAD_ROOM
	                 : cfg->read_ahead_memory / 8;
	return charged < cap ? (size_t)charged : (size_t)cap;
}

/* Is there room for charge more bytes, in all and in the share of sh (NULL: none yet)? */
static bool
fits(const struct ra_store *st, const struct ra_share *sh, size_t charge)
{
	size_t cap = cfg_of(st)->read_ahead_memory;

	/* charge is at most half the memory (callers bound it): no sum wraps. */
	return charge != 0 && charge <= cap / 2 && st->charged + charge <= cap &&
	       (sh ? sh->charged : 0) + charge <= cap / 2;
}

static bool
keep_identity(struct ra_piece *p, const struct object_identity *id, const char *base)
{
	if (!ranges_identity_copy(&p->id, p->id_text, sizeof(p->id_text), id, base))
		return false;
	p->has_identity = true;
	return true;
}

size_t
ra_piece_footprint(size_t request_len)
{
	return sizeof(struct ra_piece) + request_len;
}

/* A new piece for f, fetching, on its shelf; NULL (f->request given back) when not made. */
static struct ra_piece *
start_piece(struct ra_store *st, struct ra_shelf *s, const struct ra_fetch *f, bool owned)
{
	struct http_target target = *f->ask->target;
	size_t req_len = buf_len(f->request);
	struct ra_share *sh;
	struct ra_piece *p;

	/* The memory its answer may take, and what it keeps besides: its record, its request. */
	if (!f->charge || !fits(st, share_find(st, f->key), f->charge + ra_piece_footprint(req_len))) {
		kp_stats.readahead_throttled++;
		goto refused;
	}
	if (!(p = calloc(1, sizeof(*p))))
		goto refused;
	if (!(sh = share_get(st, f->key)) || !(p->req = malloc(req_len)) ||
	    (f->identity && !keep_identity(p, f->identity, f->identity_base))) {
		free(p->req);
		free(p);
		goto refused;
	}
	memcpy(p->req, buf_head(f->request), req_len);
	p->req_len = req_len;
	buf_put(f->request);
	p->share = sh;
	p->shelf = s;
	p->owned = owned;
	p->range = f->whole ? (struct byte_range){0, UINT64_MAX} : f->range;
	p->to_end = f->to_end;
	p->whole = f->whole;
	p->expect = f->expect;
	p->charged = f->charge;
	p->footprint = ra_piece_footprint(req_len);
	count_piece(p, true);
	kp_list_insert_head(&s->pieces, &p->link);
	memstore_init(&p->mem, st->env->loop, f->charge, fetch_io);
	exchange_init(&p->ex, st->env, &p->mem.writer, &p->in, &p->out, &fetch_ops, true);
	p->ex.owner.restricted = f->ask->restricted;
	p->ex.owner.https = f->ask->https;
	p->ex.owner.stall_timeout = f->stall;
	target.path = "/";
	target.path_len = 1;
	log_debug("read-ahead %.*s %.*s", (int)s->key.dispatch_key_len, s->key.dispatch_key,
	          (int)s->key.path_len, s->key.path);
	if (exchange_start(&p->ex, &target, p->req, p->req_len,
	                   f->may_connect ? DISPATCH_ANY : DISPATCH_AHEAD) < 0)
		fetch_failed(p, "request head too large");
	return p;

refused:
	buf_put(f->request);
	return NULL;
}

/*
 * The shelf f's piece goes on, made if it is new, but only when the piece
 * fits beside it: no shelf is left empty by a fetch never made. NULL (and
 * nothing counted) otherwise.
 */
static struct ra_shelf *
shelf_for(struct ra_store *st, const struct ra_fetch *f)
{
	struct ra_shelf *s = shelf_find(st, f->key);
	size_t piece = f->charge + ra_piece_footprint(buf_len(f->request));

	if (!s && (!f->charge || !fits(st, share_find(st, f->key), shelf_cost(f->key) + piece))) {
		kp_stats.readahead_throttled++;
		return NULL;
	}
	if (!s && !(s = shelf_new(st, f->key)))
		return NULL;
	s->used = clock_now(st->env->clock);
	return s;
}

bool
ra_store_fetch(struct ra_store *st, const struct ra_fetch *f)
{
	struct ra_shelf *s = shelf_find(st, f->key);

	if (s && (f->whole ? piece_whole(s) != NULL : piece_at(s, f->range.first) != NULL)) {
		s->used = clock_now(st->env->clock);
		buf_put(f->request);
		return true;
	}
	if (!(s = shelf_for(st, f))) {
		buf_put(f->request);
		return false;
	}
	if (!start_piece(st, s, f, false))
		return false;
	kp_stats.readahead_predicted++;
	return true;
}

struct ra_piece *
ra_store_fetch_owned(struct ra_store *st, const struct ra_fetch *f,
                     void (*on_end)(void *arg, struct ra_piece *p), void *arg)
{
	struct ra_shelf *s = shelf_for(st, f);
	struct ra_piece *p;

	if (!s) {
		buf_put(f->request);
		return NULL;
	}
	/* Told of its end only from now: a fetch that failed at once is seen by its state. */
	if ((p = start_piece(st, s, f, true)) != NULL) {
		p->on_end = on_end;
		p->on_end_arg = arg;
	}
	return p;
}

struct memstore *
ra_piece_memory(struct ra_piece *p)
{
	return &p->mem;
}

bool
ra_piece_ended(const struct ra_piece *p)
{
	return p->state != PIECE_FETCHING;
}

void
ra_piece_promote(struct ra_piece *p)
{
	if (p->state == PIECE_FETCHING)
		exchange_promote(&p->ex);
}

void
ra_piece_drop(struct ra_piece *p, uint64_t served)
{
	p->on_end = NULL;
	if (served > p->served)
		p->served = served;
	/*
	 * Its memory is freed at the end of this loop iteration: counted out
	 * now, so that the owner's next piece, asked in the same breath, fits.
	 */
	if (!p->uncharged) {
		p->uncharged = true;
		count_piece(p, false);
		p->share = NULL;
	}
	/* What a fetch still brings is of no use now: its connection goes with it. */
	if (p->state == PIECE_FETCHING) {
		exchange_release(&p->ex);
		p->state = PIECE_FAILED;
		memstore_fail(&p->mem);
	}
	piece_drop(p);
}

/* ---- dropping by key ----------------------------------------------------------- */

/* Bytes of p's answer still to come, about (the head is counted as body); 0 once it is in. */
static uint64_t
bytes_to_come(const struct ra_piece *p)
{
	if (p->state != PIECE_FETCHING)
		return 0;
	if (p->expect == 0)
		return UINT64_MAX;
	return p->mem.len < p->expect ? p->expect - p->mem.len : 0;
}

static void
drop_far(struct ra_shelf *s)
{
	KP_LIST_EACH(p, &s->pieces, struct ra_piece, link) {
		uint64_t left = bytes_to_come(p);

		if (p->owned || p->state != PIECE_FETCHING || p->readers || p->dead ||
		    left <= p->expect / 4)
			continue;
		log_debug("read-ahead %.*s: a fetch dropped, %s to come", (int)s->key.path_len,
		          s->key.path, left == UINT64_MAX ? "an unknown length" : "more than a quarter");
		kp_stats.readahead_cut++;
		exchange_release(&p->ex);
		p->state = PIECE_FAILED;
		memstore_fail(&p->mem);
		drop_if_done(p);
	}
}

static void
drop_held(struct ra_shelf *s)
{
	KP_LIST_EACH(p, &s->pieces, struct ra_piece, link)
		if (!p->owned && !p->readers && p->state != PIECE_FETCHING)
			piece_drop(p);
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

	return s && (range ? piece_at(s, range->first) : piece_whole(s)) != NULL;
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

struct ra_path
ra_store_client_path(const struct ra_store *st, const struct ra_key *key)
{
	const struct ra_share *sh = share_find(st, key);

	return sh ? sh->path : (struct ra_path){0, 0};
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
	const struct ra_piece *p = r->piece;
	size_t max = cfg_of(p->shelf->st)->max_header_bytes;
	struct http_parser ps;
	struct http_head mine, theirs;

	if (parse_head(HTTP_REQUEST, p->req, p->req_len, max, &ps, &mine) &&
	    parse_head(HTTP_REQUEST, buf_head(r->ask), buf_len(r->ask), max, &ps, &theirs) &&
	    ranges_same_requester(&mine, p->req, &theirs, buf_head(r->ask), resp, rbase))
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
static void
refuse(struct ra_piece *p, const char *why)
{
	p->state = PIECE_FAILED;
	p->shelf->refused = true;
	kp_stats.readahead_unsafe++;
	log_debug("read-ahead %.*s: refused: %s", (int)p->shelf->key.path_len, p->shelf->key.path,
	          why);
	drop_held(p->shelf);
}

/*
 * A client's slice is ready once the piece's head is in memory: only a 206
 * that is exactly the piece asked for, of the object expected, not private,
 * and varying on nothing the client's request does not share with the
 * proxy's. Anything else fails the slice before its first byte, and the
 * client's request goes to the origin.
 */
static int
prepare_slice(struct memsource *m)
{
	static const char *const drop[] = {"content-range", "content-length", NULL};
	struct ra_reader *r = m->owner;
	struct ra_piece *p = r->piece;
	size_t max = cfg_of(p->shelf->st)->max_header_bytes;
	struct http_head_edit edit = {.drop = drop, .content_range = true, .content_length = true};
	/* Not parsed while the memory is empty: "no error" until then. */
	struct http_parser ps = {.error = HTTP_HEAD_OK};
	struct http_head resp;
	struct object_identity id;
	uint64_t complete;
	ssize_t n;

	if (!m->store->data ||
	    !parse_head(HTTP_RESPONSE, m->store->data, m->store->len, max, &ps, &resp))
		return m->store->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? 0 : -1;
	if (!ranges_piece_fits(&p->range, &resp, m->store->data, &complete) ||
	    ranges_response_private(&resp, m->store->data) ||
	    !ranges_identity(&resp, m->store->data, &id) ||
	    (p->has_identity && !ranges_same_object(&p->id, p->id_text, &id, m->store->data))) {
		refuse(p, "a piece fetched ahead is not the one to serve");
		return -1;
	}
	if (!same_requester(r, &resp, m->store->data))
		return -1;
	edit.first = r->asked.first;
	edit.last = r->asked.last < complete - 1 ? r->asked.last : complete - 1;
	edit.complete = complete;
	edit.length = edit.last - edit.first + 1;
	if (!(m->prefix = buf_get()) ||
	    (n = http_write_edited_head(buf_tail(m->prefix), buf_room(m->prefix), &resp,
	                                m->store->data, &edit)) < 0)
		return -1;
	m->prefix->end += (size_t)n;
	m->offset = resp.head_len;
	m->until = resp.head_len + (size_t)edit.length;
	if (edit.length > p->served)
		p->served = edit.length;
	count_served(r);
	return 1;
}

/*
 * A whole object is served as the origin answered it, once its head is in
 * memory: only a 200, not private, varying on nothing the client's
 * request does not share with the proxy's.
 */
static int
prepare_whole(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct ra_piece *p = r->piece;
	size_t max = cfg_of(p->shelf->st)->max_header_bytes;
	/* Not parsed while the memory is empty: "no error" until then. */
	struct http_parser ps = {.error = HTTP_HEAD_OK};
	struct http_head resp;

	if (!m->store->data ||
	    !parse_head(HTTP_RESPONSE, m->store->data, m->store->len, max, &ps, &resp))
		return m->store->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? 0 : -1;
	if (resp.status != 200 || ranges_response_private(&resp, m->store->data)) {
		refuse(p, "a whole object fetched ahead is not a public 200");
		return -1;
	}
	if (!same_requester(r, &resp, m->store->data))
		return -1;
	p->served = 1;
	count_served(r);
	return 1;
}

static void
reader_done(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct ra_piece *p = r->piece;

	buf_put(r->ask);
	free(r);
	p->readers--;
	drop_if_done(p);
}

/*
 * Fetches under the key still arriving, that no client reads, before p:
 * pipelined on one connection, p comes after them. A client skipping more
 * than one of them would wait behind wrong guesses: it asks the origin.
 */
static unsigned
guesses_ahead(const struct ra_shelf *s, const struct ra_piece *p)
{
	unsigned n = 0;

	KP_LIST_EACH(o, &s->pieces, const struct ra_piece, link)
		if (o->state == PIECE_FETCHING && !o->readers && !o->dead && !o->owned &&
		    o->range.first < p->range.first)
			n++;
	return n;
}

struct source *
ra_store_serve(struct ra_store *st, const struct ra_ask *ask, const struct http_head *h,
               const char *base)
{
	struct ra_key key;
	struct ra_shelf *s;
	struct ra_piece *p;
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
	p = form == RANGE_NONE ? piece_whole(s) : piece_at(s, asked.first);
	/* Past what is fetched: an open range only if the piece runs to the end. */
	if (!p || p->state == PIECE_FAILED || guesses_ahead(s, p) > 1 ||
	    (!p->whole && asked.last > p->range.last && !(asked.last == UINT64_MAX && p->to_end)) ||
	    h->head_len > buf_capacity()) {
		if (!kp_list_empty(&s->pieces)) {
			kp_stats.readahead_misses++;
			drop_far(s);
		}
		return NULL;
	}
	if (!(r = calloc(1, sizeof(*r))))
		return NULL;
	if (!(r->ask = buf_get())) {
		free(r);
		return NULL;
	}
	memcpy(buf_tail(r->ask), base, h->head_len);
	r->ask->end = h->head_len;
	r->piece = p;
	r->asked = asked;
	r->m.owner = r;
	r->m.done = reader_done;
	memsource_open_slice(&r->m, &p->mem, p->whole ? prepare_whole : prepare_slice);
	p->readers++;
	r->joined = p->state == PIECE_FETCHING;
	/* A client waits for it now: no longer behind other clients' requests. */
	if (r->joined)
		exchange_promote(&p->ex);
	return &r->m.src;
}

/* ---- sweeping ----------------------------------------------------------------------- */

static void
sweep_shelf(struct table_node *n, void *arg)
{
	struct ra_shelf *s = container_of(n, struct ra_shelf, node);
	ev_tstamp now = *(const ev_tstamp *)arg;
	double ttl = cfg_of(s->st)->read_ahead_ttl;

	KP_LIST_EACH(p, &s->pieces, struct ra_piece, link)
		if (p->state == PIECE_HELD && !p->readers && !p->owned && now - p->held_since > ttl)
			piece_drop(p);
	if (kp_list_empty(&s->pieces) && now - s->used > ttl)
		shelf_free(s);
}

void
ra_store_sweep(struct ra_store *st, ev_tstamp now)
{
	table_each(&st->shelves, sweep_shelf, &now);
}

unsigned long
ra_store_take_freed(struct ra_store *st)
{
	unsigned long n = st->freed;

	st->freed = 0;
	return n;
}

struct ra_store *
ra_store_new(const struct proxy_env *env)
{
	struct ra_store *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	if (table_init(&st->shelves) < 0) {
		free(st);
		return NULL;
	}
	if (table_init(&st->shares) < 0) {
		table_free(&st->shelves);
		free(st);
		return NULL;
	}
	st->env = env;
	ev_prepare_init(&st->reaper, reaper_cb);
	return st;
}

static void
free_shelf(struct table_node *n, void *arg)
{
	struct ra_shelf *s = container_of(n, struct ra_shelf, node);
	struct ra_piece *p;

	(void)arg;
	while ((p = KP_LIST_FIRST(&s->pieces, struct ra_piece, link)) != NULL) {
		/* A reader still open points at the memory: it is failed and let go first. */
		memstore_free(&p->mem);
		p->readers = 0;
		piece_free(p);
	}
	shelf_free(s);
}

void
ra_store_free(struct ra_store *st)
{
	if (!st)
		return;
	ev_prepare_stop(st->env->loop, &st->reaper);
	st->dead = NULL;
	table_each(&st->shelves, free_shelf, NULL);
	/* Fetches failed while their neighbours were freed may have asked for the reaper again. */
	ev_prepare_stop(st->env->loop, &st->reaper);
	st->dead = NULL;
	table_free(&st->shelves);
	/* Every share went with the last of its pieces. */
	table_free(&st->shares);
	free(st);
}
