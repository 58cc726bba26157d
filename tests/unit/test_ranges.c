/*
 * Byte ranges for read-ahead: the Range a request asks for and the
 * Content-Range a 206 answers, as tables; whether a 206 is the piece asked
 * for; the next piece to fetch (chunk lengths as yt-dlp varies them, the
 * cap, the end of the object, the edges of 64 bits); the identity of an
 * object across pieces; and who may be served a response held for later.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/ranges.h"

#include "parsed_head.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define MAX UINT64_MAX

#define GET_LINE "GET http://example.com/video.mp4 HTTP/1.1\r\nHost: example.com\r\n"
#define R206 "HTTP/1.1 206 Partial Content\r\n"
#define R200 "HTTP/1.1 200 OK\r\n"

static void
parse_request(struct parsed *ps, const char *fields)
{
	parse(ps, HTTP_REQUEST, GET_LINE, fields);
}

/* ---- Range ---------------------------------------------------------------- */

struct range_case {
	const char *fields;
	enum range_form form;
	uint64_t first, last;
};

static const struct range_case range_cases[] = {
	{"", RANGE_NONE, 0, 0},
	{"Range: bytes=0-0\r\n", RANGE_SINGLE, 0, 0},
	{"Range: bytes=0-499\r\n", RANGE_SINGLE, 0, 499},
	{"Range: bytes=500-999\r\n", RANGE_SINGLE, 500, 999},
	{"Range: bytes=5-5\r\n", RANGE_SINGLE, 5, 5},
	{"Range: bytes=007-010\r\n", RANGE_SINGLE, 7, 10},
	{"range: bytes=1-2\r\n", RANGE_SINGLE, 1, 2},
	{"Range: BYTES=0-9\r\n", RANGE_SINGLE, 0, 9},
	{"Range: Bytes=0-9\r\n", RANGE_SINGLE, 0, 9},
	{"Range: bytes=100-\r\n", RANGE_OPEN, 100, MAX},
	{"Range: bytes=0-\r\n", RANGE_OPEN, 0, MAX},
	{"Range: bytes=18446744073709551615-\r\n", RANGE_OPEN, MAX, MAX},
	{"Range: bytes=0-18446744073709551615\r\n", RANGE_SINGLE, 0, MAX},
	/* Whitespace around the value is not part of it. */
	{"Range:    bytes=0-9   \r\n", RANGE_SINGLE, 0, 9},
	{"Range:\tbytes=0-9\t\r\n", RANGE_SINGLE, 0, 9},
	/* Whitespace inside it is not in the grammar. */
	{"Range: bytes = 0-9\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes= 0-9\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0 -9\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0- 9\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=5-4\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=-500\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-1,5-6\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-1, 5-6\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-5,\r\n", RANGE_OTHER, 0, 0},
	{"Range: items=0-5\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytesx=0-5\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=-\r\n", RANGE_OTHER, 0, 0},
	{"Range: \r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-9x\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0x10-20\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=+1-2\r\n", RANGE_OTHER, 0, 0},
	/* One past 64 bits, and far past. */
	{"Range: bytes=18446744073709551616-\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-18446744073709551616\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-99999999999999999999999999999999\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=99999999999999999999999999999999-\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-9\r\nRange: bytes=0-9\r\n", RANGE_OTHER, 0, 0},
	{"Range: bytes=0-9\r\nRange: bytes=10-19\r\n", RANGE_OTHER, 0, 0},
	{"If-Range: \"abc\"\r\nX-Range: bytes=0-9\r\n", RANGE_NONE, 0, 0},
};

