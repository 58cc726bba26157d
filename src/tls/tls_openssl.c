/*
 * The OpenSSL 3 backend of tls.h: contexts and sessions. The certificates
 * shown to clients come from ca_openssl.c, the only other file that
 * includes OpenSSL.
 */
#include "kp/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "kp/ca.h"
#include "kp/http.h"
#include "kp/ossl_error.h"
#include "kp/stats.h"
#include "kp/table.h"

/* Read-ahead buffer toward origins: four full records per read(2). */
#define ORIGIN_READ_BUFFER (4 * (16384 + 256))
/* Upstream sessions kept for resumption, one per pool key (direct-mapped). */
#define SESSION_SLOTS 256

static const unsigned char alpn_http11[] = "\x08http/1.1";

struct session_slot {
	SSL_SESSION *session;
	char key[HTTP_CONN_KEY_MAX];   /* the dispatch key of the connections it resumes */
};

struct tls {
	SSL_CTX *toward_clients;
	SSL_CTX *toward_origins;
	struct ca *ca;              /* NULL when nothing is intercepted */
	struct session_slot sessions[SESSION_SLOTS];
};

struct tls_session {
	SSL *ssl;
	struct tls *t;
	bool toward_client;
	bool certificate_sent;      /* our certificate went out (toward a client) */
	int alert_received;         /* the peer's fatal alert, -1: none */
	char failure[200];
	char session_key[HTTP_CONN_KEY_MAX];
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

/* ---- certificates: ca.h's ------------------------------------------------ */

size_t
tls_leaves_cached(const struct tls *t)
{
	return t->ca ? ca_leaves_cached(t->ca) : 0;
}

int
tls_leaf_pem(struct tls *t, const char *host, char *out, size_t len)
{
	return t->ca ? ca_leaf_pem(t->ca, host, out, len) : -1;
}

int
tls_make_ca(const char *dir, const struct kp_config *cfg, FILE *out, FILE *err)
{
	return ca_make(dir, cfg, out, err);
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
		ossl_take_error(err, errlen, "cannot create TLS contexts");
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
		ossl_take_error(err, errlen, "cannot set ALPN");
		return -1;
	}
	if (cfg->upstream_ca) {
		if (SSL_CTX_load_verify_locations(t->toward_origins, cfg->upstream_ca, NULL) != 1) {
			ossl_take_error(err, errlen, "--upstream-ca: cannot load");
			return -1;
		}
	} else if (SSL_CTX_set_default_verify_paths(t->toward_origins) != 1) {
		ossl_take_error(err, errlen, "cannot load the system's trusted certificates");
		return -1;
	}
	SSL_CTX_set_session_cache_mode(t->toward_origins,
	                               SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(t->toward_origins, new_session_cb);
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
	if (make_contexts(t, cfg, err, errlen) < 0)
		goto fail;
	if (cfg->nintercept && !(t->ca = ca_new(cfg, err, errlen)))
		goto fail;
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
	ca_free(t->ca);
	for (unsigned i = 0; i < SESSION_SLOTS; i++)
		SSL_SESSION_free(t->sessions[i].session);
	SSL_CTX_free(t->toward_clients);
	SSL_CTX_free(t->toward_origins);
	free(t);
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
	struct ca_leaf_cert *leaf;
	struct ca_leaf_key *key;
	struct tls_session *s;

	if (!t->ca || ca_leaf(t->ca, host, &leaf, &key) < 0) {
		ERR_clear_error();
		*why = "cannot make a certificate for this host";
		return NULL;
	}
	if (!(s = session_new(t, t->toward_clients, fd, why)))
		return NULL;
	s->toward_client = true;
	/* ca.h's opaque types are these; SSL_use_certificate takes its own reference. */
	if (SSL_use_certificate(s->ssl, (X509 *)leaf) != 1 ||
	    SSL_use_PrivateKey(s->ssl, (EVP_PKEY *)key) != 1) {
		ERR_clear_error();
		*why = "cannot set the certificate";
		tls_session_free(s);
		return NULL;
	}
	SSL_set_accept_state(s->ssl);
	return s;
}

static bool
is_ip_literal(const char *host)
{
	unsigned char addr[16];

	return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

struct tls_session *
tls_connect(struct tls *t, int fd, const char *host, const char *session_key, const char **why)
{
	struct tls_session *s = session_new(t, t->toward_origins, fd, why);
	struct session_slot *slot;
	bool is_ip;

	if (!s)
		return NULL;
	is_ip = is_ip_literal(host);
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
		ossl_take_error(s->failure, sizeof(s->failure), "TLS handshake failed");
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
