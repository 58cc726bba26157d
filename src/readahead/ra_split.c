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
#include "kp/ra_origins.h"
#include "kp/ranges.h"
#include "kp/stats.h"

/* Resumes of one piece in a row without a byte of progress, before the client is cut off. */
#define RESUMES_MAX 5
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

struct ra_split {
	const struct proxy_env *env;
	struct ra_fetcher *fe;
	struct ra_origins origins;    /* what hosts and URLs did with ranges and connections */
	unsigned downloads;           /* running now */
};

/* One piece of a download's series, in the order the client reads them. */
struct slot {
	struct ra_piece *p;           /* NULL: asked again, no room yet (the retry timer asks) */
	uint64_t first, last;         /* the object's bytes asked for */
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
	struct clock_timer retry;      /* memory ran out: try the next piece again shortly */
	char word[32];                 /* what the access log calls it */
	size_t path_len;
	char path[];                   /* the object's path, copied */
};

static const struct kp_config *
cfg_of(const struct download *d)
{
	return d->sp->env->cfg;
}

static bool
listed(const struct ra_split *sp, const struct http_target *target)
{
	const struct kp_config *cfg = sp->env->cfg;

	return cfg->nsplit && host_patterns_match(cfg->split, cfg->nsplit, target->host);
}

/* The connections one download from target may use: one for a host backed off. */
static unsigned
connections_for(const struct ra_split *sp, const struct http_target *target)
{
	if (ra_origins_noted(&sp->origins, target->key, HOST_BACKED_OFF))
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

static double
piece_stall(const struct kp_config *cfg)
{
	double client = cfg->io_timeout < cfg->response_timeout ? cfg->io_timeout
	                                                         : cfg->response_timeout;

	return client / STALL_SHARE < STALL_MAX ? client / STALL_SHARE : STALL_MAX;
}

static void pump(struct download *d);

/* A piece's fetch ended, whole or not: a connection is free for the next. */
static void
piece_ended(void *arg, struct ra_piece *p, enum ra_fetch_end why)
{
	(void)p;
	(void)why;
	pump(arg);
}

static const struct ra_piece_owner piece_owner = {.ended = piece_ended};

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
		.ask = &d->ask, .range = {first, last}, .expect = last - first + 1,
		.charge = ra_charge_range(cfg, last - first + 1), .may_connect = may_connect,
		.stall = piece_stall(cfg), .owner = &piece_owner, .owner_arg = d,
	};
	struct http_parser ps;
	struct http_head req;
	struct ra_piece *p;

	if (d->validator_len) {
		edit.if_range = d->validator;
		edit.if_range_len = d->validator_len;
	}
	if (!f.charge ||
	    !http_parse_held_head(HTTP_REQUEST, buf_head(d->request), buf_len(d->request),
	                          cfg->max_header_bytes, &ps, &req) ||
	    !ra_fetch_request(&f, &req, buf_head(d->request), &edit) ||
	    !(p = ra_fetch_start(d->sp->fe, &f, NULL)))
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
	uint64_t share = cfg->fetch_memory / 2 / pieces_ahead(d);
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

/* Asks for the next piece; false when there is none to ask, or no room (the retry timer asks). */
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
		/* No room now: shortly, while other clients' pieces go. */
		if (!clock_timer_armed(&d->retry))
			clock_timer_start(&d->retry, THROTTLE_RETRY);
		return false;
	}
	s = slot_at(d, d->count++);
	*s = (struct slot){.p = p, .first = first, .last = last};
	d->next_first = last + 1;
	return true;
}

/*
 * Keeps the download going: pieces asked for, up to one per connection in
 * flight, and one more waiting behind on one connection, as memory allows
 * (the client's share: a slow reader holds its pieces, and so slows this).
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

/* Lets go of the last piece asked: it is asked again, from its start, as its turn comes. */
static void
drop_last(struct download *d)
{
	struct slot *last = slot_at(d, d->count - 1);

	d->next_first = last->first;
	if (last->p)
		ra_piece_drop_for_next(last->p);
	last->p = NULL;
	d->count--;
}

/* Lets go of the piece read now: the reader goes on with the next. */
static void
pop_piece(struct download *d)
{
	struct slot *s = slot_at(d, 0);

	if (s->p)
		ra_piece_drop_for_next(s->p);
	s->p = NULL;
	d->head = (d->head + 1) % PIECES_MAX;
	d->count--;
}

/* ---- heads ------------------------------------------------------------------ */

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

