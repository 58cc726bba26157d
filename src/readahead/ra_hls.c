#include "kp/ra_hls.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/hls.h"
#include "kp/list.h"
#include "kp/log.h"
#include "kp/ranges.h"

/* Playlists held, all clients together; the least recently used goes first. */
#define MAX_PLAYLISTS 32

/* The latest media playlist one client was given at one URL. */
struct held_playlist {
	struct kp_list link;             /* in h->playlists */
	struct ra_key key;               /* its strings after the record */
	struct hls_playlist *pl;
	size_t charged;                  /* the record and pl, counted in its client's share */
	ev_tstamp used;
	ev_tstamp followed;              /* a segment of it was last asked for; 0: never */
};

struct ra_playlist {
	struct ra_hls *h;
	struct ra_key key;               /* its strings after text and path */
	char origin[300];                /* scheme://authority, for absolute URIs in it */
	const char *path;                /* as sent, the base of its relative URIs */
	size_t path_len;
	size_t expected;                 /* its Content-Length */
	size_t len;
	const char *request;             /* the head the proxy sent for it; NULL: not known */
	size_t request_len;
	size_t charged;                  /* all of it, counted in its client's share */
	char text[];                     /* expected bytes, the path, the request */
};

struct ra_hls {
	const struct proxy_env *env;
	struct ra_store *st;
	struct ra_fetcher *fe;           /* the memory playlists count in */
	struct kp_list playlists;        /* most recently used first */
	unsigned nplaylists;
	/* One request's scratch, kept off the stack: a CMCD hint and the path it names. */
	struct hls_cmcd hint;
	char next_path[HLS_MAX_PATH];
};

static void
held_free(struct ra_hls *h, struct held_playlist *p)
{
	kp_list_unlink(&p->link);
	ra_memory_discharge(h->fe, &p->key, p->charged);
	hls_free(p->pl);
	free(p);
	h->nplaylists--;
}

/* A playlist read as it passed is done with, parsed or not. */
static void
playlist_free(struct ra_playlist *p)
{
	/* 0: what it counted was handed over to the playlist held from it. */
	if (p->charged)
		ra_memory_discharge(p->h->fe, &p->key, p->charged);
	free(p);
}

/* Evicts the least recently used playlist; false when none is held. */
static bool
evict_oldest(struct ra_hls *h)
{
	struct held_playlist *p = KP_LIST_LAST(&h->playlists, struct held_playlist, link);

	if (!p)
		return false;
	held_free(h, p);
	return true;
}

/* ---- fetching segments ------------------------------------------------------------ */

/*
 * Asks the store for one segment, for the client ask is of, as the client
 * would ask: the head the proxy sent for the one before, for another path,
 * without its Range and preconditions (they were about that object), with
 * the segment's Range if it is a range of path. expect: about how long it
 * is (0: not known); charge: the memory it may take. False when it was not
 * made.
 */
static bool
fetch_segment(struct ra_hls *h, const struct ra_ask *ask, const struct http_head *req,
              const char *base, const struct hls_segment *seg, uint64_t expect, size_t charge)
{
	static const char *const drop[] = {"range",          "if-range",          "if-match",
	                                   "if-none-match",  "if-modified-since", "if-unmodified-since",
	                                   "content-length", "transfer-encoding", "expect",
	                                   "upgrade",        NULL};
	struct http_head_edit edit = {
		.target = seg->path, .target_len = seg->path_len, .drop = drop,
		.range = seg->has_range, .first = seg->range.first, .last = seg->range.last,
	};
	struct ra_key key;
	struct ra_ahead a = {.fetch = {.ask = ask, .range = seg->range, .whole = !seg->has_range},
	                     .key = &key};

	ra_key_make(&key, ask, seg->path, seg->path_len);
	if (ra_store_has(h->st, &key, seg->has_range ? &seg->range : NULL))
		return true;
	if (seg->has_range) {
		a.fetch.expect = seg->range.last - seg->range.first + 1;
		a.fetch.charge = ra_charge_range(h->env->cfg, a.fetch.expect);
	} else {
		a.fetch.expect = expect;
		a.fetch.charge = charge;
	}
	return ra_fetch_request(&a.fetch, req, base, &edit) && ra_store_fetch(h->st, &a);
}

