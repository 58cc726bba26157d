/*
 * The dashboard (GET / on the stats listener): a real headless Chromium
 * loads the page after scripted traffic, runs its script, and the numbers
 * it shows must be the ones /metrics gives. A screenshot is kept beside
 * the test (dashboard.png in the test's working directory) for people to
 * look at; nothing is judged from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;
static int stats_port;

/* The page's text for the element id (its first characters up to '<'), or NULL. */
static const char *
shown(const char *dom, const char *id, char *out, size_t size)
{
	char needle[160];
	const char *p, *end;

	snprintf(needle, sizeof(needle), "id=\"%s\">", id);
	if (!(p = strstr(dom, needle)))
		return NULL;
	p += strlen(needle);
	if (!(end = strchr(p, '<')) || (size_t)(end - p) >= size)
		return NULL;
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
	return out;
}

/* Chromium, headless, on url: the DOM after its script ran (into log), or a screenshot. */
static void
chromium(const char *bin, const char *url, const char *what, const char *log)
{
	char profile[300];
	const char *argv[] = {bin,
	                      "--headless",
	                      "--no-sandbox", /* the tests may run as root */
	                      "--disable-gpu",
	                      "--no-first-run",
	                      profile,
	                      "--virtual-time-budget=3000",
	                      "--window-size=1000,1400",
	                      what,
	                      url,
	                      NULL};
	int rc;

	snprintf(profile, sizeof(profile), "--user-data-dir=%s/chromium", harness_temp_dir());
	rc = run_process(argv, log, 60000);
	if (rc != 0)
		fail_msg("chromium %s exited with %d (log: %s)", what, rc, log);
}

static void
page_shows_what_stats_says(void)
{
	static const char *const counters[] = {
	        "requests_total",           "upstream_reused_total",
	        "requests_on_new_connection_total", "requests_on_freed_connection_total",
	        "local_responses_total",    "bytes_to_clients_total",
	        "queue_waits_total",
	};
	const char *bin = require_program("chromium", "KP_CHROMIUM");
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char listen[64], url[96], log[300], host_id[96], got[64], want[64], *dom;
	const char *args[] = {"--stats-listen", listen, NULL};
	struct client c;
	struct response r;

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
	/* Five requests on one client connection: one new upstream connection, four reused. */
	client_open(&c, px.port);
	for (int i = 0; i < 5; i++) {
		send_request(&c, "GET", og, "/", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
		read_response_ok(&c, &r, 0);
		response_free(&r);
	}
	client_close(&c);
	/* A request the proxy answers itself. */
	client_open(&c, px.port);
	client_sendf(&c, "GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_int_equal(client_read_response(&c, &r, 0), WIRE_OK);
	response_free(&r);
	client_close(&c);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", stats_port);
	snprintf(log, sizeof(log), "%s/dom.html", harness_temp_dir());
	chromium(bin, url, "--dump-dom", log);
	dom = read_file_all(log, NULL);
	if (!dom || !strstr(dom, "keepalive-proxy"))
		fail_msg("chromium did not load the page:\n%s", dom ? dom : "(nothing)");
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		char metric[128];

		snprintf(metric, sizeof(metric), "keepalive_proxy_%s", counters[i]);
		snprintf(want, sizeof(want), "%.0f", stats_metric(stats_port, metric));
		if (!shown(dom, counters[i], got, sizeof(got)) || strcmp(got, want) != 0)
			fail_msg("the page shows %s = %s, /metrics says %s", counters[i],
			         shown(dom, counters[i], got, sizeof(got)) ? got : "(nothing)", want);
	}
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_upstream_reused_total"), 4);
	snprintf(want, sizeof(want), "%.0f",
	         stats_metric(stats_port, "keepalive_proxy_readahead_hits_total") +
	                 stats_metric(stats_port, "keepalive_proxy_readahead_joins_total"));
	if (!shown(dom, "readahead_served", got, sizeof(got)) || strcmp(got, want) != 0)
		fail_msg("the page's read-ahead count differs from /metrics (%s)", want);
	/* The warm connection, per host. */
	snprintf(host_id, sizeof(host_id), "hosts:127.0.0.1:%d", origin_port(og));
	if (!shown(dom, host_id, got, sizeof(got)) || strcmp(got, "1") != 0)
		fail_msg("the page does not show one warm connection to the origin");
	/* What reuse saved, to the millisecond the page shows. */
	snprintf(want, sizeof(want), "%.3f",
	         stats_metric(stats_port, "keepalive_proxy_saved_seconds_total"));
	if (!shown(dom, "saved_seconds_total", got, sizeof(got)) || strcmp(got, want) != 0)
		fail_msg("the page shows %s s saved, /metrics says %s",
		         shown(dom, "saved_seconds_total", got, sizeof(got)) ? got : "nothing", want);
	free(dom);

	chromium(bin, url, "--screenshot=dashboard.png", log);
	proxy_stop(&px);
}

/* A build with the page answers / with it; the JSON it polls is there either way. */
static void
page_is_self_contained(void)
{
	char listen[64];
	const char *args[] = {"--stats-listen", listen, NULL};
	const char *page;
	int status;

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
	page = stats_page(stats_port, "/", &status);
	assert_int_equal(status, 200);
	/* No external assets: nothing is fetched from anywhere but /stats. */
	if (strstr(page, "src=\"http") || strstr(page, "href=\"http") || strstr(page, "//cdn") ||
	    !strstr(page, "fetch(\"/stats\""))
		fail_msg("the page refers to something outside it");
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(page_is_self_contained),
		E2E_TEST(page_shows_what_stats_says),
	};

	return E2E_RUN("dashboard", tests);
}
