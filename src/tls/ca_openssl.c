/*
 * The OpenSSL 3 backend of ca.h: certificates and keys only. Sessions, and
 * every SSL object, are tls_openssl.c's.
 */
#include "kp/ca.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "kp/chars.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/list.h"
#include "kp/ossl_error.h"
#include "kp/stats.h"
#include "kp/table.h"

/* A leaf is served from the cache for a day, so none in use is within days of expiry. */
#define LEAF_REUSE_SECONDS (24 * 3600)
/* Validity: a day back for clocks behind ours, a week ahead. */
#define LEAF_BACKDATE_SECONDS (24 * 3600)
#define LEAF_LIFETIME_SECONDS (7 * 24 * 3600)
#define CA_LIFETIME_DAYS 3650

struct leaf {
	struct table_node node;             /* keyed by host */
	struct kp_list lru;                 /* in ca->lru */
	X509 *cert;
	time_t minted;
	char host[];
};

struct ca {
	X509 *cert;
	EVP_PKEY *key;
	EVP_PKEY *leaf_key;         /* one key for every leaf: minting costs a signature only */
	struct table leaves;
	struct kp_list lru;         /* the cached leaves, most recently used first */
	size_t max_leaves;
};

/* Bytes of the address host spells (4 or 16), or 0 for a name. */
static int
ip_literal(const char *host, unsigned char out[16])
{
	if (inet_pton(AF_INET, host, out) == 1)
		return 4;
	if (inet_pton(AF_INET6, host, out) == 1)
		return 16;
	return 0;
}

/* ---- building certificates ------------------------------------------------ */

static bool
name_fit_for_san(const char *host)
{
	size_t n = strlen(host);

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = host[i];

		if (!(char_is_alnum(ch) || ch == '-' || ch == '.' || ch == '_'))
			return false;
	}
	return true;
}

/*
 * The subjectAltName built from parts, never from a configuration string,
 * so nothing in a host name can add a second entry.
 */
static bool
add_san(X509 *x, const char *host, bool *is_ip)
{
	unsigned char ip[16];
	int iplen = ip_literal(host, ip);
	GENERAL_NAMES *names = GENERAL_NAMES_new();
	GENERAL_NAME *name = GENERAL_NAME_new();
	bool ok = false;

	*is_ip = iplen > 0;
	if (!names || !name)
		goto out;
	if (iplen) {
		ASN1_OCTET_STRING *o = ASN1_OCTET_STRING_new();

		if (!o || !ASN1_OCTET_STRING_set(o, ip, iplen)) {
			ASN1_OCTET_STRING_free(o);
			goto out;
		}
		GENERAL_NAME_set0_value(name, GEN_IPADD, o);
	} else {
		ASN1_IA5STRING *s = ASN1_IA5STRING_new();

		if (!s || !name_fit_for_san(host) || !ASN1_STRING_set(s, host, (int)strlen(host))) {
			ASN1_IA5STRING_free(s);
			goto out;
		}
		GENERAL_NAME_set0_value(name, GEN_DNS, s);
	}
	if (!sk_GENERAL_NAME_push(names, name))
		goto out;
	name = NULL;
	/* An IP leaf has an empty subject, which makes the SAN critical (RFC 5280 4.2.1.6). */
	ok = X509_add1_ext_i2d(x, NID_subject_alt_name, names, iplen > 0, X509V3_ADD_DEFAULT) == 1;
out:
	GENERAL_NAME_free(name);
	GENERAL_NAMES_free(names);
	return ok;
}

static bool
add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return false;
	ok = X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* A random positive serial of 127 bits (RFC 5280 allows 20 octets). */
static bool
set_random_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	bool ok = bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
	          BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));

	BN_free(bn);
	return ok;
}

static X509 *
mint_leaf(struct ca *ca, const char *host)
{
	X509 *x = X509_new();
	bool is_ip = false;

	if (!x || !X509_set_version(x, 2) || !set_random_serial(x) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -LEAF_BACKDATE_SECONDS) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), LEAF_LIFETIME_SECONDS) ||
	    !X509_set_pubkey(x, ca->leaf_key) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) || !add_san(x, host, &is_ip))
		goto fail;
	/* A CN for names only: an IP in a CN would be judged as a DNS name by name constraints. */
	if (!is_ip && strlen(host) <= 64 &&
	    !X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	                                (const unsigned char *)host, -1, -1, 0))
		goto fail;
	if (!add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") ||
	    !X509_sign(x, ca->key, EVP_sha256()))
		goto fail;
	kp_stats.tls_leaves_minted++;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* ---- the leaf cache ------------------------------------------------------- */

