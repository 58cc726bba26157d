/*
 * The daemon through real parent proxies (--parent, --parent-for,
 * --direct): microsocks, dante and ssh -D as SOCKS5 parents, squid as an
 * HTTP parent, each started by the test (parents.h). What is counted is
 * what the parent saw: its sessions and requests, from its own log.
 *
 * A case skips, saying why, when a package is missing or it needs root.
 */
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "origin.h"
#include "parents.h"

static struct parent_proc par;
static struct dns_stub stub, parent_stub;
static struct proxy px;

/* GET url through the daemon on a new client connection: its status, its body in *body. */
static int
get(const char *url, char *body, size_t cap)
{
	struct response r;
	int status;

	fetch(px.port, "GET", url, &r);
	status = r.head.status;
	if (body)
		snprintf(body, cap, "%s", r.body.data ? r.body.data : "");
	response_free(&r);
	return status;
}

static void
origin_url_for(char *out, size_t cap, const char *host, const struct origin *og, const char *path)
{
	snprintf(out, cap, "http://%s:%d%s", host, origin_port(og), path);
}

/* n GETs, each on a new client connection (a chunked downloader's way), all "ok". */
static void
get_ok_times(const char *host, struct origin *og, unsigned n)
{
	char url[160], body[64];

	origin_url_for(url, sizeof(url), host, og, "/");
	for (unsigned i = 0; i < n; i++) {
		int status = get(url, body, sizeof(body));

		if (status != 200 || strcmp(body, "ok") != 0)
			fail_msg("GET %s #%u through the parent: %d '%s'", url, i + 1, status, body);
	}
}

/* The stats page's /metrics holds the line for counter name of the parent labelled label, with want. */
static void
expect_metric(int stats_port, const char *name, const char *label, const char *want)
{
	struct client c;
	struct response r;
	char line[512];

	snprintf(line, sizeof(line), "keepalive_proxy_%s{parent=\"%s\"} %s\n", name, label, want);
	client_open(&c, stats_port);
	client_sendf(&c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
	assert_int_equal(client_read_response(&c, &r, 0), WIRE_OK);
	assert_int_equal(r.head.status, 200);
	if (!r.body.data || !strstr(r.body.data, line))
		fail_msg("no '%.*s' in /metrics:\n%s", (int)strlen(line) - 1, line,
		         r.body.data ? r.body.data : "");
	response_free(&r);
	client_close(&c);
}

/*
 * Rule: through a SOCKS5 parent, N chunks each on a new client connection
 * cost one SOCKS session: the connection is pooled under its origin.
 */
static void
socks_session_is_pooled(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char stats[64], label[96];
	int stats_port = free_port();

	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	snprintf(stats, sizeof(stats), "127.0.0.1:%d", stats_port);
	proxy_start(&px, (const char *[]){"--parent", par.url, "--stats-listen", stats, NULL});
	get_ok_times("127.0.0.1", og, 8);
	assert_int_equal(parent_wait_sessions(&par, 1, 5000), 1);
	assert_int_equal(origin_connection_count(og), 1);
	snprintf(label, sizeof(label), "socks5h://127.0.0.1:%d", par.port);
	expect_metric(stats_port, "parent_connects_total", label, "1");
	expect_metric(stats_port, "parent_requests_total", label, "8");
	expect_metric(stats_port, "parent_reused_total", label, "7");
	proxy_stop(&px);
	assert_int_equal(origin_request_count(og), 8);
}

/* Rule: dante with the username method: the right credentials open the path; wrong ones give a 502 that says so. */
static void
socks_credentials_right_and_wrong(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char wrong[200], url[160], body[512];

	if (!parent_start_dante(&par, true))
		parent_skip(&par);
	proxy_start(&px, (const char *[]){"--parent", par.url, NULL});
	get_ok_times("127.0.0.1", og, 3);
	assert_int_equal(parent_wait_sessions(&par, 1, 5000), 1);
	proxy_stop(&px);

	snprintf(wrong, sizeof(wrong), "socks5h://%s:not-%s@127.0.0.1:%d", par.user, par.pass,
	         par.port);
	proxy_start(&px, (const char *[]){"--parent", wrong, NULL});
	origin_url_for(url, sizeof(url), "127.0.0.1", og, "/");
	assert_int_equal(get(url, body, sizeof(body)), 502);
	if (!strstr(body, "rejected the username and password") || strstr(body, "not-"))
		fail_msg("the 502 does not say the credentials were rejected (or shows them): %s",
		         body);
	proxy_stop(&px);
	assert_int_equal(origin_request_count(og), 3);
}

/* Rule: ssh -D, the SOCKS parent people use: N chunks, one forwarded channel. */
static void
ssh_dynamic_forward_is_pooled(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_ssh_socks(&par))
		parent_skip(&par);
	proxy_start(&px, (const char *[]){"--parent", par.url, NULL});
	get_ok_times("127.0.0.1", og, 6);
	assert_int_equal(parent_wait_sessions(&par, 1, 5000), 1);
	proxy_stop(&px);
	assert_int_equal(origin_request_count(og), 6);
}

