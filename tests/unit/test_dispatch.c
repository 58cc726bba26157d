/*
 * Dispatch against fake connections: which request gets which connection,
 * in what order, under the per-host cap, when a request leaves, and where
 * the proxy's own background requests stand, and which fetches ahead are
 * pipelined on a busy connection. The connections are stand-ins for
 * upstream.c (defined below, so the real one is never linked): a test
 * decides when a connect completes or fails, what each origin received is
 * kept, and time is a manual clock. dispatch.c is included so its private
 * structs can be looked at.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <cmocka.h>

#include "../../src/origin/dispatch.c"

/* ---- fake connections ------------------------------------------------------ */

#define MAX_FAKES 64

/* The origin's end of a fake connection: what was written to it, in order. */
struct origin_side {
	char got[1024];
	size_t len;
	bool limited;                       /* the socket takes at most room bytes now */
	size_t room;
};

static struct {
	struct upstream *made[MAX_FAKES];   /* every connection dispatch opened, in order */
	struct origin_side origin[MAX_FAKES];   /* ... and what each one's origin received */
	unsigned n;
	unsigned connects;                  /* upstream_connect() calls */
	unsigned closed;
} fakes;

/*
 * The origin of the connection whose end c is. Connections live in a slab,
 * so a freed one's memory may be a later one's: the latest match is it.
 */
static struct origin_side *
origin_of_conn(const struct conn *c)
{
	for (unsigned i = fakes.n; i-- > 0;)
		if (&fakes.made[i]->src.conn == c)
			return &fakes.origin[i];
	fail_msg("a send on a connection dispatch never opened");
	return NULL;
}

/* A socket that never blocks unless the test says so, and keeps what it took. */
static ssize_t
origin_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
	struct origin_side *o = origin_of_conn(c);
	size_t took = 0;

	for (int i = 0; i < iovcnt; i++) {
		size_t n = iov[i].iov_len;

		if (o->limited && n > o->room - took)
			n = o->room - took;
		assert_true(o->len + n <= sizeof(o->got));
		memcpy(o->got + o->len, iov[i].iov_base, n);
		o->len += n;
		took += n;
	}
	if (o->limited) {
		if (took == 0) {
			errno = EAGAIN;
			return -1;
		}
		o->room -= took;
	}
	return (ssize_t)took;
}

static const struct conn_ops origin_wire_ops = {
	.sendv = origin_sendv,
};

int
upstream_init(struct upstream *up, const struct upstream_context *ctx,
              const struct upstream_target *t)
{
	memset(up, 0, sizeof(*up));
	up->ctx = ctx;
	up->port = t->port;
	up->tls = t->tls;
	up->restricted = t->restricted;
	up->src.keep_alive_hint = -1;
	up->key = t->key;
	up->src.conn.fd = -1;
	up->src.conn.ops = &origin_wire_ops;
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
	conn_clear_facts(&up->src.conn);
}

/* Unlike a new exchange, a pipelined one keeps what the socket said: it is its answer's. */
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
	char line[40];            /* its request as the origin would receive it, "GET /i ..." */
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
		snprintf(fx.r[i].line, sizeof(fx.r[i].line), "GET /%u HTTP/1.1\r\n\r\n", i);
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

/* ---- pipelining ------------------------------------------------------------ */

/*
 * Request i's request line is "GET /i HTTP/1.1": what an origin received,
 * and what a queue or a connection's pipelined list holds, are read back as
 * those paths in order, "/0 /1 /2". Requests a helper makes use the last
 * slots, 13 to 15, so a case's own are 0 to 12.
 */

static const char *
paths_of(const struct kp_list *list)
{
	static char out[4][128];
	static unsigned turn;
	char *s = out[turn++ % 4];
	size_t n = 0;

	s[0] = '\0';
	if (!list)
		return s;
	KP_LIST_EACH(w, list, struct dispatch_waiter, link)
		n += (size_t)snprintf(s + n, sizeof(out[0]) - n, "%s/%u", n ? " " : "",
		                      (unsigned)(container_of(w, struct req, w) - fx.r));
	return s;
}

