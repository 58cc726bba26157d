/*
 * What RFC 9110 and 9112 ask of a proxy for OPTIONS and TRACE: an OPTIONS
 * for a server as a whole goes on as "OPTIONS *", Max-Forwards counts
 * down, and at 0 the proxy answers itself; every status line the proxy
 * writes has its reason phrase.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

static void
options_for_the_server_becomes_asterisk(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	const struct origin_request *seen;
	struct response r;
	char text[256];

	proxy_start(&px, NULL);
	snprintf(text, sizeof(text),
	         "OPTIONS http://127.0.0.1:%d HTTP/1.1\r\nHost: x\r\nMax-Forwards: 5\r\n\r\n",
	         origin_port(og));
	request_once(px.port, NULL, text, &r);
	assert_status(&r, 200);
	response_free(&r);
	seen = origin_last_request(og);
	assert_string_equal(seen->head.method, "OPTIONS");
	assert_string_equal(seen->head.target, "*");
	assert_string_equal(headers_get(&seen->head.headers, "Max-Forwards"), "4");

	/* With a path it stays a path; Max-Forwards still counts down. */
	snprintf(text, sizeof(text),
	         "OPTIONS http://127.0.0.1:%d/x HTTP/1.1\r\nHost: x\r\nMax-Forwards: 1\r\n\r\n",
	         origin_port(og));
	request_once(px.port, NULL, text, &r);
	assert_status(&r, 200);
	response_free(&r);
	seen = origin_last_request(og);
	assert_string_equal(seen->head.target, "/x");
	assert_string_equal(headers_get(&seen->head.headers, "Max-Forwards"), "0");

	/* Max-Forwards means nothing to a GET: passed on as it is. */
	snprintf(text, sizeof(text),
	         "GET http://127.0.0.1:%d/g HTTP/1.1\r\nHost: x\r\nMax-Forwards: 0\r\n\r\n",
	         origin_port(og));
	request_once(px.port, NULL, text, &r);
	assert_status(&r, 200);
	response_free(&r);
	assert_string_equal(headers_get(&origin_last_request(og)->head.headers, "Max-Forwards"),
	                    "0");
	proxy_stop(&px);
}

static void
max_forwards_zero_is_answered_by_the_proxy(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct response r;
	char text[512];
	const char *body;

	proxy_start(&px, NULL);
	snprintf(text, sizeof(text),
	         "OPTIONS http://127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\nMax-Forwards: 0\r\n\r\n",
	         origin_port(og));
	request_once(px.port, NULL, text, &r);
	assert_status(&r, 200);
	assert_non_null(resp_header(&r, "Allow"));
	response_free(&r);

	snprintf(text, sizeof(text),
	         "TRACE http://127.0.0.1:%d/t HTTP/1.1\r\nHost: x\r\nMax-Forwards: 0\r\n"
	         "X-Probe: 42\r\nCookie: secret=1\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
	         origin_port(og));
	request_once(px.port, NULL, text, &r);
	assert_status(&r, 200);
	assert_string_equal(resp_header(&r, "Content-Type"), "message/http");
	body = (const char *)r.body.data;
	if (!strstr(body, "TRACE http://127.0.0.1:") || !strstr(body, "X-Probe: 42"))
		fail_msg("the TRACE answer does not reflect the request:\n%.*s", (int)r.body.len, body);
	if (strstr(body, "secret=1") || strstr(body, "eDp5"))
		fail_msg("the TRACE answer reflects credentials:\n%.*s", (int)r.body.len, body);
	response_free(&r);
	assert_int_equal(origin_connection_count(og), 0);
	proxy_stop(&px);
}

static void
status_lines_have_reason_phrases(void)
{
	struct response r;

	proxy_start(&px, NULL);
	request_once(px.port, NULL, "GET http://127.0.0.1:1/ HTTP/2.0\r\nHost: x\r\n\r\n", &r);
	assert_status(&r, 505);
	assert_string_equal(r.head.reason, "HTTP Version Not Supported");
	response_free(&r);
	request_once(px.port, NULL, "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_status(&r, 400);
	assert_string_equal(r.head.reason, "Bad Request");
	response_free(&r);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(options_for_the_server_becomes_asterisk),
		E2E_TEST(max_forwards_zero_is_answered_by_the_proxy),
		E2E_TEST(status_lines_have_reason_phrases),
	};

	return E2E_RUN("conformance", tests);
}
