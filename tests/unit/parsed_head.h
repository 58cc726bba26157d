/*
 * A head for the unit cases that read fields: start (a start line and any
 * fields, CRLF-ended) and fields, then the empty line, parsed by the
 * proxy's own parser. Include after cmocka.h: a head that does not parse
 * fails the case.
 */
#ifndef KP_TEST_PARSED_HEAD_H
#define KP_TEST_PARSED_HEAD_H

#include <stdio.h>

#include "kp/http.h"

struct parsed {
	struct http_parser parser;
	struct http_head head;
	char text[2048];
};

static inline void
parse(struct parsed *ps, llhttp_type_t type, const char *start, const char *fields)
{
	int n = snprintf(ps->text, sizeof(ps->text), "%s%s\r\n", start, fields);

	assert_true(n > 0 && (size_t)n < sizeof(ps->text));
	http_parser_init(&ps->parser, type, sizeof(ps->text), 1024);
	http_parser_start(&ps->parser, &ps->head);
	if (http_parse_head(&ps->parser, ps->text, (size_t)n) != HTTP_PARSE_DONE)
		fail_msg("head not parsed (%s):\n%s", http_parser_error_text(&ps->parser),
		         ps->text);
}

#endif
