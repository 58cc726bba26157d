/*
 * Read-ahead's keys (ra_store.h has the glossary): what a piece, a series
 * or a playlist is held under. A key is a value, not a formatted string: a
 * client address, a dispatch key and a path, hashed with the project's one
 * hash and compared field by field, its path's CMCD query parameters left
 * out wherever it is hashed, compared or kept.
 */
#ifndef KP_RA_KEY_H
#define KP_RA_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "kp/http.h"

/* A client's request as read-ahead sees it. */
struct ra_ask {
	const struct sockaddr *client;     /* its address; the port does not matter */
	const char *dispatch_key;          /* the dispatch key it went under */
	const struct http_target *target;  /* host, port and key for a fetch of our own */
	bool https;                        /* intercepted: to the origin over TLS */
	bool restricted;                   /* a client beyond this machine */
};

/*
 * A key: compared field by field, hashed with the project's one hash
 * (table_hash_more). The path is as sent; its CMCD query parameters are
 * left out wherever the key is hashed or compared (hls_cmcd_kept), since a
 * player sends other values of them with every request for one object.
 * The private fields that must match (Authorization, Cookie, and whatever
 * the response's Vary names) are not in the key: serving compares them, in
 * full, between the client's request and the proxy's, so that a piece
 * fetched with other credentials is not served and is counted (unsafe)
 * rather than missed unseen; it stays for the client it was fetched for.
 */
struct ra_key {
	uint8_t family;                    /* AF_INET or AF_INET6 */
	uint8_t addr[16];                  /* the client's address, IPv4 in the first 4 bytes */
	const char *dispatch_key;
	size_t dispatch_key_len;
	const char *path;                  /* origin-form request-target */
	size_t path_len;
};

/*
 * A longer path is never kept: nothing is predicted, held or remembered for
 * it. Media URLs run to a kilobyte or two; every record keeps its path.
 */
#define RA_KEY_PATH_MAX 4096

/*
 * A record of size bytes for a table keyed by ra_key (read-ahead's shelves,
 * series and playlists), zeroed, with k stored at key_offset: its strings
 * copied after the record, the path without CMCD. NULL when memory is
 * exhausted or the path is longer than RA_KEY_PATH_MAX; free() frees it all.
 */
void *ra_key_keep(const struct ra_key *k, size_t size, size_t key_offset);
/* The bytes ra_key_keep(k, size, ...) allocates, at most: what its share is charged. */
size_t ra_key_kept_size(const struct ra_key *k, size_t size);

/* The key of ask's request for path. */
void ra_key_make(struct ra_key *k, const struct ra_ask *ask, const char *path, size_t path_len);
/* Do two keys name the same thing? b is a kept key (ra_key_keep). */
bool ra_key_equal(const struct ra_key *a, const struct ra_key *b);
/* Are they of one client, under one dispatch key (their paths aside)? */
bool ra_key_same_client(const struct ra_key *a, const struct ra_key *b);
uint32_t ra_key_hash(const struct ra_key *k);

#endif
