#include "kp/ra_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/evglue.h"
#include "kp/hostpattern.h"
#include "kp/log.h"
#include "kp/memconn.h"
#include "kp/ranges.h"
#include "kp/stats.h"
#include "kp/table.h"

/* Resumes of one piece in a row without a byte of progress, before the client is cut off. */
#define RESUMES_MAX 5
/* How long a host that refused a second connection gets only one. */
#define BACKOFF_SECONDS 600.0
/* Hosts remembered as backed off, or as answering ranges; the oldest entry gives way. */
#define HOSTS_REMEMBERED 32
/* URLs remembered as answering a bounded Range with the whole object; the oldest gives way. */
#define URLS_REMEMBERED 64
/*
 * A host is taken to answer no ranges at all once this many of its URLs
 * answered whole, and none of them with a 206, within NO_RANGES_SECONDS: a
 * client asking for one URL says nothing of the host's others.
 */
#define WHOLE_URLS_FOR_HOST 3
/* How long a URL that answered a bounded Range with the whole object is not asked again. */
#define NO_RANGES_SECONDS 600.0
/* Pieces of one download between the one read and the last asked for. */
#define PIECES_MAX 8
/* The first pieces of a download on several connections are no shorter than this. */
#define COLD_PIECE_MIN (256u * 1024)
/* Pieces shortened to fit memory are whole multiples of this. */
#define SPLIT_ROUND (64u * 1024)
/* What a piece's request adds to the object's: its Range and If-Range, at most. */
#define PIECE_FIELDS_ROOM 512
/* A validator longer than this is no validator we keep. */
#define VALIDATOR_MAX 256
/*
 * A piece's fetch that brings nothing for a quarter of the client's own
 * deadline (the --response-timeout or --io-timeout its exchange has too),
 * and never longer than STALL_MAX, a stall no healthy origin shows, is given
 * up and the rest asked again elsewhere: the client sees a resume, not a cut.
 */
#define STALL_SHARE 4
#define STALL_MAX 15.0
/* How soon a download that found no memory for its next piece tries again. */
#define THROTTLE_RETRY 0.05

/* Each note has a table of its own, so that hosts noted for one never push out the other. */
enum host_note {
	HOST_BACKED_OFF,   /* refused more than one connection: one for a while */
	HOST_RANGED,       /* answered a bounded Range with a 206 lately */
	HOST_NOTES,
};

struct host_memo {
	char host[272];                /* host:port, the pool key */
	ev_tstamp until;               /* 0: slot free */
};

/* A URL that answered a bounded Range with the whole object: not split for a while. */
struct url_memo {
	char host[272];
	uint32_t path_hash;            /* table_hash_more of the path */
	ev_tstamp until;               /* 0: slot free */
};

struct ra_split {
	const struct proxy_env *env;
	struct ra_store *st;
	struct host_memo hosts[HOST_NOTES][HOSTS_REMEMBERED];
	struct url_memo urls[URLS_REMEMBERED];
	unsigned downloads;   /* running now */
};

/* One piece of a download's series, in the order the client reads them. */
struct slot {
	struct ra_piece *p;
	uint64_t first, last;   /* the object's bytes asked for */
	bool if_range;          /* asked with If-Range (the validator was known) */
};

enum download_state {
	DOWNLOAD_FIRST,     /* the first piece's head decides whether it is split */
	DOWNLOAD_RUNNING,   /* the client reads the pieces in order */
};

struct download {
	struct ra_split *sp;
	struct memsource m;            /* the client's source, reading the pieces in turn */
	enum download_state state;
	/* The client, as the fetches need it: copies of what its exchange held. */
	struct sockaddr_storage client;
	struct http_target target;
	char dispatch_key[DISPATCH_KEY_MAX];
	struct ra_ask ask;
	struct ra_key key;
	struct buf *request;           /* the proxy's request for the object, as sent without us */
	bool client_ranged;            /* the client asked with a Range: it gets a 206 */
	uint64_t want_first, want_last;   /* the client's bytes; want_last UINT64_MAX until known */
	uint64_t complete;             /* the object's length; 0 until the first head */
	char validator[VALIDATOR_MAX];
	size_t validator_len;
	unsigned connections;          /* pieces fetched at once, at most */
	bool counted;                  /* in split_downloads: more than one piece */
	unsigned most_in_flight;
	struct slot ring[PIECES_MAX];
	unsigned head, count;          /* ring[head]: the piece read now */
	uint64_t next_first;           /* the next piece to ask for starts here */
	uint64_t window_first;         /* the object's byte at the reader's window start */
	size_t window_at;              /* ... and the offset in the piece's memory it is at */
	unsigned pieces_asked;
	unsigned resumes, resumes_in_a_row;
	bool mismatch;                 /* a piece was of another version, or not as asked */
	bool waiting;                  /* the reader waits for the next piece to be asked */
	bool dropped_now;              /* a piece was dropped in this loop iteration */
	bool refused;                  /* a piece was refused by status on more than one connection */
	struct clock_timer retry;      /* memory ran out: try the next piece again shortly */
	char word[32];                 /* what the access log calls it */
	char path[];                   /* the key's path, copied */
};

