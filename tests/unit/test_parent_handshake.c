/*
 * Opening a path through a parent proxy: a scripted parent on the far end
 * of a loopback TCP connection, the handshake on the near end driven by a
 * real libev loop. Each case checks the exact bytes the handshake sends,
 * feeds the parent's reply (whole, split, short, wrong) and checks the
 * outcome, the status, the words, and that not a byte past the reply was
 * read from the socket.
 *
 * send(2) is wrapped (-Wl,--wrap=send) so a case can make it take one
 * byte at a time, or none, and see the request still go out whole.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "kp/list.h"
#include "kp/parent_handshake.h"
#include "kp/parent_wire.h"

ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);

static size_t send_cap;        /* 0: send as asked; else at most this many bytes a call */
static bool send_stall_next;   /* with send_cap: every other call says EAGAIN */
static unsigned send_calls;

ssize_t
__wrap_send(int fd, const void *buf, size_t len, int flags)
{
	send_calls++;
	if (send_cap) {
		send_stall_next = !send_stall_next;
		if (!send_stall_next) {
			errno = EAGAIN;
			return -1;
		}
		if (len > send_cap)
			len = send_cap;
	}
	return __real_send(fd, buf, len, flags);
}

struct rig {
	struct ev_loop *loop;
	int fd;        /* the proxy's end, non-blocking: the handshake's */
	int peer;      /* the scripted parent's end */
	struct parent_handshake h;
	struct parent_hop hop;
	unsigned calls;
	enum parent_outcome outcome;
	int status;
	char why[1024];
	ev_tstamp ended_at;
};

static struct rig rig;

static void
on_done(struct parent_handshake *h, enum parent_outcome outcome, int status, const char *why)
{
	struct rig *r = container_of(h, struct rig, h);

	r->calls++;
	r->outcome = outcome;
	r->status = status;
	snprintf(r->why, sizeof(r->why), "%s", why);
	r->ended_at = ev_now(r->loop);
}