/*
 * A player's own word on what it asks for next (CMCD nor and nrr, read by
 * hls.c): that object, or that range of it, is fetched for the client.
 * An open nrr ("<start>-") is not followed: its length is not known.
 */
static void
predict_cmcd(struct ra_hls *h, const struct ra_ask *ask, const struct http_head *req,
             const char *base, const struct http_head *resp)
{
	const char *path = base + req->url.off;
	size_t path_len = req->url.len;
	struct hls_segment next;
	uint64_t length = resp->llhttp_flags & F_CONTENT_LENGTH ? resp->content_length : 0;

	if (!hls_cmcd_read(req, base, path, path_len, &h->hint) ||
	    (h->hint.has_nrr && h->hint.nrr.last == UINT64_MAX) ||
	    !hls_cmcd_path(&h->hint, path, path_len, h->next_path, sizeof(h->next_path),
	                   &next.path_len))
		return;
	next.path = h->next_path;
	next.has_range = h->hint.has_nrr;
	next.range = h->hint.nrr;
	fetch_segment(h, ask, req, base, &next, length, ra_charge_whole(h->env->cfg, length));
}

/*
 * The one way a series ends: the client went from playlist old to another
 * (a variant switch), so the fetches of old's segments far from done are
 * of no use now.
 */
static void
series_stop(struct ra_hls *h, const struct ra_ask *ask, struct held_playlist *old)
{
	struct ra_key key;

	for (size_t i = 0; i < old->pl->nsegments; i++) {
		const struct hls_segment *seg = &old->pl->segments[i];

		if (!seg->path)
			continue;
		ra_key_make(&key, ask, seg->path, seg->path_len);
		ra_store_drop(h->st, &key, RA_DROP_FAR);
	}
	old->followed = 0;
}

/*
 * The client was answered for a segment of a playlist it was given: the
 * segments after it are fetched, as many as depth allows, each as long as
 * half again this one may be (segments of one playlist are of a length).
 */
static void
predict_segments(struct ra_hls *h, const struct ra_ask *ask, const struct http_head *req,
                 const char *base, const struct http_head *resp, double rtt)
{
	const struct kp_config *cfg = h->env->cfg;
	const char *path = base + req->url.off;
	size_t path_len = req->url.len;
	struct held_playlist *p = NULL, *last = NULL;
	const struct hls_segment *next;
	struct byte_range asked;
	enum range_form form = ranges_requested(req, base, &asked);
	struct ra_key key;
	struct ra_path known;
	unsigned depth;
	uint64_t length;
	size_t charge;

	ra_key_make(&key, ask, path, path_len);
	KP_LIST_EACH(o, &h->playlists, struct held_playlist, link)
		if (ra_key_same_client(&key, &o->key) &&
		    hls_next(o->pl, path, path_len, form == RANGE_SINGLE, &asked, &next)) {
			p = o;
			break;
		}
	if (!p)
		return;
	/* The playlist whose segments the client followed last, if another: it switched. */
	KP_LIST_EACH(o, &h->playlists, struct held_playlist, link)
		if (o != p && o->followed > p->followed && ra_key_same_client(&key, &o->key) &&
		    (!last || o->followed > last->followed))
			last = o;
	if (last)
		series_stop(h, ask, last);
	kp_list_unlink(&p->link);
	kp_list_insert_head(&h->playlists, &p->link);
	p->used = p->followed = clock_now(h->env->clock);
	length = resp->llhttp_flags & F_CONTENT_LENGTH ? resp->content_length : 0;
	charge = ra_charge_whole(cfg, length);
	/*
	 * Every segment is an object of its own, timed only once it is in:
	 * until then, the path as this client's other fetches found it.
	 */
	ra_store_note_rtt(h->st, &key, rtt);
	known = ra_store_path(h->st, &key);
	if (known.rate <= 0) {
		struct ra_path client = ra_memory_client_path(h->fe, &key);

		if (client.rate > 0 || client.rtt > 0)
			known = client;
	}
	depth = ra_depth(&known, length, cfg->read_ahead_depth);
	for (unsigned i = 0; i < depth; i++) {
		const struct hls_segment *seg = next;

		if (!fetch_segment(h, ask, req, base, seg, length, charge) ||
		    !hls_next(p->pl, seg->path, seg->path_len, seg->has_range, &seg->range, &next))
			break;
	}
}

