/*
 * Dispatch against fake connections: which request gets which connection,
 * in what order, under the per-host cap, when a request leaves, and where
 * the proxy's own background requests stand. The connections are stand-ins
 * for upstream.c (defined below, so the real one is never linked): a test
 * decides when a connect completes or fails, and time is a manual clock.
 * dispatch.c is included so its private structs can be looked at.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/dispatch.c"

/* ---- fake connections ------------------------------------------------------ */

#define MAX_FAKES 64

static struct {
	struct upstream *made[MAX_FAKES];   /* every connection dispatch opened, in order */
	unsigned n;
	unsigned connects;                  /* upstream_connect() calls */
	unsigned closed;
} fakes;

int
upstream_init(struct upstream *up, const struct upstream_context *ctx, const char *host,
              uint16_t port, const char *key, bool tls, bool restricted)
{
	(void)host;
	memset(up, 0, sizeof(*up));
	up->ctx = ctx;
	up->port = port;
	up->tls = tls;
	up->restricted = restricted;
	up->src.keep_alive_hint = -1;
	up->key = key;
	up->src.conn.fd = -1;
	up->state = UPSTREAM_RESOLVING;
	assert_true(fakes.n < MAX_FAKES);
	fakes.made[fakes.n++] = up;
	return 0;
}

void
upstream_connect(struct upstream *up)
{
	up->state = UPSTREAM_CONNECTING;
	fakes.connects++;
}

void
upstream_begin(struct upstream *up)
{
	up->state = UPSTREAM_BUSY;
	up->src.reused = up->exchanges > 0;
}

void
upstream_continue(struct upstream *up)
{
	up->state = UPSTREAM_BUSY;
	up->src.reused = true;
}

bool
upstream_end(struct upstream *up)
{
	up->exchanges++;
	return true;
}

void
upstream_idle(struct upstream *up)
{
	up->state = UPSTREAM_IDLE;
}

/* A fake is dead at reuse when the test set its EOF fact. */
bool
upstream_usable(struct upstream *up)
{
	return !up->src.conn.eof;
}

void
upstream_close(struct upstream *up)
{
	if (up->state == UPSTREAM_CLOSED)
		return;
	up->state = UPSTREAM_CLOSED;
	fakes.closed++;
	up->ctx->ops->gone(up);
}

/* The test's word on a connect in flight. */
static void
connect_completes(struct upstream *up)
{
	assert_int_equal(up->state, UPSTREAM_CONNECTING);
	up->state = UPSTREAM_BUSY;
	up->ctx->ops->ready(up);
}

static void
connect_fails(struct upstream *up, int status)
{
	assert_int_equal(up->state, UPSTREAM_CONNECTING);
	up->ctx->ops->failed(up, status, "refused by the test");
}

/* ---- requests --------------------------------------------------------------- */

struct req {
	struct dispatch_waiter w;
	struct source *src;       /* what it was given */
	int status;               /* what it was refused with */
	int answered;             /* the order of its answer, from 1; 0: none yet */
};

static int answers;

static void
req_ready(struct dispatch_waiter *w, struct source *src)
{
	struct req *r = container_of(w, struct req, w);

	assert_int_equal(r->answered, 0);
	r->src = src;
	r->answered = ++answers;
}

static void
req_failed(struct dispatch_waiter *w, int status, const char *why)
{
	struct req *r = container_of(w, struct req, w);

	(void)why;
	assert_int_equal(r->answered, 0);
	r->status = status;
	r->answered = ++answers;
}

static struct upstream *
upstream_of(const struct req *r)
{
	assert_non_null(r->src);
	return container_of(r->src, struct upstream, src);
}

/* ---- the fixture ---------------------------------------------------------- */

static struct {
	struct ev_loop *loop;
	struct clock clock;
	struct kp_config cfg;
	struct own_addresses own;
	struct fd_budget fds;
	struct dispatch d;
	struct req r[16];
} fx;

static const struct dispatch_target host_a = {
	.host = "a.example", .port = 80, .key = "a.example:80",
};
static const struct dispatch_target host_b = {
	.host = "b.example", .port = 80, .key = "b.example:80",
};

static void
start(unsigned max_per_host, bool race)
{
	config_defaults(&fx.cfg);
	fx.cfg.max_conns_per_host = max_per_host;
	fx.cfg.no_connect_race = !race;
	fx.fds.limit = 100000;
	fx.fds.clients = 16;
	assert_int_equal(dispatch_init(&fx.d, fx.loop, &fx.clock, &fx.cfg, NULL, &fx.own, &fx.fds),
	                 0);
}