static const struct kp_config *
cfg_of(const struct download *d)
{
	return d->sp->env->cfg;
}

/* ---- hosts remembered ------------------------------------------------------ */

static struct host_memo *
memo_find(const struct ra_split *sp, const char *host, enum host_note note)
{
	ev_tstamp now = clock_now(sp->env->clock);

	for (unsigned i = 0; i < HOSTS_REMEMBERED; i++) {
		const struct host_memo *h = &sp->hosts[note][i];

		if (h->until > now && strcmp(h->host, host) == 0)
			return (struct host_memo *)h;
	}
	return NULL;
}

/* Remembers host as note for seconds; true when it was not already. */
static bool
memo_note(struct ra_split *sp, const char *host, enum host_note note, double seconds)
{
	ev_tstamp now = clock_now(sp->env->clock);
	struct host_memo *h = memo_find(sp, host, note), *oldest = &sp->hosts[note][0];
	bool fresh = h == NULL;

	if (!h) {
		for (unsigned i = 0; i < HOSTS_REMEMBERED; i++)
			if (sp->hosts[note][i].until < oldest->until)
				oldest = &sp->hosts[note][i];
		h = oldest;
		snprintf(h->host, sizeof(h->host), "%s", host);
	}
	h->until = now + seconds;
	return fresh;
}

static uint32_t
path_hash(const char *path, size_t len)
{
	return table_hash_more(TABLE_HASH_START, path, len);
}

/* Remembers that host's path answered a bounded Range whole, for NO_RANGES_SECONDS. */
static void
url_note(struct ra_split *sp, const char *host, const char *path, size_t len)
{
	ev_tstamp now = clock_now(sp->env->clock);
	uint32_t hash = path_hash(path, len);
	struct url_memo *u = &sp->urls[0];

	for (unsigned i = 0; i < URLS_REMEMBERED; i++) {
		struct url_memo *o = &sp->urls[i];

		if (o->until > now && o->path_hash == hash && strcmp(o->host, host) == 0) {
			u = o;
			break;
		}
		if (o->until < u->until)
			u = o;
	}
	snprintf(u->host, sizeof(u->host), "%s", host);
	u->path_hash = hash;
	u->until = now + NO_RANGES_SECONDS;
}

/*
 * Does this URL answer ranges whole, as far as is remembered: it did
 * itself, or WHOLE_URLS_FOR_HOST of its host's did and none answered a 206?
 */
static bool
answers_whole(const struct ra_split *sp, const char *host, const char *path, size_t len)
{
	ev_tstamp now = clock_now(sp->env->clock);
	uint32_t hash = path_hash(path, len);
	unsigned urls = 0;

	for (unsigned i = 0; i < URLS_REMEMBERED; i++) {
		const struct url_memo *u = &sp->urls[i];

		if (u->until <= now || strcmp(u->host, host) != 0)
			continue;
		if (u->path_hash == hash)
			return true;
		urls++;
	}
	return urls >= WHOLE_URLS_FOR_HOST && !memo_find(sp, host, HOST_RANGED);
}

bool
ra_split_listed(const struct ra_split *sp, const struct http_target *target)
{
	const struct kp_config *cfg = sp->env->cfg;

	return cfg->nsplit && host_patterns_match(cfg->split, cfg->nsplit, target->host);
}

unsigned
ra_split_connections(const struct ra_split *sp, const struct http_target *target)
{
	if (!ra_split_listed(sp, target) || memo_find(sp, target->key, HOST_BACKED_OFF))
		return 1;
	return sp->env->cfg->split_connections;
}

