/*
 * kp-delayline: a wide-area link between two TUN devices, for kernels
 * without the netem qdisc.
 *
 * Every IP packet read from one device is written to the other after the
 * time the emulated path would have taken: a drop-tail queue, a bottleneck
 * of fixed rate, then half the round-trip time of propagation; optionally
 * lost at random on the way, before the queue (--loss, --seed). The model is
 * in delayline_link.c; this file moves packets and keeps time.
 *
 * The program creates both devices, says "ready" on stdout and leaves their
 * addresses and namespaces to whoever started it: a TUN file descriptor keeps
 * working when its device is moved to another network namespace. It runs
 * until SIGTERM or SIGINT and then prints its counters as one JSON object;
 * SIGUSR1 prints them (as one line) without stopping.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "delayline_link.h"

/* No IP packet is larger: a TUN device without a virtio header never sees GSO. */
#define MAX_PACKET 65535

/*
 * Packets read from one device before the other direction gets a turn: a
 * burst in one direction must not hold up the packets due in the other.
 */
#define READ_BATCH 32

struct late_stats {
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t over_100us;
	uint64_t over_1ms;
};

struct direction {
	const char *name;
	int in_fd, out_fd;
	bool readable;
	struct dl_link link;
	struct dl_ring ring;
	uint64_t ring_full; /* read, then dropped: no room left in the ring */
	uint64_t written;
	uint64_t write_errors;
	int last_write_errno;
	uint64_t max_ring_bytes;
	struct late_stats late; /* how far behind deliver_at the writes went out */
};

struct options {
	const char *tun_a, *tun_b;
	double rtt_ms;
	double rate_mbit;
	uint64_t queue_bytes; /* 0: one bandwidth-delay product */
	uint64_t ring_bytes;  /* 0: enough for a full path plus the queue */
	unsigned mtu;
	unsigned txqueuelen;
	int fifo_priority; /* 0: ordinary scheduling */
	double loss;       /* probability of random loss, each direction */
	uint64_t seed;     /* of the loss generators */
};

/* Makes the second direction's generator differ from the first's. */
#define SEED_B_TO_A 0xd1b54a32d192ed03ull

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t report_requested;
static unsigned char scratch[MAX_PACKET];

static void
on_signal(int sig)
{
	if (sig == SIGUSR1)
		report_requested = 1;
	else
		stop_requested = 1;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * DL_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "Usage: kp-delayline --tun-a NAME --tun-b NAME [options]\n"
	        "Forward IP packets between two TUN devices through an emulated WAN link.\n"
	        "\n"
	        "      --tun-a NAME         first TUN device (created)\n"
	        "      --tun-b NAME         second TUN device (created)\n"
	        "      --rtt-ms MS          round-trip propagation delay, half each way "
	        "(default 50)\n"
	        "      --rate-mbit MBIT     bottleneck rate in each direction, 0 for none "
	        "(default 500)\n"
	        "      --queue-bytes N      drop-tail queue in front of the bottleneck\n"
	        "                           (default one bandwidth-delay product, at least "
	        "64 KiB)\n"
	        "      --mtu N              MTU of both devices (default 1500)\n"
	        "      --txqueuelen N       kernel queue of each device in packets "
	        "(default 10000)\n"
	        "      --ring-bytes N       packet store per direction (default twice "
	        "BDP + queue)\n"
	        "      --fifo PRIO          run under SCHED_FIFO at this priority\n"
	        "      --loss P             lose packets at random with probability P (0 to 1)\n"
	        "                           in each direction, before the queue (default 0)\n"
	        "      --seed N             seed of the loss generators (default 1): the same\n"
	        "                           seed, the same sequence of drop decisions\n"
	        "  -h, --help               print this help and exit\n"
	        "\n"
	        "Prints \"ready\" once both devices exist; stops on SIGTERM or SIGINT and\n"
	        "prints its counters as JSON; SIGUSR1 prints them without stopping.\n");
}

static bool
parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return false;
	*out = v;
	return true;
}

