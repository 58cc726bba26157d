/*
 * Every counter the daemon keeps, in one place, so a stats page or a log line
 * at exit reads one struct.
 */
#ifndef KP_STATS_H
#define KP_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What went wrong, for keepalive_proxy_errors_total{kind="..."}. */
enum kp_error_kind {
	KP_ERR_REFUSED,         /* 403: --allow, destination rules, --connect-ports */
	KP_ERR_UNAUTHORIZED,    /* 407 */
	KP_ERR_BAD_REQUEST,     /* 400, 414, 431, 501, 505 */
	KP_ERR_TIMEOUT,         /* 408, 504, and exchanges or tunnels cut off for silence */
	KP_ERR_UNRESOLVED,      /* the name did not resolve */
	KP_ERR_CONNECT,         /* no address of the origin could be connected to */
	KP_ERR_RESET,           /* the origin closed or reset the connection mid-exchange */
	KP_ERR_BAD_RESPONSE,    /* malformed response head or framing */
	KP_ERR_QUEUE_TIMEOUT,   /* 503: no connection within --queue-timeout */
	KP_ERR_TLS,             /* a TLS handshake with an origin failed (502), verification included */
	KP_ERR_KINDS,
};

extern const char *const kp_error_names[KP_ERR_KINDS];

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
	uint64_t tunnels_open;         /* ... and open now */
	uint64_t intercepted;          /* CONNECTs answered with our own TLS (--intercept) */
	uint64_t intercept_refused;    /* ... whose client refused our certificate */
	uint64_t intercept_skipped;    /* CONNECTs tunnelled because their client refused before */
	uint64_t tls_client_handshakes;     /* completed with clients */
	uint64_t tls_upstream_handshakes;   /* completed with origins */
	uint64_t tls_upstream_resumed;      /* ... that resumed a session */
	uint64_t tls_verify_failures;       /* origin certificates that did not verify */
	uint64_t tls_leaves_minted;         /* leaf certificates made */
	uint64_t tls_leaves_in_cache;       /* ... held in the cache now */
	uint64_t readahead_predicted;  /* pieces the proxy asked for ahead of a client (--read-ahead) */
	uint64_t readahead_hits;       /* client requests served from a piece held whole */
	uint64_t readahead_joins;      /* ... from a piece still arriving */
	uint64_t readahead_misses;     /* requests on a stream with pieces held that matched none */
	uint64_t readahead_wasted_bytes;   /* fetched ahead and never given to a client */
	uint64_t readahead_unsafe;     /* pieces refused: not the piece asked for, private, another object */
	uint64_t readahead_throttled;  /* predictions not made: --fetch-memory was reached */
	uint64_t readahead_failed;     /* fetches that failed (error, reset, timeout) */
	uint64_t readahead_cut;        /* fetches ended far from done: the client asked elsewhere */
	uint64_t upstream_pipelined;   /* requests written on a busy origin connection */
	uint64_t split_downloads;      /* downloads fetched as more than one piece (--split) */
	uint64_t split_declined;       /* first pieces that could not be split: the origin answered */
	uint64_t split_pieces;         /* pieces asked for split downloads, resumes included */
	uint64_t split_resumes;        /* pieces asked again from where a broken fetch stopped */
	uint64_t split_mismatches;     /* pieces not as asked: their client cut off there */
	uint64_t split_backoffs;       /* refusals of a second connection: the host got one */
	uint64_t split_connections_used; /* the most connections each download had at once, summed */
	/* The fetch engine's (ra_fetch.h), for read-ahead and split downloads alike. */
	uint64_t fetch_memory_bytes;   /* memory counted for pieces held or arriving now */
	uint64_t fetch_records_bytes;  /* ... for what is kept about them: pieces' records and
	                                * requests, shelves, series, playlists */
	uint64_t fetch_throttled;      /* fetches not made: a client's share or --fetch-memory full */
	uint64_t auth_hash_checks;     /* passwords checked against a crypt(3) hash */
	uint64_t auth_cache_hits;      /* credentials taken on the strength of an earlier check */
	uint64_t auth_limited;         /* checks refused unseen: the address failed or waits too much */
	uint64_t auth_busy;            /* checks refused unseen: AUTH_JOBS_MAX hash checks waiting */
	uint64_t auth_jobs;            /* hash checks waiting or running now */
	uint64_t auth_jobs_peak;       /* ... at most, since start */
	double saved_seconds;          /* estimated time reuse saved clients (stats_reuse_saving) */
	uint64_t errors[KP_ERR_KINDS]; /* by kind */
};

extern struct kp_stats kp_stats;

/* Writes a one-line summary through the logger. */
void stats_log_summary(void);

/* A growing text buffer the renderers append to; NULL data when memory ran out. */
struct stats_text {
	char *data;       /* the text so far, not NUL-terminated; NULL: nothing yet */
	size_t len, cap;  /* its length, and the room allocated */
	bool failed;      /* memory ran out: the text is incomplete and nothing more is added */
};

/* Appends to t, growing it; on failure sets t->failed and adds nothing more. */
void stats_printf(struct stats_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * What one response served on a reused connection saved its client, in
 * seconds, from the connection's round-trip time (TCP_INFO) and the body
 * bytes it brought: the round trips a new connection would have cost
 * first (the TCP handshake, and one more for TLS 1.3's), and the slow
 * start rounds a window of 10 segments of 1448 bytes, doubling each round
 * trip, would have needed beyond the one round a warm window takes. An
 * estimate: a warm window smaller than the body, or one the origin reset
 * after idle, saves less; a TLS 1.2 handshake saves one round trip more.
 */
double stats_reuse_saving(double rtt, uint64_t bytes, bool tls);

/* The counters in the Prometheus text format (version 0.0.4). */
void stats_render_prometheus(struct stats_text *t);
/*
 * The same numbers as one JSON object, left open: the caller adds what the
 * counters do not know (connections per host, the history) with
 * stats_json_key() and stats_printf(), then the closing brace.
 */
void stats_render_json(struct stats_text *t);
/* `"key": ` as the next member of the object being written, after a comma unless it is the first. */
void stats_json_key(struct stats_text *t, const char *key);

#endif
