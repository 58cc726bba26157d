/*
 * Parent proxies for the end-to-end tests: real SOCKS5 and HTTP proxies
 * from Debian packages, each started by the test itself with its own
 * configuration, logs and port in a temporary directory, and stopped by its
 * pid (at the latest at teardown):
 *
 *   microsocks          SOCKS5, with or without a username and password
 *   danted              SOCKS5 (dante-server), with or without the
 *                       "username" method (a user that exists only in a
 *                       private /etc/passwd and /etc/shadow; needs root)
 *   sshd + ssh -D       the SOCKS5 proxy people actually use: a private sshd
 *                       with its own host key and authorized key, and an ssh
 *                       client logged in to it as the current user
 *   squid               HTTP, with or without Basic authentication
 *                       (basic_ncsa_auth and a password file)
 *   privoxy             HTTP in front of one of the above (forward-socks5t,
 *                       connection-sharing), the bridge users run today
 *
 * Each parent counts what it served from its own log (parent_sessions(),
 * parent_requests()), so a test can assert "N requests, one SOCKS session".
 *
 * A DNS stub counts the queries a process sends: programs started under it
 * (the daemon through proxy_start_with_dns(), a parent through its resolver
 * field) see a private /etc/resolv.conf naming only the stub, a hosts file
 * with nothing but localhost, and "hosts: files dns" in nsswitch.conf, in a
 * mount namespace of their own. The stub needs root (port 53).
 *
 * A start returns false, with the reason in why, when this machine lacks
 * what the parent needs (its package, or root where root is needed); the
 * test then skips (parent_skip(), dns_stub_skip()). Any other failure fails
 * the test and shows the parent's logs. Tests talk to loopback only.
 */
#ifndef KP_E2E_PARENTS_H
#define KP_E2E_PARENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "harness.h"

/* ---- DNS stub ---- */

#define DNS_STUB_NAMES 32   /* distinct names counted; more are counted as "other" */
#define DNS_STUB_RECORDS 16 /* names answered */

struct dns_stub_count {
	char name[256]; /* lower case, no trailing dot */
	unsigned queries;
};

struct dns_stub_record {
	char name[256];
	int family;            /* AF_INET or AF_INET6 */
	unsigned char addr[16]; /* 4 or 16 bytes */
};

/* Set by dns_stub_start(); the caller reads addr, dir and why only. */
struct dns_stub {
	char addr[16];     /* 127.x.y.z; it answers on UDP port 53 there */
	char dir[256];     /* resolv.conf, hosts and nsswitch.conf a process sees under it */
	char why[256];     /* why dns_stub_start() returned false */
	int fd;            /* the UDP socket; -1 when stopped */
	int wake[2];       /* a pipe; writing to it ends the thread */
	bool running;
	pthread_t thread;
	pthread_mutex_t lock; /* guards the counts */
	unsigned total;       /* every query, parsed or not */
	struct dns_stub_count counts[DNS_STUB_NAMES];
	size_t nrecords;
	struct dns_stub_record records[DNS_STUB_RECORDS];
};

/*
 * Starts a stub on 127.x.y.z:53 (x, y, z picked so that two runs do not
 * meet) answering records, lines of "name address" (IPv4 or IPv6), with
 * those addresses and every other name with NXDOMAIN; a name it knows
 * asked for the other family gets an empty answer. False, with the reason
 * in s->why, if it cannot bind port 53 (not root) or unshare(1) and
 * mount(8) are missing. Stopped at teardown; s must outlive the case.
 */
bool dns_stub_start(struct dns_stub *s, const char *records);
void dns_stub_stop(struct dns_stub *s);
/* Queries for name so far (case-insensitive; a trailing dot is ignored); NULL: all queries. */
unsigned dns_stub_queries(struct dns_stub *s, const char *name);
/* print_message() why, then skip the test. */
void dns_stub_skip(const struct dns_stub *s);

/*
 * proxy_start() with the daemon's name lookups sent to s: the daemon runs
 * in a mount namespace of its own where /etc/resolv.conf, /etc/hosts and
 * /etc/nsswitch.conf are s's (root: unshare --mount; otherwise with a user
 * namespace as well). Its pid is the daemon's, so proxy_stop() and the rest
 * work as usual. A daemon using a cache daemon (nscd) is kept from it.
 */
void proxy_start_with_dns(struct proxy *p, struct dns_stub *s, const char *const extra_args[]);

/* ---- Parent proxies ---- */

enum parent_prog {
	PARENT_NONE,
	PARENT_MICROSOCKS,
	PARENT_DANTE,
	PARENT_SSH,
	PARENT_SQUID,
	PARENT_PRIVOXY,
};

