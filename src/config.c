#include "kp/config.h"

#include "kp/hostpattern.h"
#include "kp/parent_url.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Connections to origins: how long idle ones stay, how many, how they are probed. */
static void
pool_defaults(struct kp_config *cfg)
{
	/*
	 * Below the 60-75 s that common origins and load balancers keep idle
	 * connections, so the proxy usually closes first and seldom races an
	 * origin's close; far above the few seconds between media segments.
	 */
	cfg->idle_timeout = 50;
	cfg->max_idle_per_host = 8;
	cfg->max_idle_total = 256;
	/*
	 * No cap: the proxy stands in for its clients, who would open these
	 * connections themselves without it, so a cap could only make some of
	 * them wait. Behind a cap every queued request waits for a connection
	 * one round trip at a time (32 connections at 50 ms serve at most ~640
	 * small requests a second to one host; on loopback wrk -c1000 lost 18%).
	 */
	cfg->max_conns_per_host = 0;
	/* Past the connect timeout, so an unreachable origin still answers 502/504 first. */
	cfg->queue_timeout = 30;
	/*
	 * Probes a pooled connection after 15 s of silence, three 5 s apart: a
	 * path that died is noticed within the 50 s idle timeout, at the cost of
	 * one small packet per idle connection every 15 s.
	 */
	cfg->tcp_keepalive = 15;
}

/* How long each kind of wait may last, and the wait for a clean stop. */
static void
timeout_defaults(struct kp_config *cfg)
{
	cfg->connect_timeout = 10;
	cfg->response_timeout = 60;
	cfg->io_timeout = 300;
	cfg->client_idle_timeout = 60;
	/*
	 * A head is a few hundred bytes and arrives in one round trip; 30 s is
	 * ample for the slowest link, and a client trickling a byte at a time
	 * no longer holds its connection for as long as it likes.
	 */
	cfg->header_timeout = 30;
	/*
	 * Long: an idle HTTPS or WebSocket connection often waits minutes between
	 * bursts, and closing it costs the client a new TLS handshake.
	 */
	cfg->tunnel_timeout = 600;
	/*
	 * Enough for the chunk a downloader is fetching to finish (a few MB),
	 * short enough for a service manager's stop: systemd waits 90 s, procd
	 * 5 s before it kills, so routers should lower it (--grace 4).
	 */
	cfg->grace = 10;
}

/* What is sized or capped: heads, clients, CONNECT's ports, pipes, caches. */
static void
size_defaults(struct kp_config *cfg)
{
	cfg->max_header_bytes = 32768;
	cfg->max_url_bytes = 8192;
	cfg->max_clients = 10000;
	cfg->dns_cache_ttl = 60;
	cfg->connect_ports[443 / 8] |= 1u << (443 % 8);
	/*
	 * 1 MiB: what Linux lets any user ask for (fs.pipe-max-size), and on
	 * loopback it took a fifth less CPU per GiB than 256 KiB (bench/bulk.py).
	 * The kernel holds pages only for bytes actually in a pipe.
	 */
	cfg->pipe_size = 1048576;
	/* A few hundred hosts is more than a household visits in a day; each leaf is ~1 KiB. */
	cfg->leaf_cache = 256;
}

/* Read-ahead and split: the memory their fetches may take, and their pieces. */
static void
readahead_defaults(struct kp_config *cfg)
{
	/*
	 * 32 MiB: a dozen 2 MiB pieces, for a few downloads at once, without
	 * taking a small router's memory; a desktop can give far more.
	 */
	cfg->fetch_memory = 32u << 20;
	cfg->read_ahead_ttl = 30;
	/*
	 * At most four ahead, and only as many as cover a round trip of the
	 * path (ra_depth): enough for a fast long path, few enough that a seek
	 * wastes little.
	 */
	cfg->read_ahead_depth = 4;
	/*
	 * 8 MiB: large video origins serve bounded ranges of up to about 10 MiB
	 * at full speed, and one piece is then a few hundred round trips' worth
	 * of a fast path, so the request per piece costs little.
	 */
	cfg->split_size = 8u << 20;
	cfg->split_connections = 1;
}

void
config_defaults(struct kp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->bind_addr = "127.0.0.1";
	cfg->port = 9250;
	pool_defaults(cfg);
	timeout_defaults(cfg);
	size_defaults(cfg);
	readahead_defaults(cfg);
	/*
	 * 90 intervals of 10 s: the dashboard's 15 minutes, fine enough to show
	 * a download of a minute, in a ring of 5 KiB (history.h).
	 */
	cfg->stats_interval = 10;
	cfg->verbosity = 0;
}

