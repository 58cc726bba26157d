/*
 * CONNECT tunnels to a raw-TCP origin: the 200 answer, 256 MiB each way at
 * the same time, bytes sent right behind the CONNECT head, half-close in
 * either direction, resets on either side, malformed authorities (400), an
 * unreachable port (502), --connect-ports (403 for a port it does not list,
 * 443 only by default), --tunnel-timeout, and plain requests afterwards.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "harness.h"
#include "origin.h"

#define BULK (256ull * 1024 * 1024)
#define IDLE_MS 10000

static struct proxy px;
static const char *const any_port[] = {"--connect-ports", "*", NULL};

/* What the origin's side of a tunnel saw; written by its thread, then done is set. */
static struct {
	struct body got;
	struct exchange x;
	int rc;
	atomic_uint_fast64_t received;
	double ended_at;
	atomic_bool done;
} far;

static void
far_reset(void)
{
	body_free(&far.got);
	memset(&far, 0, sizeof(far));
	body_init(&far.got, 4096);
}

static void
far_free(void *arg)
{
	(void)arg;
	body_free(&far.got);
}

/* Waits for the origin's handler to finish; fails the test if it does not in time. */
static void
wait_far_done(int timeout_ms, const char *what)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (!atomic_load(&far.done)) {
		if (now_s() >= deadline)
			fail_msg("the origin's end of the tunnel did not finish within %d ms: %s "
			         "(it has received %llu bytes so far)",
			         timeout_ms, what, (unsigned long long)atomic_load(&far.received));
		sleep_ms(5);
	}
}

static const char *
authority(int port)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "127.0.0.1:%d", port);
	return buf;
}

static void
start_test(void)
{
	far_reset();
	harness_defer(far_free, NULL);
}

/* ---- Origin behaviours ---- */

/* Sends BULK pattern bytes while receiving until the end of the stream. */
static void
bulk_origin(struct origin_conn *c, void *arg)
{
	(void)arg;
	origin_exchange(c, BULK, &far.got, IDLE_MS, &far.x);
	atomic_store(&far.done, true);
}

/* Records everything until the end of the stream and sends every byte back. */
static void
recording_echo_origin(struct origin_conn *c, void *arg)
{
	char buf[16384];
	long n;

	(void)arg;
	while ((n = origin_recv(c, buf, sizeof(buf), IDLE_MS)) > 0) {
		body_feed(&far.got, buf, (size_t)n);
		atomic_fetch_add(&far.received, (uint64_t)n);
		if (!origin_send(c, buf, (size_t)n))
			break;
	}
	far.rc = n == 0 ? WIRE_OK : (int)n;
	if (n == 0)
		origin_shutdown_write(c);
	atomic_store(&far.done, true);
}

static void
echo_origin(struct origin_conn *c, void *arg)
{
	(void)arg;
	far.rc = origin_echo(c, IDLE_MS, NULL);
	atomic_store(&far.done, true);
}

#define HC_CLIENT_BYTES (1024u * 1024u + 17u)
#define HC_ORIGIN_BYTES (3u * 1024u * 1024u + 5u)

/* Reads until the client's end of stream, then answers and closes. */
static void
reply_after_eof_origin(struct origin_conn *c, void *arg)
{
	(void)arg;
	far.rc = origin_recv_to_eof(c, &far.got, IDLE_MS);
	if (far.rc == WIRE_OK)
		origin_send_pattern(c, 0, HC_ORIGIN_BYTES);
	atomic_store(&far.done, true);
}

/* Sends everything and shuts down writing first, then reads until the end of stream. */
static void
half_close_first_origin(struct origin_conn *c, void *arg)
{
	(void)arg;
	if (origin_send_pattern(c, 0, HC_ORIGIN_BYTES) && origin_shutdown_write(c))
		far.rc = origin_recv_to_eof(c, &far.got, IDLE_MS);
	else
		far.rc = WIRE_IO;
	atomic_store(&far.done, true);
}

/* Reads 1000 bytes, then resets the connection. */
static void
reset_origin(struct origin_conn *c, void *arg)
{
	(void)arg;
	far.rc = origin_recv_exact(c, 1000, &far.got, IDLE_MS);
	origin_reset(c);
	atomic_store(&far.done, true);
}