/* A fresh loopback connection: fd for the handshake, peer for the parent. */
static void
pair(struct rig *r)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	struct timeval tv = {.tv_sec = 2};
	int one = 1;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(r->fd >= 0);
	assert_int_equal(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	r->peer = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(r->peer >= 0);
	close(lfd);
	assert_int_equal(fcntl(r->fd, F_SETFL, O_NONBLOCK), 0);
	/* The split cases need each write of the parent to arrive as a write of its own. */
	assert_int_equal(setsockopt(r->peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
	assert_int_equal(setsockopt(r->peer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	r->calls = 0;
	r->why[0] = '\0';
	memset(&r->h, 0, sizeof(r->h));
}

static void
unpair(struct rig *r)
{
	parent_handshake_cancel(&r->h);
	if (r->fd >= 0)
		close(r->fd);
	if (r->peer >= 0)
		close(r->peer);
	r->fd = r->peer = -1;
}

static int
setup(void **state)
{
	rig.loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(rig.loop);
	pair(&rig);
	rig.hop = (struct parent_hop){.kind = PARENT_SOCKS5H, .label = "socks5h://10.0.0.5:1080"};
	send_cap = 0;
	send_stall_next = false;
	send_calls = 0;
	*state = &rig;
	return 0;
}

static int
teardown(void **state)
{
	struct rig *r = *state;

	unpair(r);
	ev_loop_destroy(r->loop);
	return 0;
}

static void
start(struct rig *r, const char *host, uint16_t port, const struct sockaddr *addr,
      double timeout)
{
	parent_handshake_start(&r->h, r->loop, r->fd, &r->hop, host, port, addr, timeout, on_done);
}

/*
 * Lets the handshake take what the parent wrote: once all of it is on the
 * near socket (nothing left unacknowledged on the far one), the loop runs
 * until the handshake took it all or ended. Bounded, so a case fails
 * rather than hangs.
 */
static void
settle(struct rig *r)
{
	ev_tstamp until = ev_time() + 1;
	int outq = 1, unread = 1;

	while (r->peer >= 0 && ev_time() < until && ioctl(r->peer, SIOCOUTQ, &outq) == 0 && outq)
		usleep(1000);
	/* A few rounds whatever the ioctls say: an emulator may not know them. */
	for (int round = 0; !r->calls && ev_time() < until; round++) {
		ev_run(r->loop, EVRUN_NOWAIT);
		if (round >= 3 && ioctl(r->fd, FIONREAD, &unread) == 0 && !unread)
			break;
	}
}

static void
guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	*(bool *)w->data = true;
	ev_break(loop, EVBREAK_ONE);
}

/* Runs the loop until the handshake ends, or seconds pass. */
static void
run_for(struct rig *r, double seconds)
{
	bool over = false;
	ev_timer guard;

	ev_timer_init(&guard, guard_cb, seconds, 0.);
	guard.data = &over;
	ev_timer_start(r->loop, &guard);
	while (!r->calls && !over)
		ev_run(r->loop, EVRUN_ONCE);
	ev_timer_stop(r->loop, &guard);
}

/* The parent reads exactly these bytes, and nothing more is waiting. */
static void
expect_sent(struct rig *r, const void *bytes, size_t len)
{
	uint8_t got[2048];
	size_t have = 0;
	ev_tstamp until = ev_time() + 2;

	assert_true(len <= sizeof(got));
	while (have < len && ev_time() < until) {
		ssize_t n = recv(r->peer, got + have, len - have, MSG_DONTWAIT);

		if (n > 0)
			have += (size_t)n;
		else
			ev_run(r->loop, EVRUN_NOWAIT);
	}
	assert_int_equal(have, len);
	assert_memory_equal(got, bytes, len);
	assert_int_equal(recv(r->peer, got, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	assert_int_equal(errno, EAGAIN);
}

/* The parent sends bytes. */
static void
say(struct rig *r, const void *bytes, size_t len)
{
	/* write(2), not send(2): the wrapped send is the handshake's alone. */
	assert_int_equal(write(r->peer, bytes, len), (ssize_t)len);
}

#define SAY(r, lit) say((r), (lit), sizeof(lit) - 1)
#define EXPECT(r, lit) expect_sent((r), (lit), sizeof(lit) - 1)

/* Nothing at all reached the parent. */
static void
expect_silence(struct rig *r)
{
	uint8_t b;

	assert_int_equal(recv(r->peer, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	assert_int_equal(errno, EAGAIN);
}

/* The socket holds exactly these bytes after the reply, and then nothing. */
static void
expect_left(struct rig *r, const void *bytes, size_t len)
{
	uint8_t got[256];
	ssize_t n = recv(r->fd, got, sizeof(got), 0);

	assert_int_equal(n, (ssize_t)len);
	assert_memory_equal(got, bytes, len);
}

static void
expect_end(struct rig *r, enum parent_outcome o, int status, const char *words)
{
	assert_int_equal(r->calls, 1);
	if (r->outcome != o)
		fail_msg("outcome %s, not %s: %s", parent_outcome_name(r->outcome),
		         parent_outcome_name(o), r->why);
	assert_int_equal(r->status, status);
	if (words && !strstr(r->why, words))
		fail_msg("\"%s\" does not say \"%s\"", r->why, words);
	assert_non_null(strstr(r->why, r->hop.label));
}

/* The SOCKS5 greeting without credentials, answered "no authentication". */
static void
socks_hello(struct rig *r)
{
	EXPECT(r, "\x05\x01\x00");
	SAY(r, "\x05\x00");
}

static const char reply_v4[] = "\x05\x00\x00\x01\x0a\x00\x00\x01\x1f\x90";

/* ---- SOCKS5: what is sent -------------------------------------------------- */

static void
test_socks5h_sends_the_name(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 5);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, "opened example.com:443");
}

static void
test_socks5h_sends_an_ipv4_literal_as_an_address(void **state)
{
	struct rig *r = *state;

	start(r, "192.0.2.7", 8080, NULL, 5);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x01\xc0\x00\x02\x07\x1f\x90");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
}

static void
test_socks5h_sends_an_ipv6_literal_as_an_address(void **state)
{
	struct rig *r = *state;
	static const char *const forms[] = {"2001:db8::1", "[2001:db8::1]"};

	for (size_t i = 0; i < 2; i++) {
		if (i)
			pair(r);
		start(r, forms[i], 443, NULL, 5);
		socks_hello(r);
		EXPECT(r, "\x05\x01\x00\x04"
		          "\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
		          "\x01\xbb");
		say(r, reply_v4, sizeof(reply_v4) - 1);
		run_for(r, 2);
		expect_end(r, PARENT_OPEN, 0, "[2001:db8::1]:443");
		unpair(r);
	}
}

static void
test_socks5_sends_the_resolved_address(void **state)
{
	struct rig *r = *state;
	struct sockaddr_in v4 = {.sin_family = AF_INET};
	struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};

	r->hop = (struct parent_hop){.kind = PARENT_SOCKS5, .label = "socks5://10.0.0.6:1080"};
	inet_pton(AF_INET, "203.0.113.9", &v4.sin_addr);
	start(r, "example.com", 443, (struct sockaddr *)&v4, 5);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x01\xcb\x00\x71\x09\x01\xbb");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
	unpair(r);

	pair(r);
	inet_pton(AF_INET6, "2001:db8::42", &v6.sin6_addr);
	start(r, "example.com", 443, (struct sockaddr *)&v6, 5);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x04"
	          "\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x42"
	          "\x01\xbb");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
}

/* socks5:// promises the name stays here: without an address it sends nothing. */
static void
test_socks5_without_an_address_sends_nothing(void **state)
{
	struct rig *r = *state;

	r->hop = (struct parent_hop){.kind = PARENT_SOCKS5, .label = "socks5://10.0.0.6:1080"};
	start(r, "example.com", 443, NULL, 5);
	expect_end(r, PARENT_REFUSED, 502, "none was given");
	expect_silence(r);
}

static void
test_name_of_256_bytes_refused_before_sending(void **state)
{
	struct rig *r = *state;
	char name[257], sent[4 + 1 + 255 + 2];

	memset(name, 'a', 256);
	name[256] = '\0';
	start(r, name, 443, NULL, 5);
	expect_end(r, PARENT_REFUSED, 502, "at most 255 bytes");
	expect_silence(r);
	unpair(r);

	/* 255 is the most, and goes. */
	pair(r);
	name[255] = '\0';
	start(r, name, 443, NULL, 5);
	socks_hello(r);
	memcpy(sent, "\x05\x01\x00\x03\xff", 5);
	memcpy(sent + 5, name, 255);
	memcpy(sent + 260, "\x01\xbb", 2);
	expect_sent(r, sent, sizeof(sent));
	assert_int_equal(r->calls, 0);
}

/* ---- SOCKS5: username and password ---------------------------------------- */

static void
test_password_accepted(void **state)
{
	struct rig *r = *state;
	/* RFC 1929 says 1; servers that answer 5 are common enough to be taken too. */
	static const char *const verdicts[] = {"\x01\x00", "\x05\x00"};

	r->hop.user = "alice";
	r->hop.password = "s3cret";
	for (size_t i = 0; i < 2; i++) {
		if (i)
			pair(r);
		start(r, "example.com", 443, NULL, 5);
		EXPECT(r, "\x05\x02\x00\x02");
		SAY(r, "\x05\x02");
		EXPECT(r, "\x01\x05"
		          "alice\x06"
		          "s3cret");
		say(r, verdicts[i], 2);
		EXPECT(r, "\x05\x01\x00\x03\x0b"
		          "example.com\x01\xbb");
		say(r, reply_v4, sizeof(reply_v4) - 1);
		run_for(r, 2);
		expect_end(r, PARENT_OPEN, 0, NULL);
		unpair(r);
	}
}

/* Offered both, the parent may still take "no authentication": no login then. */
static void
test_password_offered_but_not_wanted(void **state)
{
	struct rig *r = *state;

	r->hop.user = "alice";
	r->hop.password = "s3cret";
	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x02\x00\x02");
	SAY(r, "\x05\x00");
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
}

static void
test_password_rejected(void **state)
{
	struct rig *r = *state;

	r->hop = (struct parent_hop){.kind = PARENT_SOCKS5H, .label = "socks5h://10.0.0.5:1080",
	                             .user = "alice", .password = "s3cret"};
	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x02\x00\x02");
	SAY(r, "\x05\x02");
	EXPECT(r, "\x01\x05"
	          "alice\x06"
	          "s3cret");
	SAY(r, "\x01\x01");
	run_for(r, 2);
	expect_end(r, PARENT_AUTH_FAILED, 502, "rejected the username and password");
	assert_null(strstr(r->why, "alice"));
	assert_null(strstr(r->why, "s3cret"));
	expect_silence(r);
}

static void
test_no_acceptable_method(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x01\x00");
	SAY(r, "\x05\xff");
	run_for(r, 2);
	expect_end(r, PARENT_AUTH_FAILED, 502, "wants a username and password");
	unpair(r);

	pair(r);
	r->hop.user = "alice";
	r->hop.password = "s3cret";
	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x02\x00\x02");
	SAY(r, "\x05\xff");
	run_for(r, 2);
	expect_end(r, PARENT_AUTH_FAILED, 502, "accepts none of the methods offered");
}

/* Asked for a login it was not offered, without credentials: it wants them. */
static void
test_password_chosen_without_credentials(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x01\x00");
	SAY(r, "\x05\x02");
	run_for(r, 2);
	expect_end(r, PARENT_AUTH_FAILED, 502, "wants a username and password");
	expect_silence(r);
}

static void
test_method_not_offered(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x01\x00");
	SAY(r, "\x05\x01");   /* GSSAPI */
	run_for(r, 2);
	expect_end(r, PARENT_BAD_REPLY, 502, "method 0x01, which was not offered");
}

static void
test_credentials_over_255_bytes_not_sent(void **state)
{
	struct rig *r = *state;
	char long_password[300];

	memset(long_password, 'p', 299);
	long_password[299] = '\0';
	r->hop.user = "alice";
	r->hop.password = long_password;
	start(r, "example.com", 443, NULL, 5);
	expect_end(r, PARENT_AUTH_FAILED, 502, "at most 255 bytes");
	assert_null(strstr(r->why, "ppp"));
	expect_silence(r);
}

/* ---- SOCKS5: the reply to CONNECT ------------------------------------------ */

static void
test_each_reply_code(void **state)
{
	struct rig *r = *state;
	static const struct {
		uint8_t rep;
		enum parent_outcome outcome;
		const char *text;
	} table[] = {
		{0x01, PARENT_REFUSED, "general SOCKS server failure"},
		{0x02, PARENT_REFUSED, "connection not allowed by ruleset"},
		{0x03, PARENT_ORIGIN_UNREACHABLE, "network unreachable"},
		{0x04, PARENT_ORIGIN_UNREACHABLE, "host unreachable"},
		{0x05, PARENT_ORIGIN_UNREACHABLE, "connection refused"},
		{0x06, PARENT_ORIGIN_UNREACHABLE, "TTL expired"},
		{0x07, PARENT_REFUSED, "command not supported"},
		{0x08, PARENT_REFUSED, "address type not supported"},
		{0x09, PARENT_BAD_REPLY, "reply code is unassigned: 05 09"},
		{0x80, PARENT_BAD_REPLY, "reply code is unassigned: 05 80"},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		char reply[10], words[200];

		if (i)
			pair(r);
		memcpy(reply, reply_v4, sizeof(reply));
		reply[1] = (char)table[i].rep;
		start(r, "example.com", 443, NULL, 5);
		socks_hello(r);
		EXPECT(r, "\x05\x01\x00\x03\x0b"
		          "example.com\x01\xbb");
		say(r, reply, sizeof(reply));
		run_for(r, 2);
		if (table[i].outcome == PARENT_BAD_REPLY)
			snprintf(words, sizeof(words), "sent a malformed reply (the %s",
			         table[i].text);
		else
			snprintf(words, sizeof(words), "parent socks5h://10.0.0.5:1080 %s %s: %s",
			         table[i].outcome == PARENT_REFUSED ? "refused" : "could not reach",
			         "example.com:443", table[i].text);
		expect_end(r, table[i].outcome, 502, words);
		if (table[i].outcome != PARENT_BAD_REPLY)
			assert_string_equal(r->why, words);
		unpair(r);
	}
}

/* Every byte in a write of its own: nothing ends before the last. */
static void
test_reply_split_byte_by_byte(void **state)
{
	struct rig *r = *state;
	static const char reply[] = "\x05\x00\x00\x03\x09proxy.lan\x04\x38";

	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x01\x00");
	say(r, "\x05", 1);
	settle(r);
	SAY(r, "\x00");
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	for (size_t i = 0; i < sizeof(reply) - 1; i++) {
		assert_int_equal(r->calls, 0);
		say(r, reply + i, 1);
		settle(r);
	}
	expect_end(r, PARENT_OPEN, 0, NULL);
}

/*
 * The origin speaks first behind the reply, in the same segment: its bytes
 * stay on the socket. The one-byte name is the shortest reply there is, 8
 * bytes: a reader that took IPv4's 10 up front would eat 2 of the origin's.
 */
static void
test_origin_bytes_after_the_reply_left_unread(void **state)
{
	struct rig *r = *state;
	static const struct {
		const char *bytes;
		size_t len;
	} replies[] = {
		{"\x05\x00\x00\x03\x01z\x00\x50", 8},
		{"\x05\x00\x00\x01\x0a\x00\x00\x01\x1f\x90", 10},
		{"\x05\x00\x00\x04\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
		 "\x00\x50",
		 22},
	};
	static const char banner[] = "SSH-2.0-OpenSSH_9.2\r\n";

	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		char wire[64];

		if (i)
			pair(r);
		memcpy(wire, replies[i].bytes, replies[i].len);
		memcpy(wire + replies[i].len, banner, sizeof(banner) - 1);
		start(r, "example.com", 22, NULL, 5);
		socks_hello(r);
		EXPECT(r, "\x05\x01\x00\x03\x0b"
		          "example.com\x00\x16");
		say(r, wire, replies[i].len + sizeof(banner) - 1);
		run_for(r, 2);
		expect_end(r, PARENT_OPEN, 0, NULL);
		expect_left(r, banner, sizeof(banner) - 1);
		unpair(r);
	}
}

/* The greeting's answer and the CONNECT's in one write: each read stops at its reply. */
static void
test_replies_back_to_back(void **state)
{
	struct rig *r = *state;
	char wire[2 + 10 + 3];

	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x01\x00");
	memcpy(wire, "\x05\x00", 2);
	memcpy(wire + 2, reply_v4, 10);
	memcpy(wire + 12, "abc", 3);
	say(r, wire, sizeof(wire));
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	expect_left(r, "abc", 3);
}

static void
test_short_reply_then_stall_times_out(void **state)
{
	struct rig *r = *state;
	ev_tstamp began;

	start(r, "example.com", 443, NULL, 0.2);
	began = ev_now(r->loop);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	SAY(r, "\x05\x00\x00\x01\x0a");
	run_for(r, 3);
	expect_end(r, PARENT_TIMEOUT, 504,
	           "did not finish its answer to CONNECT example.com:443 within 0.2 s");
	assert_true(r->ended_at - began >= 0.19);
	assert_true(r->ended_at - began < 2);
}

static void
test_silent_parent_times_out(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 0.2);
	EXPECT(r, "\x05\x01\x00");
	run_for(r, 3);
	expect_end(r, PARENT_TIMEOUT, 504, "did not answer the SOCKS5 greeting within 0.2 s");
}

static void
test_eof_mid_reply(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 5);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	SAY(r, "\x05\x00\x00");
	shutdown(r->peer, SHUT_WR);
	run_for(r, 2);
	expect_end(r, PARENT_CLOSED, 502,
	           "closed the connection in the middle of its reply to CONNECT example.com:443");
}

