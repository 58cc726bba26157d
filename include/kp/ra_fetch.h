/*
 * Fetches into memory: the engine read-ahead's store (ra_store.h) and
 * split downloads (ra_split.h) both run on. A fetch is a request of the
 * proxy's own, made through an exchange (exchange.h) whose downstream end
 * is memory (memconn.h), so its answer arrives into a store that readers
 * may join while it arrives. Its owner hears when its head came and when
 * it ended, and why, and lets it go when done; nothing else of the owner's
 * is the engine's business: which piece a client gets, what is predicted,
 * how a download goes on.
 *
 * The engine keeps the memory every fetch may take, and what owners keep
 * about their fetches (records: a shelf, a series, a playlist), in one
 * bound, --fetch-memory, at most half of it per client address (its
 * share): a fetch or a record that would pass either is not made. A fetch
 * is counted the memory its answer may take (ra_charge_range,
 * ra_charge_whole) and its footprint (its record and its request), from
 * its start until its owner lets it go. It also times each fetch, so that
 * owners know how fast a client's path is.
 *
 * The words: a *piece* is one fetch and the answer it brings into
 * memory; its owner *drops* it, the one way a piece ends: a fetch still
 * going ends with its connection, and the memory is freed at the end of
 * the loop iteration, when nobody up the stack can hold it any more.
 */
#ifndef KP_RA_FETCH_H
#define KP_RA_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp/buf.h"
#include "kp/config.h"
#include "kp/env.h"
#include "kp/http.h"
#include "kp/memconn.h"
#include "kp/ra_key.h"
#include "kp/ranges.h"

struct ra_fetcher;
struct ra_piece;

/* What the kernel and the fetches found of the path from this host to an origin. */
struct ra_path {
	double rtt;    /* seconds; 0: not known */
	double rate;   /* bytes per second, the fastest a piece arrived at; 0: not known */
};

/* Why a fetch ended. */
enum ra_fetch_end {
	RA_FETCH_WHOLE,          /* the answer is all in memory, of the status asked */
	RA_FETCH_NO_ANSWER,      /* the proxy answered instead: no connection, a refusal, a timeout */
	RA_FETCH_NOT_AS_ASKED,   /* the origin answered another status than a 206 (range) or 200 */
	RA_FETCH_CUT,            /* the answer stopped short: closed, reset, stalled */
};

/* What a piece's owner hears. Either may be NULL. */
struct ra_piece_owner {
	/* Its head came, over a path whose round trip was rtt seconds (0: not known). */
	void (*heard)(void *arg, struct ra_piece *p, double rtt);
	/*
	 * Its fetch ended, and why. Not called when that happens within
	 * ra_fetch_start() (ra_piece_ended() says so then), nor after the
	 * owner dropped it.
	 */
	void (*ended)(void *arg, struct ra_piece *p, enum ra_fetch_end why);
};

/* A fetch an owner asks for. */
struct ra_fetch {
	const struct ra_ask *ask;          /* the client it is for, whose share it counts in */
	struct buf *request;               /* the head to send; the engine takes it either way */
	struct byte_range range;           /* of the object; unused for a whole one */
	bool whole;                        /* the whole object, asked without Range: a 200 */
	uint64_t expect;                   /* body bytes it should bring; 0: not known */
	size_t charge;                     /* the most memory its answer may take; 0: never fetched */
	/*
	 * A client waits for it: it may take a connection of its own, as the
	 * client's request would. Otherwise it comes after every client
	 * request, on a pooled or freed connection, or pipelined.
	 */
	bool may_connect;
	/* Seconds without a byte before the fetch fails (exchange_owner.stall_timeout); 0: none. */
	double stall;
	const struct ra_piece_owner *owner;
	void *owner_arg;
};

/*
 * Writes f->request, from a buffer of its own: the head req (spans into
 * base) as edit changes it. False, with nothing kept, when there is no
 * buffer or the head does not fit one.
 */
bool ra_fetch_request(struct ra_fetch *f, const struct http_head *req, const char *base,
                      const struct http_head_edit *edit);