static int
parse_unsigned(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*s == '\0' || *s == '-')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* A number of bytes, with K, M or G after it for KiB, MiB or GiB, as people write sizes. */
static int
parse_size(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	static const char units[] = "kmg";
	char number[32];
	const char *unit;
	size_t len = strlen(s);
	unsigned long v, scale = 1;

	if (len && len < sizeof(number) && (unit = strchr(units, s[len - 1] | 0x20)) != NULL) {
		memcpy(number, s, len - 1);
		number[len - 1] = '\0';
		for (const char *u = units; u <= unit; u++)
			scale *= 1024;
		s = number;
	}
	if (parse_unsigned(s, 0, ULONG_MAX / scale, &v) < 0 || v * scale < min || v * scale > max)
		return -1;
	*out = v * scale;
	return 0;
}

static int
parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	/* A day is far beyond any sensible timeout and keeps ev_timer arithmetic sane. */
	if (errno || end == s || *end != '\0' || !isfinite(v) || v <= 0 || v > 86400)
		return -1;
	*out = v;
	return 0;
}

/* "443,8443" or "*". Replaces the default list rather than adding to it. */
static const char *
parse_port_list(struct kp_config *cfg, const char *s)
{
	static const char bad[] = "connect ports must be '*' or a comma-separated list of 1-65535";
	uint8_t bits[sizeof(cfg->connect_ports)] = {0};
	const char *p = s;

	if (strcmp(s, "*") == 0) {
		cfg->connect_any_port = true;
		return NULL;
	}
	for (;;) {
		char *end;
		unsigned long port;

		if (*p < '0' || *p > '9')
			return bad;
		errno = 0;
		port = strtoul(p, &end, 10);
		if (errno || port == 0 || port > 65535)
			return bad;
		bits[port / 8] |= (uint8_t)(1u << (port % 8));
		if (*end == '\0')
			break;
		if (*end != ',')
			return bad;
		p = end + 1;
	}
	memcpy(cfg->connect_ports, bits, sizeof(bits));
	cfg->connect_any_port = false;
	return NULL;
}

/* "127.0.0.1:9251" or "[::1]:9251" into the stats listener; NULL, or what is wrong. */
static const char *
parse_listen(struct kp_config *cfg, const char *text)
{
	const char *colon = strrchr(text, ':');
	const char *host = text, *host_end = colon;
	unsigned long port;
	struct cidr c;

	if (!colon || parse_unsigned(colon + 1, 1, 65535, &port) < 0)
		return "--stats-listen wants ADDR:PORT, such as 127.0.0.1:9251 or [::1]:9251";
	if (*host == '[') {
		host++;
		if (host_end[-1] != ']')
			return "--stats-listen: an IPv6 address goes in brackets, [::1]:9251";
		host_end--;
	} else if (memchr(host, ':', (size_t)(host_end - host))) {
		/* "::1:9251" is itself an IPv6 address: only brackets make it unambiguous. */
		return "--stats-listen: an IPv6 address goes in brackets, [::1]:9251";
	}
	if ((size_t)(host_end - host) >= sizeof(cfg->stats_addr_buf))
		return "--stats-listen: address too long";
	memcpy(cfg->stats_addr_buf, host, (size_t)(host_end - host));
	cfg->stats_addr_buf[host_end - host] = '\0';
	if (cidr_parse(cfg->stats_addr_buf, &c) < 0 || strchr(cfg->stats_addr_buf, '/'))
		return "--stats-listen wants a numeric address";
	cfg->stats_addr = cfg->stats_addr_buf;
	cfg->stats_port = (unsigned)port;
	return NULL;
}

static const char *
parse_grace(struct kp_config *cfg, const char *arg)
{
	/* 0 is allowed: stop at once. */
	if (strcmp(arg, "0") == 0) {
		cfg->grace = 0;
		return NULL;
	}
	return parse_seconds(arg, &cfg->grace) < 0 ? "grace must be 0 or a number of seconds" : NULL;
}

static const char *
parse_congestion(struct kp_config *cfg, const char *arg)
{
	/* TCP_CA_NAME_MAX is 16 with the NUL. */
	if (*arg == '\0' || strlen(arg) > 15)
		return "congestion control name must be 1-15 characters";
	cfg->congestion = arg;
	return NULL;
}

