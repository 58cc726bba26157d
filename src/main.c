#include <signal.h>
#include <stdlib.h>

#include <ev.h>

#include "kp/config.h"
#include "kp/log.h"
#include "kp/server.h"
#include "kp/tls.h"

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
