/*
 * Heads for the fuzz targets whose code reads fields of a parsed head
 * (ranges, CMCD, the requests a playlist leads to): text built from lines
 * of the input, each ended with CRLF whether it ended in LF or CRLF, parsed
 * by the proxy's own parser, so the functions under test see only what
 * the proxy would hand them. The text is allocated to its exact length:
 * a span read past its end is an AddressSanitizer report, not a silent
 * read of the next field.
 */
#ifndef KP_FUZZ_HEAD_H
#define KP_FUZZ_HEAD_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kp/http.h"

struct fuzz_head {
	struct http_parser parser;
	struct http_head head;
	char *text;  /* malloc'd, exactly len bytes, not NUL-terminated; NULL before parsing */
	size_t len;
};

/* The line at *p (before end) without its LF and one CR before that; *p moves past the LF. */
static inline size_t
fuzz_line(const char **p, const char *end, const char **line)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);

	*line = *p;
	*p = nl ? nl + 1 : end;
	if (n && (*line)[n - 1] == '\r')
		n--;
	return n;
}

/*
 * Parses start (a start line and any fields, CRLF-ended, as it is) followed
 * by the lines of lines[0..n) and the empty line. A last line left empty
 * by a closing LF is not one. True when that makes one complete head;
 * h->text is to be freed with fuzz_head_free either way.
 */
static inline bool
fuzz_head_parse(struct fuzz_head *h, llhttp_type_t type, const char *start, const char *lines,
                size_t n)
{
	const char *p, *end = lines + n, *line;
	size_t start_len = strlen(start), len = start_len + 2, k;

	for (p = lines; p < end;)
		len += fuzz_line(&p, end, &line) + 2;
	h->text = malloc(len);
	h->len = len;
	if (!h->text)
		return false;
	memcpy(h->text, start, start_len);
	k = start_len;
	for (p = lines; p < end;) {
		size_t m = fuzz_line(&p, end, &line);

		memcpy(h->text + k, line, m);
		memcpy(h->text + k + m, "\r\n", 2);
		k += m + 2;
	}
	memcpy(h->text + k, "\r\n", 2);
	http_parser_init(&h->parser, type, len + 1, len + 1);
	http_parser_start(&h->parser, &h->head);
	return http_parse_head(&h->parser, h->text, len) == HTTP_PARSE_DONE;
}

static inline void
fuzz_head_free(struct fuzz_head *h)
{
	free(h->text);
	h->text = NULL;
}

#endif