static const char *
parse_split(struct kp_config *cfg, const char *arg)
{
	const char *bad = host_pattern_problem(arg);

	if (bad)
		return bad;
	if (cfg->nsplit == KP_MAX_SPLIT)
		return "too many --split patterns";
	cfg->split[cfg->nsplit++] = arg;
	return NULL;
}

static const char *
parse_intercept(struct kp_config *cfg, const char *arg)
{
	const char *bad = host_pattern_problem(arg);

	if (bad)
		return bad;
	/* Without TLS the patterns are kept only to be refused with the reason, below. */
	if (cfg->nintercept == KP_MAX_INTERCEPT)
		return "too many --intercept patterns";
	cfg->intercept[cfg->nintercept++] = arg;
	return NULL;
}

static const char *
parent_url_check(const char *url)
{
	struct parent_url ignored;

	return parent_url_parse(url, &ignored);
}

static const char *
parse_parent(struct kp_config *cfg, const char *arg)
{
	const char *bad = parent_url_check(arg);

	if (bad)
		return bad;
	cfg->parent_url = arg;
	return NULL;
}

static const char *
add_parent_rule(struct kp_config *cfg, const char *pattern, const char *url)
{
	const char *bad = parent_pattern_problem(pattern);

	if (!bad && url)
		bad = parent_url_check(url);
	if (bad)
		return bad;
	if (cfg->nparent_rules == KP_MAX_PARENT_RULES)
		return "too many --parent-for and --direct rules";
	cfg->parent_rules[cfg->nparent_rules].pattern = pattern;
	cfg->parent_rules[cfg->nparent_rules++].url = url;
	return NULL;
}

static const char *
parse_parent_for(struct kp_config *cfg, const char *pattern, const char *url)
{
	return add_parent_rule(cfg, pattern, url);
}

static const char *
parse_direct(struct kp_config *cfg, const char *pattern)
{
	return add_parent_rule(cfg, pattern, NULL);
}

/* Appends a range to a list; NULL, or what is wrong. */
static const char *
add_range(struct cidr *list, unsigned *n, const char *text, const char *name)
{
	static char why[96];

	if (*n == KP_MAX_CIDRS) {
		snprintf(why, sizeof(why), "too many --%s ranges (at most %d)", name, KP_MAX_CIDRS);
		return why;
	}
	if (cidr_parse(text, &list[*n]) < 0) {
		snprintf(why, sizeof(why), "--%s wants an address or a range such as 192.168.1.0/24",
		         name);
		return why;
	}
	(*n)++;
	return NULL;
}

/* Member f of struct kp_config, which must have type t (else the build stops). */
#define FIELD(f, t) _Generic(((struct kp_config *)0)->f, t: offsetof(struct kp_config, f))

#define UNSIGNED(f, lo, hi, why) \
	.kind = CONFIG_OPT_UNSIGNED, .field = FIELD(f, unsigned), .min = (lo), .max = (hi), \
	.bad = (why)
#define SIZE(f, lo, hi, why) \
	.kind = CONFIG_OPT_SIZE, .field = FIELD(f, size_t), .min = (lo), .max = (hi), .bad = (why)
#define SECONDS(f, why) .kind = CONFIG_OPT_SECONDS, .field = FIELD(f, double), .bad = (why)
#define STRING(f) .kind = CONFIG_OPT_STRING, .field = FIELD(f, const char *)
#define FLAG(f) .kind = CONFIG_OPT_FLAG, .field = FIELD(f, bool)
#define CIDRS(list, n) \
	.kind = CONFIG_OPT_CIDRS, .field = FIELD(list[0], struct cidr), \
	.count_field = FIELD(n, unsigned)
#define CUSTOM(fn) .kind = CONFIG_OPT_CUSTOM, .parse = (fn)
#define CUSTOM2(fn) .kind = CONFIG_OPT_CUSTOM2, .parse2 = (fn)

/*
 * A 32-bit size_t cannot count 16 GiB; there the cap is 2 GiB, so that what
 * is held plus one more piece (at most half the cap) still fits in a size_t.
 */
#if SIZE_MAX > 0xffffffffu
#define FETCH_MEMORY_MAX 17179869184UL
#define FETCH_MEMORY_RANGE "1048576-17179869184 bytes"
#else
#define FETCH_MEMORY_MAX 2147483648UL
#define FETCH_MEMORY_RANGE "1048576-2147483648 bytes"
#endif
/* A piece is at most 1 GiB: half of a 32-bit build's largest memory cap. */
#define SPLIT_SIZE_MAX 1073741824UL

