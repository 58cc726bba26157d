/*
 * Message framing through the proxy. Responses: chunked (raw, trailers kept)
 * to HTTP/1.1 clients and de-chunked for HTTP/1.0 clients, close-delimited
 * bodies, HEAD, bodiless statuses, 1xx interim responses, and a transfer
 * coding besides chunked (passed on with its field to HTTP/1.1 clients, a
 * 502 to HTTP/1.0 ones). Requests: chunked bodies reach the origin
 * unchanged, trailers included.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

#define FOX "The quick brown fox jumps over the lazy dog"
#define BIG_CHUNKED (1024u * 1024u + 17u)

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;

	(void)arg;
	if (strcmp(t, "/chunked") == 0) {
		origin_reply_chunked(c, 200, "Content-Type: text/plain\r\n", FOX, 7,
		                     "X-Checksum: 1234\r\nX-Other: yes\r\n");
	} else if (strcmp(t, "/chunked-big") == 0) {
		origin_reply_chunked_pattern(c, 200, NULL, BIG_CHUNKED, 10000, "X-Done: 1\r\n");
	} else if (strcmp(t, "/gzip-chunked") == 0 || strcmp(t, "/gzip-chunked-206") == 0) {
		/* Not real gzip: the proxy must not look inside, only keep the coding named. */
		origin_reply_chunked(c, strcmp(t, "/gzip-chunked") == 0 ? 200 : 206,
		                     strcmp(t, "/gzip-chunked") == 0
		                             ? "Transfer-Encoding: gzip\r\n"
		                             : "Content-Range: bytes 0-99/1000\r\n"
		                               "Transfer-Encoding: gzip\r\n",
		                     FOX, 7, NULL);
	} else if (strcmp(t, "/eof") == 0) {
		origin_reply_close_delimited(c, 200, NULL, "close-delimited body");
	} else if (strcmp(t, "/head") == 0) {
		origin_reply(c, 200, "Content-Type: text/plain\r\n", "0123456789");
	} else if (strcmp(t, "/204") == 0) {
		origin_sendf(c, "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n");
	} else if (strcmp(t, "/304") == 0) {
		/* Content-Length describes the representation; a 304 never has a body. */
		origin_sendf(
			c,
			"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 100\r\n\r\n");
	} else if (strcmp(t, "/103") == 0) {
		origin_sendf(c,
		             "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n");
		origin_pause(c, 50);
		origin_reply(c, 200, NULL, "after hints");
	} else if (strcmp(t, "/echo") == 0) {
		char body[256];

		snprintf(body, sizeof(body), "%llu bytes in %u chunks: %s",
		         (unsigned long long)req->body.len, req->nchunks, req->body.data);
		origin_reply(c, 200, NULL, body);
	} else if (strcmp(t, "/zero") == 0) {
		origin_reply(c, 200, NULL, "");
	} else {
		origin_reply(c, 404, NULL, "no such thing");
	}
}

static void
chunked_with_trailers_to_http11(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/chunked");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_int_equal(r.framing, FRAMING_CHUNKED);
	assert_null(resp_header(&r, "Content-Length"));
	assert_body(&r, FOX);
	/* Passed through raw: the origin's 7 chunks, and its trailers. */
	assert_int_equal(r.nchunks, 7);
	assert_non_null(headers_get(&r.trailers, "X-Checksum"));
	assert_string_equal(headers_get(&r.trailers, "X-Checksum"), "1234");
	assert_non_null(headers_get(&r.trailers, "X-Other"));
	assert_string_equal(headers_get(&r.trailers, "X-Other"), "yes");
	response_free(&r);

	/* Same client connection: a bigger chunked body, then an empty one. */
	send_get(&c, og, "/chunked-big");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_int_equal(r.framing, FRAMING_CHUNKED);
	assert_int_equal(r.body.len, BIG_CHUNKED);
	assert_true(r.body.pattern_ok);
	assert_int_equal(r.nchunks, (BIG_CHUNKED + 9999) / 10000);
	assert_string_equal(headers_get(&r.trailers, "X-Done"), "1");
	response_free(&r);

	send_get(&c, og, "/zero");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, 0);
	response_free(&r);
	client_close(&c);

	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