/* Counts what arrives until the end of the stream or an error. */
static void
counting_origin(struct origin_conn *c, void *arg)
{
	char buf[16384];
	long n;

	(void)arg;
	while ((n = origin_recv(c, buf, sizeof(buf), IDLE_MS)) > 0)
		atomic_fetch_add(&far.received, (uint64_t)n);
	far.rc = (int)n;
	far.ended_at = now_s();
	atomic_store(&far.done, true);
}

/* ---- Checks ---- */

static void
http_handler(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	(void)req;
	(void)arg;
	origin_reply(c, 200, NULL, "plain http");
}

/* The proxy still serves plain requests (to an HTTP origin of its own). */
static void
assert_serves_get(void)
{
	struct origin *og = origin_start(http_handler, NULL);

	proxy_assert_alive(&px);
	expect_get(px.port, og, "/after", 200, "plain http");
	origin_stop(og);
}

/* ", intact" or ", first wrong byte at offset N", for messages. */
static const char *
pattern_state(const struct body *b, char *buf, size_t size)
{
	if (b->pattern_ok)
		snprintf(buf, size, ", intact");
	else
		snprintf(buf, size, ", first wrong byte at offset %llu",
		         (unsigned long long)b->pattern_bad);
	return buf;
}

static void
assert_pattern_stream(const char *what, const struct body *b, uint64_t len)
{
	char state[64];

	if (b->len != len || !b->pattern_ok)
		fail_msg("%s: %llu of %llu bytes%s", what, (unsigned long long)b->len,
		         (unsigned long long)len, pattern_state(b, state, sizeof(state)));
}

/* After the proxy closed (not just half-closed) the client connection, sending fails. */
static void
assert_client_fully_closed(struct client *c, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (now_s() < deadline) {
		if (send(c->fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
		    errno != EWOULDBLOCK)
			return;
		sleep_ms(20);
	}
	fail_msg("the client could still send %d ms after the tunnel ended: the proxy only "
	         "half-closed its side instead of closing it",
	         timeout_ms);
}

/* ---- Tests ---- */

static void
bulk_both_ways_at_once(void)
{
	struct origin *og;
	struct client c;
	struct body got;
	struct exchange x;
	char desc[256];

	start_test();
	og = origin_start_raw(bulk_origin, NULL);
	proxy_start(&px, any_port);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	body_init(&got, 4096);
	client_exchange(&c, BULK, &got, &x);
	print_message("256 MiB each way at once: %.2f s (%.0f MiB/s each way)\n", x.seconds,
	              (double)BULK / 1048576.0 / x.seconds);
	if (x.send_err || x.recv_rc != WIRE_OK || x.sent != BULK || got.len != BULK ||
	    !got.pattern_ok) {
		print_error("client side: %s\n",
		            exchange_describe(&x, BULK, &got, desc, sizeof(desc)));
		body_free(&got);
		fail_msg("the client's side of the tunnel did not move 256 MiB each way intact");
	}
	body_free(&got);
	wait_far_done(5000, "the client finished, the origin did not");
	if (far.x.send_err || far.x.recv_rc != WIRE_OK || far.x.sent != BULK ||
	    far.got.len != BULK || !far.got.pattern_ok)
		fail_msg("origin side: %s",
		         exchange_describe(&far.x, BULK, &far.got, desc, sizeof(desc)));
	client_close(&c);
	assert_int_equal(origin_connection_count(og), 1);
	assert_serves_get();
	proxy_stop(&px);
}

/* The CONNECT head and the first payload bytes leave the client in one send(). */
static void
early_data(size_t early)
{
	struct origin *og;
	struct client c;
	struct response r;
	struct body got;
	const size_t later = 5000;
	char head[128];
	size_t hl;
	char *buf;
	int rc;

	start_test();
	og = origin_start_raw(recording_echo_origin, NULL);
	proxy_start(&px, any_port);
	client_open(&c, px.port);
	hl = (size_t)snprintf(head, sizeof(head), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
	                      authority(origin_port(og)), authority(origin_port(og)));
	buf = malloc(hl + early);
	assert_non_null(buf);
	memcpy(buf, head, hl);
	pattern_fill(buf + hl, 0, early);
	rc = client_send(&c, buf, hl + early);
	free(buf);
	if (rc != 0)
		fail_msg("sending the CONNECT head with %zu bytes behind it: %s", early,
		         strerror(-rc));
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 200);
	response_free(&r);
	/* More bytes after the answer; they must arrive after the early ones. */
	buf = malloc(later);
	assert_non_null(buf);
	pattern_fill(buf, early, later);
	rc = client_send(&c, buf, later);
	free(buf);
	if (rc != 0)
		fail_msg("sending through the tunnel: %s", strerror(-rc));
	client_shutdown_write(&c);

	body_init(&got, 4096);
	rc = client_recv_to_eof(&c, &got);
	if (rc != WIRE_OK) {
		body_free(&got);
		fail_msg("reading the echo: %s after %llu bytes", wire_strerror(rc),
		         (unsigned long long)got.len);
	}
	wait_far_done(3000, "no end of stream after the client shut down writing");
	if (far.got.len != early + later || !far.got.pattern_ok) {
		char state[64];

		body_free(&got);
		fail_msg("the origin received %llu bytes, expected %zu early ones then %zu "
		         "later ones%s",
		         (unsigned long long)far.got.len, early, later,
		         pattern_state(&far.got, state, sizeof(state)));
	}
	assert_pattern_stream("echo at the client", &got, early + later);
	body_free(&got);
	client_close(&c);
	assert_serves_get();
	proxy_stop(&px);
}