const struct config_option config_options[] = {
	{"port", 'p', "PORT", "listen port (default 9250)",
	 UNSIGNED(port, 1, 65535, "port must be 1-65535")},
	{"bind", 'b', "ADDR", "listen address, IPv4 or IPv6 (default 127.0.0.1)",
	 STRING(bind_addr)},
	{"allow", 0, "CIDR",
	 "clients that may use the proxy (repeatable; others\n"
	 "get 403); needed, or --auth-file, to listen on\n"
	 "an address other than loopback",
	 CIDRS(allow, nallow)},
	{"auth-file", 0, "FILE",
	 "require Basic proxy authentication against the\n"
	 "user:password lines of FILE, the password plain or a\n"
	 "crypt(3) hash ($2y$, $6$...; re-read on SIGHUP)",
	 STRING(auth_file)},
	{"deny-dest", 0, "CIDR", "destinations no client may reach (repeatable)",
	 CIDRS(deny_dest, ndeny_dest)},
	{"allow-dest", 0, "CIDR",
	 "destinations clients beyond this machine may\n"
	 "reach after all: loopback, link-local and this\n"
	 "machine's own addresses are refused to them",
	 CIDRS(allow_dest, nallow_dest)},
	{"user", 'u', "USER",
	 "drop root for USER after binding and reading\n"
	 "--auth-file",
	 STRING(user)},
	{"idle-timeout", 't', "SECONDS",
	 "keep an idle upstream connection this long (default 50)",
	 SECONDS(idle_timeout, "idle timeout must be a number of seconds above 0")},
	{"max-idle-per-host", 'm', "N", "idle upstream connections kept per host:port (default 8)",
	 UNSIGNED(max_idle_per_host, 0, 1000000, "max idle per host must be a whole number")},
	{"max-idle", 'M', "N",
	 "idle upstream connections kept in all (default 256);\n"
	 "a burst above either cap is trimmed after 1 s",
	 UNSIGNED(max_idle_total, 0, 1000000, "max idle must be a whole number")},
	{"max-conns-per-host", 0, "N",
	 "upstream connections per host:port; more\n"
	 "requests wait in a queue (default 0: no cap)",
	 UNSIGNED(max_conns_per_host, 0, 1000000,
	          "max conns per host must be a whole number (0: no cap)")},
	{"queue-timeout", 0, "SECONDS",
	 "longest wait for an upstream connection, then\n"
	 "503 (default 30)",
	 SECONDS(queue_timeout, "queue timeout must be a number of seconds above 0")},
	{"no-connect-race", 0, NULL,
	 "a request waits for the connect it caused, not\n"
	 "for whichever connection frees first (for\n"
	 "comparisons)",
	 FLAG(no_connect_race)},
	{"connect-timeout", 0, "SECONDS", "TCP connect to one origin address (default 10)",
	 SECONDS(connect_timeout, "connect timeout must be a number of seconds above 0")},
	{"response-timeout", 0, "SECONDS", "wait for a response header, then 504 (default 60)",
	 SECONDS(response_timeout, "response timeout must be a number of seconds above 0")},
	{"io-timeout", 0, "SECONDS", "close an exchange that makes no progress (default 300)",
	 SECONDS(io_timeout, "io timeout must be a number of seconds above 0")},
	{"client-timeout", 0, "SECONDS", "close an idle client connection (default 60)",
	 SECONDS(client_idle_timeout, "client timeout must be a number of seconds above 0")},
	{"header-timeout", 0, "SECONDS",
	 "answer 408 when a request head takes longer\n"
	 "than this from its first byte (default 30)",
	 SECONDS(header_timeout, "header timeout must be a number of seconds above 0")},
	/* Below 1 KiB nothing real fits; above 1 MiB it is a memory lever. */
	{"max-header-size", 0, "BYTES", "largest request or response head (default 32768)",
	 SIZE(max_header_bytes, 1024, 1048576, "max header size must be 1024-1048576 bytes")},
	{"max-url-size", 0, "BYTES", "longest request-target (default 8192)",
	 SIZE(max_url_bytes, 64, 1048576, "max url size must be 64-1048576 bytes")},
	{"max-clients", 0, "N", "client connections at once (default 10000)",
	 UNSIGNED(max_clients, 1, 10000000, "max clients must be a whole number above 0")},
	{"dns-ttl", 0, "SECONDS", "reuse a resolved name this long (default 60)",
	 SECONDS(dns_cache_ttl, "dns ttl must be a number of seconds above 0")},
	{"connect-ports", 0, "LIST",
	 "ports CONNECT may reach, comma-separated, or *\n"
	 "for any (default 443)",
	 CUSTOM(parse_port_list)},
	{"tunnel-timeout", 0, "SECONDS", "close a silent tunnel (default 600)",
	 SECONDS(tunnel_timeout, "tunnel timeout must be a number of seconds above 0")},
	{"access-log", 0, "FILE",
	 "one line per request to FILE (or 'syslog');\n"
	 "reopened on SIGHUP",
	 STRING(access_log)},
	{"log-query", 0, NULL, "keep query strings in the access log", FLAG(log_query)},
	{"syslog", 0, NULL, "log to syslog (facility daemon), not stderr", FLAG(syslog)},
	{"pidfile", 0, "FILE", "write the process id to FILE once listening", STRING(pidfile)},
	{"stats-listen", 0, "ADDR:PORT",
	 "serve GET /metrics (Prometheus) and /stats (JSON)\n"
	 "there, e.g. 127.0.0.1:9251 or [::1]:9251 (off)",
	 CUSTOM(parse_listen)},
	{"stats-no-auth", 0, NULL,
	 "with --auth-file, answer the stats page without\n"
	 "asking for a user's credentials",
	 FLAG(stats_no_auth)},
	{"stats-interval", 0, "SECONDS",
	 "seconds between the samples the stats page keeps\n"
	 "for its chart, 90 intervals (default 10)",
	 SECONDS(stats_interval, "stats interval must be a number of seconds above 0")},
	{"grace", 0, "SECONDS",
	 "on SIGTERM or SIGINT, let responses in flight\n"
	 "finish this long, 0 for none (default 10)",
	 CUSTOM(parse_grace)},
	/* One page to 64 MiB; the kernel may round up or cap it further. */
	{"pipe-size", 0, "BYTES", "capacity of each splice pipe (default 1048576)",
	 SIZE(pipe_size, 4096, 67108864, "pipe size must be 4096-67108864 bytes")},
	{"no-splice", 0, NULL, "move bytes through user space instead of splice(2)",
	 FLAG(no_splice)},
	/* The kernel doubles the value and keeps it below INT_MAX. */
	{"upstream-rcvbuf", 0, "BYTES",
	 "SO_RCVBUF of upstream sockets (default: unset,\n"
	 "so Linux autotunes it)",
	 SIZE(upstream_rcvbuf, 4096, 1073741824, "socket buffer size must be 4096 bytes to 1 GiB")},
	{"upstream-sndbuf", 0, "BYTES", "SO_SNDBUF of upstream sockets (default: unset)",
	 SIZE(upstream_sndbuf, 4096, 1073741824, "socket buffer size must be 4096 bytes to 1 GiB")},
	{"congestion", 0, "ALGO",
	 "TCP congestion control for upstream sockets\n"
	 "(default: the host's)",
	 CUSTOM(parse_congestion)},
	{"tcp-keepalive", 0, "SECONDS",
	 "probe idle upstream connections after this long,\n"
	 "0 for never (default 15)",
	 UNSIGNED(tcp_keepalive, 0, 32767, "tcp keepalive must be 0-32767 seconds")},
	{"intercept", 0, "PATTERN",
	 "decrypt CONNECTs to matching hosts (host name,\n"
	 "*.domain or IP; repeatable) and pool their\n"
	 "upstream TLS connections; needs --ca-cert/--ca-key",
	 CUSTOM(parse_intercept)},
	{"ca-cert", 0, "FILE",
	 "CA certificate that signs the intercepted hosts'\n"
	 "certificates (clients must trust it)",
	 STRING(ca_cert)},
	{"ca-key", 0, "FILE", "its private key (readable by its owner only)", STRING(ca_key)},
	{"make-ca", 0, "DIR",
	 "write a new CA (ca.crt, ca.key) to DIR, limited to\n"
	 "the --intercept patterns given, and exit",
	 STRING(make_ca_dir)},
	{"upstream-ca", 0, "FILE", "verify origins against FILE, not the system store",
	 STRING(upstream_ca)},
	{"leaf-cache", 0, "N", "minted certificates kept (default 256)",
	 UNSIGNED(leaf_cache, 1, 1000000, "leaf cache must be 1-1000000 certificates")},
	{"parent", 0, "URL",
	 "reach origins through a parent proxy:\n"
	 "socks5h://[USER:PASS@]HOST:PORT (it resolves names),\n"
	 "socks5://... (the proxy resolves) or http://...",
	 CUSTOM(parse_parent)},
	{"parent-for", 0, "PATTERN URL",
	 "hosts matching PATTERN (host name, *.domain, IP\n"
	 "or CIDR) go through the parent URL; repeatable,\n"
	 "the first matching rule wins, then --parent",
	 CUSTOM2(parse_parent_for)},
	{"direct", 0, "PATTERN", "hosts matching PATTERN go direct; a rule like\n"
	 "--parent-for",
	 CUSTOM(parse_direct)},
	{"parent-credentials", 0, "FILE",
	 "parent URLs with user:password@, one a line: a\n"
	 "parent named without credentials takes them from\n"
	 "the line of its scheme, host and port",
	 STRING(parent_credentials)},
	{"read-ahead", 0, NULL,
	 "after a client got one byte range of a URL, fetch\n"
	 "the range that follows before it asks (off)",
	 FLAG(read_ahead)},
	{"fetch-memory", 0, "BYTES",
	 "memory for answers the proxy fetches itself\n"
	 "(read-ahead, --split) and what it keeps about\n"
	 "them, in all, half per client (default 33554432)",
	 SIZE(fetch_memory, 1048576, FETCH_MEMORY_MAX, "fetch memory must be " FETCH_MEMORY_RANGE)},
	{"read-ahead-memory", 0, "BYTES", "--fetch-memory, by its former name",
	 SIZE(fetch_memory, 1048576, FETCH_MEMORY_MAX,
	      "read-ahead memory must be " FETCH_MEMORY_RANGE)},
	{"read-ahead-depth", 0, "N", "ranges fetched ahead of a client, at most (default 4)",
	 UNSIGNED(read_ahead_depth, 1, 8, "read-ahead depth must be 1-8")},
	{"read-ahead-ttl", 0, "SECONDS",
	 "how long a range fetched ahead waits for its\n"
	 "client (default 30)",
	 SECONDS(read_ahead_ttl, "read-ahead TTL must be a number of seconds above 0")},
	{"split", 0, "PATTERN",
	 "fetch big downloads from matching hosts (host\n"
	 "name, *.domain or IP; repeatable) as ranges of\n"
	 "--split-size, ahead of the client, which gets one\n"
	 "answer; a broken origin connection is resumed",
	 CUSTOM(parse_split)},
	{"split-size", 0, "BYTES", "bytes per range asked of the origin (default 8388608)",
	 SIZE(split_size, 65536, SPLIT_SIZE_MAX, "split size must be 65536 bytes to 1 GiB")},
	{"split-connections", 0, "N",
	 "connections one split download may use at once,\n"
	 "1-4 (default 1)",
	 UNSIGNED(split_connections, 1, 4, "split connections must be 1-4")},
	{"check-host", 0, NULL,
	 "print what on this host limits a download, what\n"
	 "it costs and the fix, and exit (1: something\n"
	 "limits); a URL after it is probed for the RTT",
	 FLAG(check_host)},
	{"json", 0, NULL, "print --check-host's report as JSON", FLAG(check_json)},
	{"rtt", 0, "MS",
	 "round trip of the path the host check judges,\n"
	 "at start and with --check-host (default 200)",
	 UNSIGNED(path_rtt_ms, 1, 60000, "rtt must be 1-60000 milliseconds")},
	{"rate", 0, "MBIT", "that path's rate in Mbit/s (default 500)",
	 UNSIGNED(path_rate_mbit, 1, 1000000, "rate must be 1-1000000 Mbit/s")},
	{"verbose", 'v', NULL, "more logging; repeat for more",
	 .kind = CONFIG_OPT_COUNT, .field = FIELD(verbosity, int)},
	{"version", 'V', NULL, "print the version and the TLS library, and exit",
	 .kind = CONFIG_OPT_VERSION},
	{"help", 'h', NULL, "print this help and exit", .kind = CONFIG_OPT_HELP},
	{.name = NULL},
};

