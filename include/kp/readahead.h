/*
 * Read-ahead (--read-ahead): after a client got one piece of what it
 * downloads, the proxy fetches what it will ask for next, as requests of
 * its own (dispatch's background class, so no client request ever waits
 * for them), and keeps the responses in memory; when the client asks, it
 * is served from memory, or joins the fetch still arriving. The origin sees
 * each piece once, and the client no longer pays a round trip and the
 * origin's slow start after idle for it.
 *
 * This file pair is the seam: read-ahead plugs into every client exchange
 * through the exchange's hooks (exchange.h), and neither the exchange nor
 * the client names it. Behind the seam: the store of pieces (ra_store.h,
 * whose header has read-ahead's glossary), the byte-range predictor
 * (ra_range.h), the HLS and CMCD predictor (ra_hls.h), and the splitting of
 * big downloads (--split, ra_split.h), which shares the store.
 */
#ifndef KP_READAHEAD_H
#define KP_READAHEAD_H

#include "kp/env.h"
#include "kp/exchange.h"

struct readahead;

/* NULL when memory is exhausted. */
struct readahead *readahead_new(const struct proxy_env *env);
/* Ends every fetch and frees what is held. */
void readahead_free(struct readahead *ra);

/*
 * Records read-ahead let go since the last call (ra NULL: none): the
 * server's trim gives the heap back to the system when there are any.
 */
unsigned long readahead_take_freed(struct readahead *ra);

/* The hooks to put in the env for client exchanges; valid as long as ra. */
const struct exchange_hooks *readahead_hooks(const struct readahead *ra);

#endif
