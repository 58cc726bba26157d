/*
 * Hashed passwords in the auth file: which values are hashes, bcrypt and
 * SHA-512 crypt checked right and wrong (hashes made here, with libxcrypt),
 * the credential cache and the failure limits on an injected clock, and
 * the worker thread's verdicts coming back through a real loop.
 */
#include <arpa/inet.h>
#include <crypt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kp/evglue.h"

/* The module itself, to reach its digest and its worker's state. */
#include "../../src/auth.c"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* crypt(3) hash of password with a fresh salt of the given method and cost. */
static void
make_hash(const char *prefix, unsigned long cost, const char *password, char *out, size_t size)
{
	static struct crypt_data cd;
	char salt[CRYPT_GENSALT_OUTPUT_SIZE];
	const char *h;

	assert_non_null(crypt_gensalt_rn(prefix, cost, NULL, 0, salt, sizeof(salt)));
	h = crypt_r(password, salt, &cd);
	assert_non_null(h);
	assert_true(strncmp(h, prefix, strlen(prefix)) == 0);
	snprintf(out, size, "%s", h);
}

static struct auth *
load_text(const char *text, char *why, size_t whylen)
{
	char path[] = "/tmp/kp-unit-auth-XXXXXX";
	int fd = mkstemp(path);
	struct auth *a;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	a = auth_load(path, why, whylen);
	unlink(path);
	return a;
}

/* "Basic " + base64 of text. */
static const char *
basic(const char *text)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static char out[512];
	size_t len = strlen(text), n = (size_t)snprintf(out, sizeof(out), "Basic ");

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)(uint8_t)text[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)(uint8_t)text[i + 1] << 8;
		if (i + 2 < len)
			v |= (uint8_t)text[i + 2];
		out[n++] = alphabet[v >> 18 & 63];
		out[n++] = alphabet[v >> 12 & 63];
		out[n++] = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
		out[n++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[n] = '\0';
	return out;
}

static struct sockaddr_storage
addr(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		fail_msg("bad test address %s", text);
	return ss;
}

/* A check of user:password from an address at a time, here and now. */
static enum auth_verdict
check_at(const struct auth *a, const char *cred, const char *from, double now)
{
	struct sockaddr_storage ss = addr(from);
	const char *v = cred ? basic(cred) : NULL;

	return auth_check(a, v, v ? strlen(v) : 0, (struct sockaddr *)&ss, now, NULL);
}

/* The published SipHash-2-4 vectors: key 00..0f, messages 00, 00 01, ... */
static void
siphash_matches_the_reference(void **state)
{
	static const struct {
		size_t len;
		uint64_t want;
	} cases[] = {{0, 0x726fdb47dd0e0e31ULL}, {8, 0x93f5f5799a932462ULL},
	             {15, 0xa129ca6149be45e5ULL}};
	uint64_t key[2] = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
	uint8_t msg[16];

	(void)state;
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++)
		if (siphash(key, msg, cases[i].len) != cases[i].want)
			fail_msg("%zu bytes: %016llx", cases[i].len,
			         (unsigned long long)siphash(key, msg, cases[i].len));
}

/* bcrypt as htpasswd -B writes it, SHA-512 crypt as openssl passwd -6 does, and plain. */
static void
both_hash_kinds_checked(void **state)
{
	char bcrypt[128], sha512[160], text[512], why[256];
	struct auth *a;

	(void)state;
	make_hash("$2y$", 5, "b-secret", bcrypt, sizeof(bcrypt));
	make_hash("$6$", 0, "s:secret", sha512, sizeof(sha512));
	snprintf(text, sizeof(text), "ann:%s\nsam:%s\npat:plain\n", bcrypt, sha512);
	a = load_text(text, why, sizeof(why));
	if (!a)
		fail_msg("%s", why);
	assert_int_equal(auth_users(a), 3);
	assert_int_equal(auth_hashed_users(a), 2);
	assert_int_equal(check_at(a, "ann:b-secret", "10.0.0.1", 0), AUTH_GRANTED);
	assert_int_equal(check_at(a, "sam:s:secret", "10.0.0.2", 0), AUTH_GRANTED);
	assert_int_equal(check_at(a, "pat:plain", "10.0.0.3", 0), AUTH_GRANTED);
	assert_int_equal(check_at(a, "ann:b-secreT", "10.0.0.4", 0), AUTH_REFUSED);
	assert_int_equal(check_at(a, "sam:s:secre", "10.0.0.5", 0), AUTH_REFUSED);
	/* A hash is not a password: sending it back does not pass. */
	snprintf(text, sizeof(text), "ann:%s", bcrypt);
	assert_int_equal(check_at(a, text, "10.0.0.6", 0), AUTH_REFUSED);
	/* Nor does another user's password. */
	assert_int_equal(check_at(a, "sam:b-secret", "10.0.0.7", 0), AUTH_REFUSED);
	auth_free(a);
}

