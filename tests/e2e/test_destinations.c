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

/* One GET of url from source (NULL: loopback); returns the status. */
static int
get_from(const char *source, const char *url)
{
	struct client c;
	struct response r;
	int status;

	client_open_from(&c, px.port, source);
	client_sendf(&c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", url);
	read_response_ok(&c, &r, 0);
	status = r.head.status;
	response_free(&r);
	client_close(&c);
	return status;
}

static void
lan_client_cannot_reach_this_machine(void)
{
	static const char *const args[] = {"-b", "0.0.0.0", "--allow", "0.0.0.0/0",
	                                   "--connect-ports", "*", NULL};
	struct origin *og;
	struct client c;
	struct response r;
	char url[128], authority[64];

	require_world();
	og = origin_start(origin_handle_ok, NULL);
	proxy_start(&px, args);
	/* A local client may. */
	assert_int_equal(get_from(NULL, origin_url(og, "/", url, sizeof(url))), 200);
	assert_int_equal(origin_connection_count(og), 1);
	/* A LAN client may not, not even over the local client's pooled connection. */
	assert_int_equal(get_from(LAN_ADDR, url), 403);
	snprintf(url, sizeof(url), "http://" LAN_ADDR ":%d/", origin_port(og));
	assert_int_equal(get_from(LAN_ADDR, url), 403);
	/* A name that resolves to loopback is refused at connect time. */
	snprintf(url, sizeof(url), "http://rebind.test:%d/", origin_port(og));
	assert_int_equal(get_from(LAN_ADDR, url), 403);
	/* Nor through a tunnel. */
	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(og));
	client_open_from(&c, px.port, LAN_ADDR);
	client_sendf(&c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority);
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 403);
	response_free(&r);
	client_close(&c);
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
	assert_int_equal(get_from(LAN_ADDR, origin_url(og, "/", url, sizeof(url))), 200);
	proxy_stop(&px);
	proxy_start(&px, denied);
	assert_int_equal(get_from(NULL, url), 403);
	assert_int_equal(get_from(LAN_ADDR, url), 403);
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