/* What the origin of connection i (in the order dispatch opened them) received. */
static const char *
received(unsigned i)
{
	static char out[4][128];
	static unsigned turn;
	const struct origin_side *o = &fakes.origin[i];
	char *s = out[turn++ % 4];
	size_t n = 0, at = 0;

	s[0] = '\0';
	while (at < o->len) {
		const char *p = o->got + at;
		size_t left = o->len - at;
		const char *end = memmem(p, left, "\r\n\r\n", 4);
		const char *sp = left > 5 ? memchr(p + 5, ' ', left - 5) : NULL;

		if (!end || !sp || sp > end || strncmp(p, "GET /", 5) != 0) {
			snprintf(s + n, sizeof(out[0]) - n, "%s(cut)", n ? " " : "");
			break;
		}
		n += (size_t)snprintf(s + n, sizeof(out[0]) - n, "%s%.*s", n ? " " : "",
		                      (int)(sp - p - 4), p + 4);
		at = (size_t)(end + 4 - o->got);
	}
	return s;
}

static struct dispatch_host *
host_of(const struct dispatch_target *t)
{
	struct table_node *n = table_find(&fx.d.hosts, t->key);

	return n ? container_of(n, struct dispatch_host, node) : NULL;
}

/* host_a's queue of client requests, and its background queue, oldest first. */
static const char *
client_queue(void)
{
	return paths_of(host_of(&host_a) ? &host_of(&host_a)->queue : NULL);
}

static const char *
background_queue(void)
{
	return paths_of(host_of(&host_a) ? &host_of(&host_a)->bg_queue : NULL);
}

/* The requests written behind the one in progress on connection i, oldest first. */
static const char *
piped_on(unsigned i)
{
	return paths_of(&conn_of(fakes.made[i])->pipelined);
}

static unsigned
background_busy(void)
{
	return host_of(&host_a)->background_busy;
}

/* A fetch ahead, as read-ahead asks it: the whole request to hand, to pipeline. */
static void
ask_ahead_to(unsigned i, const struct dispatch_target *t)
{
	fx.r[i].w.request = fx.r[i].line;
	fx.r[i].w.request_len = strlen(fx.r[i].line);
	dispatch_request(&fx.d, &fx.r[i].w, t, DISPATCH_AHEAD);
}

static void
ask_ahead(unsigned i)
{
	ask_ahead_to(i, &host_a);
}

/*
 * A client's request for host_a that still carries the request of the fetch
 * it was: what exchange_promote asks when a client joins a queued fetch.
 */
static void
ask_as_client_with_bytes(unsigned i)
{
	fx.r[i].w.request = fx.r[i].line;
	fx.r[i].w.request_len = strlen(fx.r[i].line);
	dispatch_request(&fx.d, &fx.r[i].w, &host_a, DISPATCH_ANY);
}

/* Request i's exchange writes its request on the connection it was given, and says so. */
static void
send_request(unsigned i)
{
	struct source *src = fx.r[i].src;

	assert_non_null(src);
	assert_int_equal(conn_send_two(&src->conn, fx.r[i].line, strlen(fx.r[i].line), NULL, 0),
	                 (ssize_t)strlen(fx.r[i].line));
	src->ops->sent(src);
}

/* The origin's socket of connection i takes at most room more bytes. */
static void
socket_room(unsigned i, size_t room)
{
	fakes.origin[i].limited = true;
	fakes.origin[i].room = room;
}

/*
 * A connection to host_a that served a client's request (slot 15) and waits
 * in the pool; its index in fakes.made.
 */
static unsigned
pooled_connection(void)
{
	unsigned i = fakes.n;

	fx.r[15].answered = 0;
	ask(15, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[i]);
	assert_ptr_equal(upstream_of(&fx.r[15]), fakes.made[i]);
	give_back(15, true);
	assert_int_equal(fakes.made[i]->state, UPSTREAM_IDLE);
	return i;
}

/*
 * A pooled connection whose origin has answered a pipelined request
 * correctly: a fetch (14) with another (13) pipelined behind it, both
 * answered whole. What its origin received so far is forgotten.
 */
static unsigned
proven_connection(void)
{
	unsigned i = pooled_connection();

	ask_ahead(14);
	send_request(14);
	ask_ahead(13);
	assert_true(dispatch_piped(&fx.r[13].w));
	give_back(14, true);
	assert_int_equal(fx.r[13].w.source, DISPATCH_FROM_PIPELINE);
	give_back(13, true);
	assert_int_equal(fakes.made[i]->state, UPSTREAM_IDLE);
	fakes.origin[i].len = 0;
	return i;
}

