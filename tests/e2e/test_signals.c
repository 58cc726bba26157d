/*
 * Signals: SIGTERM and SIGINT end the daemon with status 0, at once when
 * nothing is in flight; responses in flight may finish within --grace, and
 * a second signal ends it at once. A client that goes away mid-response
 * (the proxy's next write meets EPIPE) does not take the daemon down.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "origin.h"

#define HUGE_LEN (256ull * 1024 * 1024) /* far more than any socket buffers hold */

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;

	(void)arg;
	if (strcmp(t, "/huge") == 0) {
		origin_reply_pattern(c, 200, NULL, HUGE_LEN);
	} else if (strcmp(t, "/slow") == 0) {
		origin_pause(c, 500);
		origin_reply(c, 200, NULL, "slow but sure");
	} else if (strcmp(t, "/silent") == 0) {
		origin_stay_silent(c, 30000);
	} else {
		origin_reply(c, 200, NULL, "small");
	}
}

static void
sigterm_exits_promptly(void)
{
	double took;

	proxy_start(&px, NULL);
	took = proxy_stop_with(&px, SIGTERM);
	if (took > 2.0)
		fail_msg("exit took %.2f s after SIGTERM", took);
}

static void
sigint_exits_promptly(void)
{
	double took;

	proxy_start(&px, NULL);
	took = proxy_stop_with(&px, SIGINT);
	if (took > 2.0)
		fail_msg("exit took %.2f s after SIGINT", took);
}

static void
sigterm_with_connections_open(void)
{
	static const char *const args[] = {"--grace", "1", NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client idle, waiting;
	double took;

	proxy_start(&px, args);
	/* Leaves a pooled upstream connection. */
	expect_get(px.port, og, "/small", 200, "small");
	client_open(&idle, px.port);    /* a client connection with no request */
	client_open(&waiting, px.port); /* a request the origin never answers */
	send_get(&waiting, og, "/silent");
	assert_true(origin_wait_requests(og, 2, 3000));
	took = proxy_stop_with(&px, SIGTERM);
	if (took > 3.0)
		fail_msg("exit took %.2f s after SIGTERM with connections open", took);
	client_close(&idle);
	client_close(&waiting);
}

/* A response in flight at SIGTERM arrives whole; then the daemon exits by itself. */
static void
sigterm_lets_responses_finish(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c, idle;
	struct response r;
	double took;

	proxy_start(&px, NULL);
	client_open(&idle, px.port);
	client_open(&c, px.port);
	send_get(&c, og, "/slow");
	assert_true(origin_wait_requests(og, 1, 3000));
	kill(px.pid, SIGTERM);
	/* The idle client is let go at once; no new client gets in. */
	assert_client_eof(&idle, 1000);
	client_close(&idle);
	sleep_ms(100);
	{
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px.port),
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		assert_int_not_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
	}
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_body(&r, "slow but sure");
	assert_non_null(resp_header(&r, "Connection"));
	assert_string_equal(resp_header(&r, "Connection"), "close");
	response_free(&r);
	client_close(&c);
	took = proxy_wait_exit(&px, 4000);
	if (took > 3.0)
		fail_msg("the daemon took %.2f s to exit after its last response", took);
}

/* The proxy with args, one request in flight that the origin never answers, then SIGTERM. */
static void
stop_with_a_silent_request(const char *const args[], struct client *c)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, args);
	client_open(c, px.port);
	send_get(c, og, "/silent");
	assert_true(origin_wait_requests(og, 1, 3000));
	kill(px.pid, SIGTERM);
}

/* A second signal does not wait for the grace period. */
static void
second_signal_stops_at_once(void)
{
	struct client c;
	double took;

	stop_with_a_silent_request(NULL, &c);
	sleep_ms(200);
	proxy_assert_alive(&px);   /* waiting for the response, up to --grace 10 */
	took = proxy_stop_with(&px, SIGINT);
	if (took > 1.0)
		fail_msg("exit took %.2f s after the second signal", took);
	client_close(&c);
}

/* An exchange that never ends is cut off when the grace period is over. */
static void
grace_period_ends(void)
{
	static const char *const args[] = {"--grace", "1", NULL};
	struct client c;
	double took;

	stop_with_a_silent_request(args, &c);
	took = proxy_wait_exit(&px, 4000);
	if (took < 0.8 || took > 2.5)
		fail_msg("exit %.2f s after SIGTERM with --grace 1", took);
	client_close(&c);
}

static void
client_gone_mid_response(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	for (int round = 0; round < 4; round++) {
		struct client c;
		char buf[65536];
		size_t got = 0;

		client_open(&c, px.port);
		send_get(&c, og, "/huge");
		/* Take a little of the response, then vanish while the proxy is still writing. */
		while (got < 256 * 1024) {
			ssize_t n = recv(c.fd, buf, sizeof(buf), 0);

			if (n <= 0)
				fail_msg("the response stopped after %zu bytes", got);
			got += (size_t)n;
		}
		if (round % 2)
			client_abort(&c); /* reset */
		else
			client_close(&c); /* orderly close; the proxy's writes then fail */
		sleep_ms(200);
		proxy_assert_alive(&px);
		expect_get(px.port, og, "/small", 200, "small");
	}
	proxy_stop(&px);
}

static void
client_gone_before_response(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	for (int round = 0; round < 2; round++) {
		struct client c;

		client_open(&c, px.port);
		send_get(&c, og, "/slow");
		assert_true(origin_wait_requests(og, (unsigned)(2 * round + 1), 3000));
		if (round)
			client_abort(&c);
		else
			client_close(&c);
		sleep_ms(700); /* the origin answers meanwhile */
		proxy_assert_alive(&px);
		expect_get(px.port, og, "/small", 200, "small");
	}
	assert_origin_clean(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(sigterm_exits_promptly),        E2E_TEST(sigint_exits_promptly),
		E2E_TEST(sigterm_with_connections_open), E2E_TEST(client_gone_mid_response),
		E2E_TEST(client_gone_before_response),
		E2E_TEST(sigterm_lets_responses_finish),
		E2E_TEST(second_signal_stops_at_once),
		E2E_TEST(grace_period_ends),
	};

	return E2E_RUN("e2e_signals", tests);
}