/* ---- pieces ---------------------------------------------------------------- */

static struct slot *
slot_at(struct download *d, unsigned i)
{
	return &d->ring[(d->head + i) % PIECES_MAX];
}

static unsigned
in_flight(struct download *d)
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->count; i++)
		if (slot_at(d, i)->p && !ra_piece_ended(slot_at(d, i)->p))
			n++;
	return n;
}

static void piece_ended(void *arg, struct ra_piece *p);

static double
piece_stall(const struct kp_config *cfg)
{
	double client = cfg->io_timeout < cfg->response_timeout ? cfg->io_timeout
	                                                         : cfg->response_timeout;

	return client / STALL_SHARE < STALL_MAX ? client / STALL_SHARE : STALL_MAX;
}

/*
 * Asks for the object's bytes first..last: the proxy's request for the
 * object with that Range, and with If-Range once the version is known, so
 * that another version comes back whole and is refused. NULL when it was
 * not made (memory, a head too large).
 */
static struct ra_piece *
fetch_piece(struct download *d, uint64_t first, uint64_t last, bool may_connect)
{
	static const char *const drop[] = {"range", "if-range", NULL};
	const struct kp_config *cfg = cfg_of(d);
	struct http_head_edit edit = {.drop = drop, .range = true, .first = first, .last = last};
	struct ra_fetch f = {
		.ask = &d->ask, .key = &d->key, .range = {first, last}, .expect = last - first + 1,
		.may_connect = may_connect, .stall = piece_stall(cfg),
	};
	struct http_parser ps;
	struct http_head req;
	struct ra_piece *p;

	if (d->validator_len) {
		edit.if_range = d->validator;
		edit.if_range_len = d->validator_len;
	}
	f.charge = ra_charge_range(cfg, f.expect);
	http_parser_init(&ps, HTTP_REQUEST, cfg->max_header_bytes, cfg->max_header_bytes);
	http_parser_start(&ps, &req);
	if (!f.charge ||
	    http_parse_head(&ps, buf_head(d->request), buf_len(d->request)) != HTTP_PARSE_DONE ||
	    !ra_fetch_request(&f, &req, buf_head(d->request), &edit) ||
	    !(p = ra_store_fetch_owned(d->sp->st, &f, piece_ended, d)))
		return NULL;
	kp_stats.split_pieces++;
	d->pieces_asked++;
	return p;
}

/*
 * Pieces of a download at once, the one read included: on one connection
 * the one arriving and one behind it, asked before the first is in so that
 * no round trip falls between them; on several, two per connection, so
 * that connections done with theirs go on while the piece read now, on a
 * slower one, still arrives.
 */
static unsigned
pieces_ahead(const struct download *d)
{
	return d->connections > 1 ? 2 * d->connections : 2;
}

/*
 * The length of the next piece: no longer than lets pieces_ahead() of them
 * fit the client's share of the memory (else the share, not the rule,
 * would set how many are on their way), and on several connections the
 * first ones shorter still, so that a cold download starts on all of them.
 */
static uint64_t
next_length(const struct download *d)
{
	const struct kp_config *cfg = cfg_of(d);
	uint64_t size = cfg->split_size;
	uint64_t share = cfg->read_ahead_memory / 2 / pieces_ahead(d);
	/* Each piece is charged room for its answer's head, its record and its request too. */
	uint64_t head = ra_charge_range(cfg, 0) + ra_piece_footprint(buf_len(d->request) +
	                                                              PIECE_FIELDS_ROOM);
	uint64_t fits = share > head ? share - head : 0;
	/* Never past --split-size: an origin may serve nothing longer at full speed. */
	uint64_t least = size < COLD_PIECE_MIN ? size : COLD_PIECE_MIN;

	fits -= fits % SPLIT_ROUND;
	if (fits < size)
		size = fits > least ? fits : least;
	if (d->connections > 1 && d->pieces_asked < d->connections) {
		uint64_t cold = size / d->connections;

		size = cold > least ? cold : least;
	}
	return size;
}

