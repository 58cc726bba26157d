/*
 * The idle upstream pool: most-recently-used order per host, the per-host and
 * total caps and their sweep, expiry timers and table growth. Time is a
 * manual clock (clock.h) the tests move: nothing sleeps, and a 50-second
 * expiry is checked to the millisecond.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/clock.h"
#include "kp/pool.h"

#define MAX_DROPS 2048

/* What on_drop was told, in order. */
static struct {
	struct pool_entry *entry[MAX_DROPS];
	enum pool_drop_reason why[MAX_DROPS];
	bool pooled_in_callback[MAX_DROPS];
	size_t n;
} drops;

static void
record_drop(struct pool_entry *e, enum pool_drop_reason why)
{
	assert_true(drops.n < MAX_DROPS);
	drops.entry[drops.n] = e;
	drops.why[drops.n] = why;
	drops.pooled_in_callback[drops.n] = pool_entry_pooled(e);
	drops.n++;
}

/*
 * Entries live in the fixture, not on a test's stack, so that the teardown's
 * pool_free() never reaches into a frame a failed assertion has left.
 */
struct fixture {
	struct clock clock;
	struct pool *pool;
	struct pool_entry e[8];
	struct pool_entry *many;
};

static int
setup_clock(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	clock_init_manual(&fx->clock, 1000);
	memset(&drops, 0, sizeof(drops));
	*state = fx;
	return 0;
}

static int
teardown_clock(void **state)
{
	struct fixture *fx = *state;

	pool_free(fx->pool);
	free(fx->many);
	free(fx);
	return 0;
}

static struct pool *
make_pool(void **state, unsigned per_host, unsigned total)
{
	struct fixture *fx = *state;

	fx->pool = pool_new(&fx->clock, per_host, total, record_drop);
	assert_non_null(fx->pool);
	return fx->pool;
}

static struct clock *
clock_of(void **state)
{
	return &((struct fixture *)*state)->clock;
}

/* The i-th entry of the fixture, zeroed as a fresh connection's would be. */
static struct pool_entry *
entry(void **state, unsigned i)
{
	struct fixture *fx = *state;

	assert_true(i < sizeof(fx->e) / sizeof(fx->e[0]));
	return &fx->e[i];
}

static void
test_mru_order(void **state)
{
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1), *c = entry(state, 2);

	assert_int_equal(pool_count(p), 0);
	assert_null(pool_take(p, "h:80"));

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	assert_true(pool_put(p, "h:80", c, 60));
	assert_true(pool_entry_pooled(a));
	assert_true(pool_entry_pooled(b));
	assert_true(pool_entry_pooled(c));
	assert_int_equal(pool_count(p), 3);
	assert_int_equal(pool_count_key(p, "h:80"), 3);

	assert_ptr_equal(pool_take(p, "h:80"), c);
	assert_false(pool_entry_pooled(c));
	assert_false(clock_timer_armed(&c->expiry));
	assert_int_equal(pool_count(p), 2);
	assert_ptr_equal(pool_take(p, "h:80"), b);
	assert_ptr_equal(pool_take(p, "h:80"), a);
	assert_null(pool_take(p, "h:80"));
	assert_int_equal(pool_count(p), 0);
	assert_int_equal(pool_count_key(p, "h:80"), 0);
	assert_int_equal(drops.n, 0);

	/* Taken entries can go back in. */
	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", c, 60));
	assert_ptr_equal(pool_take(p, "h:80"), c);
	assert_ptr_equal(pool_take(p, "h:80"), a);
	assert_null(pool_take(p, "h:80"));
}

