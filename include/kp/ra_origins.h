/*
 * What split downloads (ra_split.h) remember of origins, so that one
 * origin's answers shape the next download from it, and one client's
 * request never decides for everybody's:
 *
 *   - a host that refused one connection too many gets one connection for
 *     BACKOFF_SECONDS (backed off);
 *   - a URL that answered a bounded Range with the whole object is not
 *     split for NO_RANGES_SECONDS, and neither is its whole host once
 *     WHOLE_URLS_FOR_HOST of its URLs did and none answered a range with a
 *     206 meanwhile (ranged).
 *
 * Fixed tables, the oldest entry giving way: a host is its pool key
 * ("host:port"), a URL that and a hash of its path.
 */
#ifndef KP_RA_ORIGINS_H
#define KP_RA_ORIGINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "kp/clock.h"
#include "kp/http.h"

/* How long a host that refused a second connection gets only one. */
#define BACKOFF_SECONDS 600.0
/* How long a URL that answered a bounded Range with the whole object is not asked again. */
#define NO_RANGES_SECONDS 600.0
/* Hosts remembered, for each of the two notes; URLs remembered as answering whole. */
#define HOSTS_REMEMBERED 32
#define URLS_REMEMBERED 64
/* A host answers no ranges at all once this many of its URLs answered whole, and none a 206. */
#define WHOLE_URLS_FOR_HOST 3

/* Each note has a table of its own, so that hosts noted for one never push out the other. */
enum host_note {
	HOST_BACKED_OFF,   /* refused more than one connection: one for a while */
	HOST_RANGED,       /* answered a bounded Range with a 206 lately */
	HOST_NOTES,
};

struct host_memo {
	char host[HTTP_KEY_MAX];       /* host:port, the pool key */
	ev_tstamp until;               /* 0: slot free */
};

/* A URL that answered a bounded Range with the whole object: not split for a while. */
struct url_memo {
	char host[HTTP_KEY_MAX];
	uint32_t path_hash;            /* table_hash_more of the path */
	ev_tstamp until;               /* 0: slot free */
};

struct ra_origins {
	struct clock *clock;
	struct host_memo hosts[HOST_NOTES][HOSTS_REMEMBERED];
	struct url_memo urls[URLS_REMEMBERED];
};

/* Empty tables, timed on clock. */
void ra_origins_init(struct ra_origins *o, struct clock *clock);

/* Notes host for seconds; true when it was not noted so already. */
bool ra_origins_note(struct ra_origins *o, const char *host, enum host_note note, double seconds);
/* Is host noted so now? */
bool ra_origins_noted(const struct ra_origins *o, const char *host, enum host_note note);

/* Notes that host's path (len bytes) answered a bounded Range with the whole object. */
void ra_origins_answered_whole(struct ra_origins *o, const char *host, const char *path,
                               size_t len);
/* Does this URL answer ranges whole, as far as is remembered: itself, or enough of its host's? */
bool ra_origins_answers_whole(const struct ra_origins *o, const char *host, const char *path,
                              size_t len);

#endif
