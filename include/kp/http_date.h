/*
 * HTTP-dates (RFC 9110 5.6.7) as seconds since 1970, UTC. A validator is
 * read only in the preferred form (IMF-fixdate): a date read with any
 * doubt is no ground for joining a download's pieces. Freshness reads all
 * three forms, as a recipient must (Date, Expires, Last-Modified).
 */
#ifndef KP_HTTP_DATE_H
#define KP_HTTP_DATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "Sun, 06 Nov 1994 08:49:37 GMT" only; false for anything else. */
bool http_date_fixdate(const char *p, size_t n, int64_t *t);

/*
 * Also the obsolete forms: "Sunday, 06-Nov-94 08:49:37 GMT" (a two-digit
 * year from 70 on is 19xx, below it 20xx) and asctime's
 * "Sun Nov  6 08:49:37 1994". False for anything else.
 */
bool http_date_parse(const char *p, size_t n, int64_t *t);

#endif
