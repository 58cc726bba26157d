/*
 * The one place that decides whether a request may be forwarded. Every
 * request passes here after its head is parsed and before any upstream is
 * touched; allow-lists, authentication and destination rules belong here.
 */
#ifndef KP_POLICY_H
#define KP_POLICY_H

#include <sys/socket.h>

#include "kp/config.h"
#include "kp/http.h"

struct auth;

struct policy_request {
	const struct http_head *head;
	const char *base;                  /* bytes the head's spans point into */
	const struct http_target *target;  /* absolute-form URI or CONNECT authority */
	const struct sockaddr *client;
	const struct auth *auth;           /* credentials to demand; NULL: none */
};

struct policy_verdict {
	int status;        /* 0: forward it; otherwise the status to answer */
	const char *why;   /* short text for the response body and the log */
	bool close;        /* and close the connection after the answer */
};

struct policy_verdict policy_check(const struct kp_config *cfg, const struct policy_request *r);

#endif
