#include "kp/readahead.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/evglue.h"
#include "kp/exchange.h"
#include "kp/hls.h"
#include "kp/log.h"
#include "kp/memconn.h"
#include "kp/net.h"
#include "kp/ranges.h"
#include "kp/stats.h"
#include "kp/table.h"

/* How often held pieces and quiet streams are looked at: a few times per TTL. */
#define SWEEPS_PER_TTL 4
/* Room for the stored head beside the body a piece may hold. */
#define HEAD_ROOM 1024
/* Playlists remembered, all clients together; the least recently used goes first. */
#define MAX_PLAYLISTS 32

enum entry_state {
	ENTRY_FETCHING,   /* the proxy's request is on its way or its response arriving */
	ENTRY_HELD,       /* the whole response is in memory */
	ENTRY_FAILED,     /* the fetch failed: nothing of it is served */
};

struct ra_stream;

/* What one client address holds: no client takes more than half of --read-ahead-memory. */
struct ra_client {
	struct table_node node;          /* in ra->clients, keyed by the address */
	size_t charged;
	unsigned entries;                /* pieces counting in it: it is freed with the last */
	double rtt, rate;                /* the path to the origins, as its fetches found it */
};

/* One piece fetched ahead: its request, its response in memory, the exchange fetching it. */
struct ra_entry {
	struct ra_stream *stream;
	struct ra_entry *next;           /* the stream's pieces */
	struct ra_entry *dead_next;      /* the reaper's list */
	struct byte_range range;         /* asked of the origin */
	bool to_end;                     /* range reaches the object's last byte */
	enum entry_state state;
	bool dead;                       /* on the reaper's list */
	bool whole;                      /* a segment: the whole object, asked without a Range */
	uint64_t expect;                 /* body bytes it should bring; 0: not known */
	unsigned readers;                /* clients reading it now */
	uint64_t served;                 /* the most body bytes one client was given */
	size_t charged;                  /* bytes counted against --read-ahead-memory */
	struct ra_client *client;        /* whose share they count in */
	ev_tstamp held_since;
	ev_tstamp head_at;               /* its response head arrived; 0: not yet */
	struct buf *req;                 /* the request the proxy sent: compared with clients' */
	struct buf *in, *out;            /* the fetch exchange's buffers */
	struct memstore store;
	struct exchange ex;
};

/* One client's reading of one URL: what it was given, what is fetched ahead for it. */
struct ra_stream {
	struct table_node node;          /* in ra->streams: client address, dispatch key, path */
	struct readahead *ra;
	struct ra_entry *entries;
	uint64_t largest;                /* the longest piece answered on it */
	uint64_t last_length;            /* the length of the last piece answered */
	unsigned pieces;                 /* pieces answered on it */
	bool uniform;                    /* every piece answered so far had one length */
	bool stopped;                    /* a piece was refused: no more predictions */
	bool has_identity;
	double rtt;                      /* seconds, of the last connection it came over; 0: unknown */
	double rate;                     /* bytes/s, the fastest a fetch of it arrived; 0: unknown */
	struct object_identity id;       /* of the last piece answered; spans into id_text */
	char id_text[512];
	ev_tstamp used;                  /* last asked or answered */
};

/* A client served from a piece: its slice of the store, and what it asked. */
struct ra_reader {
	struct memsource m;
	struct ra_entry *entry;
	struct byte_range asked;
	struct buf *ask;                 /* the client's request head, for Vary */
	bool joined;                     /* the piece was still arriving when the client asked */
};

/* The latest media playlist one client was given at one URL. */
struct ra_playlist_held {
	struct ra_playlist_held *next;
	char key[600];                   /* "address dispatch-key " and the playlist's path */
	size_t client_len;               /* the "address dispatch-key " part of key */
	struct hls_playlist *pl;
	ev_tstamp used;
	ev_tstamp followed;              /* a segment of it was last asked for; 0: never */
};

/* A playlist on its way to a client, read as it passes. */
struct ra_playlist {
	struct readahead *ra;
	char key[600];
	size_t client_len;
	char origin[300];                /* scheme://authority, for absolute URIs in it */
	size_t expected;                 /* its Content-Length */
	size_t len;
	char text[];                     /* expected bytes */
};

struct readahead {
	const struct proxy_env *env;
	struct table streams;
	struct table clients;                 /* struct ra_client by address */
	struct ra_playlist_held *playlists;   /* most recently used first */
	unsigned nplaylists;
	size_t charged;                  /* bytes counted against the memory cap */
	struct ra_entry *dead;           /* pieces to free at the end of the iteration */
	ev_prepare reaper;
	struct clock_timer sweep;
};

static const struct exchange_ops fetch_ops;

static const struct kp_config *
cfg_of(const struct readahead *ra)
{
	return ra->env->cfg;
}

/* ---- heads ---------------------------------------------------------------- */

/* Parses the head at the start of len bytes into h; false if it is not one whole head. */
static bool
parse_head(llhttp_type_t type, const char *p, size_t len, size_t max, struct http_parser *ps,
           struct http_head *h)
{
	http_parser_init(ps, type, max, max);
	http_parser_start(ps, h);
	return http_parse_head(ps, p, len) == HTTP_PARSE_DONE;
}

/* The origin-form path of a request head the proxy wrote. */
static void
request_path(const struct http_head *h, const char *base, const char **path, size_t *len)
{
	*path = base + h->url.off;
	*len = h->url.len;
}

/* "address key path": one client's reading of one URL; false if it does not fit. */
static bool
stream_key(const struct sockaddr *client, const char *key, const char *path, size_t path_len,
           char *out, size_t cap)
{
	char addr[INET6_ADDRSTRLEN];
	const void *a = client->sa_family == AF_INET6
	                        ? (const void *)&((const struct sockaddr_in6 *)client)->sin6_addr
	                        : (const void *)&((const struct sockaddr_in *)client)->sin_addr;
	int n;

	if (!inet_ntop(client->sa_family, a, addr, sizeof(addr)))
		return false;
	n = snprintf(out, cap, "%s %s %.*s", addr, key, (int)path_len, path);
	return n > 0 && (size_t)n < cap;
}