static void
test_eof_instead_of_an_answer(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x01\x00");
	shutdown(r->peer, SHUT_WR);
	run_for(r, 2);
	expect_end(r, PARENT_CLOSED, 502,
	           "closed the connection instead of answering the SOCKS5 greeting");
}

static void
test_reset_mid_reply(void **state)
{
	struct rig *r = *state;
	struct linger hard = {.l_onoff = 1, .l_linger = 0};

	start(r, "example.com", 443, NULL, 5);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	SAY(r, "\x05\x00");
	settle(r);
	setsockopt(r->peer, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
	close(r->peer);
	r->peer = -1;
	run_for(r, 2);
	expect_end(r, PARENT_CLOSED, 502, "dropped the connection during CONNECT example.com:443");
}

/*
 * Malformed from its first wrong byte: each ends at once, with the rest of
 * the reply never sent and the deadline far off.
 */
static void
test_malformed_replies_end_at_once(void **state)
{
	struct rig *r = *state;
	static const struct {
		const char *bytes;
		size_t len;
		const char *words;
	} table[] = {
		{"\x04\x00", 1, "not SOCKS version 5"},
		{"\x05\x00\x01", 3, "the reserved byte is not 0"},
		{"\x05\x00\x00\x02", 4, "the address type is unknown"},
		{"\x05\x00\x00\x00", 4, "the address type is unknown"},
		{"\x05\x00\x00\x03\x00", 5, "the bound address is an empty name"},
		{"\x05\x0a", 2, "the reply code is unassigned"},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (i)
			pair(r);
		start(r, "example.com", 443, NULL, 30);
		socks_hello(r);
		EXPECT(r, "\x05\x01\x00\x03\x0b"
		          "example.com\x01\xbb");
		say(r, table[i].bytes, table[i].len);
		settle(r);
		expect_end(r, PARENT_BAD_REPLY, 502, table[i].words);
		unpair(r);
	}
	/* The method reply and the login's verdict are read as strictly. */
	pair(r);
	start(r, "example.com", 443, NULL, 30);
	EXPECT(r, "\x05\x01\x00");
	SAY(r, "\x04");
	settle(r);
	expect_end(r, PARENT_BAD_REPLY, 502, "sent a malformed reply (the method reply");
	unpair(r);

	pair(r);
	r->hop.user = "u";
	r->hop.password = "p";
	start(r, "example.com", 443, NULL, 30);
	EXPECT(r, "\x05\x02\x00\x02");
	SAY(r, "\x05\x02");
	EXPECT(r, "\x01\x01u\x01p");
	SAY(r, "\x02");
	settle(r);
	expect_end(r, PARENT_BAD_REPLY, 502, "neither version 1 nor 5");
}

/* A parent that takes the request a byte at a time, refusing every other try. */
static void
test_request_sent_in_pieces(void **state)
{
	struct rig *r = *state;

	r->hop.user = "alice";
	r->hop.password = "s3cret";
	send_cap = 1;
	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, "\x05\x02\x00\x02");
	SAY(r, "\x05\x02");
	EXPECT(r, "\x01\x05"
	          "alice\x06"
	          "s3cret");
	SAY(r, "\x01\x00");
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
	/* 4 + 14 + 18 bytes, each but the very first taken on a second try. */
	assert_int_equal(send_calls, 2 * (4 + 14 + 18) - 1);
}

