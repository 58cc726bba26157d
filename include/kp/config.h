/*
 * Everything a user can set, in one struct. Flags parse into it; nothing else
 * reads argv. Every limit and timeout the daemon enforces lives here so that
 * later front ends (UCI, a config file) fill the same struct.
 */
#ifndef KP_CONFIG_H
#define KP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kp/cidr.h"

/* Ranges --allow may list. */
#define KP_MAX_CIDRS 64
/* Host patterns --intercept may list. */
#define KP_MAX_INTERCEPT 64
/* Host patterns --split may list. */
#define KP_MAX_SPLIT 64
/* --parent-for and --direct rules, together. */
#define KP_MAX_PARENT_RULES 64
/*
 * Descriptors kept back from clients (listener, resolver, stdio, logging);
 * each client may hold two, its own and an upstream's, so --max-clients is
 * fitted to (limit - KP_FDS_RESERVED) / 2, and --check-host says so.
 */
#define KP_FDS_RESERVED 32

struct kp_config {
	/* Listening side. */
	const char *bind_addr;       /* -b: numeric IPv4 or IPv6 address */
	unsigned port;               /* -p */

	/* Who may use the proxy. */
	struct cidr allow[KP_MAX_CIDRS];   /* --allow: client ranges; none given: anyone */
	unsigned nallow;
	const char *auth_file;       /* --auth-file: user:password lines; NULL: no auth */
	const char *user;            /* -u: run as this user once the socket is bound */
	const char *access_log;      /* --access-log FILE or "syslog"; NULL: none */
	bool syslog;                 /* --syslog: the daemon's log to syslog(3), not stderr */
	const char *pidfile;         /* --pidfile FILE, written once listening; NULL: none */
	bool log_query;              /* --log-query: keep query strings in it */
	const char *stats_addr;      /* --stats-listen address; NULL: no stats page */
	unsigned stats_port;
	char stats_addr_buf[64];
	double stats_interval;       /* --stats-interval: seconds between the chart's samples */
	bool stats_no_auth;          /* --stats-no-auth: the stats page asks no credentials */

	/* Where it may go. */
	struct cidr deny_dest[KP_MAX_CIDRS];    /* --deny-dest: for every client */
	unsigned ndeny_dest;
	struct cidr allow_dest[KP_MAX_CIDRS];   /* --allow-dest: exceptions to the built-in rule */
	unsigned nallow_dest;

	/* Upstream pool. */
	double idle_timeout;         /* -t: seconds an idle upstream may wait */
	unsigned max_idle_per_host;  /* idle upstreams kept per host:port */
	unsigned max_idle_total;     /* idle upstreams kept in all */

	/* Dispatch. */
	unsigned max_conns_per_host; /* upstream connections per host:port; 0: no cap */
	double queue_timeout;        /* a request waits this long for a connection, then 503 */
	bool no_connect_race;        /* a request waits for its own connect only (comparisons) */

	/* Upstream socket tuning (net_tune()). */
	size_t upstream_rcvbuf;      /* SO_RCVBUF; 0: leave to the kernel's autotuning */
	size_t upstream_sndbuf;      /* SO_SNDBUF; 0: likewise */
	const char *congestion;      /* TCP_CONGESTION for upstream sockets; NULL: the host's */
	unsigned tcp_keepalive;      /* idle seconds before keepalive probes; 0: none */

	/* Timeouts, seconds. */
	double connect_timeout;      /* TCP connect to the origin (per address) */
	double response_timeout;     /* request sent, no response header yet: 504 */
	double io_timeout;           /* no progress on an exchange in either direction */
	double client_idle_timeout;  /* keep-alive client with no request in flight */
	double header_timeout;       /* one request head, from its first byte: then 408 */

	/* Limits. */
	size_t max_header_bytes;     /* request or response head; larger gets 431/502 */
	size_t max_url_bytes;        /* request-target; longer gets 414 */
	unsigned max_clients;        /* accepted connections at once; more wait in the backlog */

	/* Tunnels (CONNECT and protocol upgrades). */
	double tunnel_timeout;       /* a tunnel silent this long is closed */
	double grace;                /* on SIGTERM/SIGINT, let exchanges finish this long */
	bool connect_any_port;       /* --connect-ports '*' */
	uint8_t connect_ports[65536 / 8];  /* bit set: CONNECT may reach that port */

	/* Data path. */
	bool no_splice;              /* move bodies and tunnels through user space */
	size_t pipe_size;            /* F_SETPIPE_SZ for splice pipes */

	/* TLS interception (tls.h, intercept.h). */
	const char *intercept[KP_MAX_INTERCEPT];   /* --intercept host patterns */
	unsigned nintercept;
	const char *ca_cert;         /* --ca-cert: signs the leaves shown to clients */
	const char *ca_key;          /* --ca-key: its key, mode 0600 */
	const char *upstream_ca;     /* --upstream-ca: trust these, not the system store */
	const char *make_ca_dir;     /* --make-ca DIR: write a CA there and exit */
	unsigned leaf_cache;         /* leaf certificates kept */

