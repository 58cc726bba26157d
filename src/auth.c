#include "kp/auth.h"

#ifndef KP_CRYPT
#define KP_CRYPT 0
#endif
#if KP_CRYPT
#include <crypt.h>
#else
/* No crypt(3) in this libc: hash_problem() refuses every hash at load time. */
struct crypt_data {
	char unused;
};

static char *
crypt_r(const char *password, const char *hash, struct crypt_data *cd)
{
	(void)password;
	(void)hash;
	(void)cd;
	return NULL;
}
#endif
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "kp/stats.h"

/* Longest credential pair accepted; a field longer than this is simply wrong. */
#define AUTH_MAX_PAIR 1024
/*
 * Credentials that passed, by digest, and addresses with failures or checks
 * under way; each is looked for in AUTH_PROBES slots from where its hash
 * points. A full cache forgets the credentials closest to expiring, which
 * costs one more check.
 */
#define AUTH_CACHE_SLOTS 64
#define AUTH_ADDRESS_SLOTS 256
#define AUTH_PROBES 4

struct entry {
	char *pair;          /* "user:password" or "user:hash", as the line had it */
	size_t user_len;     /* bytes before the colon */
	bool hashed;         /* the password is a crypt(3) hash */
};

/* One client as the limits count it: an IPv4 address, or an IPv6 /64 (one host's usual share). */
struct address_key {
	uint8_t family;      /* 4, 6, or 0 when unknown */
	uint8_t bytes[8];
};

struct address_slot {
	struct address_key who;
	bool used;
	unsigned failures;   /* wrong credentials since window_start */
	double window_start;
	unsigned jobs;       /* hash checks waiting or running for it */
};

struct cache_slot {
	uint64_t digest[2];
	double expires;      /* 0: empty */
};

/*
 * What checking remembers, apart from the users, which stay as read: the
 * credentials that passed and the addresses that failed. A reload starts
 * afresh with both.
 *
 * A credential that passed is remembered by a 128-bit SipHash of the
 * decoded user:password under a key drawn at load, never by the password
 * itself: memory that outlives the request then holds nothing a reader
 * could send. The key keeps anyone from making two credentials that share
 * a digest, and it needs no TLS library.
 */
struct auth_memory {
	uint64_t key[4];     /* two SipHash-2-4 keys */
	struct cache_slot cache[AUTH_CACHE_SLOTS];
	struct address_slot addresses[AUTH_ADDRESS_SLOTS];
};

struct auth {
	struct entry *entries;
	unsigned count;
	unsigned hashed;
	struct auth_memory *memory;   /* changes while the users stay const */
};

/*
 * A hash check. The file's hash and the password are copied: the auth they
 * came from may be replaced (SIGHUP) while the check runs.
 */
struct auth_job {
	uint64_t digest[2];
	struct address_key who;
	const struct auth *owner;        /* loop only; NULL once that auth was freed */
	char *hash;
	char *password;
	bool granted;                    /* written by the worker, read once it is done */
	struct kp_list waiters;          /* loop only; the latest to ask first */
	struct auth_job *queue_next;     /* job or done queue; under the lock */
	struct kp_list inflight;         /* in worker.inflight; loop only */
};

/*
 * One worker thread for every hash: checks queue behind each other, and
 * the limits above keep any one address from filling the queue. It starts
 * with the first hash to check and stops with the last auth freed.
 */
static struct {
	struct ev_loop *loop;
	ev_async wakeup;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct auth_job *jobs, *jobs_tail;   /* under lock */
	struct auth_job *done;               /* under lock */
	bool stopping;                       /* under lock */
	bool running;                        /* loop only: the thread exists */
	struct kp_list inflight;             /* loop only: jobs not yet delivered, newest first */
	unsigned njobs;                      /* loop only: how many */
	unsigned auths;                      /* loop only: auths loaded and not freed */
} worker = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.inflight = KP_LIST_INIT(worker.inflight),
};

static void worker_stop(void);