/*
 * The stream key of one client's reading of path. A CMCD query parameter
 * is left out: a player sending CMCD in the query sends other values with
 * every request for the same object.
 */
static bool
path_key(const struct readahead_ask *ask, const char *path, size_t path_len, char *out,
         size_t cap)
{
	char stripped[HLS_MAX_PATH];
	size_t len;

	if (!hls_cmcd_strip(path, path_len, stripped, sizeof(stripped), &len))
		return false;
	return stream_key(ask->client, ask->key, stripped, len, out, cap);
}

/* ---- pieces: freed at a known point ---------------------------------------- */

/* An entry's bytes are counted in, or out (and then the entry no longer points at c). */
static void
charge(struct readahead *ra, struct ra_client *c, size_t bytes, bool add)
{
	ra->charged = add ? ra->charged + bytes : ra->charged - bytes;
	c->charged = add ? c->charged + bytes : c->charged - bytes;
	kp_stats.readahead_bytes_held = ra->charged;
	if (add) {
		c->entries++;
	} else if (--c->entries == 0) {
		table_remove(&ra->clients, &c->node);
		free(c);
	}
}

static void
unlink_entry(struct ra_entry *e)
{
	struct ra_entry **p = &e->stream->entries;

	while (*p && *p != e)
		p = &(*p)->next;
	if (*p)
		*p = e->next;
	e->next = NULL;
}

/* What was fetched and never given to a client. */
static uint64_t
unserved_bytes(const struct ra_entry *e)
{
	uint64_t fetched = e->store.len;

	if (e->whole)
		return e->served ? 0 : fetched;
	/* The head is not the download's: count the body only, as far as it is known. */
	if (fetched > e->range.last - e->range.first + 1)
		fetched = e->range.last - e->range.first + 1;
	return fetched > e->served ? fetched - e->served : 0;
}

static void
entry_free(struct ra_entry *e)
{
	struct readahead *ra = e->stream->ra;

	exchange_release(&e->ex);
	/* Counted before the store is freed: its length is what was fetched. */
	kp_stats.readahead_wasted_bytes += unserved_bytes(e);
	memstore_free(&e->store);
	charge(ra, e->client, e->charged, false);
	buf_put(e->req);
	buf_put(e->in);
	buf_put(e->out);
	unlink_entry(e);
	free(e);
}

/* Marks e to be freed at the end of this iteration; never while a client reads it. */
static void
entry_drop(struct ra_entry *e)
{
	struct readahead *ra = e->stream->ra;

	if (e->dead || e->readers)
		return;
	e->dead = true;
	e->dead_next = ra->dead;
	ra->dead = e;
	if (!ev_is_active(&ra->reaper))
		ev_prepare_start(ra->env->loop, &ra->reaper);
}

static void
reaper_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct readahead *ra = container_of(w, struct readahead, reaper);

	(void)revents;
	while (ra->dead) {
		struct ra_entry *e = ra->dead;

		ra->dead = e->dead_next;
		entry_free(e);
	}
	ev_prepare_stop(loop, w);
}

/* A piece that was given to a client, or failed, is done once nobody reads it. */
static void
entry_settle(struct ra_entry *e)
{
	if (e->readers || e->state == ENTRY_FETCHING)
		return;
	if (e->served || e->state == ENTRY_FAILED)
		entry_drop(e);
}

/* ---- the fetch: an exchange of the proxy's own, into memory ---------------- */

static struct ra_entry *
entry_of(struct exchange *ex)
{
	return container_of(ex, struct ra_entry, ex);
}

static void
fetch_failed(struct ra_entry *e, const char *why)
{
	log_debug("read-ahead %s bytes=%llu-%llu: %s", e->ex.target.key,
	          (unsigned long long)e->range.first, (unsigned long long)e->range.last, why);
	kp_stats.readahead_failed++;
	e->state = ENTRY_FAILED;
	memstore_fail(&e->store);
	entry_settle(e);
}

static void
fetch_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	(void)status;
	(void)keep_alive;
	fetch_failed(entry_of(ex), why);
}

static void
fetch_abort(struct exchange *ex, const char *why)
{
	fetch_failed(entry_of(ex), why ? why : "closed");
}

/* Its head came: the clock for its rate starts, and its connection tells the round trip. */
static void
fetch_heard(struct exchange *ex)
{
	struct ra_entry *e = entry_of(ex);
	double rtt = net_rtt(ex->src->conn.fd);

	e->head_at = clock_now(e->stream->ra->env->clock);
	if (rtt > 0)
		e->stream->rtt = e->client->rtt = rtt;
}

/*
 * The rate one fetch's body arrived at, head to end. The fastest seen is
 * kept: a fetch sharing the path with the client's own request or another
 * fetch sees only its share, and the path is what depth must cover.
 */
static void
time_fetch(struct ra_entry *e)
{
	double took = clock_now(e->stream->ra->env->clock) - e->head_at;
	double rate;

	if (e->head_at <= 0 || took <= 0)
		return;
	rate = (double)(e->whole ? e->store.len : e->range.last - e->range.first + 1) / took;
	if (rate > e->stream->rate)
		e->stream->rate = rate;
	if (rate > e->client->rate)
		e->client->rate = rate;
}

static void
fetch_finished(struct exchange *ex)
{
	struct ra_entry *e = entry_of(ex);

	/* An error, or a whole object for a piece: the client asks the origin itself. */
	if (ex->status != (e->whole ? 200 : 206)) {
		fetch_failed(e, "the origin did not answer with the piece");
		return;
	}

	time_fetch(e);
	/* Its end is the end of the store: readers past the last byte see EOF. */
	conn_shutdown_write(&e->store.writer);
	/* Refused while it arrived (not the piece to serve): it stays refused. */
	if (e->state == ENTRY_FETCHING)
		e->state = ENTRY_HELD;
	e->held_since = clock_now(e->stream->ra->env->clock);
	entry_settle(e);
}

