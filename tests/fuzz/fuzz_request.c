/*
 * libFuzzer target: the request path. One input is a client's bytes: the
 * head is parsed (in two feeds, split where the first input byte says, as a
 * socket would deliver it), the target parsed (an origin-form or https://
 * target as inside an intercepted CONNECT to example.com:443), the head
 * rewritten for the origin, and the rest framed as the request body, as
 * the proxy does.
 * Crashes, leaks and sanitizer reports are the findings; the invariants
 * below are asserted too.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kp/framing.h"
#include "kp/http.h"

#define MAX_HEAD 16384

static char out[MAX_HEAD + 1024];

static void
frame_body(enum body_kind kind, uint64_t length, const char *p, size_t len)
{
	struct framer f;
	enum span_kind span;

	framer_init(&f, kind, length);
	while (len && !framer_done(&f)) {
		ssize_t n = framer_next(&f, p, len, &span);

		if (n <= 0)
			return;   /* more needed, or malformed: the proxy answers 400 */
		assert((size_t)n <= len);
		p += n;
		len -= (size_t)n;
	}
}

#if KP_TLS
/* The CONNECT an intercepted client's requests are read inside. */
static const struct http_target *
intercepted_origin(void)
{
	static struct http_target origin;

	if (!origin.port)
		http_parse_authority("example.com:443", 15, &origin);
	return &origin;
}
#endif

static int
parse_target(const struct http_head *head, const char *base, struct http_target *target)
{
	const char *url = base + head->url.off;

#if KP_TLS
	if (head->url.len && (url[0] == '/' || url[0] == '*' ||
	                      (head->url.len > 8 && strncasecmp(url, "https://", 8) == 0)))
		return http_parse_inner_target(url, head->url.len, head, base, intercepted_origin(),
		                               target);
#endif
	return http_parse_target(url, head->url.len, target);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_parser parser;
	struct http_head head;
	struct http_target target;
	enum http_parse_result r;
	const char *base;
	size_t split;
	ssize_t n;

	if (size < 1)
		return 0;
	split = data[0];
	base = (const char *)data + 1;
	size--;
	if (split > size)
		split = size;
	http_parser_init(&parser, HTTP_REQUEST, MAX_HEAD, 8192);
	http_parser_start(&parser, &head);
	r = http_parse_head(&parser, base, split);
	if (r == HTTP_PARSE_MORE)
		r = http_parse_head(&parser, base, size);
	if (r != HTTP_PARSE_DONE)
		return 0;
	assert(head.head_len <= size);
	if (head.method == HTTP_CONNECT) {
		http_parse_authority(base + head.url.off, head.url.len, &target);
		return 0;
	}
	if (parse_target(&head, base, &target) != 0)
		return 0;
	n = http_write_request_head(out, sizeof(out), &head, base, &target,
	                            http_wants_upgrade(&head));
	/*
	 * The rewritten head parses again as one request, whole, unless the
	 * Host, Via and Connection it adds take it past HTTP_MAX_FIELDS: the
	 * origin may take more, and read-ahead, which reads the head sent
	 * again, then leaves the request alone.
	 */
	if (n > 0) {
		struct http_parser again;
		struct http_head again_head;

		http_parser_init(&again, HTTP_REQUEST, sizeof(out), sizeof(out));
		http_parser_start(&again, &again_head);
		if (http_parse_head(&again, out, (size_t)n) == HTTP_PARSE_DONE)
			assert(again_head.head_len == (size_t)n);
		else
			assert(again.error == HTTP_HEAD_TOO_LARGE &&
			       head.nfields + 3 > HTTP_MAX_FIELDS);
	}
	(void)http_max_forwards(&head, base);
	frame_body(http_request_body_kind(&head), head.content_length, base + head.head_len,
	           size - head.head_len);
	return 0;
}
