#include "kp/retry.h"

bool
retry_allowed(const struct retry_facts *f)
{
	if (!f->reused_connection || f->response_started || f->retries > 0)
		return false;
	/* Body bytes already sent are gone from our buffers: nothing to replay. */
	if (f->body_bytes_sent > 0)
		return false;
	return f->idempotent || !f->request_complete;
}