#define NOPTIONS (sizeof(config_options) / sizeof(config_options[0]) - 1)

/* The column help text starts in; long-only flags sit three further right. */
#define HELP_COLUMN 31
#define HELP_COLUMN_LONG_ONLY 34

void
config_usage(FILE *out)
{
	fputs("Usage: keepalive-proxy [options]\n"
	      "       keepalive-proxy --check-host [--json] [options] [URL]\n"
	      "HTTP forward proxy that keeps upstream connections alive.\n"
	      "BYTES may end in K, M or G (KiB, MiB, GiB): --split-size 8M.\n"
	      "\n",
	      out);
	for (const struct config_option *o = config_options; o->name; o++) {
		char alias[5] = "";
		int column = o->short_name ? HELP_COLUMN : HELP_COLUMN_LONG_ONLY;
		/* "  -p, --" or "      --", the name, " ARG". */
		int width = 8 + (int)strlen(o->name) + (o->arg ? 1 + (int)strlen(o->arg) : 0);
		const char *line = o->help, *nl;

		if (o->short_name)
			snprintf(alias, sizeof(alias), "-%c, ", o->short_name);
		fprintf(out, "  %-4s--%s%s%s", alias, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		for (;;) {
			nl = strchr(line, '\n');
			fprintf(out, "%*s%.*s\n", width + 2 > column ? 2 : column - width, "",
			        (int)(nl ? (size_t)(nl - line) : strlen(line)), line);
			if (!nl)
				break;
			line = nl + 1;
			width = 0;
		}
	}
}

bool
config_bind_is_loopback(const char *addr)
{
	struct cidr c;
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} sa;

	if (cidr_parse(addr, &c) < 0 || strchr(addr, '/'))
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.sa.sa_family = c.family;
	if (c.family == AF_INET)
		memcpy(&sa.in.sin_addr, c.addr, 4);
	else
		memcpy(&sa.in6.sin6_addr, c.addr, 16);
	return cidr_is_loopback(&sa.sa);
}

