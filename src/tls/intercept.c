#include "kp/intercept.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* ---- refusals ------------------------------------------------------------- */

/* The client machine: its address alone, since each connection has its own port. */
static const void *
address_of(const struct sockaddr *sa, size_t *len)
{
	if (sa->sa_family == AF_INET6) {
		*len = 16;
		return &((const struct sockaddr_in6 *)sa)->sin6_addr;
	}
	*len = 4;
	return &((const struct sockaddr_in *)sa)->sin_addr;
}

static bool
same_address(const struct intercept_refusal *r, const struct sockaddr *sa)
{
	size_t len;
	const void *addr = address_of(sa, &len);

	return r->family == sa->sa_family && memcmp(r->addr, addr, len) == 0;
}

void
intercept_memory_init(struct intercept_memory *m, double remember)
{
	memset(m, 0, sizeof(*m));
	m->remember = remember;
}

static struct intercept_refusal *
find(const struct intercept_memory *m, const struct sockaddr *client, const char *key,
     ev_tstamp now)
{
	for (unsigned i = 0; i < INTERCEPT_REFUSALS; i++) {
		const struct intercept_refusal *r = &m->slot[i];

		if (r->until > now && same_address(r, client) && strcmp(r->key, key) == 0)
			return (struct intercept_refusal *)r;
	}
	return NULL;
}

bool
intercept_memory_add(struct intercept_memory *m, const struct sockaddr *client, const char *key,
                     ev_tstamp now)
{
	struct intercept_refusal *r = find(m, client, key, now);
	bool fresh = r == NULL;
	size_t len;
	const void *addr = address_of(client, &len);

	if (!r) {
		r = &m->slot[0];
		for (unsigned i = 1; i < INTERCEPT_REFUSALS && r->until > now; i++)
			if (m->slot[i].until < r->until)
				r = &m->slot[i];
	}
	memset(r->addr, 0, sizeof(r->addr));
	memcpy(r->addr, addr, len);
	r->family = client->sa_family;
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->until = now + m->remember;
	return fresh;
}

bool
intercept_memory_has(const struct intercept_memory *m, const struct sockaddr *client,
                     const char *key, ev_tstamp now)
{
	return find(m, client, key, now) != NULL;
}
