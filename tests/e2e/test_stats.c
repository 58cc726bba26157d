/*
 * The stats page (--stats-listen): /metrics and /stats show what a scripted
 * run did, counters never go backwards, anything else is 404, and the page
 * obeys --allow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;
static int stats_port;

static void
start_with_stats(const char *extra)
{
	static char listen[64];
	const char *args[] = {"--stats-listen", listen, extra, extra ? "10.0.0.0/8" : NULL, NULL};

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
}

/* GET path from the stats page; the body is returned (static), the status through *status. */
static const char *
page(const char *path, int *status)
{
	static char body[65536];
	struct client c;
	struct response r;

	client_open(&c, stats_port);
	client_sendf(&c, "GET %s HTTP/1.1\r\nHost: stats\r\n\r\n", path);
	read_response_ok(&c, &r, 0);
	*status = r.head.status;
	snprintf(body, sizeof(body), "%.*s", (int)r.body.len, r.body.data ? (const char *)r.body.data : "");
	response_free(&r);
	client_close(&c);
	return body;
}

/* The value of a metric line "name value" (name may carry labels). */
static double
metric(const char *text, const char *name)
{
	char key[160];
	const char *at;

	snprintf(key, sizeof(key), "\n%s ", name);
	at = strstr(text, key);
	if (!at)
		fail_msg("no metric %s in:\n%s", name, text);
	return strtod(at + strlen(key), NULL);
}

static void
numbers_match_a_scripted_run(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct client c;
	struct response r;
	const char *text;
	char host[64];
	int status;

	start_with_stats(NULL);
	for (int i = 0; i < 3; i++)
		origin_get_ok(og, px.port);   /* one connect, then the pooled connection twice */
	client_open(&c, px.port);
	client_sendf(&c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n", origin_port(og));
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 403);   /* --connect-ports is 443 */
	response_free(&r);
	client_close(&c);
	client_open(&c, px.port);
	client_sendf(&c, "GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 400);
	response_free(&r);
	client_close(&c);

	text = page("/metrics", &status);
	assert_int_equal(status, 200);
	assert_int_equal(metric(text, "keepalive_proxy_requests_total"), 5);
	assert_int_equal(metric(text, "keepalive_proxy_upstream_connects_total"), 1);
	assert_int_equal(metric(text, "keepalive_proxy_upstream_reused_total"), 2);
	assert_int_equal(metric(text, "keepalive_proxy_requests_on_freed_connection_total"), 0);
	assert_int_equal(metric(text, "keepalive_proxy_retries_total"), 0);
	assert_int_equal(metric(text, "keepalive_proxy_idle_upstream_connections"), 1);
	assert_int_equal(metric(text, "keepalive_proxy_tunnels"), 0);
	assert_int_equal(metric(text, "keepalive_proxy_errors_total{kind=\"refused\"}"), 1);
	assert_int_equal(metric(text, "keepalive_proxy_errors_total{kind=\"bad_request\"}"), 1);
	assert_int_equal(metric(text, "keepalive_proxy_errors_total{kind=\"unresolved\"}"), 0);
	assert_true(metric(text, "keepalive_proxy_bytes_spliced_total") +
	                    metric(text, "keepalive_proxy_bytes_copied_total") >= 0);
	assert_true(metric(text, "keepalive_proxy_queue_wait_seconds_total") >= 0);
	assert_non_null(strstr(text, "# TYPE keepalive_proxy_clients gauge"));

	text = page("/stats", &status);
	assert_int_equal(status, 200);
	assert_non_null(strstr(text, "\"requests_total\": 5,"));
	assert_non_null(strstr(text, "\"upstream_reused_total\": 2,"));
	snprintf(host, sizeof(host), "\"127.0.0.1:%d\": 1", origin_port(og));
	if (!strstr(text, host))
		fail_msg("no idle count for the origin (%s) in:\n%s", host, text);

	page("/other", &status);
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

	start_with_stats(NULL);
	origin_get_ok(og, px.port);
	snprintf(first, sizeof(first), "%s", page("/metrics", &status));
	for (int i = 0; i < 3; i++)
		origin_get_ok(og, px.port);
	second = page("/metrics", &status);
	for (line = first; (line = strstr(line, "\nkeepalive_proxy_")) != NULL; line++) {
		char name[160];
		size_t len = strcspn(line + 1, " ");

		if (len >= sizeof(name) || !memmem(line + 1, len, "_total", 6))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)len, line + 1);
		if (metric(second, name) < metric(first, name))
			fail_msg("%s went from %g to %g", name, metric(first, name),
			         metric(second, name));
	}
	assert_int_equal(metric(second, "keepalive_proxy_requests_total"), 4);
	proxy_stop(&px);
}

static void
page_obeys_allow(void)
{
	int status;

	start_with_stats("--allow");
	page("/metrics", &status);
	assert_int_equal(status, 403);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(numbers_match_a_scripted_run),
		E2E_TEST(counters_never_go_backwards),
		E2E_TEST(page_obeys_allow),
	};

	return E2E_RUN("stats", tests);
}