static void
test_requested(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(range_cases); i++) {
		const struct range_case *c = &range_cases[i];
		struct parsed ps;
		struct byte_range r = {42, 43};
		enum range_form form;

		parse_request(&ps, c->fields);
		form = ranges_requested(&ps.head, ps.text, &r);
		if (form != c->form)
			fail_msg("row %zu (%s): form %d, expected %d", i, c->fields, form, c->form);
		/* Only a range that was understood is written. */
		if (form == RANGE_SINGLE || form == RANGE_OPEN) {
			if (r.first != c->first || r.last != c->last)
				fail_msg("row %zu (%s): %ju-%ju, expected %ju-%ju", i, c->fields,
				         (uintmax_t)r.first, (uintmax_t)r.last,
				         (uintmax_t)c->first, (uintmax_t)c->last);
		} else if (r.first != 42 || r.last != 43) {
			fail_msg("row %zu (%s): range written", i, c->fields);
		}
	}
}

/* ---- Content-Range -------------------------------------------------------- */

struct answer_case {
	const char *fields;
	bool ok;
	uint64_t first, last, complete;
};

static const struct answer_case answer_cases[] = {
	{"Content-Range: bytes 0-499/1234\r\n", true, 0, 499, 1234},
	{"Content-Range: bytes 0-0/1\r\n", true, 0, 0, 1},
	{"Content-Range: bytes 1233-1233/1234\r\n", true, 1233, 1233, 1234},
	{"content-range: BYTES 0-9/10\r\n", true, 0, 9, 10},
	{"Content-Range:   bytes 0-9/10  \r\n", true, 0, 9, 10},
	{"Content-Range: bytes 0-18446744073709551614/18446744073709551615\r\n", true, 0,
	 MAX - 1, MAX},
	{"", false, 0, 0, 0},
	{"Content-Range: bytes 0-499/*\r\n", false, 0, 0, 0},
	{"Content-Range: bytes */1234\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-9/10\r\nContent-Range: bytes 0-9/10\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 500-499/1234\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-1234/1234\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-0/0\r\n", false, 0, 0, 0},
	{"Content-Range: bytes  0-9/10\r\n", false, 0, 0, 0},
	{"Content-Range: bytes=0-9/10\r\n", false, 0, 0, 0},
	{"Content-Range: items 0-9/10\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-9 /10\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-9/10x\r\n", false, 0, 0, 0},
	{"Content-Range: bytes -9/10\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-9\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-9/18446744073709551616\r\n", false, 0, 0, 0},
	{"Content-Range: bytes 0-99999999999999999999999/99999999999999999999999\r\n", false,
	 0, 0, 0},
};

static void
test_answered(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(answer_cases); i++) {
		const struct answer_case *c = &answer_cases[i];
		struct parsed ps;
		struct byte_range got = {42, 43};
		uint64_t complete = 44;
		bool ok;

		parse(&ps, HTTP_RESPONSE, R206, c->fields);
		ok = ranges_answered(&ps.head, ps.text, &got, &complete);
		if (ok != c->ok)
			fail_msg("row %zu (%s): %d, expected %d", i, c->fields, ok, c->ok);
		if (ok && (got.first != c->first || got.last != c->last || complete != c->complete))
			fail_msg("row %zu (%s): %ju-%ju/%ju", i, c->fields, (uintmax_t)got.first,
			         (uintmax_t)got.last, (uintmax_t)complete);
		if (!ok && (got.first != 42 || got.last != 43 || complete != 44))
			fail_msg("row %zu (%s): written though false", i, c->fields);
	}
}

/* ---- a piece that fits ---------------------------------------------------- */

struct fit_case {
	const char *name;
	struct byte_range asked;
	const char *head;
	bool fits;
	uint64_t complete;
};