/* ---- HTTP CONNECT ---------------------------------------------------------- */

static void
use_http(struct rig *r)
{
	r->hop = (struct parent_hop){.kind = PARENT_HTTP, .label = "http://10.0.0.7:3128"};
}

static const char connect_example[] =
	"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";

/* Starts a CONNECT to example.com:443, the parent reading it, and answers with reply. */
static void
http_exchange(struct rig *r, const char *reply, size_t len)
{
	start(r, "example.com", 443, NULL, 5);
	expect_sent(r, connect_example, sizeof(connect_example) - 1);
	say(r, reply, len);
	run_for(r, 2);
}

#define HTTP_EXCHANGE(r, lit) http_exchange((r), (lit), sizeof(lit) - 1)

static void
test_http_200_leaves_the_origin_bytes(void **state)
{
	struct rig *r = *state;

	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 200 Connection established\r\n"
	                 "Proxy-Agent: squid\r\n"
	                 "\r\n"
	                 "SSH-2.0-banner\r\n");
	expect_end(r, PARENT_OPEN, 0, "opened example.com:443: 200 Connection established");
	expect_left(r, "SSH-2.0-banner\r\n", 16);
}

/* RFC 9110 9.3.6: the framing fields of a 2xx to CONNECT are ignored, not obeyed. */
static void
test_http_200_with_content_length_ignores_it(void **state)
{
	struct rig *r = *state;

	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.0 200 OK\nContent-Length: 5\nTransfer-Encoding: chunked\n\nhello");
	expect_end(r, PARENT_OPEN, 0, NULL);
	expect_left(r, "hello", 5);
}

