/*
 * Interception (--intercept), the client's side of it: a CONNECT answered
 * with our own 200, then a TLS handshake in which the proxy plays the
 * origin with a certificate minted for the host; once it is done the
 * client reads requests as any other, each sent to the CONNECT's origin.
 * Built only with TLS; client_priv.h stands in for it without.
 */
/* First: tests/layers.py counts this file in the client module by it. */
#include "kp/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_priv.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/hostpattern.h"
#include "kp/intercept.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/parent.h"
#include "kp/stats.h"
#include "kp/tls.h"

/*
 * Bytes already read behind the CONNECT would be the client's first TLS
 * record, which the TLS layer must see from the socket: such a CONNECT is
 * tunnelled instead.
 */
bool
client_intercept_wanted(struct client *c)
{
	const struct kp_config *cfg = c->env->cfg;
	struct exchange *ex = &c->req->ex;

	if (!c->env->tls || !host_patterns_match(cfg->intercept, cfg->nintercept,
	                                              ex->target.host))
		return false;
	if (intercept_memory_has(c->env->refusals, &c->peer.sa, ex->target.key,
	                         clock_now(c->env->clock))) {
		kp_stats.intercept_skipped++;
		return false;
	}
	if (buf_len(c->in) > c->req->head.head_len) {
		log_debug("client fd %d: %s: bytes came with the CONNECT; tunnelled", c->conn.fd,
		          ex->target.key);
		return false;
	}
	return true;
}

/* Remembers a client that refused our certificate, so the host is tunnelled for it. */
static void
note_refusal(struct client *c)
{
	char peer[64];

	kp_stats.intercept_refused++;
	if (!intercept_memory_add(c->env->refusals, &c->peer.sa, c->intercepted->origin.key,
	                          clock_now(c->env->clock)))
		return;
	log_info("client %s refused the certificate made for %s (%s): the app pins its "
	         "certificates or does not trust the CA; tunnelling %s for it from now on",
	         net_addr_text(&c->peer.sa, peer, sizeof(peer)), c->intercepted->origin.key,
	         tls_failure(c->conn.tls), c->intercepted->origin.key);
}

/* Drives our handshake with the client; done, it reads requests like any client. */
void
client_intercept_handshake(struct client *c)
{
	switch (tls_handshake(c->conn.tls)) {
	case TLS_STEP_DONE:
		log_debug("client fd %d: TLS as %s established", c->conn.fd,
		          c->intercepted->origin.key);
		/* Stopping: no request has started here, so there is nothing to finish. */
		if (c->env->draining) {
			client_close(c);
			return;
		}
		client_read_next(c);
		return;
	case TLS_STEP_WANT_READ:
		conn_watch(&c->conn, true, false);
		return;
	case TLS_STEP_WANT_WRITE:
		conn_watch(&c->conn, false, true);
		return;
	case TLS_STEP_FAILED:
		if (tls_client_refused_certificate(c->conn.tls))
			note_refusal(c);
		else
			log_debug("client fd %d: %s: %s", c->conn.fd, c->intercepted->origin.key,
			          tls_failure(c->conn.tls));
		client_close(c);
		return;
	}
}

/* Once the 200 is out, the TLS layer takes the socket. */
void
client_intercept_flush(struct client *c)
{
	if (!client_send_out(c))
		return;
	tls_attach(&c->conn, c->handshake);
	c->handshake = NULL;
	client_intercept_handshake(c);
}

/*
 * No origin is contacted yet: requests inside go through dispatch like
 * any other, under a key made once here.
 */
void
client_intercept_start(struct client *c)
{
	static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct exchange *ex = &c->req->ex;
	const char *why = NULL;

	buf_consume(c->in, c->req->head.head_len);
	if (!(c->handshake = tls_accept(c->env->tls, c->conn.fd, ex->target.host, &why))) {
		client_reply_local(c, 502, why, false);
		return;
	}
	if (!(c->intercepted = malloc(sizeof(*c->intercepted))) || !(c->out = buf_get())) {
		client_close(c);
		return;
	}
	c->intercepted->origin = ex->target;
	/* Every request inside goes to this origin: its pool key is made once. */
	dispatch_key_compose(c->intercepted->key, ex->target.key, true, ex->owner.restricted,
	                     parents_route(c->env->parents, ex->target.host), false);
	snprintf(c->intercepted->url_prefix, sizeof(c->intercepted->url_prefix), "https://%s",
	         ex->target.key);
	ex->owner.https = true;
	ex->owner.fixed_key = c->intercepted->key;
	kp_stats.intercepted++;
	memcpy(buf_tail(c->out), established, sizeof(established) - 1);
	c->out->end += sizeof(established) - 1;
	exchange_log(ex, 200, 0, "intercepted");
	client_set_state(c, CLIENT_INTERCEPTING);
	client_intercept_flush(c);
}

bool
client_intercept_admit(struct client *c)
{
	struct exchange *ex = &c->req->ex;
	const struct http_head *h = &c->req->head;
	const char *base = buf_head(c->in);

	if (c->req->head.method == HTTP_CONNECT) {
		client_refuse(c, 400, "CONNECT inside an intercepted connection", false);
		return false;
	}
	if (http_parse_inner_target(base + h->url.off, h->url.len, h, base,
	                            &c->intercepted->origin, &ex->target)) {
		client_refuse(c, 400, "a request here must name a path on the intercepted host",
		              true);
		return false;
	}
	return true;
}

void
client_intercept_release(struct client *c)
{
	tls_session_free(c->handshake);
	c->handshake = NULL;
	free(c->intercepted);
	c->intercepted = NULL;
}
