/*
 * The host check: each finding read from a fake /proc/sys tree and fake
 * route text, limiting and not; the path it is judged on; the exit rule;
 * the text and JSON reports; and one run on the real host, which must not
 * fail whatever the host is like.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kp/hostcheck.h"

/* What ip prints for loopback, with the windows raised by contrib/loopback-initcwnd.sh ... */
#define ROUTES_RAISED \
	"local 127.0.0.0/8 proto kernel scope host src 127.0.0.1 initcwnd 100 initrwnd 100 \n" \
	"local 127.0.0.1 proto kernel scope host src 127.0.0.1 initcwnd 100 initrwnd 100 \n" \
	"broadcast 127.255.255.255 proto kernel scope link src 127.0.0.1 \n"
/* ... and as a fresh kernel has them. */
#define ROUTES_KERNEL \
	"local 127.0.0.0/8 proto kernel scope host src 127.0.0.1 \n" \
	"local 127.0.0.1 proto kernel scope host src 127.0.0.1 \n" \
	"broadcast 127.255.255.255 proto kernel scope link src 127.0.0.1 \n"

/* The keys in the order the report lists them, without a probe. */
static const char *const keys[] = {
	"tcp_rmem", "rmem_max", "tcp_wmem", "wmem_max", "slow_start_after_idle",
	"congestion", "loopback", "fd_limit", "tls",
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* One test's fake host: a tree, the other facts, and the flags judged. */
struct fake {
	char root[64];
	struct hostcheck_input in;
	struct kp_config cfg;
	struct hostcheck_report r;
};

static void
put(struct fake *h, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/sys/%s", h->root, name);
	for (char *slash = strchr(path + strlen(h->root) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/*
 * A host with nothing to fix, as contrib/sysctl.d leaves one, with the
 * kernel's tabs and newline in the files.
 */
static int
setup(void **state)
{
	struct fake *h = calloc(1, sizeof(*h));

	assert_non_null(h);
	snprintf(h->root, sizeof(h->root), "/tmp/kp-hostcheck-XXXXXX");
	assert_non_null(mkdtemp(h->root));
	put(h, "net/ipv4/tcp_rmem", "4096\t131072\t67108864\n");
	put(h, "net/ipv4/tcp_wmem", "4096\t16384\t67108864\n");
	put(h, "net/core/rmem_max", "67108864\n");
	put(h, "net/core/wmem_max", "67108864\n");
	put(h, "net/ipv4/tcp_slow_start_after_idle", "0\n");
	put(h, "net/ipv4/tcp_congestion_control", "cubic\n");
	put(h, "net/ipv4/tcp_allowed_congestion_control", "reno cubic\n");
	put(h, "net/ipv4/tcp_available_congestion_control", "reno cubic\n");
	h->in.root = h->root;
	h->in.routes = ROUTES_RAISED;
	h->in.fd_limit = 1048576;
	h->in.tls_name = "TestTLS 1.0";
	config_defaults(&h->cfg);
	*state = h;
	return 0;
}

static int
remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
teardown(void **state)
{
	struct fake *h = *state;

	nftw(h->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(h);
	return 0;
}

static const struct hostcheck_finding *
judge(struct fake *h, const char *key)
{
	hostcheck_run(&h->r, &h->in, &h->cfg);
	for (unsigned i = 0; i < h->r.n; i++)
		if (strcmp(h->r.finding[i].key, key) == 0)
			return &h->r.finding[i];
	fail_msg("no finding %s", key);
	return NULL;
}

#define assert_status(f, s) \
	do { \
		if ((f)->status != (s)) \
			fail_msg("%s: status %d, not %d (%s)", (f)->key, (f)->status, (s), \
			         (f)->what); \
	} while (0)
#define assert_contains(text, part) \
	do { \
		if (!strstr((text), (part))) \
			fail_msg("\"%s\" lacks \"%s\"", (text), (part)); \
	} while (0)

static void
test_nothing_to_fix(void **state)
{
	struct fake *h = *state;
	char summary[256];

	judge(h, "tls");
	assert_int_equal(h->r.n, NKEYS);
	for (unsigned i = 0; i < NKEYS; i++) {
		assert_string_equal(h->r.finding[i].key, keys[i]);
		assert_status(&h->r.finding[i], HOSTCHECK_OK);
		assert_string_equal(h->r.finding[i].fix, "");
	}
	assert_false(hostcheck_limited(&h->r));
	assert_int_equal(hostcheck_summary(&h->r, summary, sizeof(summary)), 0);
	assert_string_equal(summary, "");
	/* The path judged when none is given. */
	assert_true(h->r.rtt_ms == HOSTCHECK_RTT_MS && h->r.rate_mbit == HOSTCHECK_RATE_MBIT);
	assert_string_equal(h->r.rtt_from, "default");
	assert_string_equal(h->r.rate_from, "default");
}

/* Debian 12's 6 MiB caps the default path; a shorter path it does not. */
static void
test_rmem(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;
	char summary[512];

	put(h, "net/ipv4/tcp_rmem", "4096\t131072\t6291456\n");
	f = judge(h, "tcp_rmem");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_string_equal(f->value, "4096 131072 6291456");
	/* 62% of 6 MiB a round trip of 200 ms. */
	assert_true(fabs(f->cap_mbit - 0.62 * 6291456 * 8 / 0.2 / 1e6) < 0.01);
	assert_contains(f->what,
	                "net.ipv4.tcp_rmem max 6 MiB: one stream at most 156 Mbit/s at 200 ms");
	assert_contains(f->fix, "sysctl -w net.ipv4.tcp_rmem='4096 131072 67108864'");
	assert_contains(f->fix, "contrib/sysctl.d/60-keepalive-proxy.conf");
	assert_true(hostcheck_limited(&h->r));
	assert_true(hostcheck_summary(&h->r, summary, sizeof(summary)) > 0);
	assert_string_equal(summary, f->what);

	/* 624 Mbit/s at 50 ms carries 500. */
	h->cfg.path_rtt_ms = 50;
	f = judge(h, "tcp_rmem");
	assert_status(f, HOSTCHECK_OK);
	assert_false(hostcheck_limited(&h->r));
	assert_string_equal(h->r.rtt_from, "--rtt");

	/* This kernel's 32 MiB carries 500 at 200 ms but not 1000 (bench: 830). */
	h->cfg.path_rtt_ms = 0;
	put(h, "net/ipv4/tcp_rmem", "4096 131072 33554432");
	assert_status(judge(h, "tcp_rmem"), HOSTCHECK_OK);
	h->cfg.path_rate_mbit = 1000;
	f = judge(h, "tcp_rmem");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_string_equal(h->r.rate_from, "--rate");
	assert_contains(f->fix, "'4096 131072 67108864'");
	/* A path beyond 64 MiB gets the next power of two that carries it: 403 MB here. */
	h->cfg.path_rate_mbit = 10000;
	f = judge(h, "tcp_rmem");
	assert_contains(f->fix, "'4096 131072 536870912'");

	/* With --upstream-rcvbuf the proxy's sockets do not autotune: only direct downloads pay. */
	h->cfg.path_rate_mbit = 0;
	put(h, "net/ipv4/tcp_rmem", "4096 131072 6291456");
	h->cfg.upstream_rcvbuf = 64u << 20;
	f = judge(h, "tcp_rmem");
	assert_status(f, HOSTCHECK_NOTE);
	assert_contains(f->cost, "--upstream-rcvbuf");
	assert_status(judge(h, "rmem_max"), HOSTCHECK_OK);
	assert_false(hostcheck_limited(&h->r));
}

static void
test_rmem_max(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	/* Unset, the ceiling for SO_RCVBUF is not in play, however low. */
	put(h, "net/core/rmem_max", "212992\n");
	f = judge(h, "rmem_max");
	assert_status(f, HOSTCHECK_OK);
	assert_string_equal(f->value, "212992");
	assert_contains(f->what, "not in play");

	/* Asked for more than the ceiling, without root: cut down. */
	h->cfg.upstream_rcvbuf = 64u << 20;
	put(h, "net/core/rmem_max", "4194304\n");
	f = judge(h, "rmem_max");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_contains(f->what, "net.core.rmem_max 4 MiB cuts --upstream-rcvbuf 64 MiB to 4 MiB");
	/* Doubled by the kernel, 62% of that advertised: 208 Mbit/s at 200 ms. */
	assert_true(fabs(f->cap_mbit - 0.62 * 2 * 4194304 * 8 / 0.2 / 1e6) < 0.01);
	assert_contains(f->fix, "sysctl -w net.core.rmem_max=67108864");
	assert_contains(f->fix, "SO_RCVBUFFORCE");

	/* Root that stays root passes the ceiling. */
	h->in.privileged = true;
	f = judge(h, "rmem_max");
	assert_status(f, HOSTCHECK_OK);
	assert_contains(f->what, "passed as root");

	/* Granted, but too small for the path by itself. */
	h->in.privileged = false;
	put(h, "net/core/rmem_max", "67108864\n");
	h->cfg.upstream_rcvbuf = 1u << 20;
	f = judge(h, "rmem_max");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_contains(f->fix, "or leave it unset");
}

static void
test_wmem(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	/* Debian's 4 MiB: what this host sends, never a download through the proxy. */
	put(h, "net/ipv4/tcp_wmem", "4096\t16384\t4194304\n");
	f = judge(h, "tcp_wmem");
	assert_status(f, HOSTCHECK_NOTE);
	assert_contains(f->fix, "sysctl -w net.ipv4.tcp_wmem='4096 16384 67108864'");
	assert_false(hostcheck_limited(&h->r));

	put(h, "net/core/wmem_max", "4194304\n");
	f = judge(h, "wmem_max");
	assert_status(f, HOSTCHECK_OK);
	h->cfg.upstream_sndbuf = 8u << 20;
	f = judge(h, "wmem_max");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_contains(f->what, "cuts --upstream-sndbuf 8 MiB to 4 MiB");
	assert_contains(f->fix, "sysctl -w net.core.wmem_max=8388608");
	h->in.privileged = true;
	assert_status(judge(h, "wmem_max"), HOSTCHECK_OK);
}

static void
test_slow_start_after_idle(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	put(h, "net/ipv4/tcp_slow_start_after_idle", "1\n");
	f = judge(h, "slow_start_after_idle");
	/* The origin's setting decides a download: a note here, not a limit. */
	assert_status(f, HOSTCHECK_NOTE);
	assert_string_equal(f->value, "1");
	assert_contains(f->fix, "sysctl -w net.ipv4.tcp_slow_start_after_idle=0");
	assert_contains(f->fix, "--read-ahead");
	assert_false(hostcheck_limited(&h->r));
}

static void
test_congestion(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	/* Loaded but not allowed: other namespaces and unprivileged sockets cannot pick it. */
	put(h, "net/ipv4/tcp_available_congestion_control", "reno cubic bbr\n");
	f = judge(h, "congestion");
	assert_status(f, HOSTCHECK_NOTE);
	assert_string_equal(f->value, "cubic");
	assert_contains(f->cost, "bbr is loaded but not allowed");
	assert_contains(f->fix,
	                "sysctl -w net.ipv4.tcp_allowed_congestion_control='reno cubic bbr'");

	h->cfg.congestion = "bbr";
	f = judge(h, "congestion");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_contains(f->what, "--congestion bbr: not allowed");
	h->in.privileged = true;
	assert_status(judge(h, "congestion"), HOSTCHECK_OK);

	/* A name only a longer one starts with is not on the list. */
	h->in.privileged = false;
	put(h, "net/ipv4/tcp_available_congestion_control", "reno cubic bbr2\n");
	put(h, "net/ipv4/tcp_allowed_congestion_control", "reno cubic bbr2\n");
	f = judge(h, "congestion");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_contains(f->fix, "modprobe tcp_bbr");

	h->cfg.congestion = "bbr2";
	assert_status(judge(h, "congestion"), HOSTCHECK_OK);
	h->cfg.congestion = NULL;
	assert_status(judge(h, "congestion"), HOSTCHECK_OK);
}

static void
test_loopback(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	f = judge(h, "loopback");
	assert_status(f, HOSTCHECK_OK);
	assert_contains(f->what, "initcwnd 100, initrwnd 100");
	assert_contains(f->value, "local 127.0.0.1 ");

	h->in.routes = ROUTES_KERNEL;
	f = judge(h, "loopback");
	assert_status(f, HOSTCHECK_NOTE);
	assert_contains(f->what, "initcwnd 10 (the kernel's), initrwnd 10 (the kernel's)");
	assert_contains(f->fix, "contrib/loopback-initcwnd.sh");
	assert_false(hostcheck_limited(&h->r));

	/* Half raised is not raised. */
	h->in.routes = "local 127.0.0.1 proto kernel scope host src 127.0.0.1 initcwnd 40\n";
	f = judge(h, "loopback");
	assert_status(f, HOSTCHECK_NOTE);
	assert_contains(f->what, "initcwnd 40, initrwnd 10");

	/* Without a host route the /8 carries 127.0.0.1. */
	h->in.routes = "local 127.0.0.0/8 proto kernel scope host src 127.0.0.1 initrwnd 64 "
	               "initcwnd 64\n";
	assert_status(judge(h, "loopback"), HOSTCHECK_OK);

	/* No ip, or no route: unknown, which never limits. */
	h->in.routes = NULL;
	f = judge(h, "loopback");
	assert_status(f, HOSTCHECK_UNKNOWN);
	assert_false(hostcheck_limited(&h->r));
	h->in.routes = "";
	assert_status(judge(h, "loopback"), HOSTCHECK_UNKNOWN);

	/* ::1's route cannot be changed; beyond loopback the routes are not in play. */
	h->in.routes = ROUTES_KERNEL;
	h->cfg.bind_addr = "::1";
	f = judge(h, "loopback");
	assert_status(f, HOSTCHECK_NOTE);
	assert_contains(f->fix, "-b 127.0.0.1");
	h->cfg.bind_addr = "192.168.1.1";
	f = judge(h, "loopback");
	assert_status(f, HOSTCHECK_OK);
	assert_contains(f->what, "not in play");
}

static void
test_fd_limit(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	/* Exactly enough for the default 10000 clients, two each and 32 kept back. */
	h->in.fd_limit = 20032;
	assert_status(judge(h, "fd_limit"), HOSTCHECK_OK);
	/* One short: the default is a ceiling, so a note. */
	h->in.fd_limit = 20031;
	f = judge(h, "fd_limit");
	assert_status(f, HOSTCHECK_NOTE);
	assert_contains(f->what, "room for 9999 clients at once, not --max-clients 10000");
	assert_false(hostcheck_limited(&h->r));
	/* A --max-clients asked for and not granted limits. */
	h->in.fd_limit = 1024;
	h->cfg.max_clients = 5000;
	f = judge(h, "fd_limit");
	assert_status(f, HOSTCHECK_LIMITS);
	assert_string_equal(f->value, "1024");
	assert_contains(f->fix, "LimitNOFILE=10032");
	assert_contains(f->fix, "--max-clients 496");
	h->in.fd_limit = ULLONG_MAX;
	f = judge(h, "fd_limit");
	assert_status(f, HOSTCHECK_OK);
	assert_string_equal(f->value, "unlimited");
	h->in.fd_limit = 0;
	assert_status(judge(h, "fd_limit"), HOSTCHECK_UNKNOWN);
}

static void
test_tls(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	f = judge(h, "tls");
	assert_string_equal(f->value, "TestTLS 1.0");
	h->in.tls_name = NULL;
	f = judge(h, "tls");
	assert_status(f, HOSTCHECK_NOTE);
	assert_string_equal(f->value, "none");
	assert_contains(f->fix, "-DKP_TLS=ON");
}

/* Nothing readable: every setting unknown, and unknown is not a limit. */
static void
test_unreadable(void **state)
{
	struct fake *h = *state;

	h->in.root = "/nonexistent-kp-root";
	judge(h, "tls");
	assert_int_equal(h->r.n, NKEYS);
	for (unsigned i = 0; i < 6; i++)
		assert_status(&h->r.finding[i], HOSTCHECK_UNKNOWN);
	assert_false(hostcheck_limited(&h->r));

	/* Not numbers: unknown too. */
	h->in.root = h->root;
	put(h, "net/ipv4/tcp_rmem", "4096 lots\n");
	assert_status(judge(h, "tcp_rmem"), HOSTCHECK_UNKNOWN);
	put(h, "net/ipv4/tcp_rmem", "4096 131072 6291456 7\n");
	assert_status(judge(h, "tcp_rmem"), HOSTCHECK_UNKNOWN);
	put(h, "net/core/rmem_max", "");
	assert_status(judge(h, "rmem_max"), HOSTCHECK_UNKNOWN);
}

/* --rtt over a probed round trip over the default; a failed probe says so. */
static void
test_path(void **state)
{
	struct fake *h = *state;
	const struct hostcheck_finding *f;

	h->in.probe_url = "http://example.com/v.mp4";
	h->in.probe_rtt_ms = 23.4;
	f = judge(h, "probe");
	assert_ptr_equal(f, &h->r.finding[0]);
	assert_status(f, HOSTCHECK_OK);
	assert_contains(f->what, "a TCP connect to http://example.com/v.mp4 took 23.4 ms");
	assert_true(h->r.rtt_ms == 23.4);
	assert_string_equal(h->r.rtt_from, "probe");
	assert_int_equal(h->r.n, NKEYS + 1);

	h->cfg.path_rtt_ms = 120;
	f = judge(h, "probe");
	assert_true(h->r.rtt_ms == 120);
	assert_contains(f->cost, "--rtt takes precedence");

	h->cfg.path_rtt_ms = 0;
	h->in.probe_rtt_ms = 0;
	h->in.probe_error = "example.com:80: Connection refused";
	f = judge(h, "probe");
	assert_status(f, HOSTCHECK_UNKNOWN);
	assert_contains(f->what, "Connection refused");
	assert_true(h->r.rtt_ms == HOSTCHECK_RTT_MS);
	assert_string_equal(h->r.rtt_from, "default");
	assert_false(hostcheck_limited(&h->r));
}

static char *
print(struct fake *h, bool json)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	assert_non_null(out);
	hostcheck_run(&h->r, &h->in, &h->cfg);
	if (json)
		hostcheck_print_json(out, &h->r);
	else
		hostcheck_print_text(out, &h->r);
	fclose(out);
	assert_non_null(text);
	return text;
}

static void
test_text(void **state)
{
	struct fake *h = *state;
	char *text;

	text = print(h, false);
	assert_contains(text,
	                "Host check for one download over 200 ms at 500 Mbit/s (the defaults");
	assert_contains(text, "\nok      net.ipv4.tcp_rmem max 64 MiB");
	assert_contains(text, "Nothing limits this path or the flags given (exit 0).\n");
	assert_contains(text, "Nothing on this host was changed.\n");
	free(text);

	put(h, "net/ipv4/tcp_rmem", "4096 131072 6291456");
	put(h, "net/ipv4/tcp_slow_start_after_idle", "1");
	h->cfg.path_rtt_ms = 250;
	text = print(h, false);
	assert_contains(text, "over 250 ms (--rtt) at 500 Mbit/s (default):");
	assert_contains(text, "\nlimits  net.ipv4.tcp_rmem max 6 MiB");
	assert_contains(text, "\nnote    net.ipv4.tcp_slow_start_after_idle 1");
	assert_contains(text, "\n  fix:  sysctl -w net.ipv4.tcp_rmem=");
	assert_contains(text, "1 finding limits this path or the flags given (exit 1).\n");
	/* Wrapped for a terminal: no line past column 78 but a word longer than that. */
	for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1)
		if (nl - line > 78 && memchr(line, ' ', (size_t)(nl - line)))
			fail_msg("line of %d columns: %.*s", (int)(nl - line), (int)(nl - line),
			         line);
	free(text);
}

/* ---- A small JSON reader: enough to tell valid JSON and find its keys. ---- */

static void
skip_space(const char **p)
{
	while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')
		(*p)++;
}

static bool json_value(const char **p, int depth);

static bool
json_string_token(const char **p)
{
	if (**p != '"')
		return false;
	for ((*p)++; **p != '"'; (*p)++) {
		if ((unsigned char)**p < 0x20)
			return false;
		if (**p != '\\')
			continue;
		(*p)++;
		if (**p == 'u') {
			for (int i = 0; i < 4; i++)
				if (!strchr("0123456789abcdefABCDEF", *++*p) || !**p)
					return false;
		} else if (!**p || !strchr("\"\\/bfnrt", **p)) {
			return false;
		}
	}
	(*p)++;
	return true;
}

static bool
json_members(const char **p, int depth, char close)
{
	(*p)++;
	skip_space(p);
	if (**p == close) {
		(*p)++;
		return true;
	}
	for (;;) {
		skip_space(p);
		if (close == '}') {
			if (!json_string_token(p))
				return false;
			skip_space(p);
			if (*(*p)++ != ':')
				return false;
		}
		if (!json_value(p, depth + 1))
			return false;
		skip_space(p);
		if (**p == close) {
			(*p)++;
			return true;
		}
		if (*(*p)++ != ',')
			return false;
	}
}

static bool
json_value(const char **p, int depth)
{
	char *end;

	skip_space(p);
	if (depth > 16)
		return false;
	if (**p == '{' || **p == '[')
		return json_members(p, depth, **p == '{' ? '}' : ']');
	if (**p == '"')
		return json_string_token(p);
	for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++)
		if (strncmp(*p, *w, strlen(*w)) == 0) {
			*p += strlen(*w);
			return true;
		}
	strtod(*p, &end);
	if (end == *p)
		return false;
	*p = end;
	return true;
}

static void
assert_json(const char *text)
{
	const char *p = text;

	if (!json_value(&p, 0))
		fail_msg("not JSON at offset %d: %.40s", (int)(p - text), p);
	skip_space(&p);
	assert_int_equal(*p, '\0');
}

static unsigned
count(const char *text, const char *part)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, part)); p += strlen(part))
		n++;
	return n;
}

