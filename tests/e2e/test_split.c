/*
 * Split downloads (--split): a GET to a listed host for a large object is
 * fetched from the origin as bounded ranges of --split-size (pieces), and
 * the client gets one answer of its own. Every case checks the bytes the
 * client got (byte for byte), the Range (and If-Range) of every request the
 * origin saw, and the split counters of the /stats line. The origin serves
 * one pattern object at every path, with ranges, a strong ETag and
 * Last-Modified, and misbehaves the way a case asks: it ignores Range,
 * paces unbounded requests, cuts pieces off, changes the object between
 * pieces, encodes it, or refuses a second connection. Two cases put nginx
 * and curl (and ffmpeg, yt-dlp when installed) on either side, over plain
 * HTTP and intercepted HTTPS.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <unistd.h>

#include "harness.h"
#include "origin.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define ETAG "\"kp-split-1\""
#define OTHER_ETAG "\"kp-split-2\""
#define LAST_MODIFIED "Tue, 01 Jul 2025 10:00:00 GMT"
#define A_DAY_LATER "Wed, 02 Jul 2025 10:00:00 GMT"
#define WAIT_MS 5000
/* The pieces most cases ask for: --split-size. */
#define PIECE (256 * KIB)
#define PIECE_ARG "262144"
/* The second version's bytes: the pattern shifted, so that none passes for the first's. */
#define V2_SHIFT 7

static struct proxy px;
static int stats_port;
static char access_log[512];

/* ---- The origin: one pattern object at every path ---- */

enum cut {
	CUT_CLOSE,     /* the head and half the body, then the connection closes */
	CUT_RESET,     /* the same, then a reset */
	CUT_HEAD_ONLY, /* the head, then the connection closes: not a byte of the body */
	CUT_503,       /* no piece: 503 Service Unavailable instead */
	CUT_STALL,     /* the head and half the body, then nothing until the proxy closes */
};

/* Requests for a range that starts at `at` (to at_last) are cut, `times` of them. */
struct cut_rule {
	uint64_t at, at_last;
	enum cut how;
	unsigned times;
	atomic_uint used;
};

/*
 * Set before the origin starts (size also between downloads, with no
 * request in progress); its threads only read it, but for the atomics.
 */
static struct {
	uint64_t size;
	bool whole_only;       /* ignores Range: a 200 with the whole object to everything */
	bool paces_unbounded;  /* trickles answers without a bounded Range, as video origins do */
	uint64_t changes_at;   /* ranges from here on find the second version; 0: none do */
	bool ignores_if_range; /* answers a range of the second version despite If-Range */
	bool refuses_others;   /* 403 on every connection but the first request's */
	/* 403 (kept alive) to any request while more than this many connections are open; 0: never */
	unsigned crowd_limit;
	atomic_uint crowd_refusals;
	atomic_bool crowd_gathered;
	bool chunked;          /* ranges in chunked coding, without Content-Length */
	struct origin *origin; /* itself, for refuses_others */
	atomic_uint first_conn;
	struct cut_rule cuts[8];
	unsigned ncuts;
} obj;

static void
object_init(uint64_t size)
{
	memset(&obj, 0, sizeof(obj));
	obj.size = size;
}

static void
object_cut(uint64_t at, enum cut how, unsigned times)
{
	struct cut_rule *r;

	assert_true(obj.ncuts < sizeof(obj.cuts) / sizeof(obj.cuts[0]));
	r = &obj.cuts[obj.ncuts++];
	r->at = r->at_last = at;
	r->how = how;
	r->times = times;
}

/* The same for every range starting from first to last; rules cut in the order set. */
static void
object_cut_starting_in(uint64_t first, uint64_t last, enum cut how, unsigned times)
{
	object_cut(first, how, times);
	obj.cuts[obj.ncuts - 1].at_last = last;
}

/* The cut for a range starting at first, if one is still due. */
static bool
take_cut(uint64_t first, enum cut *how)
{
	for (unsigned i = 0; i < obj.ncuts; i++) {
		struct cut_rule *r = &obj.cuts[i];

		if (first >= r->at && first <= r->at_last &&
		    atomic_fetch_add(&r->used, 1) < r->times) {
			*how = r->how;
			return true;
		}
	}
	return false;
}

/* Fields a path adds to every answer: how the encoding cases are told apart. */
static const char *
path_fields(const char *path)
{
	if (strstr(path, "/gzip.bin"))
		return "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n";
	if (strstr(path, "/no-transform.bin"))
		return "Cache-Control: public, no-transform\r\n";
	if (strstr(path, "/identity.bin"))
		return "Content-Encoding: identity\r\n";
	return "";
}

/*
 * The validators a path's answers carry: a strong ETag and Last-Modified,
 * or what the path's name says instead.
 */
static const char *
validator_fields(const char *path, const char *etag, char *out, size_t size)
{
	if (strstr(path, "/dated.bin"))
		/* No ETag; modified a day before Date: Last-Modified is a strong validator. */
		snprintf(out, size,
		         "Last-Modified: " LAST_MODIFIED "\r\nDate: " A_DAY_LATER "\r\n");
	else if (strstr(path, "/same-second.bin"))
		/* Modified in the second of Date: it may change again unseen, so it is weak. */
		snprintf(out, size,
		         "Last-Modified: " LAST_MODIFIED "\r\nDate: " LAST_MODIFIED "\r\n");
	else if (strstr(path, "/undated.bin"))
		/* Without Date, Last-Modified says nothing of its strength. */
		snprintf(out, size, "Last-Modified: " LAST_MODIFIED "\r\n");
	else if (strstr(path, "/weak.bin"))
		/* A weak ETag may not go in If-Range, and with an ETag the date may not either. */
		snprintf(out, size,
		         "ETag: W/%s\r\nLast-Modified: " LAST_MODIFIED "\r\nDate: " A_DAY_LATER
		         "\r\n",
		         etag);
	else
		snprintf(out, size, "ETag: %s\r\nLast-Modified: " LAST_MODIFIED "\r\n", etag);
	return out;
}

/* len bytes of the object from first: a little at a time, slower than any test waits for. */
static void
send_paced(struct origin_conn *c, uint64_t first, uint64_t len, uint64_t shift)
{
	for (uint64_t off = 0; off < len; off += 16 * KIB) {
		uint64_t n = len - off < 16 * KIB ? len - off : 16 * KIB;

		if (!origin_send_pattern(c, shift + first + off, n))
			return;
		origin_pause(c, 100);
	}
}

/* The whole object (of the version that shift names), as a 200. */
static void
send_whole(struct origin_conn *c, const struct origin_request *req, const char *etag,
           uint64_t shift)
{
	char validators[256];

	origin_sendf(c,
	             "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n%s%s"
	             "Content-Length: %llu\r\n\r\n",
	             validator_fields(req->head.target, etag, validators, sizeof(validators)),
	             path_fields(req->head.target), (unsigned long long)obj.size);
	if (strcmp(req->head.method, "HEAD") == 0)
		return;
	if (obj.paces_unbounded)
		send_paced(c, 0, obj.size, shift);
	else
		origin_send_pattern(c, shift, obj.size);
}

/* The first request of the download is the one whose connection the origin favours. */
static bool
refused_here(struct origin_conn *c, uint64_t first)
{
	unsigned conn = origin_conn_no(c), none = 0;

	if (first == 0 && atomic_compare_exchange_strong(&obj.first_conn, &none, conn)) {
		/*
		 * Its answer waits (a while at most) for the proxy's second
		 * connection, which the next piece asked at once opens: that
		 * piece cannot end up behind this one on this connection.
		 */
		for (int waited = 0; origin_connection_count(obj.origin) < 2 && waited < WAIT_MS;
		     waited += 5)
			origin_pause(c, 5);
		return false;
	}
	for (int waited = 0; atomic_load(&obj.first_conn) == 0 && waited < WAIT_MS; waited += 5)
		origin_pause(c, 5);
	return atomic_load(&obj.first_conn) != conn;
}

/*
 * An origin that allows a client crowd_limit connections and refuses any
 * request beyond: it counts what is open when the request comes. The first
 * request waits (a while at most) until a cold download's four connections
 * are all there, so that the first piece is the one refused.
 */
static bool
crowded(struct origin_conn *c)
{
	if (!atomic_exchange(&obj.crowd_gathered, true))
		for (int waited = 0; origin_connection_count(obj.origin) < 4 && waited < WAIT_MS;
		     waited += 5)
			origin_pause(c, 5);
	if (origin_open_count(obj.origin) <= obj.crowd_limit)
		return false;
	atomic_fetch_add(&obj.crowd_refusals, 1);
	return true;
}

/*
 * Bytes first-last as a 206 in chunked coding, without Content-Length;
 * codings: the Transfer-Encoding field's value ("chunked", or another
 * coding before it).
 */
static void
send_chunked_piece(struct origin_conn *c, const struct origin_request *req, const char *validators,
                   uint64_t first, uint64_t last, uint64_t shift, const char *codings)
{
	bool sent = origin_sendf(c,
	                         "HTTP/1.1 206 Partial Content\r\n"
	                         "Content-Type: application/octet-stream\r\n"
	                         "Accept-Ranges: bytes\r\n%sContent-Range: bytes %llu-%llu/%llu\r\n"
	                         "Transfer-Encoding: %s\r\n\r\n",
	                         validators, (unsigned long long)first, (unsigned long long)last,
	                         (unsigned long long)obj.size, codings);

	if (!sent || strcmp(req->head.method, "HEAD") == 0)
		return;
	for (uint64_t off = first; off <= last; off += 16 * KIB) {
		uint64_t n = last + 1 - off < 16 * KIB ? last + 1 - off : 16 * KIB;

		if (!origin_sendf(c, "%llx\r\n", (unsigned long long)n) ||
		    !origin_send_pattern(c, shift + off, n) || !origin_send(c, "\r\n", 2))
			return;
	}
	origin_sendf(c, "0\r\n\r\n");
}