static const struct fit_case fit_cases[] = {
	{"exactly what was asked", {0, 499},
	 R206 "Content-Range: bytes 0-499/1000\r\nContent-Length: 500\r\n", true, 1000},
	{"one byte", {0, 0}, R206 "Content-Range: bytes 0-0/1\r\nContent-Length: 1\r\n", true, 1},
	{"the whole object as a range", {0, 999},
	 R206 "Content-Range: bytes 0-999/1000\r\nContent-Length: 1000\r\n", true, 1000},
	{"open request answered to the end", {500, MAX},
	 R206 "Content-Range: bytes 500-999/1000\r\nContent-Length: 500\r\n", true, 1000},
	{"request past the end: the short last piece", {900, 1999},
	 R206 "Content-Range: bytes 900-999/1000\r\nContent-Length: 100\r\n", true, 1000},
	{"chunked, no Content-Length", {0, 499},
	 R206 "Content-Range: bytes 0-499/1000\r\nTransfer-Encoding: chunked\r\n", true, 1000},
	{"wrong start", {0, 499},
	 R206 "Content-Range: bytes 1-500/1000\r\nContent-Length: 500\r\n", false, 0},
	{"shorter than asked", {0, 499},
	 R206 "Content-Range: bytes 0-498/1000\r\nContent-Length: 499\r\n", false, 0},
	{"longer than asked", {0, 499},
	 R206 "Content-Range: bytes 0-599/1000\r\nContent-Length: 600\r\n", false, 0},
	{"open request stopped short of the end", {500, MAX},
	 R206 "Content-Range: bytes 500-998/1000\r\nContent-Length: 499\r\n", false, 0},
	{"Content-Length disagrees", {0, 499},
	 R206 "Content-Range: bytes 0-499/1000\r\nContent-Length: 499\r\n", false, 0},
	{"200 instead of 206", {0, 499}, R200 "Content-Length: 1000\r\n", false, 0},
	{"200 with a Content-Range", {0, 499},
	 R200 "Content-Range: bytes 0-499/1000\r\nContent-Length: 500\r\n", false, 0},
	{"unknown complete length", {0, 499},
	 R206 "Content-Range: bytes 0-499/*\r\nContent-Length: 500\r\n", false, 0},
	{"multipart/byteranges", {0, 499},
	 R206 "Content-Type: multipart/byteranges; boundary=x\r\nContent-Length: 700\r\n", false,
	 0},
	{"416", {2000, 2999},
	 "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */1000\r\n"
	 "Content-Length: 0\r\n",
	 false, 0},
};

static void
test_piece_fits(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(fit_cases); i++) {
		const struct fit_case *c = &fit_cases[i];
		struct parsed ps;
		uint64_t complete = 0;
		bool fits;

		parse(&ps, HTTP_RESPONSE, c->head, "");
		fits = ranges_piece_fits(&c->asked, &ps.head, ps.text, &complete);
		if (fits != c->fits)
			fail_msg("row %zu (%s): %d, expected %d", i, c->name, fits, c->fits);
		if (complete != c->complete)
			fail_msg("row %zu (%s): complete %ju", i, c->name, (uintmax_t)complete);
	}
}

/* ---- the next piece ------------------------------------------------------- */

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
/* yt-dlp's default chunk (10 MiB) and the shortest piece it asks for, 0.95 of it. */
#define CHUNK (10 * MIB)
#define CHUNK_MIN UINT64_C(9961472)

struct next_case {
	const char *name;
	struct byte_range answered;
	uint64_t complete, largest_seen, cap;
	bool ok;
	struct byte_range next;
};

