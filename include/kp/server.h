/*
 * The daemon's shared state: the loop, the config, the listening socket, the
 * pool and dispatch queues, the live clients and upstream connections, and the objects closed during this loop iteration
 * that are freed once every callback of the iteration has returned.
 */
#ifndef KP_SERVER_H
#define KP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>

#include "kp/cidr.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/stats_page.h"

struct auth;
struct client;
struct upstream;
struct pool;
struct tls;
struct intercept_memory;

struct server {
	struct ev_loop *loop;
	const struct kp_config *cfg;
	struct pool *pool;
	struct dispatch dispatch;        /* which request gets which upstream connection */
	struct stats_page stats_page;    /* --stats-listen */
	int listen_fd;
	ev_io accept_watcher;
	ev_timer accept_retry;           /* accepting again after descriptors ran out */
	ev_signal sigint_watcher, sigterm_watcher;
	ev_signal sigusr1_watcher;       /* logs the counters */
	ev_signal sighup_watcher;        /* re-reads the auth file */
	ev_timer grace_timer;            /* stopping: how long in-flight exchanges may take */
	ev_timer trim_timer;             /* gives back memory a burst left behind */
	bool draining;                   /* a stop signal came: finish what is in flight, then exit */
	bool pidfile_written;            /* ours to remove at exit */
	struct auth *auth;               /* --auth-file's credentials; NULL: none asked */
	struct tls *tls;                 /* --intercept: CA, contexts, caches; NULL: off */
	struct intercept_memory *refusals;   /* clients that refused our certificate */
	struct cidr own[64];             /* this machine's addresses, refused to LAN clients */
	unsigned nown;                   /* read at start and on SIGHUP */
	ev_prepare reaper;               /* end of each iteration: free the dead */
	struct client *clients;          /* live clients, for shutdown */
	unsigned nclients;
	unsigned max_clients;            /* cfg->max_clients, lowered to fit the fd limit */
	unsigned long fd_limit;          /* RLIMIT_NOFILE in force */
	struct upstream *upstreams;      /* live upstream connections, for shutdown */
	struct client *dead_clients;
	struct upstream *dead_upstreams;
};

/* Listens, starts the resolver and the pool. -1 with a message logged on failure. */
int server_init(struct server *srv, struct ev_loop *loop, const struct kp_config *cfg);
/* Runs until SIGINT or SIGTERM. */
void server_run(struct server *srv);
/* Closes every connection and frees everything server_init() made. */
void server_shutdown(struct server *srv);

/* A client closed: accepting may resume if the cap held it back, or, when stopping, the loop ends. */
void server_client_closed(struct server *srv);

/*
 * Descriptors ran out (EMFILE or ENFILE): closes the oldest idle pooled
 * connection, since a client or a busy exchange needs the descriptor more.
 * False when none was idle.
 */
bool server_free_descriptor(struct server *srv);

/* How many idle pooled connections the descriptor limit leaves room for now. */
size_t server_idle_fd_budget(const struct server *srv);

#endif
