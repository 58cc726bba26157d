/*
 * Read-ahead (--read-ahead): after a client got a 206 for one byte range of
 * a URL, the proxy asks the origin for the range that follows, as a request
 * of its own (dispatch's background class, so no client request ever waits
 * for it), and keeps the response in memory. When the client asks for that
 * range, it is served from memory, or joins the fetch still arriving: the
 * origin sees each chunk once, and the client no longer pays a round trip
 * and the origin's slow start after idle for it.
 *
 * What is held is private to the client that caused it: the same client
 * address, the same dispatch key (scheme, host, port, LAN or not), the same
 * path, the same Authorization and Cookie, and the same values of whatever
 * the response's Vary names. A piece is served only if it is exactly the
 * piece asked for (a 206 whose Content-Range starts where it should, of the
 * same object as the piece before: ETag, Last-Modified, length) and the
 * response is neither private nor no-store; anything else is dropped, stops
 * prediction on that stream, and the client's request goes to the origin as
 * if nothing had been held. A client's range may be shorter than the fetch
 * (downloaders vary their chunk length): it gets its own Content-Range,
 * built from the origin's complete length.
 *
 * Bounded: --read-ahead-memory in all (a prediction that would pass it is
 * not made, and counted as throttled), --read-ahead-depth pieces ahead per
 * stream, and a held piece nobody asked for within --read-ahead-ttl seconds is
 * dropped (counted as wasted). A fetch in flight or joined is never dropped.
 */
#ifndef KP_READAHEAD_H
#define KP_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "kp/buf.h"
#include "kp/env.h"
#include "kp/http.h"
#include "kp/source.h"

struct readahead;

/* A client's request, as read-ahead matches and predicts by it. */
struct readahead_ask {
	const struct sockaddr *client;     /* its address; the port does not matter */
	const char *key;                   /* the dispatch key it went under */
	const struct http_target *target;  /* host, port and key for a fetch of our own */
	bool https;                        /* intercepted: to the origin over TLS */
	bool restricted;                   /* a client beyond this machine */
};

/* NULL when memory is exhausted. */
struct readahead *readahead_new(const struct proxy_env *env);
/* Ends every fetch and frees what is held. */
void readahead_free(struct readahead *ra);

/*
 * A response held or arriving for the request whose parsed head h (its
 * spans into base) the client is about to forward: a source to forward it
 * from, or NULL to ask the origin.
 */
struct source *readahead_serve(struct readahead *ra, const struct readahead_ask *ask,
                               const struct http_head *h, const char *base);

/*
 * The final response head resp (spans into rbase) answers the request the
 * proxy sent as req_head: if it is a 206 for one range, fetch what follows.
 * upstream_fd: the origin connection it came over, for its round-trip time;
 * -1 when it came from memory.
 */
void readahead_heard(struct readahead *ra, const struct readahead_ask *ask,
                     const struct buf *req_head, const struct http_head *resp, const char *rbase,
                     int upstream_fd);

/*
 * HLS: a media playlist a client is given is read as it passes (the
 * exchange shows its body, see exchange_ops.body); once whole, it is the
 * list the client's next segment requests are predicted from: after a
 * segment it lists, the ones that follow, as many as --read-ahead-depth
 * allows, fetched as the client would ask for them and served only to it.
 * Playlists themselves are never fetched ahead, and only the segments the
 * latest copy of a playlist lists are (a live playlist's window slides).
 */
struct ra_playlist;

/*
 * The final response resp (spans into rbase) to the client's GET: a handle
 * to give its body to when it is a playlist worth reading (a 200 with a
 * Content-Length of at most HLS_MAX_PLAYLIST), else NULL.
 */
struct ra_playlist *readahead_playlist_open(struct readahead *ra,
                                            const struct readahead_ask *ask,
                                            const struct http_head *resp, const char *rbase);
/* Body bytes of it, in order, as sent to the client. */
void readahead_playlist_data(struct ra_playlist *p, const char *data, size_t len);
/* The response ended, whole (complete) or not; p is freed either way. */
void readahead_playlist_close(struct ra_playlist *p, bool complete);

#endif