/*
 * A fetch ahead is written behind another fetch once that one's request is
 * all sent (not before: the two would interleave), and one that comes
 * later goes out at once. Each answer goes to its own requester, in the
 * order the requests went out, on that one connection: the round trip a
 * free connection would cost is saved, and no connect is started for it.
 */
static void
fetch_is_pipelined_behind_a_fetch(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	assert_ptr_equal(upstream_of(&fx.r[0]), fakes.made[a]);
	assert_int_equal(fx.r[0].w.source, DISPATCH_FROM_POOL);
	ask_ahead(1);
	assert_string_equal(background_queue(), "/1");
	assert_string_equal(received(a), "");
	send_request(0);
	assert_string_equal(received(a), "/0 /1");
	assert_true(dispatch_piped(&fx.r[1].w));
	assert_string_equal(background_queue(), "");
	ask_ahead(2);
	assert_string_equal(received(a), "/0 /1 /2");
	assert_string_equal(piped_on(a), "/1 /2");
	assert_int_equal(fx.r[1].answered + fx.r[2].answered, 0);
	assert_int_equal(fakes.connects, 1);

	give_back(0, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[a]);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_PIPELINE);
	assert_false(dispatch_waiting(&fx.r[1].w));
	assert_true(fx.r[1].src->reused);
	assert_int_equal(fx.r[2].answered, 0);
	give_back(1, true);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[a]);
	assert_int_equal(fx.r[2].w.source, DISPATCH_FROM_PIPELINE);
	assert_true(fx.r[1].answered < fx.r[2].answered);
	give_back(2, true);
	assert_int_equal(fakes.made[a]->state, UPSTREAM_IDLE);
	/* Idle, it is taken from the pool, not written on as if busy. */
	ask_ahead(3);
	assert_ptr_equal(upstream_of(&fx.r[3]), fakes.made[a]);
	assert_int_equal(fx.r[3].w.source, DISPATCH_FROM_POOL);
	assert_string_equal(received(a), "/0 /1 /2");
	assert_int_equal(fakes.n, 1);
	/* Only clients' requests are counted: none of these is one. */
	assert_int_equal(kp_stats.requests_on_reused + kp_stats.requests_on_freed, 0);
}

/*
 * A fetch is never written behind a client's request on a connection whose
 * origin has not yet answered a pipelined request correctly: an origin
 * that mishandles pipelining would spoil the client's answer. Answering a
 * fetch in its turn proves nothing; answering one that was pipelined does,
 * and from then on a fetch may follow a client's request there.
 */
static void
no_fetch_behind_a_client_until_the_origin_has_pipelined(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	send_request(0);
	ask_ahead(1);
	assert_false(dispatch_piped(&fx.r[1].w));
	assert_string_equal(background_queue(), "/1");
	assert_string_equal(received(0), "/0");
	give_back(0, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[0]);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_FREED);

	/* A fetch answered in its turn: still no fetch behind a client. */
	send_request(1);
	give_back(1, true);
	ask(2, &host_a, DISPATCH_ANY);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[0]);
	send_request(2);
	ask_ahead(3);
	assert_false(dispatch_piped(&fx.r[3].w));
	assert_string_equal(background_queue(), "/3");

	/* Behind a fetch it may go, to find out; the origin answers it whole. */
	give_back(2, true);
	assert_ptr_equal(upstream_of(&fx.r[3]), fakes.made[0]);
	send_request(3);
	ask_ahead(4);
	assert_true(dispatch_piped(&fx.r[4].w));
	give_back(3, true);
	assert_int_equal(fx.r[4].w.source, DISPATCH_FROM_PIPELINE);
	give_back(4, true);

	/* Now a fetch may follow a client's request. */
	ask(5, &host_a, DISPATCH_ANY);
	assert_ptr_equal(upstream_of(&fx.r[5]), fakes.made[0]);
	send_request(5);
	ask_ahead(6);
	assert_true(dispatch_piped(&fx.r[6].w));
	assert_string_equal(received(0), "/0 /1 /2 /3 /4 /5 /6");
	give_back(5, true);
	assert_ptr_equal(upstream_of(&fx.r[6]), fakes.made[0]);
	assert_int_equal(fx.r[6].w.source, DISPATCH_FROM_PIPELINE);
	assert_int_equal(fakes.n, 1);
}

