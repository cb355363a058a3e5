/*
 * sdk/launch/env.c - the one place sdk/launch reads the environment of the
 * process that launches: every variable it knows, what it overrides, and
 * the three ways a value is read (as it is, as a count, as words).  The
 * variables the launcher *sets* for ranks are node.c's (the environment
 * contract of docs/design.md); Slurm's job variables are read by the
 * Slurm backend (slurm.c) as Slurm defines them.
 */
#include <stdlib.h>

#include "launch_internal.h"
#include "remote.h"

static const char *const names[HERD__LENV_COUNT] = {
	[HERD__LENV_PROGRAM] = "HERD_PROGRAM",           /* herd on the nodes (spec.herd_program) */
	[HERD__LENV_LAUNCH_ADDR] = "HERD_LAUNCH_ADDR",   /* the address nodes connect back to */
	[HERD__LENV_SSH] = "HERD_SSH",                   /* the ssh program */
	[HERD__LENV_SSH_ARGS] = "HERD_SSH_ARGS",         /* words added to every ssh */
	[HERD__LENV_SSH_TREE_MIN] = "HERD_SSH_TREE_MIN", /* nodes from which ssh fans out as a tree */
	[HERD__LENV_SSH_TREE_WIDTH] = "HERD_SSH_TREE_WIDTH", /* the tree's fan-out */
	[HERD__LENV_SRUN] = "HERD_SRUN",                 /* the srun program */
	[HERD__LENV_SRUN_ARGS] = "HERD_SRUN_ARGS",       /* words added to srun */
	[HERD__LENV_DISCOVER_FANOUT] = "HERD_DISCOVER_FANOUT", /* ssh clients at once */
	[HERD__LENV_LAUNCH_BIND] = "HERD_LAUNCH_BIND",   /* where the launcher listens */
};

const char *herd__launch_env(herd__launch_var var)
{
	const char *v = getenv(names[var]);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

herd_status herd__launch_env_count(herd__launch_var var, long def, long *out)
{
	const char *v = herd__launch_env(var);
	char *end;

	*out = def;
	if (v == NULL)
		return HERD_OK;
	*out = strtol(v, &end, 10);
	if (*end != '\0' || *out < 1 || *out > 1000000)
		return herd__error(HERD_EINVAL, "%s=%s: expected a whole number from 1 to 1000000",
				   names[var], v);
	return HERD_OK;
}

herd_status herd__launch_env_words(herd__launch_var var, char *buf, size_t cap,
				   const char **words, size_t max, size_t *n)
{
	return herd__remote_env_args(names[var], buf, cap, words, max, n);
}
