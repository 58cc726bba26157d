/*
 * Spare buffers: a burst's spares go back after two trims, a steady load
 * keeps the ones it keeps taking.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kp/buf.h"

static void
burst_spares_are_freed(void **state)
{
	struct buf *b[10];

	(void)state;
	buf_init(1024);
	for (int i = 0; i < 10; i++)
		b[i] = buf_get();
	for (int i = 0; i < 10; i++)
		buf_put(b[i]);
	assert_int_equal(buf_spares(), 10);
	/* The spares were all taken during this period: nothing is idle yet. */
	assert_int_equal(buf_trim(), 0);
	/* Untouched for a whole period: all go. */
	assert_int_equal(buf_trim(), 10);
	assert_int_equal(buf_spares(), 0);
}

static void
steady_use_keeps_its_working_set(void **state)
{
	struct buf *b[4];

	(void)state;
	buf_init(1024);
	for (int i = 0; i < 4; i++)
		b[i] = buf_get();
	for (int i = 0; i < 4; i++)
		buf_put(b[i]);
	buf_trim();
	for (int round = 0; round < 5; round++) {
		/* Three of the four spares are in use at some point of each period. */
		for (int i = 0; i < 3; i++)
			b[i] = buf_get();
		for (int i = 0; i < 3; i++)
			buf_put(b[i]);
		buf_trim();
		assert_int_equal(buf_spares(), 3);
	}
	buf_drain_free_list();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(burst_spares_are_freed),
		cmocka_unit_test(steady_use_keeps_its_working_set),
	};

	return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}
