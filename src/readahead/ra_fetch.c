#include "kp/ra_fetch.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/dispatch.h"
#include "kp/evglue.h"
#include "kp/exchange.h"
#include "kp/log.h"
#include "kp/stats.h"
#include "kp/table.h"

/* Room for the stored head beside the body a piece's answer may hold. */
#define HEAD_ROOM 1024

enum piece_state {
	PIECE_FETCHING,   /* the request is on its way or its answer arriving */
	PIECE_WHOLE,      /* the whole answer is in memory */
	PIECE_FAILED,     /* it ended otherwise: no answer, not as asked, cut, or dropped */
};

/* A client address's part of the memory; freed with the last thing counted in it. */
struct ra_share {
	struct table_node node;          /* in fe->shares, by address */
	uint8_t family;
	uint8_t addr[16];
	size_t charged;
	unsigned holds;                  /* pieces and records counted in it */
	struct ra_path path;             /* as its fetches found the path */
};

struct ra_piece {
	struct ra_fetcher *fe;
	enum piece_state state;
	bool dropped;                    /* its owner let go: on the reaper's list, or freed soon */
	/*
	 * In ra_fetch_start(): an end now (dispatch refused the request at
	 * once, or a pipelined write was cut short) is not the owner's to hear,
	 * since the owner has not got the piece yet; it sees ra_piece_ended().
	 */
	bool starting;
	struct ra_piece *dead_next;      /* the reaper's list */
	struct byte_range range;         /* asked of the origin */
	bool whole;                      /* a whole object, asked without a Range */
	uint64_t expect;                 /* body bytes it should bring; 0: not known */
	size_t charged;                  /* its answer's memory, counted against --fetch-memory */
	size_t footprint;                /* its record and request, counted as records */
	struct ra_share *share;          /* whose share they count in; NULL once counted out */
	ev_tstamp head_at;               /* its answer's head arrived; 0: not yet */
	double rate;                     /* bytes per second, once it ended whole; 0: not known */
	char *req;                       /* the request it sent */
	size_t req_len;
	const struct ra_piece_owner *owner;
	void *owner_arg;
	struct buf *in, *out;            /* the exchange's buffers */
	struct memstore mem;
	struct exchange ex;
};

struct ra_fetcher {
	const struct proxy_env *env;
	struct table shares;
	size_t charged;                  /* bytes counted against the memory cap: both below */
	size_t answers;                  /* ... for the pieces' answers */
	size_t records;                  /* ... for what is kept about them */
	unsigned long freed;             /* things counted out since ra_fetcher_take_freed */
	struct ra_piece *dead;           /* pieces to free at the end of the iteration */
	ev_prepare reaper;
};

static const struct exchange_ops fetch_ops;

/* ---- shares: the memory, in all and per client ----------------------------------- */

struct address {
	uint8_t family;
	uint8_t addr[16];
};

static struct address
address_of(const struct ra_key *k)
{
	struct address a = {k->family, {0}};

	memcpy(a.addr, k->addr, sizeof(a.addr));
	return a;
}

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
share_find(const struct ra_fetcher *fe, const struct ra_key *k)
{
	struct address a = address_of(k);
	struct table_node *n = table_find_value(&fe->shares, address_hash(&a), is_share, &a);

	return n ? container_of(n, struct ra_share, node) : NULL;
}

static struct ra_share *
share_get(struct ra_fetcher *fe, const struct ra_key *k)
{
	struct ra_share *s = share_find(fe, k);
	struct address a = address_of(k);

	if (s)
		return s;
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	s->family = a.family;
	memcpy(s->addr, a.addr, sizeof(s->addr));
	table_add_value(&fe->shares, &s->node, address_hash(&a));
	return s;
}

/* What a charge is for: the gauges tell answers apart from what is kept about them. */
enum charge_kind {
	CHARGE_ANSWER,     /* a piece's answer, arriving or held */
	CHARGE_RECORD,     /* a piece's record and request, an owner's records */
};

/*
 * Something's bytes are counted in, or out (and when sh counts nothing
 * more, it is freed: whoever counted in it no longer points at it).
 */
