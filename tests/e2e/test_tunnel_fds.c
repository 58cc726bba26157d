/*
 * No descriptor leaks through tunnels: 1,000 CONNECT tunnels opened, used and
 * closed in batches of 50 at a time (half of the batches closed in order,
 * half reset with bytes still in flight) leave the daemon with as many sockets
 * and other descriptors as warm-up batches of the same kinds did, and with no
 * more pipes than the pool of idle pipes may keep (at most 16 pipes = 32
 * descriptors beyond those at start), with splice and with --no-splice. Also: the daemon raised its
 * RLIMIT_NOFILE soft limit to the hard limit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "harness.h"
#include "origin.h"

#define BATCH 50
#define HEAVY (4u * 1024u * 1024u) /* more than the socket buffers on the way hold */
#define LIGHT (64u * 1024u)
#define TUNNELS 1000
#define PIPE_POOL_FDS 32 /* 16 idle pipes */

static struct proxy px;

enum batch_kind {
	SMALL, /* a few bytes echoed, then an orderly close */
	RESET, /* bytes still in flight, then a reset */
};

static const char *const kind_names[] = {"small", "reset"};

static void
echo_origin(struct origin_conn *c, void *arg)
{
	(void)arg;
	origin_echo(c, 10000, NULL);
}

/*
 * Pushes bytes the client does not read yet into every tunnel, as much as
 * the sockets take in a few rounds: the echo backs up inside the proxy
 * (the clients' receive buffers are small).
 */
static void
push(struct client c[])
{
	size_t pushed[BATCH] = {0};
	static char block[256 * 1024];

	pattern_fill(block, 0, sizeof(block));
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < BATCH; i++) {
			size_t want = i % 5 == 0 ? HEAVY : LIGHT;
			ssize_t k = 1;

			while (pushed[i] < want && k > 0) {
				size_t n = want - pushed[i] < sizeof(block) ? want - pushed[i] :
				                                              sizeof(block);

				k = send(c[i].fd, block, n, MSG_NOSIGNAL | MSG_DONTWAIT);
				if (k > 0)
					pushed[i] += (size_t)k;
			}
		}
		sleep_ms(10);
	}
}

/*
 * BATCH tunnels open at once: every client sends its CONNECT before any
 * answer is read, then the batch's kind decides what flows and how the
 * tunnels end.
 */
static void
batch(struct origin *og, unsigned *serial, enum batch_kind kind)
{
	struct client c[BATCH];
	char auth[64];
	unsigned base = *serial;
	unsigned closed_before = origin_closed_count(og);

	snprintf(auth, sizeof(auth), "127.0.0.1:%d", origin_port(og));
	for (int i = 0; i < BATCH; i++) {
		client_open(&c[i], px.port);
		if (kind == RESET) {
			int small = 4096;

			setsockopt(c[i].fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		}
		client_sendf(&c[i], "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", auth, auth);
	}
	for (int i = 0; i < BATCH; i++) {
		struct response r;

		read_response_ok(&c[i], &r, RESP_CONNECT);
		if (r.head.status != 200)
			fail_msg("tunnel %u: CONNECT answered %d", base + (unsigned)i,
			         r.head.status);
		response_free(&r);
	}
	switch (kind) {
	case SMALL:
		for (int i = 0; i < BATCH; i++)
			client_sendf(&c[i], "tunnel %6u says hello", base + (unsigned)i);
		for (int i = 0; i < BATCH; i++) {
			char want[64];
			struct body got;
			int n = snprintf(want, sizeof(want), "tunnel %6u says hello",
			                 base + (unsigned)i);
			int rc;

			body_init(&got, 64);
			rc = client_recv_exact(&c[i], (uint64_t)n, &got);
			if (rc != WIRE_OK || memcmp(got.data, want, (size_t)n) != 0) {
				print_error("tunnel %u: expected the echo \"%s\", got %s \"%s\"\n",
				            base + (unsigned)i, want, wire_strerror(rc), got.data);
				body_free(&got);
				fail();
			}
			body_free(&got);
		}
		for (int i = 0; i < BATCH; i++)
			client_close(&c[i]);
		break;
	case RESET:
		push(c);
		for (int i = 0; i < BATCH; i++)
			client_abort(&c[i]);
		break;
	}
	*serial += BATCH;
	/* Each origin end sees its client's close through the proxy. */
	if (!origin_wait_closed(og, closed_before + BATCH, 5000))
		fail_msg("after closing %d tunnels (%s batch), only %u of their origin connections "
		         "ended",
		         BATCH, kind_names[kind], origin_closed_count(og) - closed_before);
}

static void
census_print(const char *label, const char *when, const struct fd_census *n)
{
	print_message("%s: %s: %d descriptors (%d sockets, %d pipe ends, %d other)\n", label, when,
	              n->total, n->sockets, n->pipes, n->other);
}

/*
 * Polls up to timeout_ms until the daemon holds no more sockets and other
 * descriptors than base and no more than max_pipes pipe ends. Returns the
 * last census.
 */
static void
settle(const struct fd_census *base, int max_pipes, int timeout_ms, struct fd_census *got)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	for (;;) {
		proxy_fd_census(&px, got);
		if ((got->sockets <= base->sockets && got->other <= base->other &&
		     got->pipes <= max_pipes) ||
		    now_s() >= deadline)
			return;
		sleep_ms(20);
	}
}

