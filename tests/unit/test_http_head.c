/*
 * Message heads: parsing through llhttp (whole and in pieces), the limits,
 * and the rewriting a forward proxy owes both directions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/http.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_HEAD 32768
#define MAX_URL 8192

struct parsed {
	struct http_parser parser;
	struct http_head head;
	enum http_parse_result result;
	const char *base;
};

static void
parse_with_limits(struct parsed *ps, llhttp_type_t type, const char *msg, size_t len,
                  size_t max_head, size_t max_url)
{
	http_parser_init(&ps->parser, type, max_head, max_url);
	http_parser_start(&ps->parser, &ps->head);
	ps->base = msg;
	ps->result = http_parse_head(&ps->parser, msg, len);
}

static void
parse(struct parsed *ps, llhttp_type_t type, const char *msg)
{
	parse_with_limits(ps, type, msg, strlen(msg), MAX_HEAD, MAX_URL);
}

/* Parses msg and insists that its head is complete. */
static void
parse_ok(struct parsed *ps, llhttp_type_t type, const char *msg)
{
	parse(ps, type, msg);
	if (ps->result != HTTP_PARSE_DONE)
		fail_msg("head not parsed (result %d, %s):\n%s", ps->result,
		         http_parser_error_text(&ps->parser), msg);
}

static void
assert_span(const char *base, struct http_span s, const char *expect)
{
	if (s.len != strlen(expect) || memcmp(base + s.off, expect, s.len) != 0)
		fail_msg("span \"%.*s\", expected \"%s\"", (int)s.len, base + s.off, expect);
}

static void
assert_field(const struct parsed *ps, unsigned i, const char *name, const char *value)
{
	assert_true(i < ps->head.nfields);
	assert_span(ps->base, ps->head.fields[i].name, name);
	assert_span(ps->base, ps->head.fields[i].value, value);
}

/* ---- parsing -------------------------------------------------------------- */

static void
test_request_whole(void **state)
{
	static const char msg[] = "GET http://example.com/a?b=c HTTP/1.1\r\n"
	                          "Host: example.com\r\n"
	                          "User-Agent: unit/1.0\r\n"
	                          "Accept:   */*\r\n"
	                          "X-Spaces: a  b\tc\r\n"
	                          "\r\n"
	                          "BODY BYTES";
	struct parsed ps;

	(void)state;
	parse_ok(&ps, HTTP_REQUEST, msg);
	assert_int_equal(ps.head.head_len, strlen(msg) - strlen("BODY BYTES"));
	assert_span(msg, ps.head.url, "http://example.com/a?b=c");
	assert_int_equal(ps.head.method, HTTP_GET);
	assert_int_equal(ps.head.major, 1);
	assert_int_equal(ps.head.minor, 1);
	assert_int_equal(ps.head.nfields, 4);
	assert_field(&ps, 0, "Host", "example.com");
	assert_field(&ps, 1, "User-Agent", "unit/1.0");
	assert_field(&ps, 2, "Accept", "*/*");
	assert_field(&ps, 3, "X-Spaces", "a  b\tc");
	assert_int_equal(ps.head.content_length, 0);
	assert_int_equal(ps.head.llhttp_flags & (F_CHUNKED | F_CONTENT_LENGTH), 0);
	/* Once done, more bytes change nothing. */
	assert_int_equal(http_parse_head(&ps.parser, msg, sizeof(msg) - 1), HTTP_PARSE_DONE);
	assert_int_equal(ps.head.head_len, strlen(msg) - strlen("BODY BYTES"));
}

static void
test_response_whole(void **state)
{
	static const char msg[] = "HTTP/1.1 404 Not Found Here\r\n"
	                          "Content-Length: 5\r\n"
	                          "X-A: b\r\n"
	                          "\r\n"
	                          "hello";
	struct parsed ps;

	(void)state;
	parse_ok(&ps, HTTP_RESPONSE, msg);
	assert_int_equal(ps.head.head_len, strlen(msg) - 5);
	assert_int_equal(ps.head.status, 404);
	assert_span(msg, ps.head.reason, "Not Found Here");
	assert_int_equal(ps.head.major, 1);
	assert_int_equal(ps.head.minor, 1);
	assert_int_equal(ps.head.content_length, 5);
	assert_true(ps.head.llhttp_flags & F_CONTENT_LENGTH);
	assert_int_equal(ps.head.nfields, 2);
	assert_field(&ps, 0, "Content-Length", "5");
	assert_field(&ps, 1, "X-A", "b");
}

static void
test_incomplete_head_wants_more(void **state)
{
	static const char msg[] = "GET http://h/ HTTP/1.1\r\nHost: h\r\n";
	struct parsed ps;

	(void)state;
	parse(&ps, HTTP_REQUEST, msg);
	assert_int_equal(ps.result, HTTP_PARSE_MORE);
	assert_int_equal(ps.parser.error, HTTP_HEAD_OK);
	parse_with_limits(&ps, HTTP_REQUEST, msg, 0, MAX_HEAD, MAX_URL);
	assert_int_equal(ps.result, HTTP_PARSE_MORE);
}