static void
charge(struct ra_fetcher *fe, struct ra_share *sh, enum charge_kind kind, size_t bytes, bool add)
{
	size_t *gauge = kind == CHARGE_ANSWER ? &fe->answers : &fe->records;

	*gauge = add ? *gauge + bytes : *gauge - bytes;
	fe->charged = fe->answers + fe->records;
	sh->charged = add ? sh->charged + bytes : sh->charged - bytes;
	kp_stats.fetch_memory_bytes = fe->answers;
	kp_stats.fetch_records_bytes = fe->records;
	if (add) {
		sh->holds++;
		return;
	}
	fe->freed++;
	if (--sh->holds == 0) {
		table_remove(&fe->shares, &sh->node);
		free(sh);
	}
}

/* Is there room for bytes more, in all and in the share of sh (NULL: none yet)? */
static bool
fits(const struct ra_fetcher *fe, const struct ra_share *sh, size_t bytes)
{
	size_t cap = fe->env->cfg->fetch_memory;

	/* bytes is at most half the memory here: no sum wraps. */
	return bytes != 0 && bytes <= cap / 2 && fe->charged + bytes <= cap &&
	       (sh ? sh->charged : 0) + bytes <= cap / 2;
}

bool
ra_memory_fits(const struct ra_fetcher *fe, const struct ra_key *key, size_t bytes)
{
	return fits(fe, share_find(fe, key), bytes);
}

bool
ra_memory_charge(struct ra_fetcher *fe, const struct ra_key *key, size_t bytes)
{
	struct ra_share *sh = share_find(fe, key);

	if (!fits(fe, sh, bytes) || (!sh && !(sh = share_get(fe, key))))
		return false;
	charge(fe, sh, CHARGE_RECORD, bytes, true);
	return true;
}

void
ra_memory_discharge(struct ra_fetcher *fe, const struct ra_key *key, size_t bytes)
{
	struct ra_share *sh = share_find(fe, key);

	if (sh)
		charge(fe, sh, CHARGE_RECORD, bytes, false);
}

struct ra_path
ra_memory_client_path(const struct ra_fetcher *fe, const struct ra_key *key)
{
	const struct ra_share *sh = share_find(fe, key);

	return sh ? sh->path : (struct ra_path){0, 0};
}

unsigned long
ra_fetcher_take_freed(struct ra_fetcher *fe)
{
	unsigned long n = fe->freed;

	fe->freed = 0;
	return n;
}

size_t
ra_charge_range(const struct kp_config *cfg, uint64_t length)
{
	if (length > cfg->fetch_memory / 2)
		return 0;
	return (size_t)length + cfg->max_header_bytes + HEAD_ROOM;
}

size_t
ra_charge_whole(const struct kp_config *cfg, uint64_t length)
{
	uint64_t cap = cfg->fetch_memory / 2, charged;

	if (length > cap)
		return 0;
	charged = length ? length + length / 2 + cfg->max_header_bytes + HEAD_ROOM
	                 : cfg->fetch_memory / 8;
	return charged < cap ? (size_t)charged : (size_t)cap;
}

size_t
ra_piece_footprint(size_t request_len)
{
	return sizeof(struct ra_piece) + request_len;
}

/* A piece's answer and its record are counted in its share, or out. */
static void
count_piece(struct ra_piece *p, bool add)
{
	charge(p->fe, p->share, CHARGE_ANSWER, p->charged, add);
	charge(p->fe, p->share, CHARGE_RECORD, p->footprint, add);
	if (!add)
		p->share = NULL;
}

/* ---- the fetch: an exchange of the proxy's own, into memory ------------------------ */

static struct ra_piece *
piece_of(struct exchange *ex)
{
	return container_of(ex, struct ra_piece, ex);
}

/* The fetch is over, one way or another: its owner hears why, unless it let go. */
static void
fetch_ended(struct ra_piece *p, enum ra_fetch_end why, const char *text)
{
	if (why != RA_FETCH_WHOLE) {
		log_debug("fetch %s bytes=%llu-%llu: %s", p->ex.target.key,
		          (unsigned long long)p->range.first, (unsigned long long)p->range.last,
		          text);
		p->state = PIECE_FAILED;
		memstore_fail(&p->mem);
	}
	if (p->owner && p->owner->ended && !p->dropped && !p->starting)
		p->owner->ended(p->owner_arg, p, why);
}