static void
serve_object(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *range = headers_get(&req->head.headers, "Range");
	const char *if_range = headers_get(&req->head.headers, "If-Range");
	const char *etag = ETAG;
	char validators[256];
	uint64_t first = 0, last, len, shift = 0;
	bool open = true, ranged, cut;
	enum cut how = CUT_CLOSE;

	(void)arg;
	if (strcmp(req->head.method, "POST") == 0) {
		origin_reply(c, 200, NULL, "posted");
		return;
	}
	ranged = range && origin_parse_range(range, obj.size, &first, &last, &open);
	if (range && !ranged) {
		origin_sendf(c,
		             "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%llu\r\n"
		             "Content-Length: 0\r\n\r\n",
		             (unsigned long long)obj.size);
		return;
	}
	if (obj.crowd_limit && crowded(c)) {
		origin_sendf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden");
		return;
	}
	if (obj.refuses_others && refused_here(c, first)) {
		/* A CDN allowing a client one connection: this one is turned away, and closed. */
		origin_sendf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n"
		                "Connection: close\r\n\r\nforbidden");
		origin_close(c);
		return;
	}
	/* The object was replaced: ranges from changes_at on are of the second version. */
	if (obj.changes_at && ranged && first >= obj.changes_at) {
		etag = OTHER_ETAG;
		shift = V2_SHIFT;
	}
	/*
	 * An If-Range naming another version asks for the whole object (RFC
	 * 9110 13.1.5); the first version's date names the first version.
	 */
	if (!ranged && strstr(req->head.target, "/coded.bin")) {
		origin_reply_chunked_pattern(c, 200, "Transfer-Encoding: gzip\r\n", obj.size,
		                             16 * KIB, NULL);
		return;
	}
	if (!ranged || obj.whole_only || strstr(req->head.target, "/whole") ||
	    (if_range && strcmp(if_range, etag) != 0 &&
	     (shift || strcmp(if_range, LAST_MODIFIED) != 0) && !obj.ignores_if_range)) {
		send_whole(c, req, etag, shift);
		return;
	}
	cut = take_cut(first, &how);
	if (cut && how == CUT_503) {
		origin_reply(c, 503, "Retry-After: 1\r\n", "busy");
		return;
	}
	validator_fields(req->head.target, etag, validators, sizeof(validators));
	len = last - first + 1;
	if (obj.chunked) {
		send_chunked_piece(c, req, validators, first, last, shift, "chunked");
		return;
	}
	/* "gzip" over bytes that are not the object's: de-chunked, they would pass for it. */
	if (strstr(req->head.target, "/coded.bin")) {
		send_chunked_piece(c, req, validators, first, last, V2_SHIFT, "gzip, chunked");
		return;
	}
	origin_sendf(c,
	             "HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\n"
	             "Accept-Ranges: bytes\r\n%s%s"
	             "Content-Range: bytes %llu-%llu/%llu\r\nContent-Length: %llu\r\n\r\n",
	             validators, path_fields(req->head.target), (unsigned long long)first,
	             (unsigned long long)last, (unsigned long long)obj.size,
	             (unsigned long long)len);
	if (strcmp(req->head.method, "HEAD") == 0)
		return;
	if (open && obj.paces_unbounded) {
		send_paced(c, first, len, shift);
		return;
	}
	if (!cut) {
		origin_send_pattern(c, shift + first, len);
		return;
	}
	if (how != CUT_HEAD_ONLY)
		origin_send_pattern(c, shift + first, len / 2);
	if (how == CUT_STALL) {
		origin_stay_silent(c, 60000);
		return;
	}
	if (how == CUT_RESET) {
		/* The half sent is the proxy's before the reset: where it resumes is known. */
		origin_wait_delivered(c, WAIT_MS);
		origin_reset(c);
	} else {
		origin_close(c);
	}
}

static struct origin *
object_origin(void)
{
	obj.origin = origin_start(serve_object, NULL);
	return obj.origin;
}

/* ---- What the origin saw ---- */

/*
 * Appends the word for one request the origin is expected to see: its
 * Range "bytes=F-L", with "+if" after it when it carries If-Range (which
 * must name the first version: that is checked where the words are made;
 * the date instead of the ETag is "+date").
 */
static void
want(char *list, size_t size, uint64_t first, uint64_t last, bool if_range)
{
	size_t n = strlen(list);

	snprintf(list + n, size - n, " bytes=%llu-%llu%s", (unsigned long long)first,
	         (unsigned long long)last, if_range ? "+if" : "");
}

/*
 * Appends the pieces of bytes first-last, size bytes each, in order; all
 * but the first carry If-Range when the first's head is known by then.
 */
static void
want_pieces(char *list, size_t size, uint64_t first, uint64_t last, uint64_t piece,
            bool first_if_range)
{
	for (uint64_t at = first; at <= last; at += piece) {
		uint64_t end = at + piece - 1 < last ? at + piece - 1 : last;

		want(list, size, at, end, at != first || first_if_range);
	}
}

/*
 * Every request for path the origin saw, in order: " bytes=F-L" (and "+if"
 * with an If-Range of the ETag, "+date" of Last-Modified), "(none)" for
 * none, with "METHOD:" before it if the method is not GET. An If-Range
 * other than the first version's fails the case.
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
		const char *if_range = headers_get(&q->head.headers, "If-Range");
		bool get = strcmp(q->head.method, "GET") == 0;
		const char *mark;
		char target[128];

		snprintf(target, sizeof(target), "http://127.0.0.1:%d%s", origin_port(og),
		         path ? path : "");
		if (path && strcmp(q->head.target, path) != 0 &&
		    strcmp(q->head.target, target) != 0)
			continue;
		if (if_range && strcmp(if_range, ETAG) != 0 && strcmp(if_range, LAST_MODIFIED) != 0)
			fail_msg("request %u carried If-Range: %s, not the first version's "
			         "validator",
			         i + 1, if_range);
		if (headers_count(&q->head.headers, "Range") > 1 ||
		    headers_count(&q->head.headers, "If-Range") > 1)
			fail_msg("request %u carried Range or If-Range twice", i + 1);
		mark = !if_range ? "" : strcmp(if_range, LAST_MODIFIED) == 0 ? "+date" : "+if";
		used += (size_t)snprintf(list + used, size - used, " %s%s%s%s",
		                         get ? "" : q->head.method, get ? "" : ":",
		                         range ? range : "(none)", mark);
	}
	return list;
}

/*
 * Drops from got (sorted words) each word of maybe that is in it, once:
 * requests that may or may not have left the proxy before it let go of
 * them.
 */
static void
drop_maybe(char *got, size_t size, const char *maybe)
{
	char copy[8192], out[8192], *save = NULL;
	size_t used = 0;

	snprintf(copy, sizeof(copy), "%s", got);
	out[0] = '\0';
	for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char key[160], *at;

		snprintf(key, sizeof(key), " %s ", w);
		/* Each maybe word stands for one request at most: used ones are blanked out. */
		if (maybe && (at = strstr(maybe, key)) != NULL) {
			memset(at + 1, '.', strlen(w));
			continue;
		}
		used += (size_t)snprintf(out + used, sizeof(out) - used, " %s", w);
	}
	snprintf(got, size, "%s", out);
}

/*
 * The origin saw exactly the requests in want, and perhaps those in maybe
 * (NULL: none; a word list with a space before and after every word). In
 * order on one connection; in any order (sorted) where pieces go out on
 * several at once, or a resume may come before or after the next piece.
 */
static void
expect_origin_saw(struct origin *og, const char *path, const char *want_list, const char *maybe,
                  bool any_order, const char *file, int line)
{
	char got[8192], a[8192], b[8192], maybe_left[1024];

	origin_ranges(og, path, got, sizeof(got));
	if (any_order) {
		sorted_words(got, a, sizeof(a));
		sorted_words(want_list, b, sizeof(b));
	} else {
		snprintf(a, sizeof(a), "%s", got);
		snprintf(b, sizeof(b), "%s", want_list);
	}
	snprintf(maybe_left, sizeof(maybe_left), "%s", maybe ? maybe : "");
	drop_maybe(a, sizeof(a), maybe_left);
	if (strcmp(a, b) != 0)
		fail_msg("%s:%d: the origin saw these requests for %s:\n   %s\n"
		         "expected%s:\n   %s%s%s",
		         file, line, path, got, any_order ? " (in any order)" : "", want_list,
		         maybe ? "\nand perhaps:\n  " : "", maybe ? maybe : "");
	assert_origin_clean(og);
}
#define origin_saw(og, path, want_list)                                                            \
	expect_origin_saw((og), (path), (want_list), NULL, false, __FILE__, __LINE__)
#define origin_saw_any_order(og, path, want_list)                                                  \
	expect_origin_saw((og), (path), (want_list), NULL, true, __FILE__, __LINE__)
#define origin_saw_perhaps(og, path, want_list, maybe)                                             \
	expect_origin_saw((og), (path), (want_list), (maybe), true, __FILE__, __LINE__)

/* Every request the origin saw asked for a bounded range "bytes=F-L": none was open or absent. */
static void
expect_all_bounded(struct origin *og, const char *file, int line)
{
	unsigned n = origin_request_count(og);

	for (unsigned i = 0; i < n; i++) {
		const struct origin_request *q = origin_request_at(og, i);
		const char *range = headers_get(&q->head.headers, "Range");
		unsigned long long a, b;
		int end = 0;

		if (!range || sscanf(range, "bytes=%llu-%llu%n", &a, &b, &end) != 2 ||
		    range[end] != '\0' || b < a) {
			char got[8192];

			fail_msg("%s:%d: request %u of the origin's asked %s, not a bounded "
			         "range; all:\n   %s",
			         file, line, i + 1, range ? range : "without Range",
			         origin_ranges(og, NULL, got, sizeof(got)));
		}
	}
}
#define all_bounded(og) expect_all_bounded((og), __FILE__, __LINE__)

/* ---- The proxy and its counters ---- */

/* The proxy with a stats page and an access log, and more arguments (NULL-terminated). */
static void
start_proxy(const char *const more[])
{
	static char listen[64];
	const char *args[24] = {"--stats-listen", listen, "--access-log", access_log};
	size_t n = 4;

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	snprintf(access_log, sizeof(access_log), "%s/access.log", harness_temp_dir());
	for (size_t i = 0; more && more[i]; i++) {
		assert_true(n < sizeof(args) / sizeof(args[0]) - 1);
		args[n++] = more[i];
	}
	args[n] = NULL;
	proxy_start(&px, args);
}

/* The usual: 127.0.0.1 split in pieces of PIECE, more arguments after. */
static void
start_splitting(const char *const more[])
{
	const char *args[20] = {"--split", "127.0.0.1", "--split-size", PIECE_ARG};
	size_t n = 4;

	for (size_t i = 0; more && more[i]; i++) {
		assert_true(n < sizeof(args) / sizeof(args[0]) - 1);
		args[n++] = more[i];
	}
	args[n] = NULL;
	start_proxy(args);
}

/* A counter split_counts() does not check. */
#define ANY ULONG_MAX

/*
 * The split counters of the /stats line: downloads split, declined,
 * pieces asked, resumes, mismatches, back-offs; all at once (but those
 * given as ANY).
 */
