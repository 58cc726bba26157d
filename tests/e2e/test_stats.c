/*
 * The stats page (--stats-listen): /metrics and /stats show what a scripted
 * run did (per host too, and the samples for the chart), counters never go
 * backwards, the copy path counts every byte it moves, anything else is
 * 404; a peer outside --allow is closed at once, a Host that is a name gets
 * 421 (DNS rebinding), and with --auth-file the page asks for a user's
 * credentials unless --stats-no-auth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;
static int stats_port;

/* The proxy with a stats page, and one more flag (with its value, or NULL) unless flag is NULL. */
static void
start_with_stats(const char *flag, const char *value)
{
	static char listen[64];
	const char *args[] = {"--stats-listen", listen, flag, value, NULL};

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
}

static void
numbers_match_a_scripted_run(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct response r;
	const char *text;
	char host[256], connect[128];
	int status;
	double t0 = now_s(), wait, spliced, copied;

	start_with_stats(NULL, NULL);
	/* One connect, then the pooled connection twice. */
	for (int i = 0; i < 3; i++)
		expect_get(px.port, og, "/", 200, "ok");
	snprintf(connect, sizeof(connect), "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n",
	         origin_port(og));
	request_once(px.port, NULL, connect, &r);
	assert_status(&r, 403);   /* --connect-ports is 443 */
	response_free(&r);
	request_once(px.port, NULL, "GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_status(&r, 400);
	response_free(&r);

	text = stats_page(stats_port, "/metrics", &status);
	assert_int_equal(status, 200);
	assert_int_equal(metric_value(text, "keepalive_proxy_requests_total"), 5);
	assert_int_equal(metric_value(text, "keepalive_proxy_upstream_connects_total"), 1);
	assert_int_equal(metric_value(text, "keepalive_proxy_upstream_reused_total"), 2);
	assert_int_equal(
		metric_value(text, "keepalive_proxy_requests_on_freed_connection_total"), 0);
	assert_int_equal(metric_value(text, "keepalive_proxy_retries_total"), 0);
	assert_int_equal(metric_value(text, "keepalive_proxy_idle_upstream_connections"), 1);
	assert_int_equal(metric_value(text, "keepalive_proxy_tunnels"), 0);
	assert_int_equal(metric_value(text, "keepalive_proxy_errors_total{kind=\"refused\"}"), 1);
	assert_int_equal(metric_value(text, "keepalive_proxy_errors_total{kind=\"bad_request\"}"),
	                 1);
	assert_int_equal(metric_value(text, "keepalive_proxy_errors_total{kind=\"unresolved\"}"),
	                 0);
	/*
	 * Each 2-byte body left the origin in one send with its head and was read
	 * with it: nothing was left to splice, and with splice on, bytes read
	 * along with a head are not counted as copied.
	 */
	spliced = metric_value(text, "keepalive_proxy_bytes_spliced_total");
	copied = metric_value(text, "keepalive_proxy_bytes_copied_total");
	if (spliced != 0 || copied != 0)
		fail_msg("3 bodies that came with their heads: %g bytes spliced, %g copied; "
		         "expected none of either",
		         spliced, copied);
	/* Only the first request waited, for the connect it started: within the run. */
	assert_int_equal(metric_value(text, "keepalive_proxy_queue_waits_total"), 1);
	wait = metric_value(text, "keepalive_proxy_queue_wait_seconds_total");
	if (wait < 0 || wait > now_s() - t0)
		fail_msg("one wait for a connect on loopback took %g s, in a run of %.3f s", wait,
		         now_s() - t0);
	assert_non_null(strstr(text, "# TYPE keepalive_proxy_clients gauge"));

	text = stats_page(stats_port, "/stats", &status);
	assert_int_equal(status, 200);
	assert_non_null(strstr(text, "\"requests_total\": 5,"));
	assert_non_null(strstr(text, "\"upstream_reused_total\": 2,"));
	snprintf(host, sizeof(host), "\"127.0.0.1:%d\": 1", origin_port(og));
	if (!strstr(text, host))
		fail_msg("no idle count for the origin (%s) in:\n%s", host, text);
	/* Per host: its idle connection, its three responses, two over a connection used before. */
	snprintf(host, sizeof(host),
	         "\"hosts\": {\"127.0.0.1:%d\": {\"idle\": 1, \"requests\": 3, \"reused\": 2, "
	         "\"readahead\": 0, \"readahead_bytes\": 0, \"saved_seconds\": ",
	         origin_port(og));
	if (!strstr(text, host))
		fail_msg("no counters for the origin (%s) in:\n%s", host, text);
	/* The samples: the one taken at the start at least, every counter an array. */
	if (!strstr(text, "\"hosts_forgotten\": 0, \"history\": {\"interval\": 10, \"taken\": ") ||
	    !strstr(text, "\"pooled\": [0") || !strstr(text, "\"saved\": [0.000000"))
		fail_msg("no history of samples in:\n%s", text);

	stats_page(stats_port, "/other", &status);
	assert_int_equal(status, 404);
	proxy_stop(&px);
}

/* Every counter reads the same or more on the next scrape. */
static void
counters_never_go_backwards(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char first[65536];
	const char *second, *line;
	int status;

	start_with_stats(NULL, NULL);
	expect_get(px.port, og, "/", 200, "ok");
	snprintf(first, sizeof(first), "%s", stats_page(stats_port, "/metrics", &status));
	for (int i = 0; i < 3; i++)
		expect_get(px.port, og, "/", 200, "ok");
	second = stats_page(stats_port, "/metrics", &status);
	for (line = first; (line = strstr(line, "\nkeepalive_proxy_")) != NULL; line++) {
		char name[160];
		size_t len = strcspn(line + 1, " ");

		if (len >= sizeof(name) || !memmem(line + 1, len, "_total", 6))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)len, line + 1);
		if (metric_value(second, name) < metric_value(first, name))
			fail_msg("%s went from %g to %g", name, metric_value(first, name),
			         metric_value(second, name));
	}
	assert_int_equal(metric_value(second, "keepalive_proxy_requests_total"), 4);
	proxy_stop(&px);
}

