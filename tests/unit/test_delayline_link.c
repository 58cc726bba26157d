/*
 * kp-delayline's link model and packet ring, driven with made-up clocks:
 * serialization times, the drop-tail rule, random loss, delivery order, and
 * the ring keeping arrival order across many wraps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "delayline_link.h"

#define MS 1000000ull
#define US 1000ull

/* 12 Mbit/s moves 1500 bytes in exactly 1 ms: round numbers for the tests. */
#define RATE_12M 12000000ull

static void
test_idle_link_delivers_after_serialization_and_delay(void **state)
{
	struct dl_link l;
	uint64_t at = 0;

	(void)state;
	dl_link_init(&l, RATE_12M, 25 * MS, 64 * 1024);
	assert_true(dl_link_offer(&l, 1000 * MS, 1500, &at));
	assert_int_equal(at, 1000 * MS + 1 * MS + 25 * MS);
	assert_int_equal(l.busy_until, 1001 * MS);
}

static void
test_back_to_back_packets_serialize_one_after_another(void **state)
{
	struct dl_link l;
	uint64_t at = 0;

	(void)state;
	dl_link_init(&l, RATE_12M, 10 * MS, 64 * 1024);
	/* Three packets arrive together: each waits for the one before. */
	for (unsigned i = 1; i <= 3; i++) {
		assert_true(dl_link_offer(&l, 0, 1500, &at));
		assert_int_equal(at, i * MS + 10 * MS);
	}
	/* Half-way through the third, 750 bytes remain; then the link idles. */
	assert_int_equal(dl_link_backlog(&l, 2 * MS + 500 * US), 750);
	assert_int_equal(dl_link_backlog(&l, 3 * MS), 0);
	assert_int_equal(dl_link_backlog(&l, 50 * MS), 0);
	/* After the idle gap a packet starts at its own arrival, not at busy_until. */
	assert_true(dl_link_offer(&l, 50 * MS, 150, &at));
	assert_int_equal(at, 50 * MS + 100 * US + 10 * MS);
	assert_int_equal(l.stats.packets, 4);
	assert_int_equal(l.stats.bytes, 4650);
	assert_int_equal(l.stats.max_backlog, 4500);
}

static void
test_long_run_keeps_the_exact_rate(void **state)
{
	struct dl_link l;
	uint64_t at = 0;

	(void)state;
	/* 7 Mbit/s: 1500 bytes take 1714285.71... ns, never a whole number. */
	dl_link_init(&l, 7000000, 0, UINT64_MAX / 2);
	for (unsigned i = 0; i < 700000; i++)
		assert_true(dl_link_offer(&l, 0, 1500, &at));
	/* 700000 * 1500 * 8 bits at 7 Mbit/s is exactly 1200 s. */
	assert_int_equal(at, 1200ull * DL_NS_PER_SEC);
}

static void
test_queue_limit_drops_tail(void **state)
{
	struct dl_link l;
	uint64_t at = 0, last = 0;

	(void)state;
	/* Room for four full packets waiting in front of the bottleneck. */
	dl_link_init(&l, RATE_12M, 0, 6000);
	for (unsigned i = 0; i < 4; i++)
		assert_true(dl_link_offer(&l, 0, 1500, &last));
	/* A fifth no longer fits: 6000 + 1500 > 6000. A tiny one does not either. */
	assert_false(dl_link_offer(&l, 0, 1500, &at));
	assert_false(dl_link_offer(&l, 0, 1, &at));
	assert_int_equal(l.stats.drops, 2);
	assert_int_equal(l.stats.drop_bytes, 1501);
	/* A dropped packet leaves the schedule as it was. */
	assert_int_equal(l.busy_until, 4 * MS);
	/* Once one packet has left the link there is room again, exactly. */
	assert_false(dl_link_offer(&l, 1 * MS - 1, 1500, &at));
	assert_true(dl_link_offer(&l, 1 * MS, 1500, &at));
	assert_int_equal(at, 5 * MS);
	assert_true(at > last);
	/* Part of a packet gone means room for as many bytes, no more. */
	assert_true(dl_link_offer(&l, 1 * MS + 100 * US, 150, &at));
	assert_false(dl_link_offer(&l, 1 * MS + 100 * US, 1, &at));
	assert_int_equal(l.stats.max_backlog, 6000);
}

static void
test_unlimited_rate_only_delays(void **state)
{
	struct dl_link l;
	uint64_t at = 0;

	(void)state;
	dl_link_init(&l, 0, 5 * MS, 64 * 1024);
	for (unsigned i = 0; i < 1000; i++) {
		assert_true(dl_link_offer(&l, 7 * MS, 1500, &at));
		assert_int_equal(at, 12 * MS);
	}
	assert_int_equal(dl_link_backlog(&l, 7 * MS), 0);
}