/* Asks for the next piece; false when there is none to ask, or no room. */
static bool
ask_next(struct download *d)
{
	/*
	 * The first piece, and every piece on several connections, may take a
	 * connection of its own; on one, the next piece waits behind the one
	 * arriving (pipelined where the origin has shown it can).
	 */
	bool may_connect = d->count == 0 || d->connections > 1;
	uint64_t first = d->next_first, last;
	struct ra_piece *p;
	struct slot *s;

	if (d->count == PIECES_MAX || first > d->want_last)
		return false;
	last = first + next_length(d) - 1;
	if (last > d->want_last || last < first)
		last = d->want_last;
	if (!(p = fetch_piece(d, first, last, may_connect))) {
		/*
		 * No room now. A piece this download just dropped is freed at the
		 * end of this loop iteration: try again in the next one then;
		 * otherwise, shortly, while other clients' pieces go.
		 */
		if (!clock_timer_armed(&d->retry))
			clock_timer_start(&d->retry, d->dropped_now ? 0 : THROTTLE_RETRY);
		return false;
	}
	s = slot_at(d, d->count++);
	*s = (struct slot){.p = p, .first = first, .last = last, .if_range = d->validator_len > 0};
	d->next_first = last + 1;
	return true;
}

/*
 * Keeps the download going: pieces asked for, up to one per connection in
 * flight, and one more waiting behind on one connection, as memory allows
 * (the store's shares: a slow reader holds its pieces, and so slows this).
 */
static void
pump(struct download *d)
{
	unsigned ahead = pieces_ahead(d);
	/* On one connection the piece behind is asked while the one before arrives. */
	unsigned fetching = d->connections > 1 ? d->connections : 2;
	unsigned n;

	if (d->state != DOWNLOAD_RUNNING)
		return;
	while (d->count < ahead && in_flight(d) < fetching && ask_next(d))
		;
	n = in_flight(d);
	if (n > d->connections)
		n = d->connections;
	if (n > d->most_in_flight)
		d->most_in_flight = n;
}

static void read_piece(struct download *d, struct ra_piece *p, uint64_t first);
static int resume(struct download *d, uint64_t from);

static void
retry_cb(struct clock_timer *t)
{
	struct download *d = container_of(t, struct download, retry);

	/* A resume that found no memory comes first: the client waits for it. */
	if (d->waiting && d->count && !slot_at(d, 0)->p) {
		if (resume(d, slot_at(d, 0)->first) == 1) {
			d->waiting = false;
			memsource_wake(&d->m);
		}
		return;
	}
	pump(d);
	/* The reader may be waiting for exactly this piece. */
	if (d->waiting && d->count) {
		d->waiting = false;
		read_piece(d, slot_at(d, 0)->p, slot_at(d, 0)->first);
		memsource_wake(&d->m);
	}
}

/* A piece's fetch ended, whole or not: a connection is free for the next. */
static void
piece_ended(void *arg, struct ra_piece *p)
{
	struct download *d = arg;

	(void)p;
	pump(d);
}

/* ---- heads ------------------------------------------------------------------ */

static bool
parse_response(const struct memstore *mem, size_t max, struct http_parser *ps,
               struct http_head *h)
{
	http_parser_init(ps, HTTP_RESPONSE, max, max);
	http_parser_start(ps, h);
	return mem->data && http_parse_head(ps, mem->data, mem->len) == HTTP_PARSE_DONE;
}

/* Content-Encoding absent or identity only, and no Cache-Control: no-transform. */
static bool
bytes_as_stored(const struct http_head *h, const char *base)
{
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];

		if (http_span_is(base, f->name, "content-encoding") &&
		    !http_span_is(base, f->value, "identity"))
			return false;
		if (http_span_is(base, f->name, "cache-control") &&
		    http_list_has(base, f->value, "no-transform"))
			return false;
	}
	return true;
}

/* Does the response carry the download's validator, the same as the first piece's? */
static bool
same_version(const struct download *d, const struct http_head *h, const char *base)
{
	struct http_span v;

	return ranges_if_range(h, base, &v) && v.len == d->validator_len &&
	       memcmp(base + v.off, d->validator, v.len) == 0;
}

/*
 * What an origin that minds how many connections a client opens answers
 * one too many (a CDN's 403, a 429, a 503, an account's 401).
 */
static bool
refuses_connections(int status)
{
	return status == 401 || status == 403 || status == 429 || status == 503;
}