/*
 * Rule: through an HTTP parent with Basic auth, plain requests go in
 * absolute form with the proxy's credentials over one kept-alive
 * connection to the parent; a client's own Proxy-Authorization never
 * reaches it.
 */
static void
http_parent_forwards_with_its_credentials(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char bare[128], url[160], body[512], auth[200];
	struct response r;

	if (!parent_start_squid(&par, "kpuser", "kp-secret"))
		parent_skip(&par);
	proxy_start(&px, (const char *[]){"--parent", par.url, NULL});
	get_ok_times("127.0.0.1", og, 5);
	assert_int_equal(parent_wait_requests(&par, 5, 5000), 5);
	assert_int_equal(parent_sessions(&par), 1);
	assert_int_equal(parent_log_count(&par, " kpuser "), 5);
	proxy_stop(&px);

	/* Without credentials of its own: the parent's 407 is the proxy's problem, not the client's. */
	snprintf(bare, sizeof(bare), "http://127.0.0.1:%d", par.port);
	proxy_start(&px, (const char *[]){"--parent", bare, NULL});
	origin_url_for(url, sizeof(url), "127.0.0.1", og, "/");
	/* kpuser:kp-secret, which the parent would take if the client's field went through. */
	snprintf(auth, sizeof(auth), "Proxy-Authorization: Basic a3B1c2VyOmtwLXNlY3JldA==\r\n");
	fetch_from(px.port, NULL, "GET", url, auth, &r);
	assert_int_equal(r.head.status, 502);
	snprintf(body, sizeof(body), "%s", r.body.data ? r.body.data : "");
	response_free(&r);
	if (!strstr(body, "wants a username and password"))
		fail_msg("the 502 does not say the parent wants credentials: %s", body);
	proxy_stop(&px);

	/* A wrong password: the parent's 407 again, and the 502 says the credentials were refused. */
	snprintf(bare, sizeof(bare), "http://kpuser:wrong@127.0.0.1:%d", par.port);
	proxy_start(&px, (const char *[]){"--parent", bare, NULL});
	fetch_from(px.port, NULL, "GET", url, NULL, &r);
	assert_int_equal(r.head.status, 502);
	snprintf(body, sizeof(body), "%s", r.body.data ? r.body.data : "");
	response_free(&r);
	if (!strstr(body, "rejected the username and password") || strstr(body, "wrong"))
		fail_msg("the 502 for a wrong password: %s", body);
	proxy_stop(&px);
	assert_int_equal(origin_request_count(og), 5);
}

