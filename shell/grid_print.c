/*
 * shell/grid_print.c - the grid a planned job would get, as herd alloc
 * --grid and herd launch --grid print it: the ranks' hosts and, where
 * GPUs are planned, their links, laid out as herd_comm_grid_create lays a
 * running job (node by node, NVLink set by set) and explained by
 * herd_grid_explain.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd.h"
#include "shell.h"

/* The link between ranks a and b: NET across hosts, the worst between
 * their GPUs where one plan holds both, else SHM. */
static int rank_link(void *arg, int a, int b, char code[HERD_GRID_LINK_LEN])
{
	const shell_grid_ranks *g = arg;
	const herd_plan_rank_info *ra = NULL, *rb = NULL;
	int worst = -1;

	if (strcmp(g->hosts[a], g->hosts[b]) != 0)
		return herd_grid_link_class(NULL, false, code);
	if (g->plan == NULL || g->plan[a] == NULL || g->plan[a] != g->plan[b] ||
	    herd_plan_rank(g->plan[a], g->index[a], &ra) != HERD_OK ||
	    herd_plan_rank(g->plan[b], g->index[b], &rb) != HERD_OK)
		return herd_grid_link_class(NULL, true, code);
	for (size_t x = 0; x < ra->ngpus; x++)
		for (size_t y = 0; y < rb->ngpus; y++) {
			herd_link l;
			char c[HERD_GRID_LINK_LEN];
			int bad;

			if (herd_plan_link(g->plan[a], g->base[a] + x, g->base[b] + y, &l) != HERD_OK)
				continue;
			bad = herd_grid_link_class(&l, true, c);
			if (bad > worst) {
				worst = bad;
				memcpy(code, c, HERD_GRID_LINK_LEN);
			}
		}
	return worst >= 0 ? worst : herd_grid_link_class(NULL, true, code);
}

/* Each rank's place: its host's number, and the set of its GPUs that
 * NVLink joins (by union, a set named by its smallest rank). */
static void places(const shell_grid_ranks *g, herd_grid_place *place)
{
	for (int r = 0; r < g->n; r++) {
		int q;

		for (q = 0; q < r && strcmp(g->hosts[q], g->hosts[r]) != 0; q++)
			;
		place[r].node = q == r ? r : place[q].node;
		place[r].nvset = r;
	}
	for (int a = 0; a < g->n; a++)
		for (int b = a + 1; b < g->n; b++) {
			char code[HERD_GRID_LINK_LEN];
			int lo = place[a].nvset < place[b].nvset ? place[a].nvset : place[b].nvset;
			int hi = place[a].nvset < place[b].nvset ? place[b].nvset : place[a].nvset;

			if (lo == hi || place[a].node != place[b].node)
				continue;
			rank_link((void *)g, a, b, code);
			if (strncmp(code, "NV", 2) != 0 && strcmp(code, "X") != 0)
				continue;
			for (int r = 0; r < g->n; r++)
				if (place[r].nvset == hi)
					place[r].nvset = lo;
		}
}

int shell_grid_print(const char *cmd, const char *fmt, const herd_grid_dim *dims, size_t nd,
		     const char *order, const shell_grid_ranks *g, struct json_t **doc)
{
	herd_grid_place *place = calloc((size_t)g->n + 1, sizeof(*place));
	char *text = NULL, *warnings = NULL;
	herd_grid *grid = NULL;
	herd_status st;
	int status = SHELL_EXIT_OK;

	if (place == NULL) {
		fprintf(stderr, "herd %s: out of memory\n", cmd);
		return SHELL_EXIT_FAILURE;
	}
	places(g, place);
	st = herd_grid_create(&grid, dims, nd, order, g->n, place);
	free(place);
	if (st != HERD_OK)
		return shell_usage_error(cmd, fmt, herd_last_error());
	st = herd_grid_explain(grid, (const char *const *)g->hosts, rank_link, (void *)g,
			       doc != NULL, &text, &warnings);
	herd_grid_free(grid);
	if (st != HERD_OK) {
		fprintf(stderr, "herd %s: %s\n", cmd, herd_last_error());
		return SHELL_EXIT_FAILURE;
	}
	for (const char *p = warnings; *p != '\0';) {
		size_t len = strcspn(p, "\n");

		fflush(stdout);
		fprintf(stderr, "herd %s: warning: %.*s\n", cmd, (int)len, p);
		p += len + (p[len] == '\n');
	}
	if (doc != NULL && (*doc = json_loads(text, 0, NULL)) == NULL) {
		fprintf(stderr, "herd %s: out of memory\n", cmd);
		status = SHELL_EXIT_FAILURE;
	} else if (doc == NULL) {
		fputs(text, stdout);
	}
	free(text);
	free(warnings);
	return status;
}
