/*
 * What the proxy shows intercepted clients: the leaf certificates minted
 * for each host, the cache that keeps them, and the CA --make-ca writes.
 * The proxy reaches OpenSSL only through tls.h; this test reads the results
 * with OpenSSL directly. time() is wrapped (-Wl,--wrap=time) so the cache's
 * day can pass without waiting for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "kp/config.h"
#include "kp/stats.h"
#include "kp/tls.h"

time_t __real_time(time_t *t);
time_t __wrap_time(time_t *t);

/* When set, the time the proxy's own code reads; OpenSSL keeps the real one. */
static time_t fake_now;

time_t
__wrap_time(time_t *t)
{
	time_t now = fake_now ? fake_now : __real_time(NULL);

	if (t)
		*t = now;
	return now;
}

static char dir[64];
static char ca_cert[128], ca_key[128];
static struct kp_config cfg;
static struct tls *tls;

static int
setup(void **state)
{
	FILE *devnull = fopen("/dev/null", "w");

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kp-unit-tls-XXXXXX");
	if (!mkdtemp(dir) || !devnull)
		return -1;
	config_defaults(&cfg);
	cfg.intercept[cfg.nintercept++] = "*.example.com";
	cfg.intercept[cfg.nintercept++] = "192.0.2.7";
	cfg.leaf_cache = 2;
	if (tls_make_ca(dir, &cfg, devnull, stderr) != 0)
		return -1;
	fclose(devnull);
	snprintf(ca_cert, sizeof(ca_cert), "%s/ca.crt", dir);
	snprintf(ca_key, sizeof(ca_key), "%s/ca.key", dir);
	cfg.ca_cert = ca_cert;
	cfg.ca_key = ca_key;
	{
		char err[256];

		tls = tls_new(&cfg, err, sizeof(err));
		if (!tls) {
			fprintf(stderr, "tls_new: %s\n", err);
			return -1;
		}
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tls_free(tls);
	unlink(ca_cert);
	unlink(ca_key);
	rmdir(dir);
	return 0;
}

static X509 *
read_pem(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	BIO_free(b);
	assert_non_null(x);
	return x;
}

static X509 *
leaf(const char *host)
{
	static char pem[8192];

	assert_true(tls_leaf_pem(tls, host, pem, sizeof(pem)) > 0);
	return read_pem(pem);
}

static X509 *
load_ca(void)
{
	FILE *f = fopen(ca_cert, "r");
	X509 *x;

	assert_non_null(f);
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(x);
	return x;
}

/* Does the chain leaf <- CA verify for host, name constraints included? */
static int
verify(X509 *x, const char *host, bool ip)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509 *ca = load_ca();
	X509_VERIFY_PARAM *param;
	int ok, err;

	X509_STORE_add_cert(store, ca);
	X509_STORE_CTX_init(ctx, store, x, NULL);
	param = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
	if (ip)
		X509_VERIFY_PARAM_set1_ip_asc(param, host);
	else
		X509_VERIFY_PARAM_set1_host(param, host, 0);
	ok = X509_verify_cert(ctx);
	err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	X509_free(ca);
	return err;
}

static void
a_name_leaf_names_the_host_for_serving_only(void **state)
{
	X509 *x = leaf("cdn.example.com");
	GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	EXTENDED_KEY_USAGE *eku = X509_get_ext_d2i(x, NID_ext_key_usage, NULL, NULL);
	BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(x, NID_basic_constraints, NULL, NULL);
	const GENERAL_NAME *name;

	(void)state;
	/* Exactly one subjectAltName, the host as a DNS name. */
	assert_non_null(san);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	name = sk_GENERAL_NAME_value(san, 0);
	assert_int_equal(name->type, GEN_DNS);
	assert_string_equal((const char *)ASN1_STRING_get0_data(name->d.dNSName),
	                    "cdn.example.com");
	/* For serving TLS, and nothing else. */
	assert_non_null(eku);
	assert_int_equal(sk_ASN1_OBJECT_num(eku), 1);
	assert_int_equal(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, 0)), NID_server_auth);
	assert_non_null(bc);
	assert_false(bc->ca);
	assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0), 1);
	assert_int_equal(verify(x, "cdn.example.com", false), X509_V_OK);
	/* And for that host only. */
	assert_int_equal(verify(x, "other.example.com", false), X509_V_ERR_HOSTNAME_MISMATCH);
	GENERAL_NAMES_free(san);
	EXTENDED_KEY_USAGE_free(eku);
	BASIC_CONSTRAINTS_free(bc);
	X509_free(x);
}