/* A CONNECT through the daemon, then one GET inside the tunnel: its status. */
static int
get_through_tunnel(struct origin *og)
{
	char authority[64];
	struct client c;
	struct response r;
	int status;

	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(og));
	open_tunnel(&c, px.port, authority);
	client_sendf(&c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", authority);
	assert_int_equal(client_read_response(&c, &r, 0), WIRE_OK);
	status = r.head.status;
	response_free(&r);
	client_close(&c);
	return status;
}

/*
 * A client's CONNECT to authority through the HTTP parent squid, which
 * cannot give it: the client's 502 must name the parent and say why (says).
 */
static void
connect_fails_through(struct parent_proc *squid, const char *authority, const char *says)
{
	char label[64];
	struct client c;
	struct response r;

	snprintf(label, sizeof(label), "http://127.0.0.1:%d", squid->port);
	client_open(&c, px.port);
	client_sendf(&c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority);
	assert_int_equal(client_read_response(&c, &r, 0), WIRE_OK);
	assert_int_equal(r.head.status, 502);
	if (!r.body.data || !strstr(r.body.data, says) || !strstr(r.body.data, label))
		fail_msg("CONNECT %s through the parent: %s", authority,
		         r.body.data ? r.body.data : "(no body)");
	response_free(&r);
	client_close(&c);
}

/* Rule: a client's own CONNECT becomes a SOCKS session, or a CONNECT through an HTTP parent. */
static void
client_connect_goes_through_the_parent(void)
{
	static struct parent_proc squid;
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char http[128], closed[32];

	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	proxy_start(&px, (const char *[]){"--parent", par.url, "--connect-ports", "*", NULL});
	assert_int_equal(get_through_tunnel(og), 200);
	assert_int_equal(parent_wait_sessions(&par, 1, 5000), 1);
	proxy_stop(&px);

	if (!parent_start_squid(&squid, NULL, NULL))
		parent_skip(&squid);
	snprintf(http, sizeof(http), "http://127.0.0.1:%d", squid.port);
	proxy_start(&px, (const char *[]){"--parent", http, "--connect-ports", "*", NULL});
	assert_int_equal(get_through_tunnel(og), 200);
	assert_int_equal(parent_wait_log_count(&squid, " CONNECT ", 1, 5000), 1);
	/* The parent's own rules refuse the site: its 403 to CONNECT is a 502 naming it. */
	connect_fails_through(&squid, "www.off-limits.test:443", "refused");
	assert_int_equal(parent_wait_log_count(&squid, "www.off-limits.test", 1, 5000), 1);
	/* It cannot reach the origin: its 503 is a 502 that says so. */
	snprintf(closed, sizeof(closed), "127.0.0.1:%d", free_port());
	connect_fails_through(&squid, closed, "could not reach");
	proxy_stop(&px);
	parent_stop(&squid);
	assert_int_equal(origin_request_count(og), 2);
}

/* Rule: --parent-for and --direct choose per origin, the first match winning. */
static void
rules_choose_the_way(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	proxy_start(&px, (const char *[]){"--direct", "127.0.0.0/8", "--parent-for", "localhost",
	                                  par.url, "--direct", "localhost", "--parent", par.url,
	                                  NULL});
	get_ok_times("127.0.0.1", og, 2);
	get_ok_times("localhost", og, 2);
	assert_int_equal(parent_wait_sessions(&par, 1, 5000), 1);
	/* Two ways there, each pooled: the direct connection and the one through the parent. */
	assert_int_equal(origin_connection_count(og), 2);
	proxy_stop(&px);
}

