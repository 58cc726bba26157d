/*
 * Proxy authentication with the Basic scheme (RFC 9110 11.7, RFC 7617):
 * the user:password pairs of --auth-file, checked against a request's
 * Proxy-Authorization field. Credentials never appear on the command line,
 * where ps(1) would show them.
 */
#ifndef KP_AUTH_H
#define KP_AUTH_H

#include <stdbool.h>
#include <stddef.h>

struct auth;

/* The realm in every challenge. */
#define AUTH_REALM "keepalive-proxy"

/*
 * Reads path: one "user:password" a line (the password may hold colons;
 * blank lines and lines starting with # are skipped). NULL on failure, with
 * the reason in err.
 */
struct auth *auth_load(const char *path, char *err, size_t errlen);
void auth_free(struct auth *a);
unsigned auth_users(const struct auth *a);

/* Is path readable by every user? (Worth a warning, not a refusal.) */
bool auth_file_exposed(const char *path);

/*
 * Does the Proxy-Authorization value (field value only, not NUL-terminated)
 * carry one of the file's credentials? Every pair is compared, in time that
 * does not depend on where the bytes differ.
 */
bool auth_check(const struct auth *a, const char *value, size_t len);

#endif
