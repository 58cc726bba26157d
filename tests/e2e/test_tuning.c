/*
 * Socket tuning: every flag reaches the daemon's own sockets. The test
 * borrows the daemon's descriptors with pidfd_getfd(2) (the daemon is its
 * child) and reads the options back with getsockopt(2).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

enum which {
	UPSTREAM_TO,   /* connected to port */
	ACCEPTED_ON,   /* accepted on port */
	LISTENING_ON,  /* listening on port */
};

static int
port_of(int fd, bool peer)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&sa, &len) != 0 ||
	    sa.sin_family != AF_INET)
		return -1;
	return ntohs(sa.sin_port);
}

static int
int_opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, name, &v, &len) != 0)
		fail_msg("getsockopt(%d, %d): %s", level, name, strerror(errno));
	return v;
}

static bool
is_stream_socket(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* A copy of the daemon's socket of that kind, or -1; the caller closes it. */
static int
daemon_socket(enum which which, int port)
{
	int pidfd = (int)syscall(SYS_pidfd_open, px.pid, 0);
	int found = -1;

	if (pidfd < 0)
		fail_msg("pidfd_open: %s", strerror(errno));
	for (int target = 0; target < 256 && found < 0; target++) {
		int fd = (int)syscall(SYS_pidfd_getfd, pidfd, target, 0);
		bool listening, match = false;

		if (fd < 0)
			continue;
		if (is_stream_socket(fd)) {
			listening = int_opt(fd, SOL_SOCKET, SO_ACCEPTCONN) == 1;
			if (which == UPSTREAM_TO)
				match = !listening && port_of(fd, true) == port;
			else if (which == ACCEPTED_ON)
				match = !listening && port_of(fd, false) == port;
			else
				match = listening && port_of(fd, false) == port;
		}
		if (match)
			found = fd;
		else
			close(fd);
	}
	close(pidfd);
	return found;
}

static void
every_flag_reaches_the_upstream_socket(void)
{
	static const char *const args[] = {"--upstream-rcvbuf", "262144", "--upstream-sndbuf",
	                                   "131072", "--congestion", "reno", "--tcp-keepalive",
	                                   "9", NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char cc[16] = "";
	socklen_t len = sizeof(cc);
	int fd;

	proxy_start(&px, args);
	expect_get(px.port, og, "/", 200, "ok");   /* leaves the connection idle in the pool */
	fd = daemon_socket(UPSTREAM_TO, origin_port(og));
	if (fd < 0)
		fail_msg("no upstream socket to port %d in the daemon", origin_port(og));
	/* Linux reports twice what was set: it counts its bookkeeping too. */
	assert_int_equal(int_opt(fd, SOL_SOCKET, SO_RCVBUF), 2 * 262144);
	assert_int_equal(int_opt(fd, SOL_SOCKET, SO_SNDBUF), 2 * 131072);
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len), 0);
	assert_string_equal(cc, "reno");
	assert_int_equal(int_opt(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	assert_int_equal(int_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 9);
	assert_int_equal(int_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 3);
	assert_int_equal(int_opt(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
	assert_int_equal(int_opt(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	close(fd);
	proxy_stop(&px);
}

/* Without flags: keepalive probes at 15 s, and no fixed buffer (autotuning stays on). */
static void
defaults_leave_buffers_to_the_kernel(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct client c;
	int up, acc, lst, probe, rcvbuf, kernel_rcvbuf;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/");
	expect_response(&c, 200, "ok");
	up = daemon_socket(UPSTREAM_TO, origin_port(og));
	acc = daemon_socket(ACCEPTED_ON, px.port);
	lst = daemon_socket(LISTENING_ON, px.port);
	assert_true(up >= 0 && acc >= 0 && lst >= 0);
	/*
	 * A TCP socket starts with the middle value of net.ipv4.tcp_rmem, as an
	 * untouched socket of our own shows, and autotuning grows it only once a
	 * window's worth of data has come in; a 2-byte answer does not. A size
	 * set with SO_RCVBUF reads back doubled (so any but half the default
	 * shows), and locks the buffer there.
	 */
	probe = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(probe >= 0);
	rcvbuf = int_opt(up, SOL_SOCKET, SO_RCVBUF);
	kernel_rcvbuf = int_opt(probe, SOL_SOCKET, SO_RCVBUF);
	if (rcvbuf != kernel_rcvbuf)
		fail_msg("the upstream socket's receive buffer is %d bytes where the kernel starts "
		         "one at %d: a size was set, and that switches receive autotuning off",
		         rcvbuf, kernel_rcvbuf);
	assert_int_equal(int_opt(up, IPPROTO_TCP, TCP_KEEPIDLE), 15);
	assert_int_equal(int_opt(up, SOL_SOCKET, SO_KEEPALIVE), 1);
	assert_int_equal(int_opt(up, IPPROTO_TCP, TCP_NODELAY), 1);
	assert_int_equal(int_opt(acc, IPPROTO_TCP, TCP_NODELAY), 1);
	assert_int_equal(int_opt(acc, SOL_SOCKET, SO_KEEPALIVE), 0);
	assert_int_equal(int_opt(lst, SOL_SOCKET, SO_REUSEADDR), 1);
	close(probe);
	close(up);
	close(acc);
	close(lst);
	client_close(&c);
	proxy_stop(&px);
}

/* --tcp-keepalive 0 switches the probes off. */
static void
keepalive_zero_means_none(void)
{
	static const char *const args[] = {"--tcp-keepalive", "0", NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	int fd;

	proxy_start(&px, args);
	expect_get(px.port, og, "/", 200, "ok");
	fd = daemon_socket(UPSTREAM_TO, origin_port(og));
	assert_true(fd >= 0);
	assert_int_equal(int_opt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	close(fd);
	proxy_stop(&px);
}

/* An unknown congestion control stops the daemon at start, and says where to look. */
static void
unknown_congestion_is_refused_at_start(void)
{
	char port[16], log_path[512];
	const char *argv[] = {getenv("KP_BINARY"), "-p", port, "--congestion", "no-such-cc", NULL};
	char *log;

	assert_non_null(argv[0]);
	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(log_path, sizeof(log_path), "%s/start.log", harness_temp_dir());
	assert_int_equal(run_process(argv, log_path, 5000), 1);
	log = read_file_all(log_path, NULL);
	assert_non_null(log);
	if (!strstr(log, "net.ipv4.tcp_allowed_congestion_control"))
		fail_msg("the error does not name tcp_allowed_congestion_control:\n%s", log);
	free(log);
}

/* Whether name is one of the words in /proc/sys/net/ipv4/<list>. */
static bool
listed(const char *list, const char *name)
{
	char path[128], *text, *word, *save = NULL;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", list);
	if (!(text = read_file_all(path, NULL)))
		return false;
	for (word = strtok_r(text, " \n", &save); word && !found; word = strtok_r(NULL, " \n", &save))
		found = strcmp(word, name) == 0;
	free(text);
	return found;
}

/*
 * A congestion control the kernel has but does not allow the unprivileged:
 * root may set it, the -u user may not. The daemon must refuse to start,
 * not start and then fail every upstream connect with EPERM.
 */
static void
congestion_the_user_may_not_set_is_refused_at_start(void)
{
	static const char *const candidates[] = {"cubic", "reno", "bbr", "htcp", "vegas"};
	const char *cc = NULL;
	char port[16], log_path[512];
	char *log;

	if (geteuid() != 0) {
		skip();
	}
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && !cc; i++)
		if (listed("tcp_available_congestion_control", candidates[i]) &&
		    !listed("tcp_allowed_congestion_control", candidates[i]))
			cc = candidates[i];
	if (!cc) {
		print_message("every available congestion control is allowed here: nothing to refuse\n");
		skip();
	}
	{
		const char *argv[] = {getenv("KP_BINARY"), "-p", port, "-u", "nobody",
		                      "--congestion", cc, NULL};

		snprintf(port, sizeof(port), "%d", free_port());
		snprintf(log_path, sizeof(log_path), "%s/user-cc.log", harness_temp_dir());
		assert_int_equal(run_process(argv, log_path, 5000), 1);
	}
	log = read_file_all(log_path, NULL);
	assert_non_null(log);
	if (!strstr(log, "--congestion") || !strstr(log, "tcp_allowed_congestion_control"))
		fail_msg("the error does not name --congestion and the allowed list:\n%s", log);
	free(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(every_flag_reaches_the_upstream_socket),
		E2E_TEST(defaults_leave_buffers_to_the_kernel),
		E2E_TEST(keepalive_zero_means_none),
		E2E_TEST(unknown_congestion_is_refused_at_start),
		E2E_TEST(congestion_the_user_may_not_set_is_refused_at_start),
	};

	return E2E_RUN("tuning", tests);
}
