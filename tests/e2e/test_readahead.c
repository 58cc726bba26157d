/*
 * Read-ahead (--read-ahead): once a client got a 206 for one byte range, the
 * proxy fetches the range that follows and serves it from memory when the
 * same client asks for it, held whole (a hit) or still arriving (a join).
 * Every case checks the bytes the client got, the Range of every request the
 * origin saw (a range fetched ahead is asked of the origin once), and the
 * counters. The origin serves a pattern object with ranges, a strong ETag and
 * Last-Modified, and answers one request of the case's choosing its own way
 * (another ETag, an error, a cut, a body held back); two cases put nginx and
 * curl on either side, over plain HTTP and intercepted HTTPS.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "harness.h"
#include "origin.h"

#define MIB (1024ull * 1024)
#define ETAG "\"kp-object-1\""
#define OTHER_ETAG "\"kp-object-2\""
#define LAST_MODIFIED "Tue, 01 Jul 2025 10:00:00 GMT"
#define BOUNDARY "kp-pieces"
#define OPEN_END UINT64_MAX /* the last of "bytes=S-" */
#define WAIT_MS 5000
#define GATE_AHEAD (64u * 1024u) /* body bytes a held-back answer sends before its gate opens */

static struct proxy px;
static int stats_port;
static char access_log[512];
/* A check of the counters failed: the case goes on, and fails once it stops the proxy. */
static bool counts_differ;

/* ---- The origin: one pattern object at every path ---- */

enum twist {
	TWIST_NONE,
	TWIST_OTHER_ETAG, /* another copy of the object answers: another ETag */
	TWIST_NO_STORE,   /* the answer says Cache-Control: no-store */
	TWIST_404,
	TWIST_503,
	TWIST_CLOSE, /* half the body, then the connection closes */
	TWIST_RESET, /* half the body, then a reset */
	TWIST_GATE,  /* the head and GATE_AHEAD bytes, the rest once gate_open */
	TWIST_LAST,  /* the whole answer, then the connection closes, requests behind it unread */
	TWIST_CODED, /* a transfer coding besides chunked, over bytes that are not the piece's */
};

/* The first request for path whose range starts at `at` is answered the twisted way. */
struct twist_rule {
	const char *path;
	uint64_t at;
	enum twist how;
	atomic_bool used;
};

/* Set before the origin starts; its threads only read it, but for the atomics. */
static struct {
	uint64_t size;
	struct twist_rule rules[8];
	unsigned nrules;
	atomic_bool gate_open;
} obj;

static void
object_init(uint64_t size)
{
	memset(&obj, 0, sizeof(obj));
	obj.size = size;
}

static void
object_twist(const char *path, uint64_t at, enum twist how)
{
	struct twist_rule *r;

	assert_true(obj.nrules < sizeof(obj.rules) / sizeof(obj.rules[0]));
	r = &obj.rules[obj.nrules++];
	r->path = path;
	r->at = at;
	r->how = how;
}

/* Fields a path adds to every answer: what the cases about private answers and Vary ask for. */
static const char *
path_fields(const char *path)
{
	if (strcmp(path, "/private.bin") == 0)
		return "Cache-Control: private\r\n";
	if (strcmp(path, "/no-store.bin") == 0)
		return "Cache-Control: no-store\r\n";
	if (strcmp(path, "/vary-cookie.bin") == 0)
		return "Vary: Cookie\r\n";
	if (strcmp(path, "/vary-language.bin") == 0)
		return "Vary: Accept-Language\r\n";
	return "";
}

static enum twist
take_twist(const char *path, uint64_t first)
{
	for (unsigned i = 0; i < obj.nrules; i++) {
		struct twist_rule *r = &obj.rules[i];

		if (strcmp(r->path, path) == 0 && r->at == first &&
		    !atomic_exchange(&r->used, true))
			return r->how;
	}
	return TWIST_NONE;
}

/* The multipart/byteranges body for the ranges r[0]-r[1] and r[2]-r[3]. */
static char *
multipart_body(const uint64_t r[4], uint64_t size, size_t *len)
{
	size_t cap = (size_t)(r[1] - r[0] + r[3] - r[2] + 2) + 512, n = 0;
	char *b = malloc(cap);

	assert_non_null(b);
	for (int i = 0; i < 4; i += 2) {
		size_t piece = (size_t)(r[i + 1] - r[i] + 1);

		n += (size_t)snprintf(b + n, cap - n,
		                      "--" BOUNDARY "\r\nContent-Type: application/octet-stream\r\n"
		                      "Content-Range: bytes %llu-%llu/%llu\r\n\r\n",
		                      (unsigned long long)r[i], (unsigned long long)r[i + 1],
		                      (unsigned long long)size);
		pattern_fill(b + n, r[i], piece);
		n += piece;
		n += (size_t)snprintf(b + n, cap - n, "\r\n");
	}
	n += (size_t)snprintf(b + n, cap - n, "--" BOUNDARY "--\r\n");
	*len = n;
	return b;
}

static void
send_multipart(struct origin_conn *c, const char *range)
{
	unsigned long long v[4];
	uint64_t r[4];
	size_t len;
	char *body;

	if (sscanf(range, "bytes=%llu-%llu,%llu-%llu", &v[0], &v[1], &v[2], &v[3]) != 4) {
		origin_reply(c, 400, NULL, "two ranges only");
		return;
	}
	for (int i = 0; i < 4; i++)
		r[i] = v[i];
	body = multipart_body(r, obj.size, &len);
	origin_sendf(c,
	             "HTTP/1.1 206 Partial Content\r\n"
	             "Content-Type: multipart/byteranges; boundary=" BOUNDARY "\r\n"
	             "ETag: " ETAG "\r\nLast-Modified: " LAST_MODIFIED "\r\n"
	             "Content-Length: %zu\r\n\r\n",
	             len);
	origin_send(c, body, len);
	free(body);
}

/* Sends the body of a held-back answer: a little, then the rest once the test opens the gate. */
static void
send_gated(struct origin_conn *c, uint64_t first, uint64_t len)
{
	if (!origin_send_pattern(c, first, GATE_AHEAD))
		return;
	for (int waited = 0; !atomic_load(&obj.gate_open) && waited < 10000; waited += 5)
		origin_pause(c, 5);
	origin_send_pattern(c, first + GATE_AHEAD, len - GATE_AHEAD);
}

/*
 * Bytes first-last as a 206 under "Transfer-Encoding: gzip, chunked": the
 * bytes, the pattern shifted by one, stand for the gzip of the piece, so
 * that they could never pass for it.
 */
static void
send_coded(struct origin_conn *c, uint64_t first, uint64_t last)
{
	uint64_t len = last - first + 1;

	if (!origin_sendf(c,
	                  "HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\n"
	                  "ETag: " ETAG "\r\nLast-Modified: " LAST_MODIFIED "\r\n"
	                  "Content-Range: bytes %llu-%llu/%llu\r\n"
	                  "Transfer-Encoding: gzip, chunked\r\n\r\n%llx\r\n",
	                  (unsigned long long)first, (unsigned long long)last,
	                  (unsigned long long)obj.size, (unsigned long long)len) ||
	    !origin_send_pattern(c, first + 1, len))
		return;
	origin_sendf(c, "\r\n0\r\n\r\n");
}

static void
serve_object(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *range = headers_get(&req->head.headers, "Range");
	const char *if_range = headers_get(&req->head.headers, "If-Range");
	const char *path = req->head.target, *fields = path_fields(path), *etag = ETAG;
	bool head_only = strcmp(req->head.method, "HEAD") == 0;
	uint64_t first, last, len;
	enum twist how;

	(void)arg;
	/*
	 * /whole.bin ignores Range, as an origin may; an If-Range naming
	 * another version asks for the whole object (RFC 9110 13.1.5).
	 */
	if (!range || strcmp(path, "/whole.bin") == 0 ||
	    (if_range && strcmp(if_range, ETAG) != 0 && strcmp(if_range, LAST_MODIFIED) != 0)) {
		origin_sendf(c,
		             "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		             "ETag: " ETAG "\r\nLast-Modified: " LAST_MODIFIED "\r\n"
		             "Content-Length: %llu\r\n\r\n",
		             (unsigned long long)obj.size);
		if (head_only)
			return;
		/* A whole object held back: the twist of its path at 0. */
		if (!range && take_twist(path, 0) == TWIST_GATE)
			send_gated(c, 0, obj.size);
		else
			origin_send_pattern(c, 0, obj.size);
		return;
	}
	if (strchr(range, ',')) {
		send_multipart(c, range);
		return;
	}
	if (!origin_parse_range(range, obj.size, &first, &last, NULL)) {
		origin_sendf(c,
		             "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%llu\r\n"
		             "Content-Length: 0\r\n\r\n",
		             (unsigned long long)obj.size);
		return;
	}
	how = take_twist(path, first);
	switch (how) {
	case TWIST_404:
		origin_reply(c, 404, NULL, "no such piece");
		return;
	case TWIST_503:
		origin_reply(c, 503, "Retry-After: 1\r\n", "busy");
		return;
	case TWIST_OTHER_ETAG:
		etag = OTHER_ETAG;
		break;
	case TWIST_NO_STORE:
		fields = "Cache-Control: no-store\r\n";
		break;
	default:
		break;
	}
	len = last - first + 1;
	if (how == TWIST_CODED) {
		send_coded(c, first, last);
		return;
	}
	origin_sendf(c,
	             "HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\n"
	             "Accept-Ranges: bytes\r\nETag: %s\r\nLast-Modified: " LAST_MODIFIED "\r\n"
	             "%sContent-Range: bytes %llu-%llu/%llu\r\nContent-Length: %llu\r\n\r\n",
	             etag, fields, (unsigned long long)first, (unsigned long long)last,
	             (unsigned long long)obj.size, (unsigned long long)len);
	if (head_only)
		return;
	switch (how) {
	case TWIST_CLOSE:
	case TWIST_RESET:
		origin_send_pattern(c, first, len / 2);
		if (how == TWIST_CLOSE)
			origin_close(c);
		else
			origin_reset(c);
		break;
	case TWIST_GATE:
		send_gated(c, first, len);
		break;
	case TWIST_LAST:
		origin_send_pattern(c, first, len);
		origin_close(c);
		break;
	default:
		origin_send_pattern(c, first, len);
		break;
	}
}

