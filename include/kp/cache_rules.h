/*
 * May an answer serve more than the client that asked for it? The rules of
 * a shared cache (RFC 9111), read from the request and response heads and
 * nothing else: whether the answer may be kept for others, for how long it
 * is fresh, and how old it already was on arrival. Stricter than the RFC
 * where a router shared by a household needs it: an answer that sets a
 * cookie is never shared, nor one with a "private" naming fields, nor one
 * that must be revalidated before each use (no-cache), since nothing here
 * revalidates.
 */
#ifndef KP_CACHE_RULES_H
#define KP_CACHE_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "kp/http.h"

/* A Cache-Control's directives, from every field line of it. */
struct cache_control {
	bool no_store, no_cache, private_, public_, must_revalidate, proxy_revalidate;
	bool only_if_cached;       /* requests: answer from what is held, or 504 */
	/*
	 * Seconds; -1 when absent. A directive given twice with different
	 * values, or with a value that is not delta-seconds, is CACHE_STALE: the
	 * RFC lets a cache take such an answer as stale (9111 4.2.1).
	 */
	int64_t max_age, s_maxage, min_fresh, max_stale;
	bool conflicting;
};

/* Reads every Cache-Control field line of h (and Pragma: no-cache, 9111 5.4). */
void cache_control_read(const struct http_head *h, const char *base, struct cache_control *cc);

/* Why an answer may not be held for others, or CACHE_SHAREABLE. */
enum cache_verdict {
	CACHE_SHAREABLE,
	CACHE_METHOD,          /* not a GET */
	CACHE_STATUS,          /* a status no cache keeps without being told it may */
	CACHE_NO_STORE,        /* no-store, in the request or the answer */
	CACHE_PRIVATE,         /* private: for one user's cache only */
	CACHE_NO_CACHE,        /* no-cache: only after asking the origin again */
	CACHE_AUTHORIZATION,   /* asked with credentials, not marked shareable (9111 3.5) */
	CACHE_SET_COOKIE,      /* sets a cookie: one client's state */
	CACHE_VARY_ANY,        /* Vary: *: no two requests ever match */
	CACHE_NO_LIFETIME,     /* neither a lifetime given nor one a cache may guess */
	CACHE_STALE,           /* its lifetime was over on arrival */
	CACHE_VERDICTS
};

const char *cache_verdict_name(enum cache_verdict v);

/* How long an answer is fresh and how old it was when it arrived, in seconds. */
struct cache_life {
	int64_t lifetime;
	int64_t initial_age;
	bool heuristic;        /* guessed from Last-Modified (9111 4.2.2) */
};

/*
 * Judges the answer resp (spans into rbase) to the request req (into
 * qbase), asked at request_time and arrived at response_time (seconds
 * since 1970). CACHE_SHAREABLE fills *life.
 */
enum cache_verdict cache_judge(const struct http_head *req, const char *qbase,
                               const struct http_head *resp, const char *rbase,
                               int64_t request_time, int64_t response_time,
                               struct cache_life *life);

/* Is an answer with life, held since it arrived at response_time, still fresh at now? */
bool cache_fresh(const struct cache_life *life, int64_t response_time, int64_t now);

/*
 * May that answer serve the request req (spans into qbase) at now? Only
 * while fresh (nothing stale is served, whatever max-stale allows), and
 * not when the request asks for the origin's word (no-cache, or Pragma:
 * no-cache alone), for an answer younger than it is (max-age), or for one
 * that stays fresh longer than it will (min-fresh).
 */
bool cache_serves(const struct http_head *req, const char *qbase, const struct cache_life *life,
                  int64_t response_time, int64_t now);

#endif
