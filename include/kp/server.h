/*
 * The daemon: the listening socket and its clients, signals, stopping with
 * a grace period, the descriptor limit, and the pieces every request uses
 * (the connection pool, the users, TLS), handed to clients and the stats
 * page in one environment (env.h). Closed clients are freed once per loop
 * iteration, after every callback of the iteration has returned.
 */
#ifndef KP_SERVER_H
#define KP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>

#include "kp/budget.h"
#include "kp/client.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/env.h"
#include "kp/listener.h"
#include "kp/policy.h"
#include "kp/stats_page.h"

struct auth;
struct tls;
struct intercept_memory;

struct readahead;

struct server {
	struct ev_loop *loop;
	const struct kp_config *cfg;
	struct proxy_env env;            /* what clients and the stats page are given */
	struct readahead *readahead;    /* --read-ahead; NULL: off (its hooks are in env) */
	struct parents *parents;        /* --parent and its rules; NULL: none (env has it too) */
	struct clock clock;              /* the loop's time */
	struct fd_budget fds;            /* the descriptor limit and who holds what */
	struct dispatch dispatch;        /* the connections to origins */
	struct stats_page stats_page;    /* --stats-listen */
	struct client_list clients;
	struct listener listener;        /* the proxy's port */
	ev_signal sigint_watcher, sigterm_watcher;
	ev_signal sigusr1_watcher;       /* logs the counters */
	ev_signal sighup_watcher;        /* re-reads the auth file */
	ev_timer grace_timer;            /* stopping: how long in-flight exchanges may take */
	ev_timer trim_timer;             /* gives back memory a burst left behind */
	bool pidfile_written;            /* ours to remove at exit */
	struct auth *auth;               /* --auth-file's credentials; NULL: none asked */
	struct tls *tls;                 /* --intercept: CA, contexts, caches; NULL: off */
	struct intercept_memory *refusals;   /* clients that refused our certificate */
	struct own_addresses own;        /* this machine's, refused to LAN clients; re-read on SIGHUP */
	ev_prepare reaper;               /* end of each iteration: free the clients closed in it */
	unsigned max_clients;            /* cfg->max_clients, lowered to fit the fd limit */
};

/* Listens, starts the resolver and the pool. -1 with a message logged on failure. */
int server_init(struct server *srv, struct ev_loop *loop, const struct kp_config *cfg);
/* Runs until SIGINT or SIGTERM. */
void server_run(struct server *srv);
/* Closes every connection and frees everything server_init() made. */
void server_shutdown(struct server *srv);

#endif