/* ---- What the origin saw ---- */

/* Appends " bytes=F-L" (L OPEN_END: "bytes=F-"), a Range the origin is expected to see. */
static void
want_range(char *list, size_t size, uint64_t first, uint64_t last)
{
	size_t n = strlen(list);

	if (last == OPEN_END)
		snprintf(list + n, size - n, " bytes=%llu-", (unsigned long long)first);
	else
		snprintf(list + n, size - n, " bytes=%llu-%llu", (unsigned long long)first,
		         (unsigned long long)last);
}

/*
 * The Range of every request for path (NULL: any) the origin saw, in
 * order: " bytes=...", with "METHOD:" before it if the method is not GET.
 */
static const char *
origin_ranges(struct origin *og, const char *path, char *list, size_t size)
{
	unsigned n = origin_request_count(og);
	size_t used = 0;

	list[0] = '\0';
	for (unsigned i = 0; i < n && used < size; i++) {
		const struct origin_request *q = origin_request_at(og, i);
		const char *range = headers_get(&q->head.headers, "Range");
		bool get = strcmp(q->head.method, "GET") == 0;

		if (path && strcmp(q->head.target, path) != 0)
			continue;
		used += (size_t)snprintf(list + used, size - used, " %s%s%s",
		                         get ? "" : q->head.method, get ? "" : ":",
		                         range ? range : "(none)");
	}
	return list;
}

/*
 * The origin saw exactly the ranges in want, in any order: fetches ahead
 * go out on connections of their own, at once.
 */
static void
expect_origin_saw(struct origin *og, const char *path, const char *want, const char *file,
                  int line)
{
	char got[4096], got_sorted[4096], want_sorted[4096];

	origin_ranges(og, path, got, sizeof(got));
	sorted_words(got, got_sorted, sizeof(got_sorted));
	sorted_words(want, want_sorted, sizeof(want_sorted));
	if (strcmp(got_sorted, want_sorted) != 0)
		fail_msg("%s:%d: the origin saw these ranges of %s:\n   %s\nexpected:\n   %s", file,
		         line, path, got, want);
	assert_origin_clean(og);
}
#define origin_saw(og, path, want) expect_origin_saw((og), (path), (want), __FILE__, __LINE__)

/* ---- The counters ---- */

struct ra_counts {
	unsigned long predicted, hits, joins, misses, unsafe, throttled, failed, wasted, held;
};

static void
read_counts(struct ra_counts *n)
{
	int status;
	const char *t = stats_page(stats_port, "/metrics", &status);

	assert_int_equal(status, 200);
	n->predicted = (unsigned long)metric_value(t, "keepalive_proxy_readahead_predicted_total");
	n->hits = (unsigned long)metric_value(t, "keepalive_proxy_readahead_hits_total");
	n->joins = (unsigned long)metric_value(t, "keepalive_proxy_readahead_joins_total");
	n->misses = (unsigned long)metric_value(t, "keepalive_proxy_readahead_misses_total");
	n->unsafe = (unsigned long)metric_value(t, "keepalive_proxy_readahead_unsafe_total");
	n->throttled = (unsigned long)metric_value(t, "keepalive_proxy_readahead_throttled_total");
	n->failed = (unsigned long)metric_value(t, "keepalive_proxy_readahead_failed_total");
	n->wasted = (unsigned long)metric_value(t, "keepalive_proxy_readahead_wasted_bytes_total");
	n->held = (unsigned long)metric_value(t, "keepalive_proxy_fetch_memory_bytes");
}

/*
 * predicted, hits, joins, misses, unsafe, throttled, failed: all of them at
 * once. A difference is shown at once, but fails the case only at its end,
 * so that the bytes and the requests are checked to the end as well.
 */
static void
expect_counts(const unsigned long want[7], const char *file, int line)
{
	static const char *const names[] = {"predicted", "hits",      "joins", "misses",
	                                    "unsafe",    "throttled", "failed"};
	struct ra_counts n;
	unsigned long got[7];
	bool same = true;

	read_counts(&n);
	got[0] = n.predicted, got[1] = n.hits, got[2] = n.joins, got[3] = n.misses;
	got[4] = n.unsafe, got[5] = n.throttled, got[6] = n.failed;
	for (int i = 0; i < 7; i++)
		same &= got[i] == want[i];
	if (!same) {
		print_error("%s:%d: read-ahead counters:\n", file, line);
		for (int i = 0; i < 7; i++)
			print_error("  %-9s %lu%s (expected %lu)\n", names[i], got[i],
			            got[i] == want[i] ? "" : "  <--", want[i]);
		counts_differ = true;
	}
}
#define counts(...) expect_counts((const unsigned long[7]){__VA_ARGS__}, __FILE__, __LINE__)

/* Waits until the metric reads want; fails after ms. */
static void
wait_metric_ms(const char *name, double want, int ms, const char *file, int line)
{
	double deadline = now_s() + ms / 1000.0, got;

	while ((got = stats_metric(stats_port, name)) != want) {
		if (now_s() > deadline)
			fail_msg("%s:%d: %s stays %.0f, expected %.0f", file, line, name, got,
			         want);
		sleep_ms(5);
	}
}
#define metric_becomes(name, want) wait_metric_ms((name), (want), WAIT_MS, __FILE__, __LINE__)
/* The same, for what only a --read-ahead-ttl of ttl seconds brings about. */
#define metric_becomes_after_ttl(name, want, ttl) \
	wait_metric_ms((name), (want), WAIT_MS + (int)((ttl) * 1000), __FILE__, __LINE__)

/* Waits until the metric reads more than floor; fails after WAIT_MS. */
static void
wait_metric_above(const char *name, double floor, const char *file, int line)
{
	double deadline = now_s() + WAIT_MS / 1000.0, got;

	while ((got = stats_metric(stats_port, name)) <= floor) {
		if (now_s() > deadline)
			fail_msg("%s:%d: %s stays %.0f, expected more", file, line, name, got);
		sleep_ms(5);
	}
}
#define metric_exceeds(name, floor) wait_metric_above((name), (floor), __FILE__, __LINE__)

/*
 * Every upstream connection the proxy has open is idle in its pool: no
 * fetch ahead is still arriving or waiting, since one queued would have
 * taken a connection as it came free.
 */
static void
wait_all_idle(const char *file, int line)
{
	double deadline = now_s() + WAIT_MS / 1000.0, open, idle;

	for (;;) {
		open = stats_metric(stats_port, "keepalive_proxy_upstream_connections");
		idle = stats_metric(stats_port, "keepalive_proxy_idle_upstream_connections");
		if (open > 0 && idle == open)
			return;
		if (now_s() > deadline)
			fail_msg("%s:%d: %.0f of %.0f upstream connections idle, expected all", file,
			         line, idle, open);
		sleep_ms(5);
	}
}

/* The origin has seen n requests and the proxy is quiet (above). */
static void
wait_quiet(struct origin *og, unsigned n, const char *file, int line)
{
	if (!origin_wait_requests(og, n, WAIT_MS)) {
		char got[4096];

		fail_msg("%s:%d: the origin saw %u requests within %d ms, expected %u:%s", file,
		         line, origin_request_count(og), WAIT_MS, n,
		         origin_ranges(og, NULL, got, sizeof(got)));
	}
	wait_all_idle(file, line);
	if (origin_request_count(og) != n)
		fail_msg("%s:%d: the origin saw %u requests, expected %u", file, line,
		         origin_request_count(og), n);
}
#define quiet(og, n) wait_quiet((og), (n), __FILE__, __LINE__)

/* ---- The proxy and its clients ---- */

