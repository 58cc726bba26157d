/*
 * A listening socket's accepting, the same for the proxy's port and the
 * stats page's: a few accepts per readiness event, so a burst of connects
 * does not starve established clients; a peer outside --allow closed right
 * after accept, before it can hold a descriptor or a slot; no accepting
 * while the owner is at its cap (peers wait in the kernel's backlog); and,
 * when descriptors run out, a descriptor freed by the owner if it can, else
 * a pause, since a listening socket with a connection waiting stays
 * readable and watching it would spin.
 *
 * The owner keeps its own count of what it accepted and says whether there
 * is room; when a connection of its own closes, it calls listener_resume().
 */
#ifndef KP_LISTENER_H
#define KP_LISTENER_H

#include <stdbool.h>
#include <sys/socket.h>

#include <ev.h>

#include "kp/config.h"
#include "kp/log.h"

struct listener;

struct listener_ops {
	/* May one more connection be taken now? */
	bool (*has_room)(struct listener *l);
	/* A peer --allow lets in: fd (non-blocking, close-on-exec) is the owner's now. */
	void (*accepted)(struct listener *l, int fd, const struct sockaddr *peer);
	/*
	 * Descriptors ran out: free one if that is worth it (an idle pooled
	 * connection for a client), true when one was. NULL: never.
	 */
	bool (*free_descriptor)(struct listener *l);
};

struct listener {
	struct ev_loop *loop;
	const struct kp_config *cfg;      /* --allow */
	const struct listener_ops *ops;
	const char *what;                 /* the listener's name in log lines */
	int fd;                           /* -1: closed */
	ev_io io;
	ev_timer retry;                   /* accepting again after descriptors ran out */
	struct log_limit refused_log;
	struct log_limit short_log;       /* descriptors ran out */
	struct log_limit error_log;
};

/*
 * Takes fd (a listening socket) and starts accepting. what names the
 * listener in the log ("proxy", "stats page").
 */
void listener_start(struct listener *l, struct ev_loop *loop, int fd, const struct kp_config *cfg,
                    const struct listener_ops *ops, const char *what);
/* Room came back (a connection of the owner's closed): accepting goes on, if it had stopped. */
void listener_resume(struct listener *l);
/* Stops accepting and closes the socket; peers still in its backlog are refused by the kernel. */
void listener_close(struct listener *l);

#endif