static const struct next_case next_cases[] = {
	/* 0.95 C over 0.95 is C again: every next request fits in what is fetched. */
	{"yt-dlp, shortest piece", {0, CHUNK_MIN - 1}, GIB, CHUNK_MIN, 64 * MIB, true,
	 {CHUNK_MIN, CHUNK_MIN + CHUNK - 1}},
	{"yt-dlp, a piece between", {0, 9999999}, GIB, 10000000, 64 * MIB, true,
	 {10000000, 10000000 + 10526316 - 1}},
	{"yt-dlp, longest piece", {0, CHUNK - 1}, GIB, CHUNK, 64 * MIB, true,
	 {CHUNK, CHUNK + 11037643 - 1}},
	{"larger seen before", {20 * MIB, 20 * MIB + CHUNK_MIN - 1}, GIB, CHUNK, 64 * MIB, true,
	 {20 * MIB + CHUNK_MIN, 20 * MIB + CHUNK_MIN + 11037643 - 1}},
	{"the answered piece is longer than any seen", {0, 999}, GIB, 100, 64 * MIB, true,
	 {1000, 1999}},
	{"nothing seen yet", {0, 999}, GIB, 0, 64 * MIB, true, {1000, 1999}},
	{"rounded up", {0, 0}, GIB, 1, 64 * MIB, true, {1, 2}},
	{"the cap", {0, CHUNK - 1}, GIB, CHUNK, 4 * MIB, true, {CHUNK, CHUNK + 4 * MIB - 1}},
	{"the end of the object", {0, CHUNK - 1}, 15 * MIB, CHUNK, 64 * MIB, true,
	 {CHUNK, 15 * MIB - 1}},
	{"a last piece of one byte", {0, 998}, 1000, 999, 64 * MIB, true, {999, 999}},
	{"answered up to the end", {0, 999}, 1000, 1000, 64 * MIB, false, {0, 0}},
	{"answered past the end", {0, 1999}, 1000, 1000, 64 * MIB, false, {0, 0}},
	{"empty object", {0, 0}, 0, 1, 64 * MIB, false, {0, 0}},
	{"cap 0", {0, 999}, GIB, 1000, 0, false, {0, 0}},
	{"not a range", {10, 9}, GIB, 1000, 64 * MIB, false, {0, 0}},
	{"answered up to 2^64 - 1", {0, MAX}, MAX, 1000, 64 * MIB, false, {0, 0}},
	/* Where largest_seen * 100 would wrap: ceil(2e17 * 20 / 19). */
	{"largest seen * 100 past 64 bits", {0, 0}, MAX, UINT64_C(200000000000000000), MAX, true,
	 {1, UINT64_C(210526315789473685)}},
	{"everything at 2^64 - 1", {0, 0}, MAX, MAX, MAX, true, {1, MAX - 1}},
	{"largest seen saturates, the cap decides", {0, 0}, MAX, MAX, 1000, true, {1, 1000}},
	{"first + length past 64 bits", {MAX - 10, MAX - 6}, MAX, 100, 1000, true,
	 {MAX - 5, MAX - 1}},
};

static void
test_next(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(next_cases); i++) {
		const struct next_case *c = &next_cases[i];
		struct byte_range next = {0, 0};
		bool ok;

		ok = ranges_next(&c->answered, c->complete, c->largest_seen, c->cap, &next);
		if (ok != c->ok)
			fail_msg("row %zu (%s): %d, expected %d", i, c->name, ok, c->ok);
		if (ok && (next.first != c->next.first || next.last != c->next.last))
			fail_msg("row %zu (%s): %ju-%ju, expected %ju-%ju", i, c->name,
			         (uintmax_t)next.first, (uintmax_t)next.last,
			         (uintmax_t)c->next.first, (uintmax_t)c->next.last);
	}
}

/*
 * Whatever length a yt-dlp-like downloader picks next (0.95 C to C), it
 * lies inside the piece fetched after the shortest or longest one it
 * asked for first.
 */
static void
test_next_covers_chunk(void **state)
{
	(void)state;
	for (uint64_t seen = CHUNK_MIN; seen <= CHUNK; seen += 4099) {
		struct byte_range answered = {0, seen - 1}, next;

		assert_true(ranges_next(&answered, GIB, seen, 64 * MIB, &next));
		assert_int_equal(next.first, seen);
		assert_true(next.last - next.first + 1 >= CHUNK);
	}
}

/* ---- one object ----------------------------------------------------------- */