/*
 * The piece's answer head, once whole in the store m reads: READ with h
 * set, NOT_YET while more may come, CUT when it never will (malformed, or
 * the fetch ended without one).
 */
static enum memsource_step
piece_head(const struct download *d, struct memsource *m, struct http_head *h)
{
	struct http_parser ps;

	if (http_parse_held_head(HTTP_RESPONSE, m->store->data, m->store->len,
	                         cfg_of(d)->max_header_bytes, &ps, h))
		return MEMSOURCE_READ;
	return m->store->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? MEMSOURCE_NOT_YET
	                                                                    : MEMSOURCE_CUT;
}

static enum memsource_step resume(struct download *d, uint64_t from);

/*
 * More than one connection was refused: one from now on, for this host a
 * while, and the others closed before anything is asked again, since the
 * origin counts them open until they are. The piece read now is asked
 * again on the one left.
 */
static enum memsource_step
back_off(struct download *d)
{
	if (ra_origins_note(&d->sp->origins, d->target.key, HOST_BACKED_OFF, BACKOFF_SECONDS))
		log_info("split %s: the origin refused a second connection; one for %g s",
		         d->target.key, BACKOFF_SECONDS);
	kp_stats.split_backoffs++;
	d->connections = 1;
	/*
	 * What else is on its way was asked on the connections refused: asked
	 * again as it comes. A fetch still going ends with its connection.
	 */
	while (d->count > 1)
		drop_last(d);
	/* The client's key is the fetches' too: one composer makes both (dispatch_key_compose). */
	dispatch_shrink_host(d->sp->env->dispatch, d->dispatch_key, 1);
	return resume(d, slot_at(d, 0)->first);
}

/* ---- the first piece: split or not ------------------------------------------- */

/* What the first piece's head says of splitting the download. */
enum first_verdict {
	FIRST_SPLIT,          /* a 206 of the range asked, with what splitting needs */
	FIRST_REFUSED,        /* a refusal of one connection too many: back off */
	FIRST_WHOLE,          /* a 200 for a bounded range: this URL serves no ranges */
	FIRST_ENCODED_WHOLE,  /* a 200 for an encoded answer: says nothing of the URL's ranges */
	FIRST_NOT_AS_ASKED,   /* another status, or another range */
	FIRST_NO_VALIDATOR,   /* nothing If-Range may carry */
	FIRST_ENCODED,        /* an encoding, or no-transform */
};

static const char *const first_declined[] = {
	[FIRST_WHOLE] = "the origin answered a range with the whole object",
	[FIRST_ENCODED_WHOLE] = "the origin answered a range with the whole object",
	[FIRST_NOT_AS_ASKED] = "the origin did not answer with the range asked",
	[FIRST_NO_VALIDATOR] = "no validator to ask for the rest with (If-Range)",
	[FIRST_ENCODED] = "an encoding or no-transform",
};

/*
 * The verdict on the first piece's head h (spans into base), asked as s:
 * split only as a 206 with a complete length, a validator for If-Range,
 * bytes as stored, and the range as asked (got and complete are set then).
 */
static enum first_verdict
judge_first(const struct download *d, const struct slot *s, const struct http_head *h,
            const char *base, struct byte_range *got, uint64_t *complete)
{
	struct http_span v;

	/* nginx's gzip drops a Range: such a 200 says nothing of the URL's other answers. */
	if (h->status == 200)
		return bytes_as_stored(h, base) ? FIRST_WHOLE : FIRST_ENCODED_WHOLE;
	if (refuses_connections(h->status) && d->connections > 1)
		return FIRST_REFUSED;
	if (h->status != 206 || !ranges_answered(h, base, got, complete) ||
	    got->first != s->first || got->last > s->last ||
	    (got->last < s->last && got->last != *complete - 1))
		return FIRST_NOT_AS_ASKED;
	if (!ranges_if_range(h, base, &v) || v.len > VALIDATOR_MAX)
		return FIRST_NO_VALIDATOR;
	if (!bytes_as_stored(h, base))
		return FIRST_ENCODED;
	return FIRST_SPLIT;
}

/* Not done with a first piece that cannot be split: the origin answers the client itself. */
static enum memsource_step
decline(struct download *d, const char *why)
{
	log_debug("split %s%.*s: %s; the origin answers", d->target.key, (int)d->path_len, d->path,
	          why);
	kp_stats.split_declined++;
	return MEMSOURCE_CUT;
}

/*
 * Splitting goes on: the object's length and version are known, so the
 * pieces asked before them that lie past the client's end go, and the last
 * one ends there.
 */
