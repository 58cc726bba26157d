/*
 * Pipelining: several requests written at once on one client connection are
 * answered in order, whatever the origin's timing, and whether the proxy
 * answers them itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "harness.h"
#include "origin.h"

#define BIG_LEN (200u * 1024u + 3u)

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;
	char body[256];

	(void)arg;
	if (strcmp(t, "/slow") == 0) {
		origin_pause(c, 300);
		origin_reply(c, 200, NULL, "slow");
	} else if (strcmp(t, "/big") == 0) {
		origin_reply_pattern(c, 200, NULL, BIG_LEN);
	} else if (strncmp(t, "/p/", 3) == 0) {
		snprintf(body, sizeof(body), "body %s%s%s", t + 3, req->body.len ? " " : "",
		         req->body.len ? req->body.data : "");
		origin_reply(c, 200, NULL, body);
	} else {
		origin_reply(c, 404, NULL, "no");
	}
}

/* Appends "GET url HTTP/1.1" + Host (+ extra fields) to buf. */
static void
add_request(char *buf, size_t size, const char *method, struct origin *og, const char *path,
            const char *extra)
{
	size_t used = strlen(buf);
	char url[128];

	snprintf(buf + used, size - used, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n", method,
	         origin_url(og, path, url, sizeof(url)), origin_port(og), extra ? extra : "");
}

