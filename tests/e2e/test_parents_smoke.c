/*
 * The parent proxies the --parent scenarios run, each proven on its own:
 * started with a configuration of the test's, fetched through with curl
 * (credentials right and wrong where it has any), and its session and
 * request counters checked against what curl did. Also the DNS stub: the
 * daemon's lookups reach it and are counted, and so are a parent's.
 *
 * A case skips, saying why, when a package is missing or it needs root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "origin.h"
#include "parents.h"

static struct parent_proc par, front;
static struct dns_stub stub;
static struct proxy px;

/*
 * curl through proxy_url for http://host:PORT/ on og, n times in one curl
 * process; returns curl's exit status and leaves the bodies in dir/body.
 */
static int
curl_n(const char *dir, const char *proxy_url, struct origin *og, const char *host, size_t n)
{
	char url[128], dest[300], log[300];
	const char *urls[4];

	assert_true(n <= 4);
	snprintf(url, sizeof(url), "http://%s:%d/", host, origin_port(og));
	for (size_t i = 0; i < n; i++)
		urls[i] = url;
	path_join(dest, sizeof(dest), dir, "body");
	path_join(log, sizeof(log), dir, "curl.log");
	unlink(dest);
	harness_watch_log(log, "curl");
	return curl_via(proxy_url, urls, n, dest, log);
}

/* The same, asserting success and n bodies of "ok". */
static void
fetch_ok(const char *dir, const char *proxy_url, struct origin *og, const char *host, size_t n)
{
	char want[16] = "", path[300], *body;
	int rc = curl_n(dir, proxy_url, og, host, n);

	if (rc != 0)
		fail_msg("curl through %s exited with %d", proxy_url, rc);
	for (size_t i = 0; i < n; i++)
		strcat(want, "ok");
	path_join(path, sizeof(path), dir, "body");
	body = read_file_all(path, NULL);
	assert_non_null(body);
	assert_string_equal(body, want);
	free(body);
}

/* The parent's session count settles at n. */
static void
expect_sessions(const struct parent_proc *p, unsigned n)
{
	assert_int_equal(parent_wait_sessions(p, n, 5000), n);
}

static void
microsocks_sessions(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_microsocks(&par, NULL, NULL))
		parent_skip(&par);
	/* Two requests on one curl connection: one SOCKS session. */
	fetch_ok(dir, par.url, og, "127.0.0.1", 2);
	expect_sessions(&par, 1);
	fetch_ok(dir, par.url, og, "127.0.0.1", 1);
	expect_sessions(&par, 2);
	assert_int_equal(origin_request_count(og), 3);
	assert_int_equal(origin_connection_count(og), 2);
	parent_stop(&par);
}

static void
microsocks_password(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char wrong[160];

	if (!parent_start_microsocks(&par, "kp-user", "kp-pass"))
		parent_skip(&par);
	snprintf(wrong, sizeof(wrong), "socks5h://kp-user:kp-pass@127.0.0.1:%d", par.port);
	assert_string_equal(par.url, wrong);
	fetch_ok(dir, par.url, og, "127.0.0.1", 1);
	snprintf(wrong, sizeof(wrong), "socks5h://kp-user:nope@127.0.0.1:%d", par.port);
	assert_int_not_equal(curl_n(dir, wrong, og, "127.0.0.1", 1), 0);
	snprintf(wrong, sizeof(wrong), "socks5h://127.0.0.1:%d", par.port);
	assert_int_not_equal(curl_n(dir, wrong, og, "127.0.0.1", 1), 0);
	expect_sessions(&par, 1);
	assert_int_equal(origin_request_count(og), 1);
}

static void
dante_sessions(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_dante(&par, false))
		parent_skip(&par);
	fetch_ok(dir, par.url, og, "127.0.0.1", 2);
	fetch_ok(dir, par.url, og, "127.0.0.1", 1);
	expect_sessions(&par, 2);
	assert_int_equal(origin_request_count(og), 3);
}

static void
dante_username(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char wrong[160];

	if (!parent_start_dante(&par, true))
		parent_skip(&par);
	assert_true(par.user[0] != '\0');
	fetch_ok(dir, par.url, og, "127.0.0.1", 1);
	snprintf(wrong, sizeof(wrong), "socks5h://%s:nope@127.0.0.1:%d", par.user, par.port);
	assert_int_not_equal(curl_n(dir, wrong, og, "127.0.0.1", 1), 0);
	expect_sessions(&par, 1);
	/* The user exists for dante only. */
	assert_int_equal(
		parent_wait_log_count(&par, "system password authentication failed", 1, 5000), 1);
}

static void
ssh_dynamic_forward(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_ssh_socks(&par))
		parent_skip(&par);
	assert_true(par.server_pid > 0);
	fetch_ok(dir, par.url, og, "127.0.0.1", 2);
	fetch_ok(dir, par.url, og, "127.0.0.1", 1);
	expect_sessions(&par, 2);
	assert_int_equal(origin_request_count(og), 3);
	parent_stop(&par);
}