static void
test_identity(void **state)
{
	struct parsed ps;
	struct object_identity id;

	(void)state;
	parse(&ps, HTTP_RESPONSE, R206,
	      "ETag:  \"v1\"  \r\nLast-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
	      "Content-Range: bytes 0-9/1000\r\nContent-Length: 10\r\n");
	assert_true(ranges_identity(&ps.head, ps.text, &id));
	assert_int_equal(id.complete, 1000);
	assert_int_equal(id.etag.len, 4);
	assert_memory_equal(ps.text + id.etag.off, "\"v1\"", 4);
	assert_int_equal(id.last_modified.len, strlen("Tue, 01 Apr 2025 10:00:00 GMT"));
	assert_memory_equal(ps.text + id.last_modified.off, "Tue, 01 Apr", 11);

	parse(&ps, HTTP_RESPONSE, R200, "ETag: \"v1\"\r\nContent-Length: 1000\r\n");
	assert_true(ranges_identity(&ps.head, ps.text, &id));
	assert_int_equal(id.complete, 1000);
	assert_int_equal(id.last_modified.len, 0);

	/* No length to go by, two of a singleton, or not an answer to go by at all. */
	static const char *const unknown[] = {
		R206 "ETag: \"v1\"\r\nContent-Range: bytes 0-9/*\r\n",
		R206 "ETag: \"v1\"\r\nContent-Length: 10\r\n",
		R200 "ETag: \"v1\"\r\nTransfer-Encoding: chunked\r\n",
		R200 "ETag: \"v1\"\r\nContent-Length: 0\r\n",
		R206 "ETag: \"v1\"\r\nETag: \"v2\"\r\nContent-Range: bytes 0-9/1000\r\n",
		R206 "Last-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
		     "Last-Modified: Tue, 01 Apr 2025 10:00:01 GMT\r\n"
		     "Content-Range: bytes 0-9/1000\r\n",
		"HTTP/1.1 404 Not Found\r\nETag: \"v1\"\r\nContent-Length: 1000\r\n",
	};
	for (size_t i = 0; i < ARRAY_LEN(unknown); i++) {
		parse(&ps, HTTP_RESPONSE, unknown[i], "");
		if (ranges_identity(&ps.head, ps.text, &id))
			fail_msg("row %zu: identity from\n%s", i, unknown[i]);
		assert_int_equal(id.complete, 0);
		assert_int_equal(id.etag.len, 0);
	}
}

#define LM1 "Last-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
#define LM2 "Last-Modified: Tue, 01 Apr 2025 10:00:01 GMT\r\n"
#define CR(n) "Content-Range: bytes 0-9/" #n "\r\n"

struct same_object_case {
	const char *name;
	const char *a, *b;  /* response fields */
	bool same;
};

static const struct same_object_case same_object_cases[] = {
	{"same strong ETag", "ETag: \"v1\"\r\n" CR(1000), "ETag: \"v1\"\r\n" CR(1000), true},
	{"same ETag and Last-Modified", "ETag: \"v1\"\r\n" LM1 CR(1000),
	 LM1 "ETag: \"v1\"\r\n" CR(1000), true},
	{"strong ETags differ", "ETag: \"v1\"\r\n" CR(1000), "ETag: \"v2\"\r\n" CR(1000), false},
	{"ETag differs in case only", "ETag: \"abc\"\r\n" CR(1000), "ETag: \"ABC\"\r\n" CR(1000),
	 false},
	{"same weak ETag", "ETag: W/\"v1\"\r\n" CR(1000), "ETag: W/\"v1\"\r\n" CR(1000), false},
	{"strong and weak", "ETag: \"v1\"\r\n" CR(1000), "ETag: W/\"v1\"\r\n" CR(1000), false},
	{"weak and strong", "ETag: W/\"v1\"\r\n" CR(1000), "ETag: \"v1\"\r\n" CR(1000), false},
	{"ETag on one side only", "ETag: \"v1\"\r\n" CR(1000), CR(1000), false},
	{"ETag on the other side only", CR(1000), "ETag: \"v1\"\r\n" CR(1000), false},
	{"only Last-Modified, the same", LM1 CR(1000), LM1 CR(1000), true},
	{"only Last-Modified, differs", LM1 CR(1000), LM2 CR(1000), false},
	{"Last-Modified on one side only", LM1 CR(1000), CR(1000), false},
	{"same ETag, Last-Modified differs", "ETag: \"v1\"\r\n" LM1 CR(1000),
	 "ETag: \"v1\"\r\n" LM2 CR(1000), false},
	{"only the length", CR(1000), CR(1000), true},
	{"length differs", "ETag: \"v1\"\r\n" CR(1000), "ETag: \"v1\"\r\n" CR(1001), false},
};