static void
early_data_small(void)
{
	early_data(23);
}

static void
early_data_large(void)
{
	/* Larger than any head buffer: most of it is still in the socket at the answer. */
	early_data(200000);
}

static void
client_half_closes_first(void)
{
	struct origin *og;
	struct client c;
	struct body got;
	int rc;

	start_test();
	og = origin_start_raw(reply_after_eof_origin, NULL);
	proxy_start(&px, any_port);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	client_send_pattern(&c, HC_CLIENT_BYTES);
	client_shutdown_write(&c);
	/* The origin answers only once it has seen the end of the client's stream. */
	body_init(&got, 4096);
	rc = client_recv_to_eof(&c, &got);
	wait_far_done(3000, "no end of stream after the client shut down writing");
	if (far.rc != WIRE_OK)
		fail_msg("the origin's read ended with %s after %llu bytes, expected the end of "
		         "the stream after %u",
		         wire_strerror(far.rc), (unsigned long long)far.got.len, HC_CLIENT_BYTES);
	assert_pattern_stream("bytes at the origin before its end of stream", &far.got,
	                      HC_CLIENT_BYTES);
	if (rc != WIRE_OK) {
		body_free(&got);
		fail_msg("after the client shut down writing, reading the origin's %u bytes "
		         "failed: %s after %llu bytes",
		         HC_ORIGIN_BYTES, wire_strerror(rc), (unsigned long long)got.len);
	}
	assert_pattern_stream("bytes the origin sent after the client's end of stream", &got,
	                      HC_ORIGIN_BYTES);
	body_free(&got);
	client_close(&c);
	assert_serves_get();
	proxy_stop(&px);
}

static void
origin_half_closes_first(void)
{
	struct origin *og;
	struct client c;
	struct body got;
	int rc;

	start_test();
	og = origin_start_raw(half_close_first_origin, NULL);
	proxy_start(&px, any_port);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	/* All of the origin's bytes, then its end of stream, before the client sends anything. */
	body_init(&got, 4096);
	rc = client_recv_to_eof(&c, &got);
	if (rc != WIRE_OK) {
		body_free(&got);
		fail_msg("reading the origin's bytes up to its end of stream: %s after %llu bytes",
		         wire_strerror(rc), (unsigned long long)got.len);
	}
	assert_pattern_stream("bytes before the origin's end of stream", &got, HC_ORIGIN_BYTES);
	body_free(&got);
	/* The other direction still works. */
	client_send_pattern(&c, HC_CLIENT_BYTES);
	client_shutdown_write(&c);
	wait_far_done(3000, "no end of stream after the client shut down writing");
	if (far.rc != WIRE_OK)
		fail_msg("the origin's read ended with %s after %llu bytes, expected the end of "
		         "the stream after %u",
		         wire_strerror(far.rc), (unsigned long long)far.got.len, HC_CLIENT_BYTES);
	assert_pattern_stream("bytes the client sent after the origin's end of stream", &far.got,
	                      HC_CLIENT_BYTES);
	client_close(&c);
	assert_serves_get();
	proxy_stop(&px);
}