static void
three_gets_in_one_send(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	char req[2048] = "";

	proxy_start(&px, NULL);
	add_request(req, sizeof(req), "GET", og, "/p/a", NULL);
	add_request(req, sizeof(req), "GET", og, "/p/b", NULL);
	add_request(req, sizeof(req), "GET", og, "/p/c", NULL);
	client_open(&c, px.port);
	assert_int_equal(client_send(&c, req, strlen(req)), 0);
	expect_response(&c, 200, "body a");
	expect_response(&c, 200, "body b");
	expect_response(&c, 200, "body c");
	/* The connection is still good for more. */
	req[0] = '\0';
	add_request(req, sizeof(req), "GET", og, "/p/d", NULL);
	assert_int_equal(client_send(&c, req, strlen(req)), 0);
	expect_response(&c, 200, "body d");
	client_close(&c);
	assert_int_equal(origin_request_count(og), 4);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
slow_first_response_keeps_order(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	char req[2048] = "";

	proxy_start(&px, NULL);
	add_request(req, sizeof(req), "GET", og, "/slow", NULL);
	add_request(req, sizeof(req), "GET", og, "/p/b", NULL);
	add_request(req, sizeof(req), "GET", og, "/big", NULL);
	add_request(req, sizeof(req), "GET", og, "/p/d", NULL);
	client_open(&c, px.port);
	assert_int_equal(client_send(&c, req, strlen(req)), 0);
	expect_response(&c, 200, "slow");
	expect_response(&c, 200, "body b");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, BIG_LEN);
	assert_true(r.body.pattern_ok);
	response_free(&r);
	expect_response(&c, 200, "body d");
	client_close(&c);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
last_pipelined_request_closes(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	char req[2048] = "";

	proxy_start(&px, NULL);
	add_request(req, sizeof(req), "GET", og, "/p/1", NULL);
	add_request(req, sizeof(req), "GET", og, "/p/2", NULL);
	add_request(req, sizeof(req), "GET", og, "/p/3", "Connection: close\r\n");
	client_open(&c, px.port);
	assert_int_equal(client_send(&c, req, strlen(req)), 0);
	expect_response(&c, 200, "body 1");
	expect_response(&c, 200, "body 2");
	expect_response(&c, 200, "body 3");
	assert_client_eof(&c, 3000);
	client_close(&c);
	/* The client's close is not the origin's business. */
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
pipelined_bodies_and_head(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	char req[2048] = "";

	proxy_start(&px, NULL);
	add_request(req, sizeof(req), "POST", og, "/p/x", "Content-Length: 5\r\n");
	strcat(req, "hello");
	add_request(req, sizeof(req), "HEAD", og, "/big", NULL);
	add_request(req, sizeof(req), "PUT", og, "/p/y", "Transfer-Encoding: chunked\r\n");
	strcat(req, "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
	add_request(req, sizeof(req), "GET", og, "/p/z", NULL);
	client_open(&c, px.port);
	assert_int_equal(client_send(&c, req, strlen(req)), 0);
	expect_response(&c, 200, "body x hello");
	read_response_ok(&c, &r, RESP_HEAD);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, 0);
	response_free(&r);
	expect_response(&c, 200, "body y abcdefg");
	expect_response(&c, 200, "body z");
	client_close(&c);
	assert_int_equal(origin_request_count(og), 4);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
pipelined_to_two_origins(void)
{
	struct origin *a = origin_start(handle, NULL);
	struct origin *b = origin_start(handle, NULL);
	struct client c;
	char req[2048] = "";

	proxy_start(&px, NULL);
	/* The slow answer comes from one origin, the fast ones from another. */
	add_request(req, sizeof(req), "GET", a, "/slow", NULL);
	add_request(req, sizeof(req), "GET", b, "/p/b", NULL);
	add_request(req, sizeof(req), "GET", a, "/p/c", NULL);
	add_request(req, sizeof(req), "GET", b, "/p/d", NULL);
	client_open(&c, px.port);
	assert_int_equal(client_send(&c, req, strlen(req)), 0);
	expect_response(&c, 200, "slow");
	expect_response(&c, 200, "body b");
	expect_response(&c, 200, "body c");
	expect_response(&c, 200, "body d");
	client_close(&c);
	assert_int_equal(origin_request_count(a), 2);
	assert_int_equal(origin_request_count(b), 2);
	assert_origin_clean(a);
	assert_origin_clean(b);
	proxy_stop(&px);
}

/* A TRACE the proxy answers itself (Max-Forwards: 0), reflecting it: about 3 KB each way. */
#define TRACE_FILLER 3000
/* More than any socket buffers on the way hold, so that the client's sends stop. */
#define TRACE_MAX 20000

static size_t
trace_request(char *buf, size_t size, unsigned n)
{
	static char filler[TRACE_FILLER + 1];

	memset(filler, 'f', TRACE_FILLER);
	return (size_t)snprintf(buf, size,
	                        "TRACE http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"
	                        "Max-Forwards: 0\r\nX-N: %u\r\nX-Filler: %s\r\n\r\n",
	                        n, filler);
}

/*
 * Sends requests on c until it takes no more for a while: the proxy has
 * stopped reading, its answers waiting for a socket the client does not
 * read. How many were sent whole; the next is in req, sent up to *off of
 * its *len bytes.
 */
static unsigned
send_until_the_proxy_stops_reading(struct client *c, char *req, size_t size, size_t *off,
                                   size_t *len)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
	unsigned sent = 0;

	*off = *len = 0;
	while (sent < TRACE_MAX) {
		ssize_t n;

		if (*off == *len) {
			*len = trace_request(req, size, sent);
			*off = 0;
		}
		n = send(c->fd, req + *off, *len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			if (poll(&pfd, 1, 500) == 0)
				return sent;
			continue;
		}
		if (n <= 0)
			fail_msg("sending request %u: %s", sent,
			         n < 0 ? strerror(errno) : "nothing sent");
		*off += (size_t)n;
		if (*off == *len)
			sent++;
	}
	fail_msg("the proxy read %u requests whose answers nobody read", sent);
	return sent;
}

/* The answer to trace_request(n), whole. */
static void
expect_trace(struct client *c, unsigned n)
{
	struct response r;
	char want[32];

	read_response_ok(c, &r, 0);
	assert_status(&r, 200);
	snprintf(want, sizeof(want), "\r\nX-N: %u\r\n", n);
	if (!r.body.data || !strstr(r.body.data, want) || r.body.len < TRACE_FILLER)
		fail_msg("answer %u: %llu bytes, not the request reflected", n,
		         (unsigned long long)r.body.len);
	response_free(&r);
}

/*
 * A client pipelines requests the proxy answers itself and stops reading:
 * once its socket takes nothing more, the proxy stops reading requests
 * too, and when the client reads again every answer arrives, whole and in
 * order.
 */
static void
local_answers_wait_for_a_client_that_stops_reading(void)
{
	static char req[TRACE_FILLER + 256];
	struct client c;
	int small = 4096, large = 4 << 20;
	size_t off, len;
	unsigned sent;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	assert_int_equal(setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	sent = send_until_the_proxy_stops_reading(&c, req, sizeof(req), &off, &len);
	/* Megabytes wait: read them through a wide window, or the head cut short times out. */
	assert_int_equal(setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &large, sizeof(large)), 0);
	for (unsigned i = 0; i < sent; i++)
		expect_trace(&c, i);
	/* The request cut short goes on, and is answered too. */
	assert_int_equal(client_send(&c, req + off, len - off), 0);
	expect_trace(&c, sent);
	client_close(&c);
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(three_gets_in_one_send),        E2E_TEST(slow_first_response_keeps_order),
		E2E_TEST(last_pipelined_request_closes), E2E_TEST(pipelined_bodies_and_head),
		E2E_TEST(pipelined_to_two_origins),
		E2E_TEST(local_answers_wait_for_a_client_that_stops_reading),
	};

	return E2E_RUN("e2e_pipelining", tests);
}
