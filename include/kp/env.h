/*
 * What the modules that serve requests (client, exchange, stats page) need
 * from the daemon, in one place, so that none of them knows the server: the
 * loop and its clock, the config, the connection pool, and the state a
 * signal changes. The server owns it and keeps it current (SIGHUP replaces
 * the users, a stop signal sets draining); the others only read it.
 */
#ifndef KP_ENV_H
#define KP_ENV_H

#include <stdbool.h>

#include <ev.h>

struct auth;
struct clock;
struct dispatch;
struct exchange_hooks;
struct fd_budget;
struct hoststats;
struct intercept_memory;
struct kp_config;
struct tls;

struct proxy_env {
	struct ev_loop *loop;
	struct clock *clock;                 /* the loop's time, for deadlines */
	const struct kp_config *cfg;
	struct dispatch *dispatch;           /* the connections to origins */
	struct parents *parents;             /* --parent and its rules; NULL: every origin direct */
	struct fd_budget *fds;               /* descriptors and who holds them */
	struct tls *tls;                     /* --intercept: CA, contexts, caches; NULL: off */
	struct intercept_memory *refusals;   /* clients that refused our certificate */
	const struct auth *auth;             /* --auth-file's users; NULL: none asked */
	const struct exchange_hooks *hooks;  /* what watches client exchanges (--read-ahead); NULL: nothing */
	struct hoststats *hosts;             /* counters per host for --stats-listen; NULL: off */
	bool draining;                       /* a stop signal came: finish what is in flight, no more */
};

#endif
