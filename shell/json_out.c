/*
 * shell/json_out.c - the --json output of herd's listings: one document,
 * keys in the order they were set, written to stdout.
 */
#include <jansson.h>
#include <stdio.h>

#include "shell.h"

int shell_json_write(FILE *out, json_t *doc)
{
	int rc = -1;

	if (doc != NULL && json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
	    fputc('\n', out) != EOF)
		rc = 0;
	if (doc == NULL)
		shell_message(shell_command, "out of memory building the JSON output");
	json_decref(doc);
	return rc;
}

int shell_json_emit(json_t *doc)
{
	return shell_json_write(stdout, doc);
}

json_t *shell_json_str(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}
