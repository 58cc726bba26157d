/*
 * One request and its response, relayed between two connection ends: the
 * downstream end that asked (a client, or memory for a request the proxy
 * makes itself) and a source (source.h): an upstream connection that
 * dispatch hands over, or a response already held in memory. It owns the
 * decisions in between: body framing both ways, the splice or copy choice,
 * the stale-connection retry, what to do with each response (plan.h), the
 * switch to a raw tunnel for CONNECT and protocol upgrades, and the
 * deadlines of every wait, with the status each gives.
 *
 * It knows its owner only through exchange_ops and a source only through
 * the source's ops, so neither side calls the other by name.
 */
#ifndef KP_EXCHANGE_H
#define KP_EXCHANGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ev.h>

#include "kp/buf.h"
#include "kp/clock.h"
#include "kp/conn.h"
#include "kp/dispatch.h"
#include "kp/env.h"
#include "kp/framing.h"
#include "kp/http.h"
#include "kp/source.h"
#include "kp/splice.h"
#include "kp/tunnel.h"

struct exchange;

enum request_phase {
	REQ_SENDING,   /* head and/or body still going upstream */
	REQ_DONE,      /* the whole request was written */
};

enum response_phase {
	RESP_HEAD,     /* waiting for the final response head */
	RESP_BODY,     /* forwarding the body */
	RESP_DONE,     /* the whole response reached the downstream end */
};

/* What the exchange tells its owner. Each is the last thing the exchange does. */
struct exchange_ops {
	/* Answer with a response of the proxy's own instead (nothing of one was sent yet). */
	void (*reply)(struct exchange *ex, int status, const char *why, bool keep_alive);
	/* Nothing honest is left to say: close the downstream end. */
	void (*abort)(struct exchange *ex, const char *why);
	/* The response is complete and the source given back; see client_keep_alive. */
	void (*finished)(struct exchange *ex);
	/* From now on bytes pass raw both ways (CONNECT, or a 101). */
	void (*tunnel_opened)(struct exchange *ex);
	/* Nothing can move until an event: arm the watchers (exchange_watch() says which). */
	void (*wait)(struct exchange *ex);
	/*
	 * A final response head is forwarded and its body follows: the owner
	 * may look at it (resp_head, its spans into src->in) and at req_head,
	 * but must not act on this exchange. NULL: not wanted.
	 */
	void (*heard)(struct exchange *ex);
};

/*
 * What a feature that watches client exchanges is shown of one request:
 * read-ahead, plugged in through the env (exchange_hooks), so that neither
 * the exchange nor its owner names it.
 */
struct exchange_view {
	const struct sockaddr *client;     /* the asker's address */
	const char *key;                   /* the dispatch key the request goes under */
	const struct http_target *target;
	uint8_t method;
	bool https;                        /* to the origin over TLS: intercepted */
	bool restricted;                   /* the asker is beyond this machine */
};

/*
 * The seam a feature plugs into every exchange of a client's (never an
 * exchange into memory: those are the feature's own). serve and heard may
 * be NULL; a heard that returns a state has body and ended.
 */
struct exchange_hooks {
	void *ctx;
	/*
	 * A checked request (head h, spans into base) is about to go to an
	 * origin: a source that holds its answer, or NULL to ask the origin.
	 */
	struct source *(*serve)(void *ctx, const struct exchange_view *v, const struct http_head *h,
	                        const char *base);
	/*
	 * The final response head resp (spans into rbase) to the request the
	 * proxy sent as req_head (NULL: none kept) is being forwarded; up is
	 * the end it came from (a connection, or memory). Returns a state to
	 * show the body to (body, then ended), or NULL: the body then stays on
	 * the splice path.
	 */
	void *(*heard)(void *ctx, const struct exchange_view *v, const struct buf *req_head,
	               const struct http_head *resp, const char *rbase, const struct conn *up);
	/* Bytes of the body just sent to the asker, as sent (chunk framing included). */
	void (*body)(void *state, const char *p, size_t len);
	/*
	 * The response ended, whole (complete) or cut, for the request v shows:
	 * the state is the hook's to free.
	 */
	void (*ended)(void *state, const struct exchange_view *v, bool complete);
};

