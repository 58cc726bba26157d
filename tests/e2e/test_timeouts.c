/*
 * Timeouts on the client side and in the middle of an exchange:
 * --client-timeout closes idle client connections, --io-timeout ends an
 * exchange whose origin stalls half-way through a body, --header-timeout
 * cuts off a client that trickles its request head.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	(void)arg;
	if (strcmp(req->head.target, "/stall") == 0) {
		/* Promise a megabyte, deliver a little, then nothing. */
		origin_sendf(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
		origin_send_pattern(c, 0, 1000);
		origin_stay_silent(c, 20000);
	} else {
		origin_reply(c, 200, NULL, "ok");
	}
}

static void
idle_client_is_closed(void)
{
	static const char *const args[] = {"--client-timeout", "1", NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	double t0;

	proxy_start(&px, args);
	/* Never sends a request. */
	client_open(&c, px.port);
	t0 = now_s();
	assert_client_eof(&c, 4000);
	if (now_s() - t0 < 0.8)
		fail_msg("idle client closed after %.2f s with --client-timeout 1", now_s() - t0);
	client_close(&c);

	/* Idle after a request on a keep-alive connection. */
	client_open(&c, px.port);
	send_get(&c, og, "/ok");
	expect_response(&c, 200, "ok");
	t0 = now_s();
	assert_client_eof(&c, 4000);
	if (now_s() - t0 < 0.8)
		fail_msg("idle client closed after %.2f s with --client-timeout 1", now_s() - t0);
	client_close(&c);
	proxy_stop(&px);
}

static void
stalled_origin_body_ends_exchange(void)
{
	static const char *const args[] = {"--io-timeout", "1", NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	double t0;
	int rc;

	proxy_start(&px, args);
	client_open(&c, px.port);
	send_get(&c, og, "/stall");
	t0 = now_s();
	rc = client_read_response(&c, &r, 0);
	/* The client learns that the body is incomplete: the connection ends early. */
	if (rc != WIRE_TRUNC && rc != WIRE_IO) {
		print_error("expected the connection to end inside the body, got: %s\n",
		            wire_strerror(rc));
		response_print(&r);
		fail();
	}
	assert_int_equal(r.head.status, 200);
	assert_int_equal(r.body.len, 1000);
	assert_true(r.body.pattern_ok);
	response_free(&r);
	if (now_s() - t0 < 0.8 || now_s() - t0 > 4.0)
		fail_msg("the stalled exchange ended after %.2f s with --io-timeout 1",
		         now_s() - t0);
	client_close(&c);
	/* The stalled upstream connection is closed, not pooled. */
	if (!origin_wait_peer_closed(og, 1, 3000))
		fail_msg("the stalled upstream connection was not closed");
	expect_get(px.port, og, "/ok", 200, "ok");
	proxy_stop(&px);
}

/*
 * A byte every 200 ms keeps resetting the idle timeout but not the head's:
 * 408 after --header-timeout, counted from the first byte.
 */
static void
trickled_head_gets_408(void)
{
	static const char *const args[] = {"--header-timeout", "1", "--client-timeout", "10",
	                                   NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	char head[256], url[128];
	double t0, took;
	size_t sent = 0;

	proxy_start(&px, args);
	snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: x\r\nX-Slow: ",
	         origin_url(og, "/ok", url, sizeof(url)));
	client_open(&c, px.port);
	t0 = now_s();
	/* Until the proxy answers: then the socket turns readable. */
	for (struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
	     now_s() - t0 < 4 && poll(&pfd, 1, 200) == 0; sent++)
		client_send(&c, sent < strlen(head) ? head + sent : "a", 1);
	read_response_ok(&c, &r, 0);
	took = now_s() - t0;
	assert_status(&r, 408);
	response_free(&r);
	if (took < 0.8 || took > 2.5)
		fail_msg("408 after %.2f s with --header-timeout 1", took);
	assert_int_equal(origin_request_count(og), 0);
	client_close(&c);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(idle_client_is_closed),
		E2E_TEST(stalled_origin_body_ends_exchange),
		E2E_TEST(trickled_head_gets_408),
	};

	return E2E_RUN("e2e_timeouts", tests);
}
