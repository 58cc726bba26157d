/*
 * What http.c and http_target.c share, and nobody else includes: the one
 * decimal writer, for numbers in heads and ports in pool keys.
 */
#ifndef KP_HTTP_PRIV_H
#define KP_HTTP_PRIV_H

#include <stddef.h>
#include <stdint.h>

/* Decimal digits of v at p, no terminator (this runs per request: no printf). */
static inline size_t
format_uint(char *p, uint64_t v)
{
	char digits[20];
	size_t n = 0, i;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		p[i] = digits[n - 1 - i];
	return n;
}

#endif
