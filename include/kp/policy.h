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
struct auth_waiter;

struct policy_request {
	const struct http_head *head;
	const char *base;                  /* bytes the head's spans point into */
	const struct http_target *target;  /* absolute-form URI or CONNECT authority */
	const struct sockaddr *client;
	const struct auth *auth;           /* credentials to demand; NULL: none, or they passed */
	double now;                        /* the loop's time, for what auth remembers */
	struct auth_waiter *waiter;        /* told the verdict on a hash checked off the loop */
};

struct policy_verdict {
	int status;        /* 0: forward it, unless pending; otherwise the status to answer */
	const char *why;   /* short text for the response body and the log */
	bool close;        /* and close the connection after the answer */
	bool pending;      /* a password hash is being checked: ask again, without auth, once
	                    * the waiter is told it passed */
};

/*
 * May the request go on? Checks the requester, its credentials, then what
 * it asks for; the first refusal is the verdict.
 */
struct policy_verdict policy_check(const struct kp_config *cfg, const struct policy_request *r);

/*
 * May a connection to dst be made? --deny-dest refuses it for everyone.
 * For a restricted requester (a client not on this machine) loopback,
 * link-local, unspecified and multicast addresses and this machine's own
 * (own, nown) are refused too, unless --allow-dest lists them: a LAN client
 * must not reach the router's admin page through the proxy. Checked for
 * every address a name resolves to, at connect time, so a name that
 * resolves differently later (DNS rebinding) cannot slip past.
 */
bool policy_dest_allowed(const struct kp_config *cfg, const struct cidr *own, unsigned nown,
                         bool restricted, const struct sockaddr *dst);

/* This machine's addresses (getifaddrs); how many were stored, at most max. */
unsigned policy_own_addresses(struct cidr *out, unsigned max);

/* This machine's addresses as the daemon keeps them: read at start and on SIGHUP. */
#define POLICY_MAX_OWN 64
struct own_addresses {
	struct cidr addr[POLICY_MAX_OWN];
	unsigned count;
};

#endif
