/*
 * Whether a request that failed on an upstream connection may be sent again
 * on a fresh one. Kept pure so the rule can be read, and tested, as a table.
 */
#ifndef KP_RETRY_H
#define KP_RETRY_H

#include <stdbool.h>
#include <stdint.h>

struct retry_facts {
	bool reused_connection;   /* it came from the pool, not from a new connect */
	bool response_started;    /* at least one response byte arrived */
	bool idempotent;          /* RFC 9110 9.2.2 */
	bool request_complete;    /* the whole request (head and body) was written */
	uint64_t body_bytes_sent; /* request body bytes already written (and gone) */
	unsigned retries;         /* times this request was already retried */
};

/*
 * Yes only for a pooled connection that died before answering (the classic
 * race with an origin's idle close), at most once, when the request can be
 * replayed whole and replaying it cannot do harm twice: it is idempotent, or
 * the origin cannot have acted on it because it never received all of it.
 */
bool retry_allowed(const struct retry_facts *f);

#endif