static void
fetch_tunnel_opened(struct exchange *ex)
{
	/* The plan refuses a 101 to memory; should one get here, it is a failure. */
	fetch_failed(entry_of(ex), "the origin switched protocols");
}

static void
fetch_wait(struct exchange *ex)
{
	struct ra_entry *e = entry_of(ex);
	bool rd, wr;

	exchange_watch(ex, &rd, &wr);
	conn_watch(&e->store.writer, rd, wr);
}

static void
fetch_io(struct conn *c, int revents)
{
	(void)revents;
	exchange_run(&container_of(c, struct ra_entry, store.writer)->ex);
}

static const struct exchange_ops fetch_ops = {
	.reply = fetch_reply,
	.abort = fetch_abort,
	.finished = fetch_finished,
	.tunnel_opened = fetch_tunnel_opened,
	.wait = fetch_wait,
	.heard = fetch_heard,
};

/*
 * Writes the fields of h, but for those named in skip (NULL-terminated), to
 * out; false if they do not fit.
 */
static bool
copy_fields(const struct http_head *h, const char *base, const char *const skip[],
            struct buf *out)
{
	char *p = buf_tail(out);
	size_t room = buf_room(out), n = 0;

	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];
		bool skipped = false;
		int w;

		for (const char *const *name = skip; *name && !skipped; name++)
			skipped = http_span_is(base, f->name, *name);
		if (skipped)
			continue;
		w = snprintf(p + n, room - n, "%.*s: %.*s\r\n", (int)f->name.len, base + f->name.off,
		             (int)f->value.len, base + f->value.off);
		if (w < 0 || (size_t)w >= room - n)
			return false;
		n += (size_t)w;
	}
	out->end += n;
	return true;
}

/*
 * Writes the start line and the fields of h, but for those named in skip,
 * to out; false if they do not fit. The caller adds its own fields and the
 * empty line.
 */
static bool
copy_head(const struct http_head *h, const char *base, const char *const skip[],
          struct buf *out)
{
	const char *line_end = memchr(base, '\n', h->head_len);
	size_t n;

	if (!line_end || (size_t)(line_end + 1 - base) > buf_room(out))
		return false;
	n = (size_t)(line_end + 1 - base);
	memcpy(buf_tail(out), base, n);
	out->end += n;
	return copy_fields(h, base, skip, out);
}

