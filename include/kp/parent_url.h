/*
 * A parent proxy's URL, as --parent and --parent-for take it:
 * socks5h://, socks5:// or http://, then [user[:password]@]host:port, the
 * user and password percent-encoded where they hold special characters.
 * Apart from the table of parents (parent.h) so that the option parser
 * can refuse a malformed one when it reads it.
 */
#ifndef KP_PARENT_URL_H
#define KP_PARENT_URL_H

#include <stdbool.h>
#include <stdint.h>

#include "kp/parent_handshake.h"

struct parent_url {
	enum parent_kind kind;
	char host[256];              /* name or address, IPv6 without brackets */
	uint16_t port;
	char user[256];              /* "": none */
	char password[256];
};

/* Parses url into out. NULL, or what is wrong, in words that never quote the credentials. */
const char *parent_url_parse(const char *url, struct parent_url *out);

/* NULL when pattern is one a --parent-for or --direct rule may take: a host pattern or a CIDR. */
const char *parent_pattern_problem(const char *pattern);

#endif
