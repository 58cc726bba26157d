/*
 * Clients (client.c) as the daemon runs them, each on one end of a
 * socketpair, driven by a real loop, with their deadlines on a manual
 * clock: the test holds the other end, writes requests into it, reads the
 * answers from it and moves time with clock_advance(), so a 300-second
 * timeout is checked in no time. No dispatch and no origin: the cases are
 * the answers a client makes itself and the waits it keeps.
 *
 * A socket the client cannot write to is made by filling it from the
 * client's own end first (crig_fill): the bytes sit in the test's receive
 * queue until the test reads them, as a client that stops reading would
 * leave them.
 */
#ifndef KP_TEST_CLIENT_RIG_H
#define KP_TEST_CLIENT_RIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kp/client.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/env.h"

#define CRIG_PEERS_MAX 300

struct client_rig {
	struct ev_loop *loop;
	struct clock clock;              /* manual, at 1000 s to begin with */
	struct kp_config cfg;
	struct proxy_env env;
	struct client_list list;
	int peer[CRIG_PEERS_MAX];        /* the test's ends, closed at teardown */
	unsigned npeers;
};
extern struct client_rig crig;

/*
 * cmocka's setup and teardown: the config's defaults, buffers sized as the
 * daemon sizes them, an empty client list, every counter 0. Whatever a case
 * adds to the env (auth, tls) it frees itself.
 */
int crig_setup(void **state);
int crig_teardown(void **state);

/* A client from 127.0.0.1 on a new socketpair; *peer is the test's end (non-blocking). */
struct client *crig_client(int *peer);

/* One loop iteration that does not wait, then the reaping the server does after it. */
void crig_turn(void);
/* Enough iterations for a read, the answer and its write to have happened. */
void crig_settle(void);
/* Moves the clock by seconds (timers fire), then lets what they started run. */
void crig_advance(double seconds);

/* Writes text whole into fd. */
void crig_send(int fd, const char *text);
/* Writes into the client's socket fd until the peer's queue takes no more: how many bytes. */
size_t crig_fill(int fd);
/* Reads and drops exactly n bytes, which must be waiting already. */
void crig_skip(int fd, size_t n);
/* What waits to be read now (up to cap - 1 bytes), NUL-terminated: its length. */
size_t crig_recv(int fd, char *out, size_t cap);
/* The test's end goes away (closed now, not again at teardown). */
void crig_hang_up(int fd);
/* Has the other end closed, with nothing left to read? */
bool crig_eof(int fd);

#endif
