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
	uint64_t upstream_connects;    /* TCP connects attempted (each Happy Eyeballs attempt) */
	uint64_t upstream_connect_failures;
	uint64_t upstream_reuses;      /* requests sent on a connection used before */
	uint64_t requests_on_reused;   /* ... that was idle, or freed up with no connect of theirs in flight */
	uint64_t requests_on_freed;    /* ... that freed up while a connect for them was in flight */
	uint64_t requests_on_new;      /* requests sent on a connection that had just connected */
	uint64_t connects_started;     /* upstream connections opened (several attempts may make one) */
	uint64_t connects_won;         /* ... that went to a waiting request */
	uint64_t connects_unused;      /* ... that completed with nobody waiting: into the pool */
	uint64_t queued;               /* requests waiting in a host's queue now */
	uint64_t queue_waits;          /* requests that waited for a connection */
	double queue_wait_seconds;     /* ... and the time they waited, in all */
	uint64_t queue_timeouts;       /* 503s: no connection within --queue-timeout */
	uint64_t upstream_retries;     /* requests replayed after a stale connection */
	uint64_t upstream_stale;       /* pooled connections found dead (peek or EOF) */
	uint64_t upstreams_open;       /* upstream connections now, busy or idle */
	uint64_t pool_idle;            /* idle upstream connections now */
	uint64_t pool_expired;         /* idle connections closed by the idle timer */
	uint64_t pool_evicted;         /* idle connections closed to honour a cap */
	uint64_t fd_evictions;         /* ... of those, to free a descriptor */
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