/* What the owner tells the exchange about its end's requests: it sets them, the exchange reads. */
struct exchange_owner {
	const struct sockaddr *peer;  /* the asker's address: the access log and the hooks;
	                               * NULL for the owner's own requests */
	const char *fixed_key;        /* one dispatch key for every request (intercepted), or NULL */
	bool restricted;              /* the asker is beyond this machine */
	bool https;                   /* to the origin over TLS: intercepted */
	/*
	 * Seconds a wait for the origin (its head, or body bytes) may last at
	 * most, when shorter than --response-timeout and --io-timeout: a fetch
	 * whose owner would rather ask again elsewhere than wait that long.
	 * 0: those alone.
	 */
	double stall_timeout;
};

/* How bytes go between the two ends. */
enum exchange_mode {
	MODE_RELAY,       /* a request, then its response */
	MODE_CONNECT,     /* a CONNECT: becomes a tunnel once connected */
	MODE_UPGRADE,     /* asked the origin to switch protocols: a tunnel after a 101 */
	MODE_TUNNEL,      /* raw bytes both ways */
};

/* The exchange's own state: the owner neither reads nor writes it. */
struct exchange_private {
	/* Set once by exchange_init(); a reset keeps them. */
	const struct exchange_ops *ops;
	const struct proxy_env *env;
	struct conn *down;            /* the end that asked */
	struct buf **down_in;         /* its bytes: request body, then pipelined requests */
	struct buf **down_out;        /* heads to send it before any payload */
	bool to_memory;               /* the end is memory: responses in canonical form */
	struct clock_timer timer;     /* the deadline of the current wait */
	struct source_reader reader;  /* how the source tells of readiness */
	/*
	 * Response heads, parsed here rather than in the source: a source
	 * waiting idle in the pool then holds no parser. Started afresh for
	 * each source the exchange is given.
	 */
	struct http_parser resp_parser;
	struct http_head resp_head;
	/* One request's worth, from here on: a reset clears it all. */
	struct dispatch_waiter waiter;   /* how dispatch answers */
	struct source *src;           /* where the response comes from, once there is one */
	ev_tstamp last_activity;      /* bytes last moved; the deadline counts from here */
	enum request_phase req;
	enum response_phase resp;
	enum exchange_mode mode;
	const char *key;              /* dispatch key: fixed_key, target.key, or key_buf */
	char key_buf[DISPATCH_KEY_MAX];
	struct buf *req_head;         /* rewritten head, kept for a replay until the response starts */
	/*
	 * What goes on the wire when it differs from req_head: through an HTTP
	 * parent, the head in absolute form with the parent's credentials.
	 * NULL: req_head itself. The hooks see req_head, as the origin would.
	 */
	struct buf *wire_head;
	size_t req_head_sent;         /* bytes of the wire's head sent */
	struct parent *parent;        /* the parent proxy on the way; NULL: direct */
	bool forward;                 /* to an HTTP parent in absolute form */
	struct framer req_body;
	size_t req_pending;           /* framed body bytes at the front of *down_in */
	uint64_t req_body_sent;
	struct framer resp_body;
	size_t resp_pending;          /* framed bytes at the front of the source's buffer */
	struct mover resp_mover;      /* response payload spliced past user space */
	bool copy_body;               /* no splice for this response (flag, EINVAL, or an end) */
	void *hook_state;             /* env->hooks' state for this response: the body is
	                               * copied, and every byte sent is shown to it */
	uint64_t resp_received;       /* bytes read from the source for this exchange */
	uint64_t resp_sent;
	bool dechunk;                 /* payload only, to an HTTP/1.0 client or memory: ends with the stream */
	bool upstream_reusable;       /* framing and the origin allow pooling afterwards */
	bool client_keep_alive;       /* the client may send another request afterwards */
	/*
	 * How dispatch was asked: DISPATCH_ANY for a client's request; the
	 * owner's own (DISPATCH_BACKGROUND, DISPATCH_AHEAD) never gets a fresh
	 * connection, even to retry, until a client waits for it.
	 */
	enum dispatch_how how;
	bool held;                    /* the response comes from memory (read-ahead) */
	char served_as[32];           /* the source's word for the access log, kept at its end */
	struct tunnel tunnel;
	uint8_t method;
	uint8_t client_minor;
	bool logged;                  /* its access log line is written */
	uint16_t url_len;
	char url[512];                /* the request-target, for the access log (when on) */
	unsigned retries;
	uint16_t status;
	ev_tstamp started;
};

/*
 * An exchange: the owner's part (it sets owner, and parses the target of
 * each request into target before exchange_forward) and the exchange's
 * own (priv), which only its own files (exchange.c, exchange_response.c)
 * touch; everything else an owner learns through the functions below.
 */
