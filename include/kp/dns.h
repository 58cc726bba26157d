/*
 * Name resolution that never blocks the event loop. getaddrinfo() runs on a
 * couple of resolver threads; results come back through an ev_async watcher
 * and land in a small cache. Concurrent lookups of one name share one query.
 */
#ifndef KP_DNS_H
#define KP_DNS_H

#include <netinet/in.h>
#include <sys/socket.h>

#include <ev.h>

#include "kp/config.h"
#include "kp/list.h"
#include "kp/net.h"

#define DNS_MAX_ADDRS 8

/* Addresses in the order to try them (getaddrinfo's RFC 6724 order). Port 0. */
struct dns_addrs {
	unsigned count;
	union net_addr addr[DNS_MAX_ADDRS];
};

struct dns_query;
struct dns_waiter;

/* error is 0 or an EAI_* code; addrs is valid only during the call. */
typedef void (*dns_done_fn)(struct dns_waiter *w, const struct dns_addrs *addrs, int error);

/* Embedded in whoever waits; cancel it before freeing that object. */
struct dns_waiter {
	dns_done_fn done;
	struct dns_query *query;            /* NULL when not waiting */
	struct kp_list link;                /* in query's waiters while waiting */
};

int dns_init(struct ev_loop *loop, const struct kp_config *cfg);
void dns_shutdown(void);

enum dns_status {
	DNS_DONE,      /* *out holds the answer now */
	DNS_FAILED,    /* *error holds an EAI_* code now */
	DNS_PENDING,   /* w->done will be called from the loop later */
};

/* Literal addresses and cached names answer at once; others go to a thread. */
enum dns_status dns_lookup(const char *host, struct dns_addrs *out, int *error,
                           struct dns_waiter *w);
void dns_cancel(struct dns_waiter *w);

const char *dns_error_text(int error);

#endif