static void
origin_reset_closes_client(void)
{
	struct origin *og;
	struct client c;
	double t0;

	start_test();
	og = origin_start_raw(reset_origin, NULL);
	proxy_start(&px, any_port);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	client_send_pattern(&c, 1000);
	wait_far_done(3000, "the 1000 bytes did not arrive");
	assert_int_equal(far.rc, WIRE_OK);
	t0 = now_s();
	if (!client_eof(&c, 2000))
		fail_msg("the origin reset its end of the tunnel, but the client connection was "
		         "still open %.1f s later%s",
		         now_s() - t0, wire_buffered(&c.w) ? " (and bytes arrived)" : "");
	print_message("client connection ended %.3f s after the origin's reset\n", now_s() - t0);
	assert_client_fully_closed(&c, 2000);
	client_close(&c);
	assert_serves_get();
	proxy_stop(&px);
}

static void
client_reset_closes_origin(void)
{
	struct origin *og;
	struct client c;
	double deadline, t0;

	start_test();
	og = origin_start_raw(counting_origin, NULL);
	proxy_start(&px, any_port);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	client_send_pattern(&c, 1000);
	deadline = now_s() + 3.0;
	while (atomic_load(&far.received) < 1000 && now_s() < deadline)
		sleep_ms(5);
	if (atomic_load(&far.received) < 1000)
		fail_msg("only %llu of 1000 bytes reached the origin",
		         (unsigned long long)atomic_load(&far.received));
	client_abort(&c);
	t0 = now_s();
	wait_far_done(2000, "the client reset its connection, the origin's stayed open");
	print_message("origin connection ended %.3f s after the client's reset (%s)\n",
	              far.ended_at - t0, far.rc == 0 ? "end of stream" : wire_strerror(far.rc));
	assert_true(far.rc == 0 || far.rc == WIRE_IO);
	assert_int_equal(atomic_load(&far.received), 1000);
	assert_serves_get();
	proxy_stop(&px);
}

/* CONNECT authority answered with status; no tunnel opens. */
static void
expect_connect(const char *auth, int status)
{
	struct client c;
	struct response r;
	int got = client_connect(&c, px.port, auth, &r);

	if (got != status) {
		print_error("CONNECT %s: expected status %d, got %d\n", auth, status, got);
		response_print(&r);
		response_free(&r);
		fail();
	}
	response_free(&r);
	client_close(&c);
}

static void
malformed_and_unreachable(void)
{
	struct origin *og;

	start_test();
	og = origin_start_raw(echo_origin, NULL);
	proxy_start(&px, any_port);
	expect_connect("nohostport", 400);
	expect_connect(":443", 400);
	expect_connect("127.0.0.1:0", 400);
	expect_connect("127.0.0.1:", 400);
	expect_connect("127.0.0.1:65536", 400);
	/* Nothing listens there. */
	expect_connect(authority(free_port()), 502);
	assert_int_equal(origin_connection_count(og), 0);
	assert_serves_get();
	proxy_stop(&px);
}

/* A short echo through a tunnel that just opened. */
static void
echo_check(struct client *c, uint64_t off, size_t len)
{
	char *buf = malloc(len);
	struct body got;
	int rc;

	assert_non_null(buf);
	pattern_fill(buf, off, len);
	rc = client_send(c, buf, len);
	free(buf);
	if (rc != 0)
		fail_msg("sending %zu bytes through the tunnel: %s", len, strerror(-rc));
	body_init(&got, len);
	rc = client_recv_exact(c, len, &got);
	if (rc != WIRE_OK) {
		body_free(&got);
		fail_msg("reading %zu echoed bytes: %s after %llu", len, wire_strerror(rc),
		         (unsigned long long)got.len);
	}
	/* The pattern restarts at 0 in got; compare against what was sent. */
	buf = malloc(len);
	assert_non_null(buf);
	pattern_fill(buf, off, len);
	if (memcmp(buf, got.data, len) != 0) {
		free(buf);
		body_free(&got);
		fail_msg("the echo of %zu bytes differs from what was sent", len);
	}
	free(buf);
	body_free(&got);
}

