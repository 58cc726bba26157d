/*
 * A scriptable HTTP/1.1 origin server for the end-to-end tests.
 *
 * It listens on 127.0.0.1 (a free port), accepts connections in a background
 * thread and serves each connection in a thread of its own with blocking
 * sockets. Every request is parsed strictly (see wire.h), recorded, and
 * handed to the test's handler, which answers with the helpers below. A
 * handler is called once per request and may see several requests on one
 * connection (keep-alive); it decides what happens to the connection.
 *
 * Requests carrying "Expect: 100-continue" reach the handler with the body
 * still unread, so it can send 100 Continue (or not) first; every other
 * request reaches it with the body already read. A body the handler leaves
 * unread is read after it returns.
 *
 * An origin can also speak raw TCP (origin_start_raw): its handler gets each
 * accepted connection as it is, as the far end of a CONNECT tunnel. An HTTP
 * handler may switch its connection to raw bytes too (after answering 101).
 */
#ifndef KP_E2E_ORIGIN_H
#define KP_E2E_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define ORIGIN_KEEP_BODY (64u * 1024u) /* bytes of a request body kept in body.data */

struct origin;
struct origin_conn;

struct origin_request {
	unsigned conn_no;     /* 1-based accept order of its connection */
	unsigned seq;         /* 1-based position on that connection */
	struct msg_head head; /* head.method, head.target, head.minor, head.headers */
	enum framing framing; /* FRAMING_NONE, FRAMING_LENGTH or FRAMING_CHUNKED */
	struct body body;     /* len, fnv, pattern_ok, first bytes in data */
	struct header_list trailers;
	unsigned nchunks;
	bool expects_continue; /* Expect: 100-continue */
	bool body_complete;    /* the whole body arrived intact */
	bool published;        /* visible through origin_request_at() */
};

typedef void (*origin_handler)(struct origin_conn *c, const struct origin_request *req, void *arg);

/* Stock handlers: 200 "ok" to every request; echo every raw byte back until EOF. */
void origin_handle_ok(struct origin_conn *c, const struct origin_request *req, void *arg);
void origin_echo_all(struct origin_conn *c, void *arg);

/* Starts an origin; it is stopped at teardown unless origin_stop() comes first. */
struct origin *origin_start(origin_handler handler, void *arg);
/*
 * Starts an origin without HTTP: handler(c, arg) runs once per accepted
 * connection (in that connection's thread) and uses the raw helpers below;
 * the connection is closed when it returns.
 */
typedef void (*origin_raw_handler)(struct origin_conn *c, void *arg);
struct origin *origin_start_raw(origin_raw_handler handler, void *arg);
void origin_stop(struct origin *o);
/*
 * Holds back new connections: the listen queue shrinks to one entry and a
 * plug connection of the origin's own fills it, so the kernel drops further
 * SYNs and a client's connect stays in progress (its SYN is sent again after
 * 1 s, then 3 s) until origin_release_accepts(). Accepted connections go on.
 */
void origin_hold_accepts(struct origin *o);
void origin_release_accepts(struct origin *o);
int origin_port(const struct origin *o);
/* "http://127.0.0.1:PORT" followed by path. */
const char *origin_url(const struct origin *o, const char *path, char *buf, size_t size);

/* TCP connections accepted so far. */
unsigned origin_connection_count(struct origin *o);
/* Connections on which the peer (the proxy) closed or reset while the origin waited for a request.
 */
unsigned origin_peer_closed_count(struct origin *o);
/*
 * Connections open now: accepted, not closed by the origin, and not closed
 * or reset by the proxy as far as the origin's sockets tell at this moment
 * (a close made before a request on another connection was sent is seen).
 */
unsigned origin_open_count(struct origin *o);
/* Connections whose handling has ended and which the origin has closed. */
unsigned origin_closed_count(struct origin *o);
bool origin_wait_closed(struct origin *o, unsigned n, int timeout_ms);
/* Bytes that send() accepted, over all connections and helpers. */
uint64_t origin_bytes_sent(struct origin *o);
/*
 * Waits up to timeout_ms for the bytes sent to reach n: a send is counted
 * after it returns, which may be after the client already read the bytes.
 */
bool origin_wait_bytes_sent(struct origin *o, uint64_t n, int timeout_ms);
/* Requests recorded so far (the first 4096), in the order their bodies completed. */
unsigned origin_request_count(struct origin *o);
const struct origin_request *origin_request_at(struct origin *o, unsigned index);
/* The most recent request; fails the test if there is none. */
const struct origin_request *origin_last_request(struct origin *o);
/* Requests with this method and target. */
unsigned origin_count_requests(struct origin *o, const char *method, const char *target);
bool origin_wait_requests(struct origin *o, unsigned n, int timeout_ms);
bool origin_wait_peer_closed(struct origin *o, unsigned n, int timeout_ms);