static void
test_http_interim_then_200(void **state)
{
	struct rig *r = *state;

	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200\r\n\r\nxyz");
	expect_end(r, PARENT_OPEN, 0, NULL);
	expect_left(r, "xyz", 3);
}

static void
test_http_head_split_byte_by_byte(void **state)
{
	struct rig *r = *state;
	static const char reply[] = "HTTP/1.1 200 OK\r\nVia: 1.1 parent\r\n\r\n";

	use_http(r);
	start(r, "example.com", 443, NULL, 5);
	expect_sent(r, connect_example, sizeof(connect_example) - 1);
	for (size_t i = 0; i < sizeof(reply) - 1; i++) {
		assert_int_equal(r->calls, 0);
		say(r, reply + i, 1);
		settle(r);
	}
	expect_end(r, PARENT_OPEN, 0, NULL);
	SAY(r, "after");
	expect_left(r, "after", 5);
}

static void
test_http_407(void **state)
{
	struct rig *r = *state;

	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 407 Proxy Authentication Required\r\n"
	                 "Proxy-Authenticate: Basic realm=\"p\"\r\nContent-Length: 0\r\n\r\n");
	expect_end(r, PARENT_AUTH_FAILED, 502,
	           "wants a username and password: 407 Proxy Authentication Required");
}

