/*
 * stats_reuse_saving(): the estimate of what a reused connection saved
 * one response, in round trips of the connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kp/stats.h"

static void
test_no_round_trip_time_saves_nothing(void **state)
{
	(void)state;
	assert_true(stats_reuse_saving(0, 1 << 20, false) == 0);
}

static void
test_a_small_answer_saves_the_handshake(void **state)
{
	(void)state;
	/* Ten segments fit in the first window: only the handshake is saved. */
	assert_true(stats_reuse_saving(0.05, 1, false) == 0.05);
	assert_true(stats_reuse_saving(0.05, 10 * 1448, false) == 0.05);
	/* TLS 1.3 costs one round trip more. */
	assert_true(stats_reuse_saving(0.05, 1, true) == 0.1);
}

static void
test_slow_start_rounds_are_counted(void **state)
{
	(void)state;
	/* One segment past the first window: a second round. */
	assert_true(stats_reuse_saving(0.1, 10 * 1448 + 1, false) == 0.2);
	/* 2 MiB, 1449 segments: windows 10, 20, 40 ... 1280 make eight rounds, seven saved. */
	assert_true(stats_reuse_saving(0.05, 2 << 20, false) == 0.05 * 8);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_round_trip_time_saves_nothing),
		cmocka_unit_test(test_a_small_answer_saves_the_handshake),
		cmocka_unit_test(test_slow_start_rounds_are_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
