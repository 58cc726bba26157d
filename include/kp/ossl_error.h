/*
 * OpenSSL's error queue in words, for the modules built on it (ca_openssl.c,
 * tls_openssl.c): one taker, so that every failure reads alike in the log
 * and no error is left queued for the next, unrelated call to find.
 */
#ifndef KP_OSSL_ERROR_H
#define KP_OSSL_ERROR_H

#include <stddef.h>
#include <stdio.h>

#include <openssl/err.h>

/* "what: reason" for the newest error on the queue (or what alone), and the queue emptied. */
static inline void
ossl_take_error(char *out, size_t len, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	snprintf(out, len, "%s%s%s", what, reason ? ": " : "", reason ? reason : "");
	ERR_clear_error();
}

#endif