void
ra_hls_heard(struct ra_hls *h, const struct ra_ask *ask, const struct http_head *req,
             const char *base, const struct http_head *resp, const char *rbase, double rtt)
{
	(void)rbase;
	if (resp->status != 200 && resp->status != 206)
		return;
	predict_cmcd(h, ask, req, base, resp);
	if (!kp_list_empty(&h->playlists))
		predict_segments(h, ask, req, base, resp, rtt);
}

/* ---- reading playlists ------------------------------------------------------------ */

struct ra_playlist *
ra_hls_open(struct ra_hls *h, const struct ra_ask *ask, const struct http_head *req,
            const char *base, const struct http_head *resp, const char *rbase)
{
	size_t request_len = req ? req->head_len : 0;
	const char *ctype = NULL, *path = ask->target->path;
	size_t ctype_len = 0, path_len = ask->target->path_len, size;
	struct ra_playlist *p;
	struct ra_key key;

	if (resp->status != 200 || !(resp->llhttp_flags & F_CONTENT_LENGTH) ||
	    (resp->llhttp_flags & F_CHUNKED) || resp->content_length == 0 ||
	    resp->content_length > HLS_MAX_PLAYLIST)
		return NULL;
	for (unsigned i = 0; i < resp->nfields; i++)
		if (http_span_is(rbase, resp->fields[i].name, "content-type")) {
			ctype = rbase + resp->fields[i].value.off;
			ctype_len = resp->fields[i].value.len;
		}
	if (!hls_is_playlist(ctype, ctype_len, path, path_len))
		return NULL;
	ra_key_make(&key, ask, path, path_len);
	/* Room for the whole text from the start, counted in the client's share till it ends. */
	size = sizeof(*p) + (size_t)resp->content_length + path_len + request_len;
	if (path_len > RA_KEY_PATH_MAX || !ra_memory_charge(h->fe, &key, ra_key_kept_size(&key, size)))
		return NULL;
	if (!(p = ra_key_keep(&key, size, offsetof(struct ra_playlist, key)))) {
		ra_memory_discharge(h->fe, &key, ra_key_kept_size(&key, size));
		return NULL;
	}
	p->charged = ra_key_kept_size(&key, size);
	p->h = h;
	p->expected = (size_t)resp->content_length;
	memcpy(p->text + p->expected, path, path_len);
	p->path = p->text + p->expected;
	p->path_len = path_len;
	/* Kept for a VOD playlist's first segments, asked as the client asked for it. */
	if (request_len) {
		memcpy(p->text + p->expected + path_len, base, request_len);
		p->request = p->text + p->expected + path_len;
		p->request_len = request_len;
	}
	/* As the client wrote it: a playlist's absolute URIs are written the same way. */
	snprintf(p->origin, sizeof(p->origin), "%s://%s", ask->https ? "https" : "http",
	         ask->target->authority);
	return p;
}

void
ra_hls_data(struct ra_playlist *p, const char *data, size_t len)
{
	size_t room = p->expected - p->len;

	if (len > room)
		len = room;
	memcpy(p->text + p->len, data, len);
	p->len += len;
}

