/*
 * Address ranges in CIDR notation ("192.168.1.0/24", "fd00::/8", or a bare
 * address for just that host) and lists of them, for the rules on who may
 * use the proxy. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) match the
 * IPv4 ranges, since a dual-stack socket reports IPv4 clients that way.
 */
#ifndef KP_CIDR_H
#define KP_CIDR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct cidr {
	uint8_t family;     /* AF_INET or AF_INET6 */
	uint8_t prefix;     /* leading bits that must match */
	uint8_t addr[16];   /* network order; bits past prefix are zero */
};

/* 0, or -1 for text that is not an address with an optional /prefix. */
int cidr_parse(const char *text, struct cidr *out);

bool cidr_match(const struct cidr *c, const struct sockaddr *sa);

/* Does any of the n ranges hold sa? */
bool cidr_any_match(const struct cidr *list, unsigned n, const struct sockaddr *sa);

/* 127.0.0.0/8 or ::1 (IPv4-mapped too). */
bool cidr_is_loopback(const struct sockaddr *sa);

#endif