static void
assert_no_leak(const char *label, const char *what, const char *base_name,
               const struct fd_census *base, const struct fd_census *cold,
               const struct fd_census *got)
{
	if (got->sockets > base->sockets || got->other > base->other ||
	    got->pipes > cold->pipes + PIPE_POOL_FDS)
		fail_msg("%s: %s the daemon holds %d sockets, %d pipe ends and %d other "
		         "descriptors; expected at most %d sockets and %d other (as %s) and "
		         "%d pipe ends (%d at start plus %d for the pool of idle pipes)",
		         label, what, got->sockets, got->pipes, got->other, base->sockets,
		         base->other, base_name, cold->pipes + PIPE_POOL_FDS, cold->pipes,
		         PIPE_POOL_FDS);
}

static void
thousand_tunnels(const char *const args[], const char *label)
{
	struct origin *og = origin_start_raw(echo_origin, NULL);
	struct fd_census cold, warm, after;
	unsigned serial = 0;
	double t0;

	proxy_start(&px, args);
	proxy_fd_census(&px, &cold);
	census_print(label, "at start", &cold);
	/* Warm-up at the same concurrency, of both kinds. */
	batch(og, &serial, SMALL);
	batch(og, &serial, RESET);
	settle(&cold, cold.pipes + PIPE_POOL_FDS, 3000, &warm);
	census_print(label, "after the warm-up", &warm);
	assert_no_leak(label, "after the warm-up (100 tunnels, all closed)", "at start", &cold,
	               &cold, &warm);

	t0 = now_s();
	for (int i = 0; i < TUNNELS / BATCH; i++)
		batch(og, &serial, i % 2 ? RESET : SMALL);
	print_message("%s: %d more tunnels in %.2f s\n", label, TUNNELS, now_s() - t0);
	/* Pipes idle in the pool may differ from the warm-up; nothing else may. */
	settle(&warm, cold.pipes + PIPE_POOL_FDS, 3000, &after);
	census_print(label, "afterwards", &after);
	assert_no_leak(label, "after 1,000 more tunnels, all closed,", "after the warm-up", &warm,
	               &cold, &after);
	assert_int_equal(origin_connection_count(og), serial);
	proxy_stop(&px);
}

static void
thousand_tunnels_splice(void)
{
	static const char *const args[] = {"--connect-ports", "*", NULL};

	thousand_tunnels(args, "splice");
}

static void
thousand_tunnels_no_splice(void)
{
	static const char *const args[] = {"--connect-ports", "*", "--no-splice", NULL};

	thousand_tunnels(args, "--no-splice");
}

static struct rlimit saved_nofile;

static void
restore_nofile(void *arg)
{
	(void)arg;
	setrlimit(RLIMIT_NOFILE, &saved_nofile);
}

static void
nofile_soft_limit_raised(void)
{
	struct rlimit low;
	long soft = 0, hard = 0;

	/* The daemon inherits a soft limit well below the hard one. */
	if (getrlimit(RLIMIT_NOFILE, &saved_nofile) != 0)
		fail_msg("getrlimit: %s", strerror(errno));
	low = saved_nofile;
	if (low.rlim_max == RLIM_INFINITY || low.rlim_max > 512)
		low.rlim_cur = 512;
	else
		low.rlim_cur = low.rlim_max / 2;
	if (setrlimit(RLIMIT_NOFILE, &low) != 0)
		fail_msg("setrlimit: %s", strerror(errno));
	harness_defer(restore_nofile, NULL);
	proxy_start(&px, NULL);
	restore_nofile(NULL);
	proxy_nofile_limits(&px, &soft, &hard);
	print_message("daemon RLIMIT_NOFILE: soft %ld, hard %ld (started with soft %ld)\n", soft,
	              hard, (long)low.rlim_cur);
	if (soft != hard)
		fail_msg("the daemon's open-file soft limit is %ld, below its hard limit %ld", soft,
		         hard);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(thousand_tunnels_splice),
		E2E_TEST(thousand_tunnels_no_splice),
		E2E_TEST(nofile_soft_limit_raised),
	};

	return E2E_RUN("e2e_tunnel_fds", tests);
}
