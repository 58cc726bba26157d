/*
 * Where a client may go: a client beyond this machine cannot reach the
 * machine itself (loopback, its own addresses) through the proxy, by
 * address or by a name that resolves there, unless --allow-dest says so;
 * --deny-dest refuses a destination to everyone.
 *
 * In a network and mount namespace of the test's own: 192.0.2.1 is this
 * machine's "LAN" address; a client bound to it counts as a LAN client.
 * rebind.test resolves to 127.0.0.1. Skipped without root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

#define LAN_ADDR "192.0.2.1"

static struct proxy px;
static bool have_world;
static char world_why[256];

static void
require_world(void)
{
	if (!have_world) {
		print_message("skipped: %s (needs root and ip(8))\n", world_why);
		skip();
	}
}

static void
lan_client_cannot_reach_this_machine(void)
{
	static const char *const args[] = {"-b", "0.0.0.0", "--allow", "0.0.0.0/0",
	                                   "--connect-ports", "*", NULL};
	struct origin *og;
	struct response r;
	char url[128], text[160];

	require_world();
	og = origin_start(origin_handle_ok, NULL);
	proxy_start(&px, args);
	/* A local client may. */
	expect_get_from(px.port, NULL, origin_url(og, "/", url, sizeof(url)), 200, "ok");
	assert_int_equal(origin_connection_count(og), 1);
	/* A LAN client may not, not even over the local client's pooled connection. */
	expect_get_from(px.port, LAN_ADDR, url, 403, NULL);
	snprintf(url, sizeof(url), "http://" LAN_ADDR ":%d/", origin_port(og));
	expect_get_from(px.port, LAN_ADDR, url, 403, NULL);
	/* A name that resolves to loopback is refused at connect time. */
	snprintf(url, sizeof(url), "http://rebind.test:%d/", origin_port(og));
	expect_get_from(px.port, LAN_ADDR, url, 403, NULL);
	/* Nor through a tunnel. */
	snprintf(text, sizeof(text), "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	         origin_port(og), origin_port(og));
	request_once(px.port, LAN_ADDR, text, &r);
	assert_status(&r, 403);
	response_free(&r);
	assert_int_equal(origin_connection_count(og), 1);
	proxy_stop(&px);
}

static void
allow_dest_and_deny_dest(void)
{
	static const char *const allowed[] = {"-b", "0.0.0.0", "--allow", "0.0.0.0/0",
	                                      "--allow-dest", "127.0.0.0/8", NULL};
	static const char *const denied[] = {"-b", "0.0.0.0", "--allow", "0.0.0.0/0",
	                                     "--deny-dest", "127.0.0.1", NULL};
	struct origin *og;
	char url[128];

	require_world();
	og = origin_start(origin_handle_ok, NULL);
	proxy_start(&px, allowed);
	expect_get_from(px.port, LAN_ADDR, origin_url(og, "/", url, sizeof(url)), 200, "ok");
	proxy_stop(&px);
	proxy_start(&px, denied);
	expect_get_from(px.port, NULL, url, 403, NULL);
	expect_get_from(px.port, LAN_ADDR, url, 403, NULL);
	proxy_stop(&px);
}

int
main(void)
{
	static const char *const steps[] = {
		"ip link set lo up",
		"ip link add kpdst0 type veth peer name kpdst1",
		"ip link set kpdst0 up",
		"ip link set kpdst1 up",
		"ip addr add " LAN_ADDR "/24 dev kpdst0",
	};
	const struct CMUnitTest tests[] = {
		E2E_TEST(lan_client_cannot_reach_this_machine),
		E2E_TEST(allow_dest_and_deny_dest),
	};

	/* Before any thread exists, so the whole process moves. */
	have_world = harness_private_world(steps, sizeof(steps) / sizeof(steps[0]),
	                                   "127.0.0.1 localhost rebind.test\n", world_why,
	                                   sizeof(world_why));
	return E2E_RUN("destinations", tests);
}
