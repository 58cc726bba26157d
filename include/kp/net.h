/*
 * Thin socket helpers. They never log: they return -1 with errno set and the
 * caller decides whether the failure is worth a line.
 */
#ifndef KP_NET_H
#define KP_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "kp/config.h"

/* An IPv4 or IPv6 socket address, with room for either. */
union net_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/*
 * host as an IPv4 or IPv6 literal ("10.0.0.5", "::1"), port 0: false for
 * a name or anything else, with *a zeroed.
 */
bool net_literal(const char *host, union net_addr *a);

enum net_role {
	NET_LISTENER,   /* the proxy's listening socket */
	NET_CLIENT,     /* an accepted client connection */
	NET_UPSTREAM,   /* a connection to an origin, tuned before connect() */
};

/*
 * Applies every socket option the config asks for on a socket of that role:
 * one place, one error exit. On failure *failed (if given) names the option.
 */
int net_tune(int fd, enum net_role role, const struct kp_config *cfg, const char **failed);

/* A non-blocking listening socket on a numeric address. */
int net_listen(const char *addr, unsigned port, int backlog, const struct kp_config *cfg);

/* Starts a non-blocking, tuned connect; the fd is returned while it is in progress. */
int net_connect_start(const struct sockaddr *sa, socklen_t len, const struct kp_config *cfg);
/* 0 when an in-progress connect succeeded, else -1 with errno the reason. */
int net_connect_finish(int fd);


/*
 * Is an idle connection still usable? A non-blocking peek sees EOF, a reset
 * or unsolicited bytes (an origin's late 408, say): all mean "do not reuse".
 */
bool net_idle_alive(int fd);

/* "1.2.3.4:80" or "[::1]:80" into buf; returns buf. */
const char *net_addr_text(const struct sockaddr *sa, char *buf, size_t len);

/* Did the last socket call fail only because it would have had to wait? */
bool net_would_block(void);

/* Closes *fd once and marks it closed. */
void net_close(int *fd);

#endif