/*
 * When the exchange in progress does not end cleanly (its answer cut
 * short, or let go mid-answer), no answer behind it can be trusted: the
 * connection closes and every request pipelined behind it goes back to its
 * host's queue, unanswered, to be asked again on the next connection that
 * frees. A GET never answered may be asked again; failing it would lose a
 * fetch for nothing.
 */
static void
abandoned_exchange_requeues_what_was_pipelined(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	ask_ahead(2);
	assert_string_equal(piped_on(a), "/1 /2");
	give_back(0, false);
	assert_int_equal(fakes.made[a]->state, UPSTREAM_CLOSED);
	assert_string_equal(background_queue(), "/1 /2");
	assert_false(dispatch_piped(&fx.r[1].w));
	assert_true(dispatch_queued(&fx.r[2].w));
	assert_int_equal(fx.r[1].answered + fx.r[2].answered, 0);
	/* Fetches never connect: they wait for a connection a client's request frees. */
	iteration_ends();
	assert_int_equal(fakes.connects, 1);
	ask(3, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[1]);
	send_request(3);
	give_back(3, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[1]);
	send_request(1);
	assert_string_equal(received(1), "/3 /1 /2");
	assert_string_equal(piped_on(1), "/2");

	/* Let go mid-answer (its reader went away): the same. */
	fx.r[1].src->ops->close(fx.r[1].src);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_CLOSED);
	assert_string_equal(background_queue(), "/2");
	assert_int_equal(fx.r[2].answered, 0);
}

/*
 * A connection whose origin ended its side (EOF), reset it, or on which a
 * write failed is still busy while its exchange finds out, but takes no
 * pipelined request: it would never be answered, and a fetch asked again
 * after that would be written on the same dead connection a second time.
 * Neither a new fetch nor one waiting when the next pipelined answer
 * begins is written on it.
 */
enum closed_fact { SAW_EOF, SAW_RESET, WRITE_FAILED };

static void
connection_that_saw_eof_takes_none(void **state)
{
	enum closed_fact fact = *(const enum closed_fact *)*state;
	struct conn *c;
	unsigned a;

	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	assert_string_equal(piped_on(a), "/1");
	c = &fakes.made[a]->src.conn;
	if (fact == SAW_EOF)
		c->eof = true;
	else if (fact == SAW_RESET)
		c->eof = c->reset = true;   /* as conn_read() learns a reset */
	else
		c->write_failed = true;
	ask_ahead(2);
	assert_string_equal(background_queue(), "/2");
	assert_string_equal(received(a), "/0 /1");
	/* /0 was answered whole: /1 gets the connection to find out, and nothing follows it. */
	give_back(0, true);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_PIPELINE);
	assert_string_equal(background_queue(), "/2");
	assert_string_equal(received(a), "/0 /1");
	assert_int_equal(fakes.connects, 1);
}

static const enum closed_fact saw_eof = SAW_EOF, saw_reset = SAW_RESET,
                              write_failed = WRITE_FAILED;

/*
 * Whatever the exchange in progress becomes a tunnel, its bytes are no
 * longer HTTP: the requests pipelined behind it go back to the queue at
 * once, nothing more is written on it, and when the tunnel closes (its
 * connection no longer has a host) none of them is failed.
 */
static void
tunnel_conversion_requeues_what_was_pipelined(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	ask_ahead(2);
	fx.r[0].src->ops->detach(fx.r[0].src);
	assert_string_equal(background_queue(), "/1 /2");
	assert_false(dispatch_piped(&fx.r[1].w));
	assert_int_equal(open_for(&host_a), 0);
	ask_ahead(3);
	assert_string_equal(background_queue(), "/1 /2 /3");
	assert_string_equal(received(a), "/0 /1 /2");
	fx.r[0].src->ops->close(fx.r[0].src);
	assert_int_equal(fakes.made[a]->state, UPSTREAM_CLOSED);
	assert_string_equal(background_queue(), "/1 /2 /3");
	assert_int_equal(fx.r[1].answered + fx.r[2].answered + fx.r[3].answered, 0);
}