static void
test_same_object(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(same_object_cases); i++) {
		const struct same_object_case *c = &same_object_cases[i];
		struct parsed pa, pb;
		struct object_identity a, b;
		bool same;

		parse(&pa, HTTP_RESPONSE, R206, c->a);
		parse(&pb, HTTP_RESPONSE, R206, c->b);
		assert_true(ranges_identity(&pa.head, pa.text, &a));
		assert_true(ranges_identity(&pb.head, pb.text, &b));
		same = ranges_same_object(&a, pa.text, &b, pb.text);
		if (same != c->same)
			fail_msg("row %zu (%s): %d, expected %d", i, c->name, same, c->same);
	}
}

/* A whole 200 and a piece of it are one object; unknown lengths are never one. */
static void
test_same_object_across_statuses(void **state)
{
	struct parsed pa, pb;
	struct object_identity a, b;
	const struct object_identity unknown = {{0, 0}, {0, 0}, 0};

	(void)state;
	parse(&pa, HTTP_RESPONSE, R200, "ETag: \"v1\"\r\nContent-Length: 1000\r\n");
	parse(&pb, HTTP_RESPONSE, R206, "ETag: \"v1\"\r\n" CR(1000));
	assert_true(ranges_identity(&pa.head, pa.text, &a));
	assert_true(ranges_identity(&pb.head, pb.text, &b));
	assert_true(ranges_same_object(&a, pa.text, &b, pb.text));
	assert_true(ranges_same_object(&b, pb.text, &a, pa.text));
	assert_false(ranges_same_object(&unknown, "", &unknown, ""));
}

/* ---- privacy -------------------------------------------------------------- */

struct private_case {
	const char *fields;
	bool private;
};

static const struct private_case private_cases[] = {
	{"", false},
	{"Cache-Control: public, max-age=3600\r\n", false},
	{"Cache-Control: no-cache\r\n", false},
	{"Cache-Control: max-age=60, must-revalidate\r\n", false},
	{"Cache-Control: privateer, no-storey\r\n", false},
	{"Cache-Control: no-cache=\"private, no-store\"\r\n", false},
	{"Cache-Control: ext=\"a \\\" private\", max-age=1\r\n", false},
	{"Vary: Accept-Encoding\r\n", false},
	{"Vary: Accept-Encoding, User-Agent\r\n", false},
	{"Cache-Control: no-store\r\n", true},
	{"Cache-Control: private\r\n", true},
	{"Cache-Control: PRIVATE\r\n", true},
	{"Cache-Control: No-Store\r\n", true},
	{"Cache-Control: max-age=60, private\r\n", true},
	{"Cache-Control: private=\"Set-Cookie, X-User\", max-age=60\r\n", true},
	{"Cache-Control: max-age=60,private=\"Set-Cookie\"\r\n", true},
	{"Cache-Control: public\r\nCache-Control: no-store\r\n", true},
	{"Cache-Control: max-age=\"60\r\n", true},
	{"Cache-Control: max-age=60 junk\r\n", true},
	{"Cache-Control: =60\r\n", true},
	{"Vary: *\r\n", true},
	{"Vary: Accept-Encoding, *\r\n", true},
	{"Vary: Accept-Encoding\r\nVary: *\r\n", true},
};

static void
test_private(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(private_cases); i++) {
		const struct private_case *c = &private_cases[i];
		struct parsed ps;
		bool private;

		parse(&ps, HTTP_RESPONSE, R206, c->fields);
		private = ranges_response_private(&ps.head, ps.text);
		if (private != c->private)
			fail_msg("row %zu (%s): %d, expected %d", i, c->fields, private, c->private);
	}
}

struct requester_case {
	const char *name;
	const char *a, *b;  /* request fields */
	const char *resp;   /* response fields */
	bool same;
};