/* Not done with a first piece that cannot be split: the origin answers the client itself. */
static int
not_split(struct download *d, const char *why)
{
	log_debug("split %s%.*s: %s; the origin answers", d->target.key, (int)d->key.path_len,
	          d->key.path, why);
	kp_stats.split_declined++;
	return -1;
}

/*
 * The first piece's head came: it is split only as a 206 with a complete
 * length, a validator for If-Range, bytes as stored, and the range as
 * asked. The client's head is then the origin's with the status, length
 * and Content-Range of its own request.
 */
static int
prepare_first(struct memsource *m)
{
	static const char *const drop[] = {"content-range", "content-length", NULL};
	struct download *d = m->owner;
	struct slot *s = slot_at(d, 0);
	struct memstore *mem = m->store;
	struct http_head_edit edit = {.drop = drop, .content_length = true};
	struct http_parser ps = {.error = HTTP_HEAD_OK};
	struct http_head h;
	struct http_span v;
	struct byte_range got;
	uint64_t complete, end;
	ssize_t n;

	if (!parse_response(mem, cfg_of(d)->max_header_bytes, &ps, &h))
		return mem->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? 0 : not_split(d, "no answer");
	if (h.status == 200) {
		/*
		 * The whole object for a bounded Range: this host serves no ranges,
		 * unless it answered so because it encoded the answer (nginx's gzip
		 * drops a Range), which says nothing of its other objects.
		 */
		if (bytes_as_stored(&h, mem->data))
			url_note(d->sp, d->target.key, d->key.path, d->key.path_len);
		return not_split(d, "the origin answered a range with the whole object");
	}
	/* An origin that minds several connections refused one of them: one is asked. */
	if (refuses_connections(h.status) && d->connections > 1) {
		d->refused = true;
		return -1;
	}
	if (h.status != 206 || !ranges_answered(&h, mem->data, &got, &complete) ||
	    got.first != s->first || got.last > s->last || (got.last < s->last && got.last != complete - 1))
		return not_split(d, "the origin did not answer with the range asked");
	if (!ranges_if_range(&h, mem->data, &v) || v.len > sizeof(d->validator))
		return not_split(d, "no validator to ask for the rest with (If-Range)");
	if (!bytes_as_stored(&h, mem->data))
		return not_split(d, "an encoding or no-transform");
	memcpy(d->validator, mem->data + v.off, v.len);
	d->validator_len = v.len;
	d->complete = complete;
	memo_note(d->sp, d->target.key, HOST_RANGED, NO_RANGES_SECONDS);
	end = d->want_last < complete - 1 ? d->want_last : complete - 1;
	d->want_last = end;
	s->last = got.last;
	/* Pieces asked before the length was known: those past the end go, the last one ends there. */
	while (d->count > 1 && slot_at(d, d->count - 1)->first > end) {
		ra_piece_drop(slot_at(d, d->count - 1)->p, 0);
		d->count--;
	}
	if (d->count > 1 && slot_at(d, d->count - 1)->last > end)
		slot_at(d, d->count - 1)->last = end;
	d->next_first = slot_at(d, d->count - 1)->last + 1;
	if (d->client_ranged) {
		edit.status = 206;
		edit.content_range = true;
		edit.first = d->want_first;
		edit.last = end;
		edit.complete = complete;
	} else {
		edit.status = 200;
	}
	edit.length = end - d->want_first + 1;
	if (!(m->prefix = buf_get()) ||
	    (n = http_write_edited_head(buf_tail(m->prefix), buf_room(m->prefix), &h, mem->data,
	                                &edit)) < 0)
		return not_split(d, "the client's head does not fit");
	m->prefix->end += (size_t)n;
	m->offset = d->window_at = h.head_len;
	m->until = h.head_len + (size_t)(got.last - got.first + 1);
	d->window_first = got.first;
	d->state = DOWNLOAD_RUNNING;
	if (d->want_last > got.last) {
		kp_stats.split_downloads++;
		d->counted = true;
	}
	snprintf(d->word, sizeof(d->word), "split");
	pump(d);
	return 1;
}

/*
 * A later piece's head came: it must be a 206 of exactly the bytes asked,
 * of the same version. A 401, 403, 429 or 503 on more than one connection
 * backs the host off to one; any other refusal is a version the client
 * must not get bytes of.
 */
