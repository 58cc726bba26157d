/*
 * Read-ahead's store: the pieces the proxy fetched ahead of its clients
 * (ra_fetch.h fetches them), held under the key of the client they were
 * fetched for, served to the client that asks, and swept when nobody
 * asked. What to fetch is the predictors' business (ra_range.h,
 * ra_hls.h); they ask the store, and the store never calls them.
 *
 * The words read-ahead uses, and no others:
 *
 *   piece   one answer fetched (or being fetched) ahead of a client and
 *           held in memory: a byte range of an object, or a whole object
 *           (an HLS segment). A piece is *dropped*, the one way a piece
 *           ends: once no client reads it, and what of it no client was
 *           given counts as wasted.
 *   series  the pieces a predictor expects one client to ask for next, in
 *           order: the ranges of an object after the one the client was
 *           given (ra_range.h), or the segments of a playlist after the
 *           one it was given (ra_hls.h). A series is *stopped*, the one way
 *           a series ends: nothing more is predicted for it, and its pieces
 *           nobody reads are dropped.
 *   key     what a piece is held under and served to (struct ra_key): one
 *           client address, one dispatch key, one path, one set of
 *           credentials.
 *   shelf   the pieces held under one key.
 *   reader  a client being served from a piece.
 *
 * A piece is served only to its key, only if it is exactly what is asked
 * (a 206 whose Content-Range starts where the request does, of the object
 * its series expected; or a whole object's 200), neither private nor
 * no-store, and varying on nothing the client's request does not share
 * with the proxy's. Anything else is refused before its first byte: the
 * client's request goes to the origin as if nothing had been held.
 *
 * Bounded: a piece, its shelf and what the store keeps about it count in
 * the fetch engine's memory (--fetch-memory, half of it per client
 * address); a fetch that would pass either is not made, and counted as
 * throttled. A held piece nobody asked for within --read-ahead-ttl seconds
 * is dropped (counted as wasted). A piece being fetched or read is never
 * dropped.
 */
#ifndef KP_RA_STORE_H
#define KP_RA_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "kp/env.h"
#include "kp/http.h"
#include "kp/ra_fetch.h"
#include "kp/ra_key.h"
#include "kp/ranges.h"
#include "kp/source.h"

struct ra_store;

/* A piece a predictor asks for: the fetch, and what the store keeps it under and checks. */
struct ra_ahead {
	struct ra_fetch fetch;             /* its owner is the store's own, whatever is set */
	const struct ra_key *key;          /* what it is held under */
	bool to_end;                       /* the range ends at the object's last byte */
	/* The object the piece must be of (a range's series knows it); NULL: any. */
	const struct object_identity *identity;
	const char *identity_base;
};

/* NULL when memory is exhausted. */
struct ra_store *ra_store_new(const struct proxy_env *env, struct ra_fetcher *fe);
/* Drops every piece and frees every shelf. */
void ra_store_free(struct ra_store *st);

/*
 * Starts the fetch a asks for, unless the key holds that piece already
 * (true, nothing new). False when it was not made: past a share or the
 * memory in all (counted as throttled), or out of memory.
 */
bool ra_store_fetch(struct ra_store *st, struct ra_ahead *a);

/*
 * A piece held or arriving for the client's request whose head is h (spans
 * into base): a source to forward it from, or NULL to ask the origin. A
 * request under a key that holds pieces, but none that answers it (the
 * client seeked, or skipped more than one guess), is counted as a miss and
 * the key's fetches far from done are ended (RA_DROP_FAR).
 */
struct source *ra_store_serve(struct ra_store *st, const struct ra_ask *ask,
                              const struct http_head *h, const char *base);

enum ra_drop {
	RA_DROP_HELD,   /* held pieces nobody reads: another object, or a stopped series */
	/*
	 * Fetches nobody reads with more than a quarter to come: the client went
	 * elsewhere. One nearly in is let finish, so its warm connection stays;
	 * the others are ended with their connections.
	 */
	RA_DROP_FAR,
};
/* Drops the pieces under key that which names. */
void ra_store_drop(struct ra_store *st, const struct ra_key *key, enum ra_drop which);

/*
 * Was a piece under key refused since the last call (not the piece to
 * serve: another object, another range)? Its series should stop.
 */
bool ra_store_take_refusal(struct ra_store *st, const struct ra_key *key);

/* Does key hold the piece that starts range (NULL: the whole object), fetched or arriving? */
bool ra_store_has(const struct ra_store *st, const struct ra_key *key,
                  const struct byte_range *range);

/* Notes the round-trip time a client's own request for key came back over, if key holds pieces. */
void ra_store_note_rtt(struct ra_store *st, const struct ra_key *key, double rtt);
/* The path as the fetches under key found it (and the client's requests, its rtt). */
struct ra_path ra_store_path(const struct ra_store *st, const struct ra_key *key);

/* Drops the pieces that waited longer than --read-ahead-ttl; frees shelves empty and quiet that long. */
void ra_store_sweep(struct ra_store *st, ev_tstamp now);

/*
 * Pieces to keep in flight, at most most: the one the client reads now,
 * and enough more to hold a round trip's worth of the path (rtt x rate);
 * two until the path is known.
 */
unsigned ra_depth(const struct ra_path *path, uint64_t length, unsigned most);

#endif