static void
an_address_leaf_carries_an_ip_san(void **state)
{
	X509 *x = leaf("192.0.2.7");
	GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	const GENERAL_NAME *name;
	static const unsigned char want[4] = {192, 0, 2, 7};

	(void)state;
	assert_non_null(san);
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	name = sk_GENERAL_NAME_value(san, 0);
	assert_int_equal(name->type, GEN_IPADD);
	assert_int_equal(ASN1_STRING_length(name->d.iPAddress), 4);
	assert_memory_equal(ASN1_STRING_get0_data(name->d.iPAddress), want, 4);
	assert_int_equal(verify(x, "192.0.2.7", true), X509_V_OK);
	GENERAL_NAMES_free(san);
	X509_free(x);
}

static void
validity_starts_a_day_back_and_is_short(void **state)
{
	X509 *x = leaf("a.example.com");
	int days, secs;

	(void)state;
	/* notBefore: about a day before now. */
	assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), NULL), 1);
	assert_true(days * 86400 + secs >= 86400 - 60 && days * 86400 + secs <= 86400 + 60);
	/* notAfter: days ahead, not years. */
	assert_int_equal(ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x)), 1);
	assert_true(days >= 6 && days <= 8);
	X509_free(x);
}

static void
leaves_share_one_p256_key_and_have_random_serials(void **state)
{
	X509 *a = leaf("one.example.com"), *b = leaf("two.example.com");
	EVP_PKEY *ka = X509_get0_pubkey(a), *kb = X509_get0_pubkey(b);
	const ASN1_INTEGER *sa = X509_get0_serialNumber(a), *sb = X509_get0_serialNumber(b);
	char group[32];
	size_t len;

	(void)state;
	assert_int_equal(EVP_PKEY_eq(ka, kb), 1);
	assert_int_equal(EVP_PKEY_get_group_name(ka, group, sizeof(group), &len), 1);
	assert_string_equal(group, "prime256v1");
	assert_int_not_equal(ASN1_INTEGER_cmp(sa, sb), 0);
	/* At least 64 bits of randomness (CA/Browser Forum baseline). */
	assert_true(ASN1_STRING_length(sa) >= 8);
	X509_free(a);
	X509_free(b);
}