/* Prints what the origin saw (connections, requests); done automatically when a test fails. */
void origin_print_summary(struct origin *o);

/* Protocol errors seen (malformed requests from the proxy and the like). */
unsigned origin_error_count(struct origin *o);
void origin_assert_clean(struct origin *o, const char *file, int line);
#define assert_origin_clean(o) origin_assert_clean((o), __FILE__, __LINE__)

/* ---- For handlers ---- */

/*
 * A Range field's single range (bytes=a-b, a- or -n) of an object of size
 * bytes, as first..last clipped to the object; *open (if not NULL) says
 * whether it was a-. False for anything else, or a range past the end.
 */
bool origin_parse_range(const char *v, uint64_t size, uint64_t *first, uint64_t *last, bool *open);

unsigned origin_conn_no(const struct origin_conn *c);
bool origin_send(struct origin_conn *c, const void *data, size_t len);
bool origin_sendf(struct origin_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* len pattern bytes starting at pattern offset off. */
bool origin_send_pattern(struct origin_conn *c, uint64_t off, uint64_t len);

/*
 * Complete HTTP/1.1 responses. headers holds extra field lines, each ended by
 * CRLF, or NULL. For a HEAD request the body is left out (the framing fields
 * stay).
 */
bool origin_reply(struct origin_conn *c, int status, const char *headers, const char *body);
bool origin_reply_pattern(struct origin_conn *c, int status, const char *headers, uint64_t len);
/* Transfer-Encoding: chunked, chunks of at most chunk bytes, then trailers (field lines or NULL).
 */
bool origin_reply_chunked(struct origin_conn *c, int status, const char *headers, const char *body,
                          size_t chunk, const char *trailers);
bool origin_reply_chunked_pattern(struct origin_conn *c, int status, const char *headers,
                                  uint64_t len, size_t chunk, const char *trailers);
/* No Content-Length, no chunking: the body then the connection closes. */
bool origin_reply_close_delimited(struct origin_conn *c, int status, const char *headers,
                                  const char *body);

bool origin_send_continue(struct origin_conn *c);
/* Reads the body of an Expect: 100-continue request (a no-op if already read). */
bool origin_read_body(struct origin_conn *c, const struct origin_request *req);

/*
 * Waits until the peer has acknowledged every byte sent (the send queue is
 * empty), so that a reset after it loses nothing in flight; false if that
 * takes more than max_ms, or the connection is gone.
 */
bool origin_wait_delivered(struct origin_conn *c, int max_ms);
/* Close (FIN) after what was sent; no further requests on this connection. */
void origin_close(struct origin_conn *c);
/* Close with a reset (SO_LINGER 0). */
void origin_reset(struct origin_conn *c);
/* After this response, close the connection if no request arrives within ms. */
void origin_close_when_idle(struct origin_conn *c, int ms);
/* Send nothing; return once the peer closes, the origin stops or max_ms pass. */
void origin_stay_silent(struct origin_conn *c, int max_ms);
/* Sleeps ms (cut short when the origin stops). */
void origin_pause(struct origin_conn *c, int ms);

/*
 * ---- Raw bytes: tunnels, and connections switched by a 101 ----
 *
 * Once one of these is used on a connection of an HTTP origin, that
 * connection carries no further requests and is closed when the handler
 * returns. Bytes that arrived behind the request head come first. idle_ms
 * bounds each wait for progress; origin_stop() cuts every wait short.
 */

/* Up to len bytes: >0 the count, 0 end of stream, WIRE_TIMEOUT or WIRE_IO. */
long origin_recv(struct origin_conn *c, void *buf, size_t len, int idle_ms);
/* See wire_recv_exact, wire_recv_to_eof and wire_exchange. */
int origin_recv_exact(struct origin_conn *c, uint64_t len, struct body *b, int idle_ms);
int origin_recv_to_eof(struct origin_conn *c, struct body *b, int idle_ms);
void origin_exchange(struct origin_conn *c, uint64_t send_len, struct body *got, int idle_ms,
                     struct exchange *x);
/*
 * Sends back whatever arrives until the end of the stream, then shuts down
 * writing. Returns WIRE_OK, or the WIRE_* error that ended it; *echoed (may
 * be NULL) gets the byte count.
 */
int origin_echo(struct origin_conn *c, int idle_ms, uint64_t *echoed);
/* shutdown(SHUT_WR): the proxy sees the end of the origin's stream. */
bool origin_shutdown_write(struct origin_conn *c);

#endif