/* What getopt_long returns for option i: its alias, or a code above every char. */
static int
option_code(size_t i)
{
	return config_options[i].short_name ? config_options[i].short_name : 256 + (int)i;
}

/* Stores arg as o says; NULL, or why it was refused. */
static const char *
option_apply(struct kp_config *cfg, const struct config_option *o, const char *arg)
{
	char *field = (char *)cfg + o->field;
	unsigned long n;

	switch (o->kind) {
	case CONFIG_OPT_UNSIGNED:
		if (parse_unsigned(arg, o->min, o->max, &n) < 0)
			return o->bad;
		*(unsigned *)field = (unsigned)n;
		return NULL;
	case CONFIG_OPT_SIZE:
		if (parse_size(arg, o->min, o->max, &n) < 0)
			return o->bad;
		*(size_t *)field = n;
		return NULL;
	case CONFIG_OPT_SECONDS:
		return parse_seconds(arg, (double *)field) < 0 ? o->bad : NULL;
	case CONFIG_OPT_STRING:
		*(const char **)field = arg;
		return NULL;
	case CONFIG_OPT_FLAG:
		*(bool *)field = true;
		return NULL;
	case CONFIG_OPT_COUNT:
		(*(int *)field)++;
		return NULL;
	case CONFIG_OPT_CIDRS:
		return add_range((struct cidr *)field, (unsigned *)((char *)cfg + o->count_field), arg,
		                 o->name);
	case CONFIG_OPT_CUSTOM:
		return o->parse(cfg, arg);
	case CONFIG_OPT_CUSTOM2:   /* apply_options() calls parse2 itself */
	case CONFIG_OPT_HELP:
	case CONFIG_OPT_VERSION:
		break;
	}
	return NULL;
}

