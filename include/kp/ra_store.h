/*
 * Read-ahead's store: the responses the proxy fetched ahead of its clients,
 * held in memory under the key of the client they were fetched for, each
 * client's share of --read-ahead-memory, their life from the fetch to the
 * last reader, serving them to the client that asks, and sweeping what
 * nobody asked for. What to fetch is the predictors' business (ra_range.h,
 * ra_hls.h); they ask the store, and the store never calls them.
 *
 * The words read-ahead uses, and no others:
 *
 *   piece   one response fetched (or being fetched) ahead of a client and
 *           held in memory: a byte range of an object, or a whole object
 *           (an HLS segment). A piece is *dropped*, the one way a piece
 *           ends: it is freed at the end of the loop iteration, once no
 *           client reads it, and what of it no client was given counts as
 *           wasted.
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
 *   share   a client's part of --read-ahead-memory: at most half of it.
 *   reader  a client being served from a piece.
 *
 * A piece is served only to its key, only if it is exactly what is asked
 * (a 206 whose Content-Range starts where the request does, of the object
 * its series expected; or a whole object's 200), neither private nor
 * no-store, and varying on nothing the client's request does not share
 * with the proxy's. Anything else is refused before its first byte: the
 * client's request goes to the origin as if nothing had been held.
 *
 * Bounded: --read-ahead-memory in all and half of it per client (a fetch
 * that would pass either is not made, and counted as throttled), and a held
 * piece nobody asked for within --read-ahead-ttl seconds is dropped
 * (counted as wasted). A piece being fetched or read is never freed. What a
 * client's requests make read-ahead keep besides pieces (a shelf, a series,
 * a playlist being read or held) counts in the same share and the same
 * total (ra_store_charge), so no client can make it hold more by asking for
 * many URLs or long ones.
 */
#ifndef KP_RA_STORE_H
#define KP_RA_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ev.h>

#include "kp/buf.h"
#include "kp/config.h"
#include "kp/env.h"
#include "kp/http.h"
#include "kp/ra_key.h"
#include "kp/ranges.h"
#include "kp/source.h"

struct ra_store;
struct ra_piece;

/* What the kernel and the fetches found of the path from this host to an origin. */
struct ra_path {
	double rtt;    /* seconds; 0: not known */
	double rate;   /* bytes per second, the fastest a piece arrived at; 0: not known */
};

/* A fetch a predictor asks for. */
struct ra_fetch {
	const struct ra_ask *ask;          /* the client it is for */
	const struct ra_key *key;          /* what it is held under */
	struct buf *request;               /* the head to send; the store takes it either way */
	struct byte_range range;           /* of the object; unused for a whole one */
	bool whole;                        /* the whole object, asked without Range */
	bool to_end;                       /* range ends at the object's last byte */
	uint64_t expect;                   /* body bytes it should bring; 0: not known */
	size_t charge;                     /* the most memory it may take; 0: never fetched */
	/*
	 * A client waits for it: it may take a connection of its own, as the
	 * client's request would. Otherwise it comes after every client
	 * request, on a pooled or freed connection, or pipelined.
	 */
	bool may_connect;
	/* Seconds without a byte before the fetch fails (exchange_owner.stall_timeout); 0: none. */
	double stall;
	/* The object the piece must be of (a range's series knows it); NULL: any. */
	const struct object_identity *identity;
	const char *identity_base;
};

/*
 * Writes f->request, from a buffer of its own: the head req (spans into
 * base) as edit changes it. False, with nothing kept, when there is no
 * buffer or the head does not fit one.
 */
bool ra_fetch_request(struct ra_fetch *f, const struct http_head *req, const char *base,
                      const struct http_head_edit *edit);

/*
 * Memory a piece may take: its body and its head. For a range of length
 * bytes, that; for a whole object after one of length bytes (0: not
 * known), half again as much, as the objects a player asks for in turn are
 * of about one length (past it the fetch fails and the client asks the
 * origin). 0, never fetched, past half of --read-ahead-memory, which also
 * keeps every sum from wrapping.
 */
size_t ra_charge_range(const struct kp_config *cfg, uint64_t length);
size_t ra_charge_whole(const struct kp_config *cfg, uint64_t length);

/*
 * What a piece keeps beside the memory its answer may take (the
 * ra_charge_* figure): its record and the request_len bytes of the request
 * it sent, which are counted in the share too.
 */
size_t ra_piece_footprint(size_t request_len);

/* NULL when memory is exhausted. */
struct ra_store *ra_store_new(const struct proxy_env *env);
/* Ends every fetch and frees every piece. */
void ra_store_free(struct ra_store *st);

/*
 * Starts the fetch f asks for, unless the key holds that piece already
 * (true, nothing new). False when it was not made: past a share or the
 * memory in all (counted as throttled), or out of memory.
 */
bool ra_store_fetch(struct ra_store *st, const struct ra_fetch *f);

/*
 * A piece fetched for an owner (a split download, ra_split.h) rather than
 * held for read-ahead's serving: never served or swept here, it is the
 * owner's until it drops it. on_end(arg, p) hears when its fetch ended,
 * whole or not, except when that happens at once (see ra_piece_ended).
 * NULL when it was not made (a share or the memory in all is full).
 */
struct ra_piece *ra_store_fetch_owned(struct ra_store *st, const struct ra_fetch *f,
                                      void (*on_end)(void *arg, struct ra_piece *p), void *arg);
/* Where an owned piece's response is arriving, or held. */
struct memstore *ra_piece_memory(struct ra_piece *p);
/* Has its fetch ended, whole (the memory ended) or not (it failed)? */
bool ra_piece_ended(const struct ra_piece *p);
/* A client waits for it now: no longer behind other clients' requests. */
void ra_piece_promote(struct ra_piece *p);
/*
 * The owner is done with it (served: the body bytes its client was given):
 * a fetch still going ends with its connection, and the piece is dropped.
 */
void ra_piece_drop(struct ra_piece *p, uint64_t served);

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

/*
 * Memory read-ahead keeps for key's client besides pieces (a series, a
 * playlist being read or held), counted in the client's share and the
 * total as a piece's is. False, with nothing counted, when it does not fit
 * (counted as throttled): the caller keeps nothing.
 */
bool ra_store_charge(struct ra_store *st, const struct ra_key *key, size_t bytes);
/* Gives back bytes that ra_store_charge counted for key's client. */
void ra_store_discharge(struct ra_store *st, const struct ra_key *key, size_t bytes);

/* Notes the round-trip time a client's own request for key came back over, if key holds pieces. */
void ra_store_note_rtt(struct ra_store *st, const struct ra_key *key, double rtt);
/* The path as the fetches under key found it (and the client's requests, its rtt). */
struct ra_path ra_store_path(const struct ra_store *st, const struct ra_key *key);
/* The path as every fetch for key's client found it. */
struct ra_path ra_store_client_path(const struct ra_store *st, const struct ra_key *key);

/* Drops the pieces that waited longer than --read-ahead-ttl; frees shelves empty and quiet that long. */
void ra_store_sweep(struct ra_store *st, ev_tstamp now);
/*
 * How many things counted in the shares (pieces, shelves, series,
 * playlists) were let go since the last call: worth giving the heap back
 * to the system for.
 */
unsigned long ra_store_take_freed(struct ra_store *st);

/*
 * Pieces to keep in flight, at most most: the one the client reads now,
 * and enough more to hold a round trip's worth of the path (rtt x rate);
 * two until the path is known.
 */
unsigned ra_depth(const struct ra_path *path, uint64_t length, unsigned most);

#endif
