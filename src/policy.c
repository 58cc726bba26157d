#include "kp/policy.h"

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
	struct policy_verdict v = {0, NULL, false};
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
		if (!cred || !auth_check(r->auth, cred, len)) {
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
