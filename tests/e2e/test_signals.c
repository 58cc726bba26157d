/*
 * Signals: SIGTERM and SIGINT end the daemon promptly with status 0, also
 * with connections open; a client that goes away mid-response (the proxy's
 * next write meets EPIPE) does not take the daemon down.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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
get_small(struct origin *og)
{
	struct response r;
	char url[128];

	fetch(px.port, "GET", origin_url(og, "/small", url, sizeof(url)), &r);
	assert_status(&r, 200);
	assert_body(&r, "small");
	response_free(&r);
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
	struct origin *og = origin_start(handle, NULL);
	struct client idle, waiting;
	char url[128];
	double took;

	proxy_start(&px, NULL);
	get_small(og);                  /* leaves a pooled upstream connection */
	client_open(&idle, px.port);    /* a client connection with no request */
	client_open(&waiting, px.port); /* a request the origin never answers */
	client_sendf(&waiting, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	             origin_url(og, "/silent", url, sizeof(url)), origin_port(og));
	assert_true(origin_wait_requests(og, 2, 3000));
	took = proxy_stop_with(&px, SIGTERM);
	if (took > 3.0)
		fail_msg("exit took %.2f s after SIGTERM with connections open", took);
	client_close(&idle);
	client_close(&waiting);
}

static void
client_gone_mid_response(void)
{
	struct origin *og = origin_start(handle, NULL);
	char url[128];

	proxy_start(&px, NULL);
	for (int round = 0; round < 4; round++) {
		struct client c;
		char buf[65536];
		size_t got = 0;

		client_open(&c, px.port);
		client_sendf(&c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
		             origin_url(og, "/huge", url, sizeof(url)), origin_port(og));
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
		get_small(og);
	}
	proxy_stop(&px);
}

static void
client_gone_before_response(void)
{
	struct origin *og = origin_start(handle, NULL);
	char url[128];

	proxy_start(&px, NULL);
	for (int round = 0; round < 2; round++) {
		struct client c;

		client_open(&c, px.port);
		client_sendf(&c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
		             origin_url(og, "/slow", url, sizeof(url)), origin_port(og));
		assert_true(origin_wait_requests(og, (unsigned)(2 * round + 1), 3000));
		if (round)
			client_abort(&c);
		else
			client_close(&c);
		sleep_ms(700); /* the origin answers meanwhile */
		proxy_assert_alive(&px);
		get_small(og);
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
	};

	return E2E_RUN("e2e_signals", tests);
}
