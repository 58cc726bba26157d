#include "kp/config.h"

#include "kp/intercept.h"
#include "kp/tls.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

void
config_defaults(struct kp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->bind_addr = "127.0.0.1";
	cfg->port = 9250;
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
	cfg->max_header_bytes = 32768;
	cfg->max_url_bytes = 8192;
	cfg->max_clients = 10000;
	cfg->dns_cache_ttl = 60;
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
	cfg->connect_ports[443 / 8] |= 1u << (443 % 8);
	/*
	 * 1 MiB: what Linux lets any user ask for (fs.pipe-max-size), and on
	 * loopback it took a fifth less CPU per GiB than 256 KiB (bench/bulk).
	 * The kernel holds pages only for bytes actually in a pipe.
	 */
	cfg->pipe_size = 1048576;
	/* A few hundred hosts is more than a household visits in a day; each leaf is ~1 KiB. */
	cfg->leaf_cache = 256;
	cfg->verbosity = 0;
}

void
config_usage(FILE *out)
{
	fputs("Usage: keepalive-proxy [options]\n"
	      "HTTP forward proxy that keeps upstream connections alive.\n"
	      "\n"
	      "  -p, --port PORT              listen port (default 9250)\n"
	      "  -b, --bind ADDR              listen address, IPv4 or IPv6 (default 127.0.0.1)\n"
	      "      --allow CIDR                clients that may use the proxy (repeatable; others\n"
	      "                                  get 403); needed, or --auth-file, to listen on\n"
	      "                                  an address other than loopback\n"
	      "      --auth-file FILE            require Basic proxy authentication against the\n"
	      "                                  user:password lines of FILE (re-read on SIGHUP)\n"
	      "      --deny-dest CIDR            destinations no client may reach (repeatable)\n"
	      "      --allow-dest CIDR           destinations clients beyond this machine may\n"
	      "                                  reach after all: loopback, link-local and this\n"
	      "                                  machine's own addresses are refused to them\n"
	      "  -u, --user USER              drop root for USER after binding and reading\n"
	      "                               --auth-file\n"
	      "  -t, --idle-timeout SECONDS   keep an idle upstream connection this long (default 50)\n"
	      "  -m, --max-idle-per-host N    idle upstream connections kept per host:port (default 8)\n"
	      "  -M, --max-idle N             idle upstream connections kept in all (default 256);\n"
	      "                               a burst above either cap is trimmed after 1 s\n"
	      "      --max-conns-per-host N      upstream connections per host:port; more\n"
	      "                                  requests wait in a queue (default 0: no cap)\n"
	      "      --queue-timeout SECONDS     longest wait for an upstream connection, then\n"
	      "                                  503 (default 30)\n"
	      "      --no-connect-race           a request waits for the connect it caused, not\n"
	      "                                  for whichever connection frees first (for\n"
	      "                                  comparisons)\n"
	      "      --connect-timeout SECONDS   TCP connect to one origin address (default 10)\n"
	      "      --response-timeout SECONDS  wait for a response header, then 504 (default 60)\n"
	      "      --io-timeout SECONDS        close an exchange that makes no progress (default 300)\n"
	      "      --client-timeout SECONDS    close an idle client connection (default 60)\n"
	      "      --header-timeout SECONDS    answer 408 when a request head takes longer\n"
	      "                                  than this from its first byte (default 30)\n"
	      "      --max-header-size BYTES     largest request or response head (default 32768)\n"
	      "      --max-url-size BYTES        longest request-target (default 8192)\n"
	      "      --max-clients N             client connections at once (default 10000)\n"
	      "      --dns-ttl SECONDS           reuse a resolved name this long (default 60)\n"
	      "      --connect-ports LIST        ports CONNECT may reach, comma-separated, or *\n"
	      "                                  for any (default 443)\n"
	      "      --tunnel-timeout SECONDS    close a silent tunnel (default 600)\n"
	      "      --access-log FILE           one line per request to FILE (or 'syslog');\n"
	      "                                  reopened on SIGHUP\n"
	      "      --log-query                 keep query strings in the access log\n"
	      "      --syslog                    log to syslog (facility daemon), not stderr\n"
	      "      --pidfile FILE              write the process id to FILE once listening\n"
	      "      --stats-listen ADDR:PORT    serve GET /metrics (Prometheus) and /stats (JSON)\n"
	      "                                  there, e.g. 127.0.0.1:9251 or [::1]:9251 (off)\n"
	      "      --grace SECONDS             on SIGTERM or SIGINT, let responses in flight\n"
	      "                                  finish this long, 0 for none (default 10)\n"
	      "      --pipe-size BYTES           capacity of each splice pipe (default 1048576)\n"
	      "      --no-splice                 move bytes through user space instead of splice(2)\n"
	      "      --upstream-rcvbuf BYTES     SO_RCVBUF of upstream sockets (default: unset,\n"
	      "                                  so Linux autotunes it)\n"
	      "      --upstream-sndbuf BYTES     SO_SNDBUF of upstream sockets (default: unset)\n"
	      "      --congestion ALGO           TCP congestion control for upstream sockets\n"
	      "                                  (default: the host's)\n"
	      "      --tcp-keepalive SECONDS     probe idle upstream connections after this long,\n"
	      "                                  0 for never (default 15)\n"
	      "      --intercept PATTERN         decrypt CONNECTs to matching hosts (host name,\n"
	      "                                  *.domain or IP; repeatable) and pool their\n"
	      "                                  upstream TLS connections; needs --ca-cert/--ca-key\n"
	      "      --ca-cert FILE              CA certificate that signs the intercepted hosts'\n"
	      "                                  certificates (clients must trust it)\n"
	      "      --ca-key FILE               its private key (readable by its owner only)\n"
	      "      --make-ca DIR               write a new CA (ca.crt, ca.key) to DIR, limited to\n"
	      "                                  the --intercept patterns given, and exit\n"
	      "      --upstream-ca FILE          verify origins against FILE, not the system store\n"
	      "      --leaf-cache N              minted certificates kept (default 256)\n"
	      "  -v, --verbose                more logging; repeat for more\n"
	      "  -V, --version                print the version and the TLS library, and exit\n"
	      "  -h, --help                   print this help and exit\n",
	      out);
}