static int
setup(void **state)
{
	(void)state;
	memset(&fx, 0, sizeof(fx));
	memset(&fakes, 0, sizeof(fakes));
	memset(&kp_stats, 0, sizeof(kp_stats));
	answers = 0;
	fx.loop = ev_loop_new(0);
	clock_init_manual(&fx.clock, 1000);
	for (unsigned i = 0; i < sizeof(fx.r) / sizeof(fx.r[0]); i++) {
		fx.r[i].w.ready = req_ready;
		fx.r[i].w.failed = req_failed;
	}
	return fx.loop ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	dispatch_shutdown(&fx.d);
	ev_loop_destroy(fx.loop);
	return 0;
}

/* The end of a loop iteration: the checker starts owed connects and frees the dead. */
static void
iteration_ends(void)
{
	ev_run(fx.loop, EVRUN_NOWAIT);
}

static void
ask(unsigned i, const struct dispatch_target *t, enum dispatch_how how)
{
	dispatch_request(&fx.d, &fx.r[i].w, t, how);
}

static void
give_back(unsigned i, bool reusable)
{
	struct source *src = fx.r[i].src;

	assert_non_null(src);
	fx.r[i].src = NULL;
	src->ops->release(src, reusable);
}

static unsigned
open_for(const struct dispatch_target *t)
{
	struct table_node *n = table_find(&fx.d.hosts, t->key);

	return n ? container_of(n, struct dispatch_host, node)->open : 0;
}

/* ---- cases ---------------------------------------------------------------- */

/* Requests that wait are served oldest first, each by the next connection that frees. */
static void
queue_is_first_in_first_out(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 1);
	connect_completes(fakes.made[0]);
	assert_int_equal(fx.r[0].answered, 1);
	assert_int_equal(fx.r[0].w.source, DISPATCH_FROM_CONNECT);
	for (unsigned i = 1; i <= 3; i++)
		ask(i, &host_a, DISPATCH_ANY);
	/* At the cap: they wait, and nothing else is connected. */
	assert_int_equal(fakes.connects, 1);
	assert_int_equal(kp_stats.queued, 3);
	for (unsigned i = 0; i < 3; i++) {
		give_back(i, true);
		assert_int_equal(fx.r[i + 1].answered, (int)i + 2);
		assert_ptr_equal(upstream_of(&fx.r[i + 1]), fakes.made[0]);
		assert_true(fx.r[i + 1].src->reused);
	}
	assert_int_equal(kp_stats.queued, 0);
	/* The first waited too, for its connect. */
	assert_int_equal(kp_stats.queue_waits, 4);
	assert_int_equal(fakes.n, 1);
}

/*
 * A request waiting for its own connect is served by a connection another
 * exchange frees first; the connect, when it lands, goes to the pool.
 */
static void
freed_connection_beats_the_connect(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 2);
	assert_int_equal(fx.r[1].answered, 0);
	give_back(0, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[0]);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_FREED);
	assert_int_equal(kp_stats.requests_on_freed, 1);
	/* The connect nobody waits for any more is not wasted. */
	connect_completes(fakes.made[1]);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_IDLE);
	assert_int_equal(kp_stats.connects_unused, 1);
	assert_int_equal(fx.d.idle, 1);
	assert_int_equal(fx.fds.idle, 1);
	ask(2, &host_a, DISPATCH_ANY);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[1]);
	assert_int_equal(fx.r[2].w.source, DISPATCH_FROM_POOL);
	assert_int_equal(fx.d.idle, 0);
	assert_int_equal(fakes.connects, 2);
}

/* Without the race, a request takes the connect it caused, even when another frees first. */
static void
without_the_race_a_request_waits_for_its_own(void **state)
{
	(void)state;
	start(0, false);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_a, DISPATCH_ANY);
	give_back(0, true);
	assert_int_equal(fx.r[1].answered, 0);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_IDLE);
	connect_completes(fakes.made[1]);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[1]);
}

/* The cap holds under many requests: never more connections than it allows. */
static void
cap_bounds_the_connections_of_a_host(void **state)
{
	(void)state;
	start(2, true);
	for (unsigned i = 0; i < 6; i++)
		ask(i, &host_a, DISPATCH_ANY);
	iteration_ends();
	assert_int_equal(fakes.connects, 2);
	assert_int_equal(open_for(&host_a), 2);
	connect_completes(fakes.made[0]);
	connect_completes(fakes.made[1]);
	assert_int_equal(fx.r[0].answered, 1);
	assert_int_equal(fx.r[1].answered, 2);
	/* Another host is not held back by this one's cap. */
	ask(6, &host_b, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 3);
	for (unsigned i = 0; i < 4; i++) {
		give_back(i, true);
		iteration_ends();
		assert_int_equal(fx.r[i + 2].answered, (int)i + 3);
	}
	assert_int_equal(fakes.connects, 3);
	assert_int_equal(open_for(&host_a), 2);
	/* A connection that may not be reused frees a slot: the checker connects anew. */
	ask(7, &host_a, DISPATCH_ANY);
	give_back(4, false);
	assert_int_equal(fakes.made[0]->state == UPSTREAM_CLOSED ||
	                         fakes.made[1]->state == UPSTREAM_CLOSED,
	                 true);
	iteration_ends();
	assert_int_equal(fakes.connects, 4);
	assert_int_equal(open_for(&host_a), 2);
}