static void
test_delivery_times_never_go_backwards(void **state)
{
	struct dl_link l;
	uint64_t now = 0, at = 0, last = 0, seed = 12345;
	unsigned accepted = 0;

	(void)state;
	dl_link_init(&l, 50000000, 20 * MS, 32 * 1024);
	for (unsigned i = 0; i < 100000; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		/* Offered load about 120% of the rate: the queue must overflow. */
		now += (seed >> 33) % (200 * US);
		if (dl_link_offer(&l, now, 40 + (uint32_t)((seed >> 20) % 1461), &at)) {
			assert_true(at >= last);
			assert_true(at >= now + 20 * MS);
			last = at;
			accepted++;
		}
		assert_true(dl_link_backlog(&l, now) <= 32 * 1024);
	}
	assert_int_equal(accepted, l.stats.packets);
	assert_int_equal(accepted + l.stats.drops, 100000);
	assert_true(l.stats.drops > 0);
}

static void
test_default_queue_is_one_bdp_at_least_64k(void **state)
{
	(void)state;
	/* 500 Mbit/s * 100 ms = 6.25 MB. */
	assert_int_equal(dl_default_queue(500000000, 100 * MS), 6250000);
	assert_int_equal(dl_default_queue(1000000, 10 * MS), 64 * 1024);
}

static void
test_no_loss_by_default_and_at_zero(void **state)
{
	struct dl_link l;
	uint64_t at = 0;

	(void)state;
	dl_link_init(&l, 0, 0, 64 * 1024);
	for (unsigned i = 0; i < 100000; i++)
		assert_true(dl_link_offer(&l, 0, 1500, &at));
	dl_link_set_loss(&l, 0.0, 7);
	for (unsigned i = 0; i < 100000; i++)
		assert_true(dl_link_offer(&l, 0, 1500, &at));
	assert_int_equal(l.stats.lost, 0);
	/* Without loss the generator is never drawn from. */
	assert_int_equal(l.prng, 7);
}

static void
test_loss_rate_matches_probability(void **state)
{
	struct dl_link l;
	uint64_t at = 0;
	const unsigned n = 1000000;

	(void)state;
	/* 0.1% of a million: 1000 expected, a standard deviation of about 32. */
	dl_link_init(&l, 0, 0, 64 * 1024);
	dl_link_set_loss(&l, 0.001, 1);
	for (unsigned i = 0; i < n; i++)
		dl_link_offer(&l, 0, 1000, &at);
	assert_in_range(l.stats.lost, 850, 1150);
	assert_int_equal(l.stats.lost + l.stats.packets, n);
	assert_int_equal(l.stats.lost_bytes, l.stats.lost * 1000);
	assert_int_equal(l.stats.drops, 0);
	/* 30%: the threshold is a share of the whole 64-bit range, not of a part. */
	dl_link_init(&l, 0, 0, 64 * 1024);
	dl_link_set_loss(&l, 0.3, 2);
	for (unsigned i = 0; i < 100000; i++)
		dl_link_offer(&l, 0, 1000, &at);
	assert_in_range(l.stats.lost, 29000, 31000);
}

static void
test_loss_is_repeatable_by_seed(void **state)
{
	uint64_t a = 42, b = 42, c = 43;
	uint64_t threshold = UINT64_MAX / 10;
	unsigned same_ab = 0, same_ac = 0, lost_a = 0;

	(void)state;
	for (unsigned i = 0; i < 100000; i++) {
		bool da = dl_loss_draw(&a, threshold);
		bool db = dl_loss_draw(&b, threshold);
		bool dc = dl_loss_draw(&c, threshold);

		same_ab += da == db;
		same_ac += da == dc;
		lost_a += da;
	}
	/* The same seed, the same decisions; another seed, other ones. */
	assert_int_equal(same_ab, 100000);
	assert_true(same_ac < 100000 - 1000);
	assert_in_range(lost_a, 9400, 10600);
}

static void
test_all_lost_at_one(void **state)
{
	struct dl_link l;
	uint64_t at = 0;

	(void)state;
	dl_link_init(&l, RATE_12M, 0, 64 * 1024);
	dl_link_set_loss(&l, 1.0, 3);
	for (unsigned i = 0; i < 10000; i++)
		assert_false(dl_link_offer(&l, 0, 1500, &at));
	assert_int_equal(l.stats.lost, 10000);
	/* Probabilities beyond the range are clamped, not wrapped. */
	dl_link_set_loss(&l, 2.0, 3);
	assert_int_equal(l.loss_threshold, UINT64_MAX);
	dl_link_set_loss(&l, -1.0, 3);
	assert_int_equal(l.loss_threshold, 0);
}

static void
test_lost_packets_take_no_room_in_the_queue(void **state)
{
	struct dl_link l;
	uint64_t at = 0;
	unsigned accepted = 0;

	(void)state;
	/* Room for four packets; half of the offered ones are lost on the way. */
	dl_link_init(&l, RATE_12M, 0, 6000);
	dl_link_set_loss(&l, 0.5, 11);
	for (unsigned i = 0; i < 8 && accepted < 4; i++)
		accepted += dl_link_offer(&l, 0, 1500, &at);
	assert_int_equal(accepted, 4);
	/* Each accepted packet holds the link 1 ms; the lost ones none. */
	assert_int_equal(l.busy_until, 4 * MS);
	assert_int_equal(l.stats.drops, 0);
	assert_int_equal(l.stats.packets, 4);
}

