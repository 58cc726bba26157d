/*
 * A client's intercepted CONNECT (client_intercept.c), on the client rig
 * (client_rig.h) with a CA made for the test and an OpenSSL client on the
 * test's end: the 200 and our handshake each wait for a socket that takes
 * nothing and go on when it drains; a stop signal that comes during the
 * handshake closes the client when it is done; a silent client is closed
 * at --header-timeout; the requests inside that cannot go to the CONNECT's
 * origin are refused. No request here reaches an origin.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ssl.h>

#include "client_rig.h"
#include "kp/intercept.h"
#include "kp/tls.h"

#define HOST "example.test"
#define CONNECT_HERE "CONNECT " HOST ":443 HTTP/1.1\r\nHost: " HOST ":443\r\n\r\n"
#define ESTABLISHED "HTTP/1.1 200 Connection established\r\n\r\n"

/* The CA, made once for every case. */
static char ca_dir[] = "/tmp/kp-unit-client-intercept-XXXXXX";
static char ca_cert[sizeof(ca_dir) + 8], ca_key[sizeof(ca_dir) + 8];

/* What a case adds to the rig: our TLS toward clients, and the test's client side. */
static struct {
	struct tls *tls;
	struct intercept_memory refusals;
	SSL_CTX *ctx;
	SSL *ssl;
} fx;

static int
group_setup(void **state)
{
	struct kp_config cfg;
	FILE *quiet = fopen("/dev/null", "w");
	int rc;

	(void)state;
	if (!quiet || !mkdtemp(ca_dir))
		return -1;
	snprintf(ca_cert, sizeof(ca_cert), "%s/ca.crt", ca_dir);
	snprintf(ca_key, sizeof(ca_key), "%s/ca.key", ca_dir);
	config_defaults(&cfg);
	cfg.intercept[cfg.nintercept++] = HOST;
	rc = tls_make_ca(ca_dir, &cfg, quiet, stderr);
	fclose(quiet);
	return rc;
}

static int
group_teardown(void **state)
{
	(void)state;
	unlink(ca_cert);
	unlink(ca_key);
	rmdir(ca_dir);
	return 0;
}

static int
setup(void **state)
{
	char why[256];

	memset(&fx, 0, sizeof(fx));
	if (crig_setup(state) < 0)
		return -1;
	crig.cfg.intercept[crig.cfg.nintercept++] = HOST;
	crig.cfg.ca_cert = ca_cert;
	crig.cfg.ca_key = ca_key;
	if (!(fx.tls = tls_new(&crig.cfg, why, sizeof(why)))) {
		fprintf(stderr, "tls_new: %s\n", why);
		return -1;
	}
	intercept_memory_init(&fx.refusals, 3600);
	crig.env.tls = fx.tls;
	crig.env.refusals = &fx.refusals;
	return 0;
}

static int
teardown(void **state)
{
	SSL_free(fx.ssl);
	SSL_CTX_free(fx.ctx);
	crig_teardown(state);
	tls_free(fx.tls);
	return 0;
}

/*
 * The test's TLS client on fd, trusting the test's CA only. TLS 1.3: its
 * side of the handshake is done a flight before ours, which the stopping
 * case counts on. held: it reads nothing from fd until tls_read_socket(),
 * so bytes the test put ahead of our flight are not taken for TLS.
 */
static SSL *
tls_client(int fd, bool held)
{
	BIO *in;

	assert_non_null(fx.ctx = SSL_CTX_new(TLS_client_method()));
	assert_int_equal(SSL_CTX_set_min_proto_version(fx.ctx, TLS1_3_VERSION), 1);
	assert_int_equal(SSL_CTX_load_verify_locations(fx.ctx, ca_cert, NULL), 1);
	SSL_CTX_set_verify(fx.ctx, SSL_VERIFY_PEER, NULL);
	assert_non_null(fx.ssl = SSL_new(fx.ctx));
	assert_int_equal(SSL_set_tlsext_host_name(fx.ssl, HOST), 1);
	assert_int_equal(SSL_set1_host(fx.ssl, HOST), 1);
	if (!held) {
		assert_int_equal(SSL_set_fd(fx.ssl, fd), 1);
		return fx.ssl;
	}
	/* An empty memory BIO: a read waits, as on a socket with nothing in it. */
	assert_non_null(in = BIO_new(BIO_s_mem()));
	BIO_set_mem_eof_return(in, -1);
	SSL_set_bio(fx.ssl, in, BIO_new_socket(fd, BIO_NOCLOSE));
	return fx.ssl;
}

/* A held client reads from its socket from now on. */
static void
tls_read_socket(SSL *ssl, int fd)
{
	SSL_set0_rbio(ssl, BIO_new_socket(fd, BIO_NOCLOSE));
}

/*
 * The test's side of the handshake, the loop turning between its steps: 1
 * done, 0 stuck, -1 failed.
 */
