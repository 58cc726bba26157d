/*
 * libFuzzer target: the response path. One input is an origin's bytes for
 * a request whose method the first input byte picks: the head is parsed,
 * the pooling decision made, the head rewritten for the client (keep-alive
 * or not, de-chunked for HTTP/1.0 or not), and the rest framed as the body,
 * as the proxy does.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kp/framing.h"
#include "kp/http.h"

#define MAX_HEAD 16384

static char out[MAX_HEAD + 1024];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t methods[] = {HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_CONNECT};
	struct http_parser parser;
	struct http_head head;
	struct response_plan plan;
	struct framer f;
	enum body_kind kind;
	enum span_kind span;
	const char *base, *p;
	size_t len;
	uint8_t method;
	bool reusable;

	if (size < 1)
		return 0;
	method = methods[data[0] % sizeof(methods)];
	memset(&plan, 0, sizeof(plan));
	plan.client_minor = data[0] & 4 ? 1 : 0;
	plan.client_keep_alive = data[0] & 8;
	base = (const char *)data + 1;
	size--;
	http_parser_init(&parser, HTTP_RESPONSE, MAX_HEAD, MAX_HEAD);
	http_parser_start(&parser, &head);
	if (http_parse_head(&parser, base, size) != HTTP_PARSE_DONE)
		return 0;
	kind = http_response_body_kind(&head, method);
	reusable = http_head_keeps_alive(&head) && kind != BODY_UNTIL_CLOSE;
	(void)reusable;
	(void)http_keep_alive_timeout(&head, base);
	plan.dechunk = kind == BODY_CHUNKED && plan.client_minor == 0;
	plan.upgrade = head.status == 101;
	if (http_write_response_head(out, sizeof(out), &head, base, &plan) < 0)
		return 0;
	framer_init(&f, kind, head.content_length);
	p = base + head.head_len;
	len = size - head.head_len;
	while (len && !framer_done(&f)) {
		ssize_t n = framer_next(&f, p, len, &span);

		if (n <= 0)
			break;
		assert((size_t)n <= len);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