/* Adds what printf makes of fmt to out; false if it does not fit. */
static bool append(struct buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool
append(struct buf *out, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(buf_tail(out), buf_room(out), fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= buf_room(out))
		return false;
	out->end += (size_t)w;
	return true;
}

/*
 * The request for next: the head the proxy sent for the piece before, with
 * its Range moved on. Every other field stays: the origin must see the
 * same client it answered.
 */
static bool
next_request(const struct http_head *h, const char *base, const struct byte_range *next,
             struct buf *out)
{
	static const char *const skip[] = {"range", "content-length", "transfer-encoding", "expect",
	                                   "upgrade", NULL};

	return copy_head(h, base, skip, out) &&
	       append(out, "Range: bytes=%llu-%llu\r\n\r\n", (unsigned long long)next->first,
	              (unsigned long long)next->last);
}

/*
 * The request for a segment at path: the head the proxy sent for the one
 * before, for another path, without its Range and preconditions (they were
 * about that object), with the segment's Range if it is a range of path.
 */
static bool
segment_request(const struct http_head *h, const char *base, const struct hls_segment *seg,
                struct buf *out)
{
	static const char *const skip[] = {"range",          "if-range",          "if-match",
	                                   "if-none-match",  "if-modified-since", "if-unmodified-since",
	                                   "content-length", "transfer-encoding", "expect",
	                                   "upgrade",        NULL};

	return append(out, "GET %.*s HTTP/1.1\r\n", (int)seg->path_len, seg->path) &&
	       copy_fields(h, base, skip, out) &&
	       (!seg->has_range ||
	        append(out, "Range: bytes=%llu-%llu\r\n", (unsigned long long)seg->range.first,
	               (unsigned long long)seg->range.last)) &&
	       append(out, "\r\n");
}

/*
 * Starts fetching, for the stream, what req (the caller's, now the
 * entry's) asks: range of the object, or the whole object. charged: the
 * most memory it may take. False when it was not made.
 */
static bool
fetch_start(struct ra_stream *s, const struct readahead_ask *ask, struct buf *req,
            const struct byte_range *range, bool to_end, bool whole, uint64_t expect,
            size_t charged)
{
	struct readahead *ra = s->ra;
	const struct kp_config *cfg = cfg_of(ra);
	struct http_target target = *ask->target;
	struct ra_entry *e;

	char addr[INET6_ADDRSTRLEN + 4];
	struct table_node *held;
	struct ra_client *client;

	if (!stream_key(ask->client, "", "", 0, addr, sizeof(addr))) {
		buf_put(req);
		return false;
	}
	held = table_find(&ra->clients, addr);
	/* charged is at most half the memory (callers bound what they add up): no sum wraps. */
	if (charged == 0 || charged > cfg->read_ahead_memory / 2 ||
	    ra->charged + charged > cfg->read_ahead_memory ||
	    (held ? container_of(held, struct ra_client, node)->charged : 0) + charged >
	            cfg->read_ahead_memory / 2) {
		kp_stats.readahead_throttled++;
		buf_put(req);
		return false;
	}
	if (!(e = calloc(1, sizeof(*e))) ||
	    !(client = TABLE_GET(&ra->clients, addr, struct ra_client, node))) {
		free(e);
		buf_put(req);
		return false;
	}
	e->client = client;
	e->req = req;
	e->stream = s;
	e->range = *range;
	e->to_end = to_end;
	e->whole = whole;
	e->expect = expect;
	e->charged = charged;
	charge(ra, client, charged, true);
	e->next = s->entries;
	s->entries = e;
	memstore_init(&e->store, ra->env->loop, charged, fetch_io);
	exchange_init(&e->ex, ra->env, &e->store.writer, &e->in, &e->out, &fetch_ops, true);
	e->ex.restricted = ask->restricted;
	e->ex.https = ask->https;
	target.path = "/";
	target.path_len = 1;
	kp_stats.readahead_predicted++;
	log_debug("read-ahead %s", s->node.key);
	if (exchange_start(&e->ex, &target, buf_head(e->req), buf_len(e->req), DISPATCH_AHEAD) <
	    0)
		fetch_failed(e, "request head too large");
	return true;
}

/*
 * Memory for a piece of length body bytes and its head; 0 (never fetched)
 * past half of --read-ahead-memory, which also keeps every sum from wrapping.
 */
static size_t
piece_charge(const struct kp_config *cfg, uint64_t length)
{
	if (length > cfg->read_ahead_memory / 2)
		return 0;
	return (size_t)length + cfg->max_header_bytes + HEAD_ROOM;
}

/* Starts fetching the piece next of an object of complete bytes, after req asked for one. */
static bool
fetch(struct ra_stream *s, const struct readahead_ask *ask, const struct http_head *req,
      const char *rbase, const struct byte_range *next, uint64_t complete)
{
	uint64_t length = next->last - next->first + 1;
	struct buf *out = buf_get();

	if (!out || !next_request(req, rbase, next, out)) {
		buf_put(out);
		return false;
	}
	return fetch_start(s, ask, out, next, next->last == complete - 1, false, length,
	                   piece_charge(cfg_of(s->ra), length));
}

static struct ra_entry *
entry_whole(const struct ra_stream *s)
{
	for (struct ra_entry *e = s->entries; e; e = e->next)
		if (e->whole && !e->dead)
			return e;
	return NULL;
}

static struct ra_entry *
entry_at(const struct ra_stream *s, uint64_t first)
{
	for (struct ra_entry *e = s->entries; e; e = e->next)
		if (e->range.first == first && !e->dead && !e->whole)
			return e;
	return NULL;
}

/* ---- streams -------------------------------------------------------------- */

static struct ra_stream *
stream_find(struct readahead *ra, const char *key)
{
	struct table_node *n = table_find(&ra->streams, key);

	return n ? container_of(n, struct ra_stream, node) : NULL;
}

/* The stream of key, made if it is new; NULL when memory is exhausted. */
static struct ra_stream *
stream_get(struct readahead *ra, const char *key)
{
	struct ra_stream *s = TABLE_GET(&ra->streams, key, struct ra_stream, node);

	if (s && !s->ra) {
		s->ra = ra;
		s->uniform = true;
	}
	if (s)
		s->used = clock_now(ra->env->clock);
	return s;
}

static void
stream_free(struct ra_stream *s)
{
	table_remove(&s->ra->streams, &s->node);
	free(s);
}

/* Drops what nobody reads of a stream that changed object or stopped. */
static void
stream_forget(struct ra_stream *s)
{
	for (struct ra_entry *e = s->entries; e; e = e->next)
		if (!e->readers && e->state != ENTRY_FETCHING)
			entry_drop(e);
}

/* Bytes of e's answer still to come, about (the head is counted as body); 0 once it is in. */
static uint64_t
bytes_to_come(const struct ra_entry *e)
{
	if (e->state != ENTRY_FETCHING)
		return 0;
	if (e->expect == 0)
		return UINT64_MAX;
	return e->store.len < e->expect ? e->expect - e->store.len : 0;
}

/*
 * The client asked for something else than what is fetched for it (it
 * seeked, or switched): the fetches nobody reads are of no use now. One
 * that is nearly in, a quarter or less to come, is let finish, so that its
 * warm connection stays; any other is ended with its connection, which
 * would otherwise carry bytes nobody wants for as long again. What came
 * of them counts as wasted when they are freed.
 */
static void
stream_abandon(struct ra_stream *s)
{
	for (struct ra_entry *e = s->entries; e; e = e->next) {
		uint64_t left = bytes_to_come(e);

		if (e->state != ENTRY_FETCHING || e->readers || e->dead || left <= e->expect / 4)
			continue;
		log_debug("read-ahead %s: abandoned, %s to come", s->node.key,
		          left == UINT64_MAX ? "an unknown length" : "more than a quarter");
		exchange_release(&e->ex);
		e->state = ENTRY_FAILED;
		memstore_fail(&e->store);
		entry_settle(e);
	}
}

/* Stops prediction on a stream: a piece did not fit, or was not safe to serve. */
static void
stream_stop(struct ra_stream *s, const char *why)
{
	if (!s->stopped)
		log_debug("read-ahead %s: stopped: %s", s->node.key, why);
	s->stopped = true;
	kp_stats.readahead_unsafe++;
	stream_forget(s);
}

/* Remembers the identity of the piece just answered, copying its text. */
static bool
keep_identity(struct ra_stream *s, const struct object_identity *id, const char *base)
{
	size_t n = id->etag.len + id->last_modified.len;

	if (n > sizeof(s->id_text))
		return false;
	memcpy(s->id_text, base + id->etag.off, id->etag.len);
	memcpy(s->id_text + id->etag.len, base + id->last_modified.off, id->last_modified.len);
	s->id = *id;
	s->id.etag.off = 0;
	s->id.last_modified.off = id->etag.len;
	s->has_identity = true;
	return true;
}

/* ---- serving -------------------------------------------------------------- */

/*
 * The client's request and the proxy's carry the same credentials and
 * agree on every field resp (spans into rbase) varies on; counted as
 * unsafe when not.
 */
static bool
same_requester(const struct ra_reader *r, const struct http_head *resp, const char *rbase)
{
	struct buf *req = r->entry->req;
	size_t max = cfg_of(r->entry->stream->ra)->max_header_bytes;
	struct http_parser ps;
	struct http_head mine, theirs;

	if (parse_head(HTTP_REQUEST, buf_head(req), buf_len(req), max, &ps, &mine) &&
	    parse_head(HTTP_REQUEST, buf_head(r->ask), buf_len(r->ask), max, &ps, &theirs) &&
	    ranges_same_requester(&mine, buf_head(req), &theirs, buf_head(r->ask), resp, rbase))
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

/* Writes the head a client gets for its own range out of the piece held. */
static bool
slice_head(const struct http_head *h, const char *base, const struct byte_range *got,
           uint64_t complete, struct buf *out)
{
	static const char *const skip[] = {"content-range", "content-length", NULL};

	return copy_head(h, base, skip, out) &&
	       append(out, "Content-Range: bytes %llu-%llu/%llu\r\nContent-Length: %llu\r\n\r\n",
	              (unsigned long long)got->first, (unsigned long long)got->last,
	              (unsigned long long)complete,
	              (unsigned long long)(got->last - got->first + 1));
}

/*
 * A client's slice is ready once the piece's head is in memory: only a 206
 * that is exactly the piece asked for, of the same object as the piece
 * before, not private, and varying on nothing the client's request does
 * not share with the proxy's. Anything else fails the slice before its
 * first byte, and the client's request goes to the origin.
 */
static int
prepare_slice(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct ra_entry *e = r->entry;
	struct ra_stream *s = e->stream;
	size_t max = cfg_of(s->ra)->max_header_bytes;
	struct http_parser ps;
	struct http_head resp;
	struct object_identity id;
	struct byte_range got;
	uint64_t complete;

	if (!m->store->data ||
	    !parse_head(HTTP_RESPONSE, m->store->data, m->store->len, max, &ps, &resp))
		return m->store->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? 0 : -1;
	if (!ranges_piece_fits(&e->range, &resp, m->store->data, &complete) ||
	    ranges_response_private(&resp, m->store->data) ||
	    !ranges_identity(&resp, m->store->data, &id) ||
	    (s->has_identity && !ranges_same_object(&s->id, s->id_text, &id, m->store->data))) {
		/* Never to be served: it goes once its readers have gone to the origin. */
		e->state = ENTRY_FAILED;
		stream_stop(s, "a piece fetched ahead is not the one to serve");
		return -1;
	}
	if (!same_requester(r, &resp, m->store->data))
		return -1;
	got.first = r->asked.first;
	got.last = r->asked.last < complete - 1 ? r->asked.last : complete - 1;
	if (!(m->prefix = buf_get()) || !slice_head(&resp, m->store->data, &got, complete, m->prefix))
		return -1;
	m->offset = resp.head_len;
	m->until = resp.head_len + (size_t)(got.last - got.first + 1);
	if (got.last - got.first + 1 > e->served)
		e->served = got.last - got.first + 1;
	count_served(r);
	return 1;
}

/*
 * A whole segment is served as the origin answered it, once its head is
 * in memory: only a 200, not private, varying on nothing the client's
 * request does not share with the proxy's.
 */
static int
prepare_whole(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct ra_entry *e = r->entry;
	size_t max = cfg_of(e->stream->ra)->max_header_bytes;
	struct http_parser ps;
	struct http_head resp;

	if (!m->store->data ||
	    !parse_head(HTTP_RESPONSE, m->store->data, m->store->len, max, &ps, &resp))
		return m->store->state == MEMSTORE_OPEN && ps.error == HTTP_HEAD_OK ? 0 : -1;
	if (resp.status != 200 || ranges_response_private(&resp, m->store->data)) {
		e->state = ENTRY_FAILED;
		kp_stats.readahead_unsafe++;
		return -1;
	}
	if (!same_requester(r, &resp, m->store->data))
		return -1;
	e->served = 1;
	count_served(r);
	return 1;
}

static void
reader_done(struct memsource *m)
{
	struct ra_reader *r = m->owner;
	struct ra_entry *e = r->entry;

	buf_put(r->ask);
	free(r);
	e->readers--;
	entry_settle(e);
}

/*
 * Fetches of the stream still arriving, that no client reads, before e:
 * pipelined on one connection, e comes after them. A client skipping more
 * than one of them would wait behind wrong guesses: it asks the origin.
 */
static unsigned
guesses_ahead(const struct ra_stream *s, const struct ra_entry *e)
{
	unsigned n = 0;

	for (const struct ra_entry *o = s->entries; o; o = o->next)
		if (o->state == ENTRY_FETCHING && !o->readers && !o->dead &&
		    o->range.first < e->range.first)
			n++;
	return n;
}

struct source *
readahead_serve(struct readahead *ra, const struct readahead_ask *ask, const struct http_head *h,
                const char *base)
{
	char key[9000];
	struct ra_stream *s;
	struct ra_entry *e;
	struct ra_reader *r;
	struct byte_range asked;
	enum range_form form;

	if (h->method != HTTP_GET)
		return NULL;
	form = ranges_requested(h, base, &asked);
	if ((form != RANGE_SINGLE && form != RANGE_OPEN && form != RANGE_NONE) ||
	    !path_key(ask, ask->target->path, ask->target->path_len, key, sizeof(key)) ||
	    !(s = stream_find(ra, key)))
		return NULL;
	s->used = clock_now(ra->env->clock);
	e = form == RANGE_NONE ? entry_whole(s) : entry_at(s, asked.first);
	/* Past what is fetched: an open range only if the piece runs to the end. */
	if (!e || e->state == ENTRY_FAILED || guesses_ahead(s, e) > 1 ||
	    (!e->whole && asked.last > e->range.last && !(asked.last == UINT64_MAX && e->to_end)) ||
	    h->head_len > buf_capacity()) {
		if (s->entries) {
			kp_stats.readahead_misses++;
			stream_abandon(s);
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
	r->entry = e;
	r->asked = asked;
	r->m.owner = r;
	r->m.done = reader_done;
	memsource_open_slice(&r->m, &e->store, e->whole ? prepare_whole : prepare_slice);
	e->readers++;
	r->joined = e->state == ENTRY_FETCHING;
	/* A client waits for it now: no longer behind other clients' requests. */
	if (r->joined)
		exchange_promote(&e->ex);
	return &r->m.src;
}

/* ---- predicting ----------------------------------------------------------- */

/* Pieces ahead before a fetch has been timed: the next, and one to cover its round trip. */
#define FIRST_DEPTH 2

/*
 * Pieces to keep in flight: a request reaches the origin half a round trip
 * after it is sent and its answer comes back half a round trip later, so
 * the path stays busy only if the pieces already asked for hold a round
 * trip's worth of transfer, rtt x rate bytes, on top of the one the client
 * reads now.
 */
static unsigned
path_depth(double rtt, double rate, uint64_t length, unsigned most)
{
	double in_flight = rtt * rate;
	uint64_t depth;

	if (rtt <= 0 || rate <= 0 || length == 0)
		return FIRST_DEPTH < most ? FIRST_DEPTH : most;
	if (in_flight >= (double)length * most)
		return most;
	depth = 1 + ((uint64_t)in_flight + length - 1) / length;
	return depth < most ? (unsigned)depth : most;
}

/* ---- HLS: the segment after the one asked for ------------------------------ */

/*
 * Fetches one segment of a playlist for the client ask is of, expected to
 * be about expect bytes (0: not known); false when it was not made.
 */
static bool
fetch_segment(struct readahead *ra, const struct readahead_ask *ask, const struct http_head *req,
              const char *base, const struct hls_segment *seg, uint64_t expect, size_t charged)
{
	static const struct byte_range whole = {0, UINT64_MAX};
	char key[9000];
	struct ra_stream *s;
	struct buf *out;

	if (!path_key(ask, seg->path, seg->path_len, key, sizeof(key)) ||
	    !(s = stream_get(ra, key)))
		return false;
	if (seg->has_range ? entry_at(s, seg->range.first) != NULL : entry_whole(s) != NULL)
		return true;
	if (!(out = buf_get()) || !segment_request(req, base, seg, out)) {
		buf_put(out);
		return false;
	}
	if (seg->has_range) {
		uint64_t length = seg->range.last - seg->range.first + 1;

		return fetch_start(s, ask, out, &seg->range, false, false, length,
		                   piece_charge(cfg_of(ra), length));
	}
	return fetch_start(s, ask, out, &whole, false, true, expect, charged);
}

/*
 * Memory for a whole object fetched ahead, after one of length bytes (0:
 * unknown): half again as much, as the objects a player asks for in turn
 * are of about one length. Past it the fetch fails and the client asks
 * the origin itself.
 */
static size_t
whole_charge(const struct kp_config *cfg, uint64_t length)
{
	uint64_t cap = cfg->read_ahead_memory / 2, charged;

	/* Beyond the cap, or a length that would wrap the sum: not fetched (0). */
	if (length > cap)
		return 0;
	charged = length ? length + length / 2 + cfg->max_header_bytes + HEAD_ROOM
	                 : cfg->read_ahead_memory / 8;
	return charged < cap ? (size_t)charged : (size_t)cap;
}

/*
 * A player's own word on what it asks for next (CMCD nor and nrr, read by
 * hls.c): that object, or that range of it, is fetched for the client.
 * An open nrr ("<start>-") is not followed: its length is not known.
 */
static void
predict_cmcd(struct readahead *ra, const struct readahead_ask *ask, const struct http_head *req,
             const char *base, const struct http_head *resp)
{
	const char *path = base + req->url.off;
	size_t path_len = req->url.len;
	struct hls_cmcd hint;
	struct hls_segment next;
	char next_path[HLS_MAX_PATH];
	uint64_t length = resp->llhttp_flags & F_CONTENT_LENGTH ? resp->content_length : 0;

	if (!hls_cmcd_read(req, base, path, path_len, &hint) ||
	    (hint.has_nrr && hint.nrr.last == UINT64_MAX) ||
	    !hls_cmcd_path(&hint, path, path_len, next_path, sizeof(next_path), &next.path_len))
		return;
	next.path = next_path;
	next.has_range = hint.has_nrr;
	next.range = hint.nrr;
	fetch_segment(ra, ask, req, base, &next, length, whole_charge(cfg_of(ra), length));
}

/*
 * The client went from playlist old to another (a variant switch): what is
 * on its way of old's segments is of no use now (stream_abandon).
 */
static void
abandon_playlist(struct readahead *ra, const struct readahead_ask *ask,
                 const struct ra_playlist_held *old)
{
	char key[9000];
	struct ra_stream *s;

	for (size_t i = 0; i < old->pl->nsegments; i++) {
		const struct hls_segment *seg = &old->pl->segments[i];

		if (seg->path && path_key(ask, seg->path, seg->path_len, key, sizeof(key)) &&
		    (s = stream_find(ra, key)) != NULL)
			stream_abandon(s);
	}
}

/*
 * The client was answered for a segment of a playlist it was given: the
 * segments after it are fetched, as many as depth allows, each as long as
 * half again this one may be (segments of one playlist are of a length).
 */
static void
predict_segments(struct readahead *ra, const struct readahead_ask *ask,
                 const struct http_head *req, const char *base, enum range_form form,
                 const struct byte_range *asked, const struct http_head *resp, int upstream_fd)
{
	const struct kp_config *cfg = cfg_of(ra);
	const char *path = base + req->url.off;
	size_t path_len = req->url.len, client_len, charged;
	const struct hls_segment *next;
	struct ra_playlist_held *p, **pp, *last = NULL;
	struct ra_stream *cur = NULL;
	struct table_node *held;
	char client[600], key[9000];
	unsigned depth;
	uint64_t length;

	if (!stream_key(ask->client, ask->key, "", 0, client, sizeof(client)))
		return;
	client_len = strlen(client);
	for (pp = &ra->playlists; (p = *pp) != NULL; pp = &p->next) {
		if (p->client_len != client_len || memcmp(p->key, client, client_len) != 0)
			continue;
		if (hls_next(p->pl, path, path_len, form == RANGE_SINGLE, asked, &next))
			break;
	}
	if (!p)
		return;
	/* The playlist whose segments the client followed last, if another: it switched. */
	for (struct ra_playlist_held *o = ra->playlists; o; o = o->next)
		if (o != p && o->followed > p->followed && o->client_len == client_len &&
		    memcmp(o->key, client, client_len) == 0 && (!last || o->followed > last->followed))
			last = o;
	if (last) {
		abandon_playlist(ra, ask, last);
		last->followed = 0;
	}
	/* Most recently used first. */
	*pp = p->next;
	p->next = ra->playlists;
	ra->playlists = p;
	p->used = p->followed = clock_now(ra->env->clock);
	length = resp->llhttp_flags & F_CONTENT_LENGTH ? resp->content_length : 0;
	charged = whole_charge(cfg, length);
	depth = FIRST_DEPTH < cfg->read_ahead_depth ? FIRST_DEPTH : cfg->read_ahead_depth;
	if (path_key(ask, path, path_len, key, sizeof(key)) && (cur = stream_find(ra, key)) != NULL) {
		double rtt = net_rtt(upstream_fd);

		if (rtt > 0)
			cur->rtt = rtt;
		depth = path_depth(cur->rtt, cur->rate, length, cfg->read_ahead_depth);
	}
	/*
	 * Every segment is an object of its own, timed only once it is in:
	 * until then, the path as this client's other fetches found it.
	 */
	if ((!cur || cur->rate <= 0) && stream_key(ask->client, "", "", 0, key, sizeof(key)) &&
	    (held = table_find(&ra->clients, key)) != NULL) {
		const struct ra_client *c = container_of(held, struct ra_client, node);

		depth = path_depth(c->rtt, c->rate, length, cfg->read_ahead_depth);
	}
	for (unsigned i = 0; i < depth; i++) {
		const struct hls_segment *seg = next;

		if (!fetch_segment(ra, ask, req, base, seg, length, charged) ||
		    !hls_next(p->pl, seg->path, seg->path_len, seg->has_range, &seg->range, &next))
			break;
	}
}

/* Drops the least recently used playlist; false when none is held. */
static bool
forget_playlist(struct readahead *ra)
{
	struct ra_playlist_held **pp = &ra->playlists;

	if (!*pp)
		return false;
	while ((*pp)->next)
		pp = &(*pp)->next;
	hls_free((*pp)->pl);
	free(*pp);
	*pp = NULL;
	ra->nplaylists--;
	return true;
}

struct ra_playlist *
readahead_playlist_open(struct readahead *ra, const struct readahead_ask *ask,
                        const struct http_head *resp, const char *rbase)
{
	const char *ctype = NULL;
	size_t ctype_len = 0, path_len = ask->target->path_len;
	struct ra_playlist *p;

	if (resp->status != 200 || !(resp->llhttp_flags & F_CONTENT_LENGTH) ||
	    (resp->llhttp_flags & F_CHUNKED) || resp->content_length == 0 ||
	    resp->content_length > HLS_MAX_PLAYLIST)
		return NULL;
	for (unsigned i = 0; i < resp->nfields; i++)
		if (http_span_is(rbase, resp->fields[i].name, "content-type")) {
			ctype = rbase + resp->fields[i].value.off;
			ctype_len = resp->fields[i].value.len;
		}
	if (!hls_is_playlist(ctype, ctype_len, ask->target->path, path_len) ||
	    !(p = calloc(1, sizeof(*p) + (size_t)resp->content_length)))
		return NULL;
	p->ra = ra;
	p->expected = (size_t)resp->content_length;
	if (!stream_key(ask->client, ask->key, "", 0, p->key, sizeof(p->key)) ||
	    (p->client_len = strlen(p->key)) + path_len >= sizeof(p->key)) {
		free(p);
		return NULL;
	}
	memcpy(p->key + p->client_len, ask->target->path, path_len);
	/* As the client wrote it: a playlist's absolute URIs are written the same way. */
	snprintf(p->origin, sizeof(p->origin), "%s://%s", ask->https ? "https" : "http",
	         ask->target->authority);
	return p;
}

void
readahead_playlist_data(struct ra_playlist *p, const char *data, size_t len)
{
	size_t room = p->expected - p->len;

	if (len > room)
		len = room;
	memcpy(p->text + p->len, data, len);
	p->len += len;
}

void
readahead_playlist_close(struct ra_playlist *p, bool complete)
{
	struct readahead *ra = p->ra;
	struct ra_playlist_held *h, **hp;
	struct hls_playlist *pl;
	const char *path = p->key + p->client_len;
	size_t path_len = strlen(path);

	if (!complete || p->len != p->expected ||
	    hls_parse(p->text, p->len, path, path_len, p->origin, strlen(p->origin), &pl) !=
	            HLS_MEDIA) {
		free(p);
		return;
	}
	/* The latest one replaces what was held: a live playlist lists only what is there now. */
	for (hp = &ra->playlists; (h = *hp) != NULL; hp = &h->next)
		if (strcmp(h->key, p->key) == 0)
			break;
	if (h) {
		*hp = h->next;
		hls_free(h->pl);
	} else {
		if (ra->nplaylists >= MAX_PLAYLISTS)
			forget_playlist(ra);
		if (!(h = calloc(1, sizeof(*h)))) {
			hls_free(pl);
			free(p);
			return;
		}
		ra->nplaylists++;
	}
	memcpy(h->key, p->key, sizeof(h->key));
	h->client_len = p->client_len;
	h->pl = pl;
	h->used = clock_now(ra->env->clock);
	h->next = ra->playlists;
	ra->playlists = h;
	log_debug("read-ahead: playlist %s: %zu segments", h->key, pl->nsegments);
	free(p);
}

void
readahead_heard(struct readahead *ra, const struct readahead_ask *ask, const struct buf *req_head,
                const struct http_head *resp, const char *rbase, int upstream_fd)
{
	const struct kp_config *cfg = cfg_of(ra);
	struct http_parser ps;
	struct http_head req;
	const char *base = buf_head((struct buf *)req_head), *path;
	struct byte_range asked, got, from, next;
	struct object_identity id;
	uint64_t complete, length, margin;
	size_t path_len;
	char key[9000];
	struct ra_stream *s;
	enum range_form form;
	unsigned depth;
	double rtt;

	if (!req_head ||
	    !parse_head(HTTP_REQUEST, base, buf_len((struct buf *)req_head), cfg->max_header_bytes,
	                &ps, &req) ||
	    req.method != HTTP_GET || http_request_body_kind(&req) != BODY_NONE ||
	    http_wants_upgrade(&req))
		return;
	form = ranges_requested(&req, base, &asked);
	if (resp->status == 200 || resp->status == 206) {
		predict_cmcd(ra, ask, &req, base, resp);
		if (ra->playlists)
			predict_segments(ra, ask, &req, base, form, &asked, resp, upstream_fd);
	}
	if (resp->status != 206 || (form != RANGE_SINGLE && form != RANGE_OPEN) ||
	    !ranges_answered(resp, rbase, &got, &complete) || got.first != asked.first ||
	    ranges_response_private(resp, rbase) || !ranges_identity(resp, rbase, &id))
		return;
	request_path(&req, base, &path, &path_len);
	if (!path_key(ask, path, path_len, key, sizeof(key)) || !(s = stream_get(ra, key)))
		return;
	if ((rtt = net_rtt(upstream_fd)) > 0)
		s->rtt = rtt;
	/* Another object at the same URL: what is held belongs to the old one. */
	if (s->has_identity && !ranges_same_object(&s->id, s->id_text, &id, rbase)) {
		stream_forget(s);
		s->stopped = false;
		s->largest = 0;
		s->uniform = true;
	}
	if (!keep_identity(s, &id, rbase) || s->stopped)
		return;
	length = got.last - got.first + 1;
	if (s->last_length && length != s->last_length && got.last != complete - 1)
		s->uniform = false;
	s->last_length = length;
	s->pieces++;
	if (length > s->largest)
		s->largest = length;
	/*
	 * The next piece starts right after this one; the ones after it only if
	 * every piece so far had one length, since a client that varies its
	 * lengths starts its next request where its last one really ended.
	 */
	from = got;
	/*
	 * Pieces of one length seen twice: the next is that long, and fetching
	 * more would only delay the one after on the same connection. Otherwise
	 * the longest seen / 0.95 covers a client that varies its lengths.
	 */
	margin = s->uniform && s->pieces >= 2 ? 0 : s->largest;
	depth = s->uniform ? path_depth(s->rtt, s->rate, length, cfg->read_ahead_depth) : 1;
	for (unsigned i = 0; i < depth; i++) {
		if (!ranges_next(&from, complete, margin, cfg->read_ahead_memory / 2, &next))
			break;
		/* Shorter than the piece before, short of the end: the client would miss it. */
		if (next.last - next.first + 1 < length && next.last != complete - 1) {
			kp_stats.readahead_throttled++;
			break;
		}
		if (!entry_at(s, next.first) && !fetch(s, ask, &req, base, &next, complete))
			break;
		from.first = next.first;
		from.last = next.first + length - 1;
		if (from.last >= complete - 1)
			break;
	}
}

/* ---- sweeping ------------------------------------------------------------- */

static void
sweep_stream(struct table_node *n, void *arg)
{
	struct ra_stream *s = container_of(n, struct ra_stream, node);
	ev_tstamp now = *(const ev_tstamp *)arg;
	double ttl = cfg_of(s->ra)->read_ahead_ttl;

	for (struct ra_entry *e = s->entries; e; e = e->next)
		if (e->state == ENTRY_HELD && !e->readers && now - e->held_since > ttl)
			entry_drop(e);
	if (!s->entries && now - s->used > ttl)
		stream_free(s);
}

static void
sweep_cb(struct clock_timer *t)
{
	struct readahead *ra = container_of(t, struct readahead, sweep);
	ev_tstamp now = clock_now(ra->env->clock);

	table_each(&ra->streams, sweep_stream, &now);
	for (struct ra_playlist_held **pp = &ra->playlists; *pp;) {
		struct ra_playlist_held *h = *pp;

		if (now - h->used > cfg_of(ra)->read_ahead_ttl) {
			*pp = h->next;
			hls_free(h->pl);
			free(h);
			ra->nplaylists--;
		} else {
			pp = &h->next;
		}
	}
	clock_timer_start(t, cfg_of(ra)->read_ahead_ttl / SWEEPS_PER_TTL);
}

struct readahead *
readahead_new(const struct proxy_env *env)
{
	struct readahead *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return NULL;
	if (table_init(&ra->streams) < 0) {
		free(ra);
		return NULL;
	}
	if (table_init(&ra->clients) < 0) {
		table_free(&ra->streams);
		free(ra);
		return NULL;
	}
	ra->env = env;
	ev_prepare_init(&ra->reaper, reaper_cb);
	clock_timer_init(&ra->sweep, env->clock, sweep_cb);
	clock_timer_start(&ra->sweep, env->cfg->read_ahead_ttl / SWEEPS_PER_TTL);
	return ra;
}

static void
free_stream(struct table_node *n, void *arg)
{
	struct ra_stream *s = container_of(n, struct ra_stream, node);

	(void)arg;
	while (s->entries) {
		struct ra_entry *e = s->entries;

		/* A reader still open points at the store: it is failed and forgotten first. */
		memstore_free(&e->store);
		e->readers = 0;
		entry_free(e);
	}
	stream_free(s);
}

void
readahead_free(struct readahead *ra)
{
	if (!ra)
		return;
	clock_timer_stop(&ra->sweep);
	ev_prepare_stop(ra->env->loop, &ra->reaper);
	ra->dead = NULL;
	while (forget_playlist(ra))
		;
	table_each(&ra->streams, free_stream, NULL);
	/* Fetches failed while their neighbours were freed may have asked for the reaper again. */
	ev_prepare_stop(ra->env->loop, &ra->reaper);
	ra->dead = NULL;
	table_free(&ra->streams);
	/* Every client's share went with the last of its pieces. */
	table_free(&ra->clients);
	free(ra);
}