/* The proxy with a stats page and an access log, and more arguments (NULL-terminated). */
static void
start_proxy(const char *const more[])
{
	static char listen[64];
	const char *args[16] = {"--stats-listen", listen, "--access-log", access_log};
	size_t n = 4;

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	snprintf(access_log, sizeof(access_log), "%s/access.log", harness_temp_dir());
	for (size_t i = 0; more && more[i]; i++) {
		assert_true(n < sizeof(args) / sizeof(args[0]) - 1);
		args[n++] = more[i];
	}
	args[n] = NULL;
	counts_differ = false;
	proxy_start(&px, args);
}

static void
stop_proxy(void)
{
	proxy_stop(&px);
	if (counts_differ)
		fail_msg("the read-ahead counters differed from those expected (shown above)");
}

/* ceil(n / 0.95): how much the proxy fetches after a longest range of n bytes. */
static uint64_t
grown(uint64_t n)
{
	return (n * 20 + 18) / 19;
}

/* GET path with "Range: bytes=spec" and more field lines (or NULL) on an open client. */
static void
ask(struct client *c, struct origin *og, const char *path, const char *spec, const char *fields,
    struct response *r)
{
	char text[1024];

	snprintf(text, sizeof(text), "Range: bytes=%s\r\nUser-Agent: kp-e2e\r\n%s", spec,
	         fields ? fields : "");
	send_request(c, "GET", og, path, "HTTP/1.1", text);
	read_response_ok(c, r, 0);
}

/*
 * r is the 206 the origin owes for bytes first-last of the object, byte
 * for byte, with the fields the origin sent: the same whether it came from
 * memory or from the origin.
 */
static void
expect_piece(const struct response *r, uint64_t first, uint64_t last, const char *file, int line)
{
	char range[128], length[32];
	const char *cr = resp_header(r, "Content-Range"), *cl = resp_header(r, "Content-Length");
	uint64_t len = last - first + 1;

	snprintf(range, sizeof(range), "bytes %llu-%llu/%llu", (unsigned long long)first,
	         (unsigned long long)last, (unsigned long long)obj.size);
	snprintf(length, sizeof(length), "%llu", (unsigned long long)len);
	if (r->head.status != 206 || !cr || strcmp(cr, range) != 0 || !cl ||
	    strcmp(cl, length) != 0) {
		response_print(r);
		fail_msg("%s:%d: expected a 206 with Content-Range: %s and Content-Length: %s",
		         file, line, range, length);
	}
	if (r->body.len != len || r->body.fnv != pattern_range_fnv(first, len)) {
		uint64_t bad = r->body.len;

		for (size_t i = 0; i < r->body.kept && bad == r->body.len; i++)
			if ((uint8_t)r->body.data[i] != pattern_at(first + i))
				bad = i;
		fail_msg("%s:%d: bytes %llu-%llu: got %llu bytes, first wrong at body offset %llu",
		         file, line, (unsigned long long)first, (unsigned long long)last,
		         (unsigned long long)r->body.len, (unsigned long long)bad);
	}
	if (!resp_header(r, "ETag") || strcmp(resp_header(r, "ETag"), ETAG) != 0 ||
	    !resp_header(r, "Last-Modified") ||
	    strcmp(resp_header(r, "Last-Modified"), LAST_MODIFIED) != 0 ||
	    headers_count(&r->head.headers, "Via") != 1 ||
	    headers_count(&r->head.headers, "Content-Type") != 1 ||
	    headers_count(&r->head.headers, "Accept-Ranges") != 1 ||
	    headers_has_token(&r->head.headers, "Connection", "close")) {
		response_print(r);
		fail_msg("%s:%d: fields differ from the origin's (ETag, Last-Modified, one Via, "
		         "keep-alive)",
		         file, line);
	}
}

/* Asks for bytes first-last (last OPEN_END: "first-") and expects exactly them. */
static void
get_piece(struct client *c, struct origin *og, const char *path, uint64_t first, uint64_t last,
          const char *fields, const char *file, int line)
{
	struct response r;
	char spec[64];

	if (last == OPEN_END)
		snprintf(spec, sizeof(spec), "%llu-", (unsigned long long)first);
	else
		snprintf(spec, sizeof(spec), "%llu-%llu", (unsigned long long)first,
		         (unsigned long long)last);
	ask(c, og, path, spec, fields, &r);
	expect_piece(&r, first, last == OPEN_END ? obj.size - 1 : last, file, line);
	response_free(&r);
}
#define piece(c, og, path, first, last, fields)                                                    \
	get_piece((c), (og), (path), (first), (last), (fields), __FILE__, __LINE__)

static unsigned
count_text(const char *text, const char *what)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
		n++;
	return n;
}

/* ---- Cases ---- */

/* Without --read-ahead the proxy asks the origin for nothing on its own. */
static void
off_by_default(void)
{
	struct origin *og;
	struct client c;
	char want[1024] = "";
	const char *text;
	int status;

	object_init(3 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy(NULL);
	client_open(&c, px.port);
	for (uint64_t k = 0; k < 3; k++) {
		piece(&c, og, "/object.bin", k * MIB, (k + 1) * MIB - 1, NULL);
		want_range(want, sizeof(want), k * MIB, (k + 1) * MIB - 1);
		quiet(og, (unsigned)k + 1);
	}
	client_close(&c);
	origin_saw(og, "/object.bin", want);
	counts(0, 0, 0, 0, 0, 0, 0);
	text = stats_page(stats_port, "/metrics", &status);
	assert_int_equal(metric_value(text, "keepalive_proxy_fetch_memory_bytes"), 0);
	stop_proxy();
}

/*
 * A download of four ranges of 1 MiB with pauses between: after the first,
 * the next two are fetched (depth 2, ranges of one length), each as long as
 * 1 MiB / 0.95; every later range is a hit, and the origin is asked for
 * every byte once.
 */
static void
consecutive_ranges_are_hits(void)
{
	const uint64_t g = grown(MIB);
	struct origin *og;
	struct client c;
	struct ra_counts n;
	char want[1024] = "", *text;
	const char *line;

	object_init(4 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, MIB + g - 1);
	want_range(want, sizeof(want), 2 * MIB, 2 * MIB + g - 1);
	quiet(og, 3);
	origin_saw(og, "/object.bin", want);
	read_counts(&n);
	assert_int_equal(n.predicted, 2);
	assert_true(n.held >= 2 * g);

	/* Served from memory; the piece after it (up to the end) is fetched meanwhile. */
	piece(&c, og, "/object.bin", MIB, 2 * MIB - 1, NULL);
	want_range(want, sizeof(want), 3 * MIB, 4 * MIB - 1);
	quiet(og, 4);
	piece(&c, og, "/object.bin", 2 * MIB, 3 * MIB - 1, NULL);
	piece(&c, og, "/object.bin", 3 * MIB, 4 * MIB - 1, NULL);
	client_close(&c);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	quiet(og, 4);
	origin_saw(og, "/object.bin", want);
	counts(3, 3, 0, 0, 0, 0, 0);
	/* What was fetched past the client's ranges: 1 MiB / 0.95 - 1 MiB, twice. */
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total"),
	                 2 * (g - MIB));

	line = strstr(proxy_stats(&px), "read-ahead ");
	assert_non_null(line);
	assert_int_equal(stats_get(line, "read-ahead"), 3);
	assert_int_equal(stats_get(line, "hits"), 3);
	assert_int_equal(stats_get(line, "joins"), 0);
	assert_int_equal(stats_get(line, "misses"), 0);
	assert_int_equal(stats_get(line, "wasted"), 2 * (g - MIB));
	assert_int_equal(stats_get(line, "held"), 0);

	text = wait_file_lines(access_log, 4, 3000);
	if (count_text(text, " 206 ") != 4 || count_text(text, "ms read-ahead\n") != 3 ||
	    count_text(text, "ms new\n") != 1)
		fail_msg("expected four 206 lines, the last three served by read-ahead:\n%s", text);
	free(text);
	stop_proxy();
}

/*
 * The client asks for the piece while the origin still holds back most of
 * it: the client joins the fetch and gets it whole once the rest comes.
 */
static void
joins_a_fetch_still_arriving(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want[1024] = "";

	object_init(2 * MIB);
	object_twist("/object.bin", MIB, TWIST_GATE);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	if (!origin_wait_requests(og, 2, WAIT_MS))
		fail_msg("the proxy did not fetch the next range");
	send_request(&c, "GET", og, "/object.bin", "HTTP/1.1",
	             "Range: bytes=1048576-2097151\r\nUser-Agent: kp-e2e\r\n");
	metric_becomes("keepalive_proxy_readahead_joins_total", 1);
	atomic_store(&obj.gate_open, true);
	read_response_ok(&c, &r, 0);
	expect_piece(&r, MIB, 2 * MIB - 1, __FILE__, __LINE__);
	response_free(&r);
	client_close(&c);
	quiet(og, 2);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	origin_saw(og, "/object.bin", want);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	counts(1, 0, 1, 0, 0, 0, 0);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total"),
	                 0);
	stop_proxy();
}

