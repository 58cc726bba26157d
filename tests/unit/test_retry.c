/*
 * When a request that failed on an upstream connection may be sent again:
 * every combination of the facts, against the rule written out in retry.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kp/retry.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct retry_case {
	const char *name;
	struct retry_facts facts;
	bool expect;
};

/* Fields: reused, response_started, idempotent, complete, body_bytes_sent, retries. */
static const struct retry_case cases[] = {
	{"fresh connection", {false, false, true, true, 0, 0}, false},
	{"fresh connection, non-idempotent, incomplete", {false, false, false, false, 0, 0}, false},
	{"response started", {true, true, true, true, 0, 0}, false},
	{"response started, nothing else against", {true, true, true, false, 0, 0}, false},
	{"already retried once", {true, false, true, true, 0, 1}, false},
	{"already retried twice", {true, false, true, true, 0, 2}, false},
	{"body bytes sent, idempotent", {true, false, true, true, 1, 0}, false},
	{"body bytes sent, idempotent, incomplete", {true, false, true, false, 4096, 0}, false},
	{"body bytes sent, non-idempotent, incomplete", {true, false, false, false, 1, 0}, false},
	{"idempotent, complete, reused", {true, false, true, true, 0, 0}, true},
	{"idempotent, incomplete, reused", {true, false, true, false, 0, 0}, true},
	{"non-idempotent, complete", {true, false, false, true, 0, 0}, false},
	{"non-idempotent, not complete, no body sent", {true, false, false, false, 0, 0}, true},
};

static void
test_retry_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++)
		if (retry_allowed(&cases[i].facts) != cases[i].expect)
			fail_msg("%s: expected %s", cases[i].name, cases[i].expect ? "yes" : "no");
}

/*
 * Every combination of the six facts (body bytes and retries as 0 or not):
 * yes exactly when reused, no response byte, never retried, no body byte
 * gone, and either idempotent or not completely sent.
 */
static void
test_retry_all_combinations(void **state)
{
	unsigned yes = 0;

	(void)state;
	for (unsigned bits = 0; bits < 64; bits++) {
		struct retry_facts f = {
			.reused_connection = bits & 1,
			.response_started = (bits >> 1) & 1,
			.idempotent = (bits >> 2) & 1,
			.request_complete = (bits >> 3) & 1,
			.body_bytes_sent = (bits >> 4) & 1 ? 100 : 0,
			.retries = (bits >> 5) & 1 ? 1 : 0,
		};
		bool expect = f.reused_connection && !f.response_started && f.retries == 0 &&
		              f.body_bytes_sent == 0 && (f.idempotent || !f.request_complete);

		if (retry_allowed(&f) != expect)
			fail_msg("reused=%d started=%d idempotent=%d complete=%d body=%llu retries=%u: "
			         "expected %d",
			         f.reused_connection, f.response_started, f.idempotent,
			         f.request_complete, (unsigned long long)f.body_bytes_sent, f.retries,
			         expect);
		yes += expect;
	}
	/* reused, not started, not retried, no body: idempotent x2 or incomplete. */
	assert_int_equal(yes, 3);
}

static void
test_retry_large_counts(void **state)
{
	struct retry_facts f = {true, false, true, true, UINT64_MAX, 0};

	(void)state;
	assert_false(retry_allowed(&f));
	f.body_bytes_sent = 0;
	f.retries = ~0u;
	assert_false(retry_allowed(&f));
	f.retries = 0;
	assert_true(retry_allowed(&f));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retry_table),
		cmocka_unit_test(test_retry_all_combinations),
		cmocka_unit_test(test_retry_large_counts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