static const struct requester_case requester_cases[] = {
	{"neither has credentials", "", "", "", true},
	{"other fields differ without Vary", "User-Agent: a\r\n", "User-Agent: b\r\n", "", true},
	{"same Cookie", "Cookie: s=1\r\n", "Cookie: s=1\r\n", "", true},
	{"Cookie differs", "Cookie: s=1\r\n", "Cookie: s=2\r\n", "", false},
	{"Cookie on one side", "Cookie: s=1\r\n", "", "", false},
	{"Cookie on the other side", "", "Cookie: s=1\r\n", "", false},
	{"an empty Cookie is not an absent one", "Cookie:\r\n", "", "", false},
	{"same Authorization", "Authorization: Bearer x\r\n", "Authorization: Bearer x\r\n", "",
	 true},
	{"Authorization differs", "Authorization: Bearer x\r\n", "Authorization: Bearer y\r\n",
	 "", false},
	{"Authorization absent on one side", "Authorization: Bearer x\r\n", "", "", false},
	{"Authorization name in any case", "authorization: Bearer x\r\n",
	 "AUTHORIZATION: Bearer x\r\n", "", true},
	{"Proxy-Authorization is not compared", "Proxy-Authorization: Basic YTpi\r\n",
	 "Proxy-Authorization: Basic Yzpk\r\n", "", true},
	{"not even when Vary names it", "Proxy-Authorization: Basic YTpi\r\n", "",
	 "Vary: Proxy-Authorization\r\n", true},
	{"several Cookie fields in the same order", "Cookie: a=1\r\nCookie: b=2\r\n",
	 "Cookie: a=1\r\nCookie: b=2\r\n", "", true},
	{"several Cookie fields in another order", "Cookie: a=1\r\nCookie: b=2\r\n",
	 "Cookie: b=2\r\nCookie: a=1\r\n", "", false},
	{"one Cookie field more", "Cookie: a=1\r\n", "Cookie: a=1\r\nCookie: b=2\r\n", "", false},
	{"whitespace around a value", "Cookie:   a=1  \r\n", "Cookie: a=1\r\n", "", true},
	{"whitespace inside a value", "Cookie: a=1;  b=2\r\n", "Cookie: a=1; b=2\r\n", "", false},
	{"Vary'd field the same", "Accept-Encoding: gzip\r\n", "Accept-Encoding: gzip\r\n",
	 "Vary: Accept-Encoding\r\n", true},
	{"Vary'd field differs", "Accept-Encoding: gzip\r\n", "Accept-Encoding: br\r\n",
	 "Vary: Accept-Encoding\r\n", false},
	{"Vary'd field absent on one side", "Accept-Encoding: gzip\r\n", "",
	 "Vary: Accept-Encoding\r\n", false},
	{"Vary'd field absent on both", "", "", "Vary: Accept-Encoding\r\n", true},
	{"Vary names in any case", "Accept-Encoding: gzip\r\n", "accept-encoding: br\r\n",
	 "Vary: ACCEPT-ENCODING\r\n", false},
	{"the second name of a Vary list", "Accept-Encoding: gzip\r\nX-Tier: 1\r\n",
	 "Accept-Encoding: gzip\r\nX-Tier: 2\r\n", "Vary: Accept-Encoding, X-Tier\r\n", false},
	{"a second Vary field", "Accept-Encoding: gzip\r\nX-Tier: 1\r\n",
	 "Accept-Encoding: gzip\r\nX-Tier: 2\r\n", "Vary: Accept-Encoding\r\nVary: X-Tier\r\n",
	 false},
	{"empty Vary elements", "Accept-Encoding: gzip\r\n", "Accept-Encoding: gzip\r\n",
	 "Vary: , ,Accept-Encoding ,\r\n", true},
	{"If-Range differs", "If-Range: \"a\"\r\n", "If-Range: \"b\"\r\n", "", false},
	{"If-Range on one side", "", "If-Range: \"a\"\r\n", "", false},
	{"the same If-Range", "If-Range: \"a\"\r\n", "If-Range: \"a\"\r\n", "", true},
	{"If-None-Match on one side", "", "If-None-Match: \"a\"\r\n", "", false},
	{"If-Match differs", "If-Match: \"a\"\r\n", "If-Match: \"b\"\r\n", "", false},
	{"If-Modified-Since on one side", "",
	 "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", "", false},
	{"If-Unmodified-Since differs", "If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
	 "If-Unmodified-Since: Mon, 07 Nov 1994 08:49:37 GMT\r\n", "", false},
	{"Vary: *", "", "", "Vary: *\r\n", false},
	{"Vary: * among names", "Accept: a\r\n", "Accept: a\r\n", "Vary: Accept, *\r\n", false},
};