static void
test_json(void **state)
{
	struct fake *h = *state;
	static const char *const fields[] = {
		"\"key\": ", "\"status\": ", "\"limits\": ", "\"value\": ", "\"what\": ",
		"\"cost\": ", "\"fix\": ",
	};
	char *text;

	/* A URL with every character JSON must escape. */
	h->in.probe_url = "http://example.com/\"quoted\"\\\t\x01";
	h->in.probe_error = "refused";
	put(h, "net/ipv4/tcp_rmem", "4096 131072 6291456");
	text = print(h, true);
	assert_json(text);
	assert_contains(text, "{\"path\": {\"rtt_ms\": 200, \"rate_mbit\": 500, \"rtt_from\": "
	                      "\"default\", \"rate_from\": \"default\"}");
	assert_contains(text, "\"limited\": true");
	assert_contains(text, "\"findings\": [");
	assert_contains(text, "\"value\": \"http://example.com/\\\"quoted\\\"\\\\\\u0009\\u0001\"");
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		assert_int_equal(count(text, fields[i]), NKEYS + 1);
	assert_int_equal(count(text, "\"limits\": true"), 1);
	assert_contains(text, "{\"key\": \"tcp_rmem\", \"status\": \"limits\", \"limits\": true, "
	                      "\"value\": \"4096 131072 6291456\", \"cap_mbit\": 156.0");
	assert_contains(text, "\"key\": \"probe\", \"status\": \"unknown\"");
	free(text);

	put(h, "net/ipv4/tcp_rmem", "4096 131072 67108864");
	text = print(h, true);
	assert_json(text);
	assert_contains(text, "\"limited\": false");
	assert_int_equal(count(text, "\"limits\": true"), 0);
	free(text);
}