static int
prepare_piece(struct memsource *m)
{
	struct download *d = m->owner;
	struct slot *s = slot_at(d, 0);
	struct memstore *mem = m->store;
	struct http_parser ps = {.error = HTTP_HEAD_OK};
	struct http_head h;
	struct byte_range got;
	uint64_t complete;

	if (!parse_response(mem, cfg_of(d)->max_header_bytes, &ps, &h))
		return mem->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? 0 : -1;
	if (refuses_connections(h.status)) {
		if (d->connections > 1) {
			d->refused = true;
			return -1;
		}
		log_info("split %s%.*s: the origin refused a piece (%u) on one connection: cut",
		         d->target.key, (int)d->key.path_len, d->key.path, h.status);
		kp_stats.split_mismatches++;
		d->mismatch = true;
		return -1;
	}
	if (h.status != 206 || !ranges_answered(&h, mem->data, &got, &complete) ||
	    complete != d->complete || got.first != s->first || got.last != s->last ||
	    !same_version(d, &h, mem->data) || !bytes_as_stored(&h, mem->data)) {
		log_info("split %s%.*s: bytes %llu-%llu came back as another version or range: "
		         "the client is cut off there",
		         d->target.key, (int)d->key.path_len, d->key.path,
		         (unsigned long long)s->first, (unsigned long long)s->last);
		kp_stats.split_mismatches++;
		d->mismatch = true;
		return -1;
	}
	m->offset = d->window_at = h.head_len;
	m->until = h.head_len + (size_t)(s->last - s->first + 1);
	d->window_first = s->first;
	return 1;
}

/* ---- reading on ----------------------------------------------------------------- */

/* Lets go of the piece read now, of which the client was given served bytes. */
static void
pop_piece(struct download *d, uint64_t served)
{
	struct slot *s = slot_at(d, 0);

	d->dropped_now = true;
	if (s->p)
		ra_piece_drop(s->p, served);
	s->p = NULL;
	d->head = (d->head + 1) % PIECES_MAX;
	d->count--;
}

/* Points the reader at a piece, from its start, whose head is to be checked. */
static void
read_piece(struct download *d, struct ra_piece *p, uint64_t first)
{
	/* A client waits for it now: no longer behind other clients' requests. */
	ra_piece_promote(p);
	d->window_first = first;
	d->window_at = 0;
	memsource_move(&d->m, ra_piece_memory(p),
	               d->state == DOWNLOAD_FIRST ? prepare_first : prepare_piece);
}

/*
 * More than one connection was refused: one from now on, for this host a
 * while, and the others closed before anything is asked again, since the
 * origin counts them open until they are.
 */
static void
back_off(struct download *d)
{
	if (memo_note(d->sp, d->target.key, HOST_BACKED_OFF, BACKOFF_SECONDS))
		log_info("split %s: the origin refused a second connection; one for %g s",
		         d->target.key, BACKOFF_SECONDS);
	kp_stats.split_backoffs++;
	d->connections = 1;
	d->refused = false;
	/*
	 * What else is on its way was asked on the connections refused: asked
	 * again as it comes. A fetch still going ends with its connection.
	 */
	while (d->count > 1) {
		struct slot *last = slot_at(d, d->count - 1);

		d->next_first = last->first;
		ra_piece_drop(last->p, 0);
		last->p = NULL;
		d->count--;
	}
	/* The client's key is the fetches' too: one composer makes both (dispatch_key_compose). */
	dispatch_shrink_host(d->sp->env->dispatch, d->dispatch_key, 1);
}

/*
 * The piece read now cannot go on (a fetch cut off, refused, short): the
 * rest of it is asked again, from the next byte the client needs, with
 * If-Range, on another connection. Progress resets the count; RESUMES_MAX
 * in a row without a byte cuts the client off.
 */
