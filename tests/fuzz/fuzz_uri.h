/*
 * The fuzz targets' own reading of RFC 3986's characters, written apart
 * from hls.c's so that an invariant checked with it is not the code under
 * test checking itself.
 */
#ifndef KP_FUZZ_URI_H
#define KP_FUZZ_URI_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline bool
fuzz_is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static inline bool
fuzz_is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* RFC 3986 3.3 and 3.4: pchar, "/" and "?", a "%" always with two hex digits. */
static inline bool
uri_clean(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!fuzz_is_alnum(s[i]) && !memchr("-._~!$&'()*+,;=:@/?%", s[i], 20))
			return false;
		if (s[i] == '%' && (n - i < 3 || !fuzz_is_hex(s[i + 1]) || !fuzz_is_hex(s[i + 2])))
			return false;
	}
	return true;
}

#endif
