/*
 * The manual clock: timers fire in due order as it moves, each with the
 * clock at its due time; those due together fire most recently armed
 * first; re-arming moves a timer, stopping disarms it, and a timer armed
 * for now on a clock standing at 0 is armed all the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/clock.h"

struct probe {
	struct clock_timer t;
	char name;
};

static char fired[32];
static size_t nfired;
static ev_tstamp fired_at[32];

static void
record(struct clock_timer *t)
{
	struct probe *p = container_of(t, struct probe, t);

	fired_at[nfired] = clock_now(t->clock);
	fired[nfired++] = p->name;
	fired[nfired] = '\0';
}

static void
reset(void)
{
	nfired = 0;
	fired[0] = '\0';
}

static void
due_order_ties_newest_first(void **state)
{
	struct clock c;
	struct probe p[5];

	(void)state;
	reset();
	clock_init_manual(&c, 100);
	for (int i = 0; i < 5; i++) {
		p[i].name = (char)('a' + i);
		clock_timer_init(&p[i].t, &c, record);
	}
	clock_timer_start(&p[0].t, 3);   /* a at 103 */
	clock_timer_start(&p[1].t, 1);   /* b at 101 */
	clock_timer_start(&p[2].t, 3);   /* c at 103, armed after a */
	clock_timer_start(&p[3].t, 2);   /* d at 102 */
	clock_timer_start(&p[4].t, 9);   /* e at 109: not reached */
	assert_true(clock_timer_armed(&p[4].t));
	clock_advance(&c, 5);
	assert_string_equal(fired, "bdca");
	assert_true(fired_at[0] == 101 && fired_at[1] == 102 && fired_at[2] == 103 &&
	            fired_at[3] == 103);
	assert_true(clock_now(&c) == 105);
	for (int i = 0; i < 4; i++)
		assert_false(clock_timer_armed(&p[i].t));
	assert_true(clock_timer_armed(&p[4].t));

	/* Re-armed, it moves; stopped, it never fires. */
	reset();
	clock_timer_start(&p[0].t, 1);
	clock_timer_start(&p[1].t, 2);
	clock_timer_start(&p[0].t, 3);
	clock_timer_stop(&p[4].t);
	clock_timer_stop(&p[4].t);
	assert_false(clock_timer_armed(&p[4].t));
	clock_advance(&c, 10);
	assert_string_equal(fired, "ba");
}

/* Armed for now on a clock at 0: armed, and fires at 0 on the next move. */
static void
armed_at_zero(void **state)
{
	struct clock c;
	struct probe p = {.name = 'z'};

	(void)state;
	reset();
	clock_init_manual(&c, 0);
	clock_timer_init(&p.t, &c, record);
	assert_false(clock_timer_armed(&p.t));
	clock_timer_start(&p.t, 0);
	assert_true(clock_timer_armed(&p.t));
	clock_advance(&c, 0);
	assert_string_equal(fired, "z");
	assert_true(fired_at[0] == 0);
	assert_false(clock_timer_armed(&p.t));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(due_order_ties_newest_first),
		cmocka_unit_test(armed_at_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
