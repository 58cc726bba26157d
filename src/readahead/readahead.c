#include "kp/readahead.h"

#include <stdlib.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/ra_fetch.h"
#include "kp/ra_hls.h"
#include "kp/ra_range.h"
#include "kp/ra_split.h"
#include "kp/ra_store.h"

/* How often held pieces, series and playlists are looked at: a few times per TTL. */
#define SWEEPS_PER_TTL 4

struct readahead {
	const struct proxy_env *env;
	struct ra_fetcher *fetcher;      /* fetches into memory, for the store and split alike */
	struct ra_store *store;
	struct ra_range *ranges;
	struct ra_hls *hls;
	struct ra_split *split;          /* --split; NULL: none listed */
	bool predict;                    /* --read-ahead: the predictors run */
	struct clock_timer sweep;
	struct exchange_hooks hooks;
};

static struct ra_ask
ask_of(const struct exchange_view *v)
{
	struct ra_ask ask = {
		.client = v->client,
		.dispatch_key = v->key,
		.target = v->target,
		.https = v->https,
		.restricted = v->restricted,
	};

	return ask;
}

static struct source *
serve(void *ctx, const struct exchange_view *v, const struct http_head *h, const char *base)
{
	struct readahead *ra = ctx;
	struct ra_ask ask = ask_of(v);

	struct source *src = NULL;

	if (v->method != HTTP_GET)
		return NULL;
	/* A piece fetched ahead for exactly this request comes first; else it may be split. */
	if (ra->predict)
		src = ra_store_serve(ra->store, &ask, h, base);
	if (!src && ra->split)
		src = ra_split_serve(ra->split, &ask, h, base);
	return src;
}

/*
 * A client's GET was answered: the predictors see the request as the proxy
 * sent it and the response head; a playlist's body is read as it passes.
 */
static void *
heard(void *ctx, const struct exchange_view *v, const struct buf *req_head,
      const struct http_head *resp, const char *rbase, const struct conn *up)
{
	struct readahead *ra = ctx;
	struct ra_ask ask = ask_of(v);
	struct http_parser ps;
	struct http_head req;
	const char *base = NULL;
	double rtt = 0;

	if (v->method != HTTP_GET || !ra->predict)
		return NULL;
	/* No head kept (none was sent, or it is gone): nothing to predict from. */
	if (req_head) {
		base = buf_head((struct buf *)req_head);
		if (http_parse_held_head(HTTP_REQUEST, base, buf_len((struct buf *)req_head),
		                         ra->env->cfg->max_header_bytes, &ps, &req) &&
		    req.method == HTTP_GET && http_request_body_kind(&req) == BODY_NONE &&
		    !http_wants_upgrade(&req)) {
			rtt = conn_path_figures(up).rtt;
			ra_hls_heard(ra->hls, &ask, &req, base, resp, rbase, rtt);
			ra_range_heard(ra->ranges, &ask, &req, base, resp, rbase, rtt);
		} else {
			base = NULL;
		}
	}
	return ra_hls_open(ra->hls, &ask, base ? &req : NULL, base, resp, rbase);
}

static void
body(void *state, const char *p, size_t len)
{
	ra_hls_data(state, p, len);
}

static void
ended(void *state, const struct exchange_view *v, bool complete)
{
	struct ra_ask ask = ask_of(v);

	ra_hls_close(state, &ask, complete);
}

static void
sweep_cb(struct clock_timer *t)
{
	struct readahead *ra = container_of(t, struct readahead, sweep);
	ev_tstamp now = clock_now(ra->env->clock);

	ra_store_sweep(ra->store, now);
	ra_range_sweep(ra->ranges, now);
	ra_hls_sweep(ra->hls, now);
	clock_timer_start(t, ra->env->cfg->read_ahead_ttl / SWEEPS_PER_TTL);
}

struct readahead *
readahead_new(const struct proxy_env *env)
{
	struct readahead *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return NULL;
	ra->env = env;
	clock_timer_init(&ra->sweep, env->clock, sweep_cb);
	ra->predict = env->cfg->read_ahead;
	if (!(ra->fetcher = ra_fetcher_new(env)) || !(ra->store = ra_store_new(env, ra->fetcher)) ||
	    !(ra->ranges = ra_range_new(env, ra->store, ra->fetcher)) ||
	    !(ra->hls = ra_hls_new(env, ra->store, ra->fetcher)) ||
	    (env->cfg->nsplit && !(ra->split = ra_split_new(env, ra->fetcher)))) {
		readahead_free(ra);
		return NULL;
	}
	ra->hooks = (struct exchange_hooks){
		.ctx = ra, .serve = serve, .heard = heard, .body = body, .ended = ended,
	};
	clock_timer_start(&ra->sweep, env->cfg->read_ahead_ttl / SWEEPS_PER_TTL);
	return ra;
}

void
readahead_free(struct readahead *ra)
{
	if (!ra)
		return;
	clock_timer_stop(&ra->sweep);
	ra_split_free(ra->split);
	ra_hls_free(ra->hls);
	ra_range_free(ra->ranges);
	ra_store_free(ra->store);
	ra_fetcher_free(ra->fetcher);
	free(ra);
}

unsigned long
readahead_take_freed(struct readahead *ra)
{
	return ra ? ra_fetcher_take_freed(ra->fetcher) : 0;
}

const struct exchange_hooks *
readahead_hooks(const struct readahead *ra)
{
	return &ra->hooks;
}