static int
resume(struct download *d, uint64_t from)
{
	struct slot *s = slot_at(d, 0);
	struct ra_piece *p;
	bool progress = from > s->first;

	if (d->refused)
		back_off(d);
	if (s->p) {
		d->resumes_in_a_row = progress ? 1 : d->resumes_in_a_row + 1;
		if (d->resumes_in_a_row > RESUMES_MAX) {
			log_info("split %s%.*s: %u resumes without progress at byte %llu: the client is "
			         "cut off",
			         d->target.key, (int)d->key.path_len, d->key.path, RESUMES_MAX,
			         (unsigned long long)from);
			return -2;
		}
		/* Dropped first: its memory is what the rest of it needs. */
		ra_piece_drop(s->p, from - s->first);
		s->p = NULL;
		s->first = from;
	}
	p = fetch_piece(d, from, s->last, true);
	/* What is asked ahead gives way to what the client waits for. */
	while (!p && d->count > 1) {
		struct slot *last = slot_at(d, d->count - 1);

		d->next_first = last->first;
		ra_piece_drop(last->p, 0);
		last->p = NULL;
		d->count--;
		p = fetch_piece(d, from, s->last, true);
	}
	if (!p) {
		/* Other clients' pieces hold the memory: again shortly. */
		memsource_park(&d->m);
		d->waiting = true;
		if (!clock_timer_armed(&d->retry))
			clock_timer_start(&d->retry, THROTTLE_RETRY);
		return 0;
	}
	log_debug("split %s%.*s: resuming at byte %llu", d->target.key, (int)d->key.path_len,
	          d->key.path, (unsigned long long)from);
	kp_stats.split_resumes++;
	d->resumes++;
	snprintf(d->word, sizeof(d->word), "split, %u resume%s", d->resumes,
	         d->resumes == 1 ? "" : "s");
	s->p = p;
	read_piece(d, p, from);
	return 1;
}

/* The object's next byte the client is to get: what it was given of the piece read now. */
static uint64_t
next_byte(const struct download *d)
{
	const struct memsource *m = &d->m;
	uint64_t from = d->window_first;

	if (m->prepared && m->offset > d->window_at)
		from += m->offset - d->window_at;
	return from;
}

/*
 * The reader's window is read to its end, or its piece failed: on to the
 * next piece, the rest of this one asked again, or the end (-1: EOF, -2:
 * cut off; 0: wait, the reader is woken).
 */
static int
next_window(struct memsource *m)
{
	struct download *d = m->owner;
	struct slot *s = slot_at(d, 0);
	uint64_t from = next_byte(d);

	/* A refused first piece is asked again on one connection; anything else goes to the origin. */
	if (d->state == DOWNLOAD_FIRST)
		return d->refused ? resume(d, s->first) : -2;
	if (d->mismatch)
		return -2;
	if (from > d->want_last) {
		pop_piece(d, from - s->first);
		return -1;
	}
	if (from <= s->last)
		return resume(d, from);
	d->resumes_in_a_row = 0;
	pop_piece(d, s->last - s->first + 1);
	pump(d);
	d->dropped_now = false;
	if (d->count == 0) {
		/* No room yet: the retry timer asks, and moves the reader on. */
		memsource_park(&d->m);
		d->waiting = true;
		return 0;
	}
	read_piece(d, slot_at(d, 0)->p, slot_at(d, 0)->first);
	return 1;
}

/* The client's exchange let go of its source: every fetch ends, every piece is dropped. */
static void
download_done(struct memsource *m)
{
	struct download *d = m->owner;

	/* Summed over the downloads split_downloads counts, so that the two divide. */
	if (d->counted)
		kp_stats.split_connections_used += d->most_in_flight;
	clock_timer_stop(&d->retry);
	/*
	 * The piece read now was served as far as the client got: all of the
	 * last one when the answer ended at its end (the exchange asks no more
	 * once the length is sent), part of one the client left in.
	 */
	if (d->count && d->state == DOWNLOAD_RUNNING && next_byte(d) > slot_at(d, 0)->first)
		pop_piece(d, next_byte(d) - slot_at(d, 0)->first);
	while (d->count)
		pop_piece(d, 0);
	buf_put(d->request);
	d->sp->downloads--;
	free(d);
}

/* ---- which requests -------------------------------------------------------------- */

/* Fields that make a request conditional: its answer is the origin's to give. */
static bool
conditional(const struct http_head *h, const char *base)
{
	static const char *const names[] = {"if-match", "if-none-match", "if-modified-since",
	                                    "if-unmodified-since", "if-range", "expect", NULL};

	for (unsigned i = 0; i < h->nfields; i++)
		for (const char *const *n = names; *n; n++)
			if (http_span_is(base, h->fields[i].name, *n))
				return true;
	return false;
}

