/*
 * Responses that end the upstream connection's life: Connection: close, an
 * HTTP/1.0 response without keep-alive, a close-delimited body. The proxy must
 * not reuse such a connection (here the origin even keeps it open, so wrong
 * reuse would be answered and counted) and should close it.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;

	(void)arg;
	if (strncmp(t, "/close", 6) == 0) {
		/* Announce the close but leave the socket open. */
		origin_reply(c, 200, "Connection: close\r\n", "closing");
	} else if (strncmp(t, "/http10ka", 9) == 0) {
		origin_sendf(
			c, "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 6\r\n\r\n"
			   "http10");
	} else if (strncmp(t, "/http10", 7) == 0) {
		origin_sendf(c, "HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nhttp10");
	} else if (strncmp(t, "/eof", 4) == 0) {
		origin_reply_close_delimited(c, 200, "Content-Type: text/plain\r\n",
		                             "until the end");
	} else {
		origin_reply(c, 200, NULL, "plain");
	}
}

static void
connection_close_is_not_reused(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/close/1", 200, "closing");
	expect_get(px.port, og, "/close/2", 200, "closing");
	assert_int_equal(origin_connection_count(og), 2);
	/* Both connections are of no further use; the proxy closes them. */
	if (!origin_wait_peer_closed(og, 2, 3000))
		fail_msg("the proxy kept %u of 2 'Connection: close' upstream connections open",
		         2 - origin_peer_closed_count(og));
	/* Pooling works normally afterwards. */
	expect_get(px.port, og, "/plain/1", 200, "plain");
	expect_get(px.port, og, "/plain/2", 200, "plain");
	assert_int_equal(origin_connection_count(og), 3);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
http10_response_is_not_reused(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/http10/1", 200, "http10");
	expect_get(px.port, og, "/http10/2", 200, "http10");
	assert_int_equal(origin_connection_count(og), 2);
	if (!origin_wait_peer_closed(og, 2, 3000))
		fail_msg("the proxy kept %u of 2 HTTP/1.0 upstream connections open",
		         2 - origin_peer_closed_count(og));
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
http10_keepalive_response_is_reused(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/http10ka/1", 200, "http10");
	expect_get(px.port, og, "/http10ka/2", 200, "http10");
	expect_get(px.port, og, "/http10ka/3", 200, "http10");
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
close_delimited_is_not_reused(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	for (int i = 0; i < 2; i++) {
		client_open(&c, px.port);
		send_get(&c, og, "/eof");
		expect_response(&c, 200, "until the end");
		/* The body's end is the connection's end, for the client too. */
		assert_client_eof(&c, 3000);
		client_close(&c);
	}
	assert_int_equal(origin_connection_count(og), 2);
	expect_get(px.port, og, "/plain", 200, "plain");
	assert_int_equal(origin_connection_count(og), 3);
	assert_origin_clean(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(connection_close_is_not_reused),
		E2E_TEST(http10_response_is_not_reused),
		E2E_TEST(http10_keepalive_response_is_reused),
		E2E_TEST(close_delimited_is_not_reused),
	};

	return E2E_RUN("e2e_origin_close", tests);
}
