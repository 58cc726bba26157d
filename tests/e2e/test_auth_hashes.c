/*
 * Hashed passwords in --auth-file: bcrypt as htpasswd -B writes it and
 * SHA-512 crypt from openssl passwd -6, made at test time, beside a plain
 * user; requests pipelined behind a hash check; the cache; an address
 * guessing passwords is limited while another client is served; a hash
 * method crypt(3) is not asked to know refused at start.
 */
#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "origin.h"

/* The daemon's limits (kp/auth.h): failures per address, checks in flight per address. */
#define FAILURES_MAX 10
#define JOBS_PER_ADDRESS 4

/* The guesser's connections, all with a request in flight at once. */
#define GUESSES 50

static struct proxy px;
static int stats_port;

#define AUTH(credentials) "Proxy-Authorization: Basic " credentials "\r\n"
/* base64 of ann:b-secret, sam:s-secret, pat:plain, ann:wrong. */
#define ANN "YW5uOmItc2VjcmV0"
#define SAM "c2FtOnMtc2VjcmV0"
#define PAT "cGF0OnBsYWlu"
#define ANN_WRONG "YW5uOndyb25n"

/* bcrypt of password at cost, as htpasswd -B writes it ($2y$), with a fresh salt. */
static void
bcrypt_hash(const char *password, unsigned long cost, char *out, size_t size)
{
	static struct crypt_data cd;
	char salt[CRYPT_GENSALT_OUTPUT_SIZE];
	const char *h;

	assert_non_null(crypt_gensalt_rn("$2y$", cost, NULL, 0, salt, sizeof(salt)));
	h = crypt_r(password, salt, &cd);
	assert_true(h && strncmp(h, "$2y$", 4) == 0);
	snprintf(out, size, "%s", h);
}

/* openssl passwd -6 password: SHA-512 crypt. */
static void
sha512_hash(const char *password, char *out, size_t size)
{
	const char *openssl = require_program("openssl", NULL);
	const char *argv[] = {openssl, "passwd", "-6", password, NULL};
	char path[512];
	char *text;

	snprintf(path, sizeof(path), "%s/openssl.out", harness_temp_dir());
	assert_int_equal(run_process(argv, path, 10000), 0);
	text = read_file_all(path, NULL);
	assert_non_null(text);
	text[strcspn(text, "\r\n")] = '\0';
	assert_true(strncmp(text, "$6$", 3) == 0);
	snprintf(out, size, "%s", text);
	free(text);
}

/* base64 of text (static, until the next call). */
static const char *
base64(const char *text)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static char out[256];
	size_t len = strlen(text), n = 0;

	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)(unsigned char)text[i] << 16;

		if (i + 1 < len)
			v |= (unsigned)(unsigned char)text[i + 1] << 8;
		if (i + 2 < len)
			v |= (unsigned char)text[i + 2];
		out[n++] = alphabet[v >> 18 & 63];
		out[n++] = alphabet[v >> 12 & 63];
		out[n++] = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
		out[n++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[n] = '\0';
	return out;
}

static const char *
users_file(const char *text)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/users", harness_temp_dir());
	write_text_file(path, text);
	chmod(path, 0600);
	return path;
}

/* The proxy on the users file with a stats page. */
static void
start(const char *users)
{
	static char listen[64];
	/* The counters are the test's to read: the page asks no credentials of it. */
	const char *args[] = {"--auth-file", users, "--stats-listen", listen, "--stats-no-auth",
	                      "--connect-ports", "*", NULL};

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
}

static double
metric(const char *name)
{
	char full[128];

	snprintf(full, sizeof(full), "keepalive_proxy_%s", name);
	return stats_metric(stats_port, full);
}

static void
hashed_and_plain_users_side_by_side(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char bcrypt[128], sha512[160], text[512], url[128], authority[64];
	struct response r;
	struct client c;

	bcrypt_hash("b-secret", 6, bcrypt, sizeof(bcrypt));
	sha512_hash("s-secret", sha512, sizeof(sha512));
	snprintf(text, sizeof(text), "# hashed and plain\nann:%s\nsam:%s\npat:plain\n", bcrypt,
	         sha512);
	start(users_file(text));
	assert_int_equal(proxy_log_count(&px, "3 proxy users"), 1);
	origin_url(og, "/", url, sizeof(url));
	fetch_from(px.port, NULL, "GET", url, AUTH(ANN), &r);
	assert_status(&r, 200);
	response_free(&r);
	fetch_from(px.port, NULL, "GET", url, AUTH(SAM), &r);
	assert_status(&r, 200);
	response_free(&r);
	fetch_from(px.port, NULL, "GET", url, AUTH(PAT), &r);
	assert_status(&r, 200);
	response_free(&r);
	fetch_from(px.port, NULL, "GET", url, AUTH(ANN_WRONG), &r);
	assert_status(&r, 407);
	assert_non_null(resp_header(&r, "Proxy-Authenticate"));
	response_free(&r);
	assert_int_equal(metric("auth_hash_checks_total"), 3);

	/* Three requests in one write: each answered, in order; the hash is checked once. */
	client_open(&c, px.port);
	client_sendf(&c,
	             "GET %s HTTP/1.1\r\nHost: x\r\n" AUTH(ANN) "\r\n"
	             "GET %s HTTP/1.1\r\nHost: x\r\n" AUTH(ANN) "\r\n"
	             "GET %s HTTP/1.1\r\nHost: x\r\n" AUTH(ANN_WRONG) "\r\n",
	             url, url, url);
	expect_response(&c, 200, "ok");
	expect_response(&c, 200, "ok");
	expect_response(&c, 407, NULL);
	client_close(&c);
	assert_int_equal(metric("auth_hash_checks_total"), 4);
	assert_true(metric("auth_cache_hits_total") >= 2);

	/* A CONNECT waits for its check the same way. */
	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(og));
	client_open(&c, px.port);
	client_sendf(&c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n" AUTH(SAM) "\r\n", authority,
	             authority);
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 200);
	response_free(&r);
	client_close(&c);
	/* The hashes and passwords never reach the log. */
	assert_int_equal(proxy_log_count(&px, "b-secret"), 0);
	assert_int_equal(proxy_log_count(&px, bcrypt), 0);
	proxy_stop(&px);
}

