/*
 * A client's waits and its own answers, on a manual clock and a real
 * socket (client_rig.h): a head trickling in keeps to its deadline, each
 * state's timeout ends what it should, an answer waits for a socket that
 * takes nothing and goes when it drains, and the request states a client
 * gives back are kept within bounds and freed when nobody takes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#if KP_CRYPT
#include <crypt.h>
#endif

#include "client_rig.h"
#include "kp/auth.h"
#include "kp/stats.h"

/* Answered by the proxy itself (RFC 9110 7.6.2), and the connection kept. */
#define OPTIONS_HERE                                                                               \
	"OPTIONS http://example.com/ HTTP/1.1\r\nHost: example.com\r\nMax-Forwards: 0\r\n\r\n"

/* How often needle occurs in text. */
static unsigned
count_of(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* The status line text starts with, or fails the test saying what came instead. */
static void
expect_status(const char *text, const char *status_line)
{
	if (strncmp(text, status_line, strlen(status_line)) != 0)
		fail_msg("expected \"%s\", got \"%.80s\"", status_line, text);
}

/*
 * A client whose socket takes nothing (filled from its own end: *junk
 * bytes wait for the test), asked what the proxy answers itself: text. The
 * answer is made and waits in the client.
 */
static struct client *
blocked_answer(int *peer, size_t *junk, const char *text)
{
	struct client *c = crig_client(peer);

	*junk = crig_fill(c->conn.fd);
	crig_send(*peer, text);
	crig_settle();
	assert_int_equal(c->state, CLIENT_SENDING_LOCAL);
	return c;
}

/* ---- deadlines --------------------------------------------------------------- */

/*
 * Bytes trickling into a head push the idle deadline on, so the timer set
 * when the head began fires early and is set again for what is left; the
 * head's own deadline, --header-timeout after its first byte, holds
 * however much trickles in.
 */
static void
a_trickled_head_keeps_to_its_own_deadline(void **state)
{
	char got[256];
	int p;

	(void)state;
	crig.cfg.client_idle_timeout = 5;
	crig.cfg.header_timeout = 10;
	crig_client(&p);
	/* 1001: a head begins, due by 1011; idle until 1006. */
	crig_advance(1);
	crig_send(p, "GET http://example.com/ HTTP/1.1\r\n");
	crig_settle();
	/* 1005: more of it; idle until 1010. */
	crig_advance(4);
	crig_send(p, "Host: example.com\r\n");
	crig_settle();
	/* 1006: the timer set when the head began fires early, and waits on. */
	crig_advance(1);
	assert_int_equal(crig.list.count, 1);
	assert_int_equal(crig_recv(p, got, sizeof(got)), 0);
	/* 1009: more; idle until 1014, but the head is due by 1011. */
	crig_advance(3);
	crig_send(p, "Accept: */*\r\n");
	crig_settle();
	/* 1010.5: the timer fired early again at 1010. */
	crig_advance(1.5);
	assert_int_equal(crig.list.count, 1);
	assert_int_equal(crig_recv(p, got, sizeof(got)), 0);
	/* 1011: the head's own deadline. */
	crig_advance(0.5);
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 408 ");
}

/* A client that reads none of an answer is closed after --io-timeout, not before. */
static void
answer_nobody_reads_ends_at_the_io_timeout(void **state)
{
	size_t junk;
	int p;

	(void)state;
	blocked_answer(&p, &junk, OPTIONS_HERE);
	crig_advance(crig.cfg.io_timeout - 1);
	assert_int_equal(crig.list.count, 1);
	crig_advance(1);
	assert_int_equal(crig.list.count, 0);
	crig_skip(p, junk);
	assert_true(crig_eof(p));
}

/*
 * After its last answer the proxy waits for the client's end of stream
 * (RFC 9112 9.6), two seconds at most.
 */
static void
lingering_ends_after_two_seconds(void **state)
{
	char got[1024];
	int p;

	(void)state;
	crig_client(&p);
	crig_send(p, "GET /relative HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n");
	crig_settle();
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 400 ");
	assert_true(crig_eof(p));
	assert_int_equal(crig.list.count, 1);
	crig_advance(1.9);
	assert_int_equal(crig.list.count, 1);
	crig_advance(0.1);
	assert_int_equal(crig.list.count, 0);
}

#if KP_CRYPT
/* --auth-file with one user whose password is kept as a bcrypt hash. */
static struct auth *
hashed_user(const char *user, const char *password)
{
	static struct crypt_data cd;
	char salt[CRYPT_GENSALT_OUTPUT_SIZE], text[256], path[] = "/tmp/kp-unit-client-XXXXXX",
	     why[256];
	const char *hash;
	struct auth *a;
	int fd;

	assert_non_null(crypt_gensalt_rn("$2b$", 4, NULL, 0, salt, sizeof(salt)));
	assert_non_null(hash = crypt_r(password, salt, &cd));
	snprintf(text, sizeof(text), "%s:%s\n", user, hash);
	assert_true((fd = mkstemp(path)) >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	a = auth_load(path, why, sizeof(why));
	unlink(path);
	assert_non_null(a);
	return a;
}

/*
 * A password hash still being checked when --header-timeout runs out: the
 * client is told 503 rather than kept waiting.
 */
static void
a_password_check_past_the_header_timeout_gets_503(void **state)
{
	struct auth *a = hashed_user("alice", "secret");
	struct client *c;
	char got[1024];
	int p;

	(void)state;
	crig.env.auth = a;
	c = crig_client(&p);
	crig_send(p, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
	             "Proxy-Authorization: Basic YWxpY2U6c2VjcmV0\r\n\r\n");   /* alice:secret */
	/* One iteration reads the head; the hash's verdict could only come in a later one. */
	crig_turn();
	assert_int_equal(c->state, CLIENT_AUTHENTICATING);
	clock_advance(&crig.clock, crig.cfg.header_timeout);
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 503 ");
	assert_non_null(strstr(got, "proxy credentials not checked in time"));
	crig_settle();
	auth_free(a);
	crig.env.auth = NULL;
}
#endif

/* ---- an answer on a full socket --------------------------------------------- */

/* The client hangs up while its answer waits: it is closed once the socket says so. */
static void
answer_to_a_client_gone_closes(void **state)
{
	size_t junk;
	int p;

	(void)state;
	blocked_answer(&p, &junk, OPTIONS_HERE);
	crig_hang_up(p);
	crig_settle();
	assert_int_equal(crig.list.count, 0);
}

/*
 * A stop signal while an answer waits: the answer goes out whole once the
 * client reads, and no request behind it is served.
 */
static void
stopping_ends_after_the_answer_in_hand(void **state)
{
	struct client *c;
	size_t junk;
	char got[2048];
	int p;

	(void)state;
	c = blocked_answer(&p, &junk, OPTIONS_HERE OPTIONS_HERE);
	crig.env.draining = true;
	crig_skip(p, junk);
	crig_settle();
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 200 ");
	assert_int_equal(count_of(got, "HTTP/1.1 "), 1);
	assert_true(crig_eof(p));
	assert_int_equal(c->state, CLIENT_LINGERING);
}

/* ---- the bytes of a request ------------------------------------------------- */

/* A client that ends its stream half-way through a head is closed without an answer. */
static void
a_head_cut_short_is_closed_without_an_answer(void **state)
{
	int p;

	(void)state;
	crig_client(&p);
	crig_send(p, "GET http://example.com/ HTTP/1.1\r\nHost: exa");
	assert_int_equal(shutdown(p, SHUT_WR), 0);
	crig_settle();
	assert_int_equal(crig.list.count, 0);
	assert_true(crig_eof(p));
}

/*
 * TRACE answered here reflects the request; one too large to reflect gets
 * 431, and the connection is closed after it.
 */
static void
trace_too_large_to_reflect_gets_431(void **state)
{
	char head[8192], got[1024];
	char big[5000];
	int p;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(head, sizeof(head),
	         "TRACE http://example.com/ HTTP/1.1\r\nHost: example.com\r\nMax-Forwards: 0\r\n"
	         "X-Filler: %s\r\n\r\n",
	         big);
	crig_client(&p);
	crig_send(p, head);
	crig_settle();
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 431 ");
	assert_non_null(strstr(got, "request head too large to reflect"));
	assert_true(crig_eof(p));
}

/*
 * A readiness with nothing behind it (epoll may report one) between
 * requests: the client takes nothing for it, and serves the next request.
 */
static void
a_readiness_with_nothing_to_read_holds_nothing(void **state)
{
	struct client *c;
	char got[1024];
	int p;

	(void)state;
	c = crig_client(&p);
	crig_send(p, OPTIONS_HERE);
	crig_settle();
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 200 ");
	ev_feed_event(crig.loop, &c->conn.rio, EV_READ);
	crig_turn();
	assert_int_equal(c->state, CLIENT_READING_HEAD);
	assert_null(c->in);
	assert_null(c->req);
	crig_send(p, OPTIONS_HERE);
	crig_settle();
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 200 ");
}

/* client_close() twice closes once: counted once, reaped once. */
static void
closing_twice_closes_once(void **state)
{
	struct client *c;
	int p;

	(void)state;
	c = crig_client(&p);
	client_close(c);
	client_close(c);
	assert_int_equal(crig.list.count, 0);
	assert_int_equal(kp_stats.clients_active, 0);
	assert_int_equal(client_reap(&crig.list), 1);
	assert_true(crig_eof(p));
}

/* ---- request states kept for later ------------------------------------------ */

/* One request answered on c, from the spares when there is one. */
static void
one_request(int p)
{
	char got[1024];

	crig_send(p, OPTIONS_HERE);
	crig_settle();
	crig_recv(p, got, sizeof(got));
	expect_status(got, "HTTP/1.1 200 ");
}

/* A trim frees the spares that stayed unused since the trim before, and only those. */
static void
trim_frees_spares_nobody_took(void **state)
{
	int p;

	(void)state;
	crig_client(&p);
	one_request(p);
	assert_int_equal(crig.list.nspare, 1);
	assert_int_equal(client_trim(&crig.list), 0);   /* counting starts */
	one_request(p);                                 /* took the spare, gave it back */
	assert_int_equal(client_trim(&crig.list), 0);
	assert_int_equal(crig.list.nspare, 1);
	assert_int_equal(client_trim(&crig.list), 1);   /* untouched since */
	assert_int_equal(crig.list.nspare, 0);
	one_request(p);
}

/* Clients closed mid-request give their states back; past 256 spares they are freed. */
static void
spares_are_bounded(void **state)
{
	enum { CLIENTS = 257, SPARES_MAX = 256 /* CLIENT_SPARES_MAX in client.c */ };
	struct client *c[CLIENTS];
	int p;

	(void)state;
	for (int i = 0; i < CLIENTS; i++) {
		c[i] = crig_client(&p);
		crig_send(p, "GET http://example.com/ HTTP/1.1\r\n");
	}
	crig_settle();
	for (int i = 0; i < CLIENTS; i++) {
		assert_non_null(c[i]->req);
		client_close(c[i]);
	}
	assert_int_equal(client_reap(&crig.list), CLIENTS);
	assert_int_equal(crig.list.nspare, SPARES_MAX);
}

/* Each case on a rig of its own. */
#define CASE(f) cmocka_unit_test_setup_teardown(f, crig_setup, crig_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(a_trickled_head_keeps_to_its_own_deadline),
		CASE(answer_nobody_reads_ends_at_the_io_timeout),
		CASE(lingering_ends_after_two_seconds),
#if KP_CRYPT
		CASE(a_password_check_past_the_header_timeout_gets_503),
#endif
		CASE(answer_to_a_client_gone_closes),
		CASE(stopping_ends_after_the_answer_in_hand),
		CASE(a_head_cut_short_is_closed_without_an_answer),
		CASE(trace_too_large_to_reflect_gets_431),
		CASE(a_readiness_with_nothing_to_read_holds_nothing),
		CASE(closing_twice_closes_once),
		CASE(trim_frees_spares_nobody_took),
		CASE(spares_are_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