static void
expect_split_counts(const unsigned long want_n[6], const char *file, int line)
{
	static const char *const names[] = {"split",   "declined",   "pieces",
	                                    "resumes", "mismatches", "back-offs"};
	const char *text = proxy_stats(&px);
	unsigned long got[6];
	bool same = true;

	for (int i = 0; i < 6; i++) {
		got[i] = stats_get(text, names[i]);
		same &= got[i] == want_n[i] || want_n[i] == ANY;
	}
	if (!same) {
		print_error("%s:%d: split counters on the stats line:\n", file, line);
		for (int i = 0; i < 6; i++)
			print_error("  %-10s %lu%s (expected %lu)\n", names[i], got[i],
			            got[i] == want_n[i] || want_n[i] == ANY ? "" : "  <--",
			            want_n[i]);
		print_error("  line: %s\n", text);
		_fail(file, line);
	}
}
#define split_counts(...)                                                                          \
	expect_split_counts((const unsigned long[6]){__VA_ARGS__}, __FILE__, __LINE__)

/* Waits until the metric reads want; fails after WAIT_MS. */
static void
wait_metric(const char *name, double want_v, const char *file, int line)
{
	double deadline = now_s() + WAIT_MS / 1000.0, got;

	while ((got = stats_metric(stats_port, name)) != want_v) {
		if (now_s() > deadline)
			fail_msg("%s:%d: %s stays %.0f, expected %.0f", file, line, name, got,
			         want_v);
		sleep_ms(5);
	}
}
#define metric_becomes(name, want_v) wait_metric((name), (want_v), __FILE__, __LINE__)

/*
 * The download's memory is given back: nothing is held for read-ahead,
 * and the /stats line says so too.
 */
static void
expect_memory_freed(const char *file, int line)
{
	wait_metric("keepalive_proxy_fetch_memory_bytes", 0, file, line);
	if (stats_get(proxy_stats(&px), "held") != 0)
		fail_msg("%s:%d: the stats line holds read-ahead memory still", file, line);
}
#define memory_freed() expect_memory_freed(__FILE__, __LINE__)

/* ---- Clients ---- */

/* b holds exactly bytes first..first+len-1 of the object (the first version). */
static void
expect_bytes(const struct body *b, uint64_t first, uint64_t len, const char *file, int line)
{
	if (b->len != len || b->fnv != pattern_range_fnv(first, len)) {
		uint64_t bad = b->len;

		for (size_t i = 0; i < b->kept && bad == b->len; i++)
			if ((uint8_t)b->data[i] != pattern_at(first + i))
				bad = i;
		fail_msg("%s:%d: expected bytes %llu-%llu of the object: got %llu bytes, "
		         "the first wrong at body offset %llu (of the %zu kept)",
		         file, line, (unsigned long long)first,
		         (unsigned long long)(first + len - 1), (unsigned long long)b->len,
		         (unsigned long long)bad, b->kept);
	}
}
#define body_is(b, first, len) expect_bytes((b), (first), (len), __FILE__, __LINE__)

/* GET path with more field lines (or NULL) on an open client; the response must be whole. */
static void
get(struct client *c, struct origin *og, const char *path, const char *fields, struct response *r)
{
	char text[1024];

	snprintf(text, sizeof(text), "User-Agent: kp-e2e\r\n%s", fields ? fields : "");
	send_request(c, "GET", og, path, "HTTP/1.1", text);
	read_response_ok(c, r, 0);
}

/*
 * r is the client's one answer for bytes first-last of the object (ranged:
 * it asked with a Range) byte for byte: a 200 with the complete length, or
 * a 206 with its own Content-Range; the origin's other fields kept, once
 * each, and the connection kept alive.
 */
static void
expect_answer(const struct response *r, bool ranged, uint64_t first, uint64_t last,
              const char *file, int line)
{
	char range[128], length[32];
	const char *cr = resp_header(r, "Content-Range"), *cl = resp_header(r, "Content-Length");
	bool range_ok;

	snprintf(range, sizeof(range), "bytes %llu-%llu/%llu", (unsigned long long)first,
	         (unsigned long long)last, (unsigned long long)obj.size);
	snprintf(length, sizeof(length), "%llu", (unsigned long long)(last - first + 1));
	range_ok = ranged ? cr && strcmp(cr, range) == 0 &&
	                            headers_count(&r->head.headers, "Content-Range") == 1
	                  : !cr;
	if (r->head.status != (ranged ? 206 : 200) || !cl || strcmp(cl, length) != 0 ||
	    headers_count(&r->head.headers, "Content-Length") != 1 || !range_ok) {
		response_print(r);
		fail_msg("%s:%d: expected a %d with Content-Length: %s%s%s", file, line,
		         ranged ? 206 : 200, length,
		         ranged ? " and Content-Range: " : ", no Content-Range",
		         ranged ? range : "");
	}
	if (!resp_header(r, "ETag") || strcmp(resp_header(r, "ETag"), ETAG) != 0 ||
	    headers_count(&r->head.headers, "ETag") != 1 || !resp_header(r, "Last-Modified") ||
	    strcmp(resp_header(r, "Last-Modified"), LAST_MODIFIED) != 0 ||
	    !resp_header(r, "Content-Type") ||
	    strcmp(resp_header(r, "Content-Type"), "application/octet-stream") != 0 ||
	    headers_count(&r->head.headers, "Content-Type") != 1 ||
	    headers_count(&r->head.headers, "Accept-Ranges") != 1 ||
	    headers_count(&r->head.headers, "Via") != 1 ||
	    headers_count(&r->head.headers, "Transfer-Encoding") != 0 ||
	    headers_has_token(&r->head.headers, "Connection", "close")) {
		response_print(r);
		fail_msg("%s:%d: fields differ from the origin's (ETag, Last-Modified, "
		         "Content-Type, Accept-Ranges once each, one Via, no chunking, keep-alive)",
		         file, line);
	}
	expect_bytes(&r->body, first, last - first + 1, file, line);
}
#define answer_is(r, ranged, first, last)                                                          \
	expect_answer((r), (ranged), (first), (last), __FILE__, __LINE__)

/* How often text occurs in the access log, once it has n lines. */
static unsigned
access_log_count(unsigned n, const char *text)
{
	char *log = wait_file_lines(access_log, n, WAIT_MS);
	unsigned count = 0;

	for (const char *p = log; (p = strstr(p, text)) != NULL; p += strlen(text))
		count++;
	free(log);
	return count;
}

/* ---- Cases ---- */

/*
 * An origin that ignores Range answers the probe with the whole object:
 * that is not split (declined), the client's request goes to the origin as
 * it was sent and is relayed whole. The URL is not probed again (for ten
 * minutes); the host's other URLs are, until three of them answered so.
 */
static void
an_origin_without_ranges_is_relayed_whole(void)
{
	static const char *const paths[] = {"/a.bin", "/b.bin", "/c.bin"};
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[512] = "";

	object_init(2 * MIB);
	obj.whole_only = true;
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	want(want_list, sizeof(want_list), 0, PIECE - 1, false);
	strcat(want_list, " (none)");
	for (unsigned i = 0; i < 3; i++) {
		get(&c, og, paths[i], NULL, &r);
		assert_status(&r, 200);
		body_is(&r.body, 0, obj.size);
		response_free(&r);
		origin_saw(og, paths[i], want_list);
		split_counts(0, i + 1, i + 1, 0, 0, 0);
	}
	/* Remembered: that URL, and now the host, go to the origin at once, unprobed. */
	get(&c, og, "/a.bin", NULL, &r);
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	strcat(want_list, " (none)");
	origin_saw(og, "/a.bin", want_list);
	get(&c, og, "/other.bin", NULL, &r);
	assert_status(&r, 200);
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	origin_saw(og, "/other.bin", " (none)");
	split_counts(0, 3, 3, 0, 0, 0);
	client_close(&c);
	memory_freed();
	proxy_stop(&px);
}

/*
 * One client's request for a URL that answers ranges whole does not switch
 * split off for the host: its other URLs are still split, and once one of
 * them answered a range, not even three such URLs do.
 */
static void
one_url_without_ranges_leaves_the_host_split(void)
{
	static const char *const whole[] = {"/whole-1.bin", "/whole-2.bin", "/whole-3.bin"};
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[512] = "";

	object_init(2 * PIECE);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, whole[0], NULL, &r);
	assert_status(&r, 200);
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	split_counts(0, 1, 1, 0, 0, 0);
	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	split_counts(1, 1, 3, 0, 0, 0);
	for (unsigned i = 1; i < 3; i++) {
		get(&c, og, whole[i], NULL, &r);
		body_is(&r.body, 0, obj.size);
		response_free(&r);
	}
	split_counts(1, 3, 5, 0, 0, 0);
	get(&c, og, "/object-2.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
	origin_saw(og, "/object-2.bin", want_list);
	split_counts(2, 3, 7, 0, 0, 0);
	client_close(&c);
	memory_freed();
	proxy_stop(&px);
}

/*
 * The three requests that are split, on one client connection: without a
 * Range (a 200 with the complete length), an open range and a bounded one
 * longer than a piece (206s with their own Content-Range). The origin is
 * asked for each piece once, in order, the first bare and the rest with
 * If-Range; the client gets the origin's fields, its bytes exact.
 */
static void
split_answers_are_byte_exact(void)
{
	const uint64_t open_from = 300000, from = 100000, to = from + 2 * PIECE + 12345 - 1;
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[2048] = "", range[128];

	object_init(2 * MIB);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);

	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
	origin_saw(og, "/object.bin", want_list);
	split_counts(1, 0, 8, 0, 0, 0);

	snprintf(range, sizeof(range), "Range: bytes=%llu-\r\n", (unsigned long long)open_from);
	get(&c, og, "/open.bin", range, &r);
	answer_is(&r, true, open_from, obj.size - 1);
	response_free(&r);
	want_list[0] = '\0';
	want_pieces(want_list, sizeof(want_list), open_from, obj.size - 1, PIECE, false);
	origin_saw(og, "/open.bin", want_list);
	split_counts(2, 0, 8 + 7, 0, 0, 0);

	snprintf(range, sizeof(range), "Range: bytes=%llu-%llu\r\n", (unsigned long long)from,
	         (unsigned long long)to);
	get(&c, og, "/bounded.bin", range, &r);
	answer_is(&r, true, from, to);
	response_free(&r);
	want_list[0] = '\0';
	want_pieces(want_list, sizeof(want_list), from, to, PIECE, false);
	origin_saw(og, "/bounded.bin", want_list);
	split_counts(3, 0, 8 + 7 + 3, 0, 0, 0);

	client_close(&c);
	/* Every piece came on the one connection the first opened. */
	assert_int_equal(origin_connection_count(og), 1);
	memory_freed();
	assert_int_equal(access_log_count(3, " split\n"), 3);
	/* One connection at most for each of the three downloads. */
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_split_connections_total"), 3);
	proxy_stop(&px);
}

/*
 * An object no longer than a piece: the probe brings all of it (the origin
 * answers less than was asked), and the client gets it as the 200 it
 * asked for. Nothing more is asked; it is not counted as split.
 */
