/*
 * Hostile input, as tables. Every malformed request gets 400 and a closed
 * connection, and no byte of it reaches the origin; in particular nothing
 * can make the proxy send a second, smuggled request upstream. Every
 * malformed response gets its connection closed, never pooled, and the
 * client a 502 (or a close once the response had begun); so does a request
 * body that turns malformed once the origin's answer has begun.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

/* %s is the origin's authority; len counts NULs inside the text too. */
struct bad_request {
	const char *name;
	const char *text;
	size_t len;
};

#define CASE(name, text, ...) {name, text, sizeof(text) - 1, ##__VA_ARGS__}

static const struct bad_request bad_requests[] = {
	CASE("Content-Length and Transfer-Encoding",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
	 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
	CASE("two different Content-Lengths",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
	 "hello!"),
	CASE("Content-Length list",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!"),
	CASE("negative Content-Length",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
	CASE("Transfer-Encoding not ending in chunked",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
	CASE("bad chunk size",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhi\r\n"
	 "0\r\n\r\n"),
	CASE("chunk size overflowing 64 bits",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	 "10000000000000000\r\nhi\r\n0\r\n\r\n"),
	CASE("chunk data without its CRLF",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiXX"
	 "0\r\n\r\n"),
	CASE("obs-fold", "GET http://%s/ HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n"),
	CASE("NUL in a field value", "GET http://%s/ HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"),
	CASE("bare CR in a field value", "GET http://%s/ HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"),
	CASE("bare LF line ending", "GET http://%s/ HTTP/1.1\nHost: x\n\n"),
	CASE("space before the colon", "GET http://%s/ HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n"),
	CASE("invalid field name", "GET http://%s/ HTTP/1.1\r\nHost: x\r\nX(A): b\r\n\r\n"),
	CASE("field without a colon", "GET http://%s/ HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n"),
	CASE("junk in the version", "GET http://%s/ HTTP/1.1x\r\nHost: x\r\n\r\n"),
	CASE("space in the target", "GET http://%s/a b HTTP/1.1\r\nHost: x\r\n\r\n"),
	CASE("smuggled second request in a chunked body with Content-Length",
	 "POST http://%s/ HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
	 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
};

static void
malformed_requests_get_400(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char authority[64], text[512];

	proxy_start(&px, NULL);
	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(og));
	for (size_t i = 0; i < sizeof(bad_requests) / sizeof(bad_requests[0]); i++) {
		const struct bad_request *b = &bad_requests[i];
		/* Expanded by hand: the texts may hold NULs, which printf would stop at. */
		const char *at = strstr(b->text, "%s");
		size_t head = (size_t)(at - b->text), rest = b->len - head - 2;
		size_t len = head + strlen(authority) + rest;
		struct client c;
		struct response r;

		memcpy(text, b->text, head);
		memcpy(text + head, authority, strlen(authority));
		memcpy(text + head + strlen(authority), at + 2, rest);
		client_open(&c, px.port);
		assert_int_equal(client_send(&c, text, len), 0);
		if (client_read_response(&c, &r, 0) != WIRE_OK)
			fail_msg("%s: no well-formed answer", b->name);
		if (r.head.status != 400)
			fail_msg("%s: status %d, expected 400", b->name, r.head.status);
		response_free(&r);
		if (!client_eof(&c, 2000))
			fail_msg("%s: the connection stayed open after the 400", b->name);
		client_close(&c);
	}
	proxy_assert_alive(&px);
	if (origin_request_count(og) || origin_connection_count(og))
		fail_msg("%u request(s) reached the origin", origin_request_count(og));
	proxy_stop(&px);
}

/* Raw responses from an origin of the test's own; conn_no picks the case. */
struct bad_response {
	const char *name;
	const char *text;
	size_t len;
	int status;   /* what the client sees: 502, or 0 for a close after 200 began */
};

static const struct bad_response bad_responses[] = {
	CASE("Content-Length and Transfer-Encoding",
	 "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"
	 "0\r\n\r\n", 502),
	CASE("two different Content-Lengths",
	 "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!", 502),
	CASE("obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok", 502),
	CASE("NUL in a field value", "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 2\r\n\r\nok", 502),
	CASE("bad status line", "HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok", 502),
	CASE("bad chunk size mid-body",
	 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\nxx\r\n0\r\n\r\n", 0),
};

static void
raw_origin(struct origin_conn *c, void *arg)
{
	char buf[4096];
	const struct bad_response *b = &bad_responses[(origin_conn_no(c) - 1) %
	                                              (sizeof(bad_responses) / sizeof(bad_responses[0]))];

	(void)arg;
	/* Read the request head, then answer with the case's bytes. */
	if (origin_recv(c, buf, sizeof(buf), 5000) <= 0)
		return;
	origin_send(c, b->text, b->len);
	origin_stay_silent(c, 3000);
}

static void
malformed_responses_are_not_passed_on(void)
{
	static const char *const args[] = {"--io-timeout", "2", NULL};
	struct origin *og = origin_start_raw(raw_origin, NULL);
	const size_t n = sizeof(bad_responses) / sizeof(bad_responses[0]);
	char url[128];

	proxy_start(&px, args);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", origin_port(og));
	for (size_t i = 0; i < n; i++) {
		const struct bad_response *b = &bad_responses[i];
		struct client c;
		struct response r;
		int got;

		client_open(&c, px.port);
		client_sendf(&c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", url);
		got = client_read_response(&c, &r, 0);
		if (b->status) {
			if (got != WIRE_OK || r.head.status != b->status)
				fail_msg("%s: expected %d, got %s %d", b->name, b->status,
				         got == WIRE_OK ? "status" : "no answer",
				         got == WIRE_OK ? r.head.status : got);
		} else if (got == WIRE_OK) {
			fail_msg("%s: the client got a whole response", b->name);
		}
		response_free(&r);
		if (!client_eof(&c, 3000))
			fail_msg("%s: the client connection stayed open", b->name);
		client_close(&c);
		/* One connection per case: a bad response's connection is never reused. */
		if (origin_connection_count(og) != i + 1)
			fail_msg("%s: %u origin connections after %zu cases", b->name,
			         origin_connection_count(og), i + 1);
	}
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

/*
 * The origin answers before the request's body is all there, with a head
 * and the first bytes of its body, and hears nothing more.
 */
#define EARLY_BODY "early"

static void
early_answer_origin(struct origin_conn *c, void *arg)
{
	char buf[4096];

	(void)arg;
	if (origin_recv(c, buf, sizeof(buf), 5000) <= 0)
		return;
	origin_sendf(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" EARLY_BODY);
	origin_stay_silent(c, 5000);
}

/*
 * A request body turns malformed after the origin's answer began: too late
 * for a 400, so the connection ends after what the origin sent, and nothing
 * of the proxy's own is written into the answer's body.
 */
static void
bad_chunk_after_the_answer_began_closes(void)
{
	struct origin *og = origin_start_raw(early_answer_origin, NULL);
	struct client c;
	struct msg_head h;
	struct body b;
	char why[128];
	int port = origin_port(og);

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	client_sendf(&c,
	             "POST http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
	             "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
	             port, port);
	memset(&h, 0, sizeof(h));
	assert_int_equal(wire_read_head(&c.w, false, 16384, &h, why, sizeof(why)), WIRE_OK);
	assert_int_equal(h.status, 200);
	msg_head_free(&h);
	body_init(&b, 64);
	assert_int_equal(client_recv_exact(&c, strlen(EARLY_BODY), &b), WIRE_OK);
	body_free(&b);
	client_sendf(&c, "zz\r\n");
	body_init(&b, 4096);
	assert_int_equal(client_recv_to_eof(&c, &b), WIRE_OK);
	if (b.len)
		fail_msg("%llu bytes came after the origin's: \"%s\"", (unsigned long long)b.len,
		         b.data);
	body_free(&b);
	assert_int_equal(proxy_log_count(&px, "malformed chunked request body"), 1);
	client_close(&c);
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(malformed_requests_get_400),
		E2E_TEST(malformed_responses_are_not_passed_on),
		E2E_TEST(bad_chunk_after_the_answer_began_closes),
	};

	return E2E_RUN("hostile", tests);
}
