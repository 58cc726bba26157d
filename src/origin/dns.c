#include "kp/dns.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kp/stats.h"
#include "kp/table.h"

/* Two threads: one slow name does not hold up every other lookup. */
#define DNS_THREADS 2
/* Direct-mapped: a collision forgets the older name, which costs one lookup. */
#define DNS_CACHE_SLOTS 64
/* Failures are cached briefly so a broken name does not hammer the resolver. */
#define DNS_NEGATIVE_TTL 5.0

struct dns_query {
	char name[256];
	struct dns_addrs result;             /* written by the thread, read by the loop */
	int error;
	struct kp_list waiters;              /* loop only; the latest to ask first */
	struct dns_query *queue_next;        /* job or done queue; under the lock */
	struct kp_list inflight;             /* in dns.inflight; loop only */
};

struct cache_slot {
	char name[256];
	ev_tstamp expires;
	int error;
	struct dns_addrs addrs;
};

static struct {
	struct ev_loop *loop;
	ev_async wakeup;
	double ttl;
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_cond_t exited;
	struct dns_query *jobs, *jobs_tail;   /* under lock */
	struct dns_query *done;               /* under lock */
	unsigned threads_running;             /* under lock */
	bool stopping;                        /* under lock */
	struct kp_list inflight;              /* loop only: queries not delivered, newest first */
	struct cache_slot *cache;             /* loop only */
	bool started;
} dns;

static void
resolve(struct dns_query *q)
{
	struct addrinfo hints, *res = NULL, *ai;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	q->result.count = 0;
	q->error = getaddrinfo(q->name, NULL, &hints, &res);
	if (q->error)
		return;
	for (ai = res; ai && q->result.count < DNS_MAX_ADDRS; ai = ai->ai_next) {
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(union net_addr))
			continue;
		memcpy(&q->result.addr[q->result.count++], ai->ai_addr, ai->ai_addrlen);
	}
	freeaddrinfo(res);
	if (q->result.count == 0)
		q->error = EAI_NONAME;
}

static void *
resolver_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dns.lock);
	for (;;) {
		struct dns_query *q;

		while (!dns.jobs && !dns.stopping)
			pthread_cond_wait(&dns.work, &dns.lock);
		if (dns.stopping)
			break;
		q = dns.jobs;
		dns.jobs = q->queue_next;
		if (!dns.jobs)
			dns.jobs_tail = NULL;
		pthread_mutex_unlock(&dns.lock);

		resolve(q);

		pthread_mutex_lock(&dns.lock);
		if (dns.stopping) {
			/* The loop may be gone; nobody is waiting for this answer. */
			free(q);
			break;
		}
		q->queue_next = dns.done;
		dns.done = q;
		ev_async_send(dns.loop, &dns.wakeup);
	}
	dns.threads_running--;
	pthread_cond_signal(&dns.exited);
	pthread_mutex_unlock(&dns.lock);
	return NULL;
}

static void
cache_store(const struct dns_query *q)
{
	struct cache_slot *s = &dns.cache[table_hash(q->name) % DNS_CACHE_SLOTS];

	strcpy(s->name, q->name);
	s->error = q->error;
	s->addrs = q->result;
	s->expires = ev_now(dns.loop) + (q->error ? DNS_NEGATIVE_TTL : dns.ttl);
}

static const struct cache_slot *
cache_find(const char *name)
{
	const struct cache_slot *s = &dns.cache[table_hash(name) % DNS_CACHE_SLOTS];

	if (s->expires > ev_now(dns.loop) && strcmp(s->name, name) == 0)
		return s;
	return NULL;
}

static void
deliver(struct dns_query *q)
{
	struct dns_waiter *w;

	kp_list_unlink(&q->inflight);
	cache_store(q);
	/* A callback may cancel another waiter, so unlink each before calling it. */
	while ((w = KP_LIST_FIRST(&q->waiters, struct dns_waiter, link)) != NULL) {
		kp_list_unlink(&w->link);
		w->query = NULL;
		w->done(w, &q->result, q->error);
	}
	free(q);
}

static void
wakeup_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct dns_query *done;

	(void)loop;
	(void)w;
	(void)revents;
	pthread_mutex_lock(&dns.lock);
	done = dns.done;
	dns.done = NULL;
	pthread_mutex_unlock(&dns.lock);
	while (done) {
		struct dns_query *next = done->queue_next;

		deliver(done);
		done = next;
	}
}