/* A listener that completes TCP handshakes and never says a word. */
static int
silent_listener(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/*
 * Rule: each way a parent can fail gives a 502 (504 on a timeout) whose
 * text names the hop and why, and nothing waits past --connect-timeout.
 */
static void
failures_name_the_hop(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char dead[96], silent[96], url[160], body[512], far[96];
	int closed_port = free_port(), silent_port;
	int quiet = silent_listener(&silent_port);
	unsigned sessions;
	double t0;

	if (!parent_start_dante(&par, false))
		parent_skip(&par);
	snprintf(dead, sizeof(dead), "socks5h://127.0.0.1:%d", closed_port);
	snprintf(silent, sizeof(silent), "socks5h://127.0.0.1:%d", silent_port);
	proxy_start(&px, (const char *[]){"--connect-timeout", "1", "--parent-for", "dead.test", dead,
	                                  "--parent-for", "silent.test", silent, "--parent",
	                                  par.url, "--deny-dest", "192.0.2.0/24", NULL});
	/* The parent is down. */
	snprintf(url, sizeof(url), "http://dead.test:%d/", origin_port(og));
	assert_int_equal(get(url, body, sizeof(body)), 502);
	if (!strstr(body, "unreachable") || !strstr(body, dead))
		fail_msg("parent down: %s", body);
	/* The parent takes the connection and never answers the greeting. */
	snprintf(url, sizeof(url), "http://silent.test:%d/", origin_port(og));
	t0 = now_s();
	assert_int_equal(get(url, body, sizeof(body)), 504);
	if (now_s() - t0 > 3)
		fail_msg("a silent parent held the request %.1f s with --connect-timeout 1",
		         now_s() - t0);
	if (!strstr(body, silent))
		fail_msg("silent parent: %s", body);
	/* The parent cannot reach the origin. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", closed_port);
	assert_int_equal(get(url, body, sizeof(body)), 502);
	if (!strstr(body, "could not reach") || !strstr(body, par.url))
		fail_msg("origin unreachable from the parent: %s", body);
	/* The parent's rules refuse the destination (dante passes 127.0.0.0/8 only). */
	snprintf(far, sizeof(far), "http://198.51.100.1:%d/", origin_port(og));
	assert_int_equal(get(far, body, sizeof(body)), 502);
	if (!strstr(body, "refused") || !strstr(body, par.url))
		fail_msg("refused by the parent's rules: %s", body);
	/* Ours refuse an address named in the request before the parent hears of it. */
	sessions = parent_sessions(&par);
	snprintf(far, sizeof(far), "http://192.0.2.1:%d/", origin_port(og));
	assert_int_equal(get(far, body, sizeof(body)), 403);
	assert_int_equal(parent_log_count(&par, "192.0.2.1"), 0);
	assert_int_equal(parent_sessions(&par), sessions);
	proxy_stop(&px);
	close(quiet);
	assert_int_equal(origin_request_count(og), 0);
}

/*
 * Rule: through socks5h:// the daemon sends no DNS query for an origin's
 * name (the parent resolves it); through socks5:// it does, and sends the
 * address.
 */
static void
socks5h_names_never_leave_the_host(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char url[160], socks5[96];

	if (!dns_stub_start(&stub, "origin.kp-test 127.0.0.1\ndenied.kp-test 192.0.2.7\n"))
		dns_stub_skip(&stub);
	if (!dns_stub_start(&parent_stub, "origin.kp-test 127.0.0.1\n"))
		dns_stub_skip(&parent_stub);
	par.resolver = &parent_stub;
	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	proxy_start_with_dns(&px, &stub, (const char *[]){"--parent", par.url, NULL});
	origin_url_for(url, sizeof(url), "origin.kp-test", og, "/");
	assert_int_equal(get(url, NULL, 0), 200);
	assert_int_equal(dns_stub_queries(&stub, "origin.kp-test"), 0);
	assert_true(dns_stub_queries(&parent_stub, "origin.kp-test") >= 1);
	proxy_stop(&px);

	snprintf(socks5, sizeof(socks5), "socks5://127.0.0.1:%d", par.port);
	proxy_start_with_dns(&px, &stub, (const char *[]){"--parent", socks5, "--deny-dest",
	                                                  "192.0.2.0/24", NULL});
	assert_int_equal(get(url, NULL, 0), 200);
	assert_true(dns_stub_queries(&stub, "origin.kp-test") >= 1);
	/* The address it resolved is held to the destination rules before it is sent. */
	origin_url_for(url, sizeof(url), "denied.kp-test", og, "/");
	assert_int_equal(get(url, NULL, 0), 403);
	assert_true(dns_stub_queries(&stub, "denied.kp-test") >= 1);
	assert_int_equal(parent_log_count(&par, "192.0.2.7"), 0);
	proxy_stop(&px);
}

/* ---- Read-ahead and split through a parent ---- */

#define OBJECT (4u * 1024u * 1024u)
#define PIECE (1024u * 1024u)

/* The range answer starting here is cut halfway by a reset, once (UINT64_MAX: none). */
static _Atomic uint64_t cut_at = UINT64_MAX;

/* A 4 MiB pattern object with ranges, a strong validator, and one answer cut on demand. */
static void
range_origin(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *range = headers_get(&req->head.headers, "Range");
	uint64_t first = 0, last = OBJECT - 1, len;
	bool ranged = range && origin_parse_range(range, OBJECT, &first, &last, NULL);
	uint64_t expect = first;

	(void)arg;
	len = last - first + 1;
	if (ranged)
		origin_sendf(c, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %llu-%llu/%u\r\n",
		             (unsigned long long)first, (unsigned long long)last, OBJECT);
	else
		origin_sendf(c, "HTTP/1.1 200 OK\r\n");
	origin_sendf(c, "ETag: \"kp-parent-object\"\r\nAccept-Ranges: bytes\r\n"
	                "Content-Length: %llu\r\n\r\n", (unsigned long long)len);
	if (ranged && atomic_compare_exchange_strong(&cut_at, &expect, UINT64_MAX)) {
		origin_send_pattern(c, first, len / 2);
		origin_reset(c);
		return;
	}
	origin_send_pattern(c, first, len);
}

/* GET url with fields through the daemon; asserts status and that the body is the object's bytes from first. */
static void
get_pattern(const char *url, const char *fields, int status, uint64_t first, uint64_t len)
{
	struct response r;

	fetch_from(px.port, NULL, "GET", url, fields, &r);
	if (r.head.status != status || r.body.len != len ||
	    r.body.fnv != pattern_range_fnv(first, len))
		fail_msg("GET %s (%s): %d with %llu bytes (%s at %llu), want %d with %llu bytes of "
		         "the object from %llu", url, fields ? fields : "", r.head.status,
		         (unsigned long long)r.body.len, r.body.pattern_ok ? "pattern" : "not the pattern",
		         (unsigned long long)r.body.pattern_bad, status, (unsigned long long)len,
		         (unsigned long long)first);
	response_free(&r);
}

/*
 * Rule: read-ahead works through a SOCKS parent: a client asking range
 * after range, each on a new connection, is served the next from memory,
 * and the origin is asked for each range once.
 */
static void
read_ahead_through_a_parent(void)
{
	struct origin *og = origin_start(range_origin, NULL);
	char url[160], fields[64];
	const char *line;

	atomic_store(&cut_at, UINT64_MAX);
	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	proxy_start(&px, (const char *[]){"--parent", par.url, "--read-ahead", NULL});
	origin_url_for(url, sizeof(url), "127.0.0.1", og, "/video.mp4");
	for (unsigned i = 0; i < 4; i++) {
		snprintf(fields, sizeof(fields), "Range: bytes=%u-%u\r\n", i * PIECE,
		         (i + 1) * PIECE - 1);
		get_pattern(url, fields, 206, (uint64_t)i * PIECE, PIECE);
	}
	line = proxy_stats(&px);
	if (stats_get(line, "hits") + stats_get(line, "joins") < 3)
		fail_msg("the ranges after the first were not served from memory: %s", line);
	assert_int_equal(origin_request_count(og), 4);
	proxy_stop(&px);
	/* Every connection to the origin came through the parent. */
	assert_int_equal(parent_wait_sessions(&par, origin_connection_count(og), 5000),
	                 origin_connection_count(og));
}

/*
 * Rule: a split download through a parent resumes a piece cut by a reset
 * on a new path through the parent, and the client gets every byte.
 */
static void
split_resumes_through_a_parent(void)
{
	struct origin *og = origin_start(range_origin, NULL);
	char url[160], size[32];
	const char *line;

	atomic_store(&cut_at, (uint64_t)PIECE);
	if (!parent_start_dante(&par, false))
		parent_skip(&par);
	snprintf(size, sizeof(size), "%u", PIECE);
	proxy_start(&px, (const char *[]){"--parent", par.url, "--split", "127.0.0.1",
	                                  "--split-size", size, NULL});
	origin_url_for(url, sizeof(url), "127.0.0.1", og, "/big.iso");
	get_pattern(url, NULL, 200, 0, OBJECT);
	line = proxy_stats(&px);
	/*
	 * A reset that comes before the piece's head was read is the
	 * exchange's to replay (a retry); one after it, split's to resume.
	 */
	if (stats_get(line, "resumes") + stats_get(line, "retries") < 1)
		fail_msg("the cut piece was not asked again: %s", line);
	assert_int_equal(atomic_load(&cut_at), UINT64_MAX);
	/* The reset cost its session; the piece came again through a new one. */
	assert_true(origin_connection_count(og) >= 2);
	/* dante logs each session from a child process, a moment late: waited for. */
	assert_int_equal(parent_wait_sessions(&par, origin_connection_count(og), 5000),
	                 origin_connection_count(og));
	proxy_stop(&px);
}

/*
 * Rule: --check-host with a parent probes the path through it: the connect
 * to the parent, the opening of the path, and the round trip through it;
 * a parent that is down is named in the probe's failure.
 */
static void
check_host_probes_through_the_parent(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char url[160], log[300], dead[96], *text;
	const char *argv[] = {getenv("KP_BINARY"), "--check-host", "--parent", NULL, url, NULL};
	int rc;

	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	origin_url_for(url, sizeof(url), "127.0.0.1", og, "/");
	path_join(log, sizeof(log), harness_temp_dir(), "check.out");
	argv[3] = par.url;
	rc = run_process(argv, log, 20000);
	assert_true(rc == 0 || rc == 1);
	text = read_file_all(log, NULL);
	assert_non_null(text);
	if (!strstr(text, "through parent") || !strstr(text, par.url) ||
	    !strstr(text, "opening the path"))
		fail_msg("no probe through the parent in:\n%s", text);
	free(text);
	assert_int_equal(parent_wait_sessions(&par, 1, 5000), 1);

	snprintf(dead, sizeof(dead), "socks5h://127.0.0.1:%d", free_port());
	argv[3] = dead;
	rc = run_process(argv, log, 20000);
	text = read_file_all(log, NULL);
	assert_non_null(text);
	if (!strstr(text, "unreachable") || !strstr(text, dead))
		fail_msg("a parent that is down is not named:\n%s", text);
	free(text);
	(void)rc;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(socks_session_is_pooled),
		E2E_TEST(socks_credentials_right_and_wrong),
		E2E_TEST(ssh_dynamic_forward_is_pooled),
		E2E_TEST(http_parent_forwards_with_its_credentials),
		E2E_TEST(client_connect_goes_through_the_parent),
		E2E_TEST(rules_choose_the_way),
		E2E_TEST(failures_name_the_hop),
		E2E_TEST(socks5h_names_never_leave_the_host),
		E2E_TEST(read_ahead_through_a_parent),
		E2E_TEST(split_resumes_through_a_parent),
		E2E_TEST(check_host_probes_through_the_parent),
	};

	return E2E_RUN("parents", tests);
}