/* Applies every option of argv in turn; stops at --help, --version or the first refused. */
static enum config_parse_result
apply_options(struct kp_config *cfg, int argc, char **argv, const char *tls_name, FILE *out,
              FILE *err)
{
	struct option longopts[NOPTIONS + 1];
	char shortopts[2 * NOPTIONS + 2] = ":";
	size_t nshort = 1;
	int c;

	for (size_t i = 0; i <= NOPTIONS; i++) {
		const struct config_option *o = &config_options[i];

		longopts[i] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
		                              o->name ? option_code(i) : 0};
		if (o->short_name) {
			shortopts[nshort++] = o->short_name;
			if (o->arg)
				shortopts[nshort++] = ':';
		}
	}
	shortopts[nshort] = '\0';
	/* 0, not 1: GNU getopt then also forgets a half-read "-vV" cluster. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct config_option *o = NULL;
		const char *bad;

		if (c == ':') {
			fprintf(err, "keepalive-proxy: option %s needs a value\n", argv[optind - 1]);
			return CONFIG_ERROR;
		}
		for (size_t i = 0; i < NOPTIONS && !o; i++)
			if (option_code(i) == c)
				o = &config_options[i];
		if (!o) {
			fprintf(err, "keepalive-proxy: unknown option %s (see --help)\n",
			        argv[optind - 1]);
			return CONFIG_ERROR;
		}
		if (o->kind == CONFIG_OPT_HELP) {
			config_usage(out);
			return CONFIG_EXIT_OK;
		}
		if (o->kind == CONFIG_OPT_VERSION) {
			/* Which package a router has: with TLS (--intercept) or without. */
			fprintf(out, "keepalive-proxy %s\nTLS: %s\n", KP_VERSION,
			        tls_name ? tls_name : "none (built with -DKP_TLS=OFF)");
			return CONFIG_EXIT_OK;
		}
		if (o->kind == CONFIG_OPT_CUSTOM2) {
			/* The second word is the next argument, whatever it looks like. */
			if (optind >= argc) {
				fprintf(err, "keepalive-proxy: option --%s needs %s\n", o->name, o->arg);
				return CONFIG_ERROR;
			}
			if ((bad = o->parse2(cfg, optarg, argv[optind])) != NULL) {
				fprintf(err, "keepalive-proxy: %s: '%s %s'\n", bad, optarg, argv[optind]);
				return CONFIG_ERROR;
			}
			optind++;
			continue;
		}
		if ((bad = option_apply(cfg, o, optarg)) != NULL) {
			fprintf(err, "keepalive-proxy: %s: '%s'\n", bad, optarg);
			return CONFIG_ERROR;
		}
	}
	return CONFIG_RUN;
}

