/*
 * Splitting big downloads (--split): a GET for a large object from a listed
 * host is fetched as bounded ranges of --split-size, ahead of the client,
 * through the pool and into memory by the fetch engine (ra_fetch.h, whose
 * glossary this file speaks: each range is a piece), and the client gets one continuous answer of its own: a 200 with the
 * complete length for a request without Range, a 206 for its range. Origins
 * that pace an answer without a bounded Range (large video origins do, to
 * about the media's rate) then serve at full speed; a connection that
 * breaks in the middle of a piece is resumed from the next byte, with
 * If-Range, on another; and up to --split-connections connections work on
 * one download at once.
 *
 * Only where it is safe. The first piece is asked with a bounded Range; the
 * download is split only when it comes back a 206 with a complete length,
 * a validator If-Range may carry (ranges_if_range), no Content-Encoding
 * but identity and no transfer coding but chunked (plan.h refuses those to
 * memory), without Cache-Control: no-transform. Anything else (a 200:
 * no ranges; an error; a HEAD, a conditional request, a body) is answered
 * by the origin itself, as it would be without the proxy: the piece fails
 * before the client's first byte and the request goes to the origin. Every
 * later piece carries If-Range and must come back as asked, of the same
 * version; if one does not, the client's connection is closed at that byte,
 * as a broken origin would leave it, and never gets bytes of two versions.
 *
 * More than one connection is opt-in (--split-connections) and backs off:
 * a 401, 403, 429 or 503 to any piece, the first included, while more than
 * one is in use drops the host to one connection for ten minutes, closes
 * its other connections (dispatch_shrink_host), and asks the piece again on
 * the one left; only if that fails too does the client see anything of it.
 * A piece's fetch that stalls is given up well inside the client's own
 * deadline and resumed. What a host does with ranges is remembered per URL,
 * and host-wide only once several of its URLs agree.
 */
#ifndef KP_RA_SPLIT_H
#define KP_RA_SPLIT_H

#include <stdbool.h>

#include <ev.h>

#include "kp/http.h"
#include "kp/ra_fetch.h"
#include "kp/ra_key.h"
#include "kp/source.h"

struct ra_split;

/* Downloads fetch their pieces with fe, in their clients' shares. NULL when memory is exhausted. */
struct ra_split *ra_split_new(const struct proxy_env *env, struct ra_fetcher *fe);
/*
 * Frees what it keeps of origins. Every download has ended before: each
 * is its client's source, and ends with the client's exchange.
 */
void ra_split_free(struct ra_split *sp);

/*
 * A source for the client's request whose head is h (spans into base), if
 * it is one to split: a GET without a body or precondition, to a listed
 * host, for the whole object, an open range, or a bounded one longer than a
 * piece (--split-size).
 * NULL: forward it as it is.
 */
struct source *ra_split_serve(struct ra_split *sp, const struct ra_ask *ask,
                              const struct http_head *h, const char *base);

#endif
