/*
 * tls.h for a binary built with -DKP_TLS=OFF: no TLS library linked.
 * config.c refuses the TLS flags in such a build, so nothing below is
 * reached with a session; the functions exist so the rest links unchanged.
 */
#include "kp/tls.h"

bool
tls_built_in(void)
{
	return false;
}

const char *
tls_backend_name(void)
{
	return "none";
}

struct tls *
tls_new(const struct kp_config *cfg, char *err, size_t errlen)
{
	(void)cfg;
	snprintf(err, errlen, "this keepalive-proxy was built without TLS (-DKP_TLS=OFF)");
	return NULL;
}

void
tls_free(struct tls *t)
{
	(void)t;
}

int
tls_make_ca(const char *dir, const struct kp_config *cfg, FILE *out, FILE *err)
{
	(void)dir;
	(void)cfg;
	(void)out;
	fprintf(err, "keepalive-proxy: built without TLS (-DKP_TLS=OFF): --make-ca is not "
	             "available\n");
	return -1;
}

struct tls_session *
tls_accept(struct tls *t, int fd, const char *host, const char **why)
{
	(void)t;
	(void)fd;
	(void)host;
	*why = "built without TLS";
	return NULL;
}

struct tls_session *
tls_connect(struct tls *t, int fd, const char *host, const char *session_key, const char **why)
{
	(void)t;
	(void)fd;
	(void)host;
	(void)session_key;
	*why = "built without TLS";
	return NULL;
}

enum tls_step
tls_handshake(struct tls_session *s)
{
	(void)s;
	return TLS_STEP_FAILED;
}

const char *
tls_failure(const struct tls_session *s)
{
	(void)s;
	return "built without TLS";
}

bool
tls_client_refused_certificate(const struct tls_session *s)
{
	(void)s;
	return false;
}

void
tls_session_free(struct tls_session *s)
{
	(void)s;
}

void
tls_attach(struct conn *c, struct tls_session *s)
{
	(void)c;
	(void)s;
}

size_t
tls_leaves_cached(const struct tls *t)
{
	(void)t;
	return 0;
}

int
tls_leaf_pem(struct tls *t, const char *host, char *out, size_t len)
{
	(void)t;
	(void)host;
	(void)out;
	(void)len;
	return -1;
}
