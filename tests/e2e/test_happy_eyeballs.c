/*
 * Happy Eyeballs (RFC 8305): a name with an IPv6 address that swallows
 * every SYN and a working IPv4 address is served over IPv4 about 250 ms
 * later, not after a connect timeout.
 *
 * The test makes its own world: a network namespace and a mount namespace
 * of this process (the daemon and the origin inherit both), where
 * dual.test and v6only.test are names in a private /etc/hosts and a veth
 * pair whose far end has IPv6 switched off black-holes 2001:db8::1.
 * Without root (or without `ip`) the scenarios are skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;
static bool have_world;
static char world_why[256];

/* Builds the namespaces; false (and why) if this machine cannot. */
static bool
make_world(void)
{
	static const char *const steps[] = {
		"ip link set lo up",
		"ip link add kphe0 type veth peer name kphe1",
		/* The far end drops every IPv6 packet: a silent black hole. */
		"echo 1 > /proc/sys/net/ipv6/conf/kphe1/disable_ipv6",
		"ip link set kphe1 up",
		"ip link set kphe0 up",
		/* Non-loopback addresses of both families, so AI_ADDRCONFIG returns both. */
		"ip -6 addr add 2001:db8::2/64 dev kphe0 nodad",
		"ip addr add 192.0.2.2/24 dev kphe0",
		"ip -6 neigh add 2001:db8::1 lladdr 02:00:00:00:00:01 dev kphe0 nud permanent",
	};

	return harness_private_world(steps, sizeof(steps) / sizeof(steps[0]),
	                             "127.0.0.1 localhost\n2001:db8::1 dual.test v6only.test\n"
	                             "127.0.0.1 dual.test\n",
	                             world_why, sizeof(world_why));
}

static void
require_world(void)
{
	if (!have_world) {
		print_message("skipped: %s (needs root and ip(8))\n", world_why);
		skip();
	}
}

static void
blackholed_ipv6_falls_back_to_ipv4(void)
{
	struct origin *og;
	struct response r;
	char url[128];
	double t0, took;
	char *log;

	require_world();
	og = origin_start(origin_handle_ok, NULL);
	proxy_start(&px, NULL);
	snprintf(url, sizeof(url), "http://dual.test:%d/", origin_port(og));
	t0 = now_s();
	fetch(px.port, "GET", url, &r);
	took = now_s() - t0;
	assert_status(&r, 200);
	response_free(&r);
	/* Less than 200 ms would mean IPv6 was not tried first. */
	if (took < 0.2 || took > 0.8)
		fail_msg("served after %.3f s; Happy Eyeballs should take about 0.25 s", took);
	log = read_file_all(px.log_path, NULL);
	assert_non_null(log);
	if (!strstr(log, "connected to 127.0.0.1:"))
		fail_msg("the daemon's log does not show the IPv4 connection winning");
	free(log);
	assert_int_equal(origin_connection_count(og), 1);
	proxy_stop(&px);
}

/* Each attempt still times out on its own: an IPv6-only black hole gives 504. */
static void
connect_timeout_applies_per_attempt(void)
{
	static const char *const args[] = {"--connect-timeout", "1", NULL};
	struct response r;
	double t0, took;

	require_world();
	proxy_start(&px, args);
	t0 = now_s();
	fetch(px.port, "GET", "http://v6only.test:8080/", &r);
	took = now_s() - t0;
	assert_status(&r, 504);
	response_free(&r);
	if (took < 0.9 || took > 2.5)
		fail_msg("504 after %.2f s with --connect-timeout 1", took);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(blackholed_ipv6_falls_back_to_ipv4),
		E2E_TEST(connect_timeout_applies_per_attempt),
	};

	/* Before any thread exists, so the whole process moves. */
	have_world = make_world();
	return E2E_RUN("happy_eyeballs", tests);
}
