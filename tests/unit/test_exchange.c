/*
 * The exchange's own contract, where no daemon is needed to reach it: a
 * request of the owner's own whose head does not fit a buffer is refused
 * before anything is asked of dispatch (there is none here: asking would
 * crash), and the exchange is left as it was for a reset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kp/buf.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/env.h"
#include "kp/exchange.h"

#define CAPACITY 4096

static void
never(struct exchange *ex)
{
	(void)ex;
	fail_msg("the exchange told its owner something");
}

static void
never_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	(void)ex;
	(void)keep_alive;
	fail_msg("the exchange answered %d: %s", status, why);
}

static void
never_abort(struct exchange *ex, const char *why)
{
	(void)ex;
	fail_msg("the exchange aborted: %s", why);
}

static const struct exchange_ops ops = {
	.reply = never_reply,
	.abort = never_abort,
	.finished = never,
	.tunnel_opened = never,
	.wait = never,
};

static void
own_request_too_large_for_a_buffer(void **state)
{
	static char head[CAPACITY + 1];
	struct kp_config cfg;
	struct clock clock;
	struct proxy_env env = {0};
	struct conn down = {.fd = -1};
	struct buf *in = NULL, *out = NULL;
	struct http_target target = {.port = 80};
	struct exchange ex;

	(void)state;
	config_defaults(&cfg);
	buf_init(CAPACITY);
	clock_init_manual(&clock, 1000);
	env.clock = &clock;
	env.cfg = &cfg;
	strcpy(target.host, "example.com");
	strcpy(target.key, "example.com:80");
	exchange_init(&ex, &env, &down, &in, &out, &ops, true);
	memset(head, 'x', sizeof(head));
	assert_int_equal(exchange_start(&ex, &target, head, sizeof(head), DISPATCH_BACKGROUND), -1);
	assert_false(exchange_waiting(&ex));
	exchange_reset(&ex);
	exchange_release(&ex);
	buf_drain_free_list();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(own_request_too_large_for_a_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
