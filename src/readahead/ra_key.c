#include "kp/ra_key.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "kp/hls.h"
#include "kp/table.h"

struct key_feed {
	uint32_t hash;
};

static void
hash_part(void *arg, const char *part, size_t len)
{
	struct key_feed *f = arg;

	f->hash = table_hash_more(f->hash, part, len);
}

uint32_t
ra_key_hash(const struct ra_key *k)
{
	struct key_feed f = {table_hash_more(TABLE_HASH_START, &k->family, 1)};

	f.hash = table_hash_more(f.hash, k->addr, sizeof(k->addr));
	f.hash = table_hash_more(f.hash, k->dispatch_key, k->dispatch_key_len);
	f.hash = table_hash_more(f.hash, "\n", 1);
	hls_cmcd_kept(k->path, k->path_len, hash_part, &f);
	return f.hash;
}

/* The kept parts of one path, compared in turn with another path held whole. */
struct path_match {
	const char *held;
	size_t len, at;
	bool same;
};

static void
match_part(void *arg, const char *part, size_t len)
{
	struct path_match *m = arg;

	if (!m->same || len > m->len - m->at || memcmp(m->held + m->at, part, len) != 0) {
		m->same = false;
		return;
	}
	m->at += len;
}

/* The path of a, CMCD left out, against b's path (b: a stored key, which has none). */
static bool
same_path(const struct ra_key *a, const struct ra_key *b)
{
	struct path_match m = {b->path, b->path_len, 0, true};

	hls_cmcd_kept(a->path, a->path_len, match_part, &m);
	return m.same && m.at == m.len;
}

bool
ra_key_same_client(const struct ra_key *a, const struct ra_key *b)
{
	return a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0 &&
	       a->dispatch_key_len == b->dispatch_key_len &&
	       memcmp(a->dispatch_key, b->dispatch_key, a->dispatch_key_len) == 0;
}

bool
ra_key_equal(const struct ra_key *a, const struct ra_key *b)
{
	return ra_key_same_client(a, b) && same_path(a, b);
}

static void
set_address(uint8_t *family, uint8_t addr[16], const struct sockaddr *sa)
{
	memset(addr, 0, 16);
	*family = (uint8_t)sa->sa_family;
	if (sa->sa_family == AF_INET6)
		memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	else if (sa->sa_family == AF_INET)
		memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
}

void
ra_key_make(struct ra_key *k, const struct ra_ask *ask, const char *path, size_t path_len)
{
	set_address(&k->family, k->addr, ask->client);
	k->dispatch_key = ask->dispatch_key;
	k->dispatch_key_len = strlen(ask->dispatch_key);
	k->path = path;
	k->path_len = path_len;
}

struct path_copy {
	char *out;
	size_t len;
};

static void
copy_part(void *arg, const char *part, size_t len)
{
	struct path_copy *c = arg;

	memcpy(c->out + c->len, part, len);
	c->len += len;
}

size_t
ra_key_kept_size(const struct ra_key *k, size_t size)
{
	return size + k->dispatch_key_len + k->path_len;
}

void *
ra_key_keep(const struct ra_key *k, size_t size, size_t key_offset)
{
	char *record;
	struct ra_key *stored;
	struct path_copy c;

	if (k->path_len > RA_KEY_PATH_MAX || !(record = calloc(1, ra_key_kept_size(k, size))))
		return NULL;
	stored = (struct ra_key *)(record + key_offset);
	*stored = *k;
	memcpy(record + size, k->dispatch_key, k->dispatch_key_len);
	stored->dispatch_key = record + size;
	c.out = record + size + k->dispatch_key_len;
	c.len = 0;
	hls_cmcd_kept(k->path, k->path_len, copy_part, &c);
	stored->path = c.out;
	stored->path_len = c.len;
	return record;
}