/*
 * A downloader that draws every length between 95 % and 100 % of its chunk
 * (yt-dlp): the proxy fetches the longest length seen / 0.95, so every next
 * range, starting where the last really ended, is a hit of its own length.
 * Two pieces ahead only while the lengths are one: after the first range
 * (one length so far) two are fetched, the second of which the client,
 * changing its length, never asks for.
 */
static void
varying_lengths_like_ytdlp(void)
{
	static const uint64_t lengths[] = {996148, 1048576, 1020000, 1000000, 1040000, 997000};
	const unsigned nlen = sizeof(lengths) / sizeof(lengths[0]);
	struct origin *og;
	struct client c;
	char want[2048] = "";
	uint64_t at = 0, largest = 0;
	unsigned requests = 0;

	object_init(8 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);
	for (unsigned k = 0; k < nlen; k++) {
		uint64_t len = lengths[k], ahead;

		piece(&c, og, "/videoplayback?id=kp&itag=22", at, at + len - 1, NULL);
		if (k == 0) {
			want_range(want, sizeof(want), 0, len - 1);
			requests++;
		}
		largest = len > largest ? len : largest;
		ahead = grown(largest) > len ? grown(largest) : len;
		want_range(want, sizeof(want), at + len, at + len + ahead - 1);
		requests++;
		if (k == 0) {
			want_range(want, sizeof(want), 2 * len, 2 * len + ahead - 1);
			requests++;
		}
		quiet(og, requests);
		at += len;
	}
	client_close(&c);
	origin_saw(og, "/videoplayback?id=kp&itag=22", want);
	counts(nlen + 1, nlen - 1, 0, 0, 0, 0, 0);
	stop_proxy();
}

/*
 * A seek forward or back starts where nothing was fetched, and a range
 * longer than the piece fetched is not in memory whole: the origin
 * answers, a miss.
 */
static void
seeks_are_misses(void)
{
	const uint64_t g = grown(MIB), half = MIB / 2;
	struct origin *og;
	struct client c;
	char want[1024] = "";

	object_init(8 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, MIB + g - 1);
	quiet(og, 2);
	piece(&c, og, "/object.bin", 4 * MIB, 5 * MIB - 1, NULL);
	want_range(want, sizeof(want), 4 * MIB, 5 * MIB - 1);
	/* Two pieces of one length: the next is fetched exactly that long. */
	want_range(want, sizeof(want), 5 * MIB, 6 * MIB - 1);
	quiet(og, 4);
	piece(&c, og, "/object.bin", half, half + MIB - 1, NULL);
	want_range(want, sizeof(want), half, half + MIB - 1);
	want_range(want, sizeof(want), half + MIB, half + 2 * MIB - 1);
	quiet(og, 6);
	/* Where a piece starts, but longer than it. */
	piece(&c, og, "/object.bin", half + MIB, half + MIB + g, NULL);
	want_range(want, sizeof(want), half + MIB, half + MIB + g);
	want_range(want, sizeof(want), half + MIB + g + 1, half + MIB + g + grown(g + 1));
	quiet(og, 8);
	client_close(&c);
	origin_saw(og, "/object.bin", want);
	counts(4, 0, 0, 3, 0, 0, 0);
	stop_proxy();
}

/*
 * An open range is served from memory only when the piece held runs to the
 * object's end, and nothing is predicted past the end; otherwise it goes to
 * the origin. A suffix range and a multi-range request are relayed and
 * predict nothing.
 */
static void
open_suffix_and_multi_ranges(void)
{
	const uint64_t half = MIB / 2;
	static const uint64_t two[4] = {0, 99, 200, 299};
	struct origin *og;
	struct client c;
	struct response r;
	char want[1024] = "", *body;
	size_t len;

	object_init(2 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);

	/* The piece fetched runs to the end: "bytes=1048576-" is served from it. */
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	quiet(og, 2);
	piece(&c, og, "/object.bin", MIB, OPEN_END, NULL);
	quiet(og, 2);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	origin_saw(og, "/object.bin", want);
	counts(1, 1, 0, 0, 0, 0, 0);

	/* The piece fetched stops short of the end: "bytes=524288-" goes to the origin. */
	piece(&c, og, "/open.bin", 0, half - 1, NULL);
	quiet(og, 4);
	piece(&c, og, "/open.bin", half, OPEN_END, NULL);
	quiet(og, 5);
	want[0] = '\0';
	want_range(want, sizeof(want), 0, half - 1);
	want_range(want, sizeof(want), half, half + grown(half) - 1);
	want_range(want, sizeof(want), half, OPEN_END);
	origin_saw(og, "/open.bin", want);
	counts(2, 1, 0, 1, 0, 0, 0);

	/* The last 1000 bytes. */
	ask(&c, og, "/suffix.bin", "-1000", NULL, &r);
	expect_piece(&r, 2 * MIB - 1000, 2 * MIB - 1, __FILE__, __LINE__);
	response_free(&r);
	quiet(og, 6);
	origin_saw(og, "/suffix.bin", " bytes=-1000");

	/* Two ranges in one request: a multipart answer, relayed as it is. */
	ask(&c, og, "/multi.bin", "0-99,200-299", NULL, &r);
	assert_status(&r, 206);
	body = multipart_body(two, obj.size, &len);
	if (r.body.len != len || r.body.kept != len || memcmp(r.body.data, body, len) != 0) {
		free(body);
		response_print(&r);
		fail_msg("the multipart answer differs from the origin's (%zu bytes)", len);
	}
	free(body);
	response_free(&r);
	quiet(og, 7);
	client_close(&c);
	origin_saw(og, "/multi.bin", " bytes=0-99,200-299");
	counts(2, 1, 0, 1, 0, 0, 0);
	stop_proxy();
}

/*
 * What is held is the client's own: a request from the same address with
 * another Cookie or Authorization, or from another address, goes to the
 * origin; the client that caused the fetch still gets it.
 */