static bool
parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static int
parse_options(struct options *o, int argc, char **argv)
{
	enum {
		OPT_TUN_A = 256,
		OPT_TUN_B,
		OPT_RTT,
		OPT_RATE,
		OPT_QUEUE,
		OPT_MTU,
		OPT_TXQ,
		OPT_RING,
		OPT_FIFO,
		OPT_LOSS,
		OPT_SEED
	};
	static const struct option longopts[] = {
		{"tun-a", required_argument, NULL, OPT_TUN_A},
		{"tun-b", required_argument, NULL, OPT_TUN_B},
		{"rtt-ms", required_argument, NULL, OPT_RTT},
		{"rate-mbit", required_argument, NULL, OPT_RATE},
		{"queue-bytes", required_argument, NULL, OPT_QUEUE},
		{"mtu", required_argument, NULL, OPT_MTU},
		{"txqueuelen", required_argument, NULL, OPT_TXQ},
		{"ring-bytes", required_argument, NULL, OPT_RING},
		{"fifo", required_argument, NULL, OPT_FIFO},
		{"loss", required_argument, NULL, OPT_LOSS},
		{"seed", required_argument, NULL, OPT_SEED},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	memset(o, 0, sizeof(*o));
	o->rtt_ms = 50;
	o->rate_mbit = 500;
	o->mtu = 1500;
	o->txqueuelen = 10000;
	o->seed = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		bool ok = true;

		switch (c) {
		case OPT_TUN_A:
			o->tun_a = optarg;
			break;
		case OPT_TUN_B:
			o->tun_b = optarg;
			break;
		case OPT_RTT:
			ok = parse_double(optarg, 0, 3600e3, &o->rtt_ms);
			break;
		case OPT_RATE:
			ok = parse_double(optarg, 0, 1e6, &o->rate_mbit);
			break;
		case OPT_QUEUE:
			ok = parse_u64(optarg, 1, UINT64_MAX / 2, &o->queue_bytes);
			break;
		case OPT_MTU:
			ok = parse_u64(optarg, 68, MAX_PACKET, &v);
			o->mtu = (unsigned)v;
			break;
		case OPT_TXQ:
			ok = parse_u64(optarg, 1, UINT32_MAX, &v);
			o->txqueuelen = (unsigned)v;
			break;
		case OPT_RING:
			ok = parse_u64(optarg, 2 * MAX_PACKET + 64, SIZE_MAX / 2, &o->ring_bytes);
			break;
		case OPT_FIFO:
			ok = parse_u64(optarg, 1, 99, &v);
			o->fifo_priority = (int)v;
			break;
		case OPT_LOSS:
			ok = parse_double(optarg, 0, 1, &o->loss);
			break;
		case OPT_SEED:
			ok = parse_u64(optarg, 0, UINT64_MAX, &o->seed);
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
		if (!ok) {
			fprintf(stderr, "kp-delayline: bad value for --%s: %s\n",
			        longopts[c - OPT_TUN_A].name, optarg);
			return -1;
		}
	}
	if (optind != argc || !o->tun_a || !o->tun_b) {
		usage(stderr);
		return -1;
	}
	if (strlen(o->tun_a) >= IFNAMSIZ || strlen(o->tun_b) >= IFNAMSIZ ||
	    strcmp(o->tun_a, o->tun_b) == 0) {
		fprintf(stderr,
		        "kp-delayline: need two different device names of at most %d "
		        "characters\n",
		        IFNAMSIZ - 1);
		return -1;
	}
	return 0;
}

static int
tun_create(const char *name, unsigned mtu, unsigned txqueuelen)
{
	struct ifreq ifr;
	int fd, ctl;

	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "kp-delayline: /dev/net/tun: %s\n", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	/* Bare IP packets: no packet-information prefix to strip or forge. */
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		fprintf(stderr, "kp-delayline: creating %s: %s\n", name, strerror(errno));
		close(fd);
		return -1;
	}
	ctl = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (ctl < 0) {
		fprintf(stderr, "kp-delayline: socket: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	ifr.ifr_mtu = (int)mtu;
	if (ioctl(ctl, SIOCSIFMTU, &ifr) < 0) {
		fprintf(stderr, "kp-delayline: MTU %u on %s: %s\n", mtu, name, strerror(errno));
		goto fail;
	}
	/*
	 * The sender's packets wait in this queue until the loop reads them.
	 * The default of 500 overflows within one scheduling hiccup at a few
	 * hundred Mbit/s, which would be a second, invisible bottleneck.
	 */
	ifr.ifr_qlen = (int)txqueuelen;
	if (ioctl(ctl, SIOCSIFTXQLEN, &ifr) < 0) {
		fprintf(stderr, "kp-delayline: txqueuelen %u on %s: %s\n", txqueuelen, name,
		        strerror(errno));
		goto fail;
	}
	close(ctl);
	return fd;
fail:
	close(ctl);
	close(fd);
	return -1;
}

static void
note_late(struct late_stats *l, uint64_t late)
{
	l->sum_ns += late;
	if (late > l->max_ns)
		l->max_ns = late;
	l->over_100us += late > 100000;
	l->over_1ms += late > 1000000;
}

static void
deliver_due(struct direction *d)
{
	const struct dl_rec *rec;
	uint64_t now = now_ns();

	while ((rec = dl_ring_peek(&d->ring)) && rec->deliver_at <= now) {
		note_late(&d->late, now - rec->deliver_at);
		/* Writing to a TUN device never blocks: the packet is handed to the stack. */
		if (write(d->out_fd, rec->data, rec->len) < 0) {
			d->write_errors++;
			d->last_write_errno = errno;
		} else {
			d->written++;
		}
		dl_ring_pop(&d->ring);
		now = now_ns();
	}
}

/* Reads up to READ_BATCH packets; false once the device has none left. */
static bool
read_some(struct direction *d)
{
	for (unsigned i = 0; i < READ_BATCH; i++) {
		unsigned char *slot = dl_ring_reserve(&d->ring, MAX_PACKET);
		ssize_t n = read(d->in_fd, slot ? slot : scratch, MAX_PACKET);
		uint64_t deliver_at;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				fprintf(stderr, "kp-delayline: read %s: %s\n", d->name,
				        strerror(errno));
			d->readable = false;
			return false;
		}
		if (!slot) {
			d->ring_full++;
			continue;
		}
		if (dl_link_offer(&d->link, now_ns(), (uint32_t)n, &deliver_at)) {
			dl_ring_commit(&d->ring, (uint32_t)n, deliver_at);
			if (d->ring.bytes > d->max_ring_bytes)
				d->max_ring_bytes = d->ring.bytes;
		}
	}
	return true;
}

static void
print_direction(FILE *out, const struct direction *d)
{
	const struct dl_link_stats *s = &d->link.stats;
	uint64_t n = d->written ? d->written : 1;

	fprintf(out,
	        "\"%s\":{\"packets\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"drops\":%" PRIu64
	        ",\"drop_bytes\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"lost_bytes\":%" PRIu64
	        ",\"max_backlog\":%" PRIu64 ",\"ring_full\":%" PRIu64 ",\"max_ring_bytes\":%" PRIu64
	        ",\"written\":%" PRIu64 ",\"write_errors\":%" PRIu64 ",\"last_write_error\":\"%s\""
	        ",\"late_us_avg\":%.1f,\"late_us_max\":%.1f,\"late_over_100us\":%" PRIu64
	        ",\"late_over_1ms\":%" PRIu64 "}",
	        d->name, s->packets, s->bytes, s->drops, s->drop_bytes, s->lost, s->lost_bytes,
	        s->max_backlog, d->ring_full, d->max_ring_bytes, d->written, d->write_errors,
	        d->last_write_errno ? strerror(d->last_write_errno) : "",
	        (double)d->late.sum_ns / (double)n / 1e3, (double)d->late.max_ns / 1e3,
	        d->late.over_100us, d->late.over_1ms);
}

static void
print_report(const struct options *o, const struct direction dir[2], uint64_t started,
             uint64_t wakeups, bool final)
{
	printf("{\"final\":%s,\"elapsed_s\":%.3f,\"wakeups\":%" PRIu64 ",",
	       final ? "true" : "false", (double)(now_ns() - started) / 1e9, wakeups);
	printf("\"config\":{\"tun_a\":\"%s\",\"tun_b\":\"%s\",\"rtt_ms\":%g,\"rate_mbit\":%g,"
	       "\"queue_bytes\":%" PRIu64 ",\"ring_bytes\":%zu,\"mtu\":%u,\"txqueuelen\":%u,"
	       "\"fifo_priority\":%d,\"loss\":%g,\"seed\":%" PRIu64 "},",
	       o->tun_a, o->tun_b, o->rtt_ms, o->rate_mbit, dir[0].link.queue_bytes,
	       dir[0].ring.size, o->mtu, o->txqueuelen, o->fifo_priority, o->loss, o->seed);
	print_direction(stdout, &dir[0]);
	putchar(',');
	print_direction(stdout, &dir[1]);
	printf("}\n");
	fflush(stdout);
}

static struct timespec *
timeout_until(struct direction dir[2], struct timespec *ts)
{
	uint64_t next = UINT64_MAX, now;

	for (int i = 0; i < 2; i++) {
		const struct dl_rec *rec = dl_ring_peek(&dir[i].ring);

		if (rec && rec->deliver_at < next)
			next = rec->deliver_at;
	}
	if (next == UINT64_MAX)
		return NULL;
	now = now_ns();
	next = next > now ? next - now : 0;
	ts->tv_sec = (time_t)(next / DL_NS_PER_SEC);
	ts->tv_nsec = (long)(next % DL_NS_PER_SEC);
	return ts;
}

static int
run(const struct options *o, struct direction dir[2])
{
	struct pollfd pfd[2];
	sigset_t blocked, waiting;
	struct sigaction sa;
	uint64_t started = now_ns(), wakeups = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	/*
	 * The signals stay blocked except inside ppoll(), so one that arrives
	 * between a check of the flags and the next sleep still wakes it.
	 */
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigaddset(&blocked, SIGUSR1);
	sigprocmask(SIG_BLOCK, &blocked, &waiting);
	sigdelset(&waiting, SIGTERM);
	sigdelset(&waiting, SIGINT);
	sigdelset(&waiting, SIGUSR1);

	for (int i = 0; i < 2; i++) {
		pfd[i].fd = dir[i].in_fd;
		pfd[i].events = POLLIN;
		dir[i].readable = true;
	}
	while (!stop_requested) {
		struct timespec ts;
		bool more;

		do {
			more = false;
			for (int i = 0; i < 2; i++) {
				deliver_due(&dir[i]);
				if (dir[i].readable && read_some(&dir[i]))
					more = true;
			}
		} while (more);
		deliver_due(&dir[0]);
		deliver_due(&dir[1]);
		if (report_requested) {
			report_requested = 0;
			print_report(o, dir, started, wakeups, false);
		}
		if (ppoll(pfd, 2, timeout_until(dir, &ts), &waiting) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "kp-delayline: ppoll: %s\n", strerror(errno));
			return -1;
		}
		wakeups++;
		for (int i = 0; i < 2; i++)
			dir[i].readable = (pfd[i].revents & (POLLIN | POLLERR)) != 0;
	}
	print_report(o, dir, started, wakeups, true);
	return 0;
}

