/*
 * Proxy authentication with the Basic scheme (RFC 9110 11.7, RFC 7617):
 * the users of --auth-file, checked against a request's Proxy-Authorization
 * field. Credentials never appear on the command line, where ps(1) would
 * show them.
 *
 * A user's password is kept plain or as a crypt(3) hash. Plain ones are
 * compared on the loop; a hash costs milliseconds by design, so it is
 * checked on a worker thread and the verdict comes back through the loop,
 * as a name lookup's does (dns.h). Credentials that passed are remembered
 * for a minute, by a keyed digest; an address that keeps sending wrong ones
 * is turned away at once for a while, without a hash being computed.
 */
#ifndef KP_AUTH_H
#define KP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <ev.h>

#include "kp/list.h"

struct auth;
struct auth_job;
struct auth_waiter;

/* The realm in every challenge. */
#define AUTH_REALM "keepalive-proxy"

/* Credentials that passed are taken again without a check for this long. */
#define AUTH_CACHE_SECONDS 60.0
/* This many wrong credentials from one address within the window ... */
#define AUTH_FAILURES_MAX 10
/* ... and that address is refused at once until the window, counted from its first, ends. */
#define AUTH_FAILURE_WINDOW 60.0
/* Hash checks one address may have waiting or running at a time. */
#define AUTH_JOBS_PER_ADDRESS 4
/* Hash checks waiting or running, from every address together. */
#define AUTH_JOBS_MAX 32

/*
 * Reads path: one "user:password" a line (the password may hold colons;
 * blank lines and lines starting with # are skipped). A password of the
 * form $id$... is a crypt(3) hash: $2a$, $2b$, $2y$ (bcrypt, htpasswd -B),
 * $5$ and $6$ (SHA-256 and SHA-512 crypt, openssl passwd -5 or -6); any
 * other id is refused with the line named. NULL on failure, with the reason
 * in err.
 */
struct auth *auth_load(const char *path, char *err, size_t errlen);
/* Jobs still running for a freed auth deliver their verdict to their waiters all the same. */
void auth_free(struct auth *a);
unsigned auth_users(const struct auth *a);
/* Users whose password is kept as a hash. */
unsigned auth_hashed_users(const struct auth *a);

/* Is path readable by every user? (Worth a warning, not a refusal.) */
bool auth_file_exposed(const char *path);

enum auth_verdict {
	AUTH_GRANTED,   /* the credentials are one of the file's */
	AUTH_REFUSED,   /* none, malformed or wrong */
	AUTH_LIMITED,   /* too many wrong ones or checks from this address lately: not checked */
	AUTH_BUSY,      /* a hash was to be checked but AUTH_JOBS_MAX are waiting already */
	AUTH_PENDING,   /* a hash is being checked: the waiter's done() will be called */
};

/* From the waiter's loop, never from inside auth_check(). */
typedef void (*auth_done_fn)(struct auth_waiter *w, bool granted);

/* Embedded in whoever waits; cancel it before freeing that object. */
struct auth_waiter {
	struct ev_loop *loop;           /* where done() is called; set by the owner */
	auth_done_fn done;
	struct auth_job *job;           /* NULL when not waiting */
	struct kp_list link;            /* in the job's waiters while waiting */
};

/*
 * Do the Proxy-Authorization value (field value only, not NUL-terminated;
 * NULL: no field) and the client address carry one of the file's
 * credentials? now is the loop's time. Plain passwords are compared, every
 * one, in time that does not depend on where the bytes differ. A hash is
 * checked on the worker thread when w is given (AUTH_PENDING), here and now
 * when it is NULL. Only the cache and the counts of failures change: the
 * users stay as read.
 */
enum auth_verdict auth_check(const struct auth *a, const char *value, size_t len,
                             const struct sockaddr *client, double now, struct auth_waiter *w);
/* The waiter's done() will not be called; the check runs on for whoever else waits. */
void auth_cancel(struct auth_waiter *w);

#endif
