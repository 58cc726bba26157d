/*
 * The manual page and --help list the same flags: every long option in one
 * is in the other (a flag added without documentation fails here).
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

struct flags {
	char name[MAX_FLAGS][40];
	unsigned n;
};

static void
add(struct flags *f, const char *p, size_t len)
{
	if (len == 0 || len >= sizeof(f->name[0]))
		return;
	for (unsigned i = 0; i < f->n; i++)
		if (strlen(f->name[i]) == len && memcmp(f->name[i], p, len) == 0)
			return;
	assert_true(f->n < MAX_FLAGS);
	memcpy(f->name[f->n], p, len);
	f->name[f->n++][len] = '\0';
}

static bool
has(const struct flags *f, const char *name)
{
	for (unsigned i = 0; i < f->n; i++)
		if (strcmp(f->name[i], name) == 0)
			return true;
	return false;
}

/* Long options named at the start of a --help line ("  -p, --port", "      --dns-ttl"). */
static void
help_flags(struct flags *f)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	assert_non_null(out);
	config_usage(out);
	fclose(out);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *p = line + strspn(line, " ");

		if (p[0] == '-' && p[1] != '-')
			p = strstr(p, "--");   /* "-p, --port" */
		if (!p || p - line > 8 || strncmp(p, "--", 2) != 0)
			continue;
		p += 2;
		add(f, p, strspn(p, "abcdefghijklmnopqrstuvwxyz-"));
	}
	free(text);
}

/* Long options the page describes: ".It Fl p , Fl \-port Ar port", ".It Fl \-grace ...". */
static void
man_flags(struct flags *f)
{
	FILE *in = fopen(KP_MANPAGE, "r");
	char line[512];

	assert_non_null(in);
	while (fgets(line, sizeof(line), in)) {
		char clean[512];
		size_t n = 0;
		const char *p;

		if (strncmp(line, ".It Fl ", 7) != 0)
			continue;
		for (const char *s = line; *s && n < sizeof(clean) - 1; s++)
			if (!(s[0] == '\\' && s[1] == '-'))
				clean[n++] = *s;
		clean[n] = '\0';
		/* "\-" became "-": the long option is the "Fl -name" in the line. */
		for (p = clean; (p = strstr(p, "Fl -")) != NULL; p += 4)
			add(f, p + 4, strspn(p + 4, "abcdefghijklmnopqrstuvwxyz-"));
	}
	fclose(in);
}

static void
help_and_man_page_agree(void **state)
{
	struct flags help = {0}, man = {0};

	(void)state;
	help_flags(&help);
	man_flags(&man);
	assert_true(help.n > 20);
	for (unsigned i = 0; i < help.n; i++)
		if (!has(&man, help.name[i]))
			fail_msg("--%s is in --help but not in the man page", help.name[i]);
	for (unsigned i = 0; i < man.n; i++)
		if (!has(&help, man.name[i]))
			fail_msg("--%s is in the man page but not in --help", man.name[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help_and_man_page_agree),
	};

	return cmocka_run_group_tests_name("manpage", tests, NULL, NULL);
}