	/* Read-ahead (readahead.h). */
	bool read_ahead;             /* --read-ahead: fetch the next byte range before it is asked */
	size_t fetch_memory;         /* --fetch-memory (--read-ahead-memory): answers fetched by the
	                              * proxy itself and what is kept about them, in all */
	unsigned read_ahead_depth;   /* --read-ahead-depth: pieces ahead of a client, at most */
	double read_ahead_ttl;       /* --read-ahead-ttl: seconds a held piece waits for its client */

	/* Splitting big downloads into bounded ranges (ra_split.h), in --fetch-memory. */
	const char *split[KP_MAX_SPLIT];   /* --split host patterns */
	unsigned nsplit;
	size_t split_size;           /* --split-size: bytes per range asked of the origin */
	unsigned split_connections;  /* --split-connections: connections one download may use */

	/* Parent proxies (parent.h): origins reached through a SOCKS5 or HTTP proxy. */
	const char *parent_url;      /* --parent: for every origin no rule names; NULL: direct */
	struct {
		const char *pattern;     /* host, *.domain, IP literal or CIDR */
		const char *url;         /* --parent-for's parent; NULL: --direct */
	} parent_rules[KP_MAX_PARENT_RULES];   /* in the order given: the first match wins */
	unsigned nparent_rules;
	const char *parent_credentials;   /* --parent-credentials FILE: user:password per parent */

	/* Resolver. */
	double dns_cache_ttl;        /* seconds a resolved name is reused */

	/* Host check (hostcheck.h): at start, and as --check-host instead of running. */
	bool check_host;             /* --check-host: report what here limits a download, exit */
	bool check_json;             /* --json: print that report as JSON */
	const char *check_url;       /* the URL after --check-host, probed for the RTT; NULL: none */
	unsigned path_rtt_ms;        /* --rtt: the path's round trip; 0: probed, or the default */
	unsigned path_rate_mbit;     /* --rate: the path's rate; 0: the default */

	int verbosity;               /* -v adds one */
};

/* Fills cfg with the defaults documented in --help and the man page. */
void config_defaults(struct kp_config *cfg);

enum config_parse_result {
	CONFIG_RUN,    /* cfg is ready; start the daemon */
	CONFIG_EXIT_OK, /* --help or --version was printed */
	CONFIG_ERROR,  /* a message went to the error stream */
};

/*
 * Parses argv into cfg (which must hold the defaults). tls_name is the TLS
 * library built in, as --version names it; NULL for a binary without one,
 * which refuses --intercept and --make-ca. Messages go to out (help,
 * version) or err (mistakes); the caller picks the exit code.
 */
enum config_parse_result config_parse(struct kp_config *cfg, int argc, char **argv,
                                      const char *tls_name, FILE *out, FILE *err);

/* Prints --help: config_options in order. */
void config_usage(FILE *out);

/* What an option does with its value (config_option.kind). */
enum config_option_kind {
	CONFIG_OPT_UNSIGNED,  /* a whole number in [min, max] into an unsigned field */
	CONFIG_OPT_SIZE,      /* likewise into a size_t field */
	CONFIG_OPT_SECONDS,   /* above 0 and at most a day, fractions allowed, into a double */
	CONFIG_OPT_STRING,    /* the argument itself, not copied, into a const char * */
	CONFIG_OPT_FLAG,      /* no value: a bool field becomes true */
	CONFIG_OPT_COUNT,     /* no value: an int field goes up by one */
	CONFIG_OPT_CIDRS,     /* an address or range appended to a struct cidr list */
	CONFIG_OPT_CUSTOM,    /* parse() does it */
	CONFIG_OPT_CUSTOM2,   /* two words follow the option: parse2() takes both */
	CONFIG_OPT_HELP,      /* no value: print --help and stop */
	CONFIG_OPT_VERSION,   /* no value: print the version and stop */
};

/*
 * One command-line option. config_options drives getopt, the parse of each
 * value and the --help text, so the three cannot disagree.
 */
struct config_option {
	const char *name;         /* long name without "--"; NULL ends the table */
	char short_name;          /* one-letter alias, 0: none */
	const char *arg;          /* the value's name in --help; NULL: takes no value */
	const char *help;         /* --help text, lines separated by '\n' */
	enum config_option_kind kind;   /* what becomes of the value */
	size_t field;             /* offsetof the kp_config member the value goes into */
	size_t count_field;       /* CONFIG_OPT_CIDRS: offsetof the list's unsigned count */
	unsigned long min, max;   /* CONFIG_OPT_UNSIGNED, _SIZE: the values accepted */
	const char *bad;          /* UNSIGNED, SIZE, SECONDS: why a value was refused */
	/* CONFIG_OPT_CUSTOM: stores arg in cfg; NULL, or why it was refused. */
	const char *(*parse)(struct kp_config *cfg, const char *arg);
	/* CONFIG_OPT_CUSTOM2: the same for an option of two words (arg names both). */
	const char *(*parse2)(struct kp_config *cfg, const char *arg, const char *arg2);
};

/* Every option, in --help order, ended by an entry whose name is NULL. */
extern const struct config_option config_options[];

/* Is addr (as given to -b) a loopback address, reachable from this machine only? */
bool config_bind_is_loopback(const char *addr);

static inline bool
config_connect_port_allowed(const struct kp_config *cfg, unsigned port)
{
	return cfg->connect_any_port ||
	       (port < 65536 && (cfg->connect_ports[port / 8] >> (port % 8)) & 1);
}

#endif