static void
held_pieces_are_private(void)
{
	const uint64_t g = grown(MIB);
	struct origin *og;
	struct client c, other;
	char want[1024] = "";

	object_init(4 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, MIB + g - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	/* The second piece of one length: the next is fetched exactly that long. */
	want_range(want, sizeof(want), 2 * MIB, 3 * MIB - 1);

	piece(&c, og, "/cookie.bin", 0, MIB - 1, "Cookie: session=one\r\n");
	quiet(og, 2);
	piece(&c, og, "/cookie.bin", MIB, 2 * MIB - 1, "Cookie: session=two\r\n");
	quiet(og, 4);
	origin_saw(og, "/cookie.bin", want);
	counts(2, 0, 0, 0, 1, 0, 0);

	piece(&c, og, "/auth.bin", 0, MIB - 1, "Authorization: Bearer one\r\n");
	quiet(og, 6);
	piece(&c, og, "/auth.bin", MIB, 2 * MIB - 1, "Authorization: Bearer two\r\n");
	quiet(og, 8);
	origin_saw(og, "/auth.bin", want);
	counts(4, 0, 0, 0, 2, 0, 0);

	/* Another address is another client: not even a miss, and its answer predicts for it. */
	want[0] = '\0';
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, MIB + g - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	/* The other client's first piece: its own download's, grown by 1/0.95. */
	want_range(want, sizeof(want), 2 * MIB, 2 * MIB + g - 1);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	quiet(og, 10);
	client_open_from(&other, px.port, "127.0.0.2");
	piece(&other, og, "/object.bin", MIB, 2 * MIB - 1, NULL);
	client_close(&other);
	quiet(og, 12);
	origin_saw(og, "/object.bin", want);
	counts(6, 0, 0, 0, 2, 0, 0);
	/* The piece stayed for its owner, whose second piece of one length predicts exactly. */
	piece(&c, og, "/object.bin", MIB, 2 * MIB - 1, NULL);
	quiet(og, 13);
	client_close(&c);
	want_range(want, sizeof(want), 2 * MIB, 3 * MIB - 1);
	origin_saw(og, "/object.bin", want);
	counts(7, 1, 0, 0, 2, 0, 0);
	stop_proxy();
}

/*
 * A piece fetched ahead that is not what the origin owes the client is
 * never served: another copy of the object (another ETag), or an answer
 * that says no-store. The client's request goes to the origin, and the
 * proxy predicts nothing more on that download.
 */
static void
unsafe_pieces_are_never_served(void)
{
	const uint64_t g = grown(MIB);
	struct origin *og;
	struct client c;
	char want[2048] = "";

	object_init(4 * MIB);
	object_twist("/object.bin", MIB, TWIST_OTHER_ETAG);
	object_twist("/stored.bin", MIB, TWIST_NO_STORE);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	quiet(og, 2);
	piece(&c, og, "/object.bin", MIB, 2 * MIB - 1, NULL);
	quiet(og, 3);
	piece(&c, og, "/object.bin", 2 * MIB, 3 * MIB - 1, NULL);
	quiet(og, 4);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, MIB + g - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	want_range(want, sizeof(want), 2 * MIB, 3 * MIB - 1);
	origin_saw(og, "/object.bin", want);
	counts(1, 0, 0, 0, 1, 0, 0);

	piece(&c, og, "/stored.bin", 0, MIB - 1, NULL);
	quiet(og, 6);
	piece(&c, og, "/stored.bin", MIB, 2 * MIB - 1, NULL);
	quiet(og, 7);
	piece(&c, og, "/stored.bin", 2 * MIB, 3 * MIB - 1, NULL);
	quiet(og, 8);
	client_close(&c);
	counts(2, 0, 0, 0, 2, 0, 0);
	/* Refused pieces are dropped, not kept until they expire. */
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	stop_proxy();
}

/*
 * A request whose If-Range names another version than the piece held is
 * owed the whole object, not the piece (RFC 9110 13.1.5): it goes to the
 * origin, which answers 200.
 */
static void
if_range_of_another_version_is_not_served(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want[1024] = "";

	object_init(2 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, "If-Range: " ETAG "\r\n");
	quiet(og, 2);
	ask(&c, og, "/object.bin", "1048576-2097151", "If-Range: \"kp-object-0\"\r\n", &r);
	if (r.head.status != 200 || r.body.len != 2 * MIB || !r.body.pattern_ok) {
		response_print(&r);
		response_free(&r);
		fail_msg("If-Range of another version: expected the origin's 200 with the whole "
		         "object");
	}
	response_free(&r);
	quiet(og, 3);
	client_close(&c);
	want_range(want, sizeof(want), 0, MIB - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	want_range(want, sizeof(want), MIB, 2 * MIB - 1);
	origin_saw(og, "/object.bin", want);
	counts(1, 0, 0, 0, 1, 0, 0);
	stop_proxy();
}

/* A 206 that is private or no-store is the client's alone: nothing is fetched after it. */
static void
private_answers_predict_nothing(void)
{
	struct origin *og;
	struct client c;
	struct response r;

	object_init(3 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);
	for (uint64_t k = 0; k < 2; k++) {
		char spec[64];

		snprintf(spec, sizeof(spec), "%llu-%llu", (unsigned long long)(k * MIB),
		         (unsigned long long)((k + 1) * MIB - 1));
		ask(&c, og, "/private.bin", spec, NULL, &r);
		expect_piece(&r, k * MIB, (k + 1) * MIB - 1, __FILE__, __LINE__);
		assert_string_equal(resp_header(&r, "Cache-Control"), "private");
		response_free(&r);
		ask(&c, og, "/no-store.bin", spec, NULL, &r);
		expect_piece(&r, k * MIB, (k + 1) * MIB - 1, __FILE__, __LINE__);
		assert_string_equal(resp_header(&r, "Cache-Control"), "no-store");
		response_free(&r);
	}
	client_close(&c);
	quiet(og, 4);
	counts(0, 0, 0, 0, 0, 0, 0);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes"), 0);
	stop_proxy();
}

/*
 * A piece whose answer varies on a field is served only to a request with
 * the same value of it: another Cookie under Vary: Cookie, another
 * Accept-Language under Vary: Accept-Language, go to the origin; the same
 * value is a hit.
 */
static void
vary_fields_must_match(void)
{
	struct origin *og;
	struct client c;

	object_init(4 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/vary-cookie.bin", 0, MIB - 1, "Cookie: a=1\r\n");
	quiet(og, 2);
	piece(&c, og, "/vary-cookie.bin", MIB, 2 * MIB - 1, "Cookie: a=2\r\n");
	quiet(og, 4);
	counts(2, 0, 0, 0, 1, 0, 0);

	piece(&c, og, "/vary-language.bin", 0, MIB - 1, "Accept-Language: en\r\n");
	quiet(og, 6);
	piece(&c, og, "/vary-language.bin", MIB, 2 * MIB - 1, "Accept-Language: de\r\n");
	quiet(og, 8);
	counts(4, 0, 0, 0, 2, 0, 0);
	/* The piece fetched for "de" goes to the next "de" request. */
	piece(&c, og, "/vary-language.bin", 2 * MIB, 3 * MIB - 1, "Accept-Language: de\r\n");
	quiet(og, 9);
	client_close(&c);
	counts(5, 1, 0, 0, 2, 0, 0);
	assert_int_equal(origin_count_requests(og, "GET", "/vary-language.bin"), 5);
	stop_proxy();
}

/*
 * The fetch ahead fails: the origin answers 404 or 503, cuts the body (a
 * close, a reset), or sends it under a transfer coding besides chunked,
 * which de-chunked would pass for the piece. The client's own request for
 * that range goes to the origin and gets its answer.
 */
static void
failed_fetches_fall_back_to_the_origin(void)
{
	static const struct {
		const char *path;
		enum twist how;
	} ways[] = {
		{"/404.bin", TWIST_404},
		{"/503.bin", TWIST_503},
		{"/close.bin", TWIST_CLOSE},
		{"/reset.bin", TWIST_RESET},
		{"/coded.bin", TWIST_CODED},
	};
	struct origin *og;
	unsigned seen = 0;

	object_init(2 * MIB);
	for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++)
		object_twist(ways[i].path, MIB, ways[i].how);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++) {
		char want[1024] = "";
		struct client c;
		double failed = stats_metric(stats_port, "keepalive_proxy_readahead_failed_total");

		client_open(&c, px.port);
		piece(&c, og, ways[i].path, 0, MIB - 1, NULL);
		if (!origin_wait_requests(og, seen + 2, WAIT_MS))
			fail_msg("%s: the proxy did not fetch the next range", ways[i].path);
		/* Their connections are closed: no idle one says the fetch is over. */
		if (ways[i].how == TWIST_CLOSE || ways[i].how == TWIST_RESET ||
		    ways[i].how == TWIST_CODED)
			metric_becomes("keepalive_proxy_readahead_failed_total", failed + 1);
		else
			quiet(og, seen + 2);
		piece(&c, og, ways[i].path, MIB, 2 * MIB - 1, NULL);
		client_close(&c);
		seen += 3;
		quiet(og, seen);
		want_range(want, sizeof(want), 0, MIB - 1);
		want_range(want, sizeof(want), MIB, 2 * MIB - 1);
		want_range(want, sizeof(want), MIB, 2 * MIB - 1);
		origin_saw(og, ways[i].path, want);
	}
	counts(5, 0, 0, 0, 0, 0, 5);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	stop_proxy();
}

/* A POST, a HEAD, a 200 to a Range, a 416: nothing is fetched ahead after any of them. */
static void
only_a_206_to_a_get_predicts(void)
{
	struct origin *og;
	struct client c;
	struct response r;

	object_init(2 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/object.bin", "HTTP/1.1",
	             "Range: bytes=0-1048575\r\nContent-Length: 1\r\n");
	client_send(&c, "x", 1);
	read_response_ok(&c, &r, 0);
	expect_piece(&r, 0, MIB - 1, __FILE__, __LINE__);
	response_free(&r);
	send_request(&c, "HEAD", og, "/object.bin", "HTTP/1.1", "Range: bytes=0-1048575\r\n");
	read_response_ok(&c, &r, RESP_HEAD);
	assert_status(&r, 206);
	response_free(&r);
	ask(&c, og, "/whole.bin", "0-1048575", NULL, &r);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, 2 * MIB);
	assert_true(r.body.pattern_ok);
	response_free(&r);
	ask(&c, og, "/object.bin", "4194304-5242879", NULL, &r);
	assert_status(&r, 416);
	response_free(&r);
	client_close(&c);
	quiet(og, 4);
	counts(0, 0, 0, 0, 0, 0, 0);
	stop_proxy();
}