/* How privoxy reaches the parent behind it (parent_start_privoxy()). */
enum privoxy_forward {
	PRIVOXY_DIRECT,  /* no parent: it connects to origins itself */
	PRIVOXY_SOCKS5,  /* forward-socks5: waits for the SOCKS reply before sending */
	PRIVOXY_SOCKS5T, /* forward-socks5t: sends the request right behind the SOCKS
	                    request, as for Tor; microsocks drops such early bytes now
	                    and then, so pair it with dante or ssh -D */
	PRIVOXY_HTTP,    /* forward: an HTTP parent without credentials */
};

/*
 * One running parent. Zero it, optionally set resolver, then call a start
 * function; the start fills in the rest. It must outlive the case (a
 * static, like struct proxy): teardown stops what the test did not.
 */
struct parent_proc {
	/* Set by the caller before the start; kept by it. */
	struct dns_stub *resolver; /* names the parent resolves go to this stub (NULL: the
	                              machine's resolver); needs root */

	/* Filled in by the start. */
	enum parent_prog prog;
	pid_t pid;        /* the process taking clients on port (for PARENT_SSH the ssh client) */
	pid_t server_pid; /* PARENT_SSH: the sshd the client is logged in to; else 0 */
	int port;         /* clients connect to 127.0.0.1:port */
	int server_port;  /* PARENT_SSH: sshd's port */
	char user[32];    /* credentials the parent demands; "" if none */
	char pass[32];
	char url[160];  /* as --parent takes it: socks5h://[user:pass@]127.0.0.1:port or
	                   http://[user:pass@]127.0.0.1:port (curl --proxy takes it too) */
	char dir[256];  /* its configuration, keys, logs, pid file */
	char log[300];  /* the log its sessions and requests are counted in */
	char out[300];  /* its standard output and error (PARENT_SSH: the ssh client's) */
	char why[256];  /* why the start returned false */
	char shm[64];   /* PARENT_SQUID: the service name its shared memory is named after */
};

/* user NULL: no authentication. */
bool parent_start_microsocks(struct parent_proc *p, const char *user, const char *pass);
/* with_auth: the "username" method, for a user of the parent's own (needs root). */
bool parent_start_dante(struct parent_proc *p, bool with_auth);
/* sshd and "ssh -N -D"; p->url names the ssh client's SOCKS port (no SOCKS credentials). */
bool parent_start_ssh_socks(struct parent_proc *p);
/* user NULL: no authentication. */
bool parent_start_squid(struct parent_proc *p, const char *user, const char *pass);
/* privoxy forwarding to via (NULL with PRIVOXY_DIRECT) as how says. */
bool parent_start_privoxy(struct parent_proc *p, const struct parent_proc *via,
                          enum privoxy_forward how);
/* SIGTERM, then SIGKILL after a while; the ssh client before its sshd. Clears resolver. */
void parent_stop(struct parent_proc *p);
/* print_message() why, then skip the test. */
void parent_skip(const struct parent_proc *p);

/*
 * What the parent has served so far, from its log:
 *   sessions  client connections it served: SOCKS sessions that reached a
 *             destination (microsocks "connected to", dante "tcp/connect [",
 *             sshd "server_request_direct_tcpip"), squid's distinct client
 *             address:port pairs in access.log, privoxy's accepted connections
 *             that sent a request
 *   requests  HTTP requests (squid's access.log lines, privoxy's
 *             common-log-format lines, refused ones included); a SOCKS
 *             parent sees no requests and answers its sessions
 * A log line may come a moment after the client is done with the parent:
 * wait with parent_wait_sessions() before asserting a count.
 */
unsigned parent_sessions(const struct parent_proc *p);
unsigned parent_requests(const struct parent_proc *p);
/* How often text occurs in the log sessions are counted in; the same once it reaches n. */
unsigned parent_log_count(const struct parent_proc *p, const char *text);
unsigned parent_wait_log_count(const struct parent_proc *p, const char *text, unsigned n,
                               int timeout_ms);
/* Polls until parent_sessions() (or parent_requests()) reaches n; returns the last count. */
unsigned parent_wait_sessions(const struct parent_proc *p, unsigned n, int timeout_ms);
unsigned parent_wait_requests(const struct parent_proc *p, unsigned n, int timeout_ms);

/*
 * curl --proxy proxy_url for each of the nurls urls, in one curl process
 * (so on one connection to the proxy when it keeps it open), bodies
 * appended to dest, output to log. Returns curl's exit status (0: every
 * URL fetched with a status below 400), or -1 if it was killed or took
 * longer than 30 s.
 */
int curl_via(const char *proxy_url, const char *const urls[], size_t nurls, const char *dest,
             const char *log);

#endif