/*
 * A client's request is never pipelined, even on a connection that takes
 * fetches behind the one in progress, and even carrying the bytes of the
 * fetch it was (a fetch a client joined is asked again as DISPATCH_ANY):
 * behind another answer it would wait for that one, and a failure there
 * would cost the client. It waits its turn for a connection of its own,
 * and a fetch may still go behind the request in progress meanwhile.
 */
static void
client_request_is_never_pipelined(void **state)
{
	unsigned a;

	(void)state;
	start(1, true);
	a = proven_connection();
	ask(0, &host_a, DISPATCH_ANY);
	assert_ptr_equal(upstream_of(&fx.r[0]), fakes.made[a]);
	ask_as_client_with_bytes(1);
	send_request(0);
	assert_string_equal(client_queue(), "/1");
	ask_as_client_with_bytes(2);
	assert_string_equal(client_queue(), "/1 /2");
	ask_ahead(3);
	assert_string_equal(piped_on(a), "/3");
	assert_string_equal(received(a), "/0 /3");
	assert_false(dispatch_piped(&fx.r[1].w) || dispatch_piped(&fx.r[2].w));

	give_back(0, true);
	assert_int_equal(fx.r[3].w.source, DISPATCH_FROM_PIPELINE);
	give_back(3, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[a]);
	assert_true(fx.r[3].answered < fx.r[1].answered);
	assert_string_equal(client_queue(), "/2");
	assert_int_equal(fakes.connects, 1);
}

/*
 * What counts against --max-conns-per-host: a pipelined request holds no
 * connection of its own and starts none; the connection carrying a
 * pipelined fetch's exchange counts as the proxy's own, so it does not hold
 * the cap against a client's request; once that exchange is over and a
 * client's request has the connection, it counts again.
 */
static void
what_counts_against_the_cap(void **state)
{
	(void)state;
	start(1, true);
	pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	assert_true(dispatch_piped(&fx.r[1].w));
	assert_int_equal(open_for(&host_a), 1);
	assert_int_equal(fakes.connects, 1);

	give_back(0, true);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_PIPELINE);
	assert_int_equal(background_busy(), 1);
	ask(2, &host_a, DISPATCH_ANY);
	assert_int_equal(fakes.connects, 2);
	connect_completes(fakes.made[1]);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[1]);
	/* The client's own connection is at the cap. */
	ask(3, &host_a, DISPATCH_ANY);
	assert_string_equal(client_queue(), "/3");
	assert_int_equal(fakes.connects, 2);

	/* The fetch is over: the waiting client takes its connection, which counts again. */
	give_back(1, true);
	assert_ptr_equal(upstream_of(&fx.r[3]), fakes.made[0]);
	assert_int_equal(background_busy(), 0);
	ask(4, &host_a, DISPATCH_ANY);
	give_back(2, false);
	iteration_ends();
	assert_int_equal(open_for(&host_a), 1);
	assert_int_equal(fakes.connects, 2);
	assert_string_equal(client_queue(), "/4");
}

/*
 * Requests pipelined behind an exchange that failed go back to the queue
 * in the order they were written, and are asked again in that order: the
 * first on the next connection that frees, the rest pipelined behind it.
 * Read-ahead fetches pieces in the order a client will want them.
 */
static void
order_is_kept_on_requeue(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	for (unsigned i = 1; i <= 3; i++)
		ask_ahead(i);
	assert_string_equal(piped_on(a), "/1 /2 /3");
	fx.r[0].src->ops->close(fx.r[0].src);
	assert_string_equal(background_queue(), "/1 /2 /3");

	ask(4, &host_a, DISPATCH_ANY);
	connect_completes(fakes.made[1]);
	send_request(4);
	give_back(4, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[1]);
	send_request(1);
	assert_string_equal(received(1), "/4 /1 /2 /3");
	give_back(1, true);
	give_back(2, true);
	assert_ptr_equal(upstream_of(&fx.r[3]), fakes.made[1]);
	assert_true(fx.r[1].answered < fx.r[2].answered);
	assert_true(fx.r[2].answered < fx.r[3].answered);
}

/*
 * A fetch is written only on a connection of its own host (its key: host,
 * port, scheme and restriction): on another it would reach the wrong
 * origin, or one the requester may not reach.
 */