static void
fetch_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	(void)status;
	(void)keep_alive;
	fetch_ended(piece_of(ex), RA_FETCH_NO_ANSWER, why);
}

static void
fetch_abort(struct exchange *ex, const char *why)
{
	fetch_ended(piece_of(ex), RA_FETCH_CUT, why ? why : "closed");
}

/* Its head came: the clock for its rate starts, and its connection tells the round trip. */
static void
fetch_heard(struct exchange *ex)
{
	struct ra_piece *p = piece_of(ex);
	double rtt = exchange_path(ex).rtt;

	p->head_at = clock_now(p->fe->env->clock);
	if (rtt > 0 && p->share)
		p->share->path.rtt = rtt;
	if (p->owner && p->owner->heard)
		p->owner->heard(p->owner_arg, p, rtt);
}

/*
 * The rate one fetch's body arrived at, head to end. The fastest seen is
 * the client's path's: a fetch sharing the path with the client's own
 * request or another fetch sees only its share, and the path is what
 * depth must cover.
 */
static void
time_fetch(struct ra_piece *p)
{
	double took = clock_now(p->fe->env->clock) - p->head_at;

	if (p->head_at <= 0 || took <= 0)
		return;
	p->rate = (double)(p->whole ? p->mem.len : p->range.last - p->range.first + 1) / took;
	if (p->share && p->rate > p->share->path.rate)
		p->share->path.rate = p->rate;
}

static void
fetch_finished(struct exchange *ex)
{
	struct ra_piece *p = piece_of(ex);

	/* An error, or a whole object for a range: not the piece asked for. */
	if (exchange_status(ex) != (p->whole ? 200 : 206)) {
		fetch_ended(p, RA_FETCH_NOT_AS_ASKED, "the origin did not answer with the piece");
		return;
	}
	time_fetch(p);
	/* Its end is the end of the memory: readers past the last byte see EOF. */
	conn_shutdown_write(&p->mem.writer);
	p->state = PIECE_WHOLE;
	fetch_ended(p, RA_FETCH_WHOLE, NULL);
}