/* ---- SipHash-2-4 ----------------------------------------------------------- */

#define ROTL64(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static void
sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL64(v[1], 13) ^ v[0];
	v[0] = ROTL64(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL64(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = ROTL64(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = ROTL64(v[1], 17) ^ v[2];
	v[2] = ROTL64(v[2], 32);
}

static void
sip_absorb(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

static uint64_t
siphash(const uint64_t key[2], const uint8_t *p, size_t len)
{
	uint64_t v[4] = {
		key[0] ^ 0x736f6d6570736575ULL, key[1] ^ 0x646f72616e646f6dULL,
		key[0] ^ 0x6c7967656e657261ULL, key[1] ^ 0x7465646279746573ULL,
	};
	uint64_t m = (uint64_t)len << 56;
	size_t whole = len & ~(size_t)7;

	for (size_t i = 0; i < whole; i += 8) {
		uint64_t word = 0;

		for (int b = 0; b < 8; b++)
			word |= (uint64_t)p[i + (size_t)b] << (8 * b);
		sip_absorb(v, word);
	}
	for (size_t b = 0; b < (len & 7); b++)
		m |= (uint64_t)p[whole + b] << (8 * b);
	sip_absorb(v, m);
	v[2] ^= 0xff;
	for (int r = 0; r < 4; r++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static void
digest_of(const struct auth_memory *m, const uint8_t *p, size_t len, uint64_t out[2])
{
	out[0] = siphash(&m->key[0], p, len);
	out[1] = siphash(&m->key[2], p, len);
}

/* ---- loading --------------------------------------------------------------- */

void
auth_free(struct auth *a)
{
	if (!a)
		return;
	/* A check under way delivers to its waiters, but no longer into this memory. */
	KP_LIST_EACH(j, &worker.inflight, struct auth_job, inflight)
		if (j->owner == a)
			j->owner = NULL;
	for (unsigned i = 0; i < a->count; i++) {
		/* Do not leave passwords behind in freed memory. */
		explicit_bzero(a->entries[i].pair, strlen(a->entries[i].pair));
		free(a->entries[i].pair);
	}
	free(a->entries);
	if (a->memory) {
		explicit_bzero(a->memory, sizeof(*a->memory));
		free(a->memory);
		/* Only a loaded auth counts, and one that failed to load has no memory. */
		if (--worker.auths == 0 && worker.running)
			worker_stop();
	}
	free(a);
}

unsigned
auth_users(const struct auth *a)
{
	return a ? a->count : 0;
}

unsigned
auth_hashed_users(const struct auth *a)
{
	return a ? a->hashed : 0;
}

/* A password of the form $id$...: the file holds its hash, not the password. */
static bool
looks_hashed(const char *value)
{
	size_t id = 0;

	if (value[0] != '$')
		return false;
	while (isalnum((unsigned char)value[1 + id]))
		id++;
	return id > 0 && value[1 + id] == '$';
}

/*
 * NULL if crypt(3) can check against the hash as written; else why not.
 * Only methods both glibc's libxcrypt and musl offer are taken, and their
 * lengths are checked now: a hash cut short would refuse its user forever,
 * silently.
 */
static const char *
hash_problem(const char *h)
{
	const char *last = strrchr(h, '$');

	if (!KP_CRYPT)
		return "this build has no crypt(3) (its C library lacks it): plain passwords only";
	if (strncmp(h, "$2a$", 4) == 0 || strncmp(h, "$2b$", 4) == 0 ||
	    strncmp(h, "$2y$", 4) == 0) {
		if (strlen(h) != 60 || !isdigit((unsigned char)h[4]) ||
		    !isdigit((unsigned char)h[5]) || h[6] != '$')
			return "a bcrypt hash is $2y$, two digits of cost, $ and 53 characters";
		return NULL;
	}
	if (strncmp(h, "$5$", 3) == 0)
		return strlen(last + 1) == 43 ? NULL
		                              : "a $5$ hash ends in 43 characters after its last $";
	if (strncmp(h, "$6$", 3) == 0)
		return strlen(last + 1) == 86 ? NULL
		                              : "a $6$ hash ends in 86 characters after its last $";
	return "only $2a$, $2b$, $2y$ (htpasswd -B), $5$ and $6$ (openssl passwd -5, -6) hashes "
	       "are supported";
}

static int
add_entry(struct auth *a, const char *line, size_t len, size_t user_len, bool hashed)
{
	struct entry *grown = realloc(a->entries, (a->count + 1) * sizeof(*grown));

	if (!grown)
		return -1;
	a->entries = grown;
	if (!(a->entries[a->count].pair = strndup(line, len)))
		return -1;
	a->entries[a->count].user_len = user_len;
	a->entries[a->count].hashed = hashed;
	a->count++;
	a->hashed += hashed;
	return 0;
}

/* Parses one line into a; 1 if it was skipped, 0 if added, -1 with err. */
static int
parse_line(struct auth *a, char *line, unsigned lineno, char *err, size_t errlen)
{
	size_t len = strcspn(line, "\r\n");
	const char *colon, *problem;
	bool hashed;

	line[len] = '\0';
	if (len == 0 || line[0] == '#')
		return 1;
	colon = strchr(line, ':');
	if (!colon || colon == line) {
		snprintf(err, errlen, "line %u: expected user:password", lineno);
		return -1;
	}
	if (len > AUTH_MAX_PAIR) {
		snprintf(err, errlen, "line %u: longer than %d bytes", lineno, AUTH_MAX_PAIR);
		return -1;
	}
	hashed = looks_hashed(colon + 1);
	if (hashed && (problem = hash_problem(colon + 1))) {
		snprintf(err, errlen, "line %u: %s", lineno, problem);
		return -1;
	}
	if (add_entry(a, line, len, (size_t)(colon - line), hashed) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

struct auth *
auth_load(const char *path, char *err, size_t errlen)
{
	struct auth *a = calloc(1, sizeof(*a));
	FILE *f = fopen(path, "re");
	char line[AUTH_MAX_PAIR + 4];
	unsigned lineno = 0;

	if (!a || !f) {
		snprintf(err, errlen, "%s", a ? strerror(errno) : "out of memory");
		goto fail;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "line %u: longer than %d bytes", lineno, AUTH_MAX_PAIR);
			goto fail;
		}
		if (parse_line(a, line, lineno, err, errlen) < 0)
			goto fail;
	}
	explicit_bzero(line, sizeof(line));
	if (ferror(f)) {
		snprintf(err, errlen, "%s", strerror(errno));
		goto fail;
	}
	fclose(f);
	f = NULL;
	if (a->count == 0) {
		snprintf(err, errlen, "no user:password line");
		goto fail;
	}
	if (!(a->memory = calloc(1, sizeof(*a->memory)))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (getrandom(a->memory->key, sizeof(a->memory->key), 0) != sizeof(a->memory->key)) {
		snprintf(err, errlen, "no random bytes for the credential cache: %s",
		         strerror(errno));
		goto fail;
	}
	worker.auths++;
	return a;
fail:
	explicit_bzero(line, sizeof(line));
	if (f)
		fclose(f);
	if (a && a->memory) {
		free(a->memory);
		a->memory = NULL;
	}
	auth_free(a);
	return NULL;
}

bool
auth_file_exposed(const char *path)
{
	struct stat st;

	/* Group read stays allowed: it is how a dropped -u user gets to read it again. */
	return stat(path, &st) == 0 && (st.st_mode & S_IROTH);
}

static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Standard base64 with padding into out; the decoded length, or -1. */
static ssize_t
b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
	size_t n = 0, pad = 0;
	uint32_t acc = 0;
	unsigned bits = 0;

	if (len == 0 || len % 4 != 0)
		return -1;
	if (in[len - 1] == '=')
		pad++;
	if (in[len - 2] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++) {
		int v = b64_value((unsigned char)in[i]);

		if (v < 0)
			return -1;
		/* Only the low bits matter; the wrap of the high ones is harmless. */
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (ssize_t)n;
}

/* Equal, with no early exit on the first difference. */
static bool
same_bytes(const uint8_t *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen > blen ? alen : blen;
	uint8_t diff = alen != blen;

	for (size_t i = 0; i < n; i++)
		diff |= (uint8_t)((i < alen ? a[i] : 0) ^ (i < blen ? (uint8_t)b[i] : 0));
	return diff == 0;
}

/* "Basic" (any case), spaces, the token: its decoded length, or -1. */
static ssize_t
decode_basic(const char *value, size_t len, uint8_t *out, size_t cap)
{
	if (len < 6 || strncasecmp(value, "Basic", 5) != 0 || (value[5] != ' ' && value[5] != '\t'))
		return -1;
	value += 5;
	len -= 5;
	while (len && (*value == ' ' || *value == '\t'))
		value++, len--;
	while (len && (value[len - 1] == ' ' || value[len - 1] == '\t'))
		len--;
	return b64_decode(value, len, out, cap);
}

/* ---- what checking remembers ------------------------------------------------ */

static struct address_key
address_key_of(const struct sockaddr *sa)
{
	struct address_key k;

	memset(&k, 0, sizeof(k));
	if (sa && sa->sa_family == AF_INET) {
		k.family = 4;
		memcpy(k.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(in6)) {
			k.family = 4;
			memcpy(k.bytes, in6->s6_addr + 12, 4);
		} else {
			k.family = 6;
			memcpy(k.bytes, in6->s6_addr, 8);
		}
	}
	return k;
}

static bool
same_address(const struct address_key *a, const struct address_key *b)
{
	return a->family == b->family && memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

/* Nothing to remember about it: no check under way and no failure in the window. */
static bool
address_idle(const struct address_slot *s, double now)
{
	return s->jobs == 0 && (s->failures == 0 || now - s->window_start >= AUTH_FAILURE_WINDOW);
}

/*
 * The slot of who, taken if it has none and one of its probes is idle.
 * NULL when every probe is busy with other addresses: keyed by the secret
 * key, so nobody can aim addresses at one set of probes.
 */
static struct address_slot *
address_slot(struct auth_memory *m, const struct address_key *who, double now, bool take)
{
	unsigned at = (unsigned)(siphash(&m->key[0], (const uint8_t *)who, sizeof(*who)) %
	                         AUTH_ADDRESS_SLOTS);
	struct address_slot *idle = NULL;

	for (unsigned i = 0; i < AUTH_PROBES; i++) {
		struct address_slot *s = &m->addresses[(at + i) % AUTH_ADDRESS_SLOTS];

		if (s->used && same_address(&s->who, who))
			return s;
		if (!idle && (!s->used || address_idle(s, now)))
			idle = s;
	}
	if (!take || !idle)
		return NULL;
	memset(idle, 0, sizeof(*idle));
	idle->used = true;
	idle->who = *who;
	return idle;
}

static bool
address_limited(const struct address_slot *s, double now)
{
	return s && s->failures >= AUTH_FAILURES_MAX && now - s->window_start < AUTH_FAILURE_WINDOW;
}

static void
note_failure(struct address_slot *s, double now)
{
	if (!s)
		return;
	if (s->failures == 0 || now - s->window_start >= AUTH_FAILURE_WINDOW) {
		s->failures = 0;
		s->window_start = now;
	}
	s->failures++;
}

static bool
cache_has(const struct auth_memory *m, const uint64_t digest[2], double now)
{
	for (unsigned i = 0; i < AUTH_PROBES; i++) {
		const struct cache_slot *c = &m->cache[(digest[0] + i) % AUTH_CACHE_SLOTS];

		if (c->expires > now && c->digest[0] == digest[0] && c->digest[1] == digest[1])
			return true;
	}
	return false;
}

/* Into its own slot among the probes, or the one that would expire first. */
static void
cache_store(struct auth_memory *m, const uint64_t digest[2], double now)
{
	struct cache_slot *c = NULL;

	for (unsigned i = 0; i < AUTH_PROBES; i++) {
		struct cache_slot *s = &m->cache[(digest[0] + i) % AUTH_CACHE_SLOTS];

		if (s->digest[0] == digest[0] && s->digest[1] == digest[1]) {
			c = s;
			break;
		}
		if (!c || s->expires < c->expires)
			c = s;
	}
	c->digest[0] = digest[0];
	c->digest[1] = digest[1];
	c->expires = now + AUTH_CACHE_SECONDS;
}

/* ---- hashes, on the worker ----------------------------------------------------- */

static bool
hash_matches(struct crypt_data *cd, const char *password, const char *hash)
{
	const char *out = crypt_r(password, hash, cd);

	/* Failure is NULL or a string starting with '*', which no stored hash does. */
	return out && out[0] != '*' &&
	       same_bytes((const uint8_t *)out, strlen(out), hash, strlen(hash));
}

static void *
worker_main(void *arg)
{
	/* libxcrypt's is 32 KiB, and crypt_r() reuses it: one for the thread's life. */
	struct crypt_data *cd = calloc(1, sizeof(*cd));

	(void)arg;
	pthread_mutex_lock(&worker.lock);
	for (;;) {
		struct auth_job *j;

		while (!worker.jobs && !worker.stopping)
			pthread_cond_wait(&worker.work, &worker.lock);
		if (worker.stopping)
			break;
		j = worker.jobs;
		worker.jobs = j->queue_next;
		if (!worker.jobs)
			worker.jobs_tail = NULL;
		pthread_mutex_unlock(&worker.lock);

		j->granted = cd && hash_matches(cd, j->password, j->hash);

		pthread_mutex_lock(&worker.lock);
		j->queue_next = worker.done;
		worker.done = j;
		ev_async_send(worker.loop, &worker.wakeup);
	}
	pthread_mutex_unlock(&worker.lock);
	if (cd) {
		explicit_bzero(cd, sizeof(*cd));
		free(cd);
	}
	return NULL;
}

static void
job_free(struct auth_job *j)
{
	explicit_bzero(j->password, strlen(j->password));
	free(j->password);
	free(j->hash);
	free(j);
}

static void
job_attach(struct auth_job *j, struct auth_waiter *w)
{
	w->job = j;
	kp_list_insert_head(&j->waiters, &w->link);
}

/* A verdict came back: into the owner's memory if it is still there, then to every waiter. */
static void
deliver(struct auth_job *j)
{
	struct auth_waiter *w;

	kp_list_unlink(&j->inflight);
	worker.njobs--;
	kp_stats.auth_jobs = worker.njobs;
	kp_stats.auth_hash_checks++;
	if (j->owner) {
		struct auth_memory *m = j->owner->memory;
		double now = ev_now(worker.loop);
		struct address_slot *s = address_slot(m, &j->who, now, false);

		if (s && s->jobs)
			s->jobs--;
		if (j->granted)
			cache_store(m, j->digest, now);
		else
			note_failure(s, now);
	}
	/* A callback may cancel another waiter, so unlink each before calling it. */
	while ((w = KP_LIST_FIRST(&j->waiters, struct auth_waiter, link)) != NULL) {
		kp_list_unlink(&w->link);
		w->job = NULL;
		w->done(w, j->granted);
	}
	job_free(j);
}

static void
wakeup_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct auth_job *done;

	(void)loop;
	(void)w;
	(void)revents;
	pthread_mutex_lock(&worker.lock);
	done = worker.done;
	worker.done = NULL;
	pthread_mutex_unlock(&worker.lock);
	while (done) {
		struct auth_job *next = done->queue_next;

		deliver(done);
		done = next;
	}
}

/* The first hash to check starts the thread; -1 if it cannot be, or loop is another one. */
static int
worker_start(struct ev_loop *loop)
{
	if (worker.running)
		return worker.loop == loop ? 0 : -1;
	worker.loop = loop;
	worker.stopping = false;
	ev_async_init(&worker.wakeup, wakeup_cb);
	ev_async_start(loop, &worker.wakeup);
	if (pthread_create(&worker.thread, NULL, worker_main, NULL) != 0) {
		ev_async_stop(loop, &worker.wakeup);
		return -1;
	}
	worker.running = true;
	return 0;
}

/*
 * With the last auth: the thread finishes the hash in hand and goes; the
 * checks left undelivered are dropped with any waiter still on them.
 */
static void
worker_stop(void)
{
	struct auth_job *j;
	struct auth_waiter *w;

	pthread_mutex_lock(&worker.lock);
	worker.stopping = true;
	pthread_cond_broadcast(&worker.work);
	pthread_mutex_unlock(&worker.lock);
	pthread_join(worker.thread, NULL);
	worker.jobs = worker.jobs_tail = worker.done = NULL;
	while ((j = KP_LIST_FIRST(&worker.inflight, struct auth_job, inflight)) != NULL) {
		kp_list_unlink(&j->inflight);
		while ((w = KP_LIST_FIRST(&j->waiters, struct auth_waiter, link)) != NULL) {
			kp_list_unlink(&w->link);
			w->job = NULL;
		}
		job_free(j);
	}
	worker.njobs = 0;
	kp_stats.auth_jobs = 0;
	ev_async_stop(worker.loop, &worker.wakeup);
	worker.running = false;
}

/* Queues a check of the password in cred (user:password) against e's hash. */
static enum auth_verdict
start_job(const struct auth *a, const struct entry *e, const uint8_t *cred, size_t len,
          const uint64_t digest[2], struct address_slot *s, struct auth_waiter *w)
{
	size_t skip = e->user_len + 1;
	struct auth_job *j;

	/* The same credentials again meanwhile (a browser's parallel connections): one hash. */
	KP_LIST_EACH(o, &worker.inflight, struct auth_job, inflight)
		if (o->owner == a && o->digest[0] == digest[0] && o->digest[1] == digest[1]) {
			job_attach(o, w);
			return AUTH_PENDING;
		}
	if (!s || worker.njobs >= AUTH_JOBS_MAX) {
		kp_stats.auth_busy++;
		return AUTH_BUSY;
	}
	/* More guesses at once than anyone types: each counts as a wrong one. */
	if (s->jobs >= AUTH_JOBS_PER_ADDRESS) {
		note_failure(s, ev_now(w->loop));
		kp_stats.auth_limited++;
		return AUTH_LIMITED;
	}
	if (worker_start(w->loop) < 0 || !(j = calloc(1, sizeof(*j))))
		return AUTH_BUSY;
	j->hash = strdup(e->pair + skip);
	j->password = strndup((const char *)cred + skip, len - skip);
	if (!j->hash || !j->password) {
		free(j->hash);
		free(j->password);
		free(j);
		return AUTH_BUSY;
	}
	j->digest[0] = digest[0];
	j->digest[1] = digest[1];
	j->who = s->who;
	j->owner = a;
	s->jobs++;
	kp_list_init(&j->waiters);
	kp_list_insert_head(&worker.inflight, &j->inflight);
	worker.njobs++;
	kp_stats.auth_jobs = worker.njobs;
	if (kp_stats.auth_jobs > kp_stats.auth_jobs_peak)
		kp_stats.auth_jobs_peak = kp_stats.auth_jobs;
	job_attach(j, w);
	pthread_mutex_lock(&worker.lock);
	if (worker.jobs_tail)
		worker.jobs_tail->queue_next = j;
	else
		worker.jobs = j;
	worker.jobs_tail = j;
	pthread_cond_signal(&worker.work);
	pthread_mutex_unlock(&worker.lock);
	return AUTH_PENDING;
}

/* Here and now, for a caller without a loop: the same check the worker makes. */
static bool
check_here(const struct entry *e, const uint8_t *cred, size_t len)
{
	struct crypt_data *cd = calloc(1, sizeof(*cd));
	char *password = strndup((const char *)cred + e->user_len + 1, len - e->user_len - 1);
	bool ok = cd && password && hash_matches(cd, password, e->pair + e->user_len + 1);

	if (password) {
		explicit_bzero(password, strlen(password));
		free(password);
	}
	if (cd) {
		explicit_bzero(cd, sizeof(*cd));
		free(cd);
	}
	return ok;
}

/* ---- the check ---------------------------------------------------------------------- */

/* The decoded user:password against every plain entry, with no early exit. */
static bool
plain_match(const struct auth *a, const uint8_t *cred, size_t len)
{
	bool ok = false;

	for (unsigned i = 0; i < a->count; i++)
		if (!a->entries[i].hashed)
			ok |= same_bytes(cred, len, a->entries[i].pair, strlen(a->entries[i].pair));
	return ok;
}

/*
 * The hashed entry of cred's user, if any. Whether a user has a hash shows
 * in the time a wrong password takes; a decoy hash for unknown users would
 * hide it at the cost of worker time spent on exactly the guessers.
 */
static const struct entry *
hashed_entry(const struct auth *a, const uint8_t *cred, size_t len)
{
	for (unsigned i = 0; i < a->count; i++) {
		const struct entry *e = &a->entries[i];

		if (e->hashed && e->user_len < len && cred[e->user_len] == ':' &&
		    memcmp(cred, e->pair, e->user_len) == 0)
			return e;
	}
	return NULL;
}

static enum auth_verdict
judge(const struct auth *a, const uint8_t *cred, ssize_t n, const struct sockaddr *client,
      double now, struct auth_waiter *w)
{
	struct auth_memory *m = a->memory;
	struct address_key who = address_key_of(client);
	struct address_slot *s;
	const struct entry *e;
	uint64_t digest[2] = {0, 0};
	bool ok;

	if (n > 0) {
		digest_of(m, cred, (size_t)n, digest);
		/* First: a user who passed keeps going even from an address a guesser shares. */
		if (cache_has(m, digest, now)) {
			kp_stats.auth_cache_hits++;
			return AUTH_GRANTED;
		}
	}
	s = address_slot(m, &who, now, true);
	if (address_limited(s, now)) {
		kp_stats.auth_limited++;
		return AUTH_LIMITED;
	}
	if (n <= 0) {
		note_failure(s, now);
		return AUTH_REFUSED;
	}
	if (plain_match(a, cred, (size_t)n)) {
		cache_store(m, digest, now);
		return AUTH_GRANTED;
	}
	/* crypt(3) reads a C string: a NUL inside would cut the password short. */
	e = memchr(cred, '\0', (size_t)n) ? NULL : hashed_entry(a, cred, (size_t)n);
	if (!e) {
		note_failure(s, now);
		return AUTH_REFUSED;
	}
	if (w)
		return start_job(a, e, cred, (size_t)n, digest, s, w);
	kp_stats.auth_hash_checks++;
	ok = check_here(e, cred, (size_t)n);
	if (ok)
		cache_store(m, digest, now);
	else
		note_failure(s, now);
	return ok ? AUTH_GRANTED : AUTH_REFUSED;
}

enum auth_verdict
auth_check(const struct auth *a, const char *value, size_t len, const struct sockaddr *client,
           double now, struct auth_waiter *w)
{
	uint8_t decoded[AUTH_MAX_PAIR];
	enum auth_verdict v;

	if (!a)
		return AUTH_GRANTED;
	/* No field is a browser's first try, not a failure: it sends them after the 407. */
	if (!value)
		return AUTH_REFUSED;
	v = judge(a, decoded, decode_basic(value, len, decoded, sizeof(decoded)), client, now, w);
	explicit_bzero(decoded, sizeof(decoded));
	return v;
}

void
auth_cancel(struct auth_waiter *w)
{
	kp_list_unlink(&w->link);
	w->job = NULL;
}