static void
fetch_is_pipelined_only_on_its_own_host(void **state)
{
	(void)state;
	start(0, true);
	ask(0, &host_b, DISPATCH_ANY);
	connect_completes(fakes.made[0]);
	give_back(0, true);
	ask_ahead_to(1, &host_b);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[0]);
	send_request(1);
	ask_ahead(2);
	assert_false(dispatch_piped(&fx.r[2].w));
	assert_string_equal(background_queue(), "/2");
	assert_string_equal(received(0), "/1");
}

/*
 * The proxy's own request without bytes to pipeline (DISPATCH_BACKGROUND)
 * waits in the background queue for a free connection, and a fetch queued
 * behind it is still pipelined: it is passed over, not a barrier.
 */
static void
background_request_without_bytes_is_passed_over(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	ask(1, &host_a, DISPATCH_BACKGROUND);
	ask_ahead(2);
	assert_string_equal(background_queue(), "/1 /2");
	send_request(0);
	assert_string_equal(piped_on(a), "/2");
	assert_string_equal(background_queue(), "/1");
	give_back(0, true);
	give_back(2, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[a]);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_FREED);
	assert_string_equal(received(a), "/0 /2");
}

/*
 * At most --read-ahead-depth requests wait behind the one in progress; a
 * fetch beyond that waits in the queue and follows as soon as the
 * connection's next pipelined answer begins, with room behind it again.
 */
static void
pipelining_stops_at_the_read_ahead_depth(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	fx.cfg.read_ahead_depth = 2;
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	for (unsigned i = 1; i <= 3; i++)
		ask_ahead(i);
	assert_string_equal(piped_on(a), "/1 /2");
	assert_string_equal(background_queue(), "/3");
	give_back(0, true);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_PIPELINE);
	assert_string_equal(piped_on(a), "/2 /3");
	assert_string_equal(background_queue(), "");
	assert_string_equal(received(a), "/0 /1 /2 /3");
}

/*
 * A pipelined request whose requester leaves still has its answer on the
 * way, to nobody: the connection is spoiled. Nothing more is written on
 * it, what was pipelined behind the one that left is asked again
 * elsewhere, and the connection is closed rather than reused, since the
 * unread answer would be taken for the next one's.
 */
static void
leaving_a_pipelined_request_spoils_the_connection(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	ask_ahead(2);
	dispatch_cancel(&fx.r[1].w);
	assert_false(dispatch_waiting(&fx.r[1].w));
	assert_string_equal(piped_on(a), "/2");
	ask_ahead(3);
	assert_string_equal(background_queue(), "/3");
	assert_string_equal(received(a), "/0 /1 /2");
	give_back(0, true);
	assert_int_equal(fakes.made[a]->state, UPSTREAM_CLOSED);
	assert_string_equal(background_queue(), "/3 /2");
	assert_int_equal(fx.r[1].answered + fx.r[2].answered + fx.r[3].answered, 0);
}

/*
 * A pipelined request the socket took only part of fails (it cannot be
 * taken back or finished later behind other bytes), and the connection is
 * spoiled: the origin would read the rest of the stream as garbage, so
 * nothing more is written on it and it is not reused.
 */
static void
request_cut_short_fails_and_spoils_the_connection(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	socket_room(a, 5);
	ask_ahead(1);
	assert_int_equal(fx.r[1].status, 502);
	assert_false(dispatch_waiting(&fx.r[1].w));
	assert_string_equal(received(a), "/0 (cut)");
	fakes.origin[a].limited = false;
	ask_ahead(2);
	assert_string_equal(background_queue(), "/2");
	give_back(0, true);
	assert_int_equal(fakes.made[a]->state, UPSTREAM_CLOSED);
	assert_string_equal(background_queue(), "/2");
	assert_int_equal(fx.r[2].answered, 0);
}

/*
 * A socket that takes none of a pipelined request leaves the fetch in the
 * queue, for the connection when it frees. Over plain TCP nothing was
 * written, so that connection is still clean; over TLS the record may
 * have been queued inside the layer to go out before whatever is written
 * next, so it is spoiled and closed instead.
 */