/* Without splice(2) every byte the origin sent passes through user space, and is counted once. */
static void
copied_bytes_are_what_the_origin_sent(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	const char *text;
	double copied, spliced;
	int status;

	start_with_stats("--no-splice", NULL);
	for (int i = 0; i < 3; i++)
		expect_get(px.port, og, "/", 200, "ok");
	text = stats_page(stats_port, "/metrics", &status);
	assert_int_equal(status, 200);
	copied = metric_value(text, "keepalive_proxy_bytes_copied_total");
	spliced = metric_value(text, "keepalive_proxy_bytes_spliced_total");
	origin_wait_bytes_sent(og, (uint64_t)copied, 2000);
	if (copied != (double)origin_bytes_sent(og) || spliced != 0)
		fail_msg("the origin sent %llu bytes; the proxy counted %g copied and %g spliced",
		         (unsigned long long)origin_bytes_sent(og), copied, spliced);
	proxy_stop(&px);
}

/* A peer outside --allow is closed at accept: not a byte, not a slot. */
static void
page_closes_peers_outside_allow(void)
{
	struct client c;

	start_with_stats("--allow", "10.0.0.0/8");
	client_open(&c, stats_port);
	assert_client_eof(&c, 2000);
	client_close(&c);
	client_open(&c, stats_port);
	client_sendf(&c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	assert_client_eof(&c, 2000);
	client_close(&c);
	if (proxy_log_count(&px, "stats page: 127.0.0.1") < 1)
		fail_msg("the refusal was not logged");
	proxy_stop(&px);
}

/* GET path with the given Host field line (or none) and more fields; the status. */
static int
page_status(const char *path, const char *fields, struct response *r)
{
	char text[512];

	snprintf(text, sizeof(text), "GET %s HTTP/1.1\r\n%s\r\n", path, fields);
	request_once(stats_port, NULL, text, r);
	return r->head.status;
}

static void
expect_page_status(const char *path, const char *fields, int want, const char *file, int line)
{
	struct response r;

	if (page_status(path, fields, &r) != want) {
		response_print(&r);
		fail_msg("%s:%d: GET %s with\n%s answered %d, expected %d", file, line, path, fields,
		         r.head.status, want);
	}
	response_free(&r);
}
#define page_answers(path, fields, want) \
	expect_page_status((path), (fields), (want), __FILE__, __LINE__)

/*
 * A web page in a browser on this machine whose name was rebound to
 * 127.0.0.1 sends its own name as Host: that gets 421, and an address or
 * localhost the page.
 */
static void
page_answers_only_its_address_or_localhost(void)
{
	char own[64], own_port[128];

	start_with_stats(NULL, NULL);
	snprintf(own, sizeof(own), "Host: 127.0.0.1:%d\r\n", stats_port);
	snprintf(own_port, sizeof(own_port), "Host: localhost:%d\r\n", stats_port);
	page_answers("/metrics", own, 200);
	page_answers("/metrics", "Host: 127.0.0.1\r\n", 200);
	page_answers("/stats", own_port, 200);
	page_answers("/stats", "Host: LOCALHOST\r\n", 200);
	page_answers("/metrics", "Host: [::1]:9251\r\n", 200);
	page_answers("/metrics", "Host: attacker.example:9251\r\n", 421);
	page_answers("/stats", "Host: attacker.example\r\n", 421);
	page_answers("/stats", "Host: localhost.attacker.example\r\n", 421);
	page_answers("/stats", "Host: 127.0.0.1.nip.io\r\n", 421);
	page_answers("/stats", "Host: [::1\r\n", 421);
	page_answers("/stats", "", 421);
	page_answers("/", "Host: attacker.example\r\n", 421);
	proxy_stop(&px);
}

/* base64("alice:open sesame") and base64("alice:wrong"). */
#define ALICE "Authorization: Basic YWxpY2U6b3BlbiBzZXNhbWU=\r\n"
#define ALICE_WRONG "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n"

/*
 * With --auth-file the page is for the file's users (a plain password and
 * a hash checked off the loop), not for whoever reaches its port; with
 * --stats-no-auth it is open again, for a listener only this machine reaches.
 */
static void
page_asks_for_credentials_with_auth_file(void)
{
	static char users[512], listen[64];
	const char *args[] = {"--stats-listen", listen, "--auth-file", users, NULL, NULL};
	struct response r;
	char host[64], fields[256];
	FILE *f;

	snprintf(users, sizeof(users), "%s/users", harness_temp_dir());
	f = fopen(users, "w");
	assert_non_null(f);
	/* bob's password is "open sesame" too, as a SHA-512 crypt hash. */
	fputs("alice:open sesame\n"
	      "bob:$6$kpsalt$DvKg3hGfeXXDF5oswwIvt230IOyeNgRd67bJ2B3mMSk3iApO2MmiDL.Zkn8AHsc6q1v"
	      "xVO/K5mHVWKjgzqYrD1\n",
	      f);
	fclose(f);
	chmod(users, 0600);
	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%d\r\n", stats_port);
	proxy_start(&px, args);

	if (page_status("/metrics", host, &r) != 401 || !resp_header(&r, "WWW-Authenticate") ||
	    strcmp(resp_header(&r, "WWW-Authenticate"), "Basic realm=\"keepalive-proxy stats\"")) {
		response_print(&r);
		fail_msg("no credentials: expected 401 with a Basic challenge");
	}
	response_free(&r);
	snprintf(fields, sizeof(fields), "%s" ALICE_WRONG, host);
	page_answers("/stats", fields, 401);
	snprintf(fields, sizeof(fields), "%s" ALICE, host);
	page_answers("/stats", fields, 200);
	page_answers("/metrics", fields, 200);
	/* The proxy's own field is not the page's: a request to a server carries Authorization. */
	snprintf(fields, sizeof(fields), "%sProxy-Authorization: Basic YWxpY2U6b3BlbiBzZXNhbWU=\r\n",
	         host);
	page_answers("/metrics", fields, 401);
	/* A name is refused before credentials are asked for. */
	page_answers("/metrics", "Host: attacker.example\r\n" ALICE, 421);
	snprintf(fields, sizeof(fields), "%sAuthorization: Basic Ym9iOm9wZW4gc2VzYW1l\r\n", host);
	page_answers("/metrics", fields, 200);
	proxy_stop(&px);

	args[4] = "--stats-no-auth";
	proxy_start(&px, args);
	page_answers("/metrics", host, 200);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(numbers_match_a_scripted_run),
		E2E_TEST(counters_never_go_backwards),
		E2E_TEST(copied_bytes_are_what_the_origin_sent),
		E2E_TEST(page_closes_peers_outside_allow),
		E2E_TEST(page_answers_only_its_address_or_localhost),
		E2E_TEST(page_asks_for_credentials_with_auth_file),
	};

	return E2E_RUN("stats", tests);
}
