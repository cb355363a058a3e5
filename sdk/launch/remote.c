/*
 * sdk/launch/remote.c - the pieces the ssh and Slurm backends share
 * (remote.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostfile.h"
#include "net.h"
#include "remote.h"
#include "topo/hostlist.h"

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Moves names into a fresh node array with the given slots (may be NULL: 0). */
static herd_status nodes_of(char **names, const int *slots, size_t n, herd__launch_node **nodes,
			    size_t *nnodes)
{
	HERD_CHECK(herd__calloc(nodes, n, sizeof(**nodes), "the node list"));
	for (size_t i = 0; i < n; i++) {
		(*nodes)[i].host = names[i];
		(*nodes)[i].slots = slots != NULL ? slots[i] : 0;
		names[i] = NULL;
	}
	*nnodes = n;
	return HERD_OK;
}

herd_status herd__remote_nodes_from_hostlist(const char *expr, herd__launch_node **nodes,
					      size_t *nnodes)
{
	herd__hostlist hl;
	const char **sorted = NULL;
	herd_status st;

	*nodes = NULL;
	*nnodes = 0;
	if (expr == NULL || expr[0] == '\0')
		return herd__error(HERD_EINVAL, "herd_job_spec.hosts: a hostlist expression is "
				   "required (e.g. \"node[01-04]\")");
	HERD_CHECK(herd__hostlist_expand(&hl, expr));
	HERD_CHECK_GOTO(herd__calloc(&sorted, hl.n, sizeof(*sorted), "the node list"), st, out);
	memcpy(sorted, hl.names, hl.n * sizeof(*sorted));
	qsort(sorted, hl.n, sizeof(*sorted), cmp_names);
	for (size_t i = 1; i < hl.n; i++) {
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			st = herd__error(HERD_EFORMAT,
					 "hostlist \"%s\": host %s is listed more than once "
					 "(one entry per host; -n and --per-node say how many "
					 "ranks it runs)",
					 expr, sorted[i]);
			goto out;
		}
	}
	st = nodes_of(hl.names, NULL, hl.n, nodes, nnodes);
out:
	free(sorted);
	herd__hostlist_free(&hl);
	return st;
}

herd_status herd__remote_nodes_from_hostfile(const char *path, herd__launch_node **nodes,
					      size_t *nnodes)
{
	herd__hostfile hf;
	char **names = NULL;
	int *slots = NULL;
	herd_status st;

	*nodes = NULL;
	*nnodes = 0;
	if (path == NULL || path[0] == '\0')
		return herd__error(HERD_EINVAL, "herd_job_spec.hosts: a hostfile path is required");
	HERD_CHECK(herd__hostfile_load(&hf, path));
	HERD_CHECK_GOTO(herd__calloc(&names, hf.n, sizeof(*names), "the node list"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&slots, hf.n, sizeof(*slots), "the node list"), st, out);
	for (size_t i = 0; i < hf.n; i++) {
		names[i] = hf.hosts[i].name;
		slots[i] = hf.hosts[i].slots;
		hf.hosts[i].name = NULL;
	}
	st = nodes_of(names, slots, hf.n, nodes, nnodes);
	for (size_t i = 0; st != HERD_OK && i < hf.n; i++)
		free(names[i]);
out:
	free(names);
	free(slots);
	herd__hostfile_free(&hf);
	return st;
}

bool herd__remote_shell_quote(const char *s, char *out, size_t cap)
{
	size_t k = 0;

	if (cap < 3)
		return false;
	out[k++] = '\'';
	for (; *s != '\0'; s++) {
		if (*s == '\'') {
			if (k + 4 >= cap)
				return false;
			memcpy(out + k, "'\\''", 4);
			k += 4;
		} else {
			if (k + 1 >= cap)
				return false;
			out[k++] = *s;
		}
	}
	if (k + 2 > cap)
		return false;
	out[k++] = '\'';
	out[k] = '\0';
	return true;
}

void herd__remote_channel_abort(herd__launch_channel *ch, int wait_ms)
{
	herd__launch_channel_close_fds(ch);
	if (ch->pid > 0) {
		int64_t deadline = herd__net_deadline(wait_ms);

		/* Its own group: ssh or srun, and whatever they started here. */
		kill(-ch->pid, SIGTERM);
		for (;;) {
			pid_t got = waitpid(ch->pid, NULL, WNOHANG);
			struct timespec ts = { 0, 10 * 1000 * 1000 };

			if (got == ch->pid || (got < 0 && errno != EINTR))
				break;
			if (herd__net_now_ms() >= deadline) {
				kill(-ch->pid, SIGKILL);
				while (waitpid(ch->pid, NULL, 0) < 0 && errno == EINTR)
					;
				break;
			}
			nanosleep(&ts, NULL);
		}
	}
	*ch = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
}
