/*
 * Running out of file descriptors never spins, many idle clients do not
 * slow a request down, peers outside --allow take no descriptor on either
 * listener, and the stats page holds few. The test lowers the running
 * daemon's RLIMIT_NOFILE with prlimit(2) (it is our child), so the daemon
 * believes it has room for thousands of clients and meets EMFILE for real.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "harness.h"
#include "origin.h"

#define ORIGINS 50

static struct proxy px;

static void
limit_daemon(rlim_t n)
{
	struct rlimit rl = {n, n};

	if (prlimit(px.pid, RLIMIT_NOFILE, &rl, NULL) != 0)
		fail_msg("prlimit: %s", strerror(errno));
}

/*
 * This process's own descriptors: raised to the hard limit, the case
 * skipped when that is below need (the connections it opens, and margin).
 */
static void
raise_own_fd_limit(unsigned long need)
{
	struct rlimit rl;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max < need) {
		print_message("skipped: the fd limit %lu is below %lu\n", (unsigned long)rl.rlim_max,
		              need);
		skip();
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/*
 * The reproduction from the issue: 50 idle pooled connections, a limit of
 * 64, then 40 idle clients. Idle upstream connections give way to clients;
 * the daemon stays quiet and still serves a request.
 */
static void
idle_connections_give_way_to_clients(void)
{
	static struct origin *og[ORIGINS];
	static struct client cl[40];
	double cpu0, cpu;
	unsigned lines0;

	proxy_start(&px, NULL);
	for (int i = 0; i < ORIGINS; i++) {
		og[i] = origin_start(origin_handle_ok, NULL);
		expect_get(px.port, og[i], "/", 200, "ok");
	}
	limit_daemon(64);
	lines0 = proxy_log_count(&px, "\n");
	cpu0 = proxy_cpu_seconds(&px);
	for (int i = 0; i < 40; i++)
		client_open(&cl[i], px.port);
	sleep_ms(3000);
	cpu = proxy_cpu_seconds(&px) - cpu0;
	proxy_assert_alive(&px);
	if (cpu > 0.5)
		fail_msg("the daemon used %.2f s of CPU in 3 s while out of descriptors", cpu);
	if (proxy_log_count(&px, "\n") - lines0 > 60)
		fail_msg("%u log lines in 3 s while out of descriptors",
		         proxy_log_count(&px, "\n") - lines0);
	/* Every client got a descriptor from an idle connection: no client waits. */
	assert_true(stats_get(proxy_stats(&px), "clients") >= ORIGINS + 40);
	expect_get(px.port, og[0], "/", 200, "ok");
	for (int i = 0; i < 40; i++)
		client_close(&cl[i]);
	proxy_stop(&px);
}

/*
 * Nothing idle to give back: clients beyond the limit wait in the backlog,
 * the daemon does not spin, and they are served once others leave.
 */
static void
clients_wait_in_the_backlog_without_spinning(void)
{
	static struct client cl[40];
	struct origin *og = origin_start(origin_handle_ok, NULL);
	double cpu0, cpu;

	proxy_start(&px, NULL);
	limit_daemon(32);
	cpu0 = proxy_cpu_seconds(&px);
	for (int i = 0; i < 40; i++)
		client_open(&cl[i], px.port);
	sleep_ms(2000);
	cpu = proxy_cpu_seconds(&px) - cpu0;
	if (cpu > 0.5)
		fail_msg("the daemon used %.2f s of CPU in 2 s while out of descriptors", cpu);
	if (proxy_log_count(&px, "accept: ") > 2)
		fail_msg("%u accept warnings in 2 s: not rate-limited", proxy_log_count(&px, "accept: "));
	for (int i = 0; i < 30; i++)
		client_close(&cl[i]);
	/* The last one waited in the backlog; now it is accepted and served. */
	send_get(&cl[39], og, "/");
	expect_response(&cl[39], 200, "ok");
	for (int i = 30; i < 40; i++)
		client_close(&cl[i]);
	proxy_stop(&px);
}

/* 2,000 idle clients cost the daemon nothing a new request would notice. */
static void
many_idle_clients_do_not_delay_a_request(void)
{
	enum { IDLE = 2000 };
	static struct client idle[IDLE];
	struct origin *og = origin_start(origin_handle_ok, NULL);
	double t0, took;

	raise_own_fd_limit(IDLE * 2 + 512);
	proxy_start(&px, NULL);
	for (int i = 0; i < IDLE; i++)
		client_open(&idle[i], px.port);
	t0 = now_s();
	expect_get(px.port, og, "/", 200, "ok");
	took = now_s() - t0;
	if (took > 0.5)
		fail_msg("a request took %.2f s beside %d idle clients", took, IDLE);
	/* Every idle client was accepted (the harness's readiness probe adds one). */
	assert_true(stats_get(proxy_stats(&px), "clients") >= IDLE + 1);
	for (int i = 0; i < IDLE; i++)
		client_close(&idle[i]);
	proxy_stop(&px);
}

/*
 * 500 idle connections from an address outside --allow, half to the
 * proxy's port and half to the stats page's, with 256 descriptors: each is
 * closed at accept, so an allowed client is answered at once on both, and
 * the daemon does not spin.
 */
static void
refused_peers_take_no_descriptors(void)
{
	enum { REFUSED = 500 };
	static struct client refused[REFUSED];
	static char listen[64];
	const char *args[] = {"--allow", "127.0.0.1", "--stats-listen", listen, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	int stats_port = free_port(), status;
	double cpu0, t0, took, cpu;
	char url[128];

	raise_own_fd_limit(REFUSED + 256);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
	limit_daemon(256);
	for (int i = 0; i < REFUSED; i++)
		client_open_from(&refused[i], i % 2 ? stats_port : px.port, "127.0.0.2");
	cpu0 = proxy_cpu_seconds(&px);
	t0 = now_s();
	expect_get_from(px.port, "127.0.0.1", origin_url(og, "/", url, sizeof(url)), 200, "ok");
	stats_page(stats_port, "/metrics", &status);
	assert_int_equal(status, 200);
	took = now_s() - t0;
	if (took > 2.0)
		fail_msg("an allowed client waited %.2f s beside %d refused connections", took,
		         REFUSED);
	sleep_ms((int)((3.0 - took) * 1000));
	cpu = proxy_cpu_seconds(&px) - cpu0;
	print_message("allowed client answered in %.3f s; %.2f s of CPU in 3 s; %d descriptors\n",
	              took, cpu, proxy_fd_count(&px));
	if (cpu > 0.5)
		fail_msg("the daemon used %.2f s of CPU in 3 s beside %d refused connections", cpu,
		         REFUSED);
	/* Not one of them holds a descriptor: listeners, loop, pool, the few above. */
	if (proxy_fd_count(&px) > 32)
		fail_msg("the daemon holds %d descriptors beside %d refused connections",
		         proxy_fd_count(&px), REFUSED);
	for (int i = 0; i < REFUSED; i++)
		client_close(&refused[i]);
	proxy_stop(&px);
}

/*
 * 300 idle connections to the stats page from an allowed address, with 256
 * descriptors: the page holds 32 at most (the rest wait in the backlog), so
 * the proxy's clients keep theirs, and the daemon does not spin.
 */
static void
idle_stats_connections_are_capped(void)
{
	enum { IDLE = 300 };
	static struct client idle[IDLE];
	static char listen[64];
	const char *args[] = {"--stats-listen", listen, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	int stats_port = free_port();
	double cpu0, cpu;

	raise_own_fd_limit(IDLE + 256);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
	limit_daemon(256);
	for (int i = 0; i < IDLE; i++)
		client_open(&idle[i], stats_port);
	/* Peers the backlog dropped come again: the kernel resends its SYN-ACK after 1 s. */
	sleep_ms(1500);
	cpu0 = proxy_cpu_seconds(&px);
	expect_get(px.port, og, "/", 200, "ok");
	sleep_ms(2000);
	cpu = proxy_cpu_seconds(&px) - cpu0;
	print_message("%d descriptors beside %d idle stats connections; %.2f s of CPU in 2 s\n",
	              proxy_fd_count(&px), IDLE, cpu);
	/* 32 of them, the listeners, the loop's, stdio and the pool's: not 300. */
	if (proxy_fd_count(&px) > 48)
		fail_msg("the daemon holds %d descriptors beside %d idle stats connections",
		         proxy_fd_count(&px), IDLE);
	if (cpu > 0.5)
		fail_msg("the daemon used %.2f s of CPU in 2 s", cpu);
	for (int i = 0; i < IDLE; i++)
		client_close(&idle[i]);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(idle_connections_give_way_to_clients),
		E2E_TEST(clients_wait_in_the_backlog_without_spinning),
		E2E_TEST(many_idle_clients_do_not_delay_a_request),
		E2E_TEST(refused_peers_take_no_descriptors),
		E2E_TEST(idle_stats_connections_are_capped),
	};

	return E2E_RUN("descriptors", tests);
}