static void
the_ca_is_name_constrained_to_the_patterns(void **state)
{
	X509 *outside = leaf("bank.example.org");
	X509 *ca = load_ca();
	BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(ca, NID_basic_constraints, NULL, NULL);
	int crit = -1;
	NAME_CONSTRAINTS *nc = X509_get_ext_d2i(ca, NID_name_constraints, &crit, NULL);
	struct stat st;

	(void)state;
	assert_non_null(bc);
	assert_true(bc->ca);
	assert_non_null(nc);
	assert_int_equal(crit, 1);
	/* A leaf for a host outside the patterns does not verify under this CA. */
	assert_int_equal(verify(outside, "bank.example.org", false), X509_V_ERR_PERMITTED_VIOLATION);
	assert_int_equal(stat(ca_key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	BASIC_CONSTRAINTS_free(bc);
	NAME_CONSTRAINTS_free(nc);
	X509_free(ca);
	X509_free(outside);
}

static void
the_cache_holds_at_most_leaf_cache(void **state)
{
	char pem[8192];

	(void)state;
	assert_true(tls_leaf_pem(tls, "x1.example.com", pem, sizeof(pem)) > 0);
	assert_true(tls_leaf_pem(tls, "x2.example.com", pem, sizeof(pem)) > 0);
	assert_true(tls_leaf_pem(tls, "x3.example.com", pem, sizeof(pem)) > 0);
	assert_int_equal(tls_leaves_cached(tls), 2);
}

static void
pem_of(const char *host, char out[8192])
{
	assert_true(tls_leaf_pem(tls, host, out, 8192) > 0);
}

/* A leaf served from the cache is the same certificate; a minted one has a new serial. */
static void
the_least_recently_used_leaf_goes_first(void **state)
{
	static char a[8192], b[8192], c[8192], again[8192];

	(void)state;
	pem_of("lru-a.example.com", a);
	pem_of("lru-b.example.com", b);
	pem_of("lru-a.example.com", again);   /* a used last: b is the older now */
	assert_string_equal(again, a);
	pem_of("lru-c.example.com", c);       /* full: b goes */
	assert_int_equal(tls_leaves_cached(tls), 2);
	assert_int_equal(kp_stats.tls_leaves_in_cache, 2);
	pem_of("lru-a.example.com", again);
	assert_string_equal(again, a);
	pem_of("lru-b.example.com", again);   /* minted anew; c, now the older, goes */
	assert_string_not_equal(again, b);
	pem_of("lru-a.example.com", again);
	assert_string_equal(again, a);
	pem_of("lru-c.example.com", again);
	assert_string_not_equal(again, c);
	assert_int_equal(tls_leaves_cached(tls), 2);
}

static void
a_leaf_is_minted_again_after_a_day(void **state)
{
	static char first[8192], again[8192], third[8192];

	(void)state;
	fake_now = __real_time(NULL);
	pem_of("day.example.com", first);
	fake_now += 24 * 3600;
	pem_of("day.example.com", again);
	assert_string_equal(again, first);
	fake_now += 1;
	pem_of("day.example.com", again);
	assert_string_not_equal(again, first);
	/* A clock stepped back does not keep a leaf longer either. */
	fake_now -= 60;
	pem_of("day.example.com", third);
	assert_string_not_equal(third, again);
	assert_true(tls_leaves_cached(tls) <= 2);
	fake_now = 0;
}

static void
a_host_that_is_no_name_gets_no_leaf(void **state)
{
	char pem[8192];

	(void)state;
	assert_int_equal(tls_leaf_pem(tls, "a,IP:10.0.0.1.example.com", pem, sizeof(pem)), -1);
	assert_int_equal(tls_leaf_pem(tls, "a b.example.com", pem, sizeof(pem)), -1);
}

static void
make_ca_never_overwrites(void **state)
{
	FILE *devnull = fopen("/dev/null", "w");

	(void)state;
	assert_int_equal(tls_make_ca(dir, &cfg, devnull, devnull), -1);
	fclose(devnull);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_name_leaf_names_the_host_for_serving_only),
		cmocka_unit_test(an_address_leaf_carries_an_ip_san),
		cmocka_unit_test(validity_starts_a_day_back_and_is_short),
		cmocka_unit_test(leaves_share_one_p256_key_and_have_random_serials),
		cmocka_unit_test(the_ca_is_name_constrained_to_the_patterns),
		cmocka_unit_test(the_cache_holds_at_most_leaf_cache),
		cmocka_unit_test(the_least_recently_used_leaf_goes_first),
		cmocka_unit_test(a_leaf_is_minted_again_after_a_day),
		cmocka_unit_test(a_host_that_is_no_name_gets_no_leaf),
		cmocka_unit_test(make_ca_never_overwrites),
	};

	return cmocka_run_group_tests_name("tls_leaf", tests, setup, teardown);
}