int
dns_init(struct ev_loop *loop, const struct kp_config *cfg)
{
	pthread_attr_t attr;

	memset(&dns, 0, sizeof(dns));
	kp_list_init(&dns.inflight);
	dns.loop = loop;
	dns.ttl = cfg->dns_cache_ttl;
	dns.cache = calloc(DNS_CACHE_SLOTS, sizeof(*dns.cache));
	if (!dns.cache)
		return -1;
	pthread_mutex_init(&dns.lock, NULL);
	pthread_cond_init(&dns.work, NULL);
	pthread_cond_init(&dns.exited, NULL);
	ev_async_init(&dns.wakeup, wakeup_cb);
	ev_async_start(loop, &dns.wakeup);
	/* The loop never waits on a lookup, so it never needs to wait on a thread. */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (int i = 0; i < DNS_THREADS; i++) {
		pthread_t t;

		if (pthread_create(&t, &attr, resolver_thread, NULL) != 0)
			break;
		dns.threads_running++;
	}
	pthread_attr_destroy(&attr);
	dns.started = true;
	return dns.threads_running ? 0 : -1;
}

void
dns_shutdown(void)
{
	struct timespec deadline;

	if (!dns.started)
		return;
	pthread_mutex_lock(&dns.lock);
	dns.stopping = true;
	pthread_cond_broadcast(&dns.work);
	/*
	 * A thread inside getaddrinfo() cannot be interrupted; give it a moment,
	 * then leave it: the process is exiting and its query stays reachable.
	 */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 1;
	while (dns.threads_running &&
	       pthread_cond_timedwait(&dns.exited, &dns.lock, &deadline) == 0)
		;
	while (dns.jobs) {
		struct dns_query *q = dns.jobs;

		dns.jobs = q->queue_next;
		free(q);
	}
	while (dns.done) {
		struct dns_query *q = dns.done;

		dns.done = q->queue_next;
		free(q);
	}
	pthread_mutex_unlock(&dns.lock);
	ev_async_stop(dns.loop, &dns.wakeup);
	free(dns.cache);
	dns.cache = NULL;
	dns.started = false;
}

static bool
literal_address(const char *host, struct dns_addrs *out)
{
	if (!net_literal(host, &out->addr[0]))
		return false;
	out->count = 1;
	return true;
}

/* RFC 6761 6.4: name APIs should answer ".invalid" negatively at once. */
static bool
special_invalid(const char *host)
{
	size_t n = strlen(host);

	if (n > 0 && host[n - 1] == '.')
		n--;
	return (n == 7 && strncmp(host, "invalid", 7) == 0) ||
	       (n > 8 && strncmp(host + n - 8, ".invalid", 8) == 0);
}

/* The lookup of host on its way, if there is one. */
static struct dns_query *
inflight_query(const char *host)
{
	KP_LIST_EACH(q, &dns.inflight, struct dns_query, inflight)
		if (strcmp(q->name, host) == 0)
			return q;
	return NULL;
}

enum dns_status
dns_lookup(const char *host, struct dns_addrs *out, int *error, struct dns_waiter *w)
{
	const struct cache_slot *hit;
	struct dns_query *q;

	if (literal_address(host, out))
		return DNS_DONE;
	if (special_invalid(host) || strlen(host) >= sizeof(q->name)) {
		*error = EAI_NONAME;
		return DNS_FAILED;
	}
	hit = cache_find(host);
	if (hit) {
		kp_stats.dns_cache_hits++;
		if (hit->error) {
			*error = hit->error;
			return DNS_FAILED;
		}
		*out = hit->addrs;
		return DNS_DONE;
	}
	q = inflight_query(host);
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q) {
			*error = EAI_MEMORY;
			return DNS_FAILED;
		}
		strcpy(q->name, host);
		kp_list_init(&q->waiters);
		kp_list_insert_head(&dns.inflight, &q->inflight);
		kp_stats.dns_lookups++;
		pthread_mutex_lock(&dns.lock);
		if (dns.jobs_tail)
			dns.jobs_tail->queue_next = q;
		else
			dns.jobs = q;
		dns.jobs_tail = q;
		pthread_cond_signal(&dns.work);
		pthread_mutex_unlock(&dns.lock);
	}
	w->query = q;
	kp_list_insert_head(&q->waiters, &w->link);
	return DNS_PENDING;
}

void
dns_cancel(struct dns_waiter *w)
{
	kp_list_unlink(&w->link);
	w->query = NULL;
}

const char *
dns_error_text(int error)
{
	return gai_strerror(error);
}