struct exchange {
	struct exchange_owner owner;
	struct http_target target;    /* where the request in hand goes; cleared by a reset */
	struct exchange_private priv;
};

/*
 * Once per downstream end; the exchange borrows the end and its two buffers.
 * to_memory: the end is a memory store (memconn.h).
 */
void exchange_init(struct exchange *ex, const struct proxy_env *env, struct conn *down,
                   struct buf **in, struct buf **out, const struct exchange_ops *ops,
                   bool to_memory);
/* Ready for the next request: gives back everything but the borrowed parts. */
void exchange_reset(struct exchange *ex);
/*
 * A reset exchange borrows another downstream end of the same kind (its
 * owner recycles exchanges): as good as exchange_init() with the same env,
 * ops and kind, and cheaper. The owner's fields are the owner's to set.
 */
void exchange_rebind(struct exchange *ex, struct conn *down, struct buf **in, struct buf **out);
/* Lets go of the source (closed: it is mid-exchange) and whatever is held. */
void exchange_release(struct exchange *ex);

/*
 * Notes what the parsed head h (spans into base) says about the request
 * (method, version, keep-alive, body framing), before it is checked or
 * forwarded, and its target for the access log, after url_prefix (the
 * scheme and authority an intercepted request's origin-form lacks; NULL:
 * none).
 */
void exchange_open(struct exchange *ex, const struct http_head *h, const char *base,
                   const char *url_prefix);

/* Has a response (or a tunnel) begun towards the asker, so that only a close can end it? */
bool exchange_response_begun(const struct exchange *ex);
/* May the asker send another request once this one is answered? */
bool exchange_keeps_asker(const struct exchange *ex);
/* The final status: the origin's, or the proxy's own answer's. */
uint16_t exchange_status(const struct exchange *ex);
/* The path under the source's connection, as the kernel measured it (conn_path_figures). */
struct conn_path exchange_path(const struct exchange *ex);

/*
 * The owner answers the request itself with status (nothing of a response
 * began): may the asker's connection stay afterwards? Only if keep_alive
 * (the owner would keep it) and by the rule relayed responses follow: the
 * asker asked to, its request was read whole, the proxy is not stopping.
 * Then what was read of the request's body is dropped from *down_in. The
 * verdict is kept for exchange_keeps_asker().
 */
bool exchange_answer_locally(struct exchange *ex, int status, bool keep_alive);

/*
 * The access log line of the request, once: an answer of the owner's own
 * (how: "local", "intercepted"), or the relayed response as far as it
 * went, with what served it. Nothing without --access-log or a peer.
 */
void exchange_log(struct exchange *ex, int status, uint64_t bytes, const char *how);
void exchange_log_relayed(struct exchange *ex);

/*
 * Forwards the checked request whose head starts *down_in: a CONNECT asks
 * for a tunnel, anything else has its head rewritten and goes to src if
 * one is given (a response already held), else asks dispatch for a
 * connection. Returns 0, or the status of a local answer (with *why) when
 * the head cannot be forwarded; it is then left in *down_in.
 */
int exchange_forward(struct exchange *ex, const struct http_head *h, struct source *src,
                     const char **why);

/*
 * A request of the owner's own, not a client's: a GET with no body, its
 * head composed by the owner (origin-form, Host and all), to target. how:
 * DISPATCH_ANY as a client's request would, or DISPATCH_BACKGROUND or
 * DISPATCH_AHEAD to come after every client request (dispatch.h).
 * 0, or -1 when the head does not fit a buffer.
 */
int exchange_start(struct exchange *ex, const struct http_target *target, const char *head,
                   size_t len, enum dispatch_how how);

/*
 * A background request a client now waits for: it stops coming after
 * client requests, and may have a connection of its own, as the client's
 * own request would.
 */
void exchange_promote(struct exchange *ex);

/* Is the exchange waiting for a connection (as opposed to relaying)? */
static inline bool
exchange_waiting(const struct exchange *ex)
{
	return dispatch_waiting(&ex->priv.waiter);
}

/* The downstream end is readable or writable, or its buffer got bytes: move what can move. */
void exchange_run(struct exchange *ex);

/* Which readiness the exchange wants from the downstream end now; arms the source's. */
void exchange_watch(struct exchange *ex, bool *down_read, bool *down_write);

/* A response head is waited for (as opposed to bytes flowing). */
static inline bool
exchange_awaits_response(const struct exchange *ex)
{
	return ex->priv.req == REQ_DONE && ex->priv.resp == RESP_HEAD;
}

#endif
