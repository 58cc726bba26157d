#include "kp/policy.h"

struct policy_verdict
policy_check(const struct kp_config *cfg, const struct policy_request *r)
{
	struct policy_verdict v = {0, NULL};

	(void)cfg;
	if (r->head->method == HTTP_CONNECT) {
		v.status = 501;
		v.why = "CONNECT tunnels are not supported yet";
		return v;
	}
	if (r->target && r->target->port == 0) {
		v.status = 400;
		v.why = "bad port";
	}
	return v;
}
