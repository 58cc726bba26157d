#include <signal.h>
#include <stdlib.h>

#include <ev.h>

#include "kp/config.h"
#include "kp/hostcheck.h"
#include "kp/log.h"
#include "kp/parent.h"
#include "kp/probe.h"
#include "kp/server.h"
#include "kp/tls.h"

/* Seconds the URL given to --check-host has to answer a connect. */
#define PROBE_TIMEOUT 5.0

/*
 * The probe of --check-host's URL: directly, or through the parent the
 * rules pick for its host.
 */
static void
probe(const struct kp_config *cfg, struct hostcheck_input *in, char *why, size_t whylen)
{
	static struct parents ps;
	struct probe_target t;
	struct probe_via via;
	const struct parent *p = NULL;

	if (probe_parse_url(cfg->check_url, &t, why, whylen) < 0) {
		in->probe_error = why;
		return;
	}
	if (!parents_init(&ps, cfg, why, whylen)) {
		in->probe_error = why;
		return;
	}
	if (!(p = parents_route(&ps, t.host))) {
		if (probe_rtt(cfg->check_url, cfg, PROBE_TIMEOUT, &in->probe_rtt_ms, why, whylen) < 0)
			in->probe_error = why;
		return;
	}
	in->probe_parent = p->label;
	if (probe_rtt_via(cfg->check_url, cfg, p, PROBE_TIMEOUT, &via, why, whylen) < 0) {
		in->probe_error = why;
		return;
	}
	in->probe_rtt_ms = via.path_ms;
	in->probe_parent_ms = via.parent_ms;
	in->probe_open_ms = via.open_ms;
}

/*
 * --check-host: judge this host against the path and the flags, print the
 * report, exit 1 if anything limits. It runs instead of the daemon, so the
 * probe and running ip may block.
 */
static int
check_host(const struct kp_config *cfg)
{
	struct hostcheck_input in;
	struct hostcheck_report report;
	char routes[4096], why[256];

	hostcheck_input_local(&in, cfg, tls_built_in() ? tls_backend_name() : NULL);
	if (hostcheck_read_routes(routes, sizeof(routes)) == 0)
		in.routes = routes;
	if (cfg->check_url) {
		in.probe_url = cfg->check_url;
		probe(cfg, &in, why, sizeof(why));
	}
	hostcheck_run(&report, &in, cfg);
	if (cfg->check_json)
		hostcheck_print_json(stdout, &report);
	else
		hostcheck_print_text(stdout, &report);
	return hostcheck_limited(&report) ? EXIT_FAILURE : EXIT_SUCCESS;
}

int
main(int argc, char **argv)
{
	struct kp_config cfg;
	struct server srv;
	struct ev_loop *loop;
	int status = EXIT_SUCCESS;

	config_defaults(&cfg);
	switch (config_parse(&cfg, argc, argv, tls_built_in() ? tls_backend_name() : NULL, stdout,
	                     stderr)) {
	case CONFIG_RUN:
		break;
	case CONFIG_EXIT_OK:
		return EXIT_SUCCESS;
	case CONFIG_ERROR:
		return 2;
	}
	if (cfg.check_host)
		return check_host(&cfg);
	if (cfg.make_ca_dir)
		return tls_make_ca(cfg.make_ca_dir, &cfg, stdout, stderr) == 0 ? EXIT_SUCCESS
		                                                             : EXIT_FAILURE;
	log_set_verbosity(cfg.verbosity);
	if (cfg.syslog)
		log_to_syslog();
	/* A peer that vanishes must cost one connection, never the process. */
	signal(SIGPIPE, SIG_IGN);
	loop = ev_default_loop(EVFLAG_AUTO);
	if (!loop) {
		log_error("cannot initialise the event loop");
		return EXIT_FAILURE;
	}
	if (server_init(&srv, loop, &cfg) < 0)
		status = EXIT_FAILURE;
	else
		server_run(&srv);
	server_shutdown(&srv);
	ev_loop_destroy(loop);
	return status;
}
