/*
 * Command-line configuration: defaults, every option in short and long form,
 * the limits each value must respect, and what goes to which stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/config.h"
#include "kp/tls.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct outcome {
	enum config_parse_result result;
	struct kp_config cfg;
	char *out;   /* what went to the output stream */
	char *err;   /* what went to the error stream */
};

static void
outcome_free(struct outcome *o)
{
	free(o->out);
	free(o->err);
	o->out = o->err = NULL;
}

/* Runs config_parse on a NULL-terminated argv, starting from the defaults. */
static void
run_argv(struct outcome *o, char **argv)
{
	size_t out_len = 0, err_len = 0;
	FILE *out, *err;
	int argc = 0;

	while (argv[argc])
		argc++;
	memset(o, 0, sizeof(*o));
	out = open_memstream(&o->out, &out_len);
	err = open_memstream(&o->err, &err_len);
	assert_non_null(out);
	assert_non_null(err);
	config_defaults(&o->cfg);
	o->result = config_parse(&o->cfg, argc, argv, out, err);
	fclose(out);
	fclose(err);
	assert_non_null(o->out);
	assert_non_null(o->err);
}

#define RUN(o, ...) run_argv((o), (char *[]){"keepalive-proxy", __VA_ARGS__, NULL})

static void
assert_defaults_except_nothing(const struct kp_config *cfg)
{
	struct kp_config d;

	config_defaults(&d);
	assert_string_equal(cfg->bind_addr, d.bind_addr);
	assert_int_equal(cfg->port, d.port);
	assert_true(cfg->idle_timeout == d.idle_timeout);
	assert_int_equal(cfg->max_idle_per_host, d.max_idle_per_host);
	assert_int_equal(cfg->max_idle_total, d.max_idle_total);
	assert_true(cfg->connect_timeout == d.connect_timeout);
	assert_true(cfg->response_timeout == d.response_timeout);
	assert_true(cfg->io_timeout == d.io_timeout);
	assert_true(cfg->client_idle_timeout == d.client_idle_timeout);
	assert_int_equal(cfg->max_header_bytes, d.max_header_bytes);
	assert_int_equal(cfg->max_url_bytes, d.max_url_bytes);
	assert_int_equal(cfg->max_clients, d.max_clients);
	assert_true(cfg->dns_cache_ttl == d.dns_cache_ttl);
	assert_int_equal(cfg->verbosity, d.verbosity);
}

static void
test_defaults(void **state)
{
	struct kp_config cfg;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	config_defaults(&cfg);
	assert_int_equal(cfg.port, 9250);
	assert_string_equal(cfg.bind_addr, "127.0.0.1");
	assert_true(cfg.idle_timeout == 50);
	assert_int_equal(cfg.max_idle_per_host, 8);
	assert_int_equal(cfg.max_idle_total, 256);
	assert_int_equal(cfg.max_header_bytes, 32768);
	assert_int_equal(cfg.max_url_bytes, 8192);
	assert_true(cfg.connect_timeout > 0);
	assert_true(cfg.response_timeout > 0);
	assert_true(cfg.io_timeout > 0);
	assert_true(cfg.client_idle_timeout > 0);
	assert_true(cfg.max_clients > 0);
	assert_true(cfg.dns_cache_ttl > 0);
	assert_int_equal(cfg.max_conns_per_host, 0);
	assert_true(cfg.queue_timeout == 30);
	assert_false(cfg.no_connect_race);
	/* Buffers unset: Linux autotunes them. */
	assert_int_equal(cfg.upstream_rcvbuf, 0);
	assert_int_equal(cfg.upstream_sndbuf, 0);
	assert_null(cfg.congestion);
	assert_int_equal(cfg.tcp_keepalive, 15);
	assert_true(cfg.header_timeout == 30);
	assert_true(cfg.grace == 10);
	assert_int_equal(cfg.verbosity, 0);
}

