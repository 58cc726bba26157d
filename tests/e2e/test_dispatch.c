/*
 * Dispatch: a request goes to whichever connection for its host frees
 * first, --max-conns-per-host caps the connections, --queue-timeout bounds
 * the wait, and a client that leaves the queue disturbs nobody.
 *
 * The origin makes the races deterministic: it holds a response until the
 * test releases it (a gate), or holds back accepts so that a new connect
 * stays in progress for a second or more (origin_hold_accepts).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

/* Responses to /hold wait for a ticket; the test hands them out. */
struct gate {
	atomic_int tickets;
	atomic_bool open;   /* every /hold passes */
};

static void
gate_wait(struct gate *g, struct origin_conn *c)
{
	for (int waited = 0; waited < 20000; waited += 5) {
		int t = atomic_load(&g->tickets);

		if (atomic_load(&g->open) ||
		    (t > 0 && atomic_compare_exchange_weak(&g->tickets, &t, t - 1)))
			return;
		origin_pause(c, 5);
	}
}

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	struct gate *g = arg;

	if (strcmp(req->head.target, "/hold") == 0) {
		gate_wait(g, c);
		origin_reply(c, 200, NULL, "held");
	} else if (strcmp(req->head.target, "/slow") == 0) {
		origin_pause(c, 300);
		origin_reply(c, 200, NULL, "slow");
	} else if (strcmp(req->head.target, "/last") == 0) {
		/* Keep-alive on paper, then a close with the next request unread: a reset. */
		origin_pause(c, 200);
		origin_reply(c, 200, NULL, "last");
		origin_pause(c, 200);
		origin_reset(c);
	} else if (strcmp(req->head.target, "/brief") == 0) {
		origin_pause(c, 50);
		origin_reply(c, 200, NULL, "brief");
	} else {
		origin_reply(c, 200, NULL, "fast");
	}
}

/* The conn_no the origin recorded for the last request to path. */
static unsigned
conn_of(struct origin *og, const char *path)
{
	unsigned found = 0;

	for (unsigned i = 0; i < origin_request_count(og); i++) {
		const struct origin_request *r = origin_request_at(og, i);

		if (strcmp(r->head.target, path) == 0)
			found = r->conn_no;
	}
	return found;
}

/* How long a counter or the origin gets to show what a case waits for. */
#define WAIT_MS 5000
/*
 * A connect the origin held back completes when its SYN is sent again:
 * after 1 s, 3 s, then 7 s from the first.
 */
#define CONNECT_WAIT_MS 8000

/*
 * The counters line once counter name reads want; fails after WAIT_MS,
 * saying what was waited for (what).
 */
static const char *
expect_counter(const char *name, unsigned long want, const char *what, const char *file, int line)
{
	double deadline = now_s() + WAIT_MS / 1000.0;
	const char *stats;

	while (stats_get(stats = proxy_stats(&px), name) != want) {
		if (now_s() > deadline)
			fail_msg("%s:%d: %s: after %d ms the counter '%s' reads %lu, expected %lu\n"
			         "  line: %s",
			         file, line, what, WAIT_MS, name, stats_get(stats, name), want,
			         stats);
		sleep_ms(10);
	}
	return stats;
}
#define counter_becomes(name, want, what)                                                          \
	expect_counter((name), (want), (what), __FILE__, __LINE__)

/* The origin has accepted n connections, and no more. */
static void
expect_connections(struct origin *og, unsigned n, const char *file, int line)
{
	double deadline = now_s() + CONNECT_WAIT_MS / 1000.0;

	while (origin_connection_count(og) < n && now_s() < deadline)
		sleep_ms(10);
	if (origin_connection_count(og) != n)
		fail_msg("%s:%d: the origin accepted %u connections within %d ms, expected %u",
		         file, line, origin_connection_count(og), CONNECT_WAIT_MS, n);
}
#define wait_connections(og, n) expect_connections((og), (n), __FILE__, __LINE__)

/*
 * The set-up of a race: a's request keeps the only connection busy for
 * 300 ms, then b's request arrives while no new connect can complete.
 * Returns when b was sent.
 */
static double
start_race(struct origin *og, struct client *a, struct client *b)
{
	client_open(a, px.port);
	send_get(a, og, "/slow");
	wait_connections(og, 1);
	origin_hold_accepts(og);
	client_open(b, px.port);
	send_get(b, og, "/fast");
	return now_s();
}

/*
 * A request arrives while the only connection is busy; its new connect
 * cannot complete for a second. The busy connection frees up after 300 ms
 * and serves it; the connect, once through, lands in the pool.
 */