static void
an_object_within_one_piece(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[256] = "";

	object_init(100000);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/small.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	client_close(&c);
	want(want_list, sizeof(want_list), 0, PIECE - 1, false);
	origin_saw(og, "/small.bin", want_list);
	split_counts(0, 0, 1, 0, 0, 0);
	memory_freed();
	proxy_stop(&px);
}

/*
 * An origin that paces answers without a bounded Range to about a media
 * rate (16 KiB every 100 ms here: half a minute for the object) serves the
 * split download at full speed, because it never sees such a request:
 * every request the origin saw asked for a bounded range, for a download
 * without a Range and for an open one.
 */
static void
an_origin_that_paces_sees_only_bounded_ranges(void)
{
	struct origin *og;
	struct client c;
	struct response r;

	object_init(4 * MIB);
	obj.paces_unbounded = true;
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/video.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	get(&c, og, "/video.bin", "Range: bytes=1000000-\r\n", &r);
	answer_is(&r, true, 1000000, obj.size - 1);
	response_free(&r);
	client_close(&c);
	all_bounded(og);
	/* 16 pieces for the whole object, 13 from byte 1000000. */
	assert_int_equal(origin_request_count(og), 16 + 13);
	split_counts(2, 0, 29, 0, 0, 0);
	memory_freed();
	proxy_stop(&px);
}

/* Did the origin see a Range starting in first..last and ending at end, with If-Range? */
static bool
saw_resume(const char *list, uint64_t first, uint64_t last, uint64_t end)
{
	const char *p = list;
	unsigned long long a, b;
	int n;

	while ((p = strstr(p, " bytes=")) != NULL) {
		if (sscanf(p, " bytes=%llu-%llu+if%n", &a, &b, &n) == 2 && n > 0 && a >= first &&
		    a <= last && b == end)
			return true;
		p++;
	}
	return false;
}

/*
 * Connections that break in the middle of four of the eight pieces, the
 * first among them: closed after half the piece, or reset after it. The
 * rest of each is asked again from the next byte the client needs, with
 * If-Range, and the client gets every byte of the object once, in order.
 * Where a break leaves the client is not exact: the piece behind is
 * pipelined on the connection that breaks, and an origin that closes with
 * a request unread resets, taking bytes on their way with it (and the
 * piece behind, asked again from its start).
 */
static void
broken_pieces_are_resumed(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char saw[4096], words[4098];
	const uint64_t cut_at[] = {0, 2 * PIECE, 5 * PIECE, 7 * PIECE};
	unsigned long resumes;
	char marked[64];

	object_init(8 * PIECE);
	object_cut(cut_at[0], CUT_CLOSE, 1);
	object_cut(cut_at[1], CUT_RESET, 1);
	object_cut(cut_at[2], CUT_CLOSE, 1);
	object_cut(cut_at[3], CUT_RESET, 1);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	client_close(&c);
	/* Every piece asked, the rest of each broken one asked again from inside it. */
	origin_ranges(og, "/object.bin", saw, sizeof(saw));
	snprintf(words, sizeof(words), "%s ", saw);
	for (uint64_t at = 0; at < obj.size; at += PIECE) {
		char word[64];

		snprintf(word, sizeof(word), " bytes=%llu-%llu%s ", (unsigned long long)at,
		         (unsigned long long)(at + PIECE - 1), at ? "+if" : "");
		if (!strstr(words, word))
			fail_msg("piece %llu was never asked:%s", (unsigned long long)at, saw);
	}
	for (unsigned k = 0; k < 4; k++)
		if (!saw_resume(saw, cut_at[k] + 1, cut_at[k] + PIECE - 1, cut_at[k] + PIECE - 1))
			fail_msg("the piece at %llu was not resumed from inside it:%s",
			         (unsigned long long)cut_at[k], saw);
	all_bounded(og);
	resumes = stats_get(proxy_stats(&px), "resumes");
	if (resumes < 4)
		fail_msg("%lu resumes, expected at least the four breaks", resumes);
	split_counts(1, 0, ANY, resumes, 0, 0);
	memory_freed();
	snprintf(marked, sizeof(marked), " split, %lu resumes\n", resumes);
	assert_int_equal(access_log_count(1, marked), 1);
	proxy_stop(&px);
}

/*
 * Reads one response whose connection is cut before its end: the head
 * (status) and then exactly len bytes of the object from first, no more.
 */
static void
expect_cut_short(struct client *c, int status, uint64_t first, uint64_t len, const char *file,
                 int line)
{
	struct response r;
	int rc = client_read_response(c, &r, 0);

	if (rc != WIRE_TRUNC && rc != WIRE_IO) {
		response_print(&r);
		fail_msg("%s:%d: expected the answer cut short, got %s", file, line,
		         wire_strerror(rc));
	}
	if (r.head.status != status) {
		response_print(&r);
		fail_msg("%s:%d: expected a %d cut short", file, line, status);
	}
	expect_bytes(&r.body, first, len, file, line);
	response_free(&r);
	/* Nothing follows on that connection. */
	harness_assert_eof(c, WAIT_MS, file, line);
}
#define cut_short(c, status, first, len)                                                           \
	expect_cut_short((c), (status), (first), (len), __FILE__, __LINE__)

/*
 * A piece broken half-way whose rest the origin then never sends (the
 * head, then the connection closes): resumed five times without a byte of
 * progress, then the client's connection is closed where its bytes end.
 * The daemon stays up, and gives the memory back. Where the break leaves
 * the client is the proxy's to find: the origin closes with the next
 * piece's request unread (it was pipelined), which the kernel turns into
 * a reset that may take bytes already on their way with it.
 */
static void
resumes_without_progress_give_up(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[2048] = "";
	uint64_t got;
	int rc;

	object_init(8 * PIECE);
	object_cut(PIECE, CUT_CLOSE, 1);
	object_cut_starting_in(PIECE, 2 * PIECE - 1, CUT_HEAD_ONLY, 1000);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/object.bin", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	rc = client_read_response(&c, &r, 0);
	if ((rc != WIRE_TRUNC && rc != WIRE_IO) || r.head.status != 200) {
		response_print(&r);
		fail_msg("expected a 200 cut short, got %s", wire_strerror(rc));
	}
	got = r.body.len;
	if (got < PIECE || got >= 2 * PIECE)
		fail_msg("cut at byte %llu, expected in the second piece", (unsigned long long)got);
	expect_bytes(&r.body, 0, got, __FILE__, __LINE__);
	response_free(&r);
	harness_assert_eof(&c, WAIT_MS, __FILE__, __LINE__);
	client_close(&c);
	want_pieces(want_list, sizeof(want_list), 0, 2 * PIECE - 1, PIECE, false);
	for (unsigned k = 0; k < 5; k++)
		want(want_list, sizeof(want_list), got, 2 * PIECE - 1, true);
	origin_saw_any_order(og, "/object.bin", want_list);
	/*
	 * The third piece was asked too, once the second's fetch ended, but
	 * waits for a connection to come free (the proxy's own requests never
	 * open one), and none ever does: every resume's is closed by the origin.
	 */
	split_counts(1, 0, 8, 5, 0, 0);
	proxy_assert_alive(&px);
	memory_freed();
	proxy_stop(&px);
}

/*
 * The object is replaced on the origin in the middle of a download: the
 * next piece asked comes back as the new version, whole (the origin honours
 * If-Range) or, from an origin that ignores If-Range, as a 206 of the new
 * version; or the piece asked again after a broken connection does. Every
 * time the client's connection is closed where the old version's bytes
 * end (at a piece boundary, or where the break was), with every byte of
 * the old version before it and none of the new.
 */