enum long_only_option {
	OPT_CONNECT_TIMEOUT = 256,
	OPT_RESPONSE_TIMEOUT,
	OPT_IO_TIMEOUT,
	OPT_CLIENT_TIMEOUT,
	OPT_MAX_HEADER,
	OPT_MAX_URL,
	OPT_MAX_CLIENTS,
	OPT_DNS_TTL,
	OPT_CONNECT_PORTS,
	OPT_TUNNEL_TIMEOUT,
	OPT_PIPE_SIZE,
	OPT_NO_SPLICE,
	OPT_MAX_CONNS_PER_HOST,
	OPT_QUEUE_TIMEOUT,
	OPT_NO_CONNECT_RACE,
	OPT_UPSTREAM_RCVBUF,
	OPT_UPSTREAM_SNDBUF,
	OPT_CONGESTION,
	OPT_TCP_KEEPALIVE,
	OPT_ALLOW,
	OPT_AUTH_FILE,
	OPT_HEADER_TIMEOUT,
	OPT_DENY_DEST,
	OPT_ALLOW_DEST,
	OPT_GRACE,
	OPT_STATS_LISTEN,
	OPT_ACCESS_LOG,
	OPT_LOG_QUERY,
	OPT_SYSLOG,
	OPT_PIDFILE,
	OPT_INTERCEPT,
	OPT_CA_CERT,
	OPT_CA_KEY,
	OPT_MAKE_CA,
	OPT_UPSTREAM_CA,
	OPT_LEAF_CACHE,
};

