/*
 * The fetch engine (ra_fetch.c) on a manual clock, with the exchange it
 * starts fetches with stood in for, and the one call into dispatch a split
 * download makes (closing a host's connections when it backs off). A fetch
 * is recorded with its request head, and the test answers it as the
 * exchange would: writing the canonical response into the piece's memory
 * and calling the engine's exchange_ops, or ending it short. No socket, no
 * dispatch, no exchange.c: the stand-ins keep kpcore's exchange.o (and with
 * it dispatch) out of the link. The loop runs only for the engine's reaper,
 * which frees dropped pieces at the end of an iteration.
 *
 * Read-ahead's cases (test_readahead.c) and split's (test_split_rig.c) both
 * run on it, each including the module it looks into.
 */
#ifndef KP_TEST_FETCH_RIG_H
#define KP_TEST_FETCH_RIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/env.h"
#include "kp/http.h"
#include "kp/ra_fetch.h"
#include "kp/ra_key.h"
#include "kp/source.h"

#define RIG_HEAD_MAX 4096
#define RIG_MAX_STARTED 64

/* The rig's world: what a module under test is made with. */
struct rig {
	struct ev_loop *loop;
	struct clock clock;
	struct kp_config cfg;
	struct proxy_env env;
	struct ra_fetcher *fe;
	struct source_reader reader;     /* the client exchange reading a source */
	unsigned reader_woken;           /* readiness the reader was given (the loop delivers it) */
};
extern struct rig rig;

/* A fetch the engine started: what it asked the origin for. */
struct started {
	struct ra_piece *piece;          /* NULL once the piece is freed */
	char head[RIG_HEAD_MAX + 1];
	enum dispatch_how how;
};

/* What the stood-in exchange and dispatch were asked. */
struct fakes {
	struct started started[RIG_MAX_STARTED];
	unsigned n;
	unsigned cut;                    /* fetches ended while their answer was still to come */
	unsigned promoted;
	unsigned shrunk;                 /* dispatch_shrink_host() calls */
	char shrunk_key[DISPATCH_KEY_MAX];
	unsigned shrunk_to;
	bool fail_starts;                /* exchange_start fails at once, as for a refused destination */
	/*
	 * The start of this number (1-based) is answered by the proxy itself
	 * before exchange_start returns, as a pipelined write cut short is.
	 */
	unsigned refuse_start_no;
};
extern struct fakes fakes;

/*
 * A fresh world: a loop, the clock at 1000 s, the config with memory bytes
 * of --fetch-memory and what read-ahead and split read of it, a fetcher,
 * nothing started, every counter 0. 0, or -1 when something failed.
 */
int rig_setup(size_t memory);
void rig_teardown(void);
/* The end of a loop iteration: the reaper frees what was dropped. */
void rig_iteration_ends(void);
/* A new fetcher (the old one freed): every share empty. */
void rig_new_fetcher(void);
/* What the engine counts in all, and in the share of a key's client (0: none). */
size_t rig_charged(void);
size_t rig_share_charged(const struct ra_key *key);

/* ---- clients ----------------------------------------------------------------- */

/* A client: its address, and the request-target it sends the proxy. */
struct asker {
	struct sockaddr_storage addr;
	char url[256];
	struct http_target target;
	struct ra_ask ask;
};
void asker_init(struct asker *a, const char *ip, uint16_t port, const char *url);

struct text_head {
	char text[4096];
	struct http_head h;
};
void head_parse(struct text_head *m, llhttp_type_t type, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* text in a buffer of the pool's. */
struct buf *head_buf(const char *text);

/* Reads what src yields now into out; the status that stopped it. */
enum move_status read_all(struct source *src, char *out, size_t cap, size_t *len);
/* The client's exchange is done with it. */
void client_done(struct source *src);
/* What the fake exchange was asked to fetch, in order: "target[ bytes=F-L]", ", " between. */
const char *fetched_since(unsigned from);

/* ---- a piece, looked into and answered ----------------------------------------- */

/* The bytes it asked for ({0, UINT64_MAX} for a whole object), and whether it is one. */
struct byte_range piece_range(const struct ra_piece *p);
bool piece_is_whole(const struct ra_piece *p);
uint64_t piece_expect(const struct ra_piece *p);
size_t piece_charged(const struct ra_piece *p);
/* Its fetch is still going, and its owner has not let go (NULL, freed: no). */
bool piece_fetching(const struct ra_piece *p);

/* The body byte at position pos of every object the rig serves. */
char pattern(uint64_t pos);
/* The fetch's answer head arrived: the exchange tells its owner. */
void answer_begins(struct ra_piece *p);
/* Bytes of the answer reach the piece's memory, as the exchange sends them there. */
void arrive(struct ra_piece *p, const char *bytes, size_t len);
/* n bytes of the object's body from position first. */
void arrive_body(struct ra_piece *p, uint64_t first, uint64_t n);
/* The answer is all in: the exchange tells its owner with the status it got. */
void answer_ends(struct ra_piece *p, int status);
/* The answer stops short: the origin's connection closed or reset. */
void answer_cut(struct ra_piece *p, const char *why);
/* The proxy answered instead of the origin (no connection, a timeout), with status. */
void answer_refused_locally(struct ra_piece *p, int status);
/* The head of the 206 for bytes first-last of an object of complete bytes. */
size_t range_head(char *out, size_t cap, const char *fields, uint64_t first, uint64_t last,
                  uint64_t complete);
/*
 * The origin answers a range piece as a 206 of the asked bytes of an
 * object of complete bytes (clipped at its end), its fields those given.
 */
void answer_of(struct ra_piece *p, const char *fields, uint64_t complete);
/* The origin answers with status and an empty body. */
void answer_status(struct ra_piece *p, int status);

#endif
