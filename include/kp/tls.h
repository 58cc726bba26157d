/*
 * TLS, behind one interface: every call into a TLS library lives in the
 * backend that implements this header (tls_openssl.c, with the CA and leaf
 * certificates of ca.h in ca_openssl.c; tls_none.c when built with
 * -DKP_TLS=OFF). The rest of the proxy sees opaque handles, a
 * handshake step function and a connection end's operations (conn.h), so a
 * second backend (mbedTLS for small routers) or kernel TLS after the
 * handshake can come in here without touching the relay.
 *
 * Two roles: toward a client the proxy is the origin, with a leaf
 * certificate minted for the CONNECT's host and signed by the install's own
 * CA; toward an origin it is a verifying client (system store or
 * --upstream-ca, host name checked, SNI sent), resuming sessions per pool
 * key. TLS 1.2 is the floor on both sides and ALPN offers and accepts only
 * http/1.1.
 */
#ifndef KP_TLS_H
#define KP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kp/config.h"
#include "kp/conn.h"

struct tls;           /* per daemon: contexts, CA, leaf cache, session cache */
struct tls_session;   /* one TLS connection, either role */

/* Was the binary built with a TLS backend? */
bool tls_built_in(void);
/* The backend's name and version, for --version and the log. */
const char *tls_backend_name(void);

/*
 * Loads the CA (refusing a key others can read), makes the leaf key and the
 * contexts. NULL with a reason in err.
 */
struct tls *tls_new(const struct kp_config *cfg, char *err, size_t errlen);
void tls_free(struct tls *t);

/*
 * --make-ca DIR: a fresh EC P-256 CA in DIR/ca.crt and DIR/ca.key (0600),
 * name-constrained to the --intercept patterns when there are any; tells
 * out how to trust it. Refuses to overwrite. 0, or -1 with a message on err.
 */
int tls_make_ca(const char *dir, const struct kp_config *cfg, FILE *out, FILE *err);

/* Toward a client on fd, as host (DNS name or IP literal). NULL with *why. */
struct tls_session *tls_accept(struct tls *t, int fd, const char *host, const char **why);
/*
 * Toward an origin on fd: verify against host, send it as SNI unless it is
 * an IP literal, resume the last session stored under session_key.
 */
struct tls_session *tls_connect(struct tls *t, int fd, const char *host,
                                const char *session_key, const char **why);

enum tls_step {
	TLS_STEP_DONE,
	TLS_STEP_WANT_READ,
	TLS_STEP_WANT_WRITE,
	TLS_STEP_FAILED,
};

/* Advances the handshake; call again on the readiness it asks for. */
enum tls_step tls_handshake(struct tls_session *s);

/* After TLS_STEP_FAILED: why, in a few words fit for a 502 body and the log. */
const char *tls_failure(const struct tls_session *s);
/*
 * After TLS_STEP_FAILED toward a client: did the client reject our
 * certificate (an alert such as unknown_ca or bad_certificate, or a close
 * right after our certificate went out), as an app that pins does?
 */
bool tls_client_refused_certificate(const struct tls_session *s);

/* Frees s (the fd is the caller's). NULL is allowed. */
void tls_session_free(struct tls_session *s);

/*
 * An end carrying this session: recv/sendv go through TLS, no splice.
 * Sets c->tls; conn_close() frees the session.
 */
void tls_attach(struct conn *c, struct tls_session *s);

/* Leaf certificates held in the cache now. */
size_t tls_leaves_cached(const struct tls *t);

/*
 * The leaf that would be shown for host, as PEM, into out (from the cache
 * or minted now): for tests and for looking at what clients are shown.
 * Bytes written, or -1.
 */
int tls_leaf_pem(struct tls *t, const char *host, char *out, size_t len);

#endif
