/*
 * Request-targets (RFC 9112 3.2): where a request goes, parsed from the
 * absolute form a forward proxy is sent, from CONNECT's authority form, or
 * from the origin form of a request inside an intercepted tunnel; and the
 * sizes of the pool keys made from them. Nothing here does I/O.
 */
#ifndef KP_HTTP_TARGET_H
#define KP_HTTP_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_head;

/*
 * host:port with its NUL, the pool key: a name of up to 255 bytes or a
 * bracketed IPv6 literal, a colon, a port.
 */
#define HTTP_KEY_MAX 272
/*
 * A key for the connections to host:port: HTTP_KEY_MAX with a scheme
 * before it and notes after it ("https://", " (lan)", " via parent 2";
 * dispatch_key_compose).
 */
#define HTTP_CONN_KEY_MAX (HTTP_KEY_MAX + 32)

/* The absolute-form request-target of a forward proxy request. */
struct http_target {
	char host[256];        /* lower case; IPv6 without brackets */
	char authority[264];   /* as written in the URI (host[:port]), for Host */
	char key[HTTP_KEY_MAX];   /* host:port, the pool key */
	const char *path;      /* origin-form: points into the message, "/" if empty */
	size_t path_len;
	uint16_t port;
	bool ipv6_literal;
	bool path_empty;       /* no path and no query: OPTIONS goes on as "*" */
};

/*
 * Parses "http://authority/path?query". Returns 0, or the status to answer:
 * 400 for a malformed or origin-form target, 501 for another scheme.
 */
int http_parse_target(const char *url, size_t len, struct http_target *t);

/*
 * A request inside an intercepted CONNECT to origin: origin-form ("/path"),
 * "*" for OPTIONS, or "https://" absolute form naming that same host:port.
 * t gets origin's host, port and key, the path, and as authority the
 * client's Host field (else the CONNECT's host). 0 or 400.
 */
#if KP_TLS
int http_parse_inner_target(const char *url, size_t len, const struct http_head *h,
                            const char *base, const struct http_target *origin,
                            struct http_target *t);
#endif

/* CONNECT's authority-form "host:port" (port required). 0 or 400. */
int http_parse_authority(const char *s, size_t len, struct http_target *t);

#endif