static void
which_values_are_hashes(void **state)
{
	static const struct {
		const char *text;
		const char *says;   /* NULL: loads, with no hashed user */
	} cases[] = {
		{"u:$ecret\n", NULL},
		{"u:$\n", NULL},
		{"u:a$b$c\n", NULL},
		{"u:$-x$y\n", NULL},
		{"u:$1$salt$Bq1dTZ0ixSBsXN6jDG8Vt/\n", "only $2a$"},
		{"u:$apr1$salt$abcdefghijklmnopqrstuv\n", "only $2a$"},
		{"u:$y$j9T$salt$hash\n", "only $2a$"},
		{"u:ok\nv:$2y$05$short\n", "line 2: a bcrypt hash"},
		{"u:$6$salt$tooshort\n", "86 characters"},
		{"u:$5$salt$tooshort\n", "43 characters"},
	};
	char why[256];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct auth *a = load_text(cases[i].text, why, sizeof(why));

		if (!cases[i].says) {
			if (!a)
				fail_msg("case %zu refused: %s", i, why);
			assert_int_equal(auth_hashed_users(a), 0);
			auth_free(a);
		} else if (a || !strstr(why, cases[i].says)) {
			fail_msg("case %zu: %s (expected a refusal saying %s)", i,
			         a ? "loaded" : why, cases[i].says);
		}
	}
}

static void
passed_credentials_remembered_for_a_minute(void **state)
{
	char hash[128], text[256], why[256];
	struct auth *a;
	uint64_t checks;

	(void)state;
	make_hash("$2b$", 4, "pw", hash, sizeof(hash));
	snprintf(text, sizeof(text), "ann:%s\n", hash);
	a = load_text(text, why, sizeof(why));
	assert_non_null(a);
	checks = kp_stats.auth_hash_checks;
	assert_int_equal(check_at(a, "ann:pw", "10.0.0.1", 100), AUTH_GRANTED);
	assert_int_equal(kp_stats.auth_hash_checks, checks + 1);
	/* From anywhere, within the minute: no hash. */
	assert_int_equal(check_at(a, "ann:pw", "10.0.0.2", 159), AUTH_GRANTED);
	assert_int_equal(kp_stats.auth_hash_checks, checks + 1);
	/* A wrong password is never remembered as right. */
	assert_int_equal(check_at(a, "ann:pW", "10.0.0.3", 110), AUTH_REFUSED);
	assert_int_equal(check_at(a, "ann:pW", "10.0.0.3", 111), AUTH_REFUSED);
	assert_int_equal(kp_stats.auth_hash_checks, checks + 3);
	/* A minute on, checked again. */
	assert_int_equal(check_at(a, "ann:pw", "10.0.0.1", 161), AUTH_GRANTED);
	assert_int_equal(kp_stats.auth_hash_checks, checks + 4);
	/* Nothing of the password itself is kept: only digests and times. */
	for (size_t i = 0; i < AUTH_CACHE_SLOTS; i++)
		assert_null(memmem(&a->memory->cache[i], sizeof(a->memory->cache[i]), "pw", 2));
	auth_free(a);
}