static void
another_version_cuts_the_client_off(void)
{
	static const struct {
		uint64_t size, changes_at;
		bool ignores_if_range, broken; /* broken: the second piece breaks half-way */
		uint64_t gets;
	} cases[] = {
		{3 * PIECE, 2 * PIECE, false, false, 2 * PIECE},
		{3 * PIECE, 2 * PIECE, true, false, 2 * PIECE},
		{2 * PIECE, PIECE + 1, false, true, PIECE + PIECE / 2},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct origin *og;
		struct client c;
		char want_list[1024] = "";

		object_init(cases[i].size);
		obj.changes_at = cases[i].changes_at;
		obj.ignores_if_range = cases[i].ignores_if_range;
		if (cases[i].broken)
			object_cut(PIECE, CUT_CLOSE, 1);
		og = object_origin();
		start_splitting(NULL);
		client_open(&c, px.port);
		send_request(&c, "GET", og, "/object.bin", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
		cut_short(&c, 200, 0, cases[i].gets);
		client_close(&c);
		want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
		if (cases[i].broken)
			want(want_list, sizeof(want_list), PIECE + PIECE / 2, 2 * PIECE - 1, true);
		origin_saw_any_order(og, "/object.bin", want_list);
		split_counts(1, 0, 3, cases[i].broken, 1, 0);
		memory_freed();
		assert_int_equal(access_log_count(1, " 200 "), 1);
		proxy_stop(&px);
		origin_stop(og);
	}
}

/*
 * Answers whose bytes are not the object's as stored (Content-Encoding:
 * gzip, a transfer coding besides chunked) or that may not be changed
 * (Cache-Control: no-transform) are not
 * split: the probe is declined, the client's own request goes to the origin
 * as it was, and the origin's answer reaches the client as it was sent.
 * Content-Encoding: identity is no encoding, and is split.
 */
static void
encoded_and_no_transform_answers_are_relayed(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[2048] = "", length[32];

	object_init(2 * MIB);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	snprintf(length, sizeof(length), "%llu", (unsigned long long)obj.size);

	get(&c, og, "/gzip.bin", "Accept-Encoding: gzip\r\n", &r);
	assert_status(&r, 200);
	if (!resp_header(&r, "Content-Encoding") ||
	    strcmp(resp_header(&r, "Content-Encoding"), "gzip") != 0 || !resp_header(&r, "Vary") ||
	    resp_header(&r, "Content-Range") ||
	    strcmp(resp_header(&r, "Content-Length"), length) != 0) {
		response_print(&r);
		fail_msg("the gzip answer was not relayed as the origin sent it");
	}
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	want(want_list, sizeof(want_list), 0, PIECE - 1, false);
	strcat(want_list, " (none)");
	origin_saw(og, "/gzip.bin", want_list);
	if (strcmp(headers_get(&origin_last_request(og)->head.headers, "Accept-Encoding"), "gzip"))
		fail_msg("the client's Accept-Encoding did not reach the origin");
	split_counts(0, 1, 1, 0, 0, 0);

	get(&c, og, "/no-transform.bin", "Range: bytes=1000-\r\n", &r);
	assert_status(&r, 206);
	if (!resp_header(&r, "Cache-Control") ||
	    strcmp(resp_header(&r, "Cache-Control"), "public, no-transform") != 0 ||
	    strcmp(resp_header(&r, "Content-Range"), "bytes 1000-2097151/2097152") != 0) {
		response_print(&r);
		fail_msg("the no-transform answer was not relayed as the origin sent it");
	}
	body_is(&r.body, 1000, obj.size - 1000);
	response_free(&r);
	want_list[0] = '\0';
	want(want_list, sizeof(want_list), 1000, 1000 + PIECE - 1, false);
	strcat(want_list, " bytes=1000-");
	origin_saw(og, "/no-transform.bin", want_list);
	split_counts(0, 2, 2, 0, 0, 0);

	/*
	 * A transfer coding besides chunked (RFC 9112 6.1) is no payload to
	 * split: de-chunked, its bytes would pass for the object's. The client
	 * gets the origin's answer with the coding named.
	 */
	get(&c, og, "/coded.bin", NULL, &r);
	assert_status(&r, 200);
	if (!resp_header(&r, "Transfer-Encoding") ||
	    !strstr(resp_header(&r, "Transfer-Encoding"), "gzip") ||
	    resp_header(&r, "Content-Length")) {
		response_print(&r);
		fail_msg("the coded answer was not relayed as the origin sent it");
	}
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	want_list[0] = '\0';
	want(want_list, sizeof(want_list), 0, PIECE - 1, false);
	strcat(want_list, " (none)");
	origin_saw(og, "/coded.bin", want_list);
	split_counts(0, 3, 3, 0, 0, 0);

	get(&c, og, "/identity.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	if (!resp_header(&r, "Content-Encoding") ||
	    strcmp(resp_header(&r, "Content-Encoding"), "identity") != 0)
		fail_msg("the origin's Content-Encoding: identity was not passed on");
	response_free(&r);
	want_list[0] = '\0';
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
	origin_saw(og, "/identity.bin", want_list);
	split_counts(1, 3, 3 + 8, 0, 0, 0);

	client_close(&c);
	memory_freed();
	proxy_stop(&px);
}

/*
 * Two connections per download, from an origin that allows a client one:
 * it answers 403 on every connection but the one of the download's first
 * request. The second piece, asked at once on a connection of its own, is
 * refused; the host is backed off to one connection and the piece asked
 * again on it, and the client gets every byte. The next download from the
 * host uses one connection from the start: its first piece is a whole
 * --split-size, not half of one.
 */
static void
a_refused_second_connection_backs_off(void)
{
	const uint64_t split = 2 * MIB, half = split / 2;
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[1024] = "";

	object_init(2 * MIB);
	obj.refuses_others = true;
	og = object_origin();
	start_proxy((const char *const[]){"--split", "127.0.0.1", "--split-size", "2097152",
	                                  "--split-connections", "2", NULL});
	client_open(&c, px.port);
	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	/* Cold, the first two pieces are half a --split-size each, asked at once, bare. */
	want(want_list, sizeof(want_list), 0, half - 1, false);
	want(want_list, sizeof(want_list), half, split - 1, false);
	want(want_list, sizeof(want_list), half, split - 1, true);
	origin_saw_any_order(og, "/object.bin", want_list);
	split_counts(1, 0, 3, 1, 0, 1);

	obj.refuses_others = false;
	obj.size = 4 * MIB;
	get(&c, og, "/next.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	want_list[0] = '\0';
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, split, false);
	origin_saw(og, "/next.bin", want_list);
	split_counts(2, 0, 5, 1, 0, 1);
	client_close(&c);
	memory_freed();
	proxy_stop(&px);
}

/*
 * An origin that refuses any request while more than two of its
 * connections are open, and a cold download on four: every first piece is
 * refused, the first included. The host is backed off, the extra
 * connections closed before anything is asked again, and the download
 * completes on one, byte-exact, the origin refusing at most four requests.
 */
static void
a_refused_first_piece_backs_off_too(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	unsigned refusals;

	object_init(8 * PIECE);
	obj.crowd_limit = 2;
	og = object_origin();
	start_splitting((const char *const[]){"--split-connections", "4", NULL});
	client_open(&c, px.port);
	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	client_close(&c);
	refusals = atomic_load(&obj.crowd_refusals);
	print_message("the origin refused %u requests\n", refusals);
	if (refusals == 0 || refusals > 4)
		fail_msg("the origin refused %u requests, expected 1 to 4", refusals);
	split_counts(1, 0, ANY, ANY, 0, 1);
	all_bounded(og);
	memory_freed();
	proxy_stop(&px);
}

/*
 * A piece whose origin stops sending halfway, its connection open: the
 * fetch gives up well inside the client's own --io-timeout and the rest is
 * asked again, so the client sees a resume, not a cut.
 */
static void
a_stalled_piece_is_resumed(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char saw[4096];

	double t0, took;

	object_init(4 * PIECE);
	object_cut(PIECE, CUT_STALL, 1);
	og = object_origin();
	start_splitting((const char *const[]){"--io-timeout", "4", NULL});
	client_open(&c, px.port);
	t0 = now_s();
	get(&c, og, "/object.bin", NULL, &r);
	took = now_s() - t0;
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	client_close(&c);
	/*
	 * The resume came before the client's own deadline, not at it: with the
	 * fetch's stall as long as the client's, whichever timer fires first
	 * decides, and a cut or a 4 s wait are both possible.
	 */
	if (took >= 3.5)
		fail_msg("the download took %.1f s: the stalled piece was resumed only at the "
		         "client's --io-timeout (4 s)", took);
	origin_ranges(og, "/object.bin", saw, sizeof(saw));
	if (!saw_resume(saw, PIECE + 1, 2 * PIECE - 1, 2 * PIECE - 1))
		fail_msg("the stalled piece was not resumed from inside it:%s", saw);
	if (stats_get(proxy_stats(&px), "resumes") < 1)
		fail_msg("no resume counted");
	split_counts(1, 0, ANY, ANY, 0, 0);
	memory_freed();
	proxy_stop(&px);
}

/*
 * Forwards the client's request as it was sent: the origin saw method, path
 * and exactly the client's fields (Host and fields, each once, the same
 * value), with only Via and Connection of the proxy's besides.
 */
static void
expect_forwarded(const struct origin_request *q, struct origin *og, const char *method,
                 const char *path, const char *fields, const char *file, int line)
{
	char copy[1024], host[64], *save = NULL;
	size_t nclient = 1;

	snprintf(host, sizeof(host), "127.0.0.1:%d", origin_port(og));
	if (strcmp(q->head.method, method) != 0 || strcmp(q->head.target, path) != 0)
		fail_msg("%s:%d: the origin saw %s %s, expected %s %s", file, line, q->head.method,
		         q->head.target, method, path);
	if (headers_count(&q->head.headers, "Host") != 1 ||
	    strcmp(headers_get(&q->head.headers, "Host"), host) != 0)
		fail_msg("%s:%d: the origin's Host is not the client's", file, line);
	snprintf(copy, sizeof(copy), "%s", fields);
	for (char *l = strtok_r(copy, "\r\n", &save); l; l = strtok_r(NULL, "\r\n", &save)) {
		char *colon = strchr(l, ':');
		const char *got;

		assert_non_null(colon);
		*colon = '\0';
		got = headers_get(&q->head.headers, l);
		if (headers_count(&q->head.headers, l) != 1 || strcmp(got, colon + 2) != 0)
			fail_msg("%s:%d: the origin saw %s: %s, the client sent %s", file, line, l,
			         got ? got : "(none)", colon + 2);
		nclient++;
	}
	if (q->head.headers.n != nclient + 2 || headers_count(&q->head.headers, "Via") != 1 ||
	    headers_count(&q->head.headers, "Connection") != 1) {
		for (size_t i = 0; i < q->head.headers.n; i++)
			print_error("  %s: %s\n", q->head.headers.v[i].name,
			            q->head.headers.v[i].value);
		fail_msg("%s:%d: the origin saw %zu fields, expected the client's %zu, Via and "
		         "Connection",
		         file, line, q->head.headers.n, nclient);
	}
}
#define forwarded(q, og, method, path, fields)                                                     \
	expect_forwarded((q), (og), (method), (path), (fields), __FILE__, __LINE__)

/*
 * Requests to a listed host that are not split go to the origin as they
 * were sent, one request each, no Range added: a HEAD, a POST, a
 * conditional GET, a GET for a range no longer than a piece, a suffix
 * range and two ranges at once.
 */
static void
other_requests_are_forwarded_untouched(void)
{
	static const struct {
		const char *method, *path, *fields, *body;
		int status;
	} cases[] = {
		{"HEAD", "/object.bin", "User-Agent: kp-e2e\r\nX-Case: head\r\n", NULL, 200},
		{"POST", "/form",
		 "User-Agent: kp-e2e\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n", "a=1",
		 200},
		{"GET", "/object.bin", "User-Agent: kp-e2e\r\nIf-None-Match: \"old\"\r\n", NULL,
		 200},
		{"GET", "/object.bin", "User-Agent: kp-e2e\r\nRange: bytes=0-262143\r\n", NULL,
		 206},
		{"GET", "/object.bin", "User-Agent: kp-e2e\r\nRange: bytes=-2000000\r\n", NULL,
		 206},
		{"GET", "/object.bin", "User-Agent: kp-e2e\r\nRange: bytes=0-9,20-29\r\n", NULL,
		 416},
	};
	struct origin *og;
	struct client c;

	object_init(2 * MIB);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct response r;
		char text[512];
		int rc;

		snprintf(text, sizeof(text), "%s%s", cases[i].fields, cases[i].body ? "" : "");
		send_request(&c, cases[i].method, og, cases[i].path, "HTTP/1.1", text);
		if (cases[i].body)
			client_sendf(&c, "%s", cases[i].body);
		rc = client_read_response(&c, &r,
		                          strcmp(cases[i].method, "HEAD") == 0 ? RESP_HEAD : 0);
		if (rc != WIRE_OK)
			fail_msg("%s %s: %s", cases[i].method, cases[i].path, wire_strerror(rc));
		assert_status(&r, cases[i].status);
		response_free(&r);
		assert_int_equal(origin_request_count(og), i + 1);
		forwarded(origin_request_at(og, i), og, cases[i].method, cases[i].path,
		          cases[i].fields);
	}
	client_close(&c);
	split_counts(0, 0, 0, 0, 0, 0);
	proxy_stop(&px);
}

/* ---- Slow readers: the memory a download holds ---- */

/*
 * --read-ahead-memory 1 MiB: a client's share is half of it, which one
 * piece fits (its body, --max-header-size and 1 KiB: 289 KiB) and two do
 * not.
 */
#define SMALL_MEMORY "1048576"
#define SMALL_SHARE (512 * KIB)

/*
 * Body bytes on their way to the client in the kernel, between the proxy
 * and the client's reads: what the proxy's socket has not had acknowledged
 * (its tx_queue) and what the client's socket holds unread (its rx_queue),
 * from /proc/net/tcp; with the bytes read into the client's buffer that
 * the body has not taken yet.
 */
