/*
 * The OpenSSL 3 backend of tls.h: the only file that includes OpenSSL.
 */
#include "kp/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "kp/intercept.h"
#include "kp/stats.h"
#include "kp/table.h"

/* A leaf is served from the cache for a day, so none in use is within days of expiry. */
#define LEAF_REUSE_SECONDS (24 * 3600)
/* Validity: a day back for clocks behind ours, a week ahead. */
#define LEAF_BACKDATE_SECONDS (24 * 3600)
#define LEAF_LIFETIME_SECONDS (7 * 24 * 3600)
#define CA_LIFETIME_DAYS 3650
/* Read-ahead buffer toward origins: four full records per read(2). */
#define ORIGIN_READ_BUFFER (4 * (16384 + 256))
/* Upstream sessions kept for resumption, one per pool key (direct-mapped). */
#define SESSION_SLOTS 256

static const unsigned char alpn_http11[] = "\x08http/1.1";

struct leaf {
	struct leaf *hash_next;
	struct leaf *lru_prev, *lru_next;   /* most recently used first */
	X509 *cert;
	time_t minted;
	char host[256];
};

struct session_slot {
	SSL_SESSION *session;
	char key[280];
};

struct tls {
	SSL_CTX *toward_clients;
	SSL_CTX *toward_origins;
	X509 *ca_cert;
	EVP_PKEY *ca_key;
	EVP_PKEY *leaf_key;         /* one key for every leaf: minting costs a signature only */
	struct leaf **buckets;
	size_t nbuckets;            /* a power of two */
	struct leaf *lru_head, *lru_tail;
	size_t leaves, max_leaves;
	struct session_slot sessions[SESSION_SLOTS];
};

struct tls_session {
	SSL *ssl;
	struct tls *t;
	bool toward_client;
	bool certificate_sent;      /* our certificate went out (toward a client) */
	int alert_received;         /* the peer's fatal alert, -1: none */
	char failure[200];
	char session_key[280];
};

bool
tls_built_in(void)
{
	return true;
}

const char *
tls_backend_name(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}

/* ---- errors --------------------------------------------------------------- */

/* The newest error on OpenSSL's queue in words, and the queue emptied. */
static void
take_error(char *out, size_t len, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	snprintf(out, len, "%s%s%s", what, reason ? ": " : "", reason ? reason : "");
	ERR_clear_error();
}

/* ---- leaf certificates ---------------------------------------------------- */

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

