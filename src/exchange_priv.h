/*
 * What the exchange's own two files share, and nobody else includes:
 * exchange.c (its life, deadlines, the request, tunnels, replays) and
 * exchange_response.c (the response, from its head to its end). Both
 * touch priv; the owner never does.
 */
#ifndef KP_EXCHANGE_PRIV_H
#define KP_EXCHANGE_PRIV_H

#include <stdbool.h>

#include "kp/exchange.h"

/* Can b take more bytes (no buffer yet counts as room)? */
static inline bool
has_room(const struct buf *b)
{
	return !b || buf_len(b) < buf_capacity();
}

/* Bytes moved: the deadline counts from now (the timer finds out when it fires). */
static inline void
progress(struct exchange *ex)
{
	ex->priv.last_activity = clock_now(ex->priv.env->clock);
}

/* The hook's view of the request in hand. */
static inline struct exchange_view
view_of(const struct exchange *ex)
{
	struct exchange_view v = {
		.client = ex->owner.peer,
		.key = ex->priv.key,
		.target = &ex->target,
		.method = ex->priv.method,
		.https = ex->owner.https,
		.restricted = ex->owner.restricted,
	};

	return v;
}

/* The hooks, for an exchange of a client's that has a peer to show them; else NULL. */
static inline const struct exchange_hooks *
hooks_of(const struct exchange *ex)
{
	return ex->priv.to_memory || !ex->owner.peer ? NULL : ex->priv.env->hooks;
}

/* ---- exchange.c ----------------------------------------------------------- */

/* Another kind of wait began: its own timeout, from now. */
void rearm(struct exchange *ex);
/* The response the hook watched ended, whole or not. */
void end_hook(struct exchange *ex, bool complete);
/* CONNECT connected, or a 101 came: from here on bytes pass raw both ways. */
void begin_tunnel(struct exchange *ex);
/* The source ended before answering: ask again elsewhere when that is safe, else 502. */
void source_lost(struct exchange *ex, const char *why);

/* ---- exchange_response.c -------------------------------------------------- */

/* Is there somewhere to put more response bytes from the source? */
bool response_can_pull(const struct exchange *ex);
/* Moves what can move of the response towards the asker. -1: the exchange ended. */
int pump_response(struct exchange *ex);
/* The response is complete: counted, its source given back, its owner told. */
void finish(struct exchange *ex);

#endif