static uint64_t
bytes_in_kernel(const struct client *c)
{
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	unsigned found = 0;
	uint64_t total = wire_buffered(&c->w);
	char line[512];
	FILE *f;

	if (getsockname(c->fd, (struct sockaddr *)&me, &len) != 0)
		fail_msg("getsockname: %s", strerror(errno));
	if (!(f = fopen("/proc/net/tcp", "r")))
		fail_msg("/proc/net/tcp: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned laddr, lport, raddr, rport, state;
		unsigned long tx, rx;

		if (sscanf(line, " %*u: %x:%x %x:%x %x %lx:%lx", &laddr, &lport, &raddr, &rport,
		           &state, &tx, &rx) != 7)
			continue;
		if (lport == (unsigned)px.port && rport == ntohs(me.sin_port)) {
			total += tx;
			found++;
		} else if (lport == ntohs(me.sin_port) && rport == (unsigned)px.port) {
			total += rx;
			found++;
		}
	}
	fclose(f);
	if (found != 2)
		fail_msg("the client's connection is not in /proc/net/tcp on both ends");
	return total;
}

/*
 * The client has stopped reading long enough for the proxy to stop too:
 * three attempts in a row (50 ms apart) to ask for the next piece found
 * the client's share full, and the origin saw no request meanwhile.
 * Returns the requests the origin saw by then.
 */
static unsigned
wait_stalled(struct origin *og, const char *file, int line)
{
	double deadline = now_s() + 2.0 * WAIT_MS / 1000;

	for (;;) {
		unsigned n = origin_request_count(og);
		double t = stats_metric(stats_port, "keepalive_proxy_fetch_throttled_total");

		while (stats_metric(stats_port, "keepalive_proxy_fetch_throttled_total") <
		       t + 3) {
			if (now_s() > deadline)
				fail_msg("%s:%d: the proxy did not stall on the client's memory "
				         "share: %u requests, %.0f throttled",
				         file, line, origin_request_count(og), t);
			sleep_ms(5);
		}
		if (origin_request_count(og) == n)
			return n;
	}
}
#define stalled(og) wait_stalled((og), __FILE__, __LINE__)

/* Bytes of the proxy's own between a piece and the client's socket: an exchange's two buffers. */
#define RELAY_BYTES (2 * (32 * KIB + KIB))

/*
 * The download's memory is bounded while the client is stalled: the proxy
 * holds at most the client's share (one piece), and has asked for no piece
 * past the one after those it gave the client: given body bytes (read by
 * it, in the kernel's queues, or in the proxy's relay buffers), n requests
 * of PIECE bytes ask for one piece more at most. Returns what was given.
 */
static uint64_t
expect_bounded(unsigned n, const struct client *c, const struct body *b, const char *file, int line)
{
	double held = stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes");
	uint64_t given = b->len + bytes_in_kernel(c) + RELAY_BYTES;

	if (held <= 0 || held > SMALL_SHARE)
		fail_msg("%s:%d: %.0f bytes held for a stalled client, expected some, at most its "
		         "share %llu",
		         file, line, held, (unsigned long long)SMALL_SHARE);
	if (n > given / PIECE + 1)
		fail_msg("%s:%d: %u pieces asked with %llu bytes given the client: more than one "
		         "ahead",
		         file, line, n, (unsigned long long)given);
	return given;
}
#define bounded(n, c, b) expect_bounded((n), (c), (b), __FILE__, __LINE__)

/*
 * An object for the slow readers: more than the kernel may buffer towards
 * a client that reads nothing (the proxy's send buffer grows up to
 * tcp_wmem's maximum, 4 MiB by default), and 4 MiB on top; 20 MiB at most
 * (with more buffered the bounds hold still, but say less).
 */
static uint64_t
beyond_kernel_buffers(void)
{
	char *text = read_file_all("/proc/sys/net/ipv4/tcp_wmem", NULL);
	unsigned long long lo, mid, hi = 4 * MIB;

	if (!text || sscanf(text, "%llu %llu %llu", &lo, &mid, &hi) != 3)
		hi = 4 * MIB;
	if (hi > 16 * MIB)
		hi = 16 * MIB;
	free(text);
	return (hi + PIECE - 1) / PIECE * PIECE + 4 * MIB;
}

static void
close_fd(void *arg)
{
	close((int)(intptr_t)arg);
}

/*
 * A client whose receive buffer is small from its first SYN (the proxy's
 * send buffer still grows: bytes_in_kernel() counts both) sends a GET for
 * path and reads the answer's head.
 */
static void
open_slow_client(struct client *c, struct origin *og, const char *path, struct msg_head *head)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)px.port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {CLIENT_TIMEOUT_MS / 1000, 0};
	int small = 16 * 1024, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
	char why[256];

	assert_true(fd >= 0);
	harness_defer(close_fd, (void *)(intptr_t)fd);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		fail_msg("cannot connect to the proxy: %s", strerror(errno));
	c->fd = fd;
	wire_init(&c->w, fd);
	send_request(c, "GET", og, path, "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	rc = wire_read_head(&c->w, false, 1u << 20, head, why, sizeof(why));
	if (rc != WIRE_OK)
		fail_msg("no answer head: %s %s", wire_strerror(rc), why);
	assert_int_equal(head->status, 200);
}

/* Closes a slow client's connection, with a reset if abort. */
static void
close_slow_client(struct client *c, bool abort)
{
	struct linger lg = {1, 0};

	if (abort)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	harness_cancel(close_fd, (void *)(intptr_t)c->fd);
	close(c->fd);
	wire_free(&c->w);
	c->fd = -1;
}

/*
 * A client that stops reading after the first piece, with a share of the
 * memory that holds one piece: the proxy stops asking the origin for
 * pieces at most one past what it has given the client, and holds no more
 * than the share. Once the client reads on, it gets every byte, and the
 * origin was asked for each piece once.
 */
static void
a_slow_reader_bounds_the_pieces_asked(void)
{
	struct origin *og;
	struct client c;
	struct msg_head head = {0};
	struct body b;
	char want_list[8192] = "";
	unsigned n;

	object_init(beyond_kernel_buffers());
	og = object_origin();
	start_splitting((const char *const[]){"--read-ahead-memory", SMALL_MEMORY, NULL});
	open_slow_client(&c, og, "/object.bin", &head);
	body_init(&b, 0);
	assert_int_equal(client_recv_exact(&c, PIECE, &b), WIRE_OK);
	n = stalled(og);
	bounded(n, &c, &b);
	/* Reading on: the rest, byte for byte. */
	assert_int_equal(client_recv_exact(&c, obj.size - PIECE, &b), WIRE_OK);
	assert_true(b.pattern_ok);
	body_is(&b, 0, obj.size);
	body_free(&b);
	msg_head_free(&head);
	close_slow_client(&c, false);
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
	origin_saw(og, "/object.bin", want_list);
	split_counts(1, 0, obj.size / PIECE, 0, 0, 0);
	memory_freed();
	proxy_stop(&px);
}

/*
 * Upstream connections of the proxy's that are not idle in its pool, both
 * gauges from one /metrics, so that no connection moves between them.
 */
static double
busy_connections(void)
{
	int status;
	const char *text = stats_page(stats_port, "/metrics", &status);

	if (status != 200)
		fail_msg("the stats page answered %d to GET /metrics", status);
	return metric_value(text, "keepalive_proxy_upstream_connections") -
	       metric_value(text, "keepalive_proxy_idle_upstream_connections");
}

/* Waits until n upstream connections are busy; fails after WAIT_MS saying what it waited for. */
static void
wait_busy(double n, const char *what, const char *file, int line)
{
	double deadline = now_s() + WAIT_MS / 1000.0, got;

	while ((got = busy_connections()) != n) {
		if (now_s() > deadline)
			fail_msg("%s:%d: %s: %.0f upstream connections busy after %d ms, expected "
			         "%.0f",
			         file, line, what, got, WAIT_MS, n);
		sleep_ms(5);
	}
}
#define busy_becomes(n, what) wait_busy((n), (what), __FILE__, __LINE__)

/*
 * A client that leaves in the middle of a download, on two connections:
 * the piece it reads stalls halfway at the origin, the three after it are
 * held whole. Once the client has gone, the stalled fetch ends (the proxy
 * closes its connection, long before the fetch's own stall timeout could),
 * no connection stays busy, the held pieces are given back, and nothing
 * was asked past what the download had asked already. The access log has
 * the answer, cut short.
 */
static void
a_client_leaving_stops_the_fetches(void)
{
	struct origin *og;
	struct client c;
	struct msg_head head = {0};
	struct body b;
	char want_list[1024] = "", why[256];
	int rc;

	object_init(16 * PIECE);
	object_cut(2 * PIECE, CUT_STALL, 1);
	og = object_origin();
	start_splitting((const char *const[]){"--split-connections", "2", NULL});
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/object.bin", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	rc = wire_read_head(&c.w, false, 1u << 20, &head, why, sizeof(why));
	if (rc != WIRE_OK)
		fail_msg("no answer head: %s %s", wire_strerror(rc), why);
	assert_int_equal(head.status, 200);
	msg_head_free(&head);
	/* Every byte there is: two pieces and the half of the third the origin sent. */
	body_init(&b, 0);
	assert_int_equal(client_recv_exact(&c, 2 * PIECE + PIECE / 2, &b), WIRE_OK);
	body_is(&b, 0, 2 * PIECE + PIECE / 2);
	body_free(&b);
	/* Four pieces at once, the one read included: up to the sixth, and no further. */
	if (!origin_wait_requests(og, 6, WAIT_MS))
		fail_msg("the origin saw %u requests, expected 6", origin_request_count(og));
	busy_becomes(1, "only the stalled piece's fetch is under way");
	assert_int_equal(origin_peer_closed_count(og), 0);
	client_abort(&c);
	if (!origin_wait_peer_closed(og, 1, WAIT_MS))
		fail_msg("%d ms after the client left, the proxy had not closed the stalled "
		         "piece's connection: its fetch goes on",
		         WAIT_MS);
	busy_becomes(0, "no fetch left once the client has gone");
	memory_freed();
	/* The exchange ended: its line in the access log, a 200 with fewer bytes than promised. */
	assert_int_equal(access_log_count(1, " 200 "), 1);
	assert_int_equal(access_log_count(1, " split\n"), 1);
	want(want_list, sizeof(want_list), 0, PIECE - 1, false);
	want(want_list, sizeof(want_list), PIECE, 2 * PIECE - 1, false);
	want_pieces(want_list, sizeof(want_list), 2 * PIECE, 6 * PIECE - 1, PIECE, true);
	proxy_stop(&px);
	/* Nothing was asked past the pieces under way when the client left. */
	origin_saw_any_order(og, "/object.bin", want_list);
}