/*
 * A finished playlist passed whole to a client that has not followed it
 * yet: its first segments are fetched, as deep as the depth rule goes for
 * a path whose figures are this client's so far, as the client would ask
 * for them (the head it sent for the playlist, for their paths).
 */
static void
start_vod(struct ra_hls *h, const struct ra_ask *ask, const struct ra_playlist *p,
          const struct hls_playlist *pl)
{
	const struct kp_config *cfg = h->env->cfg;
	struct http_parser ps;
	struct http_head req;
	struct ra_path known = ra_memory_client_path(h->fe, &p->key);
	unsigned depth = ra_depth(&known, 0, cfg->read_ahead_depth);

	if (!http_parse_held_head(HTTP_REQUEST, p->request, p->request_len, cfg->max_header_bytes,
	                          &ps, &req))
		return;
	for (size_t i = 0; i < pl->nsegments && i < depth; i++)
		if (!pl->segments[i].path ||
		    !fetch_segment(h, ask, &req, p->request, &pl->segments[i], 0,
		                   ra_charge_whole(cfg, 0)))
			break;
}

void
ra_hls_close(struct ra_playlist *p, const struct ra_ask *ask, bool complete)
{
	struct ra_hls *h = p->h;
	struct held_playlist *held = NULL;
	struct hls_playlist *pl;
	ev_tstamp followed = 0;
	size_t charged;

	if (!complete || p->len != p->expected ||
	    hls_parse(p->text, p->len, p->path, p->path_len, p->origin, strlen(p->origin), &pl) !=
	            HLS_MEDIA) {
		playlist_free(p);
		return;
	}
	/* The latest one replaces what was held: a live playlist lists only what is there now. */
	KP_LIST_EACH(o, &h->playlists, struct held_playlist, link)
		if (ra_key_equal(&p->key, &o->key)) {
			held = o;
			break;
		}
	if (held) {
		followed = held->followed;
		held_free(h, held);
	} else if (h->nplaylists >= MAX_PLAYLISTS) {
		evict_oldest(h);
	}
	/* What is held of the text is counted instead of it. */
	ra_memory_discharge(h->fe, &p->key, p->charged);
	p->charged = 0;
	charged = ra_key_kept_size(&p->key, sizeof(*held)) + pl->bytes;
	if (!ra_memory_charge(h->fe, &p->key, charged)) {
		hls_free(pl);
		playlist_free(p);
		return;
	}
	if (!(held = ra_key_keep(&p->key, sizeof(*held), offsetof(struct held_playlist, key)))) {
		ra_memory_discharge(h->fe, &p->key, charged);
		hls_free(pl);
		playlist_free(p);
		return;
	}
	h->nplaylists++;
	held->charged = charged;
	held->pl = pl;
	held->followed = followed;
	held->used = clock_now(h->env->clock);
	kp_list_insert_head(&h->playlists, &held->link);
	log_debug("read-ahead: playlist %.*s: %zu segments%s", (int)p->path_len, p->path,
	          pl->nsegments, pl->endlist ? ", finished" : "");
	if (pl->endlist && !held->followed && p->request)
		start_vod(h, ask, p, pl);
	playlist_free(p);
}

void
ra_hls_sweep(struct ra_hls *h, ev_tstamp now)
{
	KP_LIST_EACH_SAFE(p, next, &h->playlists, struct held_playlist, link)
		if (now - p->used > h->env->cfg->read_ahead_ttl)
			held_free(h, p);
}

struct ra_hls *
ra_hls_new(const struct proxy_env *env, struct ra_store *st, struct ra_fetcher *fe)
{
	struct ra_hls *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	kp_list_init(&h->playlists);
	h->env = env;
	h->st = st;
	h->fe = fe;
	return h;
}

void
ra_hls_free(struct ra_hls *h)
{
	if (!h)
		return;
	while (evict_oldest(h))
		;
	free(h);
}