static void
socket_taking_none_leaves_the_fetch_queued(void **state)
{
	bool tls = *(const bool *)*state;
	unsigned a;

	start(0, true);
	a = pooled_connection();
	fakes.made[a]->tls = tls;
	ask_ahead(0);
	send_request(0);
	socket_room(a, 0);
	ask_ahead(1);
	assert_string_equal(background_queue(), "/1");
	assert_int_equal(fx.r[1].answered, 0);
	fakes.origin[a].limited = false;
	give_back(0, true);
	if (tls) {
		assert_int_equal(fakes.made[a]->state, UPSTREAM_CLOSED);
		assert_string_equal(background_queue(), "/1");
	} else {
		assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[a]);
		assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_FREED);
	}
}

static const bool over_plain_tcp = false, over_tls = true;

/*
 * A pipelined fetch a client joined stays where it is (its answer is
 * next but for those ahead), but should the exchange ahead of it fail it
 * is asked again as a client's request: in the clients' queue, where it
 * may start a connect, not in the background queue, where it would wait
 * for a connection some other request frees.
 */
static void
fetch_a_client_joined_is_requeued_as_a_clients(void **state)
{
	unsigned a;

	(void)state;
	start(0, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	ask_ahead(2);
	dispatch_piped_promote(&fx.r[2].w);
	assert_string_equal(piped_on(a), "/1 /2");
	give_back(0, false);
	assert_string_equal(background_queue(), "/1");
	assert_string_equal(client_queue(), "/2");
	iteration_ends();
	assert_int_equal(fakes.connects, 2);
	connect_completes(fakes.made[1]);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[1]);
	assert_int_equal(fx.r[2].w.source, DISPATCH_FROM_CONNECT);
	assert_int_equal(fx.r[1].answered, 0);
}

/*
 * A pipelined fetch a client joined is a client's request once its
 * answer begins: its connection counts against the cap like any client's,
 * and no fetch is written behind it before the connection has answered a
 * pipelined request correctly (this one is its first).
 */
static void
pipelined_fetch_a_client_joined_counts_as_a_clients(void **state)
{
	unsigned a;

	(void)state;
	start(1, true);
	a = pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	dispatch_piped_promote(&fx.r[1].w);
	give_back(0, true);
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[a]);
	assert_int_equal(fx.r[1].w.source, DISPATCH_FROM_PIPELINE);
	ask(2, &host_a, DISPATCH_ANY);
	assert_string_equal(client_queue(), "/2");
	assert_int_equal(fakes.connects, 1);
	ask_ahead(3);
	assert_string_equal(background_queue(), "/3");
	assert_string_equal(received(a), "/0 /1");
	/* Its answer ends whole: the waiting client is next on the connection. */
	give_back(1, true);
	assert_ptr_equal(upstream_of(&fx.r[2]), fakes.made[a]);
}

/*
 * Shutting down answers pipelined requests too: each hears 503, none is
 * left pointing at a connection that is gone.
 */
static void
shutdown_answers_pipelined_requests(void **state)
{
	(void)state;
	start(0, true);
	pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	ask_ahead(2);
	dispatch_shutdown(&fx.d);
	assert_int_equal(fx.r[1].status, 503);
	assert_int_equal(fx.r[2].status, 503);
	assert_true(fx.r[1].answered < fx.r[2].answered);
	assert_false(dispatch_waiting(&fx.r[1].w) || dispatch_waiting(&fx.r[2].w));
}

/*
 * A fetch sent back to the queue takes a connection idling in the pool
 * rather than waiting for one to free. It used to wait: requeue_piped()
 * only queued it, and a queue was served by a connection that frees, never
 * from the pool (only a new request looked there), so it waited until
 * another exchange of its host ended, or its queue timeout, while the idle
 * connection expired unused. The checker now hands pooled connections to
 * what is queued.
 */
static void
requeued_fetch_takes_an_idle_connection(void **state)
{
	unsigned b;

	(void)state;
	start(0, true);
	pooled_connection();
	ask_ahead(0);
	send_request(0);
	ask_ahead(1);
	/* Another connection of the host frees meanwhile and is pooled. */
	ask(2, &host_a, DISPATCH_ANY);
	b = fakes.n - 1;
	connect_completes(fakes.made[b]);
	give_back(2, true);
	assert_int_equal(fakes.made[b]->state, UPSTREAM_IDLE);
	give_back(0, false);
	assert_string_equal(background_queue(), "/1");
	iteration_ends();
	assert_ptr_equal(upstream_of(&fx.r[1]), fakes.made[b]);
}

