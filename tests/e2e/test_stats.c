/*
 * The stats page (--stats-listen): /metrics and /stats show what a scripted
 * run did (per host too, and the samples for the chart), counters never go
 * backwards, the copy path counts every byte it moves, anything else is
 * 404, and the page obeys --allow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void
page_obeys_allow(void)
{
	int status;

	start_with_stats("--allow", "10.0.0.0/8");
	stats_page(stats_port, "/metrics", &status);
	assert_int_equal(status, 403);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(numbers_match_a_scripted_run),
		E2E_TEST(counters_never_go_backwards),
		E2E_TEST(copied_bytes_are_what_the_origin_sent),
		E2E_TEST(page_obeys_allow),
	};

	return E2E_RUN("stats", tests);
}