static void
adopt_object(struct download *d, const struct http_head *h, const char *base,
             const struct byte_range *got, uint64_t complete)
{
	struct http_span v;
	uint64_t end;

	ranges_if_range(h, base, &v);
	memcpy(d->validator, base + v.off, v.len);
	d->validator_len = v.len;
	d->complete = complete;
	ra_origins_note(&d->sp->origins, d->target.key, HOST_RANGED, NO_RANGES_SECONDS);
	end = d->want_last < complete - 1 ? d->want_last : complete - 1;
	d->want_last = end;
	slot_at(d, 0)->last = got->last;
	while (d->count > 1 && slot_at(d, d->count - 1)->first > end)
		drop_last(d);
	if (d->count > 1 && slot_at(d, d->count - 1)->last > end)
		slot_at(d, d->count - 1)->last = end;
	d->next_first = slot_at(d, d->count - 1)->last + 1;
}

/*
 * The client's head: the origin's, with the status, length and
 * Content-Range of the client's own request, into the reader's prefix.
 */
static bool
write_client_head(struct download *d, struct memsource *m, const struct http_head *h)
{
	static const char *const drop[] = {"content-range", "content-length", NULL};
	struct http_head_edit edit = {.drop = drop, .content_length = true, .status = 200};
	ssize_t n;

	if (d->client_ranged) {
		edit.status = 206;
		edit.content_range = true;
		edit.first = d->want_first;
		edit.last = d->want_last;
		edit.complete = d->complete;
	}
	edit.length = d->want_last - d->want_first + 1;
	if (!(m->prefix = buf_get()) ||
	    (n = http_write_edited_head(buf_tail(m->prefix), buf_room(m->prefix), h,
	                                m->store->data, &edit)) < 0)
		return false;
	m->prefix->end += (size_t)n;
	return true;
}

/*
 * The first piece's head came: the download is split, declined (the
 * origin answers the client itself), or backed off and the piece asked
 * again on one connection.
 */
static enum memsource_step
prepare_first(struct memsource *m)
{
	struct download *d = m->owner;
	struct http_head h;
	struct byte_range got;
	uint64_t complete = 0;
	enum memsource_step head = piece_head(d, m, &h);
	enum first_verdict verdict;

	if (head == MEMSOURCE_CUT)
		return decline(d, "no answer");
	if (head != MEMSOURCE_READ)
		return head;
	switch ((verdict = judge_first(d, slot_at(d, 0), &h, m->store->data, &got, &complete))) {
	case FIRST_REFUSED:
		return back_off(d);
	case FIRST_WHOLE:
		ra_origins_answered_whole(&d->sp->origins, d->target.key, d->path, d->path_len);
		return decline(d, first_declined[verdict]);
	case FIRST_SPLIT:
		break;
	default:
		return decline(d, first_declined[verdict]);
	}
	adopt_object(d, &h, m->store->data, &got, complete);
	if (!write_client_head(d, m, &h))
		return decline(d, "the client's head does not fit");
	m->offset = d->window_at = h.head_len;
	m->until = h.head_len + (size_t)(got.last - got.first + 1);
	d->window_first = got.first;
	d->state = DOWNLOAD_RUNNING;
	if (d->want_last > got.last) {
		kp_stats.split_downloads++;
		d->counted = true;
	}
	pump(d);
	return MEMSOURCE_READ;
}

/* ---- later pieces ------------------------------------------------------------ */

/* What a later piece's head says. */
enum piece_verdict {
	PIECE_AS_ASKED,       /* a 206 of exactly the bytes asked, of the same version */
	PIECE_REFUSED,        /* a refusal of one connection too many */
	PIECE_OTHER,          /* anything else: a version the client must not get bytes of */
};

static enum piece_verdict
judge_piece(const struct download *d, const struct slot *s, const struct http_head *h,
            const char *base)
{
	struct byte_range got;
	uint64_t complete;

	if (refuses_connections(h->status))
		return PIECE_REFUSED;
	if (h->status != 206 || !ranges_answered(h, base, &got, &complete) ||
	    complete != d->complete || got.first != s->first || got.last != s->last ||
	    !same_version(d, h, base) || !bytes_as_stored(h, base))
		return PIECE_OTHER;
	return PIECE_AS_ASKED;
}

/* The client must not get a byte of what is not the object it started: cut off at this one. */
static enum memsource_step
cut_off(struct download *d, const char *why)
{
	log_info("split %s%.*s: bytes %llu-%llu %s: the client is cut off there", d->target.key,
	         (int)d->path_len, d->path, (unsigned long long)slot_at(d, 0)->first,
	         (unsigned long long)slot_at(d, 0)->last, why);
	kp_stats.split_mismatches++;
	return MEMSOURCE_CUT;
}