/*
 * Four connections to a host, two idle and two busy, and the origin allows
 * one: the idle ones close at once, the older first; a busy one closes when
 * its exchange ends instead of going idle, and no connect starts while more
 * than one is open; once one is left, the host is as before.
 */
static void
shrinking_a_host_closes_what_it_does_not_keep(void **state)
{
	(void)state;
	start(0, true);
	for (unsigned i = 0; i < 4; i++) {
		ask(i, &host_a, DISPATCH_ANY);
		connect_completes(fakes.made[i]);
		assert_ptr_equal(upstream_of(&fx.r[i]), fakes.made[i]);
	}
	give_back(0, true);
	clock_advance(&fx.clock, 1);
	give_back(1, true);
	assert_int_equal(dispatch_idle_count(&fx.d, "a.example:80"), 2);
	assert_int_equal(open_for(&host_a), 4);

	dispatch_shrink_host(&fx.d, "a.example:80", 1);
	assert_int_equal(dispatch_idle_count(&fx.d, "a.example:80"), 0);
	assert_int_equal(fakes.made[0]->state, UPSTREAM_CLOSED);
	assert_int_equal(fakes.made[1]->state, UPSTREAM_CLOSED);
	assert_int_equal(open_for(&host_a), 2);
	/* Over the count still: a request waits rather than connect. */
	ask(4, &host_a, DISPATCH_ANY);
	iteration_ends();
	assert_int_equal(fakes.connects, 4);
	assert_int_equal(fx.r[4].answered, 0);
	/* The first busy one to end closes; the last one left serves the waiter. */
	give_back(2, true);
	assert_int_equal(fakes.made[2]->state, UPSTREAM_CLOSED);
	assert_int_equal(fx.r[4].answered, 0);
	give_back(3, true);
	assert_ptr_equal(upstream_of(&fx.r[4]), fakes.made[3]);
	/* Shrunk: a second request connects again, as without. */
	ask(5, &host_a, DISPATCH_ANY);
	iteration_ends();
	assert_int_equal(fakes.connects, 5);
	/* Nothing to shrink for a host with no more than keep, or unknown. */
	dispatch_shrink_host(&fx.d, "a.example:80", 2);
	dispatch_shrink_host(&fx.d, "nobody.example:80", 1);
	assert_int_equal(open_for(&host_a), 2);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
/* One case run with arg as its state; what differs is named. */
#define TEST_WITH(f, what, arg) { #f " (" what ")", f, setup, teardown, (void *)(arg) }

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
		TEST(fetch_is_pipelined_behind_a_fetch),
		TEST(no_fetch_behind_a_client_until_the_origin_has_pipelined),
		TEST(abandoned_exchange_requeues_what_was_pipelined),
		TEST_WITH(connection_that_saw_eof_takes_none, "EOF", &saw_eof),
		TEST_WITH(connection_that_saw_eof_takes_none, "reset", &saw_reset),
		TEST_WITH(connection_that_saw_eof_takes_none, "write failed", &write_failed),
		TEST(tunnel_conversion_requeues_what_was_pipelined),
		TEST(client_request_is_never_pipelined),
		TEST(what_counts_against_the_cap),
		TEST(order_is_kept_on_requeue),
		TEST(fetch_is_pipelined_only_on_its_own_host),
		TEST(background_request_without_bytes_is_passed_over),
		TEST(pipelining_stops_at_the_read_ahead_depth),
		TEST(leaving_a_pipelined_request_spoils_the_connection),
		TEST(request_cut_short_fails_and_spoils_the_connection),
		TEST_WITH(socket_taking_none_leaves_the_fetch_queued, "TCP", &over_plain_tcp),
		TEST_WITH(socket_taking_none_leaves_the_fetch_queued, "TLS", &over_tls),
		TEST(fetch_a_client_joined_is_requeued_as_a_clients),
		TEST(pipelined_fetch_a_client_joined_counts_as_a_clients),
		TEST(shutdown_answers_pipelined_requests),
		TEST(requeued_fetch_takes_an_idle_connection),
		TEST(shrinking_a_host_closes_what_it_does_not_keep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