static void
default_ports_refuse_others(void)
{
	struct origin *og;
	struct client c;
	struct response r;
	int status;

	start_test();
	og = origin_start_raw(echo_origin, NULL);
	/* No --connect-ports: 443 only. */
	proxy_start(&px, NULL);
	expect_connect(authority(origin_port(og)), 403);
	assert_int_equal(origin_connection_count(og), 0);
	/* 443 itself is allowed: whatever happens next, it is not a 403. */
	status = client_connect(&c, px.port, "127.0.0.1:443", &r);
	if (status != 502 && status != 200) {
		print_error("CONNECT 127.0.0.1:443 with the default --connect-ports: expected 200 "
		            "or 502 (allowed, then connected or refused), got %d\n",
		            status);
		response_print(&r);
		fail();
	}
	response_free(&r);
	client_close(&c);
	assert_serves_get();
	proxy_stop(&px);
}

static void
explicit_port_list(void)
{
	struct origin *og, *other;
	struct client c;
	char list[64];
	const char *args[3] = {"--connect-ports", list, NULL};

	start_test();
	og = origin_start_raw(echo_origin, NULL);
	other = origin_start_raw(echo_origin, NULL);
	snprintf(list, sizeof(list), "443,%d,8443", origin_port(og));
	proxy_start(&px, args);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	echo_check(&c, 0, 3000);
	client_close(&c);
	/* A listening port that is not in the list: refused before any connection. */
	expect_connect(authority(origin_port(other)), 403);
	assert_int_equal(origin_connection_count(other), 0);
	assert_int_equal(origin_connection_count(og), 1);
	assert_serves_get();
	proxy_stop(&px);
}

static void
silent_tunnel_times_out(void)
{
	static const char *const args[] = {"--connect-ports", "*", "--tunnel-timeout", "1", NULL};
	struct origin *og;
	struct client c;
	double t0, quiet, closed;

	start_test();
	og = origin_start_raw(echo_origin, NULL);
	proxy_start(&px, args);
	open_tunnel(&c, px.port, authority(origin_port(og)));
	/* Traffic every 300 ms keeps the tunnel open well past one second. */
	t0 = now_s();
	for (uint64_t off = 0;; off += 16) {
		echo_check(&c, off, 16);
		quiet = now_s();
		if (quiet - t0 >= 2.4)
			break;
		sleep_ms(300);
	}
	if (!client_eof(&c, 3000))
		fail_msg("a tunnel silent for %.1f s was still open with --tunnel-timeout 1%s",
		         now_s() - quiet, wire_buffered(&c.w) ? " (and bytes arrived)" : "");
	closed = now_s() - quiet;
	print_message("silent tunnel closed %.2f s after its last traffic\n", closed);
	if (closed < 0.8)
		fail_msg("the tunnel was closed %.2f s after its last traffic, before the 1 s "
		         "timeout",
		         closed);
	if (!origin_wait_closed(og, 1, 2000))
		fail_msg("the proxy closed the client's side of the timed-out tunnel but not the "
		         "origin's");
	client_close(&c);
	assert_serves_get();
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(bulk_both_ways_at_once),
		E2E_TEST(early_data_small),
		E2E_TEST(early_data_large),
		E2E_TEST(client_half_closes_first),
		E2E_TEST(origin_half_closes_first),
		E2E_TEST(origin_reset_closes_client),
		E2E_TEST(client_reset_closes_origin),
		E2E_TEST(malformed_and_unreachable),
		E2E_TEST(default_ports_refuse_others),
		E2E_TEST(explicit_port_list),
		E2E_TEST(silent_tunnel_times_out),
	};

	return E2E_RUN("e2e_tunnel", tests);
}