static void
leaf_drop(struct ca *ca, struct leaf *l)
{
	table_remove(&ca->leaves, &l->node);
	kp_list_unlink(&l->lru);
	X509_free(l->cert);
	free(l);
	kp_stats.tls_leaves_in_cache = ca->leaves.count;
}

/* The leaf for host, from the cache or minted now; borrowed. */
static X509 *
leaf_for(struct ca *ca, const char *host)
{
	struct table_node *n = table_find(&ca->leaves, host);
	time_t now = time(NULL);
	size_t len = strlen(host);
	struct leaf *l, *oldest;

	if (n) {
		l = container_of(n, struct leaf, node);
		/* A clock stepped back would otherwise stretch a leaf's day by as much. */
		if (now - l->minted <= LEAF_REUSE_SECONDS && now >= l->minted) {
			kp_list_unlink(&l->lru);
			kp_list_insert_head(&ca->lru, &l->lru);
			return l->cert;
		}
		leaf_drop(ca, l);
	}
	if (!(l = calloc(1, sizeof(*l) + len + 1)))
		return NULL;
	if (!(l->cert = mint_leaf(ca, host))) {
		free(l);
		return NULL;
	}
	memcpy(l->host, host, len + 1);
	l->node.key = l->host;
	l->minted = now;
	table_add(&ca->leaves, &l->node);
	kp_list_insert_head(&ca->lru, &l->lru);
	while (ca->leaves.count > ca->max_leaves &&
	       (oldest = KP_LIST_LAST(&ca->lru, struct leaf, lru)) != l)
		leaf_drop(ca, oldest);
	kp_stats.tls_leaves_in_cache = ca->leaves.count;
	return l->cert;
}

int
ca_leaf(struct ca *ca, const char *host, struct ca_leaf_cert **cert, struct ca_leaf_key **key)
{
	X509 *x = leaf_for(ca, host);

	if (!x)
		return -1;
	/* The opaque types stand for these two: the caller converts them back. */
	*cert = (struct ca_leaf_cert *)x;
	*key = (struct ca_leaf_key *)ca->leaf_key;
	return 0;
}

size_t
ca_leaves_cached(const struct ca *ca)
{
	return ca->leaves.count;
}

int
ca_leaf_pem(struct ca *ca, const char *host, char *out, size_t len)
{
	X509 *leaf = leaf_for(ca, host);
	BIO *mem = BIO_new(BIO_s_mem());
	char *data;
	long n;
	int rc = -1;

	if (leaf && mem && PEM_write_bio_X509(mem, leaf) == 1) {
		n = BIO_get_mem_data(mem, &data);
		if (n > 0 && (size_t)n < len) {
			memcpy(out, data, (size_t)n);
			out[n] = '\0';
			rc = (int)n;
		}
	}
	BIO_free(mem);
	ERR_clear_error();
	return rc;
}

/* ---- loading the CA ------------------------------------------------------- */

static int
load(struct ca *ca, const struct kp_config *cfg, char *err, size_t errlen)
{
	struct stat st;
	FILE *f;

	if (stat(cfg->ca_key, &st) < 0) {
		snprintf(err, errlen, "--ca-key %s: %s", cfg->ca_key, strerror(errno));
		return -1;
	}
	if (st.st_mode & 0077) {
		snprintf(err, errlen,
		         "--ca-key %s can be read by others (mode %04o): whoever reads it can "
		         "impersonate every intercepted site to this proxy's clients; chmod 600 it",
		         cfg->ca_key, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	if (!(f = fopen(cfg->ca_key, "r"))) {
		snprintf(err, errlen, "--ca-key %s: %s", cfg->ca_key, strerror(errno));
		return -1;
	}
	ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!(f = fopen(cfg->ca_cert, "r"))) {
		snprintf(err, errlen, "--ca-cert %s: %s", cfg->ca_cert, strerror(errno));
		return -1;
	}
	ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (!ca->key || !ca->cert) {
		ossl_take_error(err, errlen, !ca->key ? "--ca-key: not a PEM private key"
		                                 : "--ca-cert: not a PEM certificate");
		return -1;
	}
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		ossl_take_error(err, errlen, "--ca-key does not belong to --ca-cert");
		return -1;
	}
	if (X509_check_ca(ca->cert) != 1) {
		snprintf(err, errlen, "--ca-cert %s is not a CA certificate", cfg->ca_cert);
		return -1;
	}
	return 0;
}