/* A listener other than loopback needs a rule for who may use it. */
static void
test_open_proxy_refused(void **state)
{
	static const char *const open_binds[] = {"0.0.0.0", "::", "192.168.1.1", "fd00::1"};
	struct outcome o;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(open_binds); i++) {
		RUN(&o, "-b", (char *)open_binds[i]);
		assert_int_equal(o.result, CONFIG_ERROR);
		if (!strstr(o.err, "--allow") || !strstr(o.err, "--auth-file"))
			fail_msg("-b %s: the refusal does not say what to do: %s", open_binds[i], o.err);
		outcome_free(&o);
	}
	RUN(&o, "-b", "127.0.0.2");
	assert_int_equal(o.result, CONFIG_RUN);
	outcome_free(&o);
	RUN(&o, "-b", "::1");
	assert_int_equal(o.result, CONFIG_RUN);
	outcome_free(&o);
	RUN(&o, "-b", "0.0.0.0", "--allow", "192.168.1.0/24", "--allow", "fd00::/8");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.nallow, 2);
	assert_int_equal(o.cfg.allow[0].prefix, 24);
	assert_int_equal(o.cfg.allow[1].prefix, 8);
	outcome_free(&o);
	RUN(&o, "-b", "::", "--auth-file", "/etc/keepalive-proxy/users");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_string_equal(o.cfg.auth_file, "/etc/keepalive-proxy/users");
	outcome_free(&o);
}

static void
test_dispatch_and_tuning_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--max-conns-per-host", "6", "--queue-timeout", "2.5", "--no-connect-race",
	    "--upstream-rcvbuf", "8388608", "--upstream-sndbuf", "4096", "--congestion", "bbr",
	    "--tcp-keepalive", "0");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_conns_per_host, 6);
	assert_true(o.cfg.queue_timeout == 2.5);
	assert_true(o.cfg.no_connect_race);
	assert_int_equal(o.cfg.upstream_rcvbuf, 8388608);
	assert_int_equal(o.cfg.upstream_sndbuf, 4096);
	assert_string_equal(o.cfg.congestion, "bbr");
	assert_int_equal(o.cfg.tcp_keepalive, 0);
	assert_string_equal(o.err, "");
	outcome_free(&o);

	RUN(&o, "--max-conns-per-host", "0", "--upstream-rcvbuf", "1073741824",
	    "--tcp-keepalive", "32767", "--congestion", "123456789012345");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_conns_per_host, 0);
	assert_int_equal(o.cfg.upstream_rcvbuf, 1073741824);
	assert_int_equal(o.cfg.tcp_keepalive, 32767);
	outcome_free(&o);
}

static void
test_no_arguments(void **state)
{
	char *argv[] = {"keepalive-proxy", NULL};
	struct outcome o;

	(void)state;
	run_argv(&o, argv);
	assert_int_equal(o.result, CONFIG_RUN);
	assert_defaults_except_nothing(&o.cfg);
	assert_string_equal(o.out, "");
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_short_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-p", "8080", "-b", "::1", "-t", "5", "-m", "2", "-M", "10", "-v", "-v");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8080);
	assert_string_equal(o.cfg.bind_addr, "::1");
	assert_true(o.cfg.idle_timeout == 5);
	assert_int_equal(o.cfg.max_idle_per_host, 2);
	assert_int_equal(o.cfg.max_idle_total, 10);
	assert_int_equal(o.cfg.verbosity, 2);
	/* What was not given keeps its default. */
	assert_int_equal(o.cfg.max_header_bytes, 32768);
	assert_int_equal(o.cfg.max_url_bytes, 8192);
	assert_string_equal(o.out, "");
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_long_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--port", "8081", "--bind", "0.0.0.0", "--allow", "0.0.0.0/0", "--idle-timeout", "2.5",
	    "--max-idle-per-host", "3", "--max-idle", "4", "--connect-timeout", "1.5",
	    "--response-timeout", "30", "--io-timeout", "120", "--client-timeout", "15",
	    "--max-header-size", "65536", "--max-url-size", "4096", "--max-clients", "500",
	    "--dns-ttl", "300", "--verbose");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8081);
	assert_string_equal(o.cfg.bind_addr, "0.0.0.0");
	assert_true(o.cfg.idle_timeout == 2.5);
	assert_int_equal(o.cfg.max_idle_per_host, 3);
	assert_int_equal(o.cfg.max_idle_total, 4);
	assert_true(o.cfg.connect_timeout == 1.5);
	assert_true(o.cfg.response_timeout == 30);
	assert_true(o.cfg.io_timeout == 120);
	assert_true(o.cfg.client_idle_timeout == 15);
	assert_int_equal(o.cfg.max_header_bytes, 65536);
	assert_int_equal(o.cfg.max_url_bytes, 4096);
	assert_int_equal(o.cfg.max_clients, 500);
	assert_true(o.cfg.dns_cache_ttl == 300);
	assert_int_equal(o.cfg.verbosity, 1);
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_option_spellings(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--port=8082", "--idle-timeout=0.25", "--dns-ttl=1e1");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8082);
	assert_true(o.cfg.idle_timeout == 0.25);
	assert_true(o.cfg.dns_cache_ttl == 10);
	outcome_free(&o);

	RUN(&o, "-p8083", "-vvv", "-t0.5");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8083);
	assert_int_equal(o.cfg.verbosity, 3);
	assert_true(o.cfg.idle_timeout == 0.5);
	outcome_free(&o);

	/* A later value wins. */
	RUN(&o, "-p", "1000", "--port", "2000");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 2000);
	outcome_free(&o);
}

