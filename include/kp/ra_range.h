/*
 * Read-ahead's byte-range predictor: after a client got a 206 for one range
 * of an object, the ranges that follow are the series it will ask for
 * next, and the store (ra_store.h, whose glossary this file speaks) is
 * asked to fetch them, as many as the path needs in flight.
 *
 * A series is one client's reading of one object at one URL (its key). It
 * remembers what the client was given: the object's identity (ETag,
 * Last-Modified, length), the lengths of its pieces, whether they were all
 * of one length. The next piece starts right after the one answered;
 * pieces beyond it are predicted only while every length was the same
 * (a client that varies its lengths starts its next request where its
 * last one really ended). Another object at the URL starts the series
 * afresh; a piece the store refused stops it.
 */
#ifndef KP_RA_RANGE_H
#define KP_RA_RANGE_H

#include <ev.h>

#include "kp/http.h"
#include "kp/ra_store.h"

struct ra_range;

/* NULL when memory is exhausted. */
struct ra_range *ra_range_new(const struct proxy_env *env, struct ra_store *st,
                              struct ra_fetcher *fe);
void ra_range_free(struct ra_range *r);

/*
 * The final response resp (spans into rbase) answered the client's GET
 * req (spans into base), which the proxy sent over a connection whose
 * round trip was rtt seconds (0: not known, or from memory): if it is a
 * 206 for one range, the series goes on.
 */
void ra_range_heard(struct ra_range *r, const struct ra_ask *ask, const struct http_head *req,
                    const char *base, const struct http_head *resp, const char *rbase,
                    double rtt);

/* Stops the series quiet for longer than --read-ahead-ttl (their state is freed). */
void ra_range_sweep(struct ra_range *r, ev_tstamp now);

#endif