/*
 * Memory a piece's answer may take: its body and its head. For a range of
 * length bytes, that; for a whole object after one of length bytes (0: not
 * known), half again as much, as the objects a player asks for in turn are
 * of about one length (past it the fetch fails and the client asks the
 * origin). 0, never fetched, past half of --fetch-memory, which also keeps
 * every sum from wrapping.
 */
size_t ra_charge_range(const struct kp_config *cfg, uint64_t length);
size_t ra_charge_whole(const struct kp_config *cfg, uint64_t length);
/*
 * What a piece keeps beside the memory its answer may take: its record and
 * the request_len bytes of the request it sent, counted in the share too.
 */
size_t ra_piece_footprint(size_t request_len);

/* NULL when memory is exhausted. */
struct ra_fetcher *ra_fetcher_new(const struct proxy_env *env);
/* Frees what is left; every owner must have let go of its pieces and records. */
void ra_fetcher_free(struct ra_fetcher *fe);

/* Why a fetch was not started. */
enum ra_fetch_start {
	RA_FETCH_STARTED,
	RA_FETCH_NO_ROOM,        /* past the client's share or the memory in all, or charge 0 */
	RA_FETCH_NO_MEMORY,      /* an allocation failed */
};

/*
 * Starts the fetch f asks for: the piece, or NULL with *why (may be NULL)
 * saying why not. A fetch that fails at once (a head too large, a request
 * dispatch refuses or cannot write whole before this returns) is a piece
 * that has ended (ra_piece_ended) and whose owner is not told.
 */
struct ra_piece *ra_fetch_start(struct ra_fetcher *fe, const struct ra_fetch *f,
                                enum ra_fetch_start *why);

/* Where its answer is arriving, or held. */
struct memstore *ra_piece_memory(struct ra_piece *p);
/* Has its fetch ended (whole or not)? And, if so, did it bring its answer whole? */
bool ra_piece_ended(const struct ra_piece *p);
bool ra_piece_whole(const struct ra_piece *p);
/* The request it sent, for comparing with a client's (len bytes at the pointer). */
const char *ra_piece_request(const struct ra_piece *p, size_t *len);
/* Body bytes of its answer still to come, about (the head counted as body); 0 once it ended. */
uint64_t ra_piece_left(const struct ra_piece *p);
/* Body bytes of its answer in memory: 0 until its head is whole. */
uint64_t ra_piece_body(const struct ra_piece *p);
/* The rate its body arrived at, head to end, in bytes per second; 0: not known (yet). */
double ra_piece_rate(const struct ra_piece *p);
/* A client waits for it now: no longer behind other clients' requests. */
void ra_piece_promote(struct ra_piece *p);
/*
 * The owner is done with it: a fetch still going ends with its connection,
 * and it is freed at the end of this loop iteration, its memory counted
 * until then. Its owner is told nothing more.
 */
void ra_piece_drop(struct ra_piece *p);
/*
 * The same, for an owner about to ask its next piece in the same breath
 * (the rest of a broken one, the next of a series): the memory stops
 * counting now, so that the next piece fits where this one was. For the
 * rest of the iteration the memory holds one piece more than it counts.
 */
void ra_piece_drop_for_next(struct ra_piece *p);

/*
 * Records an owner keeps about fetches for key's client (a shelf, a
 * series, a playlist being read or held): counted in the client's share
 * and the total as a piece is. False, with nothing counted, when they do
 * not fit: the caller keeps nothing.
 */
bool ra_memory_charge(struct ra_fetcher *fe, const struct ra_key *key, size_t bytes);
/* Gives back bytes ra_memory_charge counted for key's client. */
void ra_memory_discharge(struct ra_fetcher *fe, const struct ra_key *key, size_t bytes);
/* Would a fetch, or records, of bytes fit key's client's share and the total now? */
bool ra_memory_fits(const struct ra_fetcher *fe, const struct ra_key *key, size_t bytes);
/* The path as every fetch for key's client found it. */
struct ra_path ra_memory_client_path(const struct ra_fetcher *fe, const struct ra_key *key);
/*
 * How many things counted in the shares (pieces and records) were let go
 * since the last call: worth giving the heap back to the system for.
 */
unsigned long ra_fetcher_take_freed(struct ra_fetcher *fe);

#endif