static void
squid_basic_auth(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char bare[160];

	if (!parent_start_squid(&par, "kp-user", "kp-pass"))
		parent_skip(&par);
	/* Two requests on one connection to squid. */
	fetch_ok(dir, par.url, og, "127.0.0.1", 2);
	assert_int_equal(parent_wait_requests(&par, 2, 5000), 2);
	assert_int_equal(parent_sessions(&par), 1);
	/* Without credentials: 407, logged as a request of its own connection. */
	snprintf(bare, sizeof(bare), "http://127.0.0.1:%d", par.port);
	assert_int_equal(curl_n(dir, bare, og, "127.0.0.1", 1), 22);
	assert_int_equal(parent_wait_requests(&par, 3, 5000), 3);
	assert_int_equal(parent_wait_log_count(&par, "TCP_DENIED/407", 1, 5000), 1);
	assert_int_equal(parent_sessions(&par), 2);
	assert_int_equal(origin_request_count(og), 2);
}

/* privoxy keeps its connection through a SOCKS parent open between its clients. */
static void
privoxy_shares_socks_session(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_microsocks(&par, "kp-user", "kp-pass"))
		parent_skip(&par);
	if (!parent_start_privoxy(&front, &par, PRIVOXY_SOCKS5))
		parent_skip(&front);
	fetch_ok(dir, front.url, og, "127.0.0.1", 1);
	fetch_ok(dir, front.url, og, "127.0.0.1", 1);
	expect_sessions(&front, 2);
	assert_int_equal(parent_wait_requests(&front, 2, 5000), 2);
	expect_sessions(&par, 1);
	assert_int_equal(origin_connection_count(og), 1);
}

/* The bridge as users run it: privoxy with forward-socks5t to ssh -D. */
static void
privoxy_socks5t_over_ssh(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!parent_start_ssh_socks(&par))
		parent_skip(&par);
	if (!parent_start_privoxy(&front, &par, PRIVOXY_SOCKS5T))
		parent_skip(&front);
	fetch_ok(dir, front.url, og, "localhost", 1);
	fetch_ok(dir, front.url, og, "localhost", 1);
	assert_int_equal(parent_wait_requests(&front, 2, 5000), 2);
	expect_sessions(&par, 1);
	assert_int_equal(parent_wait_log_count(&par, "target localhost port", 1, 5000), 1);
	parent_stop(&front);
	parent_stop(&par);
}

/* The daemon's own lookups go to the stub, and only a name's own queries count for it. */
static void
stub_counts_daemon_lookups(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char url[128];

	if (!dns_stub_start(&stub, "origin.kp-test 127.0.0.1\n"))
		dns_stub_skip(&stub);
	proxy_start_with_dns(&px, &stub, NULL);
	snprintf(url, sizeof(url), "http://origin.kp-test:%d/", origin_port(og));
	expect_get_from(px.port, NULL, url, 200, "ok");
	assert_true(dns_stub_queries(&stub, "origin.kp-test") >= 1);
	assert_int_equal(dns_stub_queries(&stub, "other.kp-test"), 0);
	/* A name the stub does not know fails in the daemon, and was asked for. */
	snprintf(url, sizeof(url), "http://unknown.kp-test:%d/", origin_port(og));
	{
		struct response r;

		fetch(px.port, "GET", url, &r);
		assert_true(r.head.status >= 500);
		response_free(&r);
	}
	assert_true(dns_stub_queries(&stub, "unknown.kp-test") >= 1);
	proxy_stop(&px);
	assert_int_equal(origin_request_count(og), 1);
}

/* socks5h: the parent resolves the name, through its own stub. */
static void
stub_counts_parent_lookups(void)
{
	const char *dir = harness_temp_dir();
	struct origin *og = origin_start(origin_handle_ok, NULL);

	if (!dns_stub_start(&stub, "origin.kp-test 127.0.0.1\n"))
		dns_stub_skip(&stub);
	par.resolver = &stub;
	if (!parent_start_dante(&par, false))
		parent_skip(&par);
	fetch_ok(dir, par.url, og, "origin.kp-test", 1);
	assert_true(dns_stub_queries(&stub, "origin.kp-test") >= 1);
	expect_sessions(&par, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(microsocks_sessions),
		E2E_TEST(microsocks_password),
		E2E_TEST(dante_sessions),
		E2E_TEST(dante_username),
		E2E_TEST(ssh_dynamic_forward),
		E2E_TEST(squid_basic_auth),
		E2E_TEST(privoxy_shares_socks_session),
		E2E_TEST(privoxy_socks5t_over_ssh),
		E2E_TEST(stub_counts_daemon_lookups),
		E2E_TEST(stub_counts_parent_lookups),
	};

	return E2E_RUN("parents_smoke", tests);
}