static const char *const incremental_heads[] = {
	"GET http://example.com:8080/some/long/path?with=query&and=more HTTP/1.1\r\n"
	"Host: example.com:8080\r\n"
	"X-Empty:\r\n"
	"User-Agent: unit/1.0 (pieces)\r\n"
	"X-Empty-Too: \r\n"
	"Accept-Encoding: gzip, deflate\r\n"
	"Cookie: a=1; b=2; c=3\r\n"
	"\r\n"
	"trailing body",
	"HTTP/1.1 301 Moved Permanently Elsewhere\r\n"
	"Location: http://example.com/\r\n"
	"Content-Length: 0\r\n"
	"\r\n",
	"POST http://h/upload HTTP/1.1\r\n"
	"Content-Length: 12\r\n"
	"Content-Type: application/octet-stream\r\n"
	"\r\n"
	"0123456789ab",
	"HTTP/1.1 200 OK\r\n"
	"Transfer-Encoding: chunked\r\n"
	"Keep-Alive: timeout=5, max=100\r\n"
	"\r\n"
	"5\r\nhello\r\n0\r\n\r\n",
	"GET http://h/ HTTP/1.0\r\n"
	"Connection: keep-alive\r\n"
	"\r\n",
};

static void
assert_same_head(const struct http_head *a, const struct http_head *b)
{
	assert_int_equal(a->head_len, b->head_len);
	assert_int_equal(a->url.off, b->url.off);
	assert_int_equal(a->url.len, b->url.len);
	assert_int_equal(a->reason.off, b->reason.off);
	assert_int_equal(a->reason.len, b->reason.len);
	assert_int_equal(a->major, b->major);
	assert_int_equal(a->minor, b->minor);
	assert_int_equal(a->method, b->method);
	assert_int_equal(a->status, b->status);
	assert_int_equal(a->llhttp_flags, b->llhttp_flags);
	assert_int_equal(a->content_length, b->content_length);
	assert_int_equal(a->nfields, b->nfields);
	for (unsigned i = 0; i < a->nfields; i++) {
		assert_int_equal(a->fields[i].name.off, b->fields[i].name.off);
		assert_int_equal(a->fields[i].name.len, b->fields[i].name.len);
		assert_int_equal(a->fields[i].value.off, b->fields[i].value.off);
		assert_int_equal(a->fields[i].value.len, b->fields[i].value.len);
	}
}

static void
test_incremental_equals_whole(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(incremental_heads); i++) {
		const char *msg = incremental_heads[i];
		llhttp_type_t type = strncmp(msg, "HTTP/", 5) == 0 ? HTTP_RESPONSE : HTTP_REQUEST;
		size_t len = strlen(msg);
		struct parsed whole, inc;
		size_t avail;

		parse_ok(&whole, type, msg);
		http_parser_init(&inc.parser, type, MAX_HEAD, MAX_URL);
		http_parser_start(&inc.parser, &inc.head);
		inc.base = msg;
		for (avail = 1; avail <= len; avail++) {
			enum http_parse_result r = http_parse_head(&inc.parser, msg, avail);

			if (r == HTTP_PARSE_DONE)
				break;
			if (r != HTTP_PARSE_MORE)
				fail_msg("head %zu: result %d at %zu bytes (%s)", i, r, avail,
				         http_parser_error_text(&inc.parser));
		}
		/* Done exactly when the empty line is in, not a byte later. */
		assert_int_equal(avail, whole.head.head_len);
		assert_same_head(&whole.head, &inc.head);
	}
}

static void
test_incremental_fields(void **state)
{
	const char *msg = incremental_heads[0];
	size_t len = strlen(msg);
	struct parsed ps;
	size_t avail;

	(void)state;
	http_parser_init(&ps.parser, HTTP_REQUEST, MAX_HEAD, MAX_URL);
	http_parser_start(&ps.parser, &ps.head);
	ps.base = msg;
	for (avail = 1; avail <= len; avail++)
		if (http_parse_head(&ps.parser, msg, avail) != HTTP_PARSE_MORE)
			break;
	assert_int_equal(ps.parser.error, HTTP_HEAD_OK);
	assert_int_equal(ps.head.head_len, len - strlen("trailing body"));
	assert_span(msg, ps.head.url, "http://example.com:8080/some/long/path?with=query&and=more");
	assert_int_equal(ps.head.nfields, 6);
	assert_field(&ps, 0, "Host", "example.com:8080");
	assert_field(&ps, 1, "X-Empty", "");
	assert_field(&ps, 2, "User-Agent", "unit/1.0 (pieces)");
	assert_field(&ps, 3, "X-Empty-Too", "");
	assert_field(&ps, 4, "Accept-Encoding", "gzip, deflate");
	assert_field(&ps, 5, "Cookie", "a=1; b=2; c=3");
}

static void
test_empty_field_values(void **state)
{
	static const char msg[] = "GET http://h/ HTTP/1.1\r\n"
	                          "X-A:\r\n"
	                          "X-B: \r\n"
	                          "X-C: c\r\n"
	                          "X-D:\r\n"
	                          "\r\n";
	struct parsed ps;

	(void)state;
	parse_ok(&ps, HTTP_REQUEST, msg);
	assert_int_equal(ps.head.nfields, 4);
	assert_field(&ps, 0, "X-A", "");
	assert_field(&ps, 1, "X-B", "");
	assert_field(&ps, 2, "X-C", "c");
	assert_field(&ps, 3, "X-D", "");
}

static void
test_next_message_on_same_parser(void **state)
{
	static const char msgs[] = "GET http://a.example/one HTTP/1.1\r\nX-N: 1\r\n\r\n"
	                           "POST http://b.example/two HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
	struct http_parser p;
	struct http_head h;
	struct parsed view;
	size_t first;

	(void)state;
	http_parser_init(&p, HTTP_REQUEST, MAX_HEAD, MAX_URL);
	http_parser_start(&p, &h);
	assert_int_equal(http_parse_head(&p, msgs, sizeof(msgs) - 1), HTTP_PARSE_DONE);
	first = h.head_len;
	assert_int_equal(first, strlen("GET http://a.example/one HTTP/1.1\r\nX-N: 1\r\n\r\n"));
	assert_span(msgs, h.url, "http://a.example/one");

	http_parser_start(&p, &h);
	assert_int_equal(h.nfields, 0);
	assert_int_equal(h.url.len, 0);
	assert_int_equal(http_parse_head(&p, msgs + first, sizeof(msgs) - 1 - first),
	                 HTTP_PARSE_DONE);
	assert_int_equal(h.method, HTTP_POST);
	assert_span(msgs + first, h.url, "http://b.example/two");
	assert_int_equal(h.content_length, 2);
	assert_int_equal(h.head_len, sizeof(msgs) - 1 - first - 2);
	view.base = msgs + first;
	view.head = h;
	assert_field(&view, 0, "Content-Length", "2");
}

