/*
 * Expect: 100-continue: forwarded to the origin, whose 100 Continue reaches
 * the client before the client sends its body.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

#define CONTINUE_DELAY_MS 300

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	char body[128];

	(void)arg;
	if (req->expects_continue) {
		/* Late enough that a 100 made up by the proxy would arrive first. */
		origin_pause(c, CONTINUE_DELAY_MS);
		origin_send_continue(c);
		if (!origin_read_body(c, req))
			return;
	}
	snprintf(body, sizeof(body), "%s len=%llu pattern=%d", req->head.target,
	         (unsigned long long)req->body.len, req->body.pattern_ok);
	origin_reply(c, 200, NULL, body);
}

/* Sends the head, waits for 100 Continue, sends the body, reads the final response. */
static void
upload_with_expect(struct client *c, struct origin *og, const char *path, uint64_t len,
                   bool chunked)
{
	struct response r;
	char url[128], want[128];
	double t0;

	client_sendf(c,
	             "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nExpect: 100-continue\r\n"
	             "Content-Type: application/octet-stream\r\n",
	             origin_url(og, path, url, sizeof(url)), origin_port(og));
	if (chunked)
		client_sendf(c, "Transfer-Encoding: chunked\r\n\r\n");
	else
		client_sendf(c, "Content-Length: %llu\r\n\r\n", (unsigned long long)len);
	t0 = now_s();
	read_response_ok(c, &r, RESP_INTERIM);
	assert_status(&r, 100);
	response_free(&r);
	if (now_s() - t0 < (CONTINUE_DELAY_MS - 50) / 1000.0)
		fail_msg("100 Continue came after %.3f s, before the origin sent it (%d ms)",
		         now_s() - t0, CONTINUE_DELAY_MS);

	if (chunked)
		client_send_pattern_chunked(c, len, 65536);
	else
		client_send_pattern(c, len);
	read_response_ok(c, &r, 0);
	assert_status(&r, 200);
	snprintf(want, sizeof(want), "%s len=%llu pattern=1", path, (unsigned long long)len);
	assert_body(&r, want);
	response_free(&r);

	const struct origin_request *q = origin_last_request(og);
	assert_string_equal(q->head.target, path);
	assert_true(headers_has_token(&q->head.headers, "Expect", "100-continue"));
	assert_true(q->body_complete);
	assert_int_equal(q->body.len, len);
	assert_true(q->body.pattern_ok);
}

static void
expect_continue_with_content_length(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	upload_with_expect(&c, og, "/upload", 100000, false);
	client_close(&c);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
expect_continue_with_chunked_body(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	upload_with_expect(&c, og, "/upload-chunked", 3u * 1024u * 1024u, true);
	assert_int_equal(origin_last_request(og)->framing, FRAMING_CHUNKED);
	client_close(&c);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
connection_usable_after_continue(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	upload_with_expect(&c, og, "/one", 5000, false);
	upload_with_expect(&c, og, "/two", 7000, true);
	send_get(&c, og, "/three");
	expect_response(&c, 200, "/three len=0 pattern=1");
	client_close(&c);
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(expect_continue_with_content_length),
		E2E_TEST(expect_continue_with_chunked_body),
		E2E_TEST(connection_usable_after_continue),
	};

	return E2E_RUN("e2e_continue", tests);
}