/* Do the options hold together? False with the reason on err. */
static bool
options_agree(struct kp_config *cfg, const char *tls_name, FILE *err)
{
	if (cfg->check_json && !cfg->check_host) {
		fprintf(err, "keepalive-proxy: --json goes with --check-host\n");
		return false;
	}
	if (cfg->max_url_bytes > cfg->max_header_bytes)
		cfg->max_url_bytes = cfg->max_header_bytes;
	if ((cfg->nintercept || cfg->make_ca_dir) && !tls_name) {
		fprintf(err, "keepalive-proxy: --intercept and --make-ca need TLS, and this binary was "
		             "built without it (-DKP_TLS=OFF)\n");
		return false;
	}
	if (cfg->nintercept && !cfg->make_ca_dir && (!cfg->ca_cert || !cfg->ca_key)) {
		fprintf(err, "keepalive-proxy: --intercept needs --ca-cert and --ca-key (make a CA "
		             "with --make-ca DIR)\n");
		return false;
	}
	/* A piece must fit a client's share of the memory, or nothing is ever split. */
	if (cfg->nsplit && cfg->split_size + cfg->max_header_bytes + 1024 > cfg->fetch_memory / 2) {
		fprintf(err, "keepalive-proxy: --split-size %zu does not fit a client's share of "
		             "--fetch-memory (half of %zu bytes, less a head): raise "
		             "--fetch-memory or lower --split-size\n",
		        cfg->split_size, cfg->fetch_memory);
		return false;
	}
	if (cfg->stats_addr && !cfg->nallow && !config_bind_is_loopback(cfg->stats_addr)) {
		fprintf(err, "keepalive-proxy: a stats page on %s without --allow would show anyone "
		             "who reaches it what the proxy does; list who may read it with --allow\n",
		        cfg->stats_addr);
		return false;
	}
	if (!cfg->nallow && !cfg->auth_file && !config_bind_is_loopback(cfg->bind_addr)) {
		fprintf(err, "keepalive-proxy: listening on %s without --allow or --auth-file would "
		             "let anyone who reaches it use the proxy; list the clients with --allow "
		             "CIDR (--allow 0.0.0.0/0 or ::/0 to serve anyone), or require "
		             "--auth-file\n",
		        cfg->bind_addr);
		return false;
	}
	return true;
}

enum config_parse_result
config_parse(struct kp_config *cfg, int argc, char **argv, const char *tls_name, FILE *out,
             FILE *err)
{
	enum config_parse_result r = apply_options(cfg, argc, argv, tls_name, out, err);

	if (r != CONFIG_RUN)
		return r;
	/* One word may follow --check-host: the URL whose path it should judge. */
	if (cfg->check_host && optind == argc - 1)
		cfg->check_url = argv[optind++];
	if (optind < argc) {
		fprintf(err, "keepalive-proxy: unexpected argument '%s' (see --help)\n", argv[optind]);
		return CONFIG_ERROR;
	}
	return options_agree(cfg, tls_name, err) ? CONFIG_RUN : CONFIG_ERROR;
}