/* A request head with n fields "X-Field-i: v". */
static char *
request_with_fields(unsigned n)
{
	size_t cap = 64 + (size_t)n * 32;
	char *msg = malloc(cap);
	size_t len;

	assert_non_null(msg);
	len = (size_t)snprintf(msg, cap, "GET http://h/ HTTP/1.1\r\n");
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(msg + len, cap - len, "X-Field-%u: v%u\r\n", i, i);
	snprintf(msg + len, cap - len, "\r\n");
	return msg;
}

static void
test_field_count_limit(void **state)
{
	struct parsed ps;
	char *msg;

	(void)state;
	msg = request_with_fields(HTTP_MAX_FIELDS);
	parse_ok(&ps, HTTP_REQUEST, msg);
	assert_int_equal(ps.head.nfields, HTTP_MAX_FIELDS);
	assert_field(&ps, HTTP_MAX_FIELDS - 1, "X-Field-99", "v99");
	free(msg);

	msg = request_with_fields(HTTP_MAX_FIELDS + 1);
	parse(&ps, HTTP_REQUEST, msg);
	assert_int_equal(ps.result, HTTP_PARSE_ERROR);
	assert_int_equal(ps.parser.error, HTTP_HEAD_TOO_LARGE);
	assert_non_null(http_parser_error_text(&ps.parser));
	/* An error sticks. */
	assert_int_equal(http_parse_head(&ps.parser, msg, strlen(msg)), HTTP_PARSE_ERROR);
	free(msg);
}

static void
test_head_size_limit(void **state)
{
	static const char msg[] = "GET http://h/ HTTP/1.1\r\nX-Pad: 0123456789\r\n\r\n";
	size_t len = sizeof(msg) - 1;
	struct parsed ps;

	(void)state;
	/* Exactly at the limit: fine. */
	parse_with_limits(&ps, HTTP_REQUEST, msg, len, len, MAX_URL);
	assert_int_equal(ps.result, HTTP_PARSE_DONE);
	assert_int_equal(ps.head.head_len, len);

	/* One byte over, all held at once. */
	parse_with_limits(&ps, HTTP_REQUEST, msg, len, len - 1, MAX_URL);
	assert_int_equal(ps.result, HTTP_PARSE_ERROR);
	assert_int_equal(ps.parser.error, HTTP_HEAD_TOO_LARGE);

	/* Far over, arriving a byte at a time: fails once the limit is reached. */
	parse_with_limits(&ps, HTTP_REQUEST, msg, 1, 20, MAX_URL);
	assert_int_equal(ps.result, HTTP_PARSE_MORE);
	for (size_t avail = 2; avail < 20; avail++)
		assert_int_equal(http_parse_head(&ps.parser, msg, avail), HTTP_PARSE_MORE);
	assert_int_equal(http_parse_head(&ps.parser, msg, 20), HTTP_PARSE_ERROR);
	assert_int_equal(ps.parser.error, HTTP_HEAD_TOO_LARGE);

	/* Response heads obey the same limit. */
	parse_with_limits(&ps, HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaa\r\n\r\n",
	                  strlen("HTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaa\r\n\r\n"), 32, MAX_URL);
	assert_int_equal(ps.result, HTTP_PARSE_ERROR);
	assert_int_equal(ps.parser.error, HTTP_HEAD_TOO_LARGE);
}

static void
test_url_limit(void **state)
{
	/* The URL is 16 bytes. */
	static const char msg[] = "GET http://h/1234567 HTTP/1.1\r\n\r\n";
	size_t len = sizeof(msg) - 1;
	struct parsed ps;

	(void)state;
	parse_with_limits(&ps, HTTP_REQUEST, msg, len, MAX_HEAD, 16);
	assert_int_equal(ps.result, HTTP_PARSE_DONE);
	assert_int_equal(ps.head.url.len, 16);

	parse_with_limits(&ps, HTTP_REQUEST, msg, len, MAX_HEAD, 15);
	assert_int_equal(ps.result, HTTP_PARSE_ERROR);
	assert_int_equal(ps.parser.error, HTTP_HEAD_URL_TOO_LONG);

	/* In pieces, too. */
	http_parser_init(&ps.parser, HTTP_REQUEST, MAX_HEAD, 15);
	http_parser_start(&ps.parser, &ps.head);
	{
		enum http_parse_result r = HTTP_PARSE_MORE;
		size_t avail;

		for (avail = 1; avail <= len && r == HTTP_PARSE_MORE; avail++)
			r = http_parse_head(&ps.parser, msg, avail);
		assert_int_equal(r, HTTP_PARSE_ERROR);
		assert_int_equal(ps.parser.error, HTTP_HEAD_URL_TOO_LONG);
	}
}

