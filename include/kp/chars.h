/*
 * The character classes HTTP, URIs, playlists and CMCD are written in, for
 * the bytes of a message: ASCII only, whatever the locale (ctype.h's
 * answers depend on it, and take an int that a negative char breaks).
 */
#ifndef KP_CHARS_H
#define KP_CHARS_H

#include <stdbool.h>
#include <string.h>

static inline bool
char_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static inline bool
char_is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool
char_is_alnum(char c)
{
	return char_is_alpha(c) || char_is_digit(c);
}

/* The value of a hex digit, either case; -1 for anything else. */
static inline int
char_hex_value(char c)
{
	if (char_is_digit(c))
		return c - '0';
	c = (char)(c | 0x20);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static inline bool
char_is_hex(char c)
{
	return char_hex_value(c) >= 0;
}

/* Optional whitespace around field values and list members (RFC 9110 5.6.3). */
static inline bool
char_is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* A character of a token: a field name, a method, a list member (RFC 9110 5.6.2). */
static inline bool
char_is_tchar(char c)
{
	return char_is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

#endif