/*
 * A later piece's head came: read on if it is exactly the bytes asked, of
 * the same version. A 401, 403, 429 or 503 on more than one connection
 * backs the host off to one; any other refusal is a version the client
 * must not get bytes of.
 */
static enum memsource_step
prepare_piece(struct memsource *m)
{
	struct download *d = m->owner;
	struct slot *s = slot_at(d, 0);
	struct http_head h;
	enum memsource_step head = piece_head(d, m, &h);

	if (head != MEMSOURCE_READ)
		return head == MEMSOURCE_CUT ? resume(d, s->first) : head;
	switch (judge_piece(d, s, &h, m->store->data)) {
	case PIECE_REFUSED:
		if (d->connections > 1)
			return back_off(d);
		return cut_off(d, "were refused on one connection");
	case PIECE_OTHER:
		return cut_off(d, "came back as another version or range");
	case PIECE_AS_ASKED:
		break;
	}
	m->offset = d->window_at = h.head_len;
	m->until = h.head_len + (size_t)(s->last - s->first + 1);
	d->window_first = s->first;
	return MEMSOURCE_READ;
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
 * The piece read now cannot go on (a fetch cut off, refused, short): the
 * rest of it is asked again, from the next byte the client needs, with
 * If-Range once the version is known, on another connection: MOVED. WAIT
 * when no memory is left (the retry timer asks again); CUT after
 * RESUMES_MAX in a row without a byte of progress.
 */
static enum memsource_step
resume(struct download *d, uint64_t from)
{
	struct slot *s = slot_at(d, 0);
	struct ra_piece *p;

	if (s->p) {
		d->resumes_in_a_row = from > s->first ? 1 : d->resumes_in_a_row + 1;
		if (d->resumes_in_a_row > RESUMES_MAX) {
			log_info("split %s%.*s: %u resumes without progress at byte %llu: the client is "
			         "cut off",
			         d->target.key, (int)d->path_len, d->path, RESUMES_MAX,
			         (unsigned long long)from);
			return MEMSOURCE_CUT;
		}
		/* Dropped first: its memory is what the rest of it needs. */
		ra_piece_drop_for_next(s->p);
		s->p = NULL;
		s->first = from;
	}
	/* What is asked ahead gives way to what the client waits for. */
	while (!(p = fetch_piece(d, from, s->last, true)) && d->count > 1)
		drop_last(d);
	if (!p) {
		/* Other clients' pieces hold the memory: again shortly. */
		if (!clock_timer_armed(&d->retry))
			clock_timer_start(&d->retry, THROTTLE_RETRY);
		return MEMSOURCE_WAIT;
	}
	log_debug("split %s%.*s: resuming at byte %llu", d->target.key, (int)d->path_len, d->path,
	          (unsigned long long)from);
	kp_stats.split_resumes++;
	d->resumes++;
	snprintf(d->word, sizeof(d->word), "split, %u resume%s", d->resumes,
	         d->resumes == 1 ? "" : "s");
	s->p = p;
	read_piece(d, p, from);
	return MEMSOURCE_MOVED;
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
 * The reader's window is read to its end, or its piece failed short of
 * it: on to the next piece, the rest of this one asked again, or the end.
 */
static enum memsource_step
next_window(struct memsource *m, enum memsource_window_end why)
{
	struct download *d = m->owner;
	struct slot *s = slot_at(d, 0);
	uint64_t from = next_byte(d);

	(void)why;   /* where the client is says it: a store may end short of the window */
	if (from > d->want_last) {
		pop_piece(d);
		return MEMSOURCE_END;
	}
	if (from <= s->last)
		return resume(d, from);
	d->resumes_in_a_row = 0;
	pop_piece(d);
	pump(d);
	/* No room yet: the retry timer asks, and moves the reader on. */
	if (d->count == 0)
		return MEMSOURCE_WAIT;
	read_piece(d, slot_at(d, 0)->p, slot_at(d, 0)->first);
	return MEMSOURCE_MOVED;
}

/*
 * Memory came back, or should have: the reader waits for the piece it
 * reads to be asked again (a resume found no room) or for the next one to
 * be asked at all; otherwise pieces ahead are asked.
 */
static void
retry_cb(struct clock_timer *t)
{
	struct download *d = container_of(t, struct download, retry);

	if (!d->m.parked) {
		pump(d);
		return;
	}
	if (d->count && !slot_at(d, 0)->p) {
		if (resume(d, slot_at(d, 0)->first) == MEMSOURCE_MOVED)
			memsource_wake(&d->m);
		return;
	}
	pump(d);
	if (d->count) {
		read_piece(d, slot_at(d, 0)->p, slot_at(d, 0)->first);
		memsource_wake(&d->m);
	}
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
	while (d->count)
		pop_piece(d);
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
split_range(const struct kp_config *cfg, const struct http_head *h, const char *base,
            uint64_t *first, uint64_t *last, bool *ranged)
{
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

/* May this request be split at all: a plain GET of a listed host's URL that serves ranges? */
static bool
splittable(const struct ra_split *sp, const struct ra_ask *ask, const struct http_head *h,
           const char *base)
{
	return h->method == HTTP_GET && http_request_body_kind(h) == BODY_NONE &&
	       !http_wants_upgrade(h) && listed(sp, ask->target) &&
	       !ra_origins_answers_whole(&sp->origins, ask->target->key, ask->target->path,
	                                 ask->target->path_len) &&
	       !conditional(h, base);
}

/*
 * A download of the client's bytes: the client as the fetches need it,
 * copied (its exchange's copies go with it), and the proxy's request for
 * the object, as it would go without us. NULL when memory is short, or
 * when that request leaves a buffer no room for a piece's Range and
 * If-Range: then no piece could ever be asked, and the origin answers.
 */
static struct download *
download_new(struct ra_split *sp, const struct ra_ask *ask, const struct http_head *h,
             const char *base)
{
	struct download *d = calloc(1, sizeof(*d) + ask->target->path_len);
	ssize_t n;

	if (!d)
		return NULL;
	d->sp = sp;
	d->connections = connections_for(sp, ask->target);
	memcpy(&d->client, ask->client,
	       ask->client->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                          : sizeof(struct sockaddr_in));
	d->target = *ask->target;
	snprintf(d->dispatch_key, sizeof(d->dispatch_key), "%s", ask->dispatch_key);
	d->ask = (struct ra_ask){
		.client = (const struct sockaddr *)&d->client, .dispatch_key = d->dispatch_key,
		.target = &d->target, .https = ask->https, .restricted = ask->restricted,
	};
	if (!(d->request = buf_get()) ||
	    (n = http_write_request_head(buf_tail(d->request), buf_room(d->request), h, base,
	                                 ask->target, false)) < 0) {
		buf_put(d->request);
		free(d);
		return NULL;
	}
	d->request->end = (size_t)n;
	/* Every piece's request is this one with a Range and an If-Range: it must fit a buffer. */
	if (buf_len(d->request) + PIECE_FIELDS_ROOM > buf_capacity()) {
		buf_put(d->request);
		free(d);
		return NULL;
	}
	memcpy(d->path, ask->target->path, ask->target->path_len);
	d->path_len = ask->target->path_len;
	d->target.path = d->path;
	clock_timer_init(&d->retry, sp->env->clock, retry_cb);
	return d;
}

/*
 * The first piece is what the client waits for, on a connection of its
 * own if need be. On several connections the next ones are asked at once,
 * before the first head tells the object's length and version: each is
 * checked against it when the client gets to it. False when not even the
 * first could be asked.
 */
static bool
ask_first_pieces(struct download *d)
{
	d->next_first = d->want_first;
	if (!ask_next(d)) {
		clock_timer_stop(&d->retry);
		return false;
	}
	ra_piece_promote(slot_at(d, 0)->p);
	while (d->connections > 1 && d->count < d->connections && ask_next(d))
		;
	return true;
}

struct source *
ra_split_serve(struct ra_split *sp, const struct ra_ask *ask, const struct http_head *h,
               const char *base)
{
	uint64_t first, last;
	struct download *d;
	bool ranged;

	if (!splittable(sp, ask, h, base) ||
	    !split_range(sp->env->cfg, h, base, &first, &last, &ranged) ||
	    !(d = download_new(sp, ask, h, base)))
		return NULL;
	d->want_first = first;
	d->want_last = last;
	d->client_ranged = ranged;
	if (!ask_first_pieces(d)) {
		buf_put(d->request);
		free(d);
		return NULL;
	}
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
ra_split_new(const struct proxy_env *env, struct ra_fetcher *fe)
{
	struct ra_split *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return NULL;
	sp->env = env;
	sp->fe = fe;
	ra_origins_init(&sp->origins, env->clock);
	return sp;
}

void
ra_split_free(struct ra_split *sp)
{
	/* Every download ended with its client's exchange, before this. */
	free(sp);
}
