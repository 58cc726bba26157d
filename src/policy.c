#include "kp/policy.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "kp/auth.h"
#include "kp/cidr.h"

/* The Proxy-Authorization field's value, or NULL. */
static const char *
proxy_authorization(const struct policy_request *r, size_t *len)
{
	for (unsigned i = 0; i < r->head->nfields; i++) {
		const struct http_field *f = &r->head->fields[i];

		if (http_span_is(r->base, f->name, "proxy-authorization")) {
			*len = f->value.len;
			return r->base + f->value.off;
		}
	}
	return NULL;
}

struct policy_verdict
policy_check(const struct kp_config *cfg, const struct policy_request *r)
{
	struct policy_verdict v = {0, NULL, false, false};
	const char *cred;
	size_t len = 0;

	/* Who asks comes first: a stranger learns nothing else, not even whether auth is on. */
	if (cfg->nallow && !cidr_any_match(cfg->allow, cfg->nallow, r->client)) {
		v.status = 403;
		v.why = "this address may not use the proxy (see --allow)";
		v.close = true;
		return v;
	}
	if (r->auth) {
		cred = proxy_authorization(r, &len);
		switch (auth_check(r->auth, cred, len, r->client, r->now, r->waiter)) {
		case AUTH_GRANTED:
			break;
		case AUTH_PENDING:
			v.pending = true;
			return v;
		case AUTH_LIMITED:
			v.status = 429;
			v.why = "too many wrong proxy credentials from this address; try later";
			v.close = true;
			return v;
		case AUTH_BUSY:
			v.status = 503;
			v.why = "too many proxy credentials waiting to be checked";
			v.close = true;
			return v;
		case AUTH_REFUSED:
			v.status = 407;
			v.why = cred ? "wrong proxy credentials" : "proxy authentication required";
			return v;
		}
	}
	if (r->head->method == HTTP_CONNECT && !config_connect_port_allowed(cfg, r->target->port)) {
		v.status = 403;
		v.why = "CONNECT to this port is not allowed (see --connect-ports)";
		return v;
	}
	if (r->target && r->target->port == 0) {
		v.status = 400;
		v.why = "bad port";
	}
	return v;
}

/* Never for a client beyond this machine: the machine itself and its links. */
static const char *const private_to_the_host[] = {
	"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255",
	"::/128", "::1", "fe80::/10", "ff00::/8",
};

bool
policy_dest_allowed(const struct kp_config *cfg, const struct cidr *own, unsigned nown,
                    bool restricted, const struct sockaddr *dst)
{
	enum { N = sizeof(private_to_the_host) / sizeof(private_to_the_host[0]) };
	static struct cidr builtin[N];
	static bool parsed;

	if (cidr_any_match(cfg->deny_dest, cfg->ndeny_dest, dst))
		return false;
	if (!restricted || cidr_any_match(cfg->allow_dest, cfg->nallow_dest, dst))
		return true;
	/* Constants, parsed once: the same for every loop and every server. */
	for (unsigned i = 0; !parsed && i < N; i++)
		cidr_parse(private_to_the_host[i], &builtin[i]);
	parsed = true;
	return !cidr_any_match(builtin, N, dst) && !cidr_any_match(own, nown, dst);
}

unsigned
policy_own_addresses(struct cidr *out, unsigned max)
{
	struct ifaddrs *list, *ifa;
	unsigned n = 0;

	if (getifaddrs(&list) < 0)
		return 0;
	for (ifa = list; ifa && n < max; ifa = ifa->ifa_next) {
		const struct sockaddr *sa = ifa->ifa_addr;

		if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].family = (uint8_t)sa->sa_family;
		if (sa->sa_family == AF_INET) {
			memcpy(out[n].addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
			out[n].prefix = 32;
		} else {
			memcpy(out[n].addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
			out[n].prefix = 128;
		}
		n++;
	}
	freeifaddrs(list);
	return n;
}