static void
test_http_sends_basic_credentials(void **state)
{
	struct rig *r = *state;
	static const char request[] = "CONNECT example.com:443 HTTP/1.1\r\n"
	                              "Host: example.com:443\r\n"
	                              "Proxy-Authorization: Basic YWxpY2U6b3BlbiBzZXNhbWU=\r\n"
	                              "\r\n";

	use_http(r);
	r->hop.user = "alice";
	r->hop.password = "open sesame";
	start(r, "example.com", 443, NULL, 5);
	EXPECT(r, request);
	SAY(r, "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n");
	run_for(r, 2);
	expect_end(r, PARENT_AUTH_FAILED, 502,
	           "rejected the username and password: 407 Proxy Authentication Required");
	assert_null(strstr(r->why, "alice"));
	assert_null(strstr(r->why, "YWxp"));
}

static void
test_http_ipv6_literal_in_brackets(void **state)
{
	struct rig *r = *state;

	use_http(r);
	start(r, "2001:db8::1", 443, NULL, 5);
	EXPECT(r, "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n");
	SAY(r, "HTTP/1.1 200 OK\r\n\r\n");
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, "[2001:db8::1]:443");
}

static void
test_http_username_with_a_colon_not_sent(void **state)
{
	struct rig *r = *state;

	use_http(r);
	r->hop.user = "al:ice";
	r->hop.password = "x";
	start(r, "example.com", 443, NULL, 5);
	expect_end(r, PARENT_AUTH_FAILED, 502, "colon");
	expect_silence(r);
}

static void
test_http_host_with_a_line_break_not_sent(void **state)
{
	struct rig *r = *state;

	use_http(r);
	start(r, "example.com\r\nX-Evil: 1", 443, NULL, 5);
	expect_end(r, PARENT_REFUSED, 502, "characters no host name has");
	assert_null(strchr(r->why, '\n'));
	expect_silence(r);
}

static void
test_http_403(void **state)
{
	struct rig *r = *state;

	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 403 Forbidden\r\n\r\n");
	expect_end(r, PARENT_REFUSED, 502, "refused example.com:443: 403 Forbidden");
}