static const struct option long_options[] = {
	{"port", required_argument, NULL, 'p'},
	{"bind", required_argument, NULL, 'b'},
	{"user", required_argument, NULL, 'u'},
	{"idle-timeout", required_argument, NULL, 't'},
	{"max-idle-per-host", required_argument, NULL, 'm'},
	{"max-idle", required_argument, NULL, 'M'},
	{"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
	{"response-timeout", required_argument, NULL, OPT_RESPONSE_TIMEOUT},
	{"io-timeout", required_argument, NULL, OPT_IO_TIMEOUT},
	{"client-timeout", required_argument, NULL, OPT_CLIENT_TIMEOUT},
	{"max-header-size", required_argument, NULL, OPT_MAX_HEADER},
	{"max-url-size", required_argument, NULL, OPT_MAX_URL},
	{"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
	{"dns-ttl", required_argument, NULL, OPT_DNS_TTL},
	{"connect-ports", required_argument, NULL, OPT_CONNECT_PORTS},
	{"tunnel-timeout", required_argument, NULL, OPT_TUNNEL_TIMEOUT},
	{"pipe-size", required_argument, NULL, OPT_PIPE_SIZE},
	{"no-splice", no_argument, NULL, OPT_NO_SPLICE},
	{"max-conns-per-host", required_argument, NULL, OPT_MAX_CONNS_PER_HOST},
	{"queue-timeout", required_argument, NULL, OPT_QUEUE_TIMEOUT},
	{"no-connect-race", no_argument, NULL, OPT_NO_CONNECT_RACE},
	{"upstream-rcvbuf", required_argument, NULL, OPT_UPSTREAM_RCVBUF},
	{"upstream-sndbuf", required_argument, NULL, OPT_UPSTREAM_SNDBUF},
	{"congestion", required_argument, NULL, OPT_CONGESTION},
	{"tcp-keepalive", required_argument, NULL, OPT_TCP_KEEPALIVE},
	{"allow", required_argument, NULL, OPT_ALLOW},
	{"auth-file", required_argument, NULL, OPT_AUTH_FILE},
	{"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
	{"deny-dest", required_argument, NULL, OPT_DENY_DEST},
	{"allow-dest", required_argument, NULL, OPT_ALLOW_DEST},
	{"grace", required_argument, NULL, OPT_GRACE},
	{"stats-listen", required_argument, NULL, OPT_STATS_LISTEN},
	{"access-log", required_argument, NULL, OPT_ACCESS_LOG},
	{"log-query", no_argument, NULL, OPT_LOG_QUERY},
	{"syslog", no_argument, NULL, OPT_SYSLOG},
	{"pidfile", required_argument, NULL, OPT_PIDFILE},
	{"intercept", required_argument, NULL, OPT_INTERCEPT},
	{"ca-cert", required_argument, NULL, OPT_CA_CERT},
	{"ca-key", required_argument, NULL, OPT_CA_KEY},
	{"make-ca", required_argument, NULL, OPT_MAKE_CA},
	{"upstream-ca", required_argument, NULL, OPT_UPSTREAM_CA},
	{"leaf-cache", required_argument, NULL, OPT_LEAF_CACHE},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

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
static int
parse_port_list(struct kp_config *cfg, const char *s)
{
	uint8_t bits[sizeof(cfg->connect_ports)] = {0};
	const char *p = s;

	if (strcmp(s, "*") == 0) {
		cfg->connect_any_port = true;
		return 0;
	}
	for (;;) {
		char *end;
		unsigned long port;

		if (*p < '0' || *p > '9')
			return -1;
		errno = 0;
		port = strtoul(p, &end, 10);
		if (errno || port == 0 || port > 65535)
			return -1;
		bits[port / 8] |= (uint8_t)(1u << (port % 8));
		if (*end == '\0')
			break;
		if (*end != ',')
			return -1;
		p = end + 1;
	}
	memcpy(cfg->connect_ports, bits, sizeof(bits));
	cfg->connect_any_port = false;
	return 0;
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

/* Appends a range to a list; NULL, or what is wrong. */
static const char *
add_range(struct cidr *list, unsigned *n, const char *text, const char *flag)
{
	static char why[96];

	if (*n == KP_MAX_CIDRS) {
		snprintf(why, sizeof(why), "too many %s ranges (at most %d)", flag, KP_MAX_CIDRS);
		return why;
	}
	if (cidr_parse(text, &list[*n]) < 0) {
		snprintf(why, sizeof(why), "%s wants an address or a range such as 192.168.1.0/24",
		         flag);
		return why;
	}
	(*n)++;
	return NULL;
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

enum config_parse_result
config_parse(struct kp_config *cfg, int argc, char **argv, FILE *out, FILE *err)
{
	unsigned long n;
	int c;

	/* 0, not 1: GNU getopt then also forgets a half-read "-vV" cluster. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:b:u:t:m:M:vVh", long_options, NULL)) != -1) {
		const char *bad = NULL;

		switch (c) {
		case 'p':
			if (parse_unsigned(optarg, 1, 65535, &n) < 0)
				bad = "port must be 1-65535";
			else
				cfg->port = (unsigned)n;
			break;
		case 'b':
			cfg->bind_addr = optarg;
			break;
		case 'u':
			cfg->user = optarg;
			break;
		case 't':
			if (parse_seconds(optarg, &cfg->idle_timeout) < 0)
				bad = "idle timeout must be a number of seconds above 0";
			break;
		case 'm':
			if (parse_unsigned(optarg, 0, 1000000, &n) < 0)
				bad = "max idle per host must be a whole number";
			else
				cfg->max_idle_per_host = (unsigned)n;
			break;
		case 'M':
			if (parse_unsigned(optarg, 0, 1000000, &n) < 0)
				bad = "max idle must be a whole number";
			else
				cfg->max_idle_total = (unsigned)n;
			break;
		case OPT_CONNECT_TIMEOUT:
			if (parse_seconds(optarg, &cfg->connect_timeout) < 0)
				bad = "connect timeout must be a number of seconds above 0";
			break;
		case OPT_RESPONSE_TIMEOUT:
			if (parse_seconds(optarg, &cfg->response_timeout) < 0)
				bad = "response timeout must be a number of seconds above 0";
			break;
		case OPT_IO_TIMEOUT:
			if (parse_seconds(optarg, &cfg->io_timeout) < 0)
				bad = "io timeout must be a number of seconds above 0";
			break;
		case OPT_CLIENT_TIMEOUT:
			if (parse_seconds(optarg, &cfg->client_idle_timeout) < 0)
				bad = "client timeout must be a number of seconds above 0";
			break;
		case OPT_MAX_HEADER:
			/* Below 1 KiB nothing real fits; above 1 MiB it is a memory lever. */
			if (parse_unsigned(optarg, 1024, 1048576, &n) < 0)
				bad = "max header size must be 1024-1048576 bytes";
			else
				cfg->max_header_bytes = n;
			break;
		case OPT_MAX_URL:
			if (parse_unsigned(optarg, 64, 1048576, &n) < 0)
				bad = "max url size must be 64-1048576 bytes";
			else
				cfg->max_url_bytes = n;
			break;
		case OPT_MAX_CLIENTS:
			if (parse_unsigned(optarg, 1, 10000000, &n) < 0)
				bad = "max clients must be a whole number above 0";
			else
				cfg->max_clients = (unsigned)n;
			break;
		case OPT_DNS_TTL:
			if (parse_seconds(optarg, &cfg->dns_cache_ttl) < 0)
				bad = "dns ttl must be a number of seconds above 0";
			break;
		case OPT_CONNECT_PORTS:
			if (parse_port_list(cfg, optarg) < 0)
				bad = "connect ports must be '*' or a comma-separated list of 1-65535";
			break;
		case OPT_TUNNEL_TIMEOUT:
			if (parse_seconds(optarg, &cfg->tunnel_timeout) < 0)
				bad = "tunnel timeout must be a number of seconds above 0";
			break;
		case OPT_PIPE_SIZE:
			/* One page to 64 MiB; the kernel may round up or cap it further. */
			if (parse_unsigned(optarg, 4096, 67108864, &n) < 0)
				bad = "pipe size must be 4096-67108864 bytes";
			else
				cfg->pipe_size = n;
			break;
		case OPT_NO_SPLICE:
			cfg->no_splice = true;
			break;
		case OPT_MAX_CONNS_PER_HOST:
			if (parse_unsigned(optarg, 0, 1000000, &n) < 0)
				bad = "max conns per host must be a whole number (0: no cap)";
			else
				cfg->max_conns_per_host = (unsigned)n;
			break;
		case OPT_QUEUE_TIMEOUT:
			if (parse_seconds(optarg, &cfg->queue_timeout) < 0)
				bad = "queue timeout must be a number of seconds above 0";
			break;
		case OPT_NO_CONNECT_RACE:
			cfg->no_connect_race = true;
			break;
		case OPT_UPSTREAM_RCVBUF:
		case OPT_UPSTREAM_SNDBUF:
			/* The kernel doubles the value and keeps it below INT_MAX. */
			if (parse_unsigned(optarg, 4096, 1073741824, &n) < 0)
				bad = "socket buffer size must be 4096-1073741824 bytes";
			else if (c == OPT_UPSTREAM_RCVBUF)
				cfg->upstream_rcvbuf = (unsigned)n;
			else
				cfg->upstream_sndbuf = (unsigned)n;
			break;
		case OPT_CONGESTION:
			/* TCP_CA_NAME_MAX is 16 with the NUL. */
			if (*optarg == '\0' || strlen(optarg) > 15)
				bad = "congestion control name must be 1-15 characters";
			else
				cfg->congestion = optarg;
			break;
		case OPT_ALLOW:
			bad = add_range(cfg->allow, &cfg->nallow, optarg, "--allow");
			break;
		case OPT_DENY_DEST:
			bad = add_range(cfg->deny_dest, &cfg->ndeny_dest, optarg, "--deny-dest");
			break;
		case OPT_ALLOW_DEST:
			bad = add_range(cfg->allow_dest, &cfg->nallow_dest, optarg, "--allow-dest");
			break;
		case OPT_ACCESS_LOG:
			cfg->access_log = optarg;
			break;
		case OPT_LOG_QUERY:
			cfg->log_query = true;
			break;
		case OPT_SYSLOG:
			cfg->syslog = true;
			break;
		case OPT_PIDFILE:
			cfg->pidfile = optarg;
			break;
		case OPT_INTERCEPT:
			if ((bad = intercept_pattern_problem(optarg)) != NULL)
				break;
			if (cfg->nintercept == KP_MAX_INTERCEPT)
				bad = "too many --intercept patterns";
			else
				cfg->intercept[cfg->nintercept++] = optarg;
			break;
		case OPT_CA_CERT:
			cfg->ca_cert = optarg;
			break;
		case OPT_CA_KEY:
			cfg->ca_key = optarg;
			break;
		case OPT_MAKE_CA:
			cfg->make_ca_dir = optarg;
			break;
		case OPT_UPSTREAM_CA:
			cfg->upstream_ca = optarg;
			break;
		case OPT_LEAF_CACHE:
			if (parse_unsigned(optarg, 1, 1000000, &n) < 0)
				bad = "leaf cache must be 1-1000000 certificates";
			else
				cfg->leaf_cache = (unsigned)n;
			break;
		case OPT_STATS_LISTEN:
			bad = parse_listen(cfg, optarg);
			break;
		case OPT_GRACE:
			/* 0 is allowed: stop at once. */
			if (strcmp(optarg, "0") == 0)
				cfg->grace = 0;
			else if (parse_seconds(optarg, &cfg->grace) < 0)
				bad = "grace must be 0 or a number of seconds";
			break;
		case OPT_HEADER_TIMEOUT:
			if (parse_seconds(optarg, &cfg->header_timeout) < 0)
				bad = "header timeout must be a number of seconds above 0";
			break;
		case OPT_AUTH_FILE:
			cfg->auth_file = optarg;
			break;
		case OPT_TCP_KEEPALIVE:
			if (parse_unsigned(optarg, 0, 32767, &n) < 0)
				bad = "tcp keepalive must be 0-32767 seconds";
			else
				cfg->tcp_keepalive = (unsigned)n;
			break;
		case 'v':
			cfg->verbosity++;
			break;
		case 'V':
			/* Which package a router has: with TLS (--intercept) or without. */
			fprintf(out, "keepalive-proxy %s\nTLS: %s\n", KP_VERSION,
			        tls_built_in() ? tls_backend_name() : "none (built with -DKP_TLS=OFF)");
			return CONFIG_EXIT_OK;
		case 'h':
			config_usage(out);
			return CONFIG_EXIT_OK;
		case ':':
			fprintf(err, "keepalive-proxy: option %s needs a value\n", argv[optind - 1]);
			return CONFIG_ERROR;
		default:
			fprintf(err, "keepalive-proxy: unknown option %s (see --help)\n",
			        argv[optind - 1]);
			return CONFIG_ERROR;
		}
		if (bad) {
			fprintf(err, "keepalive-proxy: %s: '%s'\n", bad, optarg);
			return CONFIG_ERROR;
		}
	}
	if (optind < argc) {
		fprintf(err, "keepalive-proxy: unexpected argument '%s' (see --help)\n", argv[optind]);
		return CONFIG_ERROR;
	}
	if (cfg->max_url_bytes > cfg->max_header_bytes)
		cfg->max_url_bytes = cfg->max_header_bytes;
	if ((cfg->nintercept || cfg->make_ca_dir) && !tls_built_in()) {
		fprintf(err, "keepalive-proxy: --intercept and --make-ca need TLS, and this binary was "
		             "built without it (-DKP_TLS=OFF)\n");
		return CONFIG_ERROR;
	}
	if (cfg->nintercept && !cfg->make_ca_dir && (!cfg->ca_cert || !cfg->ca_key)) {
		fprintf(err, "keepalive-proxy: --intercept needs --ca-cert and --ca-key (make a CA "
		             "with --make-ca DIR)\n");
		return CONFIG_ERROR;
	}
	if (cfg->stats_addr && !cfg->nallow && !config_bind_is_loopback(cfg->stats_addr)) {
		fprintf(err, "keepalive-proxy: a stats page on %s without --allow would show anyone "
		             "who reaches it what the proxy does; list who may read it with --allow\n",
		        cfg->stats_addr);
		return CONFIG_ERROR;
	}
	if (!cfg->nallow && !cfg->auth_file && !config_bind_is_loopback(cfg->bind_addr)) {
		fprintf(err, "keepalive-proxy: listening on %s without --allow or --auth-file would "
		             "let anyone who reaches it use the proxy; list the clients with --allow "
		             "CIDR (--allow 0.0.0.0/0 or ::/0 to serve anyone), or require "
		             "--auth-file\n",
		        cfg->bind_addr);
		return CONFIG_ERROR;
	}
	return CONFIG_RUN;
}