/* --read-ahead-memory at its least holds no 1 MiB piece: each is throttled, all still works. */
static void
memory_cap_throttles(void)
{
	struct origin *og;
	struct client c;
	char want[1024] = "";

	object_init(4 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-memory", "1048576", NULL});
	client_open(&c, px.port);
	for (uint64_t k = 0; k < 3; k++) {
		piece(&c, og, "/object.bin", k * MIB, (k + 1) * MIB - 1, NULL);
		want_range(want, sizeof(want), k * MIB, (k + 1) * MIB - 1);
		quiet(og, (unsigned)k + 1);
	}
	client_close(&c);
	origin_saw(og, "/object.bin", want);
	counts(0, 0, 0, 0, 0, 3, 0);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes"), 0);
	stop_proxy();
}

/*
 * A client that seeks while the piece fetched for it is still far from in:
 * that fetch is ended with its connection (the seek does not wait for it),
 * and what came of it is counted as wasted, less than the piece.
 */
static void
a_seek_ends_a_fetch_far_from_done(void)
{
	const uint64_t g = grown(MIB);
	struct origin *og;
	struct client c;
	double wasted;

	object_init(8 * MIB);
	object_twist("/object.bin", MIB, TWIST_GATE);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-depth", "1", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	if (!origin_wait_requests(og, 2, WAIT_MS))
		fail_msg("the proxy did not fetch the next range");
	/*
	 * Some of the piece must have reached the proxy, or nothing of it is
	 * wasted: the origin's request arriving says nothing of its answer's.
	 * The first piece was spliced; the piece fetched ahead is copied in.
	 */
	metric_exceeds("keepalive_proxy_bytes_copied_total", 0);
	/* The seek is answered while the gated piece still holds back its body. */
	piece(&c, og, "/object.bin", 4 * MIB, 5 * MIB - 1, NULL);
	client_close(&c);
	metric_becomes("keepalive_proxy_readahead_misses_total", 1);
	wasted = stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total");
	if (wasted <= 0 || wasted >= (double)g)
		fail_msg("wasted %.0f bytes of the abandoned piece, expected some, fewer than %llu",
		         wasted, (unsigned long long)g);
	metric_becomes("keepalive_proxy_readahead_cut_total", 1);
	atomic_store(&obj.gate_open, true);
	stop_proxy();
}

/*
 * A client that stops: the pieces fetched for it are dropped once
 * --read-ahead-ttl has passed, and counted as wasted.
 */
static void
a_client_that_stops_frees_memory_within_the_ttl(void)
{
	const uint64_t g = grown(MIB);
	struct origin *og;
	struct client c;
	double asked;

	object_init(4 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-ttl", "1", NULL});
	client_open(&c, px.port);
	asked = now_s();
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	quiet(og, 3);
	client_close(&c);
	/*
	 * The pieces were held no earlier than the request was sent: while less
	 * than the TTL has passed since, they must be there. (A slow machine
	 * may take longer to get here; then this says nothing, and is skipped.)
	 */
	if (stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes") <= 0 &&
	    now_s() - asked < 0.9)
		fail_msg("the pieces were dropped before their time to live");
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total"),
	                 2 * g);
	counts(2, 0, 0, 0, 0, 0, 0);
	stop_proxy();
}

/*
 * A reader that takes its piece slowly (it reads nothing for longer than
 * --read-ahead-ttl, with more than socket buffers hold still to come):
 * nothing more is held while it waits, the piece it reads is not dropped,
 * and it gets every byte.
 */
static void
a_slow_reader_stays_bounded(void)
{
	const uint64_t piece_len = 24 * MIB;
	struct origin *og;
	struct client c;
	struct response r;
	char range[96];
	double held;

	object_init(4 * piece_len);
	og = origin_start(serve_object, NULL);
	/* Long enough for the client to ask in time on a slow machine; short for the test. */
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-ttl", "2",
	                                  "--read-ahead-memory", "134217728", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, piece_len - 1, NULL);
	client_close(&c);
	quiet(og, 3);
	held = stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes");
	client_open(&c, px.port);
	snprintf(range, sizeof(range), "Range: bytes=%llu-%llu\r\nUser-Agent: kp-e2e\r\n",
	         (unsigned long long)piece_len, (unsigned long long)(2 * piece_len - 1));
	send_request(&c, "GET", og, "/object.bin", "HTTP/1.1", range);
	metric_becomes("keepalive_proxy_readahead_hits_total", 1);
	/*
	 * The piece after it, fetched with it and never asked for, outlives
	 * --read-ahead-ttl and is dropped (wasted): by then the piece being
	 * read, held as long, would have been dropped too had its reader not
	 * kept it.
	 */
	metric_exceeds("keepalive_proxy_readahead_wasted_bytes_total", 0);
	if (stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes") > held)
		fail_msg("more held while a reader is slow than was fetched");
	if (stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes") <= 0)
		fail_msg("the piece a client is still reading was dropped");
	read_response_ok(&c, &r, 0);
	expect_piece(&r, piece_len, 2 * piece_len - 1, __FILE__, __LINE__);
	response_free(&r);
	client_close(&c);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	stop_proxy();
}

/*
 * Twenty downloads at once from one client: what is held never passes the
 * client's share (half of --read-ahead-memory), predictions past it are
 * counted as throttled, and every client gets every piece right.
 */
static void
twenty_streams_within_the_memory_cap(void)
{
	const double cap = 8 * MIB;
	struct origin *og;
	struct client c;
	char path[32];
	double held;

	object_init(2 * MIB);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-memory", "8388608", NULL});
	client_open(&c, px.port);
	for (unsigned k = 0; k < 20; k++) {
		snprintf(path, sizeof(path), "/stream%u.bin", k);
		piece(&c, og, path, 0, MIB / 2 - 1, NULL);
		held = stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes");
		if (held > cap / 2)
			fail_msg("%.0f bytes held after %u streams, more than the client's share %.0f",
			         held, k + 1, cap / 2);
	}
	if (stats_metric(stats_port, "keepalive_proxy_readahead_throttled_total") == 0)
		fail_msg("no prediction was throttled by the memory cap");
	for (unsigned k = 0; k < 20; k++) {
		snprintf(path, sizeof(path), "/stream%u.bin", k);
		piece(&c, og, path, MIB / 2, MIB - 1, NULL);
	}
	client_close(&c);
	stop_proxy();
}

/* ---- nginx and curl ---- */

/* nginx's access log: the status, the Range asked and the bytes sent. */
#define NGINX_LOG "$status \"$http_range\" $body_bytes_sent"

/*
 * curl fetches nginx's file in four ranges of 1 MiB, one process (and one
 * client connection) each, through the proxy already started; the last
 * three are hits, and nginx is asked for every byte once.
 */
static void
curl_downloads_in_ranges(struct nginx_files *ng, const char *url, const char *cacert)
{
	const uint64_t g = grown(MIB);
	const unsigned seen_after[] = {3, 4, 4, 4};
	char dest[320], log[320], want[1024], *text;

	path_join(log, sizeof(log), ng->dir, "curl.log");
	for (unsigned k = 0; k < 4; k++) {
		char range[64];

		snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)(k * MIB),
		         (unsigned long long)((k + 1) * MIB - 1));
		snprintf(dest, sizeof(dest), "%s/part%u", ng->dir, k);
		curl_through(px.port, url, range, dest, cacert, log);
		assert_file_pattern(dest, k * MIB, MIB);
		/* The pieces fetched meanwhile are logged, and the proxy's connection is idle. */
		free(wait_file_lines(ng->access_log, seen_after[k], WAIT_MS));
		wait_all_idle(__FILE__, __LINE__);
	}
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	counts(3, 3, 0, 0, 0, 0, 0);
	text = wait_file_lines(ng->access_log, 4, WAIT_MS);
	snprintf(want, sizeof(want),
	         "206 \"bytes=0-1048575\" 1048576\n"
	         "206 \"bytes=1048576-%llu\" %llu\n"
	         "206 \"bytes=2097152-%llu\" %llu\n"
	         "206 \"bytes=3145728-4194303\" 1048576\n",
	         (unsigned long long)(MIB + g - 1), (unsigned long long)g,
	         (unsigned long long)(2 * MIB + g - 1), (unsigned long long)g);
	if (strcmp(text, want) != 0) {
		print_error("nginx logged:\n%sexpected:\n%s", text, want);
		free(text);
		fail();
	}
	free(text);
}

/* Writes an HLS media playlist of segments first..last (<name><k>.ts), ended (VOD) or live. */
static void
write_named_playlist(const char *path, const char *name, unsigned first, unsigned last,
                     bool ended)
{
	char text[2048];
	size_t n = (size_t)snprintf(text, sizeof(text),
	                            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n"
	                            "#EXT-X-MEDIA-SEQUENCE:%u\n",
	                            first);

	for (unsigned k = first; k <= last; k++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "#EXTINF:4.0,\n%s%u.ts\n", name, k);
	if (ended)
		snprintf(text + n, sizeof(text) - n, "#EXT-X-ENDLIST\n");
	write_text_file(path, text);
}

static void
write_playlist(const char *path, unsigned first, unsigned last, bool ended)
{
	write_named_playlist(path, "seg", first, last, ended);
}

/* curl GETs url (through the proxy) into dir/name; the body must be the pattern of len bytes. */
static void
curl_get(struct nginx_files *ng, const char *url, const char *name, uint64_t len)
{
	char dest[320], log[320];

	path_join(log, sizeof(log), ng->dir, "curl.log");
	path_join(dest, sizeof(dest), ng->dir, name);
	curl_through(px.port, url, NULL, dest, NULL, log);
	if (len)
		assert_file_pattern(dest, 0, len);
}

/*
 * An HLS player through the proxy: curl gets a playlist, then its
 * segments one by one. A finished (VOD) playlist starts its first two
 * segments as it passes, and each one answered the ones after it: every
 * segment comes from memory, and nginx is asked for each once. A live
 * playlist starts nothing; after its first segment nothing it does not
 * list yet is fetched (no 404 at the live edge), and once a newer copy
 * lists more, those are.
 */
