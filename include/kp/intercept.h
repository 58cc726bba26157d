/*
 * Which CONNECTs are intercepted: the host patterns the user named
 * (hostpattern.h), and the hosts each client refused our certificate for, which go back to being
 * tunnelled for a while. No TLS here: the decision is plain string and
 * address work, and is the same whichever TLS library does the handshakes.
 */
#ifndef KP_INTERCEPT_H
#define KP_INTERCEPT_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/socket.h>

#include <ev.h>

#include "kp/http.h"

/*
 * Clients that refused the certificate minted for a host: that app pins its
 * certificates or does not trust the CA, and the next CONNECTs from the
 * same address to the same host:port are tunnelled instead, until the entry
 * expires. Bounded: when full, the entry closest to expiry gives way.
 */
#define INTERCEPT_REFUSALS 128

struct intercept_refusal {
	ev_tstamp until;            /* 0: slot free */
	sa_family_t family;
	unsigned char addr[16];     /* the client's address, without its port */
	char key[HTTP_KEY_MAX];     /* host:port */
};

struct intercept_memory {
	struct intercept_refusal slot[INTERCEPT_REFUSALS];
	double remember;            /* seconds an entry lasts */
};

void intercept_memory_init(struct intercept_memory *m, double remember);
/* Notes the refusal; true if it is new (so it is worth one log line). */
bool intercept_memory_add(struct intercept_memory *m, const struct sockaddr *client,
                          const char *key, ev_tstamp now);
bool intercept_memory_has(const struct intercept_memory *m, const struct sockaddr *client,
                          const char *key, ev_tstamp now);

#endif