static void
test_same_requester(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(requester_cases); i++) {
		const struct requester_case *c = &requester_cases[i];
		struct parsed pa, pb, pr;
		bool same;

		parse_request(&pa, c->a);
		parse_request(&pb, c->b);
		parse(&pr, HTTP_RESPONSE, R206, c->resp);
		same = ranges_same_requester(&pa.head, pa.text, &pb.head, pb.text, &pr.head,
		                             pr.text);
		if (same != c->same)
			fail_msg("row %zu (%s): %d, expected %d", i, c->name, same, c->same);
		/* The same question asked the other way round has the same answer. */
		same = ranges_same_requester(&pb.head, pb.text, &pa.head, pa.text, &pr.head,
		                             pr.text);
		if (same != c->same)
			fail_msg("row %zu (%s), reversed: %d", i, c->name, same);
	}
}

/*
 * The If-Range validator of a response (RFC 9110 13.1.5, 8.8.2.2): a strong
 * ETag; with no ETag, a Last-Modified at least a second before Date; else
 * none. A table: fields, and the validator expected ("" for none).
 */
static void
test_if_range(void **state)
{
	static const struct {
		const char *fields;
		const char *want;
	} rows[] = {
		{"ETag: \"v1\"\r\n", "\"v1\""},
		{"ETag: W/\"v1\"\r\n", ""},
		{"ETag: W/\"v1\"\r\nLast-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
		 "Date: Wed, 02 Apr 2025 10:00:00 GMT\r\n", ""},
		{"ETag: \"v1\"\r\nETag: \"v2\"\r\n", ""},
		{"ETag: v1\r\n", ""},
		{"Last-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
		 "Date: Tue, 01 Apr 2025 10:00:01 GMT\r\n", "Tue, 01 Apr 2025 10:00:00 GMT"},
		{"Last-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
		 "Date: Tue, 01 Apr 2025 10:00:00 GMT\r\n", ""},
		{"Last-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n"
		 "Date: Mon, 31 Mar 2025 23:59:59 GMT\r\n", ""},
		{"Last-Modified: Tue, 01 Apr 2025 10:00:00 GMT\r\n", ""},
		{"Last-Modified: Tuesday, 01-Apr-25 10:00:00 GMT\r\n"
		 "Date: Wed, 02 Apr 2025 10:00:00 GMT\r\n", ""},
		{"Last-Modified: Tue, 31 Dec 2024 23:59:59 GMT\r\n"
		 "Date: Wed, 01 Jan 2025 00:00:00 GMT\r\n", "Tue, 31 Dec 2024 23:59:59 GMT"},
		{"", ""},
	};
	struct parsed ps;
	struct http_span v;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bool got;

		parse(&ps, HTTP_RESPONSE, R206, rows[i].fields);
		got = ranges_if_range(&ps.head, ps.text, &v);
		if (got != (rows[i].want[0] != '\0') ||
		    (got && (v.len != strlen(rows[i].want) ||
		             memcmp(ps.text + v.off, rows[i].want, v.len) != 0)))
			fail_msg("row %zu: %s -> %s, expected '%s'", i, rows[i].fields,
			         got ? "a validator" : "none", rows[i].want);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requested),
		cmocka_unit_test(test_answered),
		cmocka_unit_test(test_piece_fits),
		cmocka_unit_test(test_next),
		cmocka_unit_test(test_next_covers_chunk),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_same_object),
		cmocka_unit_test(test_same_object_across_statuses),
		cmocka_unit_test(test_private),
		cmocka_unit_test(test_same_requester),
		cmocka_unit_test(test_if_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
