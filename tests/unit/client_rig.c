#include "client_rig.h"

#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "kp/buf.h"
#include "kp/stats.h"

struct client_rig crig;

int
crig_setup(void **state)
{
	(void)state;
	memset(&crig, 0, sizeof(crig));
	memset(&kp_stats, 0, sizeof(kp_stats));
	if (!(crig.loop = ev_loop_new(EVFLAG_AUTO)))
		return -1;
	clock_init_manual(&crig.clock, 1000);
	config_defaults(&crig.cfg);
	/* As server.c sizes them: a head of --max-header-bytes always fits, with room to spare. */
	buf_init(crig.cfg.max_header_bytes + 1024);
	crig.env.loop = crig.loop;
	crig.env.clock = &crig.clock;
	crig.env.cfg = &crig.cfg;
	client_list_init(&crig.list);
	return 0;
}

int
crig_teardown(void **state)
{
	struct client *c;

	(void)state;
	while ((c = KP_LIST_FIRST(&crig.list.live, struct client, link)) != NULL)
		client_close(c);
	client_reap(&crig.list);
	client_list_free(&crig.list);
	for (unsigned i = 0; i < crig.npeers; i++)
		if (crig.peer[i] >= 0)
			close(crig.peer[i]);
	buf_drain_free_list();
	ev_loop_destroy(crig.loop);
	return 0;
}

struct client *
crig_client(int *peer)
{
	union net_addr from;
	struct client *c;
	int sv[2];

	assert_true(crig.npeers < CRIG_PEERS_MAX);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	memset(&from, 0, sizeof(from));
	from.in.sin_family = AF_INET;
	from.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	from.in.sin_port = htons(40000);
	c = client_new(&crig.env, &crig.list, sv[0], &from);
	assert_non_null(c);
	crig.peer[crig.npeers++] = sv[1];
	*peer = sv[1];
	return c;
}

void
crig_turn(void)
{
	ev_run(crig.loop, EVRUN_NOWAIT);
	client_reap(&crig.list);
}

void
crig_settle(void)
{
	for (int i = 0; i < 8; i++)
		crig_turn();
}

void
crig_advance(double seconds)
{
	clock_advance(&crig.clock, seconds);
	crig_settle();
}

void
crig_send(int fd, const char *text)
{
	size_t len = strlen(text);

	assert_int_equal(send(fd, text, len, MSG_NOSIGNAL), (ssize_t)len);
}

size_t
crig_fill(int fd)
{
	static const char junk[4096];
	size_t total = 0;
	ssize_t n;

	while ((n = send(fd, junk, sizeof(junk), MSG_NOSIGNAL)) > 0)
		total += (size_t)n;
	assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	assert_true(total > 0);
	return total;
}

void
crig_skip(int fd, size_t n)
{
	char scratch[4096];

	while (n > 0) {
		ssize_t got = recv(fd, scratch, n < sizeof(scratch) ? n : sizeof(scratch), 0);

		assert_true(got > 0);
		n -= (size_t)got;
	}
}

size_t
crig_recv(int fd, char *out, size_t cap)
{
	size_t have = 0;
	ssize_t n;

	while (have + 1 < cap && (n = recv(fd, out + have, cap - 1 - have, 0)) > 0)
		have += (size_t)n;
	out[have] = '\0';
	return have;
}

void
crig_hang_up(int fd)
{
	for (unsigned i = 0; i < crig.npeers; i++)
		if (crig.peer[i] == fd)
			crig.peer[i] = -1;
	close(fd);
}

bool
crig_eof(int fd)
{
	char c;

	return recv(fd, &c, 1, 0) == 0;
}
