/*
 * shell/program.c - which program the herd program's ranks run: the argv
 * of a launch's ranks (a .lua script runs under herd) and this program's
 * own path, for herd launch, herd bench and herd.launch.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shell.h"

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

const char **shell_rank_argv(int argc, char *const *argv, const char *herd_program)
{
	const char **cmd = calloc((size_t)argc + 2, sizeof(*cmd));
	const char *prog = herd_program != NULL ? herd_program : shell_env("HERD_PROGRAM");
	int k = 0;

	if (cmd == NULL)
		return NULL;
	if (prog == NULL || prog[0] == '\0')
		prog = "herd";
	if (ends_with(argv[0], ".lua"))
		cmd[k++] = prog;
	for (int i = 0; i < argc; i++)
		cmd[k++] = i == 0 && strcmp(argv[0], "herd") == 0 ? prog : argv[i];
	cmd[k] = NULL;
	return cmd;
}

const char *shell_self_program(char *buf, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", buf, cap - 1);

	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}