static void
test_keys_independent(void **state)
{
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a1 = entry(state, 0);
	struct pool_entry *a2 = entry(state, 1);
	struct pool_entry *b1 = entry(state, 2);
	struct pool_entry *c1 = entry(state, 3);

	assert_true(pool_put(p, "a.example:80", a1, 60));
	assert_true(pool_put(p, "b.example:80", b1, 60));
	assert_true(pool_put(p, "a.example:80", a2, 60));
	assert_true(pool_put(p, "a.example:8080", c1, 60));
	assert_int_equal(pool_count(p), 4);
	assert_int_equal(pool_count_key(p, "a.example:80"), 2);
	assert_int_equal(pool_count_key(p, "b.example:80"), 1);
	assert_int_equal(pool_count_key(p, "a.example:8080"), 1);
	assert_int_equal(pool_count_key(p, "c.example:80"), 0);
	/* Keys are exact strings, not prefixes or case-folded. */
	assert_int_equal(pool_count_key(p, "a.example:8"), 0);
	assert_int_equal(pool_count_key(p, "A.example:80"), 0);
	assert_null(pool_take(p, "a.example"));

	assert_ptr_equal(pool_take(p, "b.example:80"), b1);
	assert_null(pool_take(p, "b.example:80"));
	assert_ptr_equal(pool_take(p, "a.example:8080"), c1);
	assert_ptr_equal(pool_take(p, "a.example:80"), a2);
	assert_ptr_equal(pool_take(p, "a.example:80"), a1);
	assert_int_equal(pool_count(p), 0);
	assert_int_equal(drops.n, 0);
}

static void
test_per_host_cap(void **state)
{
	struct pool *p = make_pool(state, 2, 256);
	struct pool_entry *a = entry(state, 0);
	struct pool_entry *b = entry(state, 1);
	struct pool_entry *c = entry(state, 2);
	struct pool_entry *d = entry(state, 3);
	struct pool_entry *other = entry(state, 4);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "other:80", other, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	assert_int_equal(drops.n, 0);

	/* A third for h goes over the cap, but only the sweep evicts ... */
	assert_true(pool_put(p, "h:80", c, 60));
	assert_int_equal(drops.n, 0);
	assert_int_equal(pool_count_key(p, "h:80"), 3);
	/* ... h's oldest, not the pool's oldest. */
	pool_sweep(p);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], a);
	assert_int_equal(drops.why[0], POOL_DROP_EVICTED);
	assert_false(drops.pooled_in_callback[0]);
	assert_false(pool_entry_pooled(a));
	assert_false(clock_timer_armed(&a->expiry));
	assert_int_equal(pool_count_key(p, "h:80"), 2);
	assert_int_equal(pool_count_key(p, "other:80"), 1);
	assert_int_equal(pool_count(p), 3);

	assert_true(pool_put(p, "h:80", d, 60));
	pool_sweep(p);
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[1], b);
	assert_int_equal(drops.why[1], POOL_DROP_EVICTED);

	assert_ptr_equal(pool_take(p, "h:80"), d);
	assert_ptr_equal(pool_take(p, "h:80"), c);
	assert_null(pool_take(p, "h:80"));
	assert_ptr_equal(pool_take(p, "other:80"), other);
}

static void
test_per_host_cap_of_one(void **state)
{
	struct pool *p = make_pool(state, 1, 256);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	pool_sweep(p);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], a);
	assert_int_equal(pool_count_key(p, "h:80"), 1);
	assert_int_equal(pool_count(p), 1);
	assert_ptr_equal(pool_take(p, "h:80"), b);
	assert_null(pool_take(p, "h:80"));
}

static void
test_total_cap(void **state)
{
	struct pool *p = make_pool(state, 8, 3);
	struct pool_entry *a = entry(state, 0);
	struct pool_entry *b1 = entry(state, 1);
	struct pool_entry *b2 = entry(state, 2);
	struct pool_entry *c = entry(state, 3);
	struct pool_entry *d = entry(state, 4);

	assert_true(pool_put(p, "a:80", a, 60));
	assert_true(pool_put(p, "b:80", b1, 60));
	assert_true(pool_put(p, "b:80", b2, 60));
	assert_int_equal(pool_count(p), 3);
	assert_int_equal(drops.n, 0);

	/* A new host: the oldest entry of all goes, whichever host it has. */
	assert_true(pool_put(p, "c:80", c, 60));
	assert_int_equal(drops.n, 0);
	pool_sweep(p);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], a);
	assert_int_equal(drops.why[0], POOL_DROP_EVICTED);
	assert_int_equal(pool_count(p), 3);
	assert_int_equal(pool_count_key(p, "a:80"), 0);
	assert_null(pool_take(p, "a:80"));

	/* Now the oldest is b1. */
	assert_true(pool_put(p, "d:80", d, 60));
	pool_sweep(p);
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[1], b1);
	assert_int_equal(pool_count_key(p, "b:80"), 1);

	/* The oldest (b2) belongs to the host being put to. */
	assert_true(pool_put(p, "b:80", b1, 60));
	pool_sweep(p);
	assert_int_equal(drops.n, 3);
	assert_ptr_equal(drops.entry[2], b2);
	assert_int_equal(pool_count(p), 3);
	assert_ptr_equal(pool_take(p, "b:80"), b1);
	assert_null(pool_take(p, "b:80"));
	assert_ptr_equal(pool_take(p, "c:80"), c);
	assert_ptr_equal(pool_take(p, "d:80"), d);
	assert_int_equal(pool_count(p), 0);
}