static void
test_boundaries(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-p", "1", "-t", "86400", "-m", "0", "-M", "0", "--max-header-size", "1024",
	    "--max-url-size", "64", "--max-clients", "1");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 1);
	assert_true(o.cfg.idle_timeout == 86400);
	assert_int_equal(o.cfg.max_idle_per_host, 0);
	assert_int_equal(o.cfg.max_idle_total, 0);
	assert_int_equal(o.cfg.max_header_bytes, 1024);
	assert_int_equal(o.cfg.max_url_bytes, 64);
	assert_int_equal(o.cfg.max_clients, 1);
	outcome_free(&o);

	RUN(&o, "-p", "65535", "--max-header-size", "1048576", "--max-url-size", "1048576");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 65535);
	assert_int_equal(o.cfg.max_header_bytes, 1048576);
	assert_int_equal(o.cfg.max_url_bytes, 1048576);
	outcome_free(&o);
}

static void
test_url_limit_follows_head_limit(void **state)
{
	struct outcome o;

	(void)state;
	/* A request-target cannot be longer than the head that holds it. */
	RUN(&o, "--max-header-size", "2048", "--max-url-size", "4096");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_header_bytes, 2048);
	assert_int_equal(o.cfg.max_url_bytes, 2048);
	outcome_free(&o);

	RUN(&o, "--max-header-size", "4096");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_url_bytes, 4096);
	outcome_free(&o);
}

struct error_case {
	const char *args[4];
	const char *says;   /* expected in the message */
};

static const struct error_case errors[] = {
	{{"-p", "0"}, "'0'"},
	{{"-p", "65536"}, "'65536'"},
	{{"-p", "abc"}, "'abc'"},
	{{"-p", ""}, "port"},
	{{"-p", "-1"}, "'-1'"},
	{{"-p", "80x"}, "'80x'"},
	{{"-p", "99999999999999999999999"}, "port"},
	{{"--port=8080x"}, "'8080x'"},
	{{"-t", "0"}, "idle timeout"},
	{{"-t", "-1"}, "'-1'"},
	{{"-t", "abc"}, "'abc'"},
	{{"-t", "inf"}, "idle timeout"},
	{{"-t", "nan"}, "idle timeout"},
	{{"-t", "86401"}, "idle timeout"},
	{{"-t", "5s"}, "'5s'"},
	{{"--idle-timeout", "0"}, "idle timeout"},
	{{"--connect-timeout", "0"}, "connect timeout"},
	{{"--connect-timeout", "-2"}, "connect timeout"},
	{{"--response-timeout", "-5"}, "response timeout"},
	{{"--response-timeout", "0"}, "response timeout"},
	{{"--io-timeout", "0"}, "io timeout"},
	{{"--io-timeout", "-1"}, "io timeout"},
	{{"--client-timeout", "-0.5"}, "client timeout"},
	{{"--client-timeout", "0"}, "client timeout"},
	{{"--dns-ttl", "0"}, "dns ttl"},
	{{"--dns-ttl", "-60"}, "dns ttl"},
	{{"-m", "x"}, "per host"},
	{{"-m", "-1"}, "per host"},
	{{"-M", "-1"}, "max idle"},
	{{"--max-header-size", "1023"}, "header size"},
	{{"--max-header-size", "1048577"}, "header size"},
	{{"--max-url-size", "63"}, "url size"},
	{{"--max-clients", "0"}, "max clients"},
	{{"--max-clients", "many"}, "max clients"},
	{{"--max-conns-per-host", "-1"}, "conns per host"},
	{{"--max-conns-per-host", "lots"}, "conns per host"},
	{{"--queue-timeout", "0"}, "queue timeout"},
	{{"--upstream-rcvbuf", "4095"}, "buffer size"},
	{{"--upstream-sndbuf", "1073741825"}, "buffer size"},
	{{"--congestion", ""}, "congestion"},
	{{"--congestion", "1234567890123456"}, "congestion"},
	{{"--tcp-keepalive", "32768"}, "tcp keepalive"},
	{{"--tcp-keepalive", "-1"}, "tcp keepalive"},
	{{"--no-connect-race=1"}, "keepalive-proxy:"},
	{{"--allow", "10.0.0.0/33"}, "--allow"},
	{{"--allow", "example.com"}, "--allow"},
	{{"--allow", "10.0.0.0/"}, "--allow"},
	{{"--allow", "::/129"}, "--allow"},
	{{"--auth-file"}, "needs a value"},
	{{"--header-timeout", "0"}, "header timeout"},
	{{"--deny-dest", "10.0.0.0/40"}, "--deny-dest"},
	{{"--grace", "-1"}, "grace"},
	{{"--stats-listen", "9251"}, "--stats-listen"},
	{{"--stats-listen", "localhost:9251"}, "--stats-listen"},
	{{"--stats-listen", "::1:9251"}, "--stats-listen"},
	{{"--stats-listen", "0.0.0.0:9251"}, "--allow"},
	{{"--grace", "soon"}, "grace"},
	{{"--allow-dest", "lan"}, "--allow-dest"},
	{{"--header-timeout", "x"}, "header timeout"},
	{{"-x"}, "unknown option"},
	{{"--bogus"}, "unknown option"},
	{{"--bogus=1"}, "unknown option"},
	{{"--verbose=2"}, "keepalive-proxy:"},
	{{"-p"}, "needs a value"},
	{{"--port"}, "needs a value"},
	{{"-v", "-t"}, "needs a value"},
	{{"--dns-ttl"}, "needs a value"},
	{{"stray"}, "'stray'"},
	{{"-v", "stray"}, "'stray'"},
	{{"-p", "80", "extra"}, "'extra'"},
};

