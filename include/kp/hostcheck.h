/*
 * What on this host limits a download, judged against the path the user
 * cares about: read, never changed.
 *
 * The reader takes a root directory ("/" in real use, a fake tree in the
 * tests) and reads the kernel's settings below it (proc/sys/net/...). The
 * loopback routes arrive as the text `ip -o -4 route show table local dev lo`
 * prints, and the descriptor limit as a number, so that every fact can be
 * faked. A finding is data: what was found, what it costs on the path, and
 * the command or contrib/ file that changes it. Printing is separate, and
 * nothing here logs.
 */
#ifndef KP_HOSTCHECK_H
#define KP_HOSTCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kp/config.h"

/*
 * The path judged when --rtt and --rate are not given: an origin on the far
 * side of the world over a fast home line, the long path on which the
 * host's own ceilings show first (a 6 MiB receive maximum caps it, 32 MiB
 * does not).
 */
#define HOSTCHECK_RTT_MS 200
#define HOSTCHECK_RATE_MBIT 500

/*
 * The share of a receive buffer the kernel advertises as window; the rest
 * pays for its bookkeeping. Measured by bench/wan.py's long-fat scenario on
 * kernel 6.18 (bench/RESULTS.md: 150 of 252 and 830 of 1342 Mbit/s).
 */
#define HOSTCHECK_WINDOW_SHARE 0.62

#define HOSTCHECK_MAX_FINDINGS 12

enum hostcheck_status {
	HOSTCHECK_OK,       /* nothing to gain here */
	HOSTCHECK_NOTE,     /* costs little, or only on the side this host does not control */
	HOSTCHECK_LIMITS,   /* caps the path judged, or what the flags ask for */
	HOSTCHECK_UNKNOWN,  /* could not be read */
};

struct hostcheck_finding {
	const char *key;              /* stable name for scripts: "tcp_rmem", "fd_limit", ... */
	enum hostcheck_status status;
	char value[128];              /* the setting as read ("4096 131072 6291456"); "": none */
	double cap_mbit;              /* one stream's ceiling it sets on the path; 0: none */
	char what[320];               /* one line: the setting and what it means on the path */
	char cost[400];               /* what it costs, and the measurement behind it; "": none */
	char fix[300];                /* the command or contrib/ file that changes it; "": none */
};

/* Where the facts come from; the tests fake every one. */
struct hostcheck_input {
	const char *root;             /* proc/sys/... is read below it; "/" in real use */
	const char *routes;           /* `ip -o -4 route show table local dev lo`; NULL: unknown */
	unsigned long long fd_limit;  /* hard RLIMIT_NOFILE, which the daemon raises to;
	                                 0: unknown, ULLONG_MAX: unlimited */
	bool privileged;              /* root staying root (no -u): may pass net.core.rmem_max
	                                 and pick a congestion control that is not allowed */
	const char *tls_name;         /* the TLS library built in; NULL: none */
	const char *probe_url;        /* a URL whose round trip was measured; NULL: none */
	double probe_rtt_ms;          /* its TCP connect time; <= 0: the probe failed */
	const char *probe_error;      /* why it failed */
	/*
	 * The probe went through this parent (its label; NULL: direct), whose
	 * TCP connect took probe_parent_ms and which took probe_open_ms to open
	 * the path; probe_rtt_ms is then the round trip through it.
	 */
	const char *probe_parent;
	double probe_parent_ms;
	double probe_open_ms;
};

struct hostcheck_report {
	double rtt_ms;                /* the path judged */
	double rate_mbit;
	const char *rtt_from;         /* "--rtt", "probe" or "default" */
	const char *rate_from;        /* "--rate" or "default" */
	struct hostcheck_finding finding[HOSTCHECK_MAX_FINDINGS];
	unsigned n;
};

/*
 * Fills in what this process knows of itself: root "/", the hard open-file
 * limit, whether it stays root, the TLS library built in (NULL: none).
 * Routes and a probe are left to the caller, which may not want to wait.
 */
void hostcheck_input_local(struct hostcheck_input *in, const struct kp_config *cfg,
                           const char *tls_name);

/*
 * Reads every setting and judges it against the path (cfg->path_rtt_ms,
 * path_rate_mbit, else a probed round trip, else the defaults above) and
 * against what cfg asks for (--upstream-rcvbuf, --congestion, --max-clients).
 */
void hostcheck_run(struct hostcheck_report *r, const struct hostcheck_input *in,
                   const struct kp_config *cfg);

/* Does any finding limit? --check-host exits 1 then. */
bool hostcheck_limited(const struct hostcheck_report *r);

/* The report for a person: every finding with its cost and fix. */
void hostcheck_print_text(FILE *out, const struct hostcheck_report *r);
/* The same as one JSON object, for scripts and a web page. */
void hostcheck_print_json(FILE *out, const struct hostcheck_report *r);

/* The limiting findings' what lines, joined by "; " into buf; 0 when none limits. */
size_t hostcheck_summary(const struct hostcheck_report *r, char *buf, size_t len);

/*
 * Runs `ip -o -4 route show table local dev lo` (iproute2) and keeps its
 * output in buf. Blocks until ip exits: for before the event loop only.
 * 0, or -1 when ip is missing or failed.
 */
int hostcheck_read_routes(char *buf, size_t len);

#endif
