#include "kp/policy.h"

struct policy_verdict
policy_check(const struct kp_config *cfg, const struct policy_request *r)
{
	struct policy_verdict v = {0, NULL};

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
