/*
 * Read-ahead's HLS and CMCD predictor (in the words of ra_store.h). A media
 * playlist a client is given is read as it passes (the exchange shows its
 * body); once whole, it is held, and after the client got a segment it
 * lists, the segments that follow are the series it will ask for next:
 * as many as the path needs in flight are fetched, as the client would ask
 * for them, and served only to it. A player's own word on what it asks for
 * next (CMCD's nor and nrr) is followed too. Parsing the playlist and the
 * CMCD fields is hls.c's.
 *
 * A finished (VOD) playlist's first segments are fetched as soon as it has
 * passed whole, before the client asks for the first: a player works out
 * what to ask for meanwhile, and the connection is warm. A live playlist's
 * are not: where in it a player starts is its own choice (RFC 8216 6.3.3
 * has it start near the end), so only what it asked for says.
 *
 * Playlists themselves are never fetched ahead, and only the segments the
 * latest copy of a playlist lists are (a live playlist's window slides).
 * A playlist's text while it passes and what is held of it count in its
 * client's share of the memory, as pieces do (ra_memory_charge): one that
 * does not fit is not read, or not held.
 * A client that goes on with the segments of another playlist (a variant
 * switch) stops the series of the one it left: its fetches far from done
 * are ended.
 */
#ifndef KP_RA_HLS_H
#define KP_RA_HLS_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>

#include "kp/http.h"
#include "kp/ra_store.h"

struct ra_hls;
/* A playlist on its way to a client, read as it passes. */
struct ra_playlist;

/* NULL when memory is exhausted. */
struct ra_hls *ra_hls_new(const struct proxy_env *env, struct ra_store *st,
                          struct ra_fetcher *fe);
void ra_hls_free(struct ra_hls *h);

/*
 * The final response resp (spans into rbase) answered the client's GET
 * req (spans into base), over a connection whose round trip was rtt
 * seconds (0: not known): a 200 or 206 for a segment of a playlist held,
 * or one that carries CMCD's next object, starts the fetches that follow.
 */
void ra_hls_heard(struct ra_hls *h, const struct ra_ask *ask, const struct http_head *req,
                  const char *base, const struct http_head *resp, const char *rbase, double rtt);

/*
 * The response resp to the client's GET req (spans into base; NULL: not
 * known), when it is a playlist worth reading (a 200 with a Content-Length
 * of at most HLS_MAX_PLAYLIST): a handle to give its body to; else NULL.
 */
struct ra_playlist *ra_hls_open(struct ra_hls *h, const struct ra_ask *ask,
                                const struct http_head *req, const char *base,
                                const struct http_head *resp, const char *rbase);
/* Body bytes of it, in order, as sent to the client. */
void ra_hls_data(struct ra_playlist *p, const char *data, size_t len);
/*
 * The response to ask's request ended, whole (complete) or not; p is freed
 * either way. A whole VOD playlist (EXT-X-ENDLIST) the client had not
 * followed yet starts its first segments.
 */
void ra_hls_close(struct ra_playlist *p, const struct ra_ask *ask, bool complete);

/* Evicts the playlists nobody followed for longer than --read-ahead-ttl. */
void ra_hls_sweep(struct ra_hls *h, ev_tstamp now);

#endif