static bool
name_fit_for_san(const char *host)
{
	size_t n = strlen(host);

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = host[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '.' || ch == '_'))
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
mint_leaf(struct tls *t, const char *host)
{
	X509 *x = X509_new();
	bool is_ip = false;

	if (!x || !X509_set_version(x, 2) || !set_random_serial(x) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -LEAF_BACKDATE_SECONDS) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), LEAF_LIFETIME_SECONDS) ||
	    !X509_set_pubkey(x, t->leaf_key) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(t->ca_cert)) || !add_san(x, host, &is_ip))
		goto fail;
	/* A CN for names only: an IP in a CN would be judged as a DNS name by name constraints. */
	if (!is_ip && strlen(host) <= 64 &&
	    !X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	                                (const unsigned char *)host, -1, -1, 0))
		goto fail;
	if (!add_ext(x, t->ca_cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(x, t->ca_cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(x, t->ca_cert, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(x, t->ca_cert, NID_authority_key_identifier, "keyid:always") ||
	    !X509_sign(x, t->ca_key, EVP_sha256()))
		goto fail;
	kp_stats.tls_leaves_minted++;
	return x;
fail:
	X509_free(x);
	return NULL;
}

static void
lru_unlink(struct tls *t, struct leaf *l)
{
	if (l->lru_prev)
		l->lru_prev->lru_next = l->lru_next;
	else
		t->lru_head = l->lru_next;
	if (l->lru_next)
		l->lru_next->lru_prev = l->lru_prev;
	else
		t->lru_tail = l->lru_prev;
	l->lru_prev = l->lru_next = NULL;
}

static void
lru_push_front(struct tls *t, struct leaf *l)
{
	l->lru_prev = NULL;
	l->lru_next = t->lru_head;
	if (t->lru_head)
		t->lru_head->lru_prev = l;
	t->lru_head = l;
	if (!t->lru_tail)
		t->lru_tail = l;
}

static void
leaf_drop(struct tls *t, struct leaf *l)
{
	struct leaf **pp = &t->buckets[table_hash(l->host) & (t->nbuckets - 1)];

	while (*pp != l)
		pp = &(*pp)->hash_next;
	*pp = l->hash_next;
	lru_unlink(t, l);
	X509_free(l->cert);
	free(l);
	t->leaves--;
	kp_stats.tls_leaves_cached = t->leaves;
}

/* The leaf for host, from the cache or minted now; borrowed (SSL_use_certificate takes a reference). */
static X509 *
leaf_for(struct tls *t, const char *host)
{
	struct leaf **bucket = &t->buckets[table_hash(host) & (t->nbuckets - 1)];
	time_t now = time(NULL);
	struct leaf *l;

	for (l = *bucket; l; l = l->hash_next) {
		if (strcasecmp(l->host, host) != 0)
			continue;
		if (now - l->minted > LEAF_REUSE_SECONDS || now < l->minted) {
			leaf_drop(t, l);
			break;
		}
		lru_unlink(t, l);
		lru_push_front(t, l);
		return l->cert;
	}
	if (strlen(host) >= sizeof(l->host) || !(l = calloc(1, sizeof(*l))))
		return NULL;
	if (!(l->cert = mint_leaf(t, host))) {
		free(l);
		return NULL;
	}
	snprintf(l->host, sizeof(l->host), "%s", host);
	l->minted = now;
	l->hash_next = *bucket;
	*bucket = l;
	lru_push_front(t, l);
	t->leaves++;
	while (t->leaves > t->max_leaves && t->lru_tail != l)
		leaf_drop(t, t->lru_tail);
	kp_stats.tls_leaves_cached = t->leaves;
	return l->cert;
}

size_t
tls_leaves_cached(const struct tls *t)
{
	return t->leaves;
}

int
tls_leaf_pem(struct tls *t, const char *host, char *out, size_t len)
{
	X509 *leaf = leaf_for(t, host);
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

/* ---- upstream sessions ---------------------------------------------------- */

static struct session_slot *
session_slot(struct tls *t, const char *key)
{
	return &t->sessions[table_hash(key) % SESSION_SLOTS];
}

/* OpenSSL hands over each new session (TLS 1.3: each ticket); the newest per key is kept. */
static int
new_session_cb(SSL *ssl, SSL_SESSION *session)
{
	struct tls_session *s = SSL_get_app_data(ssl);
	struct session_slot *slot;

	if (!s || !s->session_key[0] || !SSL_SESSION_is_resumable(session))
		return 0;
	slot = session_slot(s->t, s->session_key);
	SSL_SESSION_free(slot->session);
	slot->session = session;
	snprintf(slot->key, sizeof(slot->key), "%s", s->session_key);
	return 1;   /* the reference is ours now */
}

/* ---- contexts ------------------------------------------------------------- */

/* Alerts from a client tell whether it refused our certificate. */
static void
info_cb(const SSL *ssl, int where, int ret)
{
	struct tls_session *s = SSL_get_app_data(ssl);

	if (!s)
		return;
	if ((where & SSL_CB_READ_ALERT) && (ret >> 8) == SSL3_AL_FATAL)
		s->alert_received = ret & 0xff;
	if ((where & SSL_CB_ACCEPT_LOOP) && SSL_get_state(ssl) == TLS_ST_SW_CERT)
		s->certificate_sent = true;
}

/* Only http/1.1 is spoken inside: never h2, whatever else the client offers. */
static int
alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
               const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	for (unsigned i = 0; i < inlen;) {
		unsigned len = in[i];

		if (i + 1 + len > inlen)
			break;
		if (len == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + len;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *
common_ctx(const SSL_METHOD *method)
{
	SSL_CTX *ctx = SSL_CTX_new(method);

	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/*
	 * Partial writes and a moving buffer: the relay hands over what its
	 * buffers hold and compacts them between calls. Released buffers: an
	 * idle pooled connection keeps no record buffers.
	 */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	                          SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_info_callback(ctx, info_cb);
	return ctx;
}

static int
make_contexts(struct tls *t, const struct kp_config *cfg, char *err, size_t errlen)
{
	if (!(t->toward_clients = common_ctx(TLS_server_method())) ||
	    !(t->toward_origins = common_ctx(TLS_client_method()))) {
		take_error(err, errlen, "cannot create TLS contexts");
		return -1;
	}
	SSL_CTX_set_alpn_select_cb(t->toward_clients, alpn_select_cb, NULL);
	SSL_CTX_set_verify(t->toward_origins, SSL_VERIFY_PEER, NULL);
	/*
	 * Bodies come from origins: reading several records per read(2) halves
	 * the system calls per byte or better (one record is at most 16 KiB).
	 */
	SSL_CTX_set_read_ahead(t->toward_origins, 1);
	SSL_CTX_set_default_read_buffer_len(t->toward_origins, ORIGIN_READ_BUFFER);
	if (SSL_CTX_set_alpn_protos(t->toward_origins, alpn_http11, sizeof(alpn_http11) - 1) != 0) {
		take_error(err, errlen, "cannot set ALPN");
		return -1;
	}
	if (cfg->upstream_ca) {
		if (SSL_CTX_load_verify_locations(t->toward_origins, cfg->upstream_ca, NULL) != 1) {
			take_error(err, errlen, "--upstream-ca: cannot load");
			return -1;
		}
	} else if (SSL_CTX_set_default_verify_paths(t->toward_origins) != 1) {
		take_error(err, errlen, "cannot load the system's trusted certificates");
		return -1;
	}
	SSL_CTX_set_session_cache_mode(t->toward_origins,
	                               SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(t->toward_origins, new_session_cb);
	return 0;
}

/* ---- the CA --------------------------------------------------------------- */

static int
load_ca(struct tls *t, const struct kp_config *cfg, char *err, size_t errlen)
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
	t->ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!(f = fopen(cfg->ca_cert, "r"))) {
		snprintf(err, errlen, "--ca-cert %s: %s", cfg->ca_cert, strerror(errno));
		return -1;
	}
	t->ca_cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (!t->ca_key || !t->ca_cert) {
		take_error(err, errlen, !t->ca_key ? "--ca-key: not a PEM private key"
		                                   : "--ca-cert: not a PEM certificate");
		return -1;
	}
	if (X509_check_private_key(t->ca_cert, t->ca_key) != 1) {
		take_error(err, errlen, "--ca-key does not belong to --ca-cert");
		return -1;
	}
	if (X509_check_ca(t->ca_cert) != 1) {
		snprintf(err, errlen, "--ca-cert %s is not a CA certificate", cfg->ca_cert);
		return -1;
	}
	return 0;
}

struct tls *
tls_new(const struct kp_config *cfg, char *err, size_t errlen)
{
	struct tls *t = calloc(1, sizeof(*t));

	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->max_leaves = cfg->leaf_cache ? cfg->leaf_cache : 1;
	for (t->nbuckets = 16; t->nbuckets < t->max_leaves; t->nbuckets *= 2)
		;
	if (!(t->buckets = calloc(t->nbuckets, sizeof(*t->buckets)))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (make_contexts(t, cfg, err, errlen) < 0)
		goto fail;
	if (cfg->nintercept) {
		if (load_ca(t, cfg, err, errlen) < 0)
			goto fail;
		if (!(t->leaf_key = EVP_EC_gen("P-256"))) {
			take_error(err, errlen, "cannot make the leaf key");
			goto fail;
		}
	}
	return t;
fail:
	tls_free(t);
	return NULL;
}

void
tls_free(struct tls *t)
{
	if (!t)
		return;
	while (t->lru_head)
		leaf_drop(t, t->lru_head);
	free(t->buckets);
	for (unsigned i = 0; i < SESSION_SLOTS; i++)
		SSL_SESSION_free(t->sessions[i].session);
	SSL_CTX_free(t->toward_clients);
	SSL_CTX_free(t->toward_origins);
	X509_free(t->ca_cert);
	EVP_PKEY_free(t->ca_key);
	EVP_PKEY_free(t->leaf_key);
	free(t);
}

/* ---- --make-ca ------------------------------------------------------------ */

/* "critical,permitted;DNS:example.com,permitted;IP:..." from the patterns; "" when none. */
static void
name_constraints(const struct kp_config *cfg, char *out, size_t len)
{
	bool dns = false, ip = false;
	/* RFC 5280 4.2.1.10: conforming CAs mark name constraints critical. */
	size_t at = (size_t)snprintf(out, len, "critical,");

	for (unsigned i = 0; i < cfg->nintercept; i++) {
		const char *p = cfg->intercept[i];
		const char *sep = i ? "," : "";
		unsigned char a[16];
		int family_len = ip_literal(p, a);
		int n;

		if (family_len == 4) {
			n = snprintf(out + at, len - at, "%spermitted;IP:%s/255.255.255.255", sep, p);
			ip = true;
		} else if (family_len == 16) {
			n = snprintf(out + at, len - at,
			             "%spermitted;IP:%s/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", sep, p);
			ip = true;
		} else {
			/* A DNS constraint covers the name and every name below it. */
			n = snprintf(out + at, len - at, "%spermitted;DNS:%s", sep, p[0] == '*' ? p + 2 : p);
			dns = true;
		}
		/* len fits every pattern; should it not, no CA rather than an unlimited one. */
		if (n < 0 || (size_t)n >= len - at)
			abort();
		at += (size_t)n;
	}
	/*
	 * A form with no permitted subtree is not constrained at all, so the
	 * form the patterns do not use is shut explicitly.
	 */
	if (dns && !ip)
		snprintf(out + at, len - at, ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::");
	else if (ip && !dns)
		snprintf(out + at, len - at, ",permitted;DNS:invalid");
	else if (!dns && !ip)
		out[0] = '\0';
}

static X509 *
make_ca_cert(EVP_PKEY *key, const struct kp_config *cfg, char *err, size_t errlen)
{
	X509 *x = X509_new();
	X509_NAME *name;
	char cn[128], host[64] = "localhost", nc[KP_MAX_INTERCEPT * 300];
	time_t now = time(NULL);
	struct tm tm;

	gethostname(host, sizeof(host) - 1);
	gmtime_r(&now, &tm);
	snprintf(cn, sizeof(cn), "keepalive-proxy interception CA %.40s %04d-%02d-%02d", host,
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	name_constraints(cfg, nc, sizeof(nc));
	if (!x || !X509_set_version(x, 2) || !set_random_serial(x) ||
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
		take_error(err, errlen, "cannot make the CA certificate");
		X509_free(x);
		return NULL;
	}
	return x;
}

int
tls_make_ca(const char *dir, const struct kp_config *cfg, FILE *out, FILE *err)
{
	char key_path[4096], cert_path[4096], why[256], patterns[KP_MAX_INTERCEPT * 300];
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	FILE *kf = NULL, *cf = NULL;
	int fd = -1, rc = -1;

	/* The command to run, with the patterns the CA was made for. */
	for (unsigned i = 0, at = 0; i < cfg->nintercept && at < sizeof(patterns); i++)
		at += (unsigned)snprintf(patterns + at, sizeof(patterns) - at, " --intercept '%s'",
		                         cfg->intercept[i]);
	if (!cfg->nintercept)
		snprintf(patterns, sizeof(patterns), " --intercept HOST");
	snprintf(key_path, sizeof(key_path), "%s/ca.key", dir);
	snprintf(cert_path, sizeof(cert_path), "%s/ca.crt", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(err, "keepalive-proxy: --make-ca %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (!(key = EVP_EC_gen("P-256"))) {
		take_error(why, sizeof(why), "cannot make the CA key");
		fprintf(err, "keepalive-proxy: %s\n", why);
		goto out;
	}
	if (!(cert = make_ca_cert(key, cfg, why, sizeof(why)))) {
		fprintf(err, "keepalive-proxy: %s\n", why);
		goto out;
	}
	/* Never over an existing CA: clients may already trust it. */
	fd = open(key_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || !(kf = fdopen(fd, "w"))) {
		fprintf(err, "keepalive-proxy: %s: %s\n", key_path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (!PEM_write_PrivateKey(kf, key, NULL, NULL, 0, NULL, NULL) || fflush(kf) != 0) {
		fprintf(err, "keepalive-proxy: cannot write %s\n", key_path);
		goto out;
	}
	fd = open(cert_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || !(cf = fdopen(fd, "w"))) {
		fprintf(err, "keepalive-proxy: %s: %s\n", cert_path, strerror(errno));
		unlink(key_path);
		goto out;
	}
	fd = -1;
	if (!PEM_write_X509(cf, cert) || fflush(cf) != 0) {
		fprintf(err, "keepalive-proxy: cannot write %s\n", cert_path);
		unlink(key_path);
		unlink(cert_path);
		goto out;
	}
	fprintf(out,
	        "Wrote a new CA for this install:\n"
	        "  %s  (certificate: give it to the clients that should trust the proxy)\n"
	        "  %s  (private key, mode 0600: never copy or share it)\n"
	        "%s"
	        "Run the proxy with:\n"
	        "  keepalive-proxy%s --ca-cert %s --ca-key %s\n"
	        "Trust the certificate in each client, e.g.:\n"
	        "  curl --cacert %s ...        (or CURL_CA_BUNDLE=%s)\n"
	        "  REQUESTS_CA_BUNDLE=%s python3 ...\n"
	        "  SSL_CERT_FILE=%s yt-dlp --compat-options no-certifi ...\n"
	        "  ffmpeg -ca_file %s -tls_verify 1 ...\n"
	        "  system store (Debian): cp %s /usr/local/share/ca-certificates/"
	        "keepalive-proxy.crt && update-ca-certificates\n",
	        cert_path, key_path,
	        cfg->nintercept ? "It can only vouch for the hosts given with --intercept.\n"
	                        : "It is not name-constrained: give --intercept patterns with "
	                          "--make-ca to limit what it can vouch for.\n",
	        patterns, cert_path, key_path, cert_path, cert_path, cert_path, cert_path, cert_path,
	        cert_path);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (kf)
		fclose(kf);
	if (cf)
		fclose(cf);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

/* ---- sessions ------------------------------------------------------------- */

static struct tls_session *
session_new(struct tls *t, SSL_CTX *ctx, int fd, const char **why)
{
	struct tls_session *s = calloc(1, sizeof(*s));

	if (!s || !(s->ssl = SSL_new(ctx)) || SSL_set_fd(s->ssl, fd) != 1) {
		ERR_clear_error();
		if (s)
			SSL_free(s->ssl);
		free(s);
		*why = "out of memory for TLS";
		return NULL;
	}
	s->t = t;
	s->alert_received = -1;
	SSL_set_app_data(s->ssl, s);
	return s;
}

struct tls_session *
tls_accept(struct tls *t, int fd, const char *host, const char **why)
{
	X509 *leaf = leaf_for(t, host);
	struct tls_session *s;

	if (!leaf) {
		ERR_clear_error();
		*why = "cannot make a certificate for this host";
		return NULL;
	}
	if (!(s = session_new(t, t->toward_clients, fd, why)))
		return NULL;
	s->toward_client = true;
	if (SSL_use_certificate(s->ssl, leaf) != 1 || SSL_use_PrivateKey(s->ssl, t->leaf_key) != 1) {
		ERR_clear_error();
		*why = "cannot set the certificate";
		tls_session_free(s);
		return NULL;
	}
	SSL_set_accept_state(s->ssl);
	return s;
}

struct tls_session *
tls_connect(struct tls *t, int fd, const char *host, const char *session_key, const char **why)
{
	struct tls_session *s = session_new(t, t->toward_origins, fd, why);
	struct session_slot *slot;
	unsigned char ip[16];
	bool is_ip;

	if (!s)
		return NULL;
	is_ip = ip_literal(host, ip) > 0;
	snprintf(s->session_key, sizeof(s->session_key), "%s", session_key);
	/* RFC 6066 3: no IP literals in SNI. */
	if ((!is_ip && SSL_set_tlsext_host_name(s->ssl, host) != 1) ||
	    (!is_ip && SSL_set1_host(s->ssl, host) != 1) ||
	    (is_ip && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), host) != 1)) {
		ERR_clear_error();
		*why = "cannot set the name to verify";
		tls_session_free(s);
		return NULL;
	}
	slot = session_slot(t, session_key);
	if (slot->session && strcmp(slot->key, session_key) == 0)
		SSL_set_session(s->ssl, slot->session);
	SSL_set_connect_state(s->ssl);
	return s;
}

enum tls_step
tls_handshake(struct tls_session *s)
{
	int r, e;
	long verify;

	ERR_clear_error();
	r = SSL_do_handshake(s->ssl);
	if (r == 1) {
		if (!s->toward_client) {
			kp_stats.tls_upstream_handshakes++;
			if (SSL_session_reused(s->ssl))
				kp_stats.tls_upstream_resumed++;
		} else {
			kp_stats.tls_client_handshakes++;
		}
		return TLS_STEP_DONE;
	}
	e = SSL_get_error(s->ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		return TLS_STEP_WANT_READ;
	if (e == SSL_ERROR_WANT_WRITE)
		return TLS_STEP_WANT_WRITE;
	verify = s->toward_client ? X509_V_OK : SSL_get_verify_result(s->ssl);
	if (verify != X509_V_OK) {
		snprintf(s->failure, sizeof(s->failure), "the origin's certificate did not verify: %s",
		         X509_verify_cert_error_string(verify));
		kp_stats.tls_verify_failures++;
		ERR_clear_error();
	} else if (s->alert_received >= 0) {
		snprintf(s->failure, sizeof(s->failure), "TLS handshake failed: the %s sent alert '%s'",
		         s->toward_client ? "client" : "origin",
		         SSL_alert_desc_string_long(s->alert_received));
		ERR_clear_error();
	} else if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
		snprintf(s->failure, sizeof(s->failure), "TLS handshake failed: %s",
		         errno && e == SSL_ERROR_SYSCALL ? strerror(errno) : "the peer closed");
		ERR_clear_error();
	} else {
		take_error(s->failure, sizeof(s->failure), "TLS handshake failed");
	}
	return TLS_STEP_FAILED;
}

const char *
tls_failure(const struct tls_session *s)
{
	return s->failure[0] ? s->failure : "TLS handshake failed";
}

bool
tls_client_refused_certificate(const struct tls_session *s)
{
	switch (s->alert_received) {
	case SSL_AD_BAD_CERTIFICATE:
	case SSL_AD_UNSUPPORTED_CERTIFICATE:
	case SSL_AD_CERTIFICATE_REVOKED:
	case SSL_AD_CERTIFICATE_EXPIRED:
	case SSL_AD_CERTIFICATE_UNKNOWN:
	case SSL_AD_UNKNOWN_CA:
	case SSL_AD_ACCESS_DENIED:
		return true;
	case -1:
		/* Silence after our certificate: an app that drops the connection instead. */
		return s->certificate_sent;
	default:
		return false;
	}
}

/* Sends close_notify if it fits without waiting; the fd stays open. */
static void
close_notify(struct tls_session *s)
{
	if (s && SSL_is_init_finished(s->ssl) && !(SSL_get_shutdown(s->ssl) & SSL_SENT_SHUTDOWN))
		SSL_shutdown(s->ssl);
	ERR_clear_error();
}

void
tls_session_free(struct tls_session *s)
{
	if (!s)
		return;
	SSL_free(s->ssl);
	free(s);
}

/* ---- the connection end's operations -------------------------------------- */

static ssize_t
tls_recv(struct conn *c, void *p, size_t len)
{
	size_t n = 0;
	int e;

	ERR_clear_error();
	if (SSL_read_ex(c->tls->ssl, p, len, &n) == 1) {
		c->read_on = EV_READ;
		return (ssize_t)n;
	}
	e = SSL_get_error(c->tls->ssl, 0);
	switch (e) {
	case SSL_ERROR_WANT_READ:
		c->read_on = EV_READ;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		c->read_on = EV_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;   /* close_notify: a clean end */
	case SSL_ERROR_SYSCALL:
		if (!errno)
			errno = ECONNRESET;
		break;
	default:
		/*
		 * A close without close_notify counts as a reset, not an end: a
		 * body delimited by the close could have been cut by anyone.
		 */
		errno = ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING
		                ? ECONNRESET
		                : EPROTO;
		break;
	}
	ERR_clear_error();
	return -1;
}

static ssize_t
tls_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	ERR_clear_error();
	for (int i = 0; i < iovcnt; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len) {
			size_t n = 0;
			int e;

			if (SSL_write_ex(c->tls->ssl, (const char *)iov[i].iov_base + off,
			                 iov[i].iov_len - off, &n) == 1) {
				c->write_on = EV_WRITE;
				off += n;
				total += n;
				continue;
			}
			e = SSL_get_error(c->tls->ssl, 0);
			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
				c->write_on = e == SSL_ERROR_WANT_READ ? EV_READ : EV_WRITE;
				if (total)
					return (ssize_t)total;
				errno = EAGAIN;
				return -1;
			}
			ERR_clear_error();
			if (total)
				return (ssize_t)total;
			if (e != SSL_ERROR_SYSCALL || !errno)
				errno = EPIPE;
			return -1;
		}
	}
	return (ssize_t)total;
}

/*
 * Decrypted bytes not yet taken, or (with read-ahead) records read from
 * the socket and not yet decrypted: either way no readiness will announce
 * them. conn_watch() asks only while the end has not been read to EAGAIN,
 * so a partial record that needs the socket again is not mistaken for data.
 */
static size_t
tls_pending(const struct conn *c)
{
	int n = SSL_pending(c->tls->ssl);

	if (n > 0)
		return (size_t)n;
	return SSL_has_pending(c->tls->ssl) ? 1 : 0;
}

static bool
tls_idle_alive(struct conn *c)
{
	char byte;
	size_t n = 0;
	bool alive;

	ERR_clear_error();
	/* Session tickets and the like are taken in; application data is not expected. */
	if (SSL_peek_ex(c->tls->ssl, &byte, 1, &n) == 1)
		alive = false;
	else
		alive = SSL_get_error(c->tls->ssl, 0) == SSL_ERROR_WANT_READ;
	ERR_clear_error();
	return alive;
}

static void
tls_end_writes(struct conn *c)
{
	close_notify(c->tls);
}

static void
tls_release(struct conn *c)
{
	/*
	 * Toward an origin, a connection we end (idle timeout, pool cap) says
	 * goodbye properly: OpenSSL forgets the session of a connection freed
	 * without close_notify, and the next connection to the origin could
	 * not resume it. Toward a client, a close without close_notify is how
	 * a cut-off response is told apart from a finished one.
	 */
	if (!c->tls->toward_client)
		close_notify(c->tls);
	tls_session_free(c->tls);
	c->tls = NULL;
}

static const struct conn_ops conn_tls_ops = {
	.recv = tls_recv,
	.sendv = tls_sendv,
	.pending = tls_pending,
	.idle_alive = tls_idle_alive,
	.end_writes = tls_end_writes,
	.release = tls_release,
	.can_splice = false,
};

void
tls_attach(struct conn *c, struct tls_session *s)
{
	c->tls = s;
	c->ops = &conn_tls_ops;
	c->read_on = EV_READ;
	c->write_on = EV_WRITE;
}