/* A request that leaves the queue disturbs nobody, and is never answered. */
static void
cancel_while_queued(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	for (unsigned i = 1; i <= 3; i++)
		ask(i, &host_a, DISPATCH_ANY);
	dispatch_cancel(&fx.r[2].w);
	assert_false(dispatch_waiting(&fx.r[2].w));
	assert_int_equal(kp_stats.queued, 2);
	give_back(0, true);
	assert_int_equal(fx.r[1].answered, 2);
	give_back(1, true);
	assert_int_equal(fx.r[3].answered, 3);
	assert_int_equal(fx.r[2].answered, 0);
}

/* A request that leaves while its own connect is on the way leaves the connect to the pool. */
static void
cancel_while_connecting(void **state)
{
	(void)state;
	start(0, false);
	ask(0, &host_a, DISPATCH_ANY);
	dispatch_cancel(&fx.r[0].w);
	connect_completes(fakes.made[0]);
	assert_int_equal(fx.r[0].answered, 0);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_IDLE);
	ask(1, &host_a, DISPATCH_ANY);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[0]);
}

/* A failed connect answers the request that caused it; the others go on waiting. */
static void
connect_failure_goes_to_its_requester(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_ANY);
	ask(1, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 2);
	connect_fails(fakes.made[0], 502);
	assert_int_equal(fx.r[0].status, 502);
	assert_int_equal(fx.r[1].answered, 0);
	connect_completes(fakes.made[1]);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[1]);
	iteration_ends();
	assert_int_equal(fakes.closed, 1);
}

/* A stale pooled connection is passed over at reuse: a fresh connect instead. */
static void
dead_pooled_connection_is_passed_over(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	give_back(0, true);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_IDLE);
	fakes.made[0]->src.conn.eof = true;
	ask(1, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_CLOSED);
	assert_int_equal(fx.r[1].answered, 0);
	assert_int_equal(fakes.connects, 2);
	assert_int_equal(fx.d.idle, 0);
}

/* The proxy's own request never starts a connect; it takes what nobody else wants. */
static void
background_never_connects(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_BACKGROUND);
	iteration_ends();
	assert_int_equal(fakes.connects, 0);
	assert_true(dispatch_waiting(&fx.r[0].w));
	/* A client request comes, connects, and is served first. */
	ask(1, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 1);
	connect_completes(fakes.made[0]);
	assert_int_equal(fx.r[1].answered, 1);
	assert_int_equal(fx.r[0].answered, 0);
	/* When it is done, the background request gets the connection. */
	give_back(1, true);
	assert_int_equal(fx.r[0].answered, 2);
	assert_ptr_equal(upstream_of(&fx.r[0]), fakes.made[0]);
	assert_int_equal(fakes.connects, 1);
	/* The counters count clients' requests: the proxy's own is not one. */
	assert_int_equal(kp_stats.requests_on_new, 1);
	assert_int_equal(kp_stats.requests_on_freed + kp_stats.requests_on_reused, 0);
	assert_int_equal(kp_stats.upstream_reuses, 0);
}

/* A freed connection goes to a waiting client request before a background one, whatever came first. */
static void
background_comes_after_clients(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_a, DISPATCH_BACKGROUND);
	ask(2, &host_a, DISPATCH_ANY);
	give_back(0, true);
	assert_int_equal(fx.r[2].answered, 2);
	assert_int_equal(fx.r[1].answered, 0);
	give_back(2, true);
	assert_int_equal(fx.r[1].answered, 3);
	/* An idle connection is taken at once. */
	give_back(1, true);
	ask(3, &host_a, DISPATCH_BACKGROUND);
	assert_int_equal(fx.r[3].answered, 4);
	assert_int_equal(fx.r[3].w.source, DISPATCH_FROM_POOL);
}

/* A connection a background request holds does not count against the cap when a client asks. */
static void
background_does_not_hold_the_cap_against_clients(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	give_back(0, true);
	ask(1, &host_a, DISPATCH_BACKGROUND);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[0]);
	ask(2, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 2);
	connect_completes(fakes.made[1]);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[1]);
	/* Once the background request is over, its connection counts again. */
	give_back(1, true);
	ask(3, &host_a, DISPATCH_ANY);
	assert_ptr_equal(upstream_of(&fx.r[3]), fakes.made[0]);
	ask(4, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 2);
	assert_true(dispatch_queued(&fx.r[4].w));
}