static void
hls_segments_from_a_playlist(void)
{
	static struct nginx_files ng;
	const uint64_t seg = 256 * 1024;
	char url[160], path[320], *text;

	require_program("curl", "KP_CURL");
	nginx_files_start(&ng, harness_temp_dir(), false, NGINX_LOG, "file.bin", 4 * MIB);
	path_join(path, sizeof(path), ng.dir, "www/hls");
	if (mkdir(path, 0755) != 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	for (unsigned k = 0; k < 6; k++) {
		char name[64];

		snprintf(name, sizeof(name), "www/hls/seg%u.ts", k);
		path_join(path, sizeof(path), ng.dir, name);
		write_pattern_file(path, seg);
	}
	path_join(path, sizeof(path), ng.dir, "www/hls/vod.m3u8");
	write_playlist(path, 0, 3, true);
	path_join(path, sizeof(path), ng.dir, "www/hls/live.m3u8");
	write_playlist(path, 3, 4, false);
	start_proxy((const char *const[]){"--read-ahead", NULL});

	/* VOD: segments 0 and 1 start with the playlist; all four come from memory. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/vod.m3u8", ng.port);
	curl_get(&ng, url, "vod.m3u8", 0);
	metric_becomes("keepalive_proxy_readahead_predicted_total", 2);
	for (unsigned k = 0; k < 4; k++) {
		char name[32];

		snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/seg%u.ts", ng.port, k);
		snprintf(name, sizeof(name), "vod%u.ts", k);
		curl_get(&ng, url, name, seg);
		wait_all_idle(__FILE__, __LINE__);
	}
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	text = wait_file_lines(ng.access_log, 5, WAIT_MS);
	if (count_text(text, "\n") != 5 || count_text(text, "200 \"-\" 262144\n") != 4)
		fail_msg("nginx logged, expected the playlist and each segment once:\n%s", text);
	free(text);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_predicted_total"), 4);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_hits_total") +
	                         stats_metric(stats_port, "keepalive_proxy_readahead_joins_total"),
	                 4);

	/* Live: 3 and 4 listed; after 4 nothing is fetched until a newer copy lists 5. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/live.m3u8", ng.port);
	curl_get(&ng, url, "live.m3u8", 0);
	wait_all_idle(__FILE__, __LINE__);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_predicted_total"), 4);
	for (unsigned k = 3; k <= 4; k++) {
		char name[32];

		snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/seg%u.ts", ng.port, k);
		snprintf(name, sizeof(name), "live%u.ts", k);
		curl_get(&ng, url, name, seg);
		wait_all_idle(__FILE__, __LINE__);
	}
	path_join(path, sizeof(path), ng.dir, "www/hls/live.m3u8");
	write_playlist(path, 4, 5, false);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/live.m3u8", ng.port);
	curl_get(&ng, url, "live2.m3u8", 0);
	/* The VOD playlist and its four segments, the live one twice, 3, and 4 ahead. */
	text = wait_file_lines(ng.access_log, 9, WAIT_MS);
	if (strstr(text, "404"))
		fail_msg("a segment not listed yet was asked for:\n%s", text);
	free(text);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/seg4.ts", ng.port);
	curl_get(&ng, url, "live4again.ts", seg);
	wait_all_idle(__FILE__, __LINE__);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hls/seg5.ts", ng.port);
	curl_get(&ng, url, "live5.ts", seg);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	/* 4 again (it was served once), then 5 fetched ahead and served from memory. */
	text = wait_file_lines(ng.access_log, 11, WAIT_MS);
	if (count_text(text, "\n") != 11 || count_text(text, "404") ||
	    count_text(text, " 262144\n") != 8)
		fail_msg("nginx logged, expected eight segments and no 404:\n%s", text);
	free(text);
	stop_proxy();
}

/*
 * Fetches ahead are pipelined: the second behind the first on the
 * connection the client's first request freed. An origin that answers the
 * first and then closes, reading nothing more (as one that does not
 * pipeline may), loses the second: it fails or is asked again, and the
 * client gets every piece right either way.
 */
static void
origin_closing_after_one_pipelined_answer(void)
{
	struct origin *og;
	struct client c;

	object_init(4 * MIB);
	object_twist("/object.bin", MIB, TWIST_LAST);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);
	piece(&c, og, "/object.bin", 0, MIB - 1, NULL);
	if (!origin_wait_requests(og, 2, WAIT_MS))
		fail_msg("the proxy did not fetch ahead");
	for (uint64_t k = 1; k < 4; k++) {
		client_close(&c);
		client_open(&c, px.port);
		piece(&c, og, "/object.bin", k * MIB, (k + 1) * MIB - 1, NULL);
	}
	client_close(&c);
	if (stats_metric(stats_port, "keepalive_proxy_pipelined_total") <= 0)
		fail_msg("no fetch ahead was pipelined");
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	assert_origin_clean(og);
	stop_proxy();
}

/* GETs path whole, with fields, and expects the object as the origin sends it. */
static void
get_whole(struct client *c, struct origin *og, const char *path, const char *fields)
{
	struct response r;
	char text[1024];

	snprintf(text, sizeof(text), "User-Agent: kp-e2e\r\n%s", fields ? fields : "");
	send_request(c, "GET", og, path, "HTTP/1.1", text);
	read_response_ok(c, &r, 0);
	if (r.head.status != 200 || r.body.len != obj.size ||
	    r.body.fnv != pattern_range_fnv(0, obj.size)) {
		response_print(&r);
		fail_msg("%s: expected the whole object", path);
	}
	response_free(&r);
}

/* How many requests the origin saw for path (its query included). */
static unsigned
origin_saw_path(struct origin *og, const char *path)
{
	unsigned n = 0;

	for (unsigned i = 0; i < origin_request_count(og); i++) {
		const struct origin_request *q = origin_request_at(og, i);

		n += q && strcmp(q->head.target, path) == 0;
	}
	return n;
}

/* Playlists /lo.m3u8 and /hi.m3u8 (segments lo<k>.bin, hi<k>.bin, 0-3); the object elsewhere. */
static void
serve_variants(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *path = req->head.target;
	char text[512];
	size_t n;

	if (strcmp(path, "/lo.m3u8") != 0 && strcmp(path, "/hi.m3u8") != 0) {
		serve_object(c, req, arg);
		return;
	}
	n = (size_t)snprintf(text, sizeof(text), "#EXTM3U\n#EXT-X-TARGETDURATION:4\n");
	for (unsigned k = 0; k < 4; k++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "#EXTINF:4.0,\n%.2s%u.bin\n",
		                      path + 1, k);
	/* Live (no EXT-X-ENDLIST): a finished one would start its first segments as it passes. */
	origin_reply(c, 200, "Content-Type: application/vnd.apple.mpegurl\r\n", text);
}

/*
 * A player switching variant while the low one's next segments are still
 * far from in: they are ended, not carried on; the high one's come from
 * memory.
 */
