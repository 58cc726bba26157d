/*
 * What to do with a response, decided apart from relaying it: a pure
 * function of what the request was and of the response head, so the rules
 * (which responses are passed on, how the body is framed for the one who
 * asked, whether either connection stays open) read as one table and are
 * tested as one.
 *
 * The one who asked is a client speaking its own HTTP/1.x dialect, or memory
 * (memconn.h), which keeps every response in one canonical form: HTTP/1.1,
 * no interim responses, no Via of ours (whoever reads it later adds one),
 * the body with its length or de-chunked up to the end of what is stored.
 */
#ifndef KP_PLAN_H
#define KP_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "kp/framing.h"
#include "kp/http.h"

/* What the exchange knows of the request when a response head arrives. */
struct plan_request {
	uint8_t method;           /* llhttp_method_t */
	uint8_t minor;            /* the asker's HTTP/1.x minor version */
	bool keep_alive;          /* the asker may send another request after this one (its head
	                           * said so and it has not ended its side) */
	bool upgrade;             /* the request asked the origin to switch protocols */
	bool request_sent;        /* every byte of the request went to the origin */
	bool canonical;           /* the asker is memory, not a client */
	bool draining;            /* the daemon is stopping: no further request will be read */
};

enum plan_action {
	PLAN_FINAL,               /* forward the head, then the body */
	PLAN_INTERIM,             /* a 1xx passed on; the final response follows */
	PLAN_INTERIM_DROPPED,     /* a 1xx the asker cannot use (HTTP/1.0, memory) */
	PLAN_SWITCH,              /* a 101 it asked for: the head, then a tunnel */
	PLAN_REFUSE,              /* not to be passed on: answer 502 instead (why) */
};

struct plan {
	enum plan_action action;
	const char *why;          /* PLAN_REFUSE: the 502's text */
	enum body_kind body;      /* how the response body is delimited on the origin's side */
	bool upstream_reusable;   /* the origin's connection may carry another request after it */
	/* How the head is written for the asker (http_write_response_head). */
	struct response_plan write;
};

struct plan plan_response(const struct plan_request *req, const struct http_head *resp);

/*
 * Whether the asker's connection stays open after a response framed so that
 * it can tell where the response ends (framed) — relayed or the proxy's own:
 * only if it asked for that and the daemon is not stopping.
 */
static inline bool
plan_keeps_asker(const struct plan_request *req, bool framed)
{
	return req->keep_alive && framed && !req->draining;
}

#endif
