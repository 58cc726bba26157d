/*
 * Host patterns, as --intercept and --split take them: an exact host name
 * ("cdn.example.com"), a wildcard for every name below a domain
 * ("*.example.com": any depth, not the domain itself), or an IP literal
 * (IPv6 without brackets). Names compare case-blind and without a trailing
 * dot. Plain string and address work, in every build (TLS or not).
 */
#ifndef KP_HOSTPATTERN_H
#define KP_HOSTPATTERN_H

#include <stdbool.h>

/* NULL: pattern is valid; otherwise what is wrong with it. */
const char *host_pattern_problem(const char *pattern);

/* Does host (as a request named it, IPv6 without brackets) match pattern? */
bool host_pattern_match(const char *pattern, const char *host);

/*
 * The same when both are known to be names, not addresses (the caller
 * parsed them): no address is parsed again.
 */
bool host_name_pattern_match(const char *pattern, const char *host);

/* ... any of them? */
bool host_patterns_match(const char *const *patterns, unsigned n, const char *host);

#endif