static void
failures_limit_their_address(void **state)
{
	struct auth *a = NULL;
	char why[256];

	(void)state;
	a = load_text("ann:right\nbob:also right\n", why, sizeof(why));
	assert_non_null(a);
	/* ann passes once (remembered), then her address guesses bob's password. */
	assert_int_equal(check_at(a, "ann:right", "192.0.2.1", 0), AUTH_GRANTED);
	for (int i = 0; i < AUTH_FAILURES_MAX; i++)
		assert_int_equal(check_at(a, "bob:guess", "192.0.2.1", i), AUTH_REFUSED);
	/* Refused unseen now, right or wrong, unless it passed within the minute. */
	assert_int_equal(check_at(a, "bob:also right", "192.0.2.1", 20), AUTH_LIMITED);
	assert_int_equal(check_at(a, "bob:guess", "192.0.2.1", 20), AUTH_LIMITED);
	assert_int_equal(check_at(a, "ann:right", "192.0.2.1", 20), AUTH_GRANTED);
	/* Another address is not touched. */
	assert_int_equal(check_at(a, "bob:also right", "192.0.2.2", 20), AUTH_GRANTED);
	/* The window, counted from the first failure, ends. */
	assert_int_equal(check_at(a, "bob:also right", "192.0.2.1", AUTH_FAILURE_WINDOW),
	                 AUTH_GRANTED);
	/* No credentials at all is a first try, never a failure. */
	for (int i = 0; i < 3 * AUTH_FAILURES_MAX; i++)
		assert_int_equal(check_at(a, NULL, "192.0.2.3", 0), AUTH_REFUSED);
	assert_int_equal(check_at(a, "bob:also right", "192.0.2.3", 0), AUTH_GRANTED);
	/* An IPv6 client is its /64; IPv4-mapped is IPv4. */
	for (int i = 0; i < AUTH_FAILURES_MAX; i++) {
		const char *from = i % 2 ? "2001:db8:1:2::1" : "2001:db8:1:2::99";

		assert_int_equal(check_at(a, "bob:guess", from, 0), AUTH_REFUSED);
	}
	assert_int_equal(check_at(a, "ann:x", "2001:db8:1:2:ffff::1", 1), AUTH_LIMITED);
	assert_int_equal(check_at(a, "ann:x", "2001:db8:1:3::1", 1), AUTH_REFUSED);
	/* 192.0.2.1's window, from its first failure at 0, is still open. */
	assert_int_equal(check_at(a, "ann:x", "::ffff:192.0.2.1", 30), AUTH_LIMITED);
	auth_free(a);
}

/* ---- off the loop ------------------------------------------------------------- */

struct waiting {
	struct auth_waiter w;
	int told;        /* times done() was called */
	bool granted;
};

static void
told(struct auth_waiter *w, bool granted)
{
	struct waiting *x = container_of(w, struct waiting, w);

	x->told++;
	x->granted = granted;
}

static void
wait_init(struct waiting *x, struct ev_loop *loop)
{
	memset(x, 0, sizeof(*x));
	x->w.loop = loop;
	x->w.done = told;
}

static enum auth_verdict
ask(const struct auth *a, const char *cred, const char *from, struct waiting *x)
{
	struct sockaddr_storage ss = addr(from);
	const char *v = basic(cred);

	return auth_check(a, v, strlen(v), (struct sockaddr *)&ss, ev_now(x->w.loop), &x->w);
}

/* Runs the loop until no hash check is left. */
static void
run_until_checked(struct ev_loop *loop)
{
	while (worker.njobs)
		ev_run(loop, EVRUN_ONCE);
}

static struct auth *
bcrypt_users(const char *password)
{
	char hash[128], text[256], why[256];
	struct auth *a;

	make_hash("$2b$", 4, password, hash, sizeof(hash));
	snprintf(text, sizeof(text), "ann:%s\npat:plain\n", hash);
	a = load_text(text, why, sizeof(why));
	assert_non_null(a);
	return a;
}

static void
hashes_checked_off_the_loop(void **state)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct auth *a = bcrypt_users("pw");
	struct waiting right, wrong, plain, again;

	(void)state;
	wait_init(&right, loop);
	wait_init(&wrong, loop);
	wait_init(&plain, loop);
	wait_init(&again, loop);
	assert_int_equal(ask(a, "ann:pw", "10.1.0.1", &right), AUTH_PENDING);
	assert_int_equal(ask(a, "ann:px", "10.1.0.2", &wrong), AUTH_PENDING);
	/* Plain entries are answered on the spot. */
	assert_int_equal(ask(a, "pat:plain", "10.1.0.3", &plain), AUTH_GRANTED);
	/* Never from inside the check: only the loop tells. */
	assert_int_equal(right.told + wrong.told, 0);
	run_until_checked(loop);
	assert_int_equal(right.told, 1);
	assert_true(right.granted);
	assert_int_equal(wrong.told, 1);
	assert_false(wrong.granted);
	assert_int_equal(plain.told, 0);
	/* Remembered: no wait the second time. */
	assert_int_equal(ask(a, "ann:pw", "10.1.0.9", &again), AUTH_GRANTED);
	auth_free(a);
	assert_false(worker.running);
	ev_loop_destroy(loop);
}

