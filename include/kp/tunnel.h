/*
 * A two-way byte relay between a client and an origin, for CONNECT and for
 * protocol upgrades: no parsing, just movers, one per direction, between two
 * connection ends. Two plain sockets are spliced; a TLS end (an upgrade
 * inside an intercepted connection) or --no-splice makes both directions
 * copy through the ends' own operations. An EOF read on one side becomes a
 * half-close of the other (close_notify first on TLS) once the bytes before
 * it are delivered; the tunnel is over when both directions are.
 */
#ifndef KP_TUNNEL_H
#define KP_TUNNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kp/conn.h"
#include "kp/splice.h"

enum tunnel_dir_state {
	TUNNEL_FLOWING,   /* the source may send more */
	TUNNEL_DRAINING,  /* the source sent EOF; deliver what is held, then shut down */
	TUNNEL_SHUT,      /* the destination's write side is shut: this direction is done */
};

struct tunnel_dir {
	struct mover mover;
	enum tunnel_dir_state state;
	uint64_t bytes;   /* delivered to the destination */
};

struct tunnel {
	struct tunnel_dir to_origin;
	struct tunnel_dir to_client;
};

enum tunnel_status {
	TUNNEL_OPEN,
	TUNNEL_FINISHED,  /* both directions shut cleanly */
	TUNNEL_FAILED,    /* an error on either side: close both */
};

/* copy: move through user space (no splice, or an end that cannot). */
void tunnel_init(struct tunnel *t, bool copy);
void tunnel_release(struct tunnel *t);

/*
 * Moves what can move now, a bounded amount per call so one busy tunnel does
 * not starve other connections (level-triggered watchers bring us back).
 * *moved tells whether anything happened, for idle timeouts.
 */
enum tunnel_status tunnel_pump(struct tunnel *t, struct conn *client, struct conn *origin,
                               uint64_t *moved);

struct tunnel_interest {
	bool client_read, client_write, origin_read, origin_write;
};

/* Which readiness the tunnel waits for now. */
struct tunnel_interest tunnel_wants(const struct tunnel *t);

#endif