static void
a_variant_switch_ends_the_old_fetches(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	double wasted;

	object_init(MIB);
	object_twist("/lo1.bin", 0, TWIST_GATE);
	object_twist("/lo2.bin", 0, TWIST_GATE);
	og = origin_start(serve_variants, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/lo.m3u8", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	read_response_ok(&c, &r, 0);
	response_free(&r);
	get_whole(&c, og, "/lo0.bin", NULL);
	/* lo2 is pipelined behind lo1, which the origin holds back. */
	if (!origin_wait_requests(og, 3, WAIT_MS))
		fail_msg("the low variant's next segment was not fetched");
	metric_becomes("keepalive_proxy_readahead_predicted_total", 2);
	send_request(&c, "GET", og, "/hi.m3u8", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	read_response_ok(&c, &r, 0);
	response_free(&r);
	get_whole(&c, og, "/hi1.bin", NULL);
	/* lo1 is ended with its connection; lo2, pipelined behind it and asked again, too. */
	metric_becomes("keepalive_proxy_readahead_cut_total", 2);
	if (stats_metric(stats_port, "keepalive_proxy_readahead_failed_total") != 0)
		fail_msg("the low variant's fetches failed rather than being ended");
	get_whole(&c, og, "/hi2.bin", NULL);
	get_whole(&c, og, "/hi3.bin", NULL);
	client_close(&c);
	atomic_store(&obj.gate_open, true);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	wasted = stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total");
	if (wasted <= 0 || wasted >= (double)MIB)
		fail_msg("%.0f bytes wasted, expected what came of the gated segments only", wasted);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_hits_total") +
	                         stats_metric(stats_port, "keepalive_proxy_readahead_joins_total"),
	                 2);
	stop_proxy();
}

/*
 * A player that names its next request in CMCD (nor, in a header or in the
 * query): that object is fetched for it and served from memory, its own
 * CMCD query not mattering; a nor climbing with ".." is not followed.
 */
static void
cmcd_next_object_request(void)
{
	struct origin *og;
	struct client c;

	object_init(256 * 1024);
	og = origin_start(serve_object, NULL);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	client_open(&c, px.port);

	get_whole(&c, og, "/v/seg1.bin", "CMCD-Request: nor=\"seg2.bin\"\r\n");
	if (!origin_wait_requests(og, 2, WAIT_MS))
		fail_msg("the object CMCD named was not fetched");
	wait_all_idle(__FILE__, __LINE__);
	get_whole(&c, og, "/v/seg2.bin", NULL);
	assert_int_equal(origin_saw_path(og, "/v/seg2.bin"), 1);

	/* The query form; the next request carries a CMCD query of its own. */
	get_whole(&c, og, "/v/seg3.bin?CMCD=nor%3D%22seg4.bin%22%2Csid%3D%22s1%22", NULL);
	if (!origin_wait_requests(og, 4, WAIT_MS))
		fail_msg("the object the CMCD query named was not fetched");
	wait_all_idle(__FILE__, __LINE__);
	get_whole(&c, og, "/v/seg4.bin?CMCD=sid%3D%22s1%22", NULL);
	assert_int_equal(origin_saw_path(og, "/v/seg4.bin"), 1);
	assert_int_equal(origin_saw_path(og, "/v/seg4.bin?CMCD=sid%3D%22s1%22"), 0);

	/* Out of the player's directory: refused. */
	get_whole(&c, og, "/v/seg5.bin", "CMCD-Request: nor=\"..%2Fsecret.bin\"\r\n");
	/*
	 * A range whose length wrapped the memory count to 0 once (a freed
	 * client record used, then freed again): never fetched.
	 */
	get_whole(&c, og, "/v/seg6.bin", "CMCD-Request: nrr=\"0-18446744073709517823\"\r\n");
	/* nrr alone: a range of the same object (its last KiB), served when asked. */
	get_whole(&c, og, "/v/seg7.bin", "CMCD-Request: nrr=\"261120-262143\"\r\n");
	if (!origin_wait_requests(og, 8, WAIT_MS))
		fail_msg("the range CMCD named was not fetched");
	wait_all_idle(__FILE__, __LINE__);
	piece(&c, og, "/v/seg7.bin", 261120, 262143, NULL);
	client_close(&c);
	metric_becomes("keepalive_proxy_fetch_memory_bytes", 0);
	assert_int_equal(origin_request_count(og), 8);
	counts(3, 3, 0, 0, 0, 1, 0);
	stop_proxy();
}

/*
 * A player switching variant: after a segment of the low one, the next
 * two of it are fetched; it then takes the high one's playlist and a
 * segment of it, and the high one's next segments come from memory. The
 * low one's are never served, and go as wasted after --read-ahead-ttl.
 */
static void
hls_variant_switch(void)
{
	static struct nginx_files ng;
	const uint64_t seg = 128 * 1024;
	char url[160], path[320], name[64], *text;

	require_program("curl", "KP_CURL");
	nginx_files_start(&ng, harness_temp_dir(), false, NGINX_LOG, "file.bin", 4 * MIB);
	for (unsigned k = 0; k < 4; k++)
		for (unsigned v = 0; v < 2; v++) {
			snprintf(name, sizeof(name), "www/%s%u.ts", v ? "hi" : "lo", k);
			path_join(path, sizeof(path), ng.dir, name);
			write_pattern_file(path, seg);
		}
	path_join(path, sizeof(path), ng.dir, "www/lo.m3u8");
	/* Live ones: a finished playlist would start its first segments as it passes. */
	write_named_playlist(path, "lo", 0, 3, false);
	path_join(path, sizeof(path), ng.dir, "www/hi.m3u8");
	write_named_playlist(path, "hi", 0, 3, false);
	/* Long enough that hi2 and hi3 wait for the client however slow the machine. */
	start_proxy((const char *const[]){"--read-ahead", "--read-ahead-ttl", "3", NULL});

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/lo.m3u8", ng.port);
	curl_get(&ng, url, "lo.m3u8", 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/lo0.ts", ng.port);
	curl_get(&ng, url, "lo0.ts", seg);
	wait_all_idle(__FILE__, __LINE__);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hi.m3u8", ng.port);
	curl_get(&ng, url, "hi.m3u8", 0);
	for (unsigned k = 1; k < 4; k++) {
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/hi%u.ts", ng.port, k);
		snprintf(name, sizeof(name), "hi%u.ts", k);
		curl_get(&ng, url, name, seg);
		wait_all_idle(__FILE__, __LINE__);
	}
	metric_becomes_after_ttl("keepalive_proxy_fetch_memory_bytes", 0, 3);
	/* Two playlists, lo0, lo1 and lo2 ahead, hi1, and hi2 and hi3 ahead. */
	text = wait_file_lines(ng.access_log, 8, WAIT_MS);
	if (count_text(text, "\n") != 8 || count_text(text, " 131072\n") != 6)
		fail_msg("nginx logged, expected two playlists and six segments once each:\n%s",
		         text);
	free(text);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_hits_total") +
	                         stats_metric(stats_port, "keepalive_proxy_readahead_joins_total"),
	                 2);
	assert_true(stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total") >=
	            2.0 * seg);
	stop_proxy();
}

static void
nginx_and_curl(void)
{
	static struct nginx_files ng;
	char url[128];

	require_program("curl", "KP_CURL");
	nginx_files_start(&ng, harness_temp_dir(), false, NGINX_LOG, "file.bin", 4 * MIB);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/file.bin", ng.port);
	curl_downloads_in_ranges(&ng, url, NULL);
	stop_proxy();
}

/* The same download over HTTPS, intercepted (--intercept): read-ahead works inside too. */
static void
intercepted_https(void)
{
	static struct nginx_files ng;
	const char *openssl;
	char dir[256], url[128], ports[16], log[300], crt[300], key[300], ca_dir[300];
	char ca_crt[320], ca_key[320];

	if (!proxy_has_tls())
		skip();
	require_program("curl", "KP_CURL");
	openssl = require_program("openssl", "KP_OPENSSL");
	snprintf(dir, sizeof(dir), "%s", harness_temp_dir());
	path_join(crt, sizeof(crt), dir, "origin.crt");
	path_join(key, sizeof(key), dir, "origin.key");
	path_join(ca_dir, sizeof(ca_dir), dir, "proxy-ca");
	path_join(log, sizeof(log), dir, "tools.log");
	{
		/* Self-signed for localhost: the proxy trusts it as it is (--upstream-ca). */
		const char *argv[] = {openssl,   "req",       "-x509",
		                      "-newkey", "ec",        "-pkeyopt",
		                      "ec_paramgen_curve:P-256", "-nodes", "-keyout",
		                      key,       "-out",      crt,
		                      "-days",   "2",         "-subj",
		                      "/CN=localhost",        "-addext",
		                      "subjectAltName=DNS:localhost", NULL};

		run_ok(argv, log);
	}
	{
		const char *argv[] = {getenv("KP_BINARY"), "--make-ca", ca_dir, "--intercept",
		                      "localhost", NULL};

		run_ok(argv, log);
	}
	path_join(ca_crt, sizeof(ca_crt), ca_dir, "ca.crt");
	path_join(ca_key, sizeof(ca_key), ca_dir, "ca.key");
	nginx_files_start(&ng, dir, true, NGINX_LOG, "file.bin", 4 * MIB);
	snprintf(ports, sizeof(ports), "%d", ng.port);
	start_proxy((const char *const[]){"--read-ahead", "--intercept", "localhost", "--ca-cert",
	                                  ca_crt, "--ca-key", ca_key, "--connect-ports", ports,
	                                  "--upstream-ca", crt, NULL});
	snprintf(url, sizeof(url), "https://localhost:%d/file.bin", ng.port);
	curl_downloads_in_ranges(&ng, url, ca_crt);
	stop_proxy();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(off_by_default),
		E2E_TEST(consecutive_ranges_are_hits),
		E2E_TEST(joins_a_fetch_still_arriving),
		E2E_TEST(varying_lengths_like_ytdlp),
		E2E_TEST(seeks_are_misses),
		E2E_TEST(open_suffix_and_multi_ranges),
		E2E_TEST(held_pieces_are_private),
		E2E_TEST(unsafe_pieces_are_never_served),
		E2E_TEST(private_answers_predict_nothing),
		E2E_TEST(if_range_of_another_version_is_not_served),
		E2E_TEST(vary_fields_must_match),
		E2E_TEST(failed_fetches_fall_back_to_the_origin),
		E2E_TEST(only_a_206_to_a_get_predicts),
		E2E_TEST(memory_cap_throttles),
		E2E_TEST(a_seek_ends_a_fetch_far_from_done),
		E2E_TEST(a_client_that_stops_frees_memory_within_the_ttl),
		E2E_TEST(twenty_streams_within_the_memory_cap),
		E2E_TEST(a_slow_reader_stays_bounded),
		E2E_TEST(nginx_and_curl),
		E2E_TEST(hls_segments_from_a_playlist),
		E2E_TEST(hls_variant_switch),
		E2E_TEST(origin_closing_after_one_pipelined_answer),
		E2E_TEST(cmcd_next_object_request),
		E2E_TEST(a_variant_switch_ends_the_old_fetches),
		E2E_TEST(intercepted_https),
	};

	return E2E_RUN("readahead", tests);
}
