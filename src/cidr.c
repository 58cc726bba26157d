#include "kp/cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int
cidr_parse(const char *text, struct cidr *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(text, '/');
	size_t len = slash ? (size_t)(slash - text) : strlen(text);
	unsigned max, prefix;

	if (len == 0 || len >= sizeof(host))
		return -1;
	memcpy(host, text, len);
	host[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, host, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		return -1;
	}
	prefix = max;
	if (slash) {
		char *end;
		unsigned long v;

		if (slash[1] < '0' || slash[1] > '9')
			return -1;
		v = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || v > max)
			return -1;
		prefix = (unsigned)v;
	}
	out->prefix = (uint8_t)prefix;
	/* Host bits set ("10.1.2.3/8") are cleared, as routing tables do. */
	for (unsigned bit = prefix; bit < max; bit++)
		out->addr[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));
	return 0;
}

static bool
prefix_matches(const uint8_t *net, const uint8_t *addr, unsigned prefix)
{
	unsigned whole = prefix / 8, rest = prefix % 8;

	if (memcmp(net, addr, whole) != 0)
		return false;
	return rest == 0 || ((net[whole] ^ addr[whole]) & (uint8_t)(0xff00u >> rest)) == 0;
}

/* The address bytes of sa, IPv4-mapped IPv6 turned into IPv4; NULL for other families. */
static const uint8_t *
address_of(const struct sockaddr *sa, uint8_t *family)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;

		if (memcmp(a, mapped, sizeof(mapped)) == 0) {
			*family = AF_INET;
			return a + 12;
		}
		*family = AF_INET6;
		return a;
	}
	return NULL;
}

bool
cidr_match(const struct cidr *c, const struct sockaddr *sa)
{
	uint8_t family;
	const uint8_t *a = address_of(sa, &family);

	return a && family == c->family && prefix_matches(c->addr, a, c->prefix);
}

bool
cidr_any_match(const struct cidr *list, unsigned n, const struct sockaddr *sa)
{
	for (unsigned i = 0; i < n; i++)
		if (cidr_match(&list[i], sa))
			return true;
	return false;
}

bool
cidr_is_loopback(const struct sockaddr *sa)
{
	static const uint8_t v6_loopback[16] = {[15] = 1};
	uint8_t family;
	const uint8_t *a = address_of(sa, &family);

	if (!a)
		return false;
	return family == AF_INET ? a[0] == 127 : memcmp(a, v6_loopback, 16) == 0;
}
