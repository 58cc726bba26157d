/*
 * Counters per host (hoststats.h): each key its own, a table that never
 * grows past HOSTSTATS_SLOTS and forgets the host counted least recently,
 * and the JSON member /stats gives of one host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/hoststats.h"

static struct hoststats hs;

static int
setup(void **state)
{
	(void)state;
	memset(&hs, 0, sizeof(hs));
	return 0;
}

static const struct host_counts one_reused = {.requests = 1, .reused = 1, .saved_seconds = 0.25};
static const struct host_counts one_new = {.requests = 1};
static const struct host_counts one_ahead = {.requests = 1, .readahead = 1,
                                             .readahead_bytes = 65536};

static void
test_each_host_counts_its_own(void **state)
{
	const struct host_counts *a, *b;

	(void)state;
	hoststats_count(&hs, "a.example:80", &one_new);
	hoststats_count(&hs, "a.example:80", &one_reused);
	hoststats_count(&hs, "a.example:80", &one_reused);
	hoststats_count(&hs, "b.example:80", &one_ahead);
	/* Another scheme, or a LAN client, is another key. */
	hoststats_count(&hs, "https://a.example:80", &one_new);
	assert_non_null(a = hoststats_find(&hs, "a.example:80"));
	assert_non_null(b = hoststats_find(&hs, "b.example:80"));
	assert_int_equal(a->requests, 3);
	assert_int_equal(a->reused, 2);
	assert_int_equal(a->readahead, 0);
	assert_true(a->saved_seconds == 0.5);
	assert_int_equal(b->requests, 1);
	assert_int_equal(b->readahead, 1);
	assert_int_equal(b->readahead_bytes, 65536);
	assert_int_equal(hoststats_find(&hs, "https://a.example:80")->requests, 1);
	assert_null(hoststats_find(&hs, "c.example:80"));
	assert_int_equal(hs.used, 3);
	assert_int_equal(hs.forgotten, 0);
}

static void
test_the_least_recently_counted_is_forgotten(void **state)
{
	char key[32];

	(void)state;
	for (int i = 0; i < HOSTSTATS_SLOTS; i++) {
		snprintf(key, sizeof(key), "h%d:80", i);
		hoststats_count(&hs, key, &one_reused);
	}
	/* h0 is counted again: h1 is now the least recent. */
	hoststats_count(&hs, "h0:80", &one_reused);
	hoststats_count(&hs, "new:80", &one_new);
	assert_int_equal(hs.used, HOSTSTATS_SLOTS);
	assert_int_equal(hs.forgotten, 1);
	assert_null(hoststats_find(&hs, "h1:80"));
	assert_int_equal(hoststats_find(&hs, "h0:80")->requests, 2);
	/* The newcomer starts from nothing, not from what h1 had. */
	assert_int_equal(hoststats_find(&hs, "new:80")->requests, 1);
	assert_int_equal(hoststats_find(&hs, "new:80")->reused, 0);
	/* h1 again: h2 goes, and h1 starts over. */
	hoststats_count(&hs, "h1:80", &one_new);
	assert_null(hoststats_find(&hs, "h2:80"));
	assert_int_equal(hoststats_find(&hs, "h1:80")->reused, 0);
	assert_int_equal(hs.forgotten, 2);
}

static void
test_a_key_too_long_is_not_counted(void **state)
{
	char key[HOSTSTATS_KEY + 1];

	(void)state;
	memset(key, 'a', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	hoststats_count(&hs, key, &one_new);
	assert_int_equal(hs.used, 0);
	/* The longest that fits is counted. */
	key[HOSTSTATS_KEY - 1] = '\0';
	hoststats_count(&hs, key, &one_new);
	assert_int_equal(hoststats_find(&hs, key)->requests, 1);
}

static void
test_json_of_one_host(void **state)
{
	struct stats_text t = {0};

	(void)state;
	hoststats_count(&hs, "a.example:80", &one_reused);
	stats_printf(&t, "{");
	hoststats_json(&t, "a.example:80", 2, hoststats_find(&hs, "a.example:80"));
	hoststats_json(&t, "idle.example:80", 1, NULL);
	stats_printf(&t, "}%c", '\0');
	assert_string_equal(t.data,
	                    "{\"a.example:80\": {\"idle\": 2, \"requests\": 1, \"reused\": 1, "
	                    "\"readahead\": 0, \"readahead_bytes\": 0, \"saved_seconds\": 0.250000}, "
	                    "\"idle.example:80\": {\"idle\": 1, \"requests\": 0, \"reused\": 0, "
	                    "\"readahead\": 0, \"readahead_bytes\": 0, \"saved_seconds\": 0.000000}}");
	free(t.data);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_each_host_counts_its_own, setup),
		cmocka_unit_test_setup(test_the_least_recently_counted_is_forgotten, setup),
		cmocka_unit_test_setup(test_a_key_too_long_is_not_counted, setup),
		cmocka_unit_test_setup(test_json_of_one_host, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