static void
test_total_order_follows_puts_not_takes(void **state)
{
	struct pool *p = make_pool(state, 8, 2);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1), *c = entry(state, 2);

	assert_true(pool_put(p, "a:80", a, 60));
	assert_true(pool_put(p, "b:80", b, 60));
	/* a comes back in after use: it is now the newest. */
	assert_ptr_equal(pool_take(p, "a:80"), a);
	assert_true(pool_put(p, "a:80", a, 60));
	assert_true(pool_put(p, "c:80", c, 60));
	pool_sweep(p);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], b);
}

/*
 * The reason for sweeping later: exchanges ending together give back more
 * connections than the cap, and the next requests take them all again.
 */
static void
test_burst_over_cap_is_kept_until_the_sweep(void **state)
{
	struct pool *p = make_pool(state, 1, 2);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1), *c = entry(state, 2);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	assert_true(pool_put(p, "h:80", c, 60));
	assert_int_equal(drops.n, 0);
	assert_int_equal(pool_count(p), 3);
	assert_ptr_equal(pool_take(p, "h:80"), c);
	assert_ptr_equal(pool_take(p, "h:80"), b);
	assert_ptr_equal(pool_take(p, "h:80"), a);
	/* All were wanted again: the sweep finds nothing to evict ... */
	pool_sweep(p);
	assert_int_equal(drops.n, 0);
	assert_int_equal(pool_count(p), 0);
	/* ... and forgets the empty host, which the next put brings back. */
	assert_true(pool_put(p, "h:80", a, 60));
	assert_int_equal(pool_count_key(p, "h:80"), 1);
	assert_ptr_equal(pool_take(p, "h:80"), a);
}

/* The pool's own timer runs the sweep a second after the cap was passed, not before. */
static void
test_sweep_runs_a_second_after_the_cap_was_passed(void **state)
{
	struct clock *clock = clock_of(state);
	struct pool *p = make_pool(state, 1, 8);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1), *c = entry(state, 2);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	assert_true(pool_put(p, "h:80", c, 60));
	clock_advance(clock, 0.99);
	assert_int_equal(drops.n, 0);
	/* The sweep is the earliest timer; the entries' own expire in 60 s. */
	clock_advance(clock, 0.02);
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[0], a);
	assert_ptr_equal(drops.entry[1], b);
	assert_int_equal(drops.why[0], POOL_DROP_EVICTED);

	/* Over the cap again: the next sweep waits its second as well. */
	assert_true(pool_put(p, "h:80", a, 60));
	clock_advance(clock, 0.99);
	assert_int_equal(drops.n, 2);
	clock_advance(clock, 0.02);
	assert_int_equal(drops.n, 3);
	assert_ptr_equal(drops.entry[2], c);
	assert_ptr_equal(pool_take(p, "h:80"), a);
}

/* The sweep spares what went idle less than a second ago and comes back for it. */
static void
test_sweep_spares_the_recently_returned(void **state)
{
	struct clock *clock = clock_of(state);
	struct pool *p = make_pool(state, 1, 8);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));   /* over the cap: a sweep is due */
	clock_advance(clock, 0.5);
	/* Both are used and given back half-way to the sweep. */
	assert_ptr_equal(pool_take(p, "h:80"), b);
	assert_ptr_equal(pool_take(p, "h:80"), a);
	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	clock_advance(clock, 0.6);   /* the first sweep: a is half a second idle */
	assert_int_equal(drops.n, 0);
	assert_int_equal(pool_count_key(p, "h:80"), 2);
	clock_advance(clock, 1.0);   /* the second: a has been idle long enough */
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], a);
	assert_ptr_equal(pool_take(p, "h:80"), b);
}