static void
freed_connection_beats_the_new_connect(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client a, b, c;
	const char *stats;
	double t0, took;

	proxy_start(&px, NULL);
	t0 = start_race(og, &a, &b);
	expect_response(&a, 200, "slow");
	expect_response(&b, 200, "fast");
	took = now_s() - t0;
	if (took > 0.9)
		fail_msg("the queued request took %.2f s: it waited for its own connect", took);
	assert_int_equal(conn_of(og, "/fast"), 1);
	assert_int_equal(origin_connection_count(og), 1);
	origin_release_accepts(og);
	/* The SYN is sent again after 1 s (or 3 s): then the connection is pooled. */
	wait_connections(og, 2);
	stats = counter_becomes("unused", 1, "the late connect lands in the pool, unused");
	assert_int_equal(stats_get(stats, "freed-up"), 1);
	assert_int_equal(stats_get(stats, "unused"), 1);
	assert_int_equal(stats_get(stats, "connects"), 2);
	/* Two requests at once now find two idle connections: no third connect. */
	client_close(&a);
	client_open(&a, px.port);
	send_get(&a, og, "/brief");
	client_open(&c, px.port);
	send_get(&c, og, "/brief");
	expect_response(&a, 200, "brief");
	expect_response(&c, 200, "brief");
	assert_int_equal(origin_connection_count(og), 2);
	client_close(&a);
	client_close(&b);
	client_close(&c);
	assert_origin_clean(og);
	proxy_stop(&px);
}

/* The client of a queued request leaves: its connect still lands in the pool. */
static void
abandoned_connect_is_pooled(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client a, b;

	proxy_start(&px, NULL);
	origin_hold_accepts(og);
	client_open(&a, px.port);
	send_get(&a, og, "/fast");
	counter_becomes("queued", 1, "a's request waits for the connect it started");
	/* A reset: a FIN alone could be a half-close, after which the answer is still wanted. */
	client_abort(&a);
	counter_becomes("queued", 0, "a's request leaves the queue with its client");
	/* Still held back: the client left before its connect could complete. */
	assert_int_equal(origin_connection_count(og), 0);
	origin_release_accepts(og);
	wait_connections(og, 1);
	counter_becomes("unused", 1, "the abandoned connect lands in the pool, unused");
	client_open(&b, px.port);
	send_get(&b, og, "/fast");
	expect_response(&b, 200, "fast");
	assert_int_equal(origin_connection_count(og), 1);
	assert_int_equal(origin_count_requests(og, "GET", "/fast"), 1);
	client_close(&b);
	proxy_stop(&px);
}

/*
 * --max-conns-per-host 100: a hundred held responses take a hundred
 * connections; the 101st request waits, and is served on the first one
 * that frees up.
 */
static void
cap_holds_and_the_next_request_gets_a_freed_connection(void)
{
	static const char *const args[] = {"--max-conns-per-host", "100", NULL};
	static struct client held[100];
	struct gate g = {0};
	struct origin *og = origin_start(handle, &g);
	struct client extra;
	const char *stats;

	proxy_start(&px, args);
	for (int i = 0; i < 100; i++) {
		client_open(&held[i], px.port);
		send_get(&held[i], og, "/hold");
	}
	if (!origin_wait_requests(og, 100, 10000))
		fail_msg("only %u of 100 held requests reached the origin",
		         origin_request_count(og));
	client_open(&extra, px.port);
	send_get(&extra, og, "/fast");
	/*
	 * A request is queued even when it starts a connect of its own; that
	 * connect would be counted in the same breath, so the same line tells.
	 */
	stats = counter_becomes("queued", 1, "the 101st request waits for a connection");
	assert_int_equal(stats_get(stats, "connects"), 100);
	assert_int_equal(origin_connection_count(og), 100);
	assert_int_equal(origin_request_count(og), 100);
	atomic_store(&g.tickets, 1);
	expect_response(&extra, 200, "fast");
	assert_int_equal(origin_connection_count(og), 100);
	atomic_store(&g.open, true);
	for (int i = 0; i < 100; i++) {
		expect_response(&held[i], 200, "held");
		client_close(&held[i]);
	}
	client_close(&extra);
	stats = proxy_stats(&px);
	assert_int_equal(stats_get(stats, "connects"), 100);
	assert_origin_clean(og);
	proxy_stop(&px);
}

/* A hundred clients at once through a cap of 4 open four connections, no more. */
static void
cap_holds_under_a_hundred_clients(void)
{
	static const char *const args[] = {"--max-conns-per-host", "4", NULL};
	static struct client cl[100];
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, args);
	for (int i = 0; i < 100; i++) {
		client_open(&cl[i], px.port);
		send_get(&cl[i], og, "/brief");
	}
	for (int i = 0; i < 100; i++) {
		expect_response(&cl[i], 200, "brief");
		client_close(&cl[i]);
	}
	assert_int_equal(origin_request_count(og), 100);
	if (origin_connection_count(og) > 4)
		fail_msg("%u origin connections with --max-conns-per-host 4",
		         origin_connection_count(og));
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
queue_timeout_answers_503(void)
{
	static const char *const args[] = {"--max-conns-per-host", "1", "--queue-timeout", "1",
	                                   NULL};
	struct gate g = {0};
	struct origin *og = origin_start(handle, &g);
	struct client a, b, c;
	struct response r;
	double t0, took;

	proxy_start(&px, args);
	client_open(&a, px.port);
	send_get(&a, og, "/hold");
	assert_true(origin_wait_requests(og, 1, 5000));
	t0 = now_s();
	client_open(&b, px.port);
	send_get(&b, og, "/fast");
	read_response_ok(&b, &r, 0);
	took = now_s() - t0;
	assert_status(&r, 503);
	if (!strstr((const char *)r.body.data, "no connection to the origin became free"))
		fail_msg("503 body does not say why: %.*s", (int)r.body.len,
		         (const char *)r.body.data);
	response_free(&r);
	if (took < 0.8 || took > 2.5)
		fail_msg("503 came after %.2f s with --queue-timeout 1", took);
	assert_int_equal(stats_get(proxy_stats(&px), "queue timeouts"), 1);
	atomic_store(&g.open, true);
	expect_response(&a, 200, "held");
	/* The one connection is free again and serves the next request. */
	client_open(&c, px.port);
	send_get(&c, og, "/fast");
	expect_response(&c, 200, "fast");
	assert_int_equal(origin_connection_count(og), 1);
	assert_int_equal(origin_count_requests(og, "GET", "/fast"), 1);
	client_close(&a);
	client_close(&b);
	client_close(&c);
	proxy_stop(&px);
}