static void
test_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(errors); i++) {
		char *argv[6] = {"keepalive-proxy"};
		struct outcome o;
		size_t n = 1;

		for (size_t k = 0; k < ARRAY_LEN(errors[i].args) && errors[i].args[k]; k++)
			argv[n++] = (char *)errors[i].args[k];
		argv[n] = NULL;
		run_argv(&o, argv);
		if (o.result != CONFIG_ERROR)
			fail_msg("case %zu (%s %s): result %d", i, errors[i].args[0],
			         errors[i].args[1] ? errors[i].args[1] : "", o.result);
		if (strncmp(o.err, "keepalive-proxy: ", 17) != 0 || !strstr(o.err, errors[i].says) ||
		    o.err[strlen(o.err) - 1] != '\n')
			fail_msg("case %zu (%s %s): message \"%s\" lacks \"%s\"", i, errors[i].args[0],
			         errors[i].args[1] ? errors[i].args[1] : "", o.err, errors[i].says);
		assert_string_equal(o.out, "");
		outcome_free(&o);
	}
}

static void
test_help(void **state)
{
	static const char *const documented[] = {
		"--port", "--bind", "--idle-timeout", "--max-idle-per-host", "--max-idle",
		"--connect-timeout", "--response-timeout", "--io-timeout", "--client-timeout",
		"--max-header-size", "--max-url-size", "--max-clients", "--dns-ttl", "--verbose",
		"--version", "--help", "--max-conns-per-host", "--queue-timeout",
		"--no-connect-race", "--upstream-rcvbuf", "--upstream-sndbuf", "--congestion",
		"--tcp-keepalive", "--allow", "--auth-file", "--header-timeout", "--deny-dest",
		"--allow-dest", "--user", "--grace", "--stats-listen", "--access-log", "--log-query",
		"--syslog", "--pidfile",
	};
	struct outcome o;

	(void)state;
	RUN(&o, "-h");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_non_null(strstr(o.out, "Usage: keepalive-proxy"));
	for (size_t i = 0; i < ARRAY_LEN(documented); i++)
		if (!strstr(o.out, documented[i]))
			fail_msg("--help does not mention %s", documented[i]);
	/* The defaults printed are the defaults used. */
	assert_non_null(strstr(o.out, "(default 9250)"));
	assert_non_null(strstr(o.out, "(default 127.0.0.1)"));
	assert_string_equal(o.err, "");
	outcome_free(&o);

	RUN(&o, "--help");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_non_null(strstr(o.out, "Usage: keepalive-proxy"));
	assert_string_equal(o.err, "");
	outcome_free(&o);

	/* Help stops the parse: what follows is not looked at. */
	RUN(&o, "-h", "-p", "0");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_version(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-V");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_true(strncmp(o.out, "keepalive-proxy " KP_VERSION "\nTLS: ",
	                    strlen("keepalive-proxy " KP_VERSION "\nTLS: ")) == 0);
	assert_non_null(strstr(o.out, tls_built_in() ? "OpenSSL" : "none"));
	assert_string_equal(o.err, "");
	outcome_free(&o);

	RUN(&o, "--version");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_true(strncmp(o.out, "keepalive-proxy " KP_VERSION "\n",
	                    strlen("keepalive-proxy " KP_VERSION "\n")) == 0);
	outcome_free(&o);
}