/*
 * Two requests pipelined on one client connection, both split: the
 * answers come in order, each whole, and the origin sees each piece once.
 */
static void
pipelined_requests_are_answered_in_order(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[2048] = "";

	object_init(2 * MIB);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/first.bin", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	send_request(&c, "GET", og, "/second.bin", "HTTP/1.1",
	             "User-Agent: kp-e2e\r\nRange: bytes=1000000-\r\n");
	read_response_ok(&c, &r, 0);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	read_response_ok(&c, &r, 0);
	answer_is(&r, true, 1000000, obj.size - 1);
	response_free(&r);
	client_close(&c);
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
	origin_saw(og, "/first.bin", want_list);
	want_list[0] = '\0';
	want_pieces(want_list, sizeof(want_list), 1000000, obj.size - 1, PIECE, false);
	origin_saw(og, "/second.bin", want_list);
	split_counts(2, 0, 8 + 5, 0, 0, 0);
	memory_freed();
	proxy_stop(&px);
}

/*
 * SIGTERM without a grace period while a download is stalled on its
 * client (a piece held, the next one waiting for memory): the daemon
 * ends every download and exits cleanly (status 0; under ASan, without
 * a memory error or leak).
 */
static void
stopping_in_the_middle_of_a_download(void)
{
	struct origin *og;
	struct client c;
	struct msg_head head = {0};
	struct body b;

	object_init(beyond_kernel_buffers());
	og = object_origin();
	start_splitting(
		(const char *const[]){"--read-ahead-memory", SMALL_MEMORY, "--grace", "0", NULL});
	open_slow_client(&c, og, "/object.bin", &head);
	body_init(&b, 0);
	assert_int_equal(client_recv_exact(&c, PIECE, &b), WIRE_OK);
	stalled(og);
	proxy_stop(&px);
	body_free(&b);
	msg_head_free(&head);
	close_slow_client(&c, false);
}

/* ---- nginx, curl, ffmpeg and yt-dlp ---- */

#define NGINX_FILE_LEN (4 * MIB)
/* nginx's access log: what was asked (method, Range, If-Range) and what was sent. */
#define NGINX_LOG "$request_method $status \"$http_range\" \"$http_if_range\" $body_bytes_sent"


/*
 * nginx logged, from its line `from` on (0-based), exactly the pieces of
 * bytes first-last (PIECE each, in order) and nothing else: each a 206 of
 * its length, the first without If-Range and the others with nginx's ETag.
 * Returns the lines logged in all.
 */
static unsigned
expect_nginx_pieces(struct nginx_files *ng, unsigned from, uint64_t first, uint64_t last,
                    const char *file, int line)
{
	unsigned want_n = (unsigned)((last - first) / PIECE + 1), k = 0, no = 0;
	char *text = wait_file_lines(ng->access_log, from + want_n, WAIT_MS), *save = NULL;
	char etag[128] = "";

	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), no++) {
		unsigned long long a, b, sent;
		char if_range[128];
		int status;
		uint64_t at = first + (uint64_t)k * PIECE, end;

		if (no < from)
			continue;
		end = at + PIECE - 1 < last ? at + PIECE - 1 : last;
		if (k >= want_n ||
		    sscanf(l, "GET %d \"bytes=%llu-%llu\" \"%127[^\"]\" %llu", &status, &a, &b,
		           if_range, &sent) != 5 ||
		    status != 206 || a != at || b != end || sent != end - at + 1 ||
		    (k == 0) != (strcmp(if_range, "-") == 0) ||
		    (k > 1 && strcmp(if_range, etag) != 0)) {
			print_error("nginx logged:\n%s\n", text);
			free(text);
			fail_msg("%s:%d: nginx's line %u is not piece %u (bytes=%llu-%llu) of "
			         "%u, a 206 with If-Range after the first",
			         file, line, no + 1, k + 1, (unsigned long long)at,
			         (unsigned long long)end, want_n);
		}
		if (k == 1)
			snprintf(etag, sizeof(etag), "%s", if_range);
		k++;
	}
	free(text);
	if (k != want_n)
		fail_msg("%s:%d: nginx logged %u pieces, expected %u", file, line, k, want_n);
	return from + want_n;
}
#define nginx_pieces(ng, from, first, last)                                                        \
	expect_nginx_pieces((ng), (from), (first), (last), __FILE__, __LINE__)

/* Every GET nginx logged from its line `from` on (0-based) asked for a bounded range. */
static void
expect_nginx_bounded(struct nginx_files *ng, unsigned from, const char *file, int line)
{
	char *text = read_file_all(ng->access_log, NULL), *save = NULL;
	unsigned no = 0, gets = 0;

	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), no++) {
		unsigned long long a, b;
		int end = 0;

		if (no < from || strncmp(l, "GET ", 4) != 0)
			continue;
		gets++;
		if (sscanf(l, "GET %*d \"bytes=%llu-%llu\"%n", &a, &b, &end) != 2 || end == 0 ||
		    b < a) {
			print_error("nginx logged:\n%s\n", text);
			free(text);
			fail_msg("%s:%d: nginx's line %u is a GET without a bounded range", file,
			         line, no + 1);
		}
	}
	free(text);
	if (gets == 0)
		fail_msg("%s:%d: nginx logged no GET from line %u on", file, line, from + 1);
}
#define nginx_bounded(ng, from) expect_nginx_bounded((ng), (from), __FILE__, __LINE__)

/*
 * curl through the proxy, without a Range and with an open one: each file
 * arrives byte for byte, and nginx saw only bounded pieces.
 */
static void
curl_downloads_split(struct nginx_files *ng, const char *url, const char *cacert)
{
	char dest[320], log[320];
	unsigned lines;

	path_join(log, sizeof(log), ng->dir, "curl.log");
	path_join(dest, sizeof(dest), ng->dir, "whole.out");
	curl_through(px.port, url, NULL, dest, cacert, log);
	assert_file_pattern(dest, 0, NGINX_FILE_LEN);
	lines = nginx_pieces(ng, 0, 0, NGINX_FILE_LEN - 1);
	path_join(dest, sizeof(dest), ng->dir, "open.out");
	curl_through(px.port, url, "1000000-", dest, cacert, log);
	assert_file_pattern(dest, 1000000, NGINX_FILE_LEN - 1000000);
	nginx_pieces(ng, lines, 1000000, NGINX_FILE_LEN - 1);
	/* 16 pieces, then 13. */
	split_counts(2, 0, 29, 0, 0, 0);
}

static void
nginx_and_curl(void)
{
	static struct nginx_files ng;
	char url[128];

	require_program("curl", "KP_CURL");
	nginx_files_start(&ng, harness_temp_dir(), false, NGINX_LOG, "big.bin", NGINX_FILE_LEN);
	start_splitting(NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/big.bin", ng.port);
	curl_downloads_split(&ng, url, NULL);
	memory_freed();
	proxy_stop(&px);
}

/* A program on PATH, or NULL. */
static const char *
optional_program(const char *name)
{
	static char found[512];
	const char *path = getenv("PATH");

	for (const char *p = path; p && *p;) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		snprintf(found, sizeof(found), "%.*s/%s", (int)n, p, name);
		if (n && access(found, X_OK) == 0)
			return found;
		p = end ? end + 1 : p + n;
	}
	return NULL;
}

/*
 * ffmpeg through the proxy, trusting its CA, copying url's bytes as raw
 * data into dest; it asks with "Range: bytes=0-", which is split too.
 */
static void
ffmpeg_copies(struct nginx_files *ng, const char *ffmpeg, const char *url, const char *ca,
              const char *dest)
{
	char proxy[64], log[320];
	const char *argv[] = {ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error",
	                      "-http_proxy", proxy, "-ca_file", ca, "-tls_verify", "1", "-f",
	                      "data", "-i", url, "-map", "0", "-c", "copy", "-f", "data", "-y",
	                      dest, NULL};

	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", px.port);
	path_join(log, sizeof(log), ng->dir, "ffmpeg.log");
	run_ok(argv, log);
}

/* yt-dlp through the proxy, trusting the proxy's CA (not its own certifi bundle). */
static void
ytdlp_downloads(struct nginx_files *ng, const char *ytdlp, const char *url, const char *ca,
                const char *dest)
{
	char proxy[64], log[320], env_ca[400];
	const char *argv[] = {"/usr/bin/env", env_ca, ytdlp, "--no-config", "--no-part",
	                      "--compat-options", "no-certifi", "--proxy", proxy, "-o", dest,
	                      url, NULL};

	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", px.port);
	snprintf(env_ca, sizeof(env_ca), "SSL_CERT_FILE=%s", ca);
	path_join(log, sizeof(log), ng->dir, "yt-dlp.log");
	run_ok(argv, log);
}

/*
 * The README's recipe for HTTPS: a CA made with --make-ca for the host,
 * the host intercepted and split, and curl trusting that CA: the same two
 * downloads inside TLS, byte for byte, nginx seeing only bounded pieces.
 * Then ffmpeg and yt-dlp fetch the same URL the same way, where they are
 * installed.
 */
static void
intercepted_https(void)
{
	static struct nginx_files ng;
	const char *openssl, *ffmpeg, *ytdlp;
	char dir[256], url[128], ports[16], log[300], crt[300], key[300], ca_dir[300];
	char ca_crt[320], ca_key[320], dest[320];
	unsigned long downloads = 2, pieces = 29, lines = 29;

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
		const char *argv[] = {openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
		                      "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
		                      crt, "-days", "2", "-subj", "/CN=localhost", "-addext",
		                      "subjectAltName=DNS:localhost", NULL};

		run_ok(argv, log);
	}
	{
		/* Once: a CA for this install, limited to the host it will intercept. */
		const char *argv[] = {getenv("KP_BINARY"), "--make-ca", ca_dir, "--intercept",
		                      "localhost", NULL};

		run_ok(argv, log);
	}
	path_join(ca_crt, sizeof(ca_crt), ca_dir, "ca.crt");
	path_join(ca_key, sizeof(ca_key), ca_dir, "ca.key");
	nginx_files_start(&ng, dir, true, NGINX_LOG, "big.bin", NGINX_FILE_LEN);
	snprintf(ports, sizeof(ports), "%d", ng.port);
	start_proxy((const char *const[]){"--intercept", "localhost", "--split", "localhost",
	                                  "--split-size", PIECE_ARG, "--ca-cert", ca_crt,
	                                  "--ca-key", ca_key, "--connect-ports", ports,
	                                  "--upstream-ca", crt, NULL});
	snprintf(url, sizeof(url), "https://localhost:%d/big.bin", ng.port);
	curl_downloads_split(&ng, url, ca_crt);

	if ((ffmpeg = optional_program("ffmpeg")) != NULL) {
		path_join(dest, sizeof(dest), dir, "ffmpeg.out");
		ffmpeg_copies(&ng, ffmpeg, url, ca_crt, dest);
		assert_file_pattern(dest, 0, NGINX_FILE_LEN);
		lines = nginx_pieces(&ng, lines, 0, NGINX_FILE_LEN - 1);
		downloads++;
		pieces += 16;
	} else {
		print_message("ffmpeg is not on PATH: its part is skipped\n");
	}
	if ((ytdlp = optional_program("yt-dlp")) != NULL) {
		path_join(dest, sizeof(dest), dir, "yt-dlp.out");
		ytdlp_downloads(&ng, ytdlp, url, ca_crt, dest);
		assert_file_pattern(dest, 0, NGINX_FILE_LEN);
		/* How it asks (a HEAD first, chunks) is its own: but every GET was bounded. */
		nginx_bounded(&ng, lines);
	} else {
		print_message("yt-dlp is not on PATH: its part is skipped\n");
		split_counts(downloads, 0, pieces, 0, 0, 0);
	}
	memory_freed();
	proxy_stop(&px);
}