/* Descriptors are finite: at twice the total cap the oldest goes at once. */
static void
test_twice_the_total_evicts_at_once(void **state)
{
	struct pool *p = make_pool(state, 8, 2);
	struct pool_entry *e[6];

	for (unsigned i = 0; i < 6; i++)
		e[i] = entry(state, i);
	for (unsigned i = 0; i < 4; i++)
		assert_true(pool_put(p, "h:80", e[i], 60));
	assert_int_equal(drops.n, 0);
	assert_true(pool_put(p, "h:80", e[4], 60));
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], e[0]);
	assert_int_equal(pool_count(p), 4);
	assert_true(pool_put(p, "other:80", e[5], 60));
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[1], e[1]);
	pool_sweep(p);
	assert_int_equal(pool_count(p), 2);
	assert_ptr_equal(pool_take(p, "other:80"), e[5]);
	assert_ptr_equal(pool_take(p, "h:80"), e[4]);
	assert_null(pool_take(p, "h:80"));
}

/* The owner may raise the ceiling when it has descriptors to spare, never lower it. */
static void
test_ceiling_set_by_the_owner(void **state)
{
	struct pool *p = make_pool(state, 8, 1);
	struct pool_entry *e[6];

	for (unsigned i = 0; i < 6; i++)
		e[i] = entry(state, i);
	pool_set_ceiling(p, 4);
	for (unsigned i = 0; i < 4; i++)
		assert_true(pool_put(p, "h:80", e[i], 60));
	assert_int_equal(drops.n, 0);
	assert_true(pool_put(p, "h:80", e[4], 60));
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], e[0]);
	/* Below twice the total cap it stays at twice the total cap. */
	pool_set_ceiling(p, 0);
	assert_true(pool_put(p, "h:80", e[5], 60));
	assert_int_equal(drops.n, 4);
	assert_int_equal(pool_count(p), 2);
	pool_sweep(p);
	assert_int_equal(pool_count(p), 1);
	assert_ptr_equal(pool_take(p, "h:80"), e[5]);
}

static void
test_zero_caps(void **state)
{
	struct fixture *fx = *state;
	struct pool_entry *e = entry(state, 0);
	struct pool *p;

	p = pool_new(&fx->clock, 0, 10, record_drop);
	assert_non_null(p);
	assert_false(pool_put(p, "h:80", e, 60));
	assert_false(pool_entry_pooled(e));
	assert_int_equal(pool_count(p), 0);
	pool_free(p);

	p = pool_new(&fx->clock, 10, 0, record_drop);
	assert_non_null(p);
	assert_false(pool_put(p, "h:80", e, 60));
	assert_false(pool_entry_pooled(e));
	assert_int_equal(pool_count(p), 0);
	assert_int_equal(pool_count_key(p, "h:80"), 0);
	pool_free(p);
	assert_int_equal(drops.n, 0);
}

static void
test_remove(void **state)
{
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a = entry(state, 0);
	struct pool_entry *b = entry(state, 1);
	struct pool_entry *c = entry(state, 2);
	struct pool_entry *lone = entry(state, 3);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	assert_true(pool_put(p, "h:80", c, 60));
	assert_true(pool_put(p, "lone:80", lone, 60));

	pool_remove(b);
	assert_false(pool_entry_pooled(b));
	assert_false(clock_timer_armed(&b->expiry));
	assert_int_equal(pool_count_key(p, "h:80"), 2);
	assert_int_equal(pool_count(p), 3);
	/* Removing what is no longer pooled does nothing. */
	pool_remove(b);
	assert_int_equal(pool_count(p), 3);

	pool_remove(lone);
	assert_int_equal(pool_count_key(p, "lone:80"), 0);
	assert_null(pool_take(p, "lone:80"));

	assert_int_equal(drops.n, 0);
	assert_ptr_equal(pool_take(p, "h:80"), c);
	assert_ptr_equal(pool_take(p, "h:80"), a);
	assert_null(pool_take(p, "h:80"));

	/* The lists survive removal of their ends, too. */
	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 60));
	assert_true(pool_put(p, "h:80", c, 60));
	pool_remove(c);
	pool_remove(a);
	assert_int_equal(pool_count(p), 1);
	assert_ptr_equal(pool_take(p, "h:80"), b);
	assert_int_equal(pool_count(p), 0);
	assert_int_equal(drops.n, 0);
}