/* A parked connection expires on the clock: the idle timeout, or the origin's shorter hint. */
static void
idle_connection_expires_on_the_clock(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_b, DISPATCH_ANY);
	connect_completes(fakes.made[1]);
	fx.r[1].src->keep_alive_hint = 5;
	give_back(0, true);
	give_back(1, true);
	/* The hint less a second of margin: 4 s. */
	clock_advance(&fx.clock, 3.99);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_IDLE);
	clock_advance(&fx.clock, 0.02);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_CLOSED);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_IDLE);
	clock_advance(&fx.clock, 50 - 4.01 - 0.01);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_IDLE);
	clock_advance(&fx.clock, 0.02);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_CLOSED);
	assert_int_equal(kp_stats.pool_expired, 2);
	assert_int_equal(fx.d.idle, 0);
	assert_int_equal(fx.fds.idle, 0);
}

/* Queue time is measured on the clock. */
static void
queue_wait_is_timed(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_a, DISPATCH_ANY);
	clock_advance(&fx.clock, 2.5);
	give_back(0, true);
	assert_int_equal(fx.r[1].answered, 2);
	/* The first request waited no time for its connect. */
	assert_true(kp_stats.queue_wait_seconds > 2.499 && kp_stats.queue_wait_seconds < 2.501);
}

/* Short of descriptors, the oldest idle connection gives way; with none idle, nothing does. */
static void
descriptor_shortage_closes_the_oldest_idle(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_b, DISPATCH_ANY);
	connect_completes(fakes.made[1]);
	give_back(0, true);
	give_back(1, true);
	assert_true(dispatch_free_descriptor(&fx.d));
	assert_int_equal(fakes.made[0]->state, UPSTREAM_CLOSED);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_IDLE);
	assert_true(dispatch_free_descriptor(&fx.d));
	assert_false(dispatch_free_descriptor(&fx.d));
	assert_int_equal(kp_stats.fd_evictions, 2);
	/* A connect short of a descriptor asks the same way. */
	ask(2, &host_a, DISPATCH_ANY);
	assert_false(fakes.made[2]->ctx->ops->need_descriptor(fakes.made[2]));
}

/* The pool keeps no more idle connections than the descriptor limit leaves room for. */
static void
parking_respects_the_descriptor_room(void **state)
{
	(void)state;
	start(0, true);
	/* 16 clients take 32 descriptors: room for one idle connection. */
	fx.fds.limit = 33;
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	ask(1, &host_b, DISPATCH_ANY);
	connect_completes(fakes.made[1]);
	give_back(0, true);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_IDLE);
	give_back(1, true);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_CLOSED);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_IDLE);
	assert_int_equal(fx.d.idle, 1);
}

/* A tunnel's connection is its requester's alone, and stops counting once it is a tunnel. */
static void
tunnel_is_never_pooled_nor_counted(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_TUNNEL);
	connect_completes(fakes.made[0]);
	assert_ptr_equal(upstream_of(&fx.r[0]), fakes.made[0]);
	assert_int_equal(open_for(&host_a), 0);
	ask(1, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 2);
	fx.r[0].src->ops->detach(fx.r[0].src);
	fx.r[0].src->ops->close(fx.r[0].src);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_CLOSED);
	iteration_ends();
	assert_int_equal(fx.d.open, 1);
}

/* Shutting down answers every waiter, background ones too, and closes every connection. */
static void
shutdown_answers_everyone(void **state)
{
	(void)state;
	start(1, true);
	ask(0, &host_a, DISPATCH_ANY);
	ask(1, &host_a, DISPATCH_ANY);
	ask(2, &host_a, DISPATCH_BACKGROUND);
	dispatch_shutdown(&fx.d);
	assert_int_equal(fx.r[0].status, 503);
	assert_int_equal(fx.r[1].status, 503);
	assert_int_equal(fx.r[2].status, 503);
	assert_int_equal(fakes.closed, 1);
	assert_int_equal(fx.d.open, 0);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(queue_is_first_in_first_out),
		TEST(freed_connection_beats_the_connect),
		TEST(without_the_race_a_request_waits_for_its_own),
		TEST(cap_bounds_the_connections_of_a_host),
		TEST(cancel_while_queued),
		TEST(cancel_while_connecting),
		TEST(connect_failure_goes_to_its_requester),
		TEST(dead_pooled_connection_is_passed_over),
		TEST(background_never_connects),
		TEST(background_comes_after_clients),
		TEST(background_does_not_hold_the_cap_against_clients),
		TEST(idle_connection_expires_on_the_clock),
		TEST(queue_wait_is_timed),
		TEST(descriptor_shortage_closes_the_oldest_idle),
		TEST(parking_respects_the_descriptor_room),
		TEST(tunnel_is_never_pooled_nor_counted),
		TEST(shutdown_answers_everyone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