static int
handshake(SSL *ssl)
{
	for (int i = 0; i < 50; i++) {
		int r = SSL_connect(ssl), e;

		if (r == 1)
			return 1;
		e = SSL_get_error(ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return -1;
		crig_turn();
	}
	return 0;
}

static void
tls_send(SSL *ssl, const char *text)
{
	size_t done;

	assert_int_equal(SSL_write_ex(ssl, text, strlen(text), &done), 1);
	assert_int_equal(done, strlen(text));
}

/* What the client answered inside TLS, the loop turning while there is nothing yet. */
static size_t
tls_recv(SSL *ssl, char *out, size_t cap)
{
	size_t have = 0, n;

	for (int i = 0; i < 50 && have == 0; i++) {
		while (have + 1 < cap && SSL_read_ex(ssl, out + have, cap - 1 - have, &n) == 1)
			have += n;
		if (have == 0)
			crig_turn();
	}
	out[have] = '\0';
	return have;
}

/* The 200 to the CONNECT, read whole. */
static void
expect_established(int peer)
{
	char got[sizeof(ESTABLISHED) + 16];

	crig_recv(peer, got, sizeof(got));
	assert_string_equal(got, ESTABLISHED);
}

/* A client intercepted, its handshake done: it reads requests inside TLS. */
static struct client *
intercepted(int *peer, SSL **ssl)
{
	struct client *c = crig_client(peer);

	crig_send(*peer, CONNECT_HERE);
	crig_settle();
	expect_established(*peer);
	*ssl = tls_client(*peer, false);
	assert_int_equal(handshake(*ssl), 1);
	crig_settle();
	assert_int_equal(c->state, CLIENT_READING_HEAD);
	return c;
}

/* The 200 waits for a socket that takes nothing; TLS takes over only once it is out. */
static void
the_200_waits_for_a_full_socket(void **state)
{
	struct client *c;
	size_t junk;
	int p;

	(void)state;
	c = crig_client(&p);
	junk = crig_fill(c->conn.fd);
	crig_send(p, CONNECT_HERE);
	crig_settle();
	assert_int_equal(c->state, CLIENT_INTERCEPTING);
	assert_non_null(c->out);
	assert_null(c->conn.tls);
	crig_skip(p, junk);
	crig_settle();
	expect_established(p);
	assert_non_null(c->conn.tls);
	assert_int_equal(handshake(tls_client(p, false)), 1);
	crig_settle();
	assert_int_equal(c->state, CLIENT_READING_HEAD);
}

/* Our handshake's flight waits for a socket that takes nothing, and goes when it drains. */
static void
the_handshake_waits_for_a_full_socket(void **state)
{
	struct client *c;
	size_t junk;
	SSL *ssl;
	int p;

	(void)state;
	c = crig_client(&p);
	crig_send(p, CONNECT_HERE);
	crig_settle();
	expect_established(p);
	junk = crig_fill(c->conn.fd);
	ssl = tls_client(p, true);
	assert_int_equal(handshake(ssl), 0);   /* the ClientHello went out; no answer can come */
	assert_int_equal(c->state, CLIENT_INTERCEPTING);
	assert_true(ev_is_active(&c->conn.wio));
	crig_skip(p, junk);
	tls_read_socket(ssl, p);
	assert_int_equal(handshake(ssl), 1);
	crig_settle();
	assert_int_equal(c->state, CLIENT_READING_HEAD);
}

/* Stopping: a handshake that ends meanwhile has no request to finish, so the client goes. */
static void
stopping_closes_when_the_handshake_ends(void **state)
{
	int p;

	(void)state;
	crig_client(&p);
	crig_send(p, CONNECT_HERE);
	crig_settle();
	expect_established(p);
	/* Done on the test's side; ours still has the client's Finished to read. */
	assert_int_equal(handshake(tls_client(p, false)), 1);
	crig.env.draining = true;
	crig_settle();
	assert_int_equal(crig.list.count, 0);
}

/* A client that sends nothing after the 200 is closed at --header-timeout. */
static void
a_silent_client_is_closed_at_the_header_timeout(void **state)
{
	struct client *c;
	int p;

	(void)state;
	c = crig_client(&p);
	crig_send(p, CONNECT_HERE);
	crig_settle();
	expect_established(p);
	assert_int_equal(c->state, CLIENT_INTERCEPTING);
	crig_advance(crig.cfg.header_timeout - 1);
	assert_int_equal(crig.list.count, 1);
	crig_advance(1);
	assert_int_equal(crig.list.count, 0);
	assert_true(crig_eof(p));
}

/* A CONNECT inside the intercepted one gets 400, and the connection ends. */
static void
a_connect_inside_gets_400_and_a_close(void **state)
{
	struct client *c;
	char got[1024];
	SSL *ssl;
	int p;

	(void)state;
	c = intercepted(&p, &ssl);
	tls_send(ssl, "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n");
	assert_true(tls_recv(ssl, got, sizeof(got)) > 0);
	assert_true(strncmp(got, "HTTP/1.1 400 ", 13) == 0);
	assert_non_null(strstr(got, "CONNECT inside an intercepted connection"));
	assert_non_null(strstr(got, "Connection: close"));
	assert_int_equal(c->state, CLIENT_LINGERING);
}

/*
 * A request inside for another host than the CONNECT's gets 400, and the
 * connection stays for the next request.
 */
static void
another_host_inside_gets_400_and_the_connection_stays(void **state)
{
	struct client *c;
	char got[1024];
	SSL *ssl;
	int p;

	(void)state;
	c = intercepted(&p, &ssl);
	for (int i = 0; i < 2; i++) {
		tls_send(ssl, "GET https://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
		assert_true(tls_recv(ssl, got, sizeof(got)) > 0);
		if (strncmp(got, "HTTP/1.1 400 ", 13) != 0)
			fail_msg("request %d: expected 400, got \"%.60s\"", i + 1, got);
		assert_non_null(strstr(got, "must name a path on the intercepted host"));
		assert_int_equal(c->state, CLIENT_READING_HEAD);
	}
}

/* Each case on a rig of its own. */
#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(the_200_waits_for_a_full_socket),
		CASE(the_handshake_waits_for_a_full_socket),
		CASE(stopping_closes_when_the_handshake_ends),
		CASE(a_silent_client_is_closed_at_the_header_timeout),
		CASE(a_connect_inside_gets_400_and_a_close),
		CASE(another_host_inside_gets_400_and_the_connection_stays),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
