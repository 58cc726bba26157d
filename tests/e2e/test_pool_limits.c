/*
 * Pool limits: -t (idle timeout of pooled connections), -m (idle
 * connections kept per host:port) and -M (idle connections kept in all;
 * the oldest go first).
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	char body[160];

	(void)arg;
	if (strcmp(req->head.target, "/slow") == 0) {
		origin_pause(c, 300);
		origin_reply(c, 200, NULL, "slow");
	} else {
		snprintf(body, sizeof(body), "ok %s", req->head.target);
		origin_reply(c, 200, NULL, body);
	}
}

enum upstream_conn {
	NEW,      /* the first request on its upstream connection */
	POOLED,   /* on a connection that served before and waited in the pool */
};

/*
 * A GET of path on og from a new client connection: its own answer comes
 * back, and the origin saw it on the kind of connection the limits call
 * for.
 */
static void
get_ok(struct origin *og, const char *path, enum upstream_conn on)
{
	const struct origin_request *q;
	char body[160];

	snprintf(body, sizeof(body), "ok %s", path);
	expect_get(px.port, og, path, 200, body);
	q = origin_last_request(og);
	assert_string_equal(q->head.target, path);
	if ((on == POOLED) != (q->seq > 1))
		fail_msg("GET %s went on %s upstream connection (request %u on the origin's "
		         "connection %u), expected %s one",
		         path, q->seq > 1 ? "a pooled" : "a new", q->seq, q->conn_no,
		         on == POOLED ? "a pooled" : "a new");
}

static void
idle_timeout_closes_pooled_connection(void)
{
	static const char *const args[] = {"-t", "1", NULL};
	struct origin *og = origin_start(handle, NULL);
	double t0, took;

	proxy_start(&px, args);
	get_ok(og, "/a", NEW);
	t0 = now_s();
	sleep_ms(400);
	assert_int_equal(origin_peer_closed_count(og), 0); /* still pooled */
	if (!origin_wait_peer_closed(og, 1, 4000))
		fail_msg("the idle upstream connection was still open 4 s after -t 1");
	took = now_s() - t0;
	if (took < 0.8)
		fail_msg("the idle upstream connection was closed after %.2f s with -t 1", took);
	get_ok(og, "/b", NEW);
	assert_int_equal(origin_connection_count(og), 2);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
max_idle_per_host(void)
{
	static const char *const args[] = {"-m", "1", NULL};
	struct origin *og = origin_start(handle, NULL);
	struct client c[3];

	proxy_start(&px, args);
	/* Three requests at once need three upstream connections. */
	for (int i = 0; i < 3; i++) {
		client_open(&c[i], px.port);
		send_get(&c[i], og, "/slow");
	}
	for (int i = 0; i < 3; i++) {
		expect_response(&c[i], 200, "slow");
		client_close(&c[i]);
	}
	assert_int_equal(origin_connection_count(og), 3);
	/* Only one may stay idle. */
	if (!origin_wait_peer_closed(og, 2, 3000))
		fail_msg("with -m 1, %u of 3 idle upstream connections were closed",
		         origin_peer_closed_count(og));
	sleep_ms(200);
	assert_int_equal(origin_peer_closed_count(og), 2);
	/* And the one kept is used. */
	get_ok(og, "/after", POOLED);
	assert_int_equal(origin_connection_count(og), 3);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
max_idle_total(void)
{
	static const char *const args[] = {"-M", "1", NULL};
	struct origin *a = origin_start(handle, NULL);
	struct origin *b = origin_start(handle, NULL);
	double deadline;

	proxy_start(&px, args);
	get_ok(a, "/a", NEW);
	get_ok(b, "/b", NEW);
	/* Two idle connections, room for one: one of them goes. */
	deadline = now_s() + 3.0;
	while (origin_peer_closed_count(a) + origin_peer_closed_count(b) < 1 && now_s() < deadline)
		sleep_ms(10);
	sleep_ms(200);
	if (origin_peer_closed_count(a) + origin_peer_closed_count(b) != 1)
		fail_msg("with -M 1 and two idle upstream connections, %u were closed",
		         origin_peer_closed_count(a) + origin_peer_closed_count(b));
	/* The oldest goes: the one to b, idle since later, stays and is used. */
	get_ok(b, "/again", POOLED);
	assert_int_equal(origin_peer_closed_count(a), 1);
	assert_int_equal(origin_connection_count(b), 1);
	assert_origin_clean(a);
	assert_origin_clean(b);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(idle_timeout_closes_pooled_connection),
		E2E_TEST(max_idle_per_host),
		E2E_TEST(max_idle_total),
	};

	return E2E_RUN("e2e_pool_limits", tests);
}
