/*
 * The descriptor budget: how many file descriptors the process may hold
 * and who holds them, so that idle pooled connections (the one use that
 * can give way) never take what a client or a busy exchange needs. Each
 * count is kept by the module that owns the descriptors: clients by the
 * server, pipes by splice, idle connections by dispatch. The statistics
 * counters only report; they never steer.
 */
#ifndef KP_BUDGET_H
#define KP_BUDGET_H

#include <stddef.h>

struct fd_budget {
	unsigned long limit;   /* RLIMIT_NOFILE in force */
	unsigned reserved;     /* kept back: listeners, loop, resolver, stdio, logs */
	unsigned clients;      /* connected clients (the server's count) */
	unsigned pipes;        /* splice pipes open, in use or spare (splice's count) */
	unsigned idle;         /* idle pooled upstream connections (dispatch's count) */
};

/*
 * How many idle pooled connections fit beside everything else: each
 * client may need a second descriptor for its exchange, each pipe two.
 */
static inline size_t
fd_budget_idle_room(const struct fd_budget *b)
{
	unsigned long taken = b->reserved + 2ul * b->clients + 2ul * b->pipes;

	return b->limit > taken ? (size_t)(b->limit - taken) : 0;
}

#endif
