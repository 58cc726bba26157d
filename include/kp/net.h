/*
 * Thin socket helpers. They never log: they return -1 with errno set and the
 * caller decides whether the failure is worth a line.
 */
#ifndef KP_NET_H
#define KP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "kp/config.h"

/* A non-blocking listening socket on a numeric address. */
int net_listen(const char *addr, unsigned port, int backlog);

/* Starts a non-blocking connect; the fd is returned while it is in progress. */
int net_connect_start(const struct sockaddr *sa, socklen_t len);
/* 0 when an in-progress connect succeeded, else -1 with errno the reason. */
int net_connect_finish(int fd);

/* Applies every socket option the config asks for; one place, one error exit. */
int net_tune_client(int fd, const struct kp_config *cfg);
int net_tune_upstream(int fd, const struct kp_config *cfg);

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