/*
 * Which answers give a validator to ask for the rest with (If-Range): a
 * strong ETag, or without one a Last-Modified a second or more before
 * Date. Such a download is split, its later pieces carrying the date;
 * a weak ETag, a Last-Modified without Date, or one in the second of
 * Date is no validator, and the origin answers the client itself.
 */
static void
validators_decide(void)
{
	static const char *const declined[] = {"/weak.bin", "/undated.bin", "/same-second.bin"};
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[2048] = "";

	object_init(2 * MIB);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/dated.bin", NULL, &r);
	assert_status(&r, 200);
	if (resp_header(&r, "ETag") || !resp_header(&r, "Last-Modified") ||
	    strcmp(resp_header(&r, "Content-Length"), "2097152") != 0) {
		response_print(&r);
		fail_msg("the split answer's fields are not the origin's");
	}
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	/* The words for "+date": the first piece is bare. */
	{
		char dated[2048] = "";

		for (uint64_t at = 0; at < obj.size; at += PIECE) {
			size_t n = strlen(dated);

			snprintf(dated + n, sizeof(dated) - n, " bytes=%llu-%llu%s",
			         (unsigned long long)at, (unsigned long long)(at + PIECE - 1),
			         at ? "+date" : "");
		}
		origin_saw(og, "/dated.bin", dated);
	}
	split_counts(1, 0, 8, 0, 0, 0);
	for (unsigned i = 0; i < sizeof(declined) / sizeof(declined[0]); i++) {
		get(&c, og, declined[i], NULL, &r);
		assert_status(&r, 200);
		body_is(&r.body, 0, obj.size);
		response_free(&r);
		want_list[0] = '\0';
		want(want_list, sizeof(want_list), 0, PIECE - 1, false);
		strcat(want_list, " (none)");
		origin_saw(og, declined[i], want_list);
		split_counts(1, i + 1, 8 + i + 1, 0, 0, 0);
	}
	client_close(&c);
	memory_freed();
	proxy_stop(&px);
}

/*
 * Four connections: the first four pieces, a quarter of --split-size each
 * (so that a cold download gets going on all of them at once), are asked
 * at once, before the object's length and version are known, so without
 * If-Range; the rest are whole pieces with If-Range. The client gets the
 * bytes in order. Then an object shorter than what was asked at once: the
 * pieces past its end are dropped, the last one inside it ends at its end
 * (the origin answers less than was asked), and the client gets it whole.
 */
static void
four_connections_share_a_download(void)
{
	const uint64_t split = MIB, cold = split / 4, small = 600000;
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[2048] = "", maybe[256];

	object_init(3 * MIB);
	og = object_origin();
	start_proxy((const char *const[]){"--split", "127.0.0.1", "--split-size", "1048576",
	                                  "--split-connections", "4", NULL});
	client_open(&c, px.port);
	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	for (uint64_t at = 0; at < split; at += cold)
		want(want_list, sizeof(want_list), at, at + cold - 1, false);
	want_pieces(want_list, sizeof(want_list), split, obj.size - 1, split, true);
	origin_saw_any_order(og, "/object.bin", want_list);
	split_counts(1, 0, 6, 0, 0, 0);

	obj.size = small;
	get(&c, og, "/small.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	want_list[0] = '\0';
	want(want_list, sizeof(want_list), 0, cold - 1, false);
	want(want_list, sizeof(want_list), cold, 2 * cold - 1, false);
	want(want_list, sizeof(want_list), 2 * cold, 3 * cold - 1, false);
	/* Past the end, asked at once: dropped, perhaps before it left (or refused with a 416). */
	snprintf(maybe, sizeof(maybe), " bytes=%llu-%llu ", (unsigned long long)(3 * cold),
	         (unsigned long long)(4 * cold - 1));
	origin_saw_perhaps(og, "/small.bin", want_list, maybe);
	split_counts(2, 0, 10, 0, 0, 0);
	client_close(&c);
	memory_freed();
	proxy_stop(&px);
}

/*
 * Errors the origin answers with. To the probe (a 503), or to a range past
 * the object's end (a 416): not split, the client's request goes to the
 * origin as it was, and the client gets the origin's answer to it. To a
 * later piece on one connection (a 503): the client's connection is
 * closed at that piece, with every byte before it.
 */
static void
errors_from_the_origin(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	char want_list[1024] = "";

	object_init(3 * PIECE);
	object_cut(0, CUT_503, 1);
	object_cut(2 * PIECE, CUT_503, 1);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/probe.bin", NULL, &r);
	assert_status(&r, 200);
	body_is(&r.body, 0, obj.size);
	response_free(&r);
	want(want_list, sizeof(want_list), 0, PIECE - 1, false);
	strcat(want_list, " (none)");
	origin_saw(og, "/probe.bin", want_list);
	split_counts(0, 1, 1, 0, 0, 0);

	get(&c, og, "/past.bin", "Range: bytes=5000000-\r\n", &r);
	assert_status(&r, 416);
	response_free(&r);
	want_list[0] = '\0';
	want(want_list, sizeof(want_list), 5000000, 5000000 + PIECE - 1, false);
	strcat(want_list, " bytes=5000000-");
	origin_saw(og, "/past.bin", want_list);
	split_counts(0, 2, 2, 0, 0, 0);

	send_request(&c, "GET", og, "/object.bin", "HTTP/1.1", "User-Agent: kp-e2e\r\n");
	cut_short(&c, 200, 0, 2 * PIECE);
	client_close(&c);
	want_list[0] = '\0';
	want_pieces(want_list, sizeof(want_list), 0, obj.size - 1, PIECE, false);
	origin_saw(og, "/object.bin", want_list);
	/* Not another version: not counted as a mismatch (nor as anything else). */
	split_counts(1, 2, 5, 0, ANY, 0);
	memory_freed();
	proxy_stop(&px);
}

/*
 * An origin that sends its 206s in chunked coding, without Content-Length
 * (as streaming servers may): the pieces are stored without the framing,
 * and the client gets one answer with the object's length, its bytes exact.
 */
static void
chunked_pieces_are_byte_exact(void)
{
	struct origin *og;
	struct client c;
	struct response r;

	object_init(2 * MIB);
	obj.chunked = true;
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/object.bin", NULL, &r);
	/* A Content-Length of the object's, no chunking, the bytes as they were. */
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	client_close(&c);
	all_bounded(og);
	split_counts(1, 0, 8, 0, 0, 0);
	memory_freed();
	proxy_stop(&px);
}

/* ---- Known to fail: see the commit that adds them ---- */

/*
 * A download served whole wastes nothing: every byte of every piece went
 * to the client, so readahead_wasted_bytes_total ("Bytes fetched ahead
 * and never served") stays 0, for a download without a Range, an open
 * range and a bounded one alike.
 */
static void
served_pieces_are_not_wasted(void)
{
	const uint64_t open_from = 300000, from = 100000, to = from + 2 * PIECE + 12345 - 1;
	struct origin *og;
	struct client c;
	struct response r;
	char range[128];
	double wasted;

	object_init(2 * MIB);
	og = object_origin();
	start_splitting(NULL);
	client_open(&c, px.port);
	get(&c, og, "/object.bin", NULL, &r);
	answer_is(&r, false, 0, obj.size - 1);
	response_free(&r);
	snprintf(range, sizeof(range), "Range: bytes=%llu-\r\n", (unsigned long long)open_from);
	get(&c, og, "/open.bin", range, &r);
	answer_is(&r, true, open_from, obj.size - 1);
	response_free(&r);
	snprintf(range, sizeof(range), "Range: bytes=%llu-%llu\r\n", (unsigned long long)from,
	         (unsigned long long)to);
	get(&c, og, "/bounded.bin", range, &r);
	answer_is(&r, true, from, to);
	response_free(&r);
	client_close(&c);
	split_counts(3, 0, 8 + 7 + 3, 0, 0, 0);
	memory_freed();
	wasted = stats_metric(stats_port, "keepalive_proxy_readahead_wasted_bytes_total");
	/* (The last pieces of the three are 262144, 224288 and 12345 bytes: 498777 in all.) */
	if (wasted != 0)
		fail_msg("%.0f bytes counted as wasted after three downloads served whole", wasted);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(an_origin_without_ranges_is_relayed_whole),
		E2E_TEST(split_answers_are_byte_exact),
		E2E_TEST(an_object_within_one_piece),
		E2E_TEST(an_origin_that_paces_sees_only_bounded_ranges),
		E2E_TEST(broken_pieces_are_resumed),
		E2E_TEST(resumes_without_progress_give_up),
		E2E_TEST(another_version_cuts_the_client_off),
		E2E_TEST(encoded_and_no_transform_answers_are_relayed),
		E2E_TEST(a_refused_second_connection_backs_off),
		E2E_TEST(a_refused_first_piece_backs_off_too),
		E2E_TEST(a_stalled_piece_is_resumed),
		E2E_TEST(one_url_without_ranges_leaves_the_host_split),
		E2E_TEST(other_requests_are_forwarded_untouched),
		E2E_TEST(a_slow_reader_bounds_the_pieces_asked),
		E2E_TEST(a_client_leaving_stops_the_fetches),
		E2E_TEST(pipelined_requests_are_answered_in_order),
		E2E_TEST(stopping_in_the_middle_of_a_download),
		E2E_TEST(validators_decide),
		E2E_TEST(four_connections_share_a_download),
		E2E_TEST(errors_from_the_origin),
		E2E_TEST(chunked_pieces_are_byte_exact),
		E2E_TEST(nginx_and_curl),
		E2E_TEST(intercepted_https),
		E2E_TEST(served_pieces_are_not_wasted),
	};

	return E2E_RUN("split", tests);
}
