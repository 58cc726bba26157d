/*
 * The dashboard (GET / on the stats listener): a real headless Chromium
 * loads the page after scripted traffic to two origins, one of them
 * served partly by read-ahead, and runs its script. Every number the page
 * shows must be the one /stats gives: its raw value (the element's
 * data-v) and its text, which must be what this file's formatting, the
 * page's rules written again in C, makes of that value. The charts must
 * have drawn every sample /stats keeps, and the host table must have a
 * row per origin with its counts. Screenshots are kept beside the test
 * (dashboard.png, and dashboard-phone.png at a phone's width) for people
 * to look at; nothing is judged from them.
 *
 * With parent proxies (a real microsocks, and one where nothing listens)
 * the page has a block per parent whose numbers and failure rows must be
 * /stats's too (dashboard-parents-phone.png shows it at a phone's width);
 * without any, that section stays hidden.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"
#include "parents.h"

/* The page's chart covers this many intervals; /stats keeps one sample more. */
#define INTERVALS 90
#define SAMPLES (INTERVALS + 1)
/* Samples this far apart: every phase of the traffic lands in an interval of its own. */
#define INTERVAL "0.2"
#define PIECE 65536u
#define OBJECT (3u * PIECE)
#define WAIT_S 10.0

static struct proxy px;
static struct parent_proc socks;
static int stats_port;

/* ---- /stats, read as text ---- */

/* Just after `"key": ` in the JSON from, or NULL. */
static const char *
json_at(const char *from, const char *key)
{
	char needle[320];
	const char *p;

	snprintf(needle, sizeof(needle), "\"%s\": ", key);
	return (p = strstr(from, needle)) ? p + strlen(needle) : NULL;
}

static double
json_number(const char *from, const char *key)
{
	const char *p = json_at(from, key);

	if (!p)
		fail_msg("no \"%s\" in /stats:\n%.2000s", key, from);
	return strtod(p, NULL);
}

/* The object of one host in "hosts", or NULL. */
static const char *
json_host(const char *stats, const char *key)
{
	const char *hosts = json_at(stats, "hosts");

	return hosts ? json_at(hosts, key) : NULL;
}

/* A fresh /stats, the caller's to free. */
static char *
stats_now(void)
{
	int status;
	char *s = strdup(stats_page(stats_port, "/stats", &status));

	assert_int_equal(status, 200);
	assert_non_null(s);
	return s;
}

static unsigned long
samples_taken(void)
{
	char *s = stats_now();
	unsigned long taken = (unsigned long)json_number(json_at(s, "history"), "taken");

	free(s);
	return taken;
}

/* The sampler took a sample after everything before this call. */
static void
next_sample(void)
{
	unsigned long was = samples_taken();
	double deadline = now_s() + WAIT_S;

	while (samples_taken() <= was) {
		if (now_s() > deadline)
			fail_msg("no sample within %g s at one every %s s", WAIT_S, INTERVAL);
		sleep_ms(20);
	}
}

/* Every upstream connection is idle: no fetch ahead is arriving, the counts stand still. */
static void
all_idle(void)
{
	double deadline = now_s() + WAIT_S, open, idle;

	for (;;) {
		open = stats_metric(stats_port, "keepalive_proxy_upstream_connections");
		idle = stats_metric(stats_port, "keepalive_proxy_idle_upstream_connections");
		if (open > 0 && idle == open)
			return;
		if (now_s() > deadline)
			fail_msg("%.0f of %.0f upstream connections idle, expected all", idle, open);
		sleep_ms(10);
	}
}

/* ---- The page's formatting, in C: the same text for the same number ---- */

/* Math.round() of a number not below 0: half up. */
static double
round_half_up(double x)
{
	double r = floor(x);

	return x - r >= 0.5 ? r + 1 : r;
}

/* fix(v, d): v rounded half up to d decimals, d of them written. */
static const char *
fix(char *out, size_t size, double v, int d)
{
	static const double scale[] = {1, 10, 100, 1000};

	snprintf(out, size, "%.*f", d, round_half_up(v * scale[d]) / scale[d]);
	return out;
}