/* Writes a packet whose bytes say which one it is. */
static void
put(struct dl_ring *r, uint32_t seq, uint32_t len, size_t max_len)
{
	unsigned char *p = dl_ring_reserve(r, max_len);

	assert_non_null(p);
	for (uint32_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seq + i);
	dl_ring_commit(r, len, seq);
}

static void
check(struct dl_ring *r, uint32_t seq, uint32_t len)
{
	const struct dl_rec *rec = dl_ring_peek(r);

	assert_non_null(rec);
	assert_int_equal(rec->deliver_at, seq);
	assert_int_equal(rec->len, len);
	for (uint32_t i = 0; i < len; i++)
		assert_int_equal(rec->data[i], (unsigned char)(seq + i));
	dl_ring_pop(r);
}

static void
test_ring_is_fifo(void **state)
{
	struct dl_ring r;

	(void)state;
	assert_int_equal(dl_ring_init(&r, 4096), 0);
	assert_null(dl_ring_peek(&r));
	put(&r, 1, 100, 200);
	put(&r, 2, 1, 200);
	put(&r, 3, 0, 200);
	put(&r, 4, 150, 200);
	assert_int_equal(r.count, 4);
	assert_int_equal(r.bytes, 251);
	check(&r, 1, 100);
	check(&r, 2, 1);
	check(&r, 3, 0);
	check(&r, 4, 150);
	assert_null(dl_ring_peek(&r));
	dl_ring_free(&r);
}

static void
test_ring_full_then_wraps(void **state)
{
	struct dl_ring r;
	unsigned n = 0;

	(void)state;
	/* Records of 16 + 1000 bytes, padded to 1016: four fit in 4096. */
	assert_int_equal(dl_ring_init(&r, 4096), 0);
	while (dl_ring_reserve(&r, 1000))
		put(&r, n++, 1000, 1000);
	assert_int_equal(n, 4);
	/* Freeing the oldest makes room at the start: the next one wraps. */
	check(&r, 0, 1000);
	put(&r, 4, 1000, 1000);
	assert_true(r.end != 0);
	assert_null(dl_ring_reserve(&r, 1000));
	/* A reservation that is not committed changes nothing. */
	check(&r, 1, 1000);
	assert_non_null(dl_ring_reserve(&r, 1000));
	check(&r, 2, 1000);
	check(&r, 3, 1000);
	check(&r, 4, 1000);
	assert_int_equal(r.count, 0);
	assert_null(dl_ring_peek(&r));
	dl_ring_free(&r);
}

/* Random sizes, random reader pace: order and contents survive every wrap. */
static void
test_ring_random_against_counter(void **state)
{
	struct dl_ring r;
	uint64_t seed = 99;
	uint32_t next_in = 0, next_out = 0, lens[1024];
	unsigned wraps = 0;

	(void)state;
	assert_int_equal(dl_ring_init(&r, 64 * 1024), 0);
	for (unsigned step = 0; step < 200000; step++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		if ((seed >> 40) % 3 && next_in - next_out < 1024) {
			uint32_t len = (uint32_t)((seed >> 16) % 1501);
			size_t end = r.end;

			if (!dl_ring_reserve(&r, 1500))
				continue;
			lens[next_in % 1024] = len;
			put(&r, next_in++, len, 1500);
			wraps += !end && r.end;
		} else if (next_out != next_in) {
			check(&r, next_out, lens[next_out % 1024]);
			next_out++;
		}
	}
	while (next_out != next_in) {
		check(&r, next_out, lens[next_out % 1024]);
		next_out++;
	}
	assert_null(dl_ring_peek(&r));
	assert_true(wraps > 100);
	dl_ring_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_link_delivers_after_serialization_and_delay),
		cmocka_unit_test(test_back_to_back_packets_serialize_one_after_another),
		cmocka_unit_test(test_long_run_keeps_the_exact_rate),
		cmocka_unit_test(test_queue_limit_drops_tail),
		cmocka_unit_test(test_unlimited_rate_only_delays),
		cmocka_unit_test(test_delivery_times_never_go_backwards),
		cmocka_unit_test(test_default_queue_is_one_bdp_at_least_64k),
		cmocka_unit_test(test_no_loss_by_default_and_at_zero),
		cmocka_unit_test(test_loss_rate_matches_probability),
		cmocka_unit_test(test_loss_is_repeatable_by_seed),
		cmocka_unit_test(test_all_lost_at_one),
		cmocka_unit_test(test_lost_packets_take_no_room_in_the_queue),
		cmocka_unit_test(test_ring_is_fifo),
		cmocka_unit_test(test_ring_full_then_wraps),
		cmocka_unit_test(test_ring_random_against_counter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
