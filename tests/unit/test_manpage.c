/*
 * The manual page and --help list the same flags: every option in the table
 * config_parse reads is in both, with the same alias and whether it takes a
 * value, and the page lists no flag the table lacks (a flag added without
 * documentation fails here).
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

#define MAX_FLAGS 128

/* What the page says of one option. */
struct man_flag {
	char name[40];     /* long name, without "--" */
	char short_name;   /* the one-letter alias before it, 0: none */
	bool has_arg;      /* an "Ar" follows */
};

struct man_flags {
	struct man_flag flag[MAX_FLAGS];
	unsigned n;
};

static const struct man_flag *
man_find(const struct man_flags *f, const char *name)
{
	for (unsigned i = 0; i < f->n; i++)
		if (strcmp(f->flag[i].name, name) == 0)
			return &f->flag[i];
	return NULL;
}

/* Long options the page describes: ".It Fl p , Fl \-port Ar port", ".It Fl \-grace ...". */
static void
man_flags(struct man_flags *f)
{
	FILE *in = fopen(KP_MANPAGE, "r");
	char line[512];

	assert_non_null(in);
	while (fgets(line, sizeof(line), in)) {
		char clean[512];
		size_t n = 0;
		const char *p;
		char alias = 0;

		if (strncmp(line, ".It Fl ", 7) != 0)
			continue;
		for (const char *s = line; *s && n < sizeof(clean) - 1; s++)
			if (!(s[0] == '\\' && s[1] == '-'))
				clean[n++] = *s;
		clean[n] = '\0';
		/* "\-" became "-": ".It Fl p , Fl -port" names an alias first. */
		if (clean[7] != '-' && clean[8] == ' ')
			alias = clean[7];
		for (p = clean; (p = strstr(p, "Fl -")) != NULL; p += 4) {
			size_t len = strspn(p + 4, "abcdefghijklmnopqrstuvwxyz-");
			struct man_flag *m;

			if (len == 0 || len >= sizeof(f->flag[0].name) || man_find(f, p + 4))
				continue;
			assert_true(f->n < MAX_FLAGS);
			m = &f->flag[f->n++];
			memcpy(m->name, p + 4, len);
			m->name[len] = '\0';
			m->short_name = alias;
			m->has_arg = strstr(clean, " Ar ") != NULL;
			alias = 0;
		}
	}
	fclose(in);
}

/* Does --help print a line for o, under its own flag? */
static bool
in_help(const char *help, const struct config_option *o)
{
	char label[96];

	if (o->short_name)
		snprintf(label, sizeof(label), "\n  -%c, --%s", o->short_name, o->name);
	else
		snprintf(label, sizeof(label), "\n      --%s", o->name);
	for (const char *p = help; (p = strstr(p, label)) != NULL; p++) {
		char next = p[strlen(label)];

		if (next == ' ' || next == '\n')
			return true;
	}
	return false;
}

static void
help_and_man_page_agree(void **state)
{
	struct man_flags man = {0};
	char *help = NULL;
	size_t len = 0, ntable = 0;
	FILE *out = open_memstream(&help, &len);

	(void)state;
	assert_non_null(out);
	config_usage(out);
	fclose(out);
	man_flags(&man);
	for (const struct config_option *o = config_options; o->name; o++, ntable++) {
		const struct man_flag *m = man_find(&man, o->name);

		if (!in_help(help, o))
			fail_msg("--%s is in the option table but not in --help", o->name);
		if (!m)
			fail_msg("--%s is in --help but not in the man page", o->name);
		if (m->short_name != o->short_name)
			fail_msg("--%s: the man page gives alias '%c', --help '%c'", o->name,
			         m->short_name ? m->short_name : ' ', o->short_name ? o->short_name : ' ');
		if (m->has_arg != (o->arg != NULL))
			fail_msg("--%s takes a value in one of the man page and --help only", o->name);
	}
	assert_true(ntable > 20);
	for (unsigned i = 0; i < man.n; i++) {
		const struct config_option *o = config_options;

		while (o->name && strcmp(o->name, man.flag[i].name) != 0)
			o++;
		if (!o->name)
			fail_msg("--%s is in the man page but not in --help", man.flag[i].name);
	}
	free(help);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help_and_man_page_agree),
	};

	return cmocka_run_group_tests_name("manpage", tests, NULL, NULL);
}