/*
 * Fifty wrong guesses from one address in flight at once: at most a few
 * are hashed, the rest are refused unseen, and a client at another address
 * is served all along. Correctness only; how fast is bench material.
 */
static void
guessing_address_limited_others_served(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	static struct client guesser[GUESSES];
	char bcrypt[128], text[256], url[128];
	unsigned refused = 0, limited = 0;
	struct response r;
	struct client other;

	/* Costly enough that the guesses overlap. */
	bcrypt_hash("b-secret", 8, bcrypt, sizeof(bcrypt));
	snprintf(text, sizeof(text), "ann:%s\npat:plain\n", bcrypt);
	start(users_file(text));
	origin_url(og, "/", url, sizeof(url));
	for (int i = 0; i < GUESSES; i++) {
		char guess[32];

		snprintf(guess, sizeof(guess), "ann:guess %d", i);
		client_open(&guesser[i], px.port);
		client_sendf(&guesser[i],
		             "GET %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic %s\r\n\r\n",
		             url, base64(guess));
	}
	/* Another address, with the right password, while the guesses are in flight. */
	client_open_from(&other, px.port, "127.0.0.2");
	client_sendf(&other, "GET %s HTTP/1.1\r\nHost: x\r\n" AUTH(ANN) "\r\n", url);
	expect_response(&other, 200, "ok");
	client_close(&other);
	for (int i = 0; i < GUESSES; i++) {
		read_response_ok(&guesser[i], &r, 0);
		if (r.head.status == 407)
			refused++;
		else if (r.head.status == 429)
			limited++;
		else
			fail_msg("guess %d answered %d", i, r.head.status);
		response_free(&r);
		client_close(&guesser[i]);
	}
	/*
	 * A guess is hashed only while its address has fewer than FAILURES_MAX
	 * failures and JOBS_PER_ADDRESS checks in flight.
	 */
	if (refused < 1 || refused > FAILURES_MAX + JOBS_PER_ADDRESS - 1)
		fail_msg("%u guesses hashed and refused, %u limited", refused, limited);
	assert_int_equal(refused + limited, GUESSES);
	assert_int_equal(metric("auth_limited_total"), limited);
	assert_int_equal(metric("auth_hash_checks_total"), refused + 1);
	assert_true(metric("auth_hash_jobs_peak") <= JOBS_PER_ADDRESS + 1);
	assert_int_equal(metric("auth_hash_jobs"), 0);
	assert_int_equal(metric("auth_busy_total"), 0);
	/* The guesser's address is limited now, even with a right password... */
	fetch_from(px.port, "127.0.0.1", "GET", url, AUTH(PAT), &r);
	assert_status(&r, 429);
	response_free(&r);
	/* ... unless those credentials passed within the minute. */
	fetch_from(px.port, "127.0.0.1", "GET", url, AUTH(ANN), &r);
	assert_status(&r, 200);
	response_free(&r);
	/* And other addresses are not. */
	fetch_from(px.port, "127.0.0.3", "GET", url, AUTH(ANN_WRONG), &r);
	assert_status(&r, 407);
	response_free(&r);
	proxy_stop(&px);
}

static void
unknown_hash_method_refused_at_start(void)
{
	const char *users = users_file("ann:$apr1$salt$0123456789abcdefghijkl\n");
	char port[16], log_path[512];
	const char *argv[] = {getenv("KP_BINARY"), "-p", port, "--auth-file", users, NULL};
	char *log;

	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(log_path, sizeof(log_path), "%s/start.log", harness_temp_dir());
	assert_int_equal(run_process(argv, log_path, 5000), 1);
	log = read_file_all(log_path, NULL);
	assert_non_null(log);
	assert_non_null(strstr(log, "line 1"));
	assert_non_null(strstr(log, "htpasswd -B"));
	free(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(hashed_and_plain_users_side_by_side),
		E2E_TEST(guessing_address_limited_others_served),
		E2E_TEST(unknown_hash_method_refused_at_start),
	};

	return E2E_RUN("auth_hashes", tests);
}