/* Of two queued requests the first one's client leaves; the second is served in turn. */
static void
client_leaving_the_queue_disturbs_no_one(void)
{
	static const char *const args[] = {"--max-conns-per-host", "1", NULL};
	struct gate g = {0};
	struct origin *og = origin_start(handle, &g);
	struct client a, b, c, d;

	proxy_start(&px, args);
	client_open(&a, px.port);
	send_get(&a, og, "/hold");
	assert_true(origin_wait_requests(og, 1, 5000));
	client_open(&b, px.port);
	send_get(&b, og, "/fast");
	counter_becomes("queued", 1, "b's request waits for the one connection");
	client_open(&c, px.port);
	send_get(&c, og, "/fast");
	counter_becomes("queued", 2, "c's request waits behind b's");
	client_abort(&b);
	counter_becomes("queued", 1, "b's request leaves the queue with its client");
	atomic_store(&g.open, true);
	expect_response(&a, 200, "held");
	expect_response(&c, 200, "fast");
	client_open(&d, px.port);
	send_get(&d, og, "/fast");
	expect_response(&d, 200, "fast");
	assert_int_equal(origin_connection_count(og), 1);
	assert_int_equal(origin_count_requests(og, "GET", "/fast"), 2);
	client_close(&a);
	client_close(&c);
	client_close(&d);
	assert_origin_clean(og);
	proxy_stop(&px);
}

/*
 * A queued request is handed a connection that an exchange just finished
 * with, and the origin resets it: the request is retried on a new
 * connection like any request on a stale pooled one.
 */
static void
freed_connection_found_dead_is_retried(void)
{
	static const char *const args[] = {"--max-conns-per-host", "1", NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client a, b;

	proxy_start(&px, args);
	client_open(&a, px.port);
	send_get(&a, og, "/last");
	wait_connections(og, 1);
	client_open(&b, px.port);
	send_get(&b, og, "/fast");
	expect_response(&a, 200, "last");
	expect_response(&b, 200, "fast");
	assert_int_equal(conn_of(og, "/fast"), 2);
	assert_int_equal(stats_get(proxy_stats(&px), "retries"), 1);
	client_close(&a);
	client_close(&b);
	proxy_stop(&px);
}

/*
 * With --no-connect-race a queued request waits for the connect it caused,
 * even when another connection frees up first: the comparison mode.
 */
static void
no_connect_race_waits_for_its_own_connect(void)
{
	static const char *const args[] = {"--no-connect-race", NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client a, b;
	double t0, took;

	proxy_start(&px, args);
	t0 = start_race(og, &a, &b);
	expect_response(&a, 200, "slow");
	/*
	 * a's connection, free now, goes to the pool and b keeps waiting: the
	 * connect is released only once the proxy has made that choice.
	 */
	counter_becomes("idle", 1, "a's freed connection is pooled while b waits for its connect");
	assert_int_equal(origin_connection_count(og), 1);
	origin_release_accepts(og);
	expect_response(&b, 200, "fast");
	took = now_s() - t0;
	if (took < 0.9)
		fail_msg("with --no-connect-race the request was served after %.2f s, before "
		         "its connect could complete", took);
	assert_int_equal(conn_of(og, "/fast"), 2);
	assert_int_equal(stats_get(proxy_stats(&px), "freed-up"), 0);
	client_close(&a);
	client_close(&b);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(freed_connection_beats_the_new_connect),
		E2E_TEST(abandoned_connect_is_pooled),
		E2E_TEST(cap_holds_and_the_next_request_gets_a_freed_connection),
		E2E_TEST(cap_holds_under_a_hundred_clients),
		E2E_TEST(queue_timeout_answers_503),
		E2E_TEST(client_leaving_the_queue_disturbs_no_one),
		E2E_TEST(freed_connection_found_dead_is_retried),
		E2E_TEST(no_connect_race_waits_for_its_own_connect),
	};

	return E2E_RUN("dispatch", tests);
}