static void
test_parse_again_after_error(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-p", "0");
	assert_int_equal(o.result, CONFIG_ERROR);
	outcome_free(&o);
	RUN(&o, "-p", "8080", "-v");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8080);
	assert_int_equal(o.cfg.verbosity, 1);
	outcome_free(&o);
}

/*
 * config_parse resets getopt itself, so a second parse must not see anything
 * of the first, even when the first stopped in the middle of "-hv".
 */
static void
test_parse_again_after_early_exit_in_cluster(void **state)
{
	char *first[] = {"keepalive-proxy", "-hv", NULL};
	char *second[] = {"keepalive-proxy", "-p", "8080", NULL};
	struct outcome o;

	(void)state;
	run_argv(&o, first);
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	outcome_free(&o);
	run_argv(&o, second);
	if (o.result != CONFIG_RUN || o.cfg.port != 8080 || o.cfg.verbosity != 0)
		fail_msg("second parse: result %d, port %u, verbosity %d, error \"%s\"", o.result,
		         o.cfg.port, o.cfg.verbosity, o.err);
	outcome_free(&o);
}

static void
test_interception_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--intercept", "*.example.com", "--intercept", "192.0.2.7", "--ca-cert", "c.pem",
	    "--ca-key", "k.pem", "--upstream-ca", "u.pem", "--leaf-cache", "10");
	if (tls_built_in()) {
		assert_int_equal(o.result, CONFIG_RUN);
		assert_int_equal(o.cfg.nintercept, 2);
		assert_string_equal(o.cfg.intercept[0], "*.example.com");
		assert_string_equal(o.cfg.ca_cert, "c.pem");
		assert_string_equal(o.cfg.ca_key, "k.pem");
		assert_string_equal(o.cfg.upstream_ca, "u.pem");
		assert_int_equal(o.cfg.leaf_cache, 10);
	} else {
		assert_int_equal(o.result, CONFIG_ERROR);
		assert_non_null(strstr(o.err, "KP_TLS=OFF"));
	}
	outcome_free(&o);
	/* A pattern that is no host. */
	RUN(&o, "--intercept", "a.*.example.com", "--ca-cert", "c", "--ca-key", "k");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_non_null(strstr(o.err, "a.*.example.com"));
	outcome_free(&o);
	/* Interception without a CA to sign with. */
	RUN(&o, "--intercept", "example.com");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_non_null(strstr(tls_built_in() ? o.err : "--ca-cert", "--ca-cert"));
	outcome_free(&o);
	RUN(&o, "--leaf-cache", "0");
	assert_int_equal(o.result, CONFIG_ERROR);
	outcome_free(&o);
	/* --make-ca needs nothing else. */
	RUN(&o, "--make-ca", "/tmp/ca", "--intercept", "example.com");
	assert_int_equal(o.result, tls_built_in() ? CONFIG_RUN : CONFIG_ERROR);
	outcome_free(&o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_no_arguments),
		cmocka_unit_test(test_short_options),
		cmocka_unit_test(test_long_options),
		cmocka_unit_test(test_option_spellings),
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_dispatch_and_tuning_options),
		cmocka_unit_test(test_open_proxy_refused),
		cmocka_unit_test(test_interception_options),
		cmocka_unit_test(test_url_limit_follows_head_limit),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_parse_again_after_error),
		/* Last: when it fails, getopt state it leaves must not touch the others. */
		cmocka_unit_test(test_parse_again_after_early_exit_in_cluster),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