struct ca *
ca_new(const struct kp_config *cfg, char *err, size_t errlen)
{
	struct ca *ca = calloc(1, sizeof(*ca));

	if (!ca || table_init(&ca->leaves) < 0) {
		free(ca);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	kp_list_init(&ca->lru);
	ca->max_leaves = cfg->leaf_cache ? cfg->leaf_cache : 1;
	if (load(ca, cfg, err, errlen) < 0)
		goto fail;
	if (!(ca->leaf_key = EVP_EC_gen("P-256"))) {
		ossl_take_error(err, errlen, "cannot make the leaf key");
		goto fail;
	}
	return ca;
fail:
	ca_free(ca);
	return NULL;
}

void
ca_free(struct ca *ca)
{
	struct leaf *l;

	if (!ca)
		return;
	while ((l = KP_LIST_FIRST(&ca->lru, struct leaf, lru)) != NULL)
		leaf_drop(ca, l);
	table_free(&ca->leaves);
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	free(ca);
}

/* ---- --make-ca ------------------------------------------------------------ */

/*
 * "critical,permitted;DNS:example.com,permitted;IP:..." from the patterns,
 * "" when there are none; NULL when memory ran out. The caller frees it.
 */
static char *
name_constraints(const struct kp_config *cfg)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	bool dns = false, ip = false, failed;

	if (!f)
		return NULL;
	for (unsigned i = 0; i < cfg->nintercept; i++) {
		const char *p = cfg->intercept[i];
		unsigned char a[16];
		int family_len = ip_literal(p, a);

		/* RFC 5280 4.2.1.10: conforming CAs mark name constraints critical. */
		fputs(i ? "," : "critical,", f);
		if (family_len == 4) {
			fprintf(f, "permitted;IP:%s/255.255.255.255", p);
			ip = true;
		} else if (family_len == 16) {
			fprintf(f, "permitted;IP:%s/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", p);
			ip = true;
		} else {
			/* A DNS constraint covers the name and every name below it. */
			fprintf(f, "permitted;DNS:%s", p[0] == '*' ? p + 2 : p);
			dns = true;
		}
	}
	/*
	 * A form with no permitted subtree is not constrained at all, so the
	 * form the patterns do not use is shut explicitly.
	 */
	if (dns && !ip)
		fputs(",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::", f);
	else if (ip && !dns)
		fputs(",permitted;DNS:invalid", f);
	/* Cut short, the text would constrain less than asked: no CA rather than that one. */
	failed = ferror(f) != 0;
	if (fclose(f) != 0 || failed) {
		free(text);
		return NULL;
	}
	return text;
}

static X509 *
make_ca_cert(EVP_PKEY *key, const struct kp_config *cfg, char *err, size_t errlen)
{
	X509 *x = X509_new();
	X509_NAME *name;
	char cn[128], host[64] = "localhost", *nc = name_constraints(cfg);
	time_t now = time(NULL);
	struct tm tm;

	gethostname(host, sizeof(host) - 1);
	gmtime_r(&now, &tm);
	snprintf(cn, sizeof(cn), "keepalive-proxy interception CA %.40s %04d-%02d-%02d", host,
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	if (!x || !nc || !X509_set_version(x, 2) || !set_random_serial(x) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -LEAF_BACKDATE_SECONDS) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), CA_LIFETIME_DAYS, 0, NULL) ||
	    !X509_set_pubkey(x, key) || !(name = X509_get_subject_name(x)) ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	                                (const unsigned char *)"keepalive-proxy", -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
	                                0) ||
	    !X509_set_issuer_name(x, name) ||
	    !add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(x, x, NID_subject_key_identifier, "hash") ||
	    (nc[0] && !add_ext(x, x, NID_name_constraints, nc)) || !X509_sign(x, key, EVP_sha256())) {
		ossl_take_error(err, errlen, "cannot make the CA certificate");
		X509_free(x);
		free(nc);
		return NULL;
	}
	free(nc);
	return x;
}