/*
 * The client's bytes, if its request is one to split: the whole object, an
 * open range, or a bounded one longer than --split-size.
 */
static bool
split_range(const struct download *d, const struct http_head *h, const char *base,
            uint64_t *first, uint64_t *last, bool *ranged)
{
	const struct kp_config *cfg = cfg_of(d);
	struct byte_range asked;

	switch (ranges_requested(h, base, &asked)) {
	case RANGE_NONE:
		*first = 0;
		*last = UINT64_MAX;
		*ranged = false;
		return true;
	case RANGE_OPEN:
		*first = asked.first;
		*last = UINT64_MAX;
		*ranged = true;
		return true;
	case RANGE_SINGLE:
		*first = asked.first;
		*last = asked.last;
		*ranged = true;
		/*
		 * Not a shorter one, even on several connections: a chunked
		 * downloader's next ranges go on one warm connection behind it
		 * (read-ahead), and several cold ones started for its first left
		 * that one slow (bench/RESULTS.md, back-to-back).
		 */
		return asked.last - asked.first + 1 > cfg->split_size;
	default:
		return false;
	}
}

struct source *
ra_split_serve(struct ra_split *sp, const struct ra_ask *ask, const struct http_head *h,
               const char *base)
{
	struct download *d;
	ssize_t n;

	if (h->method != HTTP_GET || http_request_body_kind(h) != BODY_NONE ||
	    http_wants_upgrade(h) || !ra_split_listed(sp, ask->target) ||
	    answers_whole(sp, ask->target->key, ask->target->path, ask->target->path_len) ||
	    conditional(h, base) ||
	    h->head_len > buf_capacity() || !(d = calloc(1, sizeof(*d) + ask->target->path_len)))
		return NULL;
	d->sp = sp;
	d->connections = ra_split_connections(sp, ask->target);
	if (!split_range(d, h, base, &d->want_first, &d->want_last, &d->client_ranged)) {
		free(d);
		return NULL;
	}
	/* The client as the fetches need it, copied: its exchange's copies go with it. */
	memcpy(&d->client, ask->client,
	       ask->client->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                          : sizeof(struct sockaddr_in));
	d->target = *ask->target;
	snprintf(d->dispatch_key, sizeof(d->dispatch_key), "%s", ask->dispatch_key);
	d->ask = (struct ra_ask){
		.client = (const struct sockaddr *)&d->client, .dispatch_key = d->dispatch_key,
		.target = &d->target, .https = ask->https, .restricted = ask->restricted,
	};
	/* The proxy's request for the object, as it would go without us; the path is in it. */
	if (!(d->request = buf_get()) ||
	    (n = http_write_request_head(buf_tail(d->request), buf_room(d->request), h, base,
	                                 ask->target, false)) < 0) {
		buf_put(d->request);
		free(d);
		return NULL;
	}
	d->request->end = (size_t)n;
	memcpy(d->path, ask->target->path, ask->target->path_len);
	d->target.path = d->path;
	ra_key_make(&d->key, &d->ask, d->path, ask->target->path_len);
	clock_timer_init(&d->retry, sp->env->clock, retry_cb);
	d->next_first = d->want_first;
	/*
	 * The first piece is what the client waits for, on a connection of its
	 * own if need be. On several connections the next ones are asked at
	 * once, before the first head tells the object's length and version:
	 * each is checked against it when the client gets to it.
	 */
	if (!ask_next(d)) {
		clock_timer_stop(&d->retry);
		buf_put(d->request);
		free(d);
		return NULL;
	}
	ra_piece_promote(slot_at(d, 0)->p);
	while (d->connections > 1 && d->count < d->connections && ask_next(d))
		;
	sp->downloads++;
	d->m.owner = d;
	d->m.done = download_done;
	memsource_open_slice(&d->m, ra_piece_memory(slot_at(d, 0)->p), prepare_first);
	d->m.more = next_window;
	d->m.src.served_as = d->word;
	snprintf(d->word, sizeof(d->word), "split");
	return &d->m.src;
}

struct ra_split *
ra_split_new(const struct proxy_env *env, struct ra_store *st)
{
	struct ra_split *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return NULL;
	sp->env = env;
	sp->st = st;
	return sp;
}

void
ra_split_free(struct ra_split *sp)
{
	/* Every download ended with its client's exchange, before this. */
	free(sp);
}