/* sig(v): three significant digits from 1 to 999. */
static const char *
sig(char *out, size_t size, double v)
{
	return fix(out, size, v, v < 10 ? 2 : v < 100 ? 1 : 0);
}

/* count(n): digits grouped by three with commas. */
static const char *
fmt_count(char *out, size_t size, double n)
{
	char digits[32];
	size_t len, o = 0;

	snprintf(digits, sizeof(digits), "%.0f", n);
	len = strlen(digits);
	for (size_t i = 0; i < len && o + 2 < size; i++) {
		if (i && (len - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
	return out;
}

static const char *
fmt_bytes(char *out, size_t size, double n)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	char v[32];
	int i = 0;

	for (; n >= 1024 && i < 4; i++)
		n /= 1024;
	snprintf(out, size, "%s %s", i ? sig(v, sizeof(v), n) : fix(v, sizeof(v), n, 0), units[i]);
	return out;
}

static const char *
fmt_seconds(char *out, size_t size, double s)
{
	char v[32];

	if (!(s > 0))
		snprintf(out, size, "0 s");
	else if (s < 1e-3)
		snprintf(out, size, "%s \u00b5s", sig(v, sizeof(v), s * 1e6));
	else if (s < 1)
		snprintf(out, size, "%s ms", sig(v, sizeof(v), s * 1e3));
	else if (s < 60)
		snprintf(out, size, "%s s", sig(v, sizeof(v), s));
	else if (s < 3600)
		snprintf(out, size, "%s min", sig(v, sizeof(v), s / 60));
	else
		snprintf(out, size, "%s h", sig(v, sizeof(v), s / 3600));
	return out;
}

/* ms(s): a round trip in ms, thousandths below 1 ms; a dash when none was measured. */
static const char *
fmt_ms(char *out, size_t size, double s)
{
	char v[32];
	double ms = s * 1e3;

	if (!(s > 0))
		snprintf(out, size, "\u2013");
	else if (ms < 1)
		snprintf(out, size, "%s ms", fix(v, sizeof(v), ms, 3));
	else
		snprintf(out, size, "%s ms", sig(v, sizeof(v), ms));
	return out;
}

static const char *
fmt_percent(char *out, size_t size, double a, double b)
{
	if (b > 0)
		snprintf(out, size, "%.0f%%", round_half_up(100 * a / b));
	else
		snprintf(out, size, "\u2013");
	return out;
}

/* ---- The page, as Chromium left it ---- */

/* Element id's text (up to the next tag) and data-v (NULL when it has none); false if absent. */
static bool
element(const char *dom, const char *id, char *text, size_t tsize, char *raw, size_t rsize)
{
	char needle[320];
	const char *p, *end, *v, *close;

	snprintf(needle, sizeof(needle), " id=\"%s\"", id);
	if (!(p = strstr(dom, needle)) || !(end = strchr(p, '>')))
		return false;
	if (raw) {
		raw[0] = '\0';
		v = memmem(p, (size_t)(end - p), " data-v=\"", 9);
		if (v && (close = strchr(v + 9, '"')) && (size_t)(close - v - 9) < rsize) {
			memcpy(raw, v + 9, (size_t)(close - v - 9));
			raw[close - v - 9] = '\0';
		}
	}
	p = end + 1;
	if (!(end = strchr(p, '<')) || (size_t)(end - p) >= tsize)
		return false;
	memcpy(text, p, (size_t)(end - p));
	text[end - p] = '\0';
	return true;
}

/*
 * The page shows want for id, and, unless raw is NAN, carries raw as its
 * data-v. Every mismatch is reported; *bad counts them.
 */
static void
check_shown(const char *dom, const char *id, const char *want, double raw, unsigned *bad)
{
	char text[128], v[64];

	if (!element(dom, id, text, sizeof(text), v, sizeof(v))) {
		print_error("the page has no element %s\n", id);
		++*bad;
		return;
	}
	if (strcmp(text, want) != 0) {
		print_error("the page shows %s as \"%s\"; /stats makes that \"%s\"\n", id, text, want);
		++*bad;
	}
	if (!isnan(raw) && (!v[0] || strtod(v, NULL) != raw)) {
		print_error("the page's raw value of %s is \"%s\"; /stats says %.17g\n", id, v, raw);
		++*bad;
	}
}

typedef const char *(*formatter)(char *out, size_t size, double v);

static void
check_value(const char *dom, const char *id, formatter fmt, double v, unsigned *bad)
{
	char want[64];

	check_shown(dom, id, fmt(want, sizeof(want), v), v, bad);
}

/* Chromium, headless, on url at width x height: the DOM after its script ran (into log), or a screenshot. */
static void
chromium(const char *bin, const char *url, const char *what, const char *size, const char *log)
{
	char profile[300];
	const char *argv[] = {bin,
	                      "--headless",
	                      "--no-sandbox", /* the tests may run as root */
	                      "--disable-gpu",
	                      "--no-first-run",
	                      "--hide-scrollbars",
	                      profile,
	                      "--virtual-time-budget=3000",
	                      size,
	                      what,
	                      url,
	                      NULL};
	int rc;

	snprintf(profile, sizeof(profile), "--user-data-dir=%s/chromium", harness_temp_dir());
	rc = run_process(argv, log, 60000);
	if (rc != 0)
		fail_msg("chromium %s exited with %d (log: %s)", what, rc, log);
}

/* Vertices in the d of every path of the svg whose id is id, in order, into n[] (at most max). */
static unsigned
chart_paths(const char *dom, const char *id, unsigned n[], unsigned max, unsigned long *samples,
            unsigned long *taken)
{
	char needle[64];
	const char *svg, *end, *p, *v;
	unsigned paths = 0;

	snprintf(needle, sizeof(needle), "<svg id=\"%s\"", id);
	if (!(svg = strstr(dom, needle)) || !(end = strstr(svg, "</svg>")))
		fail_msg("the page has no chart %s", id);
	if (!(v = strstr(svg, " data-n=\"")) || v > end)
		fail_msg("the chart %s says nothing of its samples", id);
	*samples = strtoul(v + 9, NULL, 10);
	if (!(v = strstr(svg, " data-taken=\"")) || v > end)
		fail_msg("the chart %s does not say which samples", id);
	*taken = strtoul(v + 13, NULL, 10);
	for (p = svg; (p = strstr(p, "<path")) != NULL && p < end && paths < max; p++) {
		const char *d = strstr(p, " d=\""), *q;

		n[paths] = 0;
		for (q = d + 4; *q && *q != '"'; q++)
			n[paths] += *q == ',';
		paths++;
	}
	return paths;
}

/* ---- The origins ---- */

/*
 * /video.bin is a 192 KiB object served in byte ranges, as a downloader
 * fetches a video; anything else is a short "ok".
 */
static void
serve_video(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *range = headers_get(&req->head.headers, "Range");
	unsigned long long first, last;

	(void)arg;
	if (strcmp(req->head.target, "/video.bin") != 0 || !range) {
		origin_reply(c, 200, NULL, "ok");
		return;
	}
	if (sscanf(range, "bytes=%llu-%llu", &first, &last) != 2 || first > last ||
	    first >= OBJECT) {
		origin_reply(c, 416, NULL, "");
		return;
	}
	if (last >= OBJECT)
		last = OBJECT - 1;
	origin_sendf(c,
	             "HTTP/1.1 206 Partial Content\r\nContent-Type: video/mp4\r\n"
	             "ETag: \"kp-video\"\r\nLast-Modified: Tue, 01 Jul 2025 10:00:00 GMT\r\n"
	             "Content-Range: bytes %llu-%llu/%u\r\nContent-Length: %llu\r\n\r\n",
	             first, last, OBJECT, last - first + 1);
	origin_send_pattern(c, first, last - first + 1);
}

static void
get_range(struct origin *og, unsigned first, unsigned last)
{
	char fields[96];
	struct client c;
	struct response r;

	snprintf(fields, sizeof(fields), "Range: bytes=%u-%u\r\n", first, last);
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/video.bin", "HTTP/1.1", fields);
	read_response_ok(&c, &r, 0);
	assert_status(&r, 206);
	assert_int_equal(r.body.len, last - first + 1);
	response_free(&r);
	client_close(&c);
}

/* ---- The scenarios ---- */

static const char *const error_kinds[] = {
	"refused", "unauthorized", "bad_request", "timeout",       "unresolved",
	"connect", "reset",        "bad_response", "queue_timeout", "tls",
};

/* Every number outside the host table and the charts: text and raw value. */
static void
check_counters(const char *dom, const char *s, unsigned *bad)
{
	static const char *const counts[] = {
		"requests_total", "upstream_reused_total", "requests_on_freed_connection_total",
		"requests_on_new_connection_total", "local_responses_total", "queue_waits_total",
		"queued_requests", "split_downloads_total", "split_pieces_total",
		"split_resumes_total", "split_declined_total", "split_mismatches_total",
		"split_backoffs_total", "fetch_throttled_total",
	};
	static const char *const byte_counts[] = {
		"bytes_to_clients_total", "bytes_to_upstreams_total", "bytes_spliced_total",
		"bytes_copied_total",
	};
	const char *errors = json_at(s, "errors_total");
	char want[64];
	double reused = json_number(s, "upstream_reused_total");

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		check_value(dom, counts[i], fmt_count, json_number(s, counts[i]), bad);
	for (size_t i = 0; i < sizeof(byte_counts) / sizeof(byte_counts[0]); i++)
		check_value(dom, byte_counts[i], fmt_bytes, json_number(s, byte_counts[i]), bad);
	check_value(dom, "saved_seconds_total", fmt_seconds, json_number(s, "saved_seconds_total"),
	            bad);
	check_value(dom, "queue_wait_seconds_total", fmt_seconds,
	            json_number(s, "queue_wait_seconds_total"), bad);
	fmt_count(want, sizeof(want),
	          json_number(s, "readahead_hits_total") + json_number(s, "readahead_joins_total"));
	check_shown(dom, "readahead_served", want, NAN, bad);
	/* --fetch-memory in use: the pieces and what is kept about them, one number. */
	fmt_bytes(want, sizeof(want),
	          json_number(s, "fetch_memory_bytes") + json_number(s, "fetch_records_bytes"));
	check_shown(dom, "fetch_memory_in_use", want, NAN, bad);
	fmt_percent(want, sizeof(want), reused,
	            reused + json_number(s, "requests_on_new_connection_total"));
	check_shown(dom, "reuse_rate", want, NAN, bad);
	/* The kinds that happened, and only those. */
	for (size_t i = 0; i < sizeof(error_kinds) / sizeof(error_kinds[0]); i++) {
		double n = json_number(errors, error_kinds[i]);
		char id[64], text[64];

		snprintf(id, sizeof(id), "errors:%s", error_kinds[i]);
		if (n > 0) {
			check_value(dom, id, fmt_count, n, bad);
		} else if (element(dom, id, text, sizeof(text), NULL, 0)) {
			print_error("the page shows %s, which did not happen\n", id);
			++*bad;
		}
	}
}

/* One row of the host table: every cell against /stats. */
static void
check_host_row(const char *dom, const char *s, const char *key, unsigned *bad)
{
	const char *h = json_host(s, key);
	char id[320], want[64];
	double requests, reused, ahead;

	if (!h)
		fail_msg("/stats has no counters for %s:\n%.3000s", key, s);
	requests = json_number(h, "requests");
	reused = json_number(h, "reused");
	ahead = json_number(h, "readahead");
	snprintf(id, sizeof(id), "hosts:%s", key);
	check_value(dom, id, fmt_count, json_number(h, "idle"), bad);
	snprintf(id, sizeof(id), "hosts:%s:requests", key);
	check_value(dom, id, fmt_count, requests, bad);
	snprintf(id, sizeof(id), "hosts:%s:reuse", key);
	check_shown(dom, id, fmt_percent(want, sizeof(want), reused, requests - ahead), reused, bad);
	snprintf(id, sizeof(id), "hosts:%s:readahead", key);
	check_value(dom, id, fmt_count, ahead, bad);
	snprintf(id, sizeof(id), "hosts:%s:readahead_bytes", key);
	check_value(dom, id, fmt_bytes, json_number(h, "readahead_bytes"), bad);
	snprintf(id, sizeof(id), "hosts:%s:saved", key);
	check_value(dom, id, fmt_seconds, json_number(h, "saved_seconds"), bad);
}

/*
 * Each chart drew every sample it was given: a step (four vertices) per
 * interval per series for the rates, one per sample for time saved, from
 * as many samples as /stats kept then (the newest one's number tells).
 */
static void
check_charts(const char *dom, const char *s)
{
	static const struct {
		const char *id;
		unsigned series;
		bool per_sample;
	} charts[] = {
		{"chart_requests", 5, false},
		{"chart_bytes", 1, false},
		{"chart_saved", 1, true},
	};
	unsigned long now_taken = (unsigned long)json_number(json_at(s, "history"), "taken");

	for (size_t c = 0; c < sizeof(charts) / sizeof(charts[0]); c++) {
		unsigned n[8], paths;
		unsigned long samples, taken, steps;

		paths = chart_paths(dom, charts[c].id, n, 8, &samples, &taken);
		if (taken > now_taken || samples != (taken < SAMPLES ? taken : SAMPLES))
			fail_msg("%s was drawn from %lu samples up to number %lu; /stats has taken %lu "
			         "and keeps %d",
			         charts[c].id, samples, taken, now_taken, SAMPLES);
		/* Enough to hold the traffic's phases, each in an interval of its own. */
		if (samples < 5)
			fail_msg("%s was drawn from %lu samples only", charts[c].id, samples);
		steps = charts[c].per_sample ? samples : samples - 1;
		if (paths != charts[c].series)
			fail_msg("%s has %u areas, expected %u", charts[c].id, paths, charts[c].series);
		for (unsigned k = 0; k < paths; k++)
			if (n[k] != 4 * steps)
				fail_msg("area %u of %s has %u vertices, expected %lu for %lu samples", k,
				         charts[c].id, n[k], 4 * steps, samples);
	}
	/* Something was drawn: the first area (pooled requests) rises above the baseline. */
	{
		const char *svg = strstr(dom, "<svg id=\"chart_requests\""), *d = strstr(svg, " d=\"");
		const char *end = strchr(d + 4, '"');
		bool rises = false;

		for (const char *p = d + 4; p < end && !rises; p++)
			if (*p == ',' && strtod(p + 1, NULL) < 107.9)
				rises = true;
		if (!rises)
			fail_msg("the requests chart is flat");
	}
}

/* ---- Parent proxies ---- */

/* Each failure kind of a parent in /stats, and the words the page says it in. */
static const struct {
	const char *key;
	const char *words;
} parent_failures[] = {
	{"unreachable", "parent unreachable"},
	{"refused", "refused by the parent"},
	{"auth", "wrong or missing credentials"},
	{"origin_unreachable", "parent could not reach the origin"},
	{"bad_reply", "malformed reply"},
	{"timeout", "timed out"},
	{"closed", "closed by the parent"},
};

/* The i-th object of "parents" in /stats (at its `{"parent": "`), or NULL. */
static const char *
json_parent(const char *stats, unsigned i)
{
	const char *p = json_at(stats, "parents");

	if (!p)
		fail_msg("no \"parents\" in /stats:\n%.3000s", stats);
	for (unsigned k = 0; (p = strstr(p, "{\"parent\": \"")) != NULL; k++, p++)
		if (k == i)
			return p;
	return NULL;
}

/* The label of a parent's object in /stats. */
static const char *
json_parent_label(const char *obj, char *out, size_t size)
{
	const char *from = obj + strlen("{\"parent\": \""), *end = strchr(from, '"');

	if (!end || (size_t)(end - from) >= size)
		fail_msg("a parent in /stats without a label: %.300s", obj);
	memcpy(out, from, (size_t)(end - from));
	out[end - from] = '\0';
	return out;
}

/* A count of failures of one kind: "unreachable" beside the handshakes, the rest in them. */
static double
json_parent_failures(const char *obj, const char *key)
{
	return strcmp(key, "unreachable") == 0 ? json_number(obj, key)
	                                       : json_number(json_at(obj, "handshakes"), key);
}

/* The table row holding element id says words. */
static bool
row_says(const char *dom, const char *id, const char *words)
{
	char needle[320];
	const char *at, *row = NULL;

	snprintf(needle, sizeof(needle), " id=\"%s\"", id);
	if (!(at = strstr(dom, needle)))
		return false;
	for (const char *p = dom; (p = strstr(p, "<tr>")) != NULL && p < at; p++)
		row = p;
	return row && memmem(row, (size_t)(at - row), words, strlen(words)) != NULL;
}

/* The block of the i-th parent: its label and every number against /stats. */
static void
check_parent(const char *dom, const char *s, unsigned i, unsigned *bad)
{
	const char *obj = json_parent(s, i);
	char id[64], label[300], want[64];
	double requests, reused, failed = 0;

	snprintf(id, sizeof(id), "parents:%u", i);
	check_shown(dom, id, json_parent_label(obj, label, sizeof(label)), NAN, bad);
	requests = json_number(obj, "requests");
	reused = json_number(obj, "reused");
	snprintf(id, sizeof(id), "parents:%u:requests", i);
	check_value(dom, id, fmt_count, requests, bad);
	snprintf(id, sizeof(id), "parents:%u:connects", i);
	check_value(dom, id, fmt_count, json_number(obj, "connects"), bad);
	snprintf(id, sizeof(id), "parents:%u:reused", i);
	check_value(dom, id, fmt_count, reused, bad);
	snprintf(id, sizeof(id), "parents:%u:reuse", i);
	check_shown(dom, id, fmt_percent(want, sizeof(want), reused, requests), NAN, bad);
	snprintf(id, sizeof(id), "parents:%u:rtt", i);
	check_value(dom, id, fmt_ms, json_number(obj, "rtt"), bad);
	/* The kinds that happened, each in words, and only those. */
	for (size_t k = 0; k < sizeof(parent_failures) / sizeof(parent_failures[0]); k++) {
		double n = json_parent_failures(obj, parent_failures[k].key);
		char text[64];

		failed += n;
		snprintf(id, sizeof(id), "parents:%u:%s", i, parent_failures[k].key);
		if (n > 0) {
			check_value(dom, id, fmt_count, n, bad);
			if (!row_says(dom, id, parent_failures[k].words)) {
				print_error("the row of %s does not say \"%s\"\n", id,
				            parent_failures[k].words);
				++*bad;
			}
		} else if (element(dom, id, text, sizeof(text), NULL, 0)) {
			print_error("the page shows %s, which did not happen\n", id);
			++*bad;
		}
	}
	snprintf(id, sizeof(id), "parents:%u:failed", i);
	check_shown(dom, id, fmt_count(want, sizeof(want), failed), NAN, bad);
}

static void
page_shows_what_stats_says(void)
{
	const char *bin = require_program("chromium", "KP_CHROMIUM");
	struct origin *a = origin_start(origin_handle_ok, NULL);
	struct origin *b = origin_start(serve_video, NULL);
	char listen[64], url[96], log[300], key_a[64], key_b[64], *dom, *s;
	const char *args[] = {"--stats-listen", listen, "--stats-interval", INTERVAL,
	                      "--read-ahead", NULL};
	const char *h;
	unsigned bad = 0;
	struct client c;
	struct response r;

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	snprintf(key_a, sizeof(key_a), "127.0.0.1:%d", origin_port(a));
	snprintf(key_b, sizeof(key_b), "127.0.0.1:%d", origin_port(b));
	proxy_start(&px, args);
	next_sample();
	/* Five requests to one origin on one client connection: one new upstream connection, four reused. */
	client_open(&c, px.port);
	for (int i = 0; i < 5; i++) {
		send_request(&c, "GET", a, "/", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
		read_response_ok(&c, &r, 0);
		response_free(&r);
	}
	client_close(&c);
	next_sample();
	/*
	 * Two ranges of a download from the other: the first on a new
	 * connection, the second from read-ahead, which then fetches the third
	 * and holds it (for --read-ahead-ttl, longer than the test), then a
	 * request on the connection the fetch ahead left in the pool.
	 */
	get_range(b, 0, PIECE - 1);
	get_range(b, PIECE, 2 * PIECE - 1);
	all_idle();
	expect_get(px.port, b, "/small", 200, "ok");
	next_sample();
	/* A request the proxy answers itself. */
	client_open(&c, px.port);
	client_sendf(&c, "GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_int_equal(client_read_response(&c, &r, 0), WIRE_OK);
	response_free(&r);
	client_close(&c);
	all_idle();
	next_sample();

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", stats_port);
	snprintf(log, sizeof(log), "%s/dom.html", harness_temp_dir());
	chromium(bin, url, "--dump-dom", "--window-size=1000,2000", log);
	dom = read_file_all(log, NULL);
	if (!dom || !strstr(dom, "keepalive-proxy") || !strstr(dom, "updated "))
		fail_msg("chromium did not load the page and /stats:\n%s", dom ? dom : "(nothing)");
	/* Nothing moves after the traffic but the samples: /stats now is what the page got. */
	s = stats_now();
	check_counters(dom, s, &bad);
	check_host_row(dom, s, key_a, &bad);
	check_host_row(dom, s, key_b, &bad);
	if (bad)
		fail_msg("%u numbers on the page differ from /stats:\n%.4000s", bad, s);
	/* Read-ahead has fetched: the memory it takes is shown, not hidden as unused. */
	if (!strstr(dom, "<section id=\"fetch\">"))
		fail_msg("the page hides the memory for read-ahead and split downloads");
	/* No parent configured: none in /stats, and their section hidden and empty. */
	if (!strstr(s, "\"parents\": []"))
		fail_msg("/stats lists parents that were not configured:\n%.4000s", s);
	if (!strstr(dom, "<section id=\"parents\" hidden=\"\">") || strstr(dom, " id=\"parents:"))
		fail_msg("the page shows a section for parents without any");
	check_charts(dom, s);

	/* And what they should be, from what the test did. */
	assert_int_equal(json_number(s, "requests_total"), 9);
	assert_int_equal(json_number(s, "upstream_reused_total"), 5);
	assert_int_equal(json_number(s, "requests_on_new_connection_total"), 2);
	assert_int_equal(json_number(s, "readahead_hits_total") +
	                         json_number(s, "readahead_joins_total"),
	                 1);
	h = json_host(s, key_a);
	assert_int_equal(json_number(h, "idle"), 1);
	assert_int_equal(json_number(h, "requests"), 5);
	assert_int_equal(json_number(h, "reused"), 4);
	assert_int_equal(json_number(h, "readahead"), 0);
	h = json_host(s, key_b);
	assert_int_equal(json_number(h, "idle"), 1);
	assert_int_equal(json_number(h, "requests"), 3);
	assert_int_equal(json_number(h, "reused"), 1);
	assert_int_equal(json_number(h, "readahead"), 1);
	assert_int_equal(json_number(h, "readahead_bytes"), PIECE);
	/* The memory line adds both: each must be there for the check above to tell. */
	assert_true(json_number(s, "fetch_memory_bytes") >= PIECE);
	assert_true(json_number(s, "fetch_records_bytes") > 0);
	free(s);
	free(dom);

	chromium(bin, url, "--screenshot=dashboard.png", "--window-size=1000,1600", log);
	chromium(bin, url, "--screenshot=dashboard-phone.png", "--window-size=390,2400", log);
	proxy_stop(&px);
}

/*
 * Two parents: microsocks with a password, which the page must not show,
 * and one where nothing listens. Through microsocks, four requests on one
 * session and one to an origin it cannot reach; localhost through the
 * other. The page's block for each must be what /stats counts, and that
 * what the test did.
 */
static void
parents_shown_as_stats_counts_them(void)
{
	const char *bin = require_program("chromium", "KP_CHROMIUM");
	struct origin *og;
	char listen[64], dead[64], plain[64], url[96], log[300], label[300], *dom, *s;
	const char *args[] = {"--stats-listen", listen, "--parent", socks.url, "--parent-for",
	                      "localhost", dead, NULL};
	const char *obj;
	unsigned bad = 0, n = 0, at_socks = ~0u, at_dead = ~0u;
	int closed;
	struct client c;
	struct response r;

	if (!parent_start_microsocks(&socks, "kp-user", "kp-pass"))
		parent_skip(&socks);
	og = origin_start(origin_handle_ok, NULL);
	/* Nothing listens here: neither the second parent nor an origin asked of microsocks. */
	closed = free_port();
	snprintf(dead, sizeof(dead), "socks5h://127.0.0.1:%d", closed);
	/* What /stats and the page call microsocks: its URL without the credentials. */
	snprintf(plain, sizeof(plain), "socks5h://127.0.0.1:%d", socks.port);
	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
	client_open(&c, px.port);
	for (int i = 0; i < 4; i++) {
		send_request(&c, "GET", og, "/", "HTTP/1.1", NULL);
		read_response_ok(&c, &r, 0);
		assert_status(&r, 200);
		response_free(&r);
	}
	client_close(&c);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", closed);
	expect_get_from(px.port, NULL, url, 502, NULL);
	snprintf(url, sizeof(url), "http://localhost:%d/", origin_port(og));
	expect_get_from(px.port, NULL, url, 502, NULL);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", stats_port);
	snprintf(log, sizeof(log), "%s/dom.html", harness_temp_dir());
	chromium(bin, url, "--dump-dom", "--window-size=1000,2000", log);
	dom = read_file_all(log, NULL);
	if (!dom || !strstr(dom, "updated "))
		fail_msg("chromium did not load the page and /stats:\n%s", dom ? dom : "(nothing)");
	s = stats_now();
	if (!strstr(dom, "<section id=\"parents\">"))
		fail_msg("the page hides its parents:\n%.4000s", s);
	for (; (obj = json_parent(s, n)) != NULL; n++) {
		json_parent_label(obj, label, sizeof(label));
		if (strcmp(label, plain) == 0)
			at_socks = n;
		if (strcmp(label, dead) == 0)
			at_dead = n;
		check_parent(dom, s, n, &bad);
	}
	if (bad)
		fail_msg("%u numbers of parents on the page differ from /stats:\n%.4000s", bad, s);
	if (strstr(dom, "kp-pass") || strstr(s, "kp-pass"))
		fail_msg("the parent's password is on the page");

	/* And what they should be, from what the test did. */
	assert_int_equal(n, 2);
	assert_true(at_socks < n && at_dead < n);
	obj = json_parent(s, at_socks);
	assert_int_equal(json_number(obj, "requests"), 5);
	assert_int_equal(json_number(obj, "connects"), 2);
	assert_int_equal(json_number(obj, "reused"), 3);
	assert_int_equal(json_number(obj, "unreachable"), 0);
	assert_int_equal(json_parent_failures(obj, "origin_unreachable"), 1);
	assert_true(json_number(obj, "rtt") > 0);
	obj = json_parent(s, at_dead);
	assert_int_equal(json_number(obj, "requests"), 1);
	assert_int_equal(json_number(obj, "connects"), 0);
	assert_int_equal(json_number(obj, "reused"), 0);
	assert_true(json_number(obj, "unreachable") >= 1);
	free(s);
	free(dom);

	chromium(bin, url, "--screenshot=dashboard-parents-phone.png", "--window-size=390,3000",
	         log);
	proxy_stop(&px);
	parent_stop(&socks);
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
	    strstr(page, "url(") || strstr(page, "@import") || !strstr(page, "fetch(\"/stats\""))
		fail_msg("the page refers to something outside it");
	/* Served without the comments written for people. */
	if (strstr(page, "<!--") || strstr(page, "/*"))
		fail_msg("the page was served with its comments");
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(page_is_self_contained),
		E2E_TEST(page_shows_what_stats_says),
		E2E_TEST(parents_shown_as_stats_counts_them),
	};

	return E2E_RUN("dashboard", tests);
}