static void
test_http_502_and_504(void **state)
{
	struct rig *r = *state;

	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad");
	expect_end(r, PARENT_ORIGIN_UNREACHABLE, 502,
	           "parent http://10.0.0.7:3128 could not reach example.com:443: 502 Bad Gateway");
	unpair(r);

	pair(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 503 Service Unavailable\r\n\r\n");
	expect_end(r, PARENT_ORIGIN_UNREACHABLE, 502, "503 Service Unavailable");
	unpair(r);

	/* The time ran out past the parent: the client hears 504, as from the parent itself. */
	pair(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 504 Gateway Timeout\r\n\r\n");
	expect_end(r, PARENT_ORIGIN_UNREACHABLE, 504, "504 Gateway Timeout");
}

static void
test_http_reason_sanitised_and_cut(void **state)
{
	struct rig *r = *state;
	char reply[256];
	const char *at;
	int n;

	use_http(r);
	n = snprintf(reply, sizeof(reply), "HTTP/1.1 403 Go\x01\x7f\xc3\xa9 %s\r\n\r\n",
	             "away and do not come back, not today, not tomorrow, not ever, never");
	http_exchange(r, reply, (size_t)n);
	expect_end(r, PARENT_REFUSED, 502, "403 Go???? away and do not");
	at = strstr(r->why, "403 ");
	assert_int_equal(strlen(at), 4 + PARENT_REASON_MAX);
	for (const char *c = r->why; *c; c++)
		assert_true(*c >= 0x20 && *c < 0x7f);
}

static void
test_http_oversized_head(void **state)
{
	struct rig *r = *state;
	char *head = malloc(PARENT_HTTP_HEAD_MAX + 64);
	size_t n;

	assert_non_null(head);
	use_http(r);
	/* Exactly the most, the end included: taken. */
	n = (size_t)sprintf(head, "HTTP/1.1 200 OK\r\nX-Pad: ");
	memset(head + n, 'x', PARENT_HTTP_HEAD_MAX - n - 4);
	memcpy(head + PARENT_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
	memcpy(head + PARENT_HTTP_HEAD_MAX, "tail", 4);
	http_exchange(r, head, PARENT_HTTP_HEAD_MAX + 4);
	expect_end(r, PARENT_OPEN, 0, NULL);
	expect_left(r, "tail", 4);
	unpair(r);

	/* One byte more: refused as soon as the 8 KiB are in, not at the deadline. */
	pair(r);
	memset(head + n, 'x', PARENT_HTTP_HEAD_MAX - n - 3);
	memcpy(head + PARENT_HTTP_HEAD_MAX - 3, "\r\n\r\n", 4);
	start(r, "example.com", 443, NULL, 30);
	expect_sent(r, connect_example, sizeof(connect_example) - 1);
	say(r, head, PARENT_HTTP_HEAD_MAX);
	run_for(r, 2);
	expect_end(r, PARENT_BAD_REPLY, 502, "oversized");
	free(head);
}

static void
test_http_not_http(void **state)
{
	struct rig *r = *state;
	static const char *const replies[] = {
		"SSH-2.0-OpenSSH_9.2\r\n",
		"HTTP/2 200\r\n\r\n",
		"HTTP/1.1 200 OK\r\nbroken line\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\rX: y\r\n\r\n",
		"\x05\x00",
	};

	use_http(r);
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		if (i)
			pair(r);
		start(r, "example.com", 443, NULL, 30);
		expect_sent(r, connect_example, sizeof(connect_example) - 1);
		say(r, replies[i], strlen(replies[i]));
		settle(r);
		expect_end(r, PARENT_BAD_REPLY, 502, "sent a malformed reply");
		unpair(r);
	}
}

/*
 * A head that stops half way: the bytes in are taken, so the socket is not
 * left readable and the loop does not spin until the deadline.
 */
static void
test_http_stall_mid_head_does_not_spin(void **state)
{
	struct rig *r = *state;
	unsigned before;

	use_http(r);
	start(r, "example.com", 443, NULL, 0.3);
	expect_sent(r, connect_example, sizeof(connect_example) - 1);
	SAY(r, "HTTP/1.1 200 OK\r\nVia: par");
	before = ev_iteration(r->loop);
	run_for(r, 3);
	expect_end(r, PARENT_TIMEOUT, 504,
	           "did not finish its answer to CONNECT example.com:443 within 0.3 s");
	if (ev_iteration(r->loop) - before > 20)
		fail_msg("the loop went round %u times waiting", ev_iteration(r->loop) - before);
}

/* ---- the end, once -------------------------------------------------------- */

static void
test_cancel_before_the_end(void **state)
{
	struct rig *r = *state;
	struct parent_handshake zeroed;

	memset(&zeroed, 0, sizeof(zeroed));
	parent_handshake_cancel(&zeroed);   /* never started */

	start(r, "example.com", 443, NULL, 0.1);
	EXPECT(r, "\x05\x01\x00");
	parent_handshake_cancel(&r->h);
	parent_handshake_cancel(&r->h);
	SAY(r, "\x05\x00");
	run_for(r, 0.4);
	assert_int_equal(r->calls, 0);
	expect_silence(r);

	/* Cancelled after it ended: nothing more, nothing twice. */
	unpair(r);
	pair(r);
	use_http(r);
	HTTP_EXCHANGE(r, "HTTP/1.1 200 OK\r\n\r\n");
	expect_end(r, PARENT_OPEN, 0, NULL);
	parent_handshake_cancel(&r->h);
	run_for(r, 0.2);
	assert_int_equal(r->calls, 1);
}

/* Once ended, nothing stays armed: the deadline passing later says nothing more. */
static void
test_done_once_past_the_deadline(void **state)
{
	struct rig *r = *state;

	start(r, "example.com", 443, NULL, 0.2);
	socks_hello(r);
	EXPECT(r, "\x05\x01\x00\x03\x0b"
	          "example.com\x01\xbb");
	say(r, reply_v4, sizeof(reply_v4) - 1);
	run_for(r, 2);
	expect_end(r, PARENT_OPEN, 0, NULL);
	assert_false(ev_is_active(&r->h.io));
	assert_false(ev_is_active(&r->h.timer));
	r->calls = 0;
	run_for(r, 0.5);
	assert_int_equal(r->calls, 0);
}

static void
test_outcome_names(void **state)
{
	(void)state;
	assert_string_equal(parent_outcome_name(PARENT_OPEN), "open");
	assert_string_equal(parent_outcome_name(PARENT_REFUSED), "refused");
	assert_string_equal(parent_outcome_name(PARENT_AUTH_FAILED), "auth");
	assert_string_equal(parent_outcome_name(PARENT_ORIGIN_UNREACHABLE), "origin_unreachable");
	assert_string_equal(parent_outcome_name(PARENT_BAD_REPLY), "bad_reply");
	assert_string_equal(parent_outcome_name(PARENT_TIMEOUT), "timeout");
	assert_string_equal(parent_outcome_name(PARENT_CLOSED), "closed");
}

/* ---- the readers alone ------------------------------------------------------ */

/* Every prefix of a valid reply is a valid start whose floor never passes the reply's end. */
static void
test_reply_prefixes_never_overreach(void **state)
{
	static const struct {
		const char *bytes;
		size_t len;
	} replies[] = {
		{"\x05\x00\x00\x03\x01z\x00\x50", 8},
		{"\x05\x00\x00\x01\x0a\x00\x00\x01\x1f\x90", 10},
		{"\x05\x04\x00\x04\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
		 "\x00\x50",
		 22},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		for (size_t k = 0; k <= replies[i].len; k++) {
			const char *bad = NULL;
			size_t need = 0;
			enum parent_wire v = parent_socks5_reply_check(
				(const uint8_t *)replies[i].bytes, k, &need, &bad);

			assert_int_equal(v, k < replies[i].len ? PARENT_WIRE_SHORT
			                                       : PARENT_WIRE_WHOLE);
			assert_true(need <= replies[i].len);
			assert_true(k < replies[i].len ? need > k : need == replies[i].len);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_socks5h_sends_the_name),
		T(test_socks5h_sends_an_ipv4_literal_as_an_address),
		T(test_socks5h_sends_an_ipv6_literal_as_an_address),
		T(test_socks5_sends_the_resolved_address),
		T(test_socks5_without_an_address_sends_nothing),
		T(test_name_of_256_bytes_refused_before_sending),
		T(test_password_accepted),
		T(test_password_offered_but_not_wanted),
		T(test_password_rejected),
		T(test_no_acceptable_method),
		T(test_password_chosen_without_credentials),
		T(test_method_not_offered),
		T(test_credentials_over_255_bytes_not_sent),
		T(test_each_reply_code),
		T(test_reply_split_byte_by_byte),
		T(test_origin_bytes_after_the_reply_left_unread),
		T(test_replies_back_to_back),
		T(test_short_reply_then_stall_times_out),
		T(test_silent_parent_times_out),
		T(test_eof_mid_reply),
		T(test_eof_instead_of_an_answer),
		T(test_reset_mid_reply),
		T(test_malformed_replies_end_at_once),
		T(test_request_sent_in_pieces),
		T(test_http_200_leaves_the_origin_bytes),
		T(test_http_200_with_content_length_ignores_it),
		T(test_http_interim_then_200),
		T(test_http_head_split_byte_by_byte),
		T(test_http_407),
		T(test_http_sends_basic_credentials),
		T(test_http_ipv6_literal_in_brackets),
		T(test_http_username_with_a_colon_not_sent),
		T(test_http_host_with_a_line_break_not_sent),
		T(test_http_403),
		T(test_http_502_and_504),
		T(test_http_reason_sanitised_and_cut),
		T(test_http_oversized_head),
		T(test_http_not_http),
		T(test_http_stall_mid_head_does_not_spin),
		T(test_cancel_before_the_end),
		T(test_done_once_past_the_deadline),
		cmocka_unit_test(test_outcome_names),
		cmocka_unit_test(test_reply_prefixes_never_overreach),
#undef T
	};

	/* A parent that closed first must be an error return, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
