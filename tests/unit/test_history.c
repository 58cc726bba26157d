/*
 * The samples the dashboard charts (history.h): one at the start, one per
 * interval on a manual clock, the oldest dropped once the ring is full,
 * read back oldest first, and the JSON /stats gives of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/history.h"

static struct clock manual;
static struct history h;

static int
setup(void **state)
{
	(void)state;
	memset(&kp_stats, 0, sizeof(kp_stats));
	clock_init_manual(&manual, 1000);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	history_stop(&h);
	return 0;
}

static void
test_a_sample_at_the_start_and_one_per_interval(void **state)
{
	(void)state;
	kp_stats.requests_on_reused = 7;
	history_start(&h, &manual, 10);
	assert_int_equal(history_count(&h), 1);
	assert_int_equal(history_at(&h, 0)->pooled, 7);
	kp_stats.requests_on_reused = 9;
	clock_advance(&manual, 9.9);
	assert_int_equal(history_count(&h), 1);
	clock_advance(&manual, 0.1);
	assert_int_equal(history_count(&h), 2);
	assert_int_equal(history_at(&h, 1)->pooled, 9);
	assert_true(h.taken_at == 1010);
	/* A minute later: six more, however the clock got there. */
	clock_advance(&manual, 60);
	assert_int_equal(history_count(&h), 8);
	assert_int_equal(h.taken, 8);
}

static void
test_every_counter_is_sampled(void **state)
{
	struct history_sample s;

	(void)state;
	kp_stats.requests_on_reused = 1;
	kp_stats.requests_on_freed = 2;
	kp_stats.requests_on_new = 3;
	kp_stats.readahead_hits = 4;
	kp_stats.readahead_joins = 5;
	kp_stats.responses_local = 6;
	kp_stats.bytes_to_clients = 7;
	kp_stats.saved_seconds = 8.5;
	history_sample_now(&s);
	assert_int_equal(s.pooled, 1);
	assert_int_equal(s.freed, 2);
	assert_int_equal(s.fresh, 3);
	assert_int_equal(s.readahead, 9);
	assert_int_equal(s.local, 6);
	assert_int_equal(s.bytes, 7);
	assert_true(s.saved == 8.5);
}

static void
test_the_oldest_goes_when_the_ring_is_full(void **state)
{
	unsigned taken = HISTORY_SAMPLES + 9;

	(void)state;
	history_start(&h, &manual, 0.25);
	/* Sample i holds i bytes: the start's is 0. */
	for (unsigned i = 1; i < taken; i++) {
		kp_stats.bytes_to_clients = i;
		clock_advance(&manual, 0.25);
	}
	assert_int_equal(h.taken, taken);
	assert_int_equal(history_count(&h), HISTORY_SAMPLES);
	for (unsigned i = 0; i < HISTORY_SAMPLES; i++)
		assert_int_equal(history_at(&h, i)->bytes, taken - HISTORY_SAMPLES + i);
}

static void
test_stopped_it_takes_no_more(void **state)
{
	(void)state;
	history_start(&h, &manual, 10);
	history_stop(&h);
	clock_advance(&manual, 100);
	assert_int_equal(history_count(&h), 1);
}

static void
test_json_has_the_samples_oldest_first(void **state)
{
	struct stats_text t = {0};
	struct history_sample s = {.pooled = 1, .freed = 2, .fresh = 3, .readahead = 4,
	                           .local = 5, .bytes = 6, .saved = 0.5};

	(void)state;
	/* Filled by hand: history_add() alone, no timer. */
	memset(&h, 0, sizeof(h));
	h.interval = 10;
	history_json(&h, &t, 5);
	stats_printf(&t, "%c", '\0');
	assert_string_equal(t.data, "{\"interval\": 10, \"taken\": 0, \"age\": 0.000, \"pooled\": [], "
	                            "\"freed\": [], \"new\": [], \"readahead\": [], \"local\": [], "
	                            "\"bytes\": [], \"saved\": []}");
	free(t.data);
	memset(&t, 0, sizeof(t));
	history_add(&h, &s, 100);
	s.bytes = 2000;
	s.saved = 1.25;
	history_add(&h, &s, 110);
	history_json(&h, &t, 112.5);
	stats_printf(&t, "%c", '\0');
	assert_string_equal(t.data,
	                    "{\"interval\": 10, \"taken\": 2, \"age\": 2.500, \"pooled\": [1, 1], "
	                    "\"freed\": [2, 2], \"new\": [3, 3], \"readahead\": [4, 4], "
	                    "\"local\": [5, 5], \"bytes\": [6, 2000], "
	                    "\"saved\": [0.500000, 1.250000]}");
	free(t.data);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_sample_at_the_start_and_one_per_interval,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_counter_is_sampled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_oldest_goes_when_the_ring_is_full, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_stopped_it_takes_no_more, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json_has_the_samples_oldest_first, setup,
		                                teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