static void
fetch_tunnel_opened(struct exchange *ex)
{
	/* The plan refuses a 101 to memory; should one get here, it is no answer. */
	fetch_ended(piece_of(ex), RA_FETCH_NO_ANSWER, "the origin switched protocols");
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

/* A piece for f, counted in its client's share; NULL with *why set when not made. */
static struct ra_piece *
piece_new(struct ra_fetcher *fe, const struct ra_fetch *f, const struct ra_key *key,
          enum ra_fetch_start *why)
{
	size_t req_len = buf_len(f->request);
	struct ra_share *sh;
	struct ra_piece *p;

	/* The memory its answer may take, and what it keeps besides: its record, its request. */
	if (!f->charge || !fits(fe, share_find(fe, key), f->charge + ra_piece_footprint(req_len))) {
		kp_stats.fetch_throttled++;
		*why = RA_FETCH_NO_ROOM;
		return NULL;
	}
	*why = RA_FETCH_NO_MEMORY;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	if (!(sh = share_get(fe, key)) || !(p->req = malloc(req_len))) {
		free(p);
		return NULL;
	}
	memcpy(p->req, buf_head(f->request), req_len);
	p->req_len = req_len;
	p->fe = fe;
	p->share = sh;
	p->range = f->whole ? (struct byte_range){0, UINT64_MAX} : f->range;
	p->whole = f->whole;
	p->expect = f->expect;
	p->charged = f->charge;
	p->footprint = ra_piece_footprint(req_len);
	p->owner = f->owner;
	p->owner_arg = f->owner_arg;
	count_piece(p, true);
	*why = RA_FETCH_STARTED;
	return p;
}

struct ra_piece *
ra_fetch_start(struct ra_fetcher *fe, const struct ra_fetch *f, enum ra_fetch_start *why)
{
	struct http_target target = *f->ask->target;
	enum ra_fetch_start ignored;
	struct ra_piece *p;
	struct ra_key key;
	int started;

	if (!why)
		why = &ignored;
	/* The share is the client's: its address, whatever the path. */
	ra_key_make(&key, f->ask, target.path, target.path_len);
	p = piece_new(fe, f, &key, why);
	buf_put(f->request);
	if (!p)
		return NULL;
	memstore_init(&p->mem, fe->env->loop, f->charge, fetch_io);
	exchange_init(&p->ex, fe->env, &p->mem.writer, &p->in, &p->out, &fetch_ops, true);
	p->ex.owner.restricted = f->ask->restricted;
	p->ex.owner.https = f->ask->https;
	p->ex.owner.stall_timeout = f->stall;
	/* The head is the owner's, origin-form; the target only names where it goes. */
	target.path = "/";
	target.path_len = 1;
	log_debug("fetch %s%.*s", f->ask->dispatch_key, (int)f->ask->target->path_len,
	          f->ask->target->path);
	p->starting = true;
	started = exchange_start(&p->ex, &target, p->req, p->req_len,
	                         f->may_connect ? DISPATCH_ANY : DISPATCH_AHEAD);
	p->starting = false;
	if (started < 0) {
		p->state = PIECE_FAILED;
		memstore_fail(&p->mem);
	}
	return p;
}

/* ---- pieces, seen and let go by their owners --------------------------------------- */

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

bool
ra_piece_whole(const struct ra_piece *p)
{
	return p->state == PIECE_WHOLE;
}

const char *
ra_piece_request(const struct ra_piece *p, size_t *len)
{
	*len = p->req_len;
	return p->req;
}

uint64_t
ra_piece_left(const struct ra_piece *p)
{
	if (p->state != PIECE_FETCHING)
		return 0;
	if (p->expect == 0)
		return UINT64_MAX;
	return p->mem.len < p->expect ? p->expect - p->mem.len : 0;
}

uint64_t
ra_piece_body(const struct ra_piece *p)
{
	struct http_parser ps;
	struct http_head h;

	/* The head is not the object's: none of it before the head is whole. */
	if (!http_parse_held_head(HTTP_RESPONSE, p->mem.data, p->mem.len,
	                          p->fe->env->cfg->max_header_bytes, &ps, &h))
		return 0;
	return p->mem.len - h.head_len;
}

double
ra_piece_rate(const struct ra_piece *p)
{
	return p->rate;
}

void
ra_piece_promote(struct ra_piece *p)
{
	if (p->state == PIECE_FETCHING)
		exchange_promote(&p->ex);
}

static void
piece_free(struct ra_piece *p)
{
	exchange_release(&p->ex);
	if (p->share)
		count_piece(p, false);
	memstore_free(&p->mem);
	free(p->req);
	buf_put(p->in);
	buf_put(p->out);
	free(p);
}

void
ra_piece_drop(struct ra_piece *p)
{
	struct ra_fetcher *fe = p->fe;

	if (p->dropped)
		return;
	p->dropped = true;
	/* What a fetch still brings is of no use now: its connection goes with it. */
	if (p->state == PIECE_FETCHING) {
		exchange_release(&p->ex);
		p->state = PIECE_FAILED;
		memstore_fail(&p->mem);
	}
	p->dead_next = fe->dead;
	fe->dead = p;
	if (!ev_is_active(&fe->reaper))
		ev_prepare_start(fe->env->loop, &fe->reaper);
}

void
ra_piece_drop_for_next(struct ra_piece *p)
{
	if (p->share)
		count_piece(p, false);
	ra_piece_drop(p);
}

static void
reaper_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct ra_fetcher *fe = container_of(w, struct ra_fetcher, reaper);

	(void)revents;
	while (fe->dead) {
		struct ra_piece *p = fe->dead;

		fe->dead = p->dead_next;
		piece_free(p);
	}
	ev_prepare_stop(loop, w);
}

struct ra_fetcher *
ra_fetcher_new(const struct proxy_env *env)
{
	struct ra_fetcher *fe = calloc(1, sizeof(*fe));

	if (!fe)
		return NULL;
	if (table_init(&fe->shares) < 0) {
		free(fe);
		return NULL;
	}
	fe->env = env;
	ev_prepare_init(&fe->reaper, reaper_cb);
	return fe;
}

void
ra_fetcher_free(struct ra_fetcher *fe)
{
	if (!fe)
		return;
	ev_prepare_stop(fe->env->loop, &fe->reaper);
	reaper_cb(fe->env->loop, &fe->reaper, 0);
	/* Every share went with the last thing counted in it. */
	table_free(&fe->shares);
	free(fe);
}