/* Opens path for writing, never over a file already there. NULL: errno says why. */
static FILE *
create_new(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	FILE *f;
	int saved;

	if (fd < 0)
		return NULL;
	if (!(f = fdopen(fd, "w"))) {
		saved = errno;
		close(fd);
		errno = saved;
	}
	return f;
}

/*
 * Writes the key (mode 0600) and then the certificate. Never over an
 * existing CA: clients may already trust it. A certificate that cannot be
 * written takes its key with it. 0, or -1 said on err.
 */
static int
write_ca_files(const char *key_path, const char *cert_path, EVP_PKEY *key, X509 *cert,
               FILE *err)
{
	FILE *kf = NULL, *cf = NULL;
	int rc = -1;

	if (!(kf = create_new(key_path, 0600))) {
		fprintf(err, "keepalive-proxy: %s: %s\n", key_path, strerror(errno));
		goto out;
	}
	if (!PEM_write_PrivateKey(kf, key, NULL, NULL, 0, NULL, NULL) || fflush(kf) != 0) {
		fprintf(err, "keepalive-proxy: cannot write %s\n", key_path);
		goto out;
	}
	if (!(cf = create_new(cert_path, 0644))) {
		fprintf(err, "keepalive-proxy: %s: %s\n", cert_path, strerror(errno));
		unlink(key_path);
		goto out;
	}
	if (!PEM_write_X509(cf, cert) || fflush(cf) != 0) {
		fprintf(err, "keepalive-proxy: cannot write %s\n", cert_path);
		unlink(key_path);
		unlink(cert_path);
		goto out;
	}
	rc = 0;
out:
	if (kf)
		fclose(kf);
	if (cf)
		fclose(cf);
	return rc;
}

/* What was written, and how to run the proxy and make clients trust the CA. */
static void
tell_how_to_use(FILE *out, const struct kp_config *cfg, const char *cert_path,
                const char *key_path)
{
	fprintf(out,
	        "Wrote a new CA for this install:\n"
	        "  %s  (certificate: give it to the clients that should trust the proxy)\n"
	        "  %s  (private key, mode 0600: never copy or share it)\n"
	        "%s"
	        "Run the proxy with:\n"
	        "  keepalive-proxy",
	        cert_path, key_path,
	        cfg->nintercept ? "It can only vouch for the hosts given with --intercept.\n"
	                        : "It is not name-constrained: give --intercept patterns with "
	                          "--make-ca to limit what it can vouch for.\n");
	/* The command to run, with the patterns the CA was made for. */
	for (unsigned i = 0; i < cfg->nintercept; i++)
		fprintf(out, " --intercept '%s'", cfg->intercept[i]);
	if (!cfg->nintercept)
		fprintf(out, " --intercept HOST");
	fprintf(out,
	        " --ca-cert %s --ca-key %s\n"
	        "Trust the certificate in each client, e.g.:\n"
	        "  curl --cacert %s ...        (or CURL_CA_BUNDLE=%s)\n"
	        "  REQUESTS_CA_BUNDLE=%s python3 ...\n"
	        "  SSL_CERT_FILE=%s yt-dlp --compat-options no-certifi ...\n"
	        "  ffmpeg -ca_file %s -tls_verify 1 ...\n"
	        "  system store (Debian): cp %s /usr/local/share/ca-certificates/"
	        "keepalive-proxy.crt && update-ca-certificates\n",
	        cert_path, key_path, cert_path, cert_path, cert_path, cert_path, cert_path,
	        cert_path);
}

int
ca_make(const char *dir, const struct kp_config *cfg, FILE *out, FILE *err)
{
	char key_path[4096], cert_path[4096], why[256];
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	int rc = -1;

	snprintf(key_path, sizeof(key_path), "%s/ca.key", dir);
	snprintf(cert_path, sizeof(cert_path), "%s/ca.crt", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(err, "keepalive-proxy: --make-ca %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (!(key = EVP_EC_gen("P-256"))) {
		ossl_take_error(why, sizeof(why), "cannot make the CA key");
		fprintf(err, "keepalive-proxy: %s\n", why);
		goto out;
	}
	if (!(cert = make_ca_cert(key, cfg, why, sizeof(why)))) {
		fprintf(err, "keepalive-proxy: %s\n", why);
		goto out;
	}
	if (write_ca_files(key_path, cert_path, key, cert, err) < 0)
		goto out;
	tell_how_to_use(out, cfg, cert_path, key_path);
	rc = 0;
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}