static void
test_malformed_heads(void **state)
{
	static const struct {
		llhttp_type_t type;
		const char *msg;
	} cases[] = {
		{HTTP_REQUEST, "GET http://h/ HTTZ/1.1\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1 junk\r\n\r\n"},
		{HTTP_REQUEST, "GET\r\n\r\n"},
		{HTTP_REQUEST, "G@T http://h/ HTTP/1.1\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/x.y\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nNo colon here\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nBad(Name: v\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\n Leading: v\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nX: a\x01b\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nX: a\rb\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nContent-Length: x\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"},
		{HTTP_REQUEST, "\x01GET http://h/ HTTP/1.1\r\n\r\n"},
		{HTTP_RESPONSE, "HTTP/1.1 abc OK\r\n\r\n"},
		{HTTP_RESPONSE, "HTTX/1.1 200 OK\r\n\r\n"},
		{HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;

		parse(&ps, cases[i].type, cases[i].msg);
		if (ps.result != HTTP_PARSE_ERROR || ps.parser.error != HTTP_HEAD_MALFORMED)
			fail_msg("case %zu: result %d error %d for %s", i, ps.result, ps.parser.error,
			         cases[i].msg);
		assert_non_null(http_parser_error_text(&ps.parser));
	}
}

static void
test_te_with_content_length(void **state)
{
	static const struct {
		llhttp_type_t type;
		const char *msg;
	} cases[] = {
		{HTTP_REQUEST, "POST http://h/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		               "Content-Length: 5\r\n\r\n"},
		{HTTP_REQUEST, "POST http://h/ HTTP/1.1\r\nContent-Length: 5\r\n"
		               "Transfer-Encoding: chunked\r\n\r\n"},
		{HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		                "Content-Length: 5\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;

		parse(&ps, cases[i].type, cases[i].msg);
		if (ps.result != HTTP_PARSE_ERROR || ps.parser.error != HTTP_HEAD_MALFORMED)
			fail_msg("case %zu: result %d error %d", i, ps.result, ps.parser.error);
	}
}

/*
 * RFC 9112 6.3: a request whose Transfer-Encoding does not end in chunked has
 * no determinable length and must be answered with 400. Taking it as bodiless
 * would let the bytes after the head pass for the next request.
 */
static void
test_request_te_not_chunked_is_malformed(void **state)
{
	static const char *const cases[] = {
		"POST http://h/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"POST http://h/ HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;

		parse(&ps, HTTP_REQUEST, cases[i]);
		if (ps.result != HTTP_PARSE_ERROR || ps.parser.error != HTTP_HEAD_MALFORMED)
			fail_msg("case %zu: result %d error %d, request body kind %d", i, ps.result,
			         ps.parser.error, http_request_body_kind(&ps.head));
	}
}

/*
 * RFC 9110 5.1: a field name is a token, so no whitespace inside it; RFC
 * 9112 5.1: whitespace between name and colon MUST get a 400. Passed on, such
 * a field means one thing here and another to a lenient next hop
 * ("Transfer-Encoding : chunked").
 */
static void
test_field_name_whitespace_is_malformed(void **state)
{
	static const struct {
		llhttp_type_t type;
		const char *msg;
	} cases[] = {
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nX-Foo : v\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nBad Name: v\r\n\r\n"},
		{HTTP_REQUEST, "POST http://h/ HTTP/1.1\r\nX-Transfer-Encoding : chunked\r\n\r\n"},
		{HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Foo : v\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;

		parse(&ps, cases[i].type, cases[i].msg);
		if (ps.result != HTTP_PARSE_ERROR || ps.parser.error != HTTP_HEAD_MALFORMED)
			fail_msg("case %zu: result %d error %d, %u fields, first named \"%.*s\"", i,
			         ps.result, ps.parser.error, ps.head.nfields,
			         ps.head.nfields ? (int)ps.head.fields[ps.head.nfields - 1].name.len : 0,
			         ps.head.nfields
			                 ? cases[i].msg + ps.head.fields[ps.head.nfields - 1].name.off
			                 : "");
	}
}

/* Where the first empty line of a written head ends; len if it has none. */
static size_t
first_head_end(const char *out, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i++)
		if (memcmp(out + i, "\r\n\r\n", 4) == 0)
			return i + 4;
	return len;
}

/*
 * RFC 9112 5.2: obs-fold in a request is rejected (400) or replaced by SP; in
 * a response the proxy answers 502 or replaces it by SP. What must never
 * happen is a field value holding CR or LF: written out again, that line
 * break ends the head early and the rest of it goes out as content.
 */
static void
test_obs_fold_not_forwarded_raw(void **state)
{
	static const struct {
		llhttp_type_t type;
		const char *msg;
	} cases[] = {
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nX: a\r\n b\r\nY: c\r\n\r\n"},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n"},
		{HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: a\r\n b\r\nY: c\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		const char *msg = cases[i].msg;
		struct parsed ps;
		char out[1024];
		ssize_t n;

		parse(&ps, cases[i].type, msg);
		if (ps.result == HTTP_PARSE_ERROR) {
			assert_int_equal(ps.parser.error, HTTP_HEAD_MALFORMED);
			continue;
		}
		assert_int_equal(ps.result, HTTP_PARSE_DONE);
		for (unsigned f = 0; f < ps.head.nfields; f++) {
			struct http_span v = ps.head.fields[f].value;

			if (memchr(msg + v.off, '\r', v.len) || memchr(msg + v.off, '\n', v.len))
				fail_msg("case %zu: field %u value \"%.*s\" holds a line break", i, f,
				         (int)v.len, msg + v.off);
		}
		if (cases[i].type == HTTP_REQUEST) {
			struct http_target t;

			assert_int_equal(http_parse_target(msg + ps.head.url.off, ps.head.url.len, &t), 0);
			n = http_write_request_head(out, sizeof(out), &ps.head, msg, &t, false);
		} else {
			struct response_plan plan = {false, true, 1, false, false};

			n = http_write_response_head(out, sizeof(out), &ps.head, msg, &plan);
		}
		assert_true(n > 0);
		if (first_head_end(out, (size_t)n) != (size_t)n)
			fail_msg("case %zu: written head ends early:\n%.*s", i, (int)n, out);
	}
}

/* ---- request head rewriting ----------------------------------------------- */

static ssize_t
write_request(const char *msg, char *out, size_t cap, struct http_target *t)
{
	struct parsed ps;
	int status;

	parse_ok(&ps, HTTP_REQUEST, msg);
	status = http_parse_target(msg + ps.head.url.off, ps.head.url.len, t);
	assert_int_equal(status, 0);
	return http_write_request_head(out, cap, &ps.head, msg, t, false);
}

static void
assert_written(const char *out, ssize_t n, const char *expect)
{
	if (n < 0)
		fail_msg("writer returned %zd; expected:\n%s", n, expect);
	if ((size_t)n != strlen(expect) || memcmp(out, expect, (size_t)n) != 0)
		fail_msg("wrote:\n%.*s\nexpected:\n%s", (int)n, out, expect);
}

static void
test_request_head_rewrite(void **state)
{
	static const char msg[] = "GET http://Example.COM:8080/p?q=1 HTTP/1.1\r\n"
	                          "User-Agent: t/1\r\n"
	                          "Host: wrong.example\r\n"
	                          "Connection: close, X-Foo\r\n"
	                          "keep-alive: timeout=5\r\n"
	                          "PROXY-CONNECTION: keep-alive\r\n"
	                          "Proxy-Authorization: Basic abc\r\n"
	                          "TE: trailers\r\n"
	                          "Trailer: X-T\r\n"
	                          "Upgrade: websocket\r\n"
	                          "X-Foo: gone\r\n"
	                          "x-foo: gone too\r\n"
	                          "Accept: a\r\n"
	                          "X-Rep: 1\r\n"
	                          "Connection: X-Bar\r\n"
	                          "Accept: b\r\n"
	                          "X-Bar: gone\r\n"
	                          "X-Rep: 2\r\n"
	                          "Upgrade-Insecure-Requests: 1\r\n"
	                          "X-Connection: kept\r\n"
	                          "Cookie: a=1; b=2\r\n"
	                          "\r\n";
	static const char expect[] = "GET /p?q=1 HTTP/1.1\r\n"
	                             "Host: Example.COM:8080\r\n"
	                             "User-Agent: t/1\r\n"
	                             "Accept: a\r\n"
	                             "X-Rep: 1\r\n"
	                             "Accept: b\r\n"
	                             "X-Rep: 2\r\n"
	                             "Upgrade-Insecure-Requests: 1\r\n"
	                             "X-Connection: kept\r\n"
	                             "Cookie: a=1; b=2\r\n"
	                             "Via: 1.1 keepalive-proxy\r\n"
	                             "Connection: keep-alive\r\n"
	                             "\r\n";
	char out[4096];
	struct http_target t;

	(void)state;
	assert_written(out, write_request(msg, out, sizeof(out), &t), expect);
}

static void
test_request_head_variants(void **state)
{
	static const struct {
		const char *msg;
		const char *expect;
	} cases[] = {
		{"GET http://h/x HTTP/1.0\r\nAccept: */*\r\n\r\n",
		 "GET /x HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n"
		 "Via: 1.0 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"GET http://h?q=1 HTTP/1.1\r\n\r\n",
		 "GET /?q=1 HTTP/1.1\r\nHost: h\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"GET http://h HTTP/1.1\r\nHost: h\r\n\r\n",
		 "GET / HTTP/1.1\r\nHost: h\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"GET http://h:/a HTTP/1.1\r\nHost: h:\r\n\r\n",
		 "GET /a HTTP/1.1\r\nHost: h\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"GET http://[::1]:8080/x HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
		 "GET /x HTTP/1.1\r\nHost: [::1]:8080\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"POST http://h/form HTTP/1.1\r\nContent-Length: 3\r\nContent-Type: a/b\r\n\r\nabc",
		 "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Type: a/b\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"PUT http://h/f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		 "PUT /f HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		{"DELETE http://h/r#frag HTTP/1.1\r\nVia: 1.1 other\r\n\r\n",
		 "DELETE /r HTTP/1.1\r\nHost: h\r\nVia: 1.1 other\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		char out[1024];
		struct http_target t;

		assert_written(out, write_request(cases[i].msg, out, sizeof(out), &t),
		               cases[i].expect);
	}
}

static void
test_request_head_cap(void **state)
{
	static const char msg[] = "GET http://example.com/path HTTP/1.1\r\n"
	                          "Host: example.com\r\nAccept: */*\r\n\r\n";
	char full[1024], out[1024];
	struct http_target t;
	ssize_t n;

	(void)state;
	n = write_request(msg, full, sizeof(full), &t);
	assert_true(n > 0);
	for (size_t cap = 0; cap < (size_t)n; cap++) {
		ssize_t r = write_request(msg, out, cap, &t);

		if (r != -1)
			fail_msg("cap %zu of %zd: returned %zd", cap, n, r);
	}
	assert_int_equal(write_request(msg, out, (size_t)n, &t), n);
	assert_memory_equal(out, full, (size_t)n);
}

/* ---- response head rewriting ---------------------------------------------- */

static ssize_t
write_response(const char *msg, char *out, size_t cap, bool dechunk, bool keep_alive,
               uint8_t minor)
{
	struct parsed ps;
	struct response_plan plan = {dechunk, keep_alive, minor, false, false};

	parse_ok(&ps, HTTP_RESPONSE, msg);
	return http_write_response_head(out, cap, &ps.head, msg, &plan);
}

static const char chunked_response[] = "HTTP/1.1 200 Fine Thanks\r\n"
                                       "Content-Type: text/plain\r\n"
                                       "Transfer-Encoding: chunked\r\n"
                                       "Connection: keep-alive, X-Hop\r\n"
                                       "Keep-Alive: timeout=5, max=100\r\n"
                                       "X-Hop: a\r\n"
                                       "Set-Cookie: a=1\r\n"
                                       "Trailer: X-Sum\r\n"
                                       "Set-Cookie: b=2\r\n"
                                       "\r\n";

static void
test_response_head_plans(void **state)
{
	static const struct {
		const char *msg;
		bool dechunk, keep_alive;
		uint8_t minor;
		const char *expect;
	} cases[] = {
		/* Keep-alive to an HTTP/1.1 client: persistence is the default. */
		{chunked_response, false, true, 1,
		 "HTTP/1.1 200 Fine Thanks\r\nContent-Type: text/plain\r\n"
		 "Transfer-Encoding: chunked\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
		 "Via: 1.1 keepalive-proxy\r\n\r\n"},
		/* Closing after this response. */
		{chunked_response, false, false, 1,
		 "HTTP/1.1 200 Fine Thanks\r\nContent-Type: text/plain\r\n"
		 "Transfer-Encoding: chunked\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: close\r\n\r\n"},
		/*
		 * An HTTP/1.0 client gets the payload until close, no chunks. The status
		 * line says 1.1 all the same (RFC 9110 6.2: the highest version we
		 * speak), and the framing is what the client understands.
		 */
		{chunked_response, true, false, 0,
		 "HTTP/1.1 200 Fine Thanks\r\nContent-Type: text/plain\r\n"
		 "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: close\r\n\r\n"},
		/* Keep-alive to an HTTP/1.0 client has to be said. */
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, true, 0,
		 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
		 "Via: 1.1 keepalive-proxy\r\nConnection: keep-alive\r\n\r\n"},
		/* An HTTP/1.0 origin: our version on the status line, Via says 1.0. */
		{"HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n", false,
		 true, 1,
		 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nVia: 1.0 keepalive-proxy\r\n\r\n"},
		{"HTTP/1.0 404 Nope\r\nContent-Length: 0\r\n\r\n", false, false, 0,
		 "HTTP/1.1 404 Nope\r\nContent-Length: 0\r\n"
		 "Via: 1.0 keepalive-proxy\r\nConnection: close\r\n\r\n"},
		/* Interim responses carry no connection decision. */
		{"HTTP/1.1 100 Continue\r\n\r\n", false, false, 1,
		 "HTTP/1.1 100 Continue\r\nVia: 1.1 keepalive-proxy\r\n\r\n"},
		{"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nUpgrade: h2c\r\n\r\n", false, true, 1,
		 "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nVia: 1.1 keepalive-proxy\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		char out[1024];

		assert_written(out,
		               write_response(cases[i].msg, out, sizeof(out), cases[i].dechunk,
		                              cases[i].keep_alive, cases[i].minor),
		               cases[i].expect);
	}
}

static void
test_response_head_cap(void **state)
{
	char full[1024], out[1024];
	ssize_t n;

	(void)state;
	n = write_response(chunked_response, full, sizeof(full), false, false, 1);
	assert_true(n > 0);
	for (size_t cap = 0; cap < (size_t)n; cap++) {
		ssize_t r = write_response(chunked_response, out, cap, false, false, 1);

		if (r != -1)
			fail_msg("cap %zu of %zd: returned %zd", cap, n, r);
	}
	assert_int_equal(write_response(chunked_response, out, (size_t)n, false, false, 1), n);
	assert_memory_equal(out, full, (size_t)n);
}

/* ---- field semantics ------------------------------------------------------ */

static void
test_keep_alive_timeout(void **state)
{
	static const struct {
		const char *fields;
		long expect;
	} cases[] = {
		{"Keep-Alive: timeout=5, max=100\r\n", 5},
		{"Keep-Alive: max=100\r\n", -1},
		{"", -1},
		{"Keep-Alive: max=100, timeout=7\r\n", 7},
		{"Keep-Alive: max=100,timeout=8\r\n", 8},
		{"keep-alive: Timeout=15\r\n", 15},
		{"Keep-Alive: timeout=0\r\n", 0},
		{"Keep-Alive: timeout=\r\n", -1},
		{"Keep-Alive: xtimeout=5\r\n", -1},
		{"Keep-Alive: max=1\r\nKeep-Alive: timeout=3\r\n", 3},
		{"X-Keep-Alive: timeout=9\r\n", -1},
		{"Connection: timeout=9\r\n", -1},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		char msg[256];
		struct parsed ps;
		long got;

		snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n%s\r\n",
		         cases[i].fields);
		parse_ok(&ps, HTTP_RESPONSE, msg);
		got = http_keep_alive_timeout(&ps.head, msg);
		if (got != cases[i].expect)
			fail_msg("\"%s\": %ld, expected %ld", cases[i].fields, got, cases[i].expect);
	}
}

static void
test_head_keeps_alive(void **state)
{
	static const struct {
		llhttp_type_t type;
		const char *msg;
		bool expect;
	} cases[] = {
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\n\r\n", true},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nConnection: close\r\n\r\n", false},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nConnection: Close\r\n\r\n", false},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nConnection: x-foo, close\r\n\r\n", false},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", true},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.1\r\nConnection: x-foo\r\n\r\n", true},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.0\r\n\r\n", false},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.0\r\nConnection: close\r\n\r\n", false},
		{HTTP_REQUEST, "GET http://h/ HTTP/1.0\r\nKeep-Alive: timeout=5\r\n\r\n", false},
		{HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
		{HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false},
		{HTTP_RESPONSE, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false},
		{HTTP_RESPONSE,
		 "HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n", true},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;

		parse_ok(&ps, cases[i].type, cases[i].msg);
		if (http_head_keeps_alive(&ps.head) != cases[i].expect)
			fail_msg("case %zu: expected %d for\n%s", i, cases[i].expect, cases[i].msg);
	}
}

static void
test_response_body_kind(void **state)
{
	static const struct {
		const char *msg;
		uint8_t method;
		enum body_kind expect;
		uint64_t length;
	} cases[] = {
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", HTTP_HEAD, BODY_NONE, 5},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP_HEAD, BODY_NONE, 0},
		{"HTTP/1.1 100 Continue\r\n\r\n", HTTP_GET, BODY_NONE, 0},
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", HTTP_GET, BODY_NONE, 0},
		{"HTTP/1.1 204 No Content\r\n\r\n", HTTP_GET, BODY_NONE, 0},
		{"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", HTTP_GET, BODY_NONE, 10},
		{"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", HTTP_GET, BODY_NONE, 10},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP_GET, BODY_CHUNKED, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", HTTP_GET,
		 BODY_CHUNKED, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", HTTP_GET, BODY_LENGTH, 10},
		{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", HTTP_POST, BODY_LENGTH, 10},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", HTTP_GET, BODY_NONE, 0},
		{"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n", HTTP_GET, BODY_LENGTH, 3},
		{"HTTP/1.1 200 OK\r\n\r\n", HTTP_GET, BODY_UNTIL_CLOSE, 0},
		{"HTTP/1.0 200 OK\r\n\r\n", HTTP_GET, BODY_UNTIL_CLOSE, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", HTTP_GET, BODY_UNTIL_CLOSE, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", HTTP_GET,
		 BODY_UNTIL_CLOSE, 0},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;
		enum body_kind got;

		parse_ok(&ps, HTTP_RESPONSE, cases[i].msg);
		got = http_response_body_kind(&ps.head, cases[i].method);
		if (got != cases[i].expect)
			fail_msg("case %zu: kind %d, expected %d for\n%s", i, got, cases[i].expect,
			         cases[i].msg);
		assert_int_equal(ps.head.content_length, cases[i].length);
	}
}

static void
test_request_body_kind(void **state)
{
	static const struct {
		const char *msg;
		enum body_kind expect;
		uint64_t length;
	} cases[] = {
		{"GET http://h/ HTTP/1.1\r\n\r\n", BODY_NONE, 0},
		{"POST http://h/ HTTP/1.1\r\n\r\n", BODY_NONE, 0},
		{"POST http://h/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n", BODY_LENGTH, 5},
		{"POST http://h/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n", BODY_NONE, 0},
		{"PUT http://h/ HTTP/1.1\r\nContent-Length: 123456789012\r\n\r\n", BODY_LENGTH,
		 123456789012ull},
		{"POST http://h/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", BODY_CHUNKED, 0},
		{"POST http://h/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", BODY_CHUNKED,
		 0},
		{"POST http://h/ HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n", BODY_CHUNKED, 0},
		{"GET http://h/ HTTP/1.0\r\n\r\n", BODY_NONE, 0},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed ps;
		enum body_kind got;

		parse_ok(&ps, HTTP_REQUEST, cases[i].msg);
		got = http_request_body_kind(&ps.head);
		if (got != cases[i].expect)
			fail_msg("case %zu: kind %d, expected %d for\n%s", i, got, cases[i].expect,
			         cases[i].msg);
		assert_int_equal(ps.head.content_length, cases[i].length);
	}
}

static void
test_method_is_idempotent(void **state)
{
	static const struct {
		uint8_t method;
		bool expect;
	} cases[] = {
		{HTTP_GET, true},      {HTTP_HEAD, true},     {HTTP_PUT, true},
		{HTTP_DELETE, true},   {HTTP_OPTIONS, true},  {HTTP_TRACE, true},
		{HTTP_POST, false},    {HTTP_PATCH, false},   {HTTP_CONNECT, false},
		{HTTP_LOCK, false},    {HTTP_MKCOL, false},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++)
		if (http_method_is_idempotent(cases[i].method) != cases[i].expect)
			fail_msg("%s: expected %d", llhttp_method_name((llhttp_method_t)cases[i].method),
			         cases[i].expect);
}

/* Finds the first field called name in a parsed head, or returns -1. */
static int
find_field(const struct parsed *ps, const char *name)
{
	for (unsigned i = 0; i < ps->head.nfields; i++)
		if (http_span_is(ps->base, ps->head.fields[i].name, name))
			return (int)i;
	return -1;
}

static void
test_local_response(void **state)
{
	static const struct {
		int status;
		const char *why;
		bool keep_alive;
		uint8_t minor;
		const char *connection;   /* NULL: no Connection field */
	} cases[] = {
		{400, "the request-target must be an absolute http:// URL", true, 1, NULL},
		{400, "bad", false, 1, "close"},
		{502, "origin closed the connection", false, 1, "close"},
		{504, "no response in time", true, 0, "keep-alive"},
		{431, "", false, 0, "close"},
		{501, "only http:// URLs are proxied", true, 1, NULL},
		{418, "teapot", false, 1, "close"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		char out[1024], status_line[128], body[512];
		ssize_t n = http_write_local_response(out, sizeof(out), cases[i].status, cases[i].why,
		                                      cases[i].keep_alive, cases[i].minor);
		struct parsed ps;
		int at;

		assert_true(n > 0);
		assert_true((size_t)n < sizeof(out));
		out[n] = '\0';
		/* Our version whatever the client's (RFC 9110 6.2). */
		snprintf(status_line, sizeof(status_line), "HTTP/1.1 %d %s\r\n", cases[i].status,
		         http_status_reason(cases[i].status));
		assert_memory_equal(out, status_line, strlen(status_line));

		parse_ok(&ps, HTTP_RESPONSE, out);
		assert_int_equal(ps.head.status, cases[i].status);
		assert_int_equal(ps.head.minor, 1);
		snprintf(body, sizeof(body), "%s\n", cases[i].why);
		assert_true(ps.head.llhttp_flags & F_CONTENT_LENGTH);
		assert_int_equal(ps.head.content_length, strlen(body));
		assert_int_equal((size_t)n - ps.head.head_len, strlen(body));
		assert_string_equal(out + ps.head.head_len, body);
		at = find_field(&ps, "Content-Type");
		assert_true(at >= 0);
		at = find_field(&ps, "Connection");
		if (cases[i].connection) {
			assert_true(at >= 0);
			assert_span(out, ps.head.fields[at].value, cases[i].connection);
		} else {
			assert_int_equal(at, -1);
		}
		assert_int_equal(http_head_keeps_alive(&ps.head), cases[i].keep_alive);
	}
}

static void
test_local_response_cap(void **state)
{
	char out[512];
	ssize_t n = http_write_local_response(out, sizeof(out), 502, "origin unreachable", false, 1);

	(void)state;
	assert_true(n > 0);
	for (size_t cap = 0; cap < (size_t)n; cap++)
		assert_int_equal(http_write_local_response(out, cap, 502, "origin unreachable", false, 1),
		                 -1);
	assert_int_equal(http_write_local_response(out, (size_t)n + 1, 502, "origin unreachable",
	                                           false, 1),
	                 n);
}

static void
test_status_reason(void **state)
{
	(void)state;
	assert_string_equal(http_status_reason(400), "Bad Request");
	assert_string_equal(http_status_reason(414), "URI Too Long");
	assert_string_equal(http_status_reason(431), "Request Header Fields Too Large");
	assert_string_equal(http_status_reason(502), "Bad Gateway");
	assert_string_equal(http_status_reason(504), "Gateway Timeout");
	assert_non_null(http_status_reason(299));
}

static void
test_list_has(void **state)
{
	static const struct {
		const char *list;
		const char *word;
		bool expect;
	} cases[] = {
		{"close", "close", true},
		{"Close", "close", true},
		{"close, X-Foo", "x-foo", true},
		{"close, X-Foo", "close", true},
		{"close,X-Foo", "X-FOO", true},
		{" \tclose \t, x ", "x", true},
		{"a,,b", "b", true},
		{",a", "a", true},
		{"a,", "a", true},
		{"", "a", false},
		{",", "a", false},
		{"ab", "a", false},
		{"a", "ab", false},
		{"keep-alive", "keep", false},
		{"a b", "a", false},
		{"x-foo-bar", "x-foo", false},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		/* The span sits inside a larger buffer, not at its start. */
		char buf[128];
		struct http_span s;

		snprintf(buf, sizeof(buf), "Name: %s, trailing-token\r\n", cases[i].list);
		s.off = 6;
		s.len = (uint32_t)strlen(cases[i].list);
		if (http_list_has(buf, s, cases[i].word) != cases[i].expect)
			fail_msg("\"%s\" has \"%s\": expected %d", cases[i].list, cases[i].word,
			         cases[i].expect);
	}
}

static void
test_span_is(void **state)
{
	static const char buf[] = "xxContent-Lengthyy";
	struct http_span s = {2, 14};
	struct http_span shorter = {2, 13};

	(void)state;
	assert_true(http_span_is(buf, s, "content-length"));
	assert_true(http_span_is(buf, s, "CONTENT-LENGTH"));
	assert_false(http_span_is(buf, s, "content-lengthy"));
	assert_false(http_span_is(buf, s, "content-lengt"));
	assert_false(http_span_is(buf, shorter, "content-length"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_whole),
		cmocka_unit_test(test_response_whole),
		cmocka_unit_test(test_incomplete_head_wants_more),
		cmocka_unit_test(test_incremental_equals_whole),
		cmocka_unit_test(test_incremental_fields),
		cmocka_unit_test(test_empty_field_values),
		cmocka_unit_test(test_next_message_on_same_parser),
		cmocka_unit_test(test_field_count_limit),
		cmocka_unit_test(test_head_size_limit),
		cmocka_unit_test(test_url_limit),
		cmocka_unit_test(test_malformed_heads),
		cmocka_unit_test(test_te_with_content_length),
		cmocka_unit_test(test_request_te_not_chunked_is_malformed),
		cmocka_unit_test(test_field_name_whitespace_is_malformed),
		cmocka_unit_test(test_obs_fold_not_forwarded_raw),
		cmocka_unit_test(test_request_head_rewrite),
		cmocka_unit_test(test_request_head_variants),
		cmocka_unit_test(test_request_head_cap),
		cmocka_unit_test(test_response_head_plans),
		cmocka_unit_test(test_response_head_cap),
		cmocka_unit_test(test_keep_alive_timeout),
		cmocka_unit_test(test_head_keeps_alive),
		cmocka_unit_test(test_response_body_kind),
		cmocka_unit_test(test_request_body_kind),
		cmocka_unit_test(test_method_is_idempotent),
		cmocka_unit_test(test_local_response),
		cmocka_unit_test(test_local_response_cap),
		cmocka_unit_test(test_status_reason),
		cmocka_unit_test(test_list_has),
		cmocka_unit_test(test_span_is),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
