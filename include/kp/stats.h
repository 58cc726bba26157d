/*
 * Every counter the daemon keeps, in one place, so a stats page or a log line
 * at exit reads one struct.
 */
#ifndef KP_STATS_H
#define KP_STATS_H

#include <stdint.h>

struct kp_stats {
	uint64_t clients_accepted;     /* client connections accepted */
	uint64_t clients_active;       /* client connections open now */
	uint64_t requests;             /* request heads parsed */
	uint64_t responses_local;      /* responses the proxy generated (errors) */
	uint64_t upstream_connects;    /* new upstream TCP connections attempted */
	uint64_t upstream_connect_failures;
	uint64_t upstream_reuses;      /* requests sent on a pooled connection */
	uint64_t upstream_retries;     /* requests replayed after a stale connection */
	uint64_t upstream_stale;       /* pooled connections found dead (peek or EOF) */
	uint64_t upstreams_open;       /* upstream connections now, busy or idle */
	uint64_t pool_idle;            /* idle upstream connections now */
	uint64_t pool_expired;         /* idle connections closed by the idle timer */
	uint64_t pool_evicted;         /* idle connections closed to honour a cap */
	uint64_t dns_lookups;          /* names sent to the resolver thread */
	uint64_t dns_cache_hits;
	uint64_t bytes_to_clients;
	uint64_t bytes_to_upstreams;
	uint64_t bytes_spliced;        /* moved socket → pipe (each byte counted once) */
	uint64_t bytes_copied;         /* response or tunnel bytes read into user space on the copy path */
	uint64_t pipes_open;           /* pipes in use or pooled now */
	uint64_t tunnels;              /* CONNECT and upgrade tunnels opened */
};

extern struct kp_stats kp_stats;

/* Writes a one-line summary through the logger. */
void stats_log_summary(void);

#endif