/* Each entry expires exactly its own timeout after it went in, and once. */
static void
test_timer_armed_with_timeout(void **state)
{
	struct clock *clock = clock_of(state);
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1);

	assert_true(pool_put(p, "h:80", a, 50));
	assert_true(pool_put(p, "h:80", b, 5));
	assert_true(clock_timer_armed(&a->expiry));
	assert_true(clock_timer_armed(&b->expiry));
	clock_advance(clock, 4.999);
	assert_int_equal(drops.n, 0);
	clock_advance(clock, 0.002);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], b);
	clock_advance(clock, 44.994);
	assert_int_equal(drops.n, 1);
	clock_advance(clock, 0.01);
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[1], a);
	/* One-shot: nothing fires again. */
	clock_advance(clock, 3600);
	assert_int_equal(drops.n, 2);
}

static void
test_expiry_after_a_sweep(void **state)
{
	struct clock *clock = clock_of(state);
	struct pool *p = make_pool(state, 2, 256);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1), *c = entry(state, 2);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 30));
	assert_true(pool_put(p, "h:80", c, 60));
	pool_sweep(p);   /* evicts a */
	assert_int_equal(drops.n, 1);

	clock_advance(clock, 30);
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[1], b);
	assert_int_equal(drops.why[1], POOL_DROP_EXPIRED);
	assert_false(drops.pooled_in_callback[1]);
	assert_false(pool_entry_pooled(b));
	assert_false(clock_timer_armed(&b->expiry));
	assert_int_equal(pool_count_key(p, "h:80"), 1);
	assert_int_equal(pool_count(p), 1);

	/* The freed slot takes a new entry without evicting anything. */
	assert_true(pool_put(p, "h:80", a, 40));
	assert_int_equal(drops.n, 2);

	/* c went in 30 s before a, and runs out 10 s before it: the older goes first. */
	clock_advance(clock, 40);
	assert_int_equal(drops.n, 4);
	assert_ptr_equal(drops.entry[2], c);
	assert_ptr_equal(drops.entry[3], a);
	assert_int_equal(drops.why[3], POOL_DROP_EXPIRED);
	assert_int_equal(pool_count_key(p, "h:80"), 0);
	assert_int_equal(pool_count(p), 0);
	assert_null(pool_take(p, "h:80"));
}

static void
test_expiry_in_the_middle_of_a_list(void **state)
{
	struct clock *clock = clock_of(state);
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a = entry(state, 0);
	struct pool_entry *b = entry(state, 1);
	struct pool_entry *c = entry(state, 2);
	struct pool_entry *other = entry(state, 3);

	assert_true(pool_put(p, "h:80", a, 60));
	assert_true(pool_put(p, "h:80", b, 20));
	assert_true(pool_put(p, "h:80", c, 60));
	assert_true(pool_put(p, "o:80", other, 30));

	/* The middle one of three expires; the list around it stays whole. */
	clock_advance(clock, 20);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], b);
	assert_int_equal(drops.why[0], POOL_DROP_EXPIRED);
	assert_int_equal(pool_count_key(p, "h:80"), 2);

	clock_advance(clock, 10);
	assert_int_equal(drops.n, 2);
	assert_ptr_equal(drops.entry[1], other);
	assert_int_equal(pool_count_key(p, "o:80"), 0);
	assert_int_equal(pool_count(p), 2);

	assert_ptr_equal(pool_take(p, "h:80"), c);
	assert_ptr_equal(pool_take(p, "h:80"), a);
	assert_null(pool_take(p, "h:80"));
	/* Taken entries no longer hold a timer: nothing else fires. */
	clock_advance(clock, 3600);
	assert_int_equal(drops.n, 2);
}

static void
test_expiry_of_a_short_timeout(void **state)
{
	struct clock *clock = clock_of(state);
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1);

	/* A timeout next to nothing runs out at the next tick. */
	assert_true(pool_put(p, "h:80", a, 1e-9));
	assert_true(pool_put(p, "h:80", b, 3600));
	clock_advance(clock, 0.001);
	assert_int_equal(drops.n, 1);
	assert_ptr_equal(drops.entry[0], a);
	assert_int_equal(drops.why[0], POOL_DROP_EXPIRED);
	assert_int_equal(pool_count_key(p, "h:80"), 1);
	assert_ptr_equal(pool_take(p, "h:80"), b);
}