/* A browser opens connections in parallel, each with the same credentials: one hash. */
static void
same_credentials_share_one_check(void **state)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct auth *a = bcrypt_users("pw");
	struct waiting x[3];
	uint64_t checks = kp_stats.auth_hash_checks;

	(void)state;
	for (int i = 0; i < 3; i++) {
		wait_init(&x[i], loop);
		assert_int_equal(ask(a, "ann:pw", "10.2.0.1", &x[i]), AUTH_PENDING);
	}
	assert_int_equal(worker.njobs, 1);
	/* One of them goes away: the others are still told. */
	auth_cancel(&x[1].w);
	run_until_checked(loop);
	assert_int_equal(kp_stats.auth_hash_checks, checks + 1);
	assert_int_equal(x[0].told, 1);
	assert_int_equal(x[1].told, 0);
	assert_int_equal(x[2].told, 1);
	assert_true(x[0].granted && x[2].granted);
	auth_free(a);
	ev_loop_destroy(loop);
}

/* One address cannot fill the queue, and the queue has a bound for all of them together. */
static void
checks_in_flight_are_bounded(void **state)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct auth *a = bcrypt_users("pw");
	static struct waiting x[AUTH_JOBS_MAX + 2];
	char cred[64], from[32];
	int n = 0;

	(void)state;
	for (int i = 0; i < AUTH_JOBS_PER_ADDRESS; i++) {
		wait_init(&x[n], loop);
		snprintf(cred, sizeof(cred), "ann:guess %d", i);
		assert_int_equal(ask(a, cred, "10.3.0.1", &x[n++]), AUTH_PENDING);
	}
	wait_init(&x[n], loop);
	assert_int_equal(ask(a, "ann:guess more", "10.3.0.1", &x[n]), AUTH_LIMITED);
	/* Others still get their turn, up to the bound. */
	while (n < AUTH_JOBS_MAX) {
		wait_init(&x[n], loop);
		snprintf(cred, sizeof(cred), "ann:other %d", n);
		snprintf(from, sizeof(from), "10.3.1.%d", n);
		assert_int_equal(ask(a, cred, from, &x[n++]), AUTH_PENDING);
	}
	wait_init(&x[n], loop);
	assert_int_equal(ask(a, "ann:one more", "10.3.2.1", &x[n]), AUTH_BUSY);
	assert_int_equal(kp_stats.auth_jobs, AUTH_JOBS_MAX);
	assert_true(kp_stats.auth_jobs_peak >= AUTH_JOBS_MAX);
	run_until_checked(loop);
	for (int i = 0; i < n; i++)
		assert_int_equal(x[i].told, 1);
	assert_int_equal(kp_stats.auth_jobs, 0);
	/* The guesses counted as failures of their address, the one refused unseen too. */
	{
		struct sockaddr_storage ss = addr("10.3.0.1");
		struct address_key who = address_key_of((struct sockaddr *)&ss);
		struct address_slot *s = address_slot(a->memory, &who, ev_now(loop), false);

		assert_non_null(s);
		assert_int_equal(s->failures, AUTH_JOBS_PER_ADDRESS + 1);
		assert_int_equal(s->jobs, 0);
	}
	wait_init(&x[0], loop);
	assert_int_equal(ask(a, "ann:pw", "10.3.0.1", &x[0]), AUTH_PENDING);
	run_until_checked(loop);
	assert_true(x[0].granted);
	auth_free(a);
	ev_loop_destroy(loop);
}

/* SIGHUP replaces the users while a check runs: its waiter is told all the same. */
static void
replaced_users_still_answer(void **state)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct auth *old = bcrypt_users("pw"), *fresh;
	struct waiting x;

	(void)state;
	wait_init(&x, loop);
	assert_int_equal(ask(old, "ann:pw", "10.4.0.1", &x), AUTH_PENDING);
	fresh = bcrypt_users("new");
	auth_free(old);
	assert_true(worker.running);
	run_until_checked(loop);
	assert_int_equal(x.told, 1);
	assert_true(x.granted);
	/* The last auth freed with a check still queued: the thread stops, nobody is told. */
	wait_init(&x, loop);
	assert_int_equal(ask(fresh, "ann:new", "10.4.0.1", &x), AUTH_PENDING);
	auth_free(fresh);
	assert_false(worker.running);
	assert_null(x.w.job);
	assert_int_equal(x.told, 0);
	ev_loop_destroy(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(siphash_matches_the_reference),
		cmocka_unit_test(both_hash_kinds_checked),
		cmocka_unit_test(which_values_are_hashes),
		cmocka_unit_test(passed_credentials_remembered_for_a_minute),
		cmocka_unit_test(failures_limit_their_address),
		cmocka_unit_test(hashes_checked_off_the_loop),
		cmocka_unit_test(same_credentials_share_one_check),
		cmocka_unit_test(checks_in_flight_are_bounded),
		cmocka_unit_test(replaced_users_still_answer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
