#include "kp/auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Longest credential pair accepted; a field longer than this is simply wrong. */
#define AUTH_MAX_PAIR 1024

struct auth {
	char **pairs;        /* "user:password", as the Basic scheme encodes them */
	unsigned count;
};

void
auth_free(struct auth *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < a->count; i++) {
		/* Do not leave passwords behind in freed memory. */
		explicit_bzero(a->pairs[i], strlen(a->pairs[i]));
		free(a->pairs[i]);
	}
	free(a->pairs);
	free(a);
}

unsigned
auth_users(const struct auth *a)
{
	return a ? a->count : 0;
}

static int
add_pair(struct auth *a, const char *line, size_t len)
{
	char **grown = realloc(a->pairs, (a->count + 1) * sizeof(*grown));

	if (!grown)
		return -1;
	a->pairs = grown;
	if (!(a->pairs[a->count] = strndup(line, len)))
		return -1;
	a->count++;
	return 0;
}

/* Parses one line into a; 1 if it was skipped, 0 if added, -1 with err. */
static int
parse_line(struct auth *a, char *line, unsigned lineno, char *err, size_t errlen)
{
	size_t len = strcspn(line, "\r\n");
	const char *colon;

	line[len] = '\0';
	if (len == 0 || line[0] == '#')
		return 1;
	colon = strchr(line, ':');
	if (!colon || colon == line) {
		snprintf(err, errlen, "line %u: expected user:password", lineno);
		return -1;
	}
	if (len > AUTH_MAX_PAIR) {
		snprintf(err, errlen, "line %u: longer than %d bytes", lineno, AUTH_MAX_PAIR);
		return -1;
	}
	if (add_pair(a, line, len) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

struct auth *
auth_load(const char *path, char *err, size_t errlen)
{
	struct auth *a = calloc(1, sizeof(*a));
	FILE *f = fopen(path, "re");
	char line[AUTH_MAX_PAIR + 4];
	unsigned lineno = 0;

	if (!a || !f) {
		snprintf(err, errlen, "%s", a ? strerror(errno) : "out of memory");
		goto fail;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "line %u: longer than %d bytes", lineno, AUTH_MAX_PAIR);
			goto fail;
		}
		if (parse_line(a, line, lineno, err, errlen) < 0)
			goto fail;
	}
	explicit_bzero(line, sizeof(line));
	if (ferror(f)) {
		snprintf(err, errlen, "%s", strerror(errno));
		goto fail;
	}
	fclose(f);
	if (a->count == 0) {
		snprintf(err, errlen, "no user:password line");
		auth_free(a);
		return NULL;
	}
	return a;
fail:
	explicit_bzero(line, sizeof(line));
	if (f)
		fclose(f);
	auth_free(a);
	return NULL;
}

bool
auth_file_exposed(const char *path)
{
	struct stat st;

	/* Group read stays allowed: it is how a dropped -u user gets to read it again. */
	return stat(path, &st) == 0 && (st.st_mode & S_IROTH);
}

static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Standard base64 with padding into out; the decoded length, or -1. */
static ssize_t
b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
	size_t n = 0, pad = 0;
	uint32_t acc = 0;
	unsigned bits = 0;

	if (len == 0 || len % 4 != 0)
		return -1;
	if (in[len - 1] == '=')
		pad++;
	if (in[len - 2] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++) {
		int v = b64_value((unsigned char)in[i]);

		if (v < 0)
			return -1;
		/* Only the low bits matter; the wrap of the high ones is harmless. */
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (ssize_t)n;
}

/* Equal, with no early exit on the first difference. */
static bool
same_bytes(const uint8_t *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen > blen ? alen : blen;
	uint8_t diff = alen != blen;

	for (size_t i = 0; i < n; i++)
		diff |= (uint8_t)((i < alen ? a[i] : 0) ^ (i < blen ? (uint8_t)b[i] : 0));
	return diff == 0;
}

bool
auth_check(const struct auth *a, const char *value, size_t len)
{
	uint8_t decoded[AUTH_MAX_PAIR];
	ssize_t n;
	bool ok = false;

	if (!a)
		return true;
	/* "Basic" (any case), one or more spaces, then the token. */
	if (len < 6 || strncasecmp(value, "Basic", 5) != 0 || (value[5] != ' ' && value[5] != '\t'))
		return false;
	value += 5;
	len -= 5;
	while (len && (*value == ' ' || *value == '\t'))
		value++, len--;
	while (len && (value[len - 1] == ' ' || value[len - 1] == '\t'))
		len--;
	n = b64_decode(value, len, decoded, sizeof(decoded));
	if (n <= 0)
		return false;
	for (unsigned i = 0; i < a->count; i++)
		ok |= same_bytes(decoded, (size_t)n, a->pairs[i], strlen(a->pairs[i]));
	explicit_bzero(decoded, sizeof(decoded));
	return ok;
}