#define MANY 1000

static void
test_many_keys(void **state)
{
	struct fixture *fx = *state;
	struct pool *p = make_pool(state, 2, 4 * MANY);
	struct pool_entry *e = fx->many = calloc(2 * MANY, sizeof(*e));
	char key[64];

	assert_non_null(e);
	for (unsigned i = 0; i < MANY; i++) {
		snprintf(key, sizeof(key), "host%u.example:%u", i, 80 + i % 7);
		assert_true(pool_put(p, key, &e[2 * i], 60));
		assert_true(pool_put(p, key, &e[2 * i + 1], 60));
	}
	assert_int_equal(pool_count(p), 2 * MANY);
	assert_int_equal(drops.n, 0);
	for (unsigned i = 0; i < MANY; i++) {
		snprintf(key, sizeof(key), "host%u.example:%u", i, 80 + i % 7);
		assert_int_equal(pool_count_key(p, key), 2);
	}
	/* Take in a different order from the puts. */
	for (unsigned k = 0; k < MANY; k++) {
		unsigned i = (k * 7919u) % MANY;

		snprintf(key, sizeof(key), "host%u.example:%u", i, 80 + i % 7);
		assert_ptr_equal(pool_take(p, key), &e[2 * i + 1]);
		assert_ptr_equal(pool_take(p, key), &e[2 * i]);
		assert_null(pool_take(p, key));
	}
	assert_int_equal(pool_count(p), 0);
	assert_int_equal(drops.n, 0);

	/* The table still works after it emptied. */
	assert_true(pool_put(p, "again:80", &e[0], 60));
	assert_ptr_equal(pool_take(p, "again:80"), &e[0]);
}

static void
test_free_drops_remaining(void **state)
{
	struct fixture *fx = *state;
	struct pool *p = make_pool(state, 8, 256);
	struct pool_entry *a = entry(state, 0), *b = entry(state, 1), *c = entry(state, 2);
	bool seen_a = false, seen_b = false, seen_c = false;

	assert_true(pool_put(p, "a:80", a, 60));
	assert_true(pool_put(p, "b:80", b, 60));
	assert_true(pool_put(p, "a:80", c, 60));
	pool_free(p);
	fx->pool = NULL;
	assert_int_equal(drops.n, 3);
	for (size_t i = 0; i < drops.n; i++) {
		assert_int_equal(drops.why[i], POOL_DROP_EVICTED);
		assert_false(drops.pooled_in_callback[i]);
		seen_a |= drops.entry[i] == a;
		seen_b |= drops.entry[i] == b;
		seen_c |= drops.entry[i] == c;
	}
	assert_true(seen_a && seen_b && seen_c);
	assert_false(clock_timer_armed(&a->expiry));
	assert_false(clock_timer_armed(&b->expiry));
	assert_false(clock_timer_armed(&c->expiry));
	/* Nothing left to fire. */
	clock_advance(&fx->clock, 3600);
	assert_int_equal(drops.n, 3);
	pool_free(NULL);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup_clock, teardown_clock)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_mru_order),
		TEST(test_keys_independent),
		TEST(test_per_host_cap),
		TEST(test_per_host_cap_of_one),
		TEST(test_total_cap),
		TEST(test_total_order_follows_puts_not_takes),
		TEST(test_burst_over_cap_is_kept_until_the_sweep),
		TEST(test_sweep_runs_a_second_after_the_cap_was_passed),
		TEST(test_sweep_spares_the_recently_returned),
		TEST(test_twice_the_total_evicts_at_once),
		TEST(test_ceiling_set_by_the_owner),
		TEST(test_zero_caps),
		TEST(test_remove),
		TEST(test_timer_armed_with_timeout),
		TEST(test_expiry_after_a_sweep),
		TEST(test_expiry_in_the_middle_of_a_list),
		TEST(test_expiry_of_a_short_timeout),
		TEST(test_many_keys),
		TEST(test_free_drops_remaining),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