static void
test_summary(void **state)
{
	struct fake *h = *state;
	char summary[1024], small[16];

	put(h, "net/ipv4/tcp_rmem", "4096 131072 6291456");
	h->cfg.congestion = "vegas";
	hostcheck_run(&h->r, &h->in, &h->cfg);
	assert_true(hostcheck_summary(&h->r, summary, sizeof(summary)) > 0);
	assert_contains(summary, "net.ipv4.tcp_rmem max 6 MiB: one stream at most 156 Mbit/s "
	                         "at 200 ms; --congestion vegas: the kernel does not offer it");
	assert_int_equal(hostcheck_summary(&h->r, small, sizeof(small)), sizeof(small) - 1);
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

/* This machine, whatever it is like: every finding made, valid output, nothing fails. */
static void
test_real_host(void **state)
{
	struct hostcheck_input in;
	struct hostcheck_report r;
	struct kp_config cfg;
	char routes[4096], *text = NULL;
	size_t len = 0;
	FILE *out;

	(void)state;
	config_defaults(&cfg);
	hostcheck_input_local(&in, &cfg, NULL);
	assert_string_equal(in.root, "/");
	assert_true(in.fd_limit > 0);
	if (hostcheck_read_routes(routes, sizeof(routes)) == 0) {
		in.routes = routes;
		/* A machine's lo always has the host route to 127.0.0.1. */
		assert_contains(routes, "local 127.0.0.1 ");
	}
	hostcheck_run(&r, &in, &cfg);
	assert_int_equal(r.n, NKEYS);
	for (unsigned i = 0; i < NKEYS; i++) {
		assert_string_equal(r.finding[i].key, keys[i]);
		assert_true(r.finding[i].status <= HOSTCHECK_UNKNOWN);
		assert_true(*r.finding[i].what);
	}
	/* Linux always has these. */
	assert_true(r.finding[0].status != HOSTCHECK_UNKNOWN);
	assert_true(r.finding[0].cap_mbit > 0);
	assert_non_null(out = open_memstream(&text, &len));
	hostcheck_print_json(out, &r);
	fclose(out);
	assert_json(text);
	free(text);
	text = NULL;
	assert_non_null(out = open_memstream(&text, &len));
	hostcheck_print_text(out, &r);
	fclose(out);
	assert_contains(text, "Nothing on this host was changed.");
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_nothing_to_fix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rmem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rmem_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wmem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_start_after_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_congestion, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loopback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fd_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreadable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_summary, setup, teardown),
		cmocka_unit_test(test_real_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