int
main(int argc, char **argv)
{
	struct options o;
	struct direction dir[2];
	uint64_t rate_bps, rtt_ns, queue, ring;
	int fd_a, fd_b, status;

	switch (parse_options(&o, argc, argv)) {
	case 1:
		return 0;
	case -1:
		return 2;
	}
	rate_bps = (uint64_t)(o.rate_mbit * 1e6 + 0.5);
	rtt_ns = (uint64_t)(o.rtt_ms * 1e6 + 0.5);
	queue = o.queue_bytes ? o.queue_bytes : dl_default_queue(rate_bps, rtt_ns);
	if (o.ring_bytes) {
		ring = o.ring_bytes;
	} else {
		/*
		 * In flight at most: one BDP (a one-way trip, generously doubled)
		 * plus a full queue. Twice that leaves room for record headers,
		 * which weigh most on small packets, and for the space a wrap
		 * leaves unused. With no rate limit, guess a gigabit.
		 */
		uint64_t bdp = dl_default_queue(rate_bps ? rate_bps : 1000000000ull, rtt_ns);

		ring = 2 * (bdp + queue) + 4 * (MAX_PACKET + 64);
	}

	/* Wake up when the next packet is due, not up to 50 us later. */
	if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) < 0)
		fprintf(stderr, "kp-delayline: PR_SET_TIMERSLACK: %s\n", strerror(errno));
	if (o.fifo_priority) {
		struct sched_param sp = {.sched_priority = o.fifo_priority};

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
			fprintf(stderr, "kp-delayline: SCHED_FIFO: %s\n", strerror(errno));
			return 1;
		}
	}

	memset(dir, 0, sizeof(dir));
	for (int i = 0; i < 2; i++) {
		dl_link_init(&dir[i].link, rate_bps, rtt_ns / 2, queue);
		dl_link_set_loss(&dir[i].link, o.loss, i ? o.seed ^ SEED_B_TO_A : o.seed);
		if (dl_ring_init(&dir[i].ring, ring) < 0) {
			fprintf(stderr, "kp-delayline: cannot allocate %" PRIu64 " bytes\n", ring);
			return 1;
		}
		/* Fault the pages in now rather than in the middle of a measurement. */
		memset(dir[i].ring.buf, 0, dir[i].ring.size);
	}
	fd_a = tun_create(o.tun_a, o.mtu, o.txqueuelen);
	if (fd_a < 0)
		return 1;
	fd_b = tun_create(o.tun_b, o.mtu, o.txqueuelen);
	if (fd_b < 0) {
		close(fd_a);
		return 1;
	}
	dir[0].name = "a_to_b";
	dir[0].in_fd = fd_a;
	dir[0].out_fd = fd_b;
	dir[1].name = "b_to_a";
	dir[1].in_fd = fd_b;
	dir[1].out_fd = fd_a;
	fprintf(stderr,
	        "kp-delayline: %s <-> %s, rtt %g ms, rate %g Mbit/s, queue %" PRIu64
	        " bytes, ring %" PRIu64 " bytes per direction, loss %g (seed %" PRIu64 ")\n",
	        o.tun_a, o.tun_b, o.rtt_ms, o.rate_mbit, queue, ring, o.loss, o.seed);
	printf("ready\n");
	fflush(stdout);

	status = run(&o, dir) < 0 ? 1 : 0;
	close(fd_a);
	close(fd_b);
	dl_ring_free(&dir[0].ring);
	dl_ring_free(&dir[1].ring);
	return status;
}