chunked_to_http10_is_dechunked(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/chunked", "HTTP/1.0", NULL);
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_null(resp_header(&r, "Transfer-Encoding"));
	assert_body(&r, FOX);
	response_free(&r);
	assert_client_eof(&c, 3000);
	client_close(&c);

	client_open(&c, px.port);
	send_request(&c, "GET", og, "/chunked-big", "HTTP/1.0", NULL);
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_null(resp_header(&r, "Transfer-Encoding"));
	assert_int_equal(r.body.len, BIG_CHUNKED);
	assert_true(r.body.pattern_ok);
	response_free(&r);
	assert_client_eof(&c, 3000);
	client_close(&c);

	/* The upstream side read complete chunked bodies: the connection stays pooled. */
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

/*
 * A transfer coding besides chunked: an HTTP/1.1 client gets the bytes with
 * the coding named, an HTTP/1.0 client a 502 that says why (de-chunked and
 * without its field, the coded bytes would pass for the payload).
 */
static void
transfer_codings_never_pass_for_the_payload(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	const char *te;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/gzip-chunked");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	te = resp_header(&r, "Transfer-Encoding");
	if (!te || !strstr(te, "gzip"))
		fail_msg("the coding did not reach the HTTP/1.1 client (Transfer-Encoding: %s)",
		         te ? te : "(none)");
	assert_body(&r, FOX);
	response_free(&r);
	client_close(&c);

	for (int i = 0; i < 2; i++) {
		client_open(&c, px.port);
		send_request(&c, "GET", og, i == 0 ? "/gzip-chunked" : "/gzip-chunked-206",
		             "HTTP/1.0", NULL);
		read_response_ok(&c, &r, 0);
		assert_status(&r, 502);
		assert_null(resp_header(&r, "Content-Range"));
		if (!r.body.data || !strstr(r.body.data, "transfer coding"))
			fail_msg("the 502 does not say why: %.*s", (int)r.body.kept,
			         r.body.data ? r.body.data : "");
		response_free(&r);
		assert_client_eof(&c, 3000);
		client_close(&c);
	}
	if (proxy_log_count(&px, "transfer coding") < 1)
		fail_msg("the refusals were not logged");
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
close_delimited_response(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/eof");
	expect_response(&c, 200, "close-delimited body");
	assert_client_eof(&c, 3000);
	client_close(&c);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
head_then_get_on_same_connection(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "HEAD", og, "/head", "HTTP/1.1", NULL);
	read_response_ok(&c, &r, RESP_HEAD);
	assert_status(&r, 200);
	assert_non_null(resp_header(&r, "Content-Length"));
	assert_string_equal(resp_header(&r, "Content-Length"), "10");
	assert_int_equal(r.body.len, 0);
	response_free(&r);

	send_get(&c, og, "/head");
	expect_response(&c, 200, "0123456789");

	/* HEAD of a chunked resource: Transfer-Encoding announced, no body at all. */
	send_request(&c, "HEAD", og, "/chunked", "HTTP/1.1", NULL);
	read_response_ok(&c, &r, RESP_HEAD);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, 0);
	response_free(&r);

	send_get(&c, og, "/chunked");
	expect_response(&c, 200, FOX);
	client_close(&c);

	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
no_body_statuses(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/204");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 204);
	assert_int_equal(r.body.len, 0);
	assert_string_equal(resp_header(&r, "X-A"), "1");
	response_free(&r);

	send_get(&c, og, "/304");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 304);
	assert_int_equal(r.body.len, 0);
	assert_string_equal(resp_header(&r, "ETag"), "\"v1\"");
	response_free(&r);

	/* Nothing is left over on the client connection, and it is still usable. */
	send_get(&c, og, "/head");
	expect_response(&c, 200, "0123456789");
	client_close(&c);

	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
interim_response_passed_on(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/103");
	read_response_ok(&c, &r, RESP_INTERIM);
	assert_status(&r, 103);
	assert_non_null(resp_header(&r, "Link"));
	assert_string_equal(resp_header(&r, "Link"), "</style.css>; rel=preload");
	response_free(&r);
	expect_response(&c, 200, "after hints");

	send_get(&c, og, "/zero");
	expect_response(&c, 200, NULL);
	client_close(&c);
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
chunked_request_body_unchanged(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	char url[128];
	const struct origin_request *q;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	client_sendf(&c,
	             "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n\r\n"
	             "5;name=value\r\nhello\r\n"
	             "1\r\n \r\n"
	             "A\r\nchunked!!!\r\n"
	             "0\r\nX-Request-Trailer: t1\r\n\r\n",
	             origin_url(og, "/echo", url, sizeof(url)), origin_port(og));
	expect_response(&c, 200, "16 bytes in 3 chunks: hello chunked!!!");
	q = origin_last_request(og);
	assert_int_equal(q->framing, FRAMING_CHUNKED);
	assert_non_null(headers_get(&q->trailers, "X-Request-Trailer"));
	assert_string_equal(headers_get(&q->trailers, "X-Request-Trailer"), "t1");

	/* An empty chunked body, on the same connection. */
	client_sendf(&c,
	             "PUT %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n\r\n"
	             "0\r\n\r\n",
	             origin_url(og, "/echo", url, sizeof(url)), origin_port(og));
	expect_response(&c, 200, "0 bytes in 0 chunks: ");
	client_close(&c);
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(chunked_with_trailers_to_http11),
		E2E_TEST(chunked_to_http10_is_dechunked),
		E2E_TEST(transfer_codings_never_pass_for_the_payload),
		E2E_TEST(close_delimited_response),
		E2E_TEST(head_then_get_on_same_connection),
		E2E_TEST(no_body_statuses),
		E2E_TEST(interim_response_passed_on),
		E2E_TEST(chunked_request_body_unchanged),
	};

	return E2E_RUN("e2e_framing", tests);
}
