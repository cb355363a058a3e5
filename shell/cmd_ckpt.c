/*
 * shell/cmd_ckpt.c - `herd ckpt`, the tools for the checkpoint directories
 * that herd_ckpt_save writes.  They read through the public read-only API
 * (herd_ckpt_list, herd_ckpt_verify, the reader), need no communicator, and
 * may run while a job writes the directory.
 *
 *   herd ckpt ls [--verify] DIR        every step: committed or not, damaged
 *                                      (moved aside too), size, ranks,
 *                                      tensors, blobs, save time; which
 *                                      steps were verified or only listed
 *   herd ckpt verify DIR [STEP]        every checksum; exit 1 naming the
 *                                      file, tensor and chunk of a mismatch
 *   herd ckpt inspect DIR [STEP]       the tensor table (and the blobs)
 *   herd ckpt diff DIR A B             which tensors changed, max |a - b|
 *   herd ckpt export [--format safetensors] DIR STEP OUT
 *   herd ckpt import FILE DIR [STEP]   a safetensors file as a step saved
 *                                      by one rank
 *
 * STEP is a step number or "latest" (the newest committed step).
 *
 * safetensors (the format and the import's checks: safetensors.h): export
 * writes every tensor whole (assembled from its shards and verified chunk
 * by chunk) in the step's order, its header padded with spaces to a
 * multiple of 8, through a temporary file renamed into place; blobs have
 * no place in the format and are left out (with a note).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "herd/sys/agent.h"
#include "safetensors.h"
#include "shell.h"

static const char ckpt_usage[] =
	"usage: herd ckpt ls [--json] [--verify] DIR\n"
	"       herd ckpt verify [--json] DIR [STEP]\n"
	"       herd ckpt inspect [--json] DIR [STEP]\n"
	"       herd ckpt diff [--json] DIR A B\n"
	"       herd ckpt export [--format safetensors] DIR STEP OUT\n"
	"       herd ckpt import [--format safetensors] FILE DIR [STEP]\n"
	"       herd ckpt hold [--bind ADDR] [--budget SIZE] [--steps N]\n"
	"       herd ckpt interval [--json] --mttf TIME [--max-overhead F]\n"
	"                          TIER=SAVE,LOST[,BUSY]...\n"
	"  ls        the steps of DIR, oldest first: committed, partial (a save\n"
	"            that did not finish), corrupt (a manifest that does not\n"
	"            decode) or damaged (a file missing or of the wrong size, or\n"
	"            a step that did not verify, moved aside by a restore or a\n"
	"            save); size, ranks, tensors, blobs, save time.  Checksums\n"
	"            are not read, and a last line names the steps listed but\n"
	"            not verified; --verify reads every committed step's\n"
	"            checksums, as verify does\n"
	"  verify    checks the manifest, every file's size and every chunk's\n"
	"            checksum of STEP (default latest); prints each problem with\n"
	"            its file, tensor, shard and chunk, and exits 1 if any\n"
	"  inspect   the tensors of STEP (default latest): name, dtype, global\n"
	"            shape, shards, bytes; and the blobs\n"
	"  diff      compares steps A and B tensor by tensor: same, changed (with\n"
	"            the number of elements that differ and the largest |a - b|),\n"
	"            or present in one only; exits 0 when all is the same, 1 when\n"
	"            something differs, 2 when a step cannot be read\n"
	"  export    writes every tensor of STEP whole to OUT, a safetensors file\n"
	"  import    reads a safetensors FILE into DIR as step STEP (default 0),\n"
	"            saved by one rank\n"
	"  interval  the checkpoint interval that loses the least expected time\n"
	"            to failures (Daly's model; Young's sqrt(2 C M) beside it),\n"
	"            raised to keep saves under --max-overhead of the time\n"
	"            (default 0.035) and to BUSY, and the expected effective\n"
	"            training time ratio, for each TIER (a name: peers,\n"
	"            storage): SAVE the seconds a save stalls training, LOST\n"
	"            what a failure costs besides lost work (finding it,\n"
	"            restarting, restoring), BUSY a save's time in the\n"
	"            background; --mttf the job's mean time to failure (3600,\n"
	"            90m, 8h, 2d)\n"
	"  hold      keeps checkpoint copies in this node's memory for a job's\n"
	"            ranks until its standard input ends: what herd launch\n"
	"            --ckpt-peers starts on every node.  Prints 'hold PORT TOKEN';\n"
	"            --budget (default HERD_CKPT_PEER_BYTES, else a quarter of\n"
	"            the memory), --steps: the committed steps kept besides those\n"
	"            arriving, 1 or 2 (default HERD_CKPT_PEER_STEPS, else 1)\n"
	"STEP is a number or 'latest', the newest committed step.  --json prints\n"
	"what the listing shows as one JSON document, with the same exit status.\n"
	"Exit status:\n"
	"  0    done: for verify, no problem; for diff, the steps are the same\n"
	"  1    verify found problems, diff found differences, or DIR, a step or\n"
	"       OUT could not be read or written\n"
	"  2    a usage error, a FILE that is not a safetensors file herd can\n"
	"       import, or (diff) a step that cannot be read\n";

/* ------------------------------------------------------------- helpers */

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "herd ckpt: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'herd ckpt --help' for more information.\n");
	return SHELL_EXIT_USAGE;
}

/* --json: the listings print one JSON document instead of text. */
static bool json;

/* Appends row to the JSON rows, or frees it when printing text. */
static void json_row(json_t *rows, json_t *row)
{
	if (rows != NULL)
		json_array_append_new(rows, row);
	else
		json_decref(row);
}

/* A failed library call: its message, and exit status 1. */
static int failure(void)
{
	shell_message("herd ckpt", shell_last_error());
	return SHELL_EXIT_FAILURE;
}

/* "latest" or 0..HERD_CKPT_STEP_MAX; -1 when malformed. */
static int parse_step(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (strcmp(s, "latest") == 0) {
		*out = HERD_CKPT_LATEST;
		return 0;
	}
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > HERD_CKPT_STEP_MAX)
		return -1;
	*out = v;
	return 0;
}

/* "1.5 GiB" */
static void human_bytes(uint64_t n, char *buf, size_t cap)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", n);
	else
		snprintf(buf, cap, "%.1f %s", v, units[u]);
}

/* "[2, 3]" */
static void shape_str(int ndim, const uint64_t *shape, char *buf, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(buf, cap, "[");
	for (int d = 0; d < ndim && n < cap; d++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, d ? ", " : "", shape[d]);
	if (n < cap)
		snprintf(buf + n, cap - n, "]");
}

static void time_str(int64_t t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || localtime_r(&tt, &tm) == NULL || strftime(buf, cap, "%Y-%m-%d %H:%M:%S",
								  &tm) == 0)
		snprintf(buf, cap, "-");
}

/* ------------------------------------------------------------ elements */

static double elem_double(const void *buf, size_t i, herd_dtype dtype)
{
	shell_elem e = shell_elem_load(buf, i, dtype);

	return e.is_int ? (double)e.i : e.f;
}

/* ------------------------------------------------------------------ ls */

/* ls --verify: every committed step's checksums are read. */
static bool ls_verify;

/* Appends "1, 2, 3" (the first ten, then "and N more") of steps[0..n). */
static void step_list(const int64_t *steps, size_t n, char *buf, size_t cap)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 10 && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64,
				      i == 0 ? "" : i + 1 == n ? " and " : ", ", steps[i]);
	if (n > 10 && o < cap)
		snprintf(buf + o, cap - o, " and %zu more", n - 10);
}

/* What ls calls a step: committed, partial, corrupt or damaged. */
static const char *ls_state(const herd_ckpt_step_info *s)
{
	if (s->moved_aside)
		return "damaged";
	if (!s->committed)
		return "partial";
	if (!s->manifest_ok)
		return "corrupt";
	return s->files_ok ? "committed" : "damaged";
}

static int ckpt_ls(int argc, char **argv)
{
	herd_ckpt_step_info *steps = NULL;
	int64_t *listed = NULL;
	bool *verified = NULL;
	json_t *rows = NULL;
	size_t n = 0, nlisted = 0;
	int rc = SHELL_EXIT_OK;

	if (argc != 1)
		return usage_error("ls takes one directory%s", "");
	if (herd_ckpt_list(argv[0], &steps, &n) != HERD_OK)
		return failure();
	listed = calloc(n + 1, sizeof(*listed));
	verified = calloc(n + 1, sizeof(*verified));
	if (listed == NULL || verified == NULL) {
		herd_free(steps);
		free(listed);
		free(verified);
		shell_message("herd ckpt", "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	/* --verify: a committed step that looks whole has its checksums read;
	 * one that does not verify (HERD_EFORMAT) is damaged, with its first
	 * problem. */
	for (size_t i = 0; i < n; i++) {
		herd_ckpt_step_info *s = &steps[i];

		if (strcmp(ls_state(s), "committed") != 0)
			continue;
		if (ls_verify) {
			verified[i] = true;
			herd_status vst = herd_ckpt_verify(argv[0], s->step, NULL, NULL, NULL);

			/* Damaged is what fails verification; a step that cannot be
			 * read now, is newer than this herd, or went while it was
			 * listed (a writer's retention) is left as listed. */
			if (vst != HERD_OK && vst != HERD_EFORMAT) {
				verified[i] = false;
				fprintf(stderr, "herd ckpt: step %lld not verified: %s\n",
					(long long)s->step, shell_last_error());
			} else if (vst != HERD_OK) {
				/* Named inside the step, as the other problems are. */
				const char *msg = herd_last_error();
				size_t dl = strlen(argv[0]), nl = strlen(s->name);

				if (strncmp(msg, argv[0], dl) == 0 && msg[dl] == '/' &&
				    strncmp(msg + dl + 1, s->name, nl) == 0 && msg[dl + 1 + nl] == '/')
					msg += dl + nl + 2;
				s->files_ok = false;
				snprintf(s->problem, sizeof(s->problem), "%s", msg);
			}
		}
		if (strcmp(ls_state(s), "committed") == 0)
			listed[nlisted++] = s->step;
	}
	if (json)
		rows = json_array();
	if (!json)
		printf("%-13s %-10s %10s %6s %8s %6s  %s\n", "step", "state", "size", "ranks",
		       "tensors", "blobs", "saved");
	for (size_t i = 0; i < n; i++) {
		const herd_ckpt_step_info *s = &steps[i];
		const char *state = ls_state(s);
		bool said = s->problem[0] && (s->committed || s->moved_aside);
		char size[32], when[32];

		json_row(rows, json_pack("{s:I, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:b}",
					 "step", (json_int_t)s->step, "name", s->name, "state", state,
					 "bytes", (json_int_t)s->bytes,
					 "ranks", s->manifest_ok ? json_integer(s->ranks) : json_null(),
					 "tensors", s->manifest_ok ? json_integer(s->tensors) : json_null(),
					 "blobs", s->manifest_ok ? json_integer(s->blobs) : json_null(),
					 "time", s->time > 0 ? json_integer(s->time) : json_null(),
					 "problem", said ? json_string(s->problem) : json_null(),
					 "verified", verified[i], "moved_aside", s->moved_aside));
		if (json)
			continue;
		human_bytes(s->bytes, size, sizeof(size));
		time_str(s->time, when, sizeof(when));
		if (s->manifest_ok)
			printf("%-13" PRId64 " %-10s %10s %6d %8d %6d  %s\n", s->step, state, size,
			       s->ranks, s->tensors, s->blobs, when);
		else
			printf("%-13" PRId64 " %-10s %10s %6s %8s %6s  %s\n", s->step, state, size,
			       "-", "-", "-", when);
		if (s->moved_aside)
			printf("  moved aside as %s: %s\n", s->name, s->problem);
		else if (said)
			printf("  %s\n", s->problem);
	}
	if (!json && nlisted > 0) {
		char list[256];

		step_list(listed, nlisted, list, sizeof(list));
		if (ls_verify)
			printf("verified: step%s %s (every checksum read)\n", nlisted == 1 ? "" : "s",
			       list);
		else
			printf("listed, not verified: step%s %s (manifests and file sizes checked, "
			       "checksums not read: herd ckpt ls --verify DIR reads them)\n",
			       nlisted == 1 ? "" : "s", list);
	}
	herd_free(steps);
	free(listed);
	free(verified);
	if (rows != NULL &&
	    shell_json_emit(json_pack("{s:i, s:s, s:b, s:o}", "v", 1, "dir", argv[0], "verified",
				      ls_verify, "steps", rows)) != 0)
		rc = SHELL_EXIT_FAILURE;
	return rc;
}

/* -------------------------------------------------------------- verify */

struct verify_ctx {
	herd_ckpt_reader *reader;   /* to tell tensors from blobs; may be NULL */
	const char *dir;
	char stepname[64];
	json_t *problems;           /* --json: the problems; NULL: printed */
};

static void print_problem(void *arg, const herd_ckpt_problem *p)
{
	struct verify_ctx *v = arg;
	size_t index;
	bool tensor = p->tensor != NULL && (v->reader == NULL ||
		herd_ckpt_reader_find(v->reader, p->tensor, &index) == HERD_OK);

	if (v->problems != NULL) {
		json_row(v->problems, json_pack(
			"{s:s, s:o, s:o, s:o, s:o, s:o, s:s}", "file", p->file,
			"tensor", tensor ? json_string(p->tensor) : json_null(),
			"blob", p->tensor != NULL && !tensor ? json_string(p->tensor) : json_null(),
			"shard", p->tensor != NULL ? json_integer((json_int_t)p->shard) : json_null(),
			"chunk", p->chunk >= 0 ? json_integer((json_int_t)p->chunk) : json_null(),
			"offset", p->offset >= 0 ? json_integer((json_int_t)p->offset) : json_null(),
			"message", p->message));
		return;
	}
	printf("%s/%s/%s: ", v->dir, v->stepname, p->file);
	if (p->tensor != NULL) {
		if (tensor)
			printf("tensor \"%s\" shard %" PRId64, p->tensor, p->shard);
		else
			printf("blob \"%s\" of rank %" PRId64, p->tensor, p->shard);
		if (p->chunk >= 0)
			printf(" chunk %" PRId64, p->chunk);
		if (p->offset >= 0)
			printf(" (byte %" PRId64 " of the file)", p->offset);
		printf(": ");
	}
	printf("%s\n", p->message);
}

static int ckpt_verify(int argc, char **argv)
{
	struct verify_ctx v = { NULL, NULL, "", NULL };
	int64_t step = HERD_CKPT_LATEST;
	size_t problems = 0, nt = 0;
	uint64_t bytes = 0;
	herd_status st;

	if (argc < 1 || argc > 2)
		return usage_error("verify takes a directory and a step%s", "");
	if (argc == 2 && parse_step(argv[1], &step) != 0)
		return usage_error("'%s' is not a step (a number or 'latest')", argv[1]);
	if (step == HERD_CKPT_LATEST && herd_ckpt_latest(argv[0], &step) != HERD_OK)
		return failure();
	v.dir = argv[0];
	v.problems = json ? json_array() : NULL;
	snprintf(v.stepname, sizeof(v.stepname), "step-%012" PRId64, step);
	/* Without a readable manifest there is no reader; verify says why. */
	if (herd_ckpt_reader_open(&v.reader, argv[0], step) != HERD_OK)
		v.reader = NULL;
	st = herd_ckpt_verify(argv[0], step, print_problem, &v, &problems);
	if (v.reader != NULL) {
		nt = herd_ckpt_reader_tensor_count(v.reader);
		for (size_t i = 0; i < nt; i++) {
			herd_ckpt_tensor_info ti;

			if (herd_ckpt_reader_tensor(v.reader, i, &ti) == HERD_OK)
				bytes += ti.bytes;
		}
	}
	if (v.problems != NULL && (st == HERD_OK || problems > 0)) {
		json_t *doc = json_pack("{s:i, s:s, s:I, s:b, s:o}", "v", 1, "dir", argv[0], "step",
					(json_int_t)step, "ok", st == HERD_OK, "problems",
					v.problems);

		v.problems = NULL;
		if (doc != NULL && v.reader != NULL)
			json_object_update_new(doc, json_pack(
				"{s:I, s:I, s:I, s:i}", "tensors", (json_int_t)nt, "bytes",
				(json_int_t)bytes, "blobs",
				(json_int_t)herd_ckpt_reader_blob_count(v.reader), "ranks",
				herd_ckpt_reader_ranks(v.reader)));
		if (shell_json_emit(doc) != 0) {
			herd_ckpt_reader_free(v.reader);
			return SHELL_EXIT_FAILURE;
		}
	} else if (st == HERD_OK && !json) {
		printf("%s/%s: ok", argv[0], v.stepname);
		if (v.reader != NULL)
			printf(": %zu tensors (%" PRIu64 " bytes), %zu blobs, saved by %d ranks", nt,
			       bytes, herd_ckpt_reader_blob_count(v.reader),
			       herd_ckpt_reader_ranks(v.reader));
		printf("\n");
	}
	json_decref(v.problems);
	herd_ckpt_reader_free(v.reader);
	fflush(stdout);
	if (st == HERD_OK)
		return SHELL_EXIT_OK;
	if (problems > 0) {
		fprintf(stderr, "herd ckpt: %s/%s: %zu problem%s\n", argv[0], v.stepname, problems,
			problems == 1 ? "" : "s");
		return SHELL_EXIT_FAILURE;
	}
	return failure();
}

/* ------------------------------------------------------------- inspect */

static const char *rule_name(herd_ckpt_blob_rule r)
{
	return r == HERD_CKPT_BLOB_SAME_RANK ? "same-rank" : r == HERD_CKPT_BLOB_RANK0 ? "rank0"
										    : "strict";
}

/* inspect --json: the step's tensors and blobs. */
static int inspect_json(herd_ckpt_reader *r, const char *dir, uint64_t total)
{
	json_t *tensors = json_array(), *blobs = json_array();

	for (size_t i = 0; i < herd_ckpt_reader_tensor_count(r); i++) {
		herd_ckpt_tensor_info ti;
		json_t *shape = json_array();

		if (herd_ckpt_reader_tensor(r, i, &ti) != HERD_OK) {
			json_decref(shape);
			continue;
		}
		for (int d = 0; d < ti.ndim; d++)
			json_array_append_new(shape, json_integer((json_int_t)ti.shape[d]));
		json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I, s:I}", "name",
							 ti.name, "dtype", herd_dtype_name(ti.dtype),
							 "shape", shape, "shards", (json_int_t)ti.shards,
							 "bytes", (json_int_t)ti.bytes));
	}
	for (size_t i = 0; i < herd_ckpt_reader_blob_count(r); i++) {
		herd_ckpt_blob_info bi;

		if (herd_ckpt_reader_blob(r, i, &bi) == HERD_OK)
			json_array_append_new(blobs, json_pack("{s:s, s:s, s:i}", "name", bi.name,
							       "rule", rule_name(bi.rule), "ranks",
							       bi.ranks));
	}
	return shell_json_emit(json_pack("{s:i, s:s, s:I, s:I, s:i, s:I, s:o, s:o}", "v", 1,
					 "dir", dir, "step", (json_int_t)herd_ckpt_reader_step(r),
					 "time", (json_int_t)herd_ckpt_reader_time(r), "ranks",
					 herd_ckpt_reader_ranks(r), "bytes", (json_int_t)total,
					 "tensors", tensors, "blobs", blobs)) == 0
		? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}

static int ckpt_inspect(int argc, char **argv)
{
	herd_ckpt_reader *r = NULL;
	int64_t step = HERD_CKPT_LATEST;
	size_t nt, nb, width = 4;
	uint64_t total = 0;
	char when[32];

	if (argc < 1 || argc > 2)
		return usage_error("inspect takes a directory and a step%s", "");
	if (argc == 2 && parse_step(argv[1], &step) != 0)
		return usage_error("'%s' is not a step (a number or 'latest')", argv[1]);
	if (herd_ckpt_reader_open(&r, argv[0], step) != HERD_OK)
		return failure();
	nt = herd_ckpt_reader_tensor_count(r);
	nb = herd_ckpt_reader_blob_count(r);
	for (size_t i = 0; i < nt; i++) {
		herd_ckpt_tensor_info ti;

		if (herd_ckpt_reader_tensor(r, i, &ti) == HERD_OK) {
			total += ti.bytes;
			if (strlen(ti.name) > width)
				width = strlen(ti.name);
		}
	}
	if (json) {
		int rc = inspect_json(r, argv[0], total);

		herd_ckpt_reader_free(r);
		return rc;
	}
	time_str(herd_ckpt_reader_time(r), when, sizeof(when));
	printf("step %" PRId64 " of %s: saved %s by %d rank%s; %zu tensors, %" PRIu64
	       " bytes; %zu blobs\n\n", herd_ckpt_reader_step(r), argv[0], when,
	       herd_ckpt_reader_ranks(r), herd_ckpt_reader_ranks(r) == 1 ? "" : "s", nt, total,
	       nb);
	printf("%-*s  %-11s  %-20s  %6s  %14s\n", (int)width, "name", "dtype", "shape", "shards",
	       "bytes");
	for (size_t i = 0; i < nt; i++) {
		herd_ckpt_tensor_info ti;
		char shape[256];

		if (herd_ckpt_reader_tensor(r, i, &ti) != HERD_OK)
			continue;
		shape_str(ti.ndim, ti.shape, shape, sizeof(shape));
		printf("%-*s  %-11s  %-20s  %6zu  %14" PRIu64 "\n", (int)width, ti.name,
		       herd_dtype_name(ti.dtype), shape, ti.shards, ti.bytes);
	}
	if (nb > 0) {
		printf("\n%-*s  %-9s  %s\n", (int)width, "blob", "rule", "ranks");
		for (size_t i = 0; i < nb; i++) {
			herd_ckpt_blob_info bi;

			if (herd_ckpt_reader_blob(r, i, &bi) == HERD_OK)
				printf("%-*s  %-9s  %d\n", (int)width, bi.name, rule_name(bi.rule),
				       bi.ranks);
		}
	}
	herd_ckpt_reader_free(r);
	return SHELL_EXIT_OK;
}

/* ---------------------------------------------------------------- diff */

/* Reads a whole tensor into a fresh buffer. */
static herd_status read_tensor(herd_ckpt_reader *r, const herd_ckpt_tensor_info *ti, void **out)
{
	void *buf;
	herd_status st;

	*out = NULL;
	if (ti->bytes > SIZE_MAX)
		return herd_ckpt_reader_read(r, ti->name, NULL, 0);
	buf = malloc(ti->bytes > 0 ? (size_t)ti->bytes : 1);
	if (buf == NULL) {
		fprintf(stderr, "herd ckpt: tensor \"%s\": cannot allocate %" PRIu64 " bytes\n",
			ti->name, ti->bytes);
		return HERD_ENOMEM;
	}
	st = herd_ckpt_reader_read(r, ti->name, buf, (size_t)ti->bytes);
	if (st != HERD_OK) {
		free(buf);
		return st;
	}
	*out = buf;
	return HERD_OK;
}

/*
 * One line of diff: printed as "NAME  STATUS  DETAIL", or with --json
 * (rows not NULL) appended as {name, kind, status, ...extra} with the
 * status in snake case ("only in A" -> "only_in_a").  Takes extra.
 */
static void diff_out(json_t *rows, int width, const char *name, const char *kind,
		     const char *status, json_t *extra, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
static void diff_out(json_t *rows, int width, const char *name, const char *kind,
		     const char *status, json_t *extra, const char *fmt, ...)
{
	va_list ap;

	if (rows != NULL) {
		char key[32];
		size_t k = 0;
		json_t *row;

		for (const char *c = status; *c != '\0' && k + 1 < sizeof(key); c++)
			key[k++] = *c == ' ' ? '_' : (char)tolower((unsigned char)*c);
		key[k] = '\0';
		row = json_pack("{s:s, s:s, s:s}", "name", name, "kind", kind, "status", key);
		if (row != NULL && extra != NULL)
			json_object_update(row, extra);
		json_decref(extra);
		json_row(rows, row);
		return;
	}
	json_decref(extra);
	if (fmt == NULL) {
		printf("%-*s  %s\n", width, name, status);
		return;
	}
	printf("%-*s  %-9s  ", width, name, status);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static json_t *json_shape(int ndim, const uint64_t *shape)
{
	json_t *a = json_array();

	for (int d = 0; d < ndim; d++)
		json_array_append_new(a, json_integer((json_int_t)shape[d]));
	return a;
}

static bool same_layout(const herd_ckpt_tensor_info *a, const herd_ckpt_tensor_info *b)
{
	return a->dtype == b->dtype && a->ndim == b->ndim &&
	       memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(a->shape[0])) == 0;
}

/*
 * Compares one tensor present in both steps; prints its line.  Returns 0
 * when equal, 1 when it differs, -1 when it cannot be read.
 */
static int diff_tensor(herd_ckpt_reader *ra, herd_ckpt_reader *rb,
		       const herd_ckpt_tensor_info *a, const herd_ckpt_tensor_info *b, int width,
		       json_t *rows)
{
	size_t esz = herd_dtype_size(a->dtype), count, differ = 0;
	void *x = NULL, *y = NULL;
	double maxdiff = 0.0;
	bool nan = false;
	char sa[256], sb[256];

	if (!same_layout(a, b)) {
		shape_str(a->ndim, a->shape, sa, sizeof(sa));
		shape_str(b->ndim, b->shape, sb, sizeof(sb));
		diff_out(rows, width, a->name, "tensor", "reshaped",
			 json_pack("{s:{s:s, s:o}, s:{s:s, s:o}}", "a", "dtype",
				   herd_dtype_name(a->dtype), "shape", json_shape(a->ndim, a->shape),
				   "b", "dtype", herd_dtype_name(b->dtype), "shape",
				   json_shape(b->ndim, b->shape)),
			 "%s %s in A, %s %s in B", herd_dtype_name(a->dtype), sa,
			 herd_dtype_name(b->dtype), sb);
		return 1;
	}
	if (read_tensor(ra, a, &x) != HERD_OK || read_tensor(rb, b, &y) != HERD_OK) {
		free(x);
		return -1;
	}
	count = (size_t)a->bytes / esz;
	for (size_t i = 0; i < count; i++) {
		double d;

		if (memcmp((char *)x + i * esz, (char *)y + i * esz, esz) == 0)
			continue;
		differ++;
		d = fabs(elem_double(x, i, a->dtype) - elem_double(y, i, a->dtype));
		if (isnan(d))
			nan = true;
		else if (d > maxdiff)
			maxdiff = d;
	}
	free(x);
	free(y);
	if (differ == 0) {
		diff_out(rows, width, a->name, "tensor", "same", NULL, NULL);
		return 0;
	}
	diff_out(rows, width, a->name, "tensor", "changed",
		 json_pack("{s:I, s:I, s:f, s:b}", "differ", (json_int_t)differ, "count",
			   (json_int_t)count, "max_abs_diff", maxdiff, "nan", nan),
		 "%zu of %zu elements differ, max |a-b| %.9g%s", differ, count, maxdiff,
		 nan ? " (and NaN)" : "");
	return 1;
}

/*
 * The blobs of r by name, {name: index}, so that comparing the blobs of
 * two steps takes time in their number, not its square; NULL when memory
 * runs out.
 */
static json_t *blob_index(herd_ckpt_reader *r)
{
	json_t *index = json_object();

	for (size_t i = 0; i < herd_ckpt_reader_blob_count(r) && index != NULL; i++) {
		herd_ckpt_blob_info bi;

		if (herd_ckpt_reader_blob(r, i, &bi) == HERD_OK &&
		    json_object_set_new(index, bi.name, json_integer((json_int_t)i)) != 0) {
			json_decref(index);
			index = NULL;
		}
	}
	return index;
}

/* Compares blob name between the steps, rank by rank: 0 same, 1 differs.
 * b_index: blob_index(rb). */
static int diff_blob(herd_ckpt_reader *ra, herd_ckpt_reader *rb, const json_t *b_index,
		     const herd_ckpt_blob_info *a, int width, json_t *rows)
{
	size_t na = 0, nb = 0, changed = 0;
	const json_t *at = json_object_get(b_index, a->name);
	herd_ckpt_blob_info b;
	char *x = NULL, *y = NULL;
	int rc = 0;

	if (at == NULL || herd_ckpt_reader_blob(rb, (size_t)json_integer_value(at), &b) != HERD_OK) {
		diff_out(rows, width, a->name, "blob", "only in A", NULL, NULL);
		return 1;
	}
	if (a->ranks != b.ranks) {
		diff_out(rows, width, a->name, "blob", "changed",
			 json_pack("{s:i, s:i}", "ranks_a", a->ranks, "ranks_b", b.ranks),
			 "saved by %d ranks in A, %d in B", a->ranks, b.ranks);
		return 1;
	}
	x = malloc(HERD_CKPT_BLOB_MAX);
	y = malloc(HERD_CKPT_BLOB_MAX);
	if (x == NULL || y == NULL) {
		rc = -1;
		goto out;
	}
	for (int r = 0; r < a->ranks; r++) {
		if (herd_ckpt_reader_read_blob(ra, a->name, r, x, HERD_CKPT_BLOB_MAX, &na) != HERD_OK ||
		    herd_ckpt_reader_read_blob(rb, a->name, r, y, HERD_CKPT_BLOB_MAX, &nb) != HERD_OK) {
			rc = -1;
			goto out;
		}
		changed += na != nb || memcmp(x, y, na) != 0;
	}
	if (changed == 0)
		diff_out(rows, width, a->name, "blob", "same", NULL, NULL);
	else
		diff_out(rows, width, a->name, "blob", "changed",
			 json_pack("{s:I, s:i}", "ranks_differ", (json_int_t)changed, "ranks",
				   a->ranks),
			 "the bytes of %zu of %d ranks differ", changed, a->ranks);
	rc = changed > 0;
out:
	free(x);
	free(y);
	return rc;
}

static int ckpt_diff(int argc, char **argv)
{
	herd_ckpt_reader *ra = NULL, *rb = NULL;
	json_t *rows = NULL, *a_blobs = NULL, *b_blobs = NULL;
	int64_t sa, sb;
	int width = 4, differs = 0, rc = SHELL_EXIT_USAGE;

	if (argc != 3)
		return usage_error("diff takes a directory and two steps%s", "");
	if (parse_step(argv[1], &sa) != 0)
		return usage_error("'%s' is not a step (a number or 'latest')", argv[1]);
	if (parse_step(argv[2], &sb) != 0)
		return usage_error("'%s' is not a step (a number or 'latest')", argv[2]);
	if (herd_ckpt_reader_open(&ra, argv[0], sa) != HERD_OK ||
	    herd_ckpt_reader_open(&rb, argv[0], sb) != HERD_OK) {
		shell_message("herd ckpt", shell_last_error());
		goto out;
	}
	for (int pass = 0; pass < 2; pass++) {
		herd_ckpt_reader *r = pass ? rb : ra;

		for (size_t i = 0; i < herd_ckpt_reader_tensor_count(r); i++) {
			herd_ckpt_tensor_info ti;

			if (herd_ckpt_reader_tensor(r, i, &ti) == HERD_OK &&
			    (int)strlen(ti.name) > width)
				width = (int)strlen(ti.name);
		}
	}
	if (json)
		rows = json_array();
	else
		printf("A: step %" PRId64 ", B: step %" PRId64 " of %s\n",
		       herd_ckpt_reader_step(ra), herd_ckpt_reader_step(rb), argv[0]);
	for (size_t i = 0; i < herd_ckpt_reader_tensor_count(ra); i++) {
		herd_ckpt_tensor_info a, b;
		size_t j;
		int d;

		if (herd_ckpt_reader_tensor(ra, i, &a) != HERD_OK)
			continue;
		if (herd_ckpt_reader_find(rb, a.name, &j) != HERD_OK ||
		    herd_ckpt_reader_tensor(rb, j, &b) != HERD_OK) {
			diff_out(rows, width, a.name, "tensor", "only in A", NULL, NULL);
			differs = 1;
			continue;
		}
		d = diff_tensor(ra, rb, &a, &b, width, rows);
		if (d < 0) {
			fflush(stdout);
			shell_message("herd ckpt", shell_last_error());
			goto out;
		}
		differs |= d;
	}
	for (size_t i = 0; i < herd_ckpt_reader_tensor_count(rb); i++) {
		herd_ckpt_tensor_info b;
		size_t j;

		if (herd_ckpt_reader_tensor(rb, i, &b) == HERD_OK &&
		    herd_ckpt_reader_find(ra, b.name, &j) != HERD_OK) {
			diff_out(rows, width, b.name, "tensor", "only in B", NULL, NULL);
			differs = 1;
		}
	}
	a_blobs = blob_index(ra);
	b_blobs = blob_index(rb);
	if (a_blobs == NULL || b_blobs == NULL) {
		fflush(stdout);
		shell_message("herd ckpt", "out of memory comparing the blobs");
		goto out;
	}
	for (size_t i = 0; i < herd_ckpt_reader_blob_count(ra); i++) {
		herd_ckpt_blob_info a;
		int d;

		if (herd_ckpt_reader_blob(ra, i, &a) != HERD_OK)
			continue;
		d = diff_blob(ra, rb, b_blobs, &a, width, rows);
		if (d < 0) {
			fflush(stdout);
			shell_message("herd ckpt", shell_last_error());
			goto out;
		}
		differs |= d;
	}
	for (size_t i = 0; i < herd_ckpt_reader_blob_count(rb); i++) {
		herd_ckpt_blob_info b;

		if (herd_ckpt_reader_blob(rb, i, &b) != HERD_OK)
			continue;
		if (json_object_get(a_blobs, b.name) == NULL) {
			diff_out(rows, width, b.name, "blob", "only in B", NULL, NULL);
			differs = 1;
		}
	}
	if (rows != NULL) {
		json_t *doc = json_pack("{s:i, s:s, s:I, s:I, s:b, s:o}", "v", 1, "dir", argv[0],
					"a", (json_int_t)herd_ckpt_reader_step(ra), "b",
					(json_int_t)herd_ckpt_reader_step(rb), "same", !differs,
					"entries", rows);

		rows = NULL;
		if (shell_json_emit(doc) != 0) {
			rc = SHELL_EXIT_FAILURE;
			goto out;
		}
	}
	rc = differs ? 1 : 0;
out:
	json_decref(rows);
	json_decref(a_blobs);
	json_decref(b_blobs);
	herd_ckpt_reader_free(ra);
	herd_ckpt_reader_free(rb);
	return rc;
}

/* ---------------------------------------------------------- safetensors */

static bool host_is_little_endian(void)
{
	const uint16_t one = 1;
	uint8_t b;

	memcpy(&b, &one, 1);
	return b == 1;
}

static int write_all(int fd, const void *p, size_t n, const char *path)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "herd ckpt: cannot write %s: %s\n", path,
				w < 0 ? strerror(errno) : "no progress");
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * What `herd ckpt import` keeps of a safetensors file beyond its tensors,
 * as a blob saved by rank 0: {"metadata": the file's __metadata__,
 * "scalars": [the names of its 0-d tensors, saved with shape [1]]}.
 */
#define KEPT_BLOB "safetensors.header"

/* The kept header of the reader's step, or NULL when it has none. */
static json_t *kept_header(herd_ckpt_reader *r)
{
	size_t len = 0;
	json_t *v = NULL;
	char *buf;

	/* Its size first (a blob that is not there: HERD_ENOTFOUND). */
	if (herd_ckpt_reader_read_blob(r, KEPT_BLOB, 0, NULL, 0, &len) != HERD_EINVAL || len == 0)
		return NULL;
	buf = malloc(len);
	if (buf != NULL && herd_ckpt_reader_read_blob(r, KEPT_BLOB, 0, buf, len, &len) == HERD_OK)
		v = json_loadb(buf, len, 0, NULL);
	free(buf);
	herd_clear_error();
	return v;
}

/* The reader's blobs but the kept header, which an export writes back. */
static size_t other_blobs(herd_ckpt_reader *r)
{
	size_t n = 0;

	for (size_t i = 0; i < herd_ckpt_reader_blob_count(r); i++) {
		herd_ckpt_blob_info bi;

		if (herd_ckpt_reader_blob(r, i, &bi) == HERD_OK && strcmp(bi.name, KEPT_BLOB) != 0)
			n++;
	}
	return n;
}

/* The strings of the JSON array list as the keys of an object, for
 * lookups in constant time; NULL when memory runs out. */
static json_t *name_set(const json_t *list)
{
	json_t *set = json_object(), *v;
	size_t i;

	json_array_foreach(list, i, v)
		if (set != NULL && json_is_string(v) &&
		    json_object_set_new(set, json_string_value(v), json_true()) != 0) {
			json_decref(set);
			set = NULL;
		}
	return set;
}

/*
 * The header of an export: every tensor of the reader, in its order, at
 * consecutive offsets, and the step in __metadata__; padded with spaces to
 * a multiple of 8 bytes.  *out is freed with free.
 */
static int export_header(herd_ckpt_reader *r, const char *dir, char **out, size_t *len)
{
	json_t *root = json_object(), *meta = NULL, *kept = kept_header(r), *scalars;
	uint64_t at = 0;
	char step[32], *text = NULL;
	size_t n, padded;
	int rc = -1;

	const char *key;
	json_t *v;

	meta = json_object();
	scalars = name_set(json_object_get(kept, "scalars"));
	if (root == NULL || meta == NULL || scalars == NULL)
		goto nomem;
	snprintf(step, sizeof(step), "%" PRId64, herd_ckpt_reader_step(r));
	json_object_set_new(meta, "herd.step", json_string(step));
	snprintf(step, sizeof(step), "%d", herd_ckpt_reader_ranks(r));
	json_object_set_new(meta, "herd.ranks", json_string(step));
	/* What an import kept of the file's own metadata (herd's keys are
	 * this step's), and which tensors were scalars. */
	json_object_foreach(json_object_get(kept, "metadata"), key, v)
		if (strncmp(key, "herd.", 5) != 0 && json_is_string(v))
			json_object_set(meta, key, v);
	json_object_set(root, "__metadata__", meta);
	for (size_t i = 0; i < herd_ckpt_reader_tensor_count(r); i++) {
		herd_ckpt_tensor_info ti;
		json_t *t, *shape;

		if (herd_ckpt_reader_tensor(r, i, &ti) != HERD_OK)
			goto out;
		if (st_dtype_name(ti.dtype) == NULL) {
			fprintf(stderr, "herd ckpt: %s: tensor \"%s\" is %s, which safetensors "
				"cannot hold\n", dir, ti.name, herd_dtype_name(ti.dtype));
			goto out;
		}
		t = json_object();
		shape = json_array();
		if (t == NULL || shape == NULL || json_object_set_new(root, ti.name, t) != 0) {
			json_decref(shape);
			goto nomem;
		}
		json_object_set_new(t, "dtype", json_string(st_dtype_name(ti.dtype)));
		if (!(ti.ndim == 1 && ti.shape[0] == 1 && json_object_get(scalars, ti.name) != NULL))
			for (int d = 0; d < ti.ndim; d++)
				json_array_append_new(shape, json_integer((json_int_t)ti.shape[d]));
		json_object_set_new(t, "shape", shape);
		json_object_set_new(t, "data_offsets",
				    json_pack("[I, I]", (json_int_t)at,
					      (json_int_t)(at + ti.bytes)));
		at += ti.bytes;
	}
	text = json_dumps(root, JSON_COMPACT);
	if (text == NULL)
		goto nomem;
	n = strlen(text);
	padded = (n + 7) / 8 * 8;
	*out = malloc(padded + 1);
	if (*out == NULL)
		goto nomem;
	memcpy(*out, text, n);
	memset(*out + n, ' ', padded - n);
	(*out)[padded] = '\0';
	*len = padded;
	rc = 0;
	goto out;
nomem:
	fprintf(stderr, "herd ckpt: %s: out of memory building the safetensors header\n", dir);
out:
	free(text);
	json_decref(scalars);
	json_decref(meta);
	json_decref(root);
	json_decref(kept);
	return rc;
}

/*
 * The temporary file of an export in progress, for the signal handler that
 * removes it when SIGINT, SIGTERM or SIGHUP ends the export (unlink is
 * async-signal-safe); "" when there is none.
 */
static char export_tmp[4096];

static void export_interrupted(int sig)
{
	if (export_tmp[0] != '\0')
		unlink(export_tmp);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Installs (on) or removes the handler above for the export's signals. */
static void export_guard(bool on)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], on ? export_interrupted : SIG_DFL);
}

static int ckpt_export(const char *dir, const char *step_arg, const char *out_path)
{
	herd_ckpt_reader *r = NULL;
	char *header = NULL, tmp[4096];
	void *buf = NULL;
	size_t hlen = 0;
	uint8_t len8[8];
	struct stat sb;
	int64_t step;
	int fd = -1, rc = SHELL_EXIT_FAILURE;

	if (parse_step(step_arg, &step) != 0)
		return usage_error("'%s' is not a step (a number or 'latest')", step_arg);
	if (!host_is_little_endian()) {
		shell_message("herd ckpt", "export needs a little-endian host");
		return SHELL_EXIT_FAILURE;
	}
	if (herd_ckpt_reader_open(&r, dir, step) != HERD_OK)
		return failure();
	if (export_header(r, dir, &header, &hlen) != 0)
		goto out;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", out_path, (long)getpid()) >=
	    sizeof(tmp)) {
		fprintf(stderr, "herd ckpt: %s: path too long\n", out_path);
		goto out;
	}
	/* A device, a FIFO or a link at OUT is not replaced by the rename. */
	if (lstat(out_path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		fprintf(stderr, "herd ckpt: %s exists and is not a regular file: export writes a "
			"new file and replaces only a regular one (remove it first, or name "
			"another path)\n", out_path);
		goto out;
	}
	snprintf(export_tmp, sizeof(export_tmp), "%s", tmp);
	export_guard(true);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "herd ckpt: cannot create %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
	if (write_all(fd, len8, 8, tmp) != 0 || write_all(fd, header, hlen, tmp) != 0)
		goto out;
	for (size_t i = 0; i < herd_ckpt_reader_tensor_count(r); i++) {
		herd_ckpt_tensor_info ti;

		if (herd_ckpt_reader_tensor(r, i, &ti) != HERD_OK ||
		    read_tensor(r, &ti, &buf) != HERD_OK) {
			shell_message("herd ckpt", shell_last_error());
			goto out;
		}
		if (write_all(fd, buf, (size_t)ti.bytes, tmp) != 0)
			goto out;
		free(buf);
		buf = NULL;
	}
	if (fsync(fd) != 0 || close(fd) != 0) {
		fd = -1;
		fprintf(stderr, "herd ckpt: cannot write %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, out_path) != 0) {
		fprintf(stderr, "herd ckpt: cannot rename %s to %s: %s\n", tmp, out_path,
			strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	export_tmp[0] = '\0';
	if (other_blobs(r) > 0)
		fprintf(stderr, "herd ckpt: note: the %zu blobs of step %" PRId64 " are not "
			"exported (safetensors holds tensors only)\n", other_blobs(r),
			herd_ckpt_reader_step(r));
	printf("%s: step %" PRId64 " of %s, %zu tensors\n", out_path, herd_ckpt_reader_step(r),
	       dir, herd_ckpt_reader_tensor_count(r));
	rc = SHELL_EXIT_OK;
out:
	if (fd >= 0)
		close(fd);
	if (rc != SHELL_EXIT_OK && tmp[0] != '\0')
		unlink(tmp);
	export_guard(false);
	export_tmp[0] = '\0';
	free(buf);
	free(header);
	herd_ckpt_reader_free(r);
	return rc;
}

/* The kept header of an imported file (see KEPT_BLOB), or NULL when the
 * file has neither metadata nor scalars.  Freed with free. */
static char *kept_encode(const struct st_file *f)
{
	json_t *meta = json_object(), *scalars = json_array(), *v;
	const char *key;
	char *text = NULL;

	/* herd's own keys name the step they were exported from, not this one. */
	json_object_foreach(json_object_get(f->header, "__metadata__"), key, v)
		if (strncmp(key, "herd.", 5) != 0 && meta != NULL)
			json_object_set(meta, key, v);
	for (size_t i = 0; i < f->n && scalars != NULL; i++)
		if (f->entries[i].scalar)
			json_array_append_new(scalars, json_string(f->entries[i].name));
	if (meta != NULL && scalars != NULL &&
	    (json_object_size(meta) > 0 || json_array_size(scalars) > 0)) {
		json_t *doc = json_pack("{s:O, s:O}", "metadata", meta, "scalars", scalars);

		text = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(doc);
	}
	json_decref(meta);
	json_decref(scalars);
	return text;
}

static int ckpt_import(const char *path, const char *dir, const char *step_arg)
{
	struct st_file f;
	char *kept = NULL;
	herd_ckpt *ck = NULL;
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	int64_t step = 0;
	int rc = SHELL_EXIT_FAILURE;

	if (step_arg != NULL && (parse_step(step_arg, &step) != 0 || step < 0))
		return usage_error("'%s' is not a step number", step_arg);
	if (!host_is_little_endian()) {
		shell_message("herd ckpt", "import needs a little-endian host");
		return SHELL_EXIT_FAILURE;
	}
	if (st_open(&f, path) != 0) {
		fprintf(stderr, "herd ckpt: %s\n", f.error);
		st_close(&f);
		return SHELL_EXIT_USAGE;
	}
	if (herd_ckpt_open(&ck, dir, NULL, &o) != HERD_OK) {
		shell_message("herd ckpt", shell_last_error());
		goto out;
	}
	for (size_t i = 0; i < f.n; i++) {
		const struct st_entry *e = &f.entries[i];

		/* The library only reads registered data while saving. */
		if (herd_ckpt_add_tensor(ck, e->name, (void *)(f.data + e->begin), e->dtype,
					 e->ndim, e->shape, NULL, NULL) != HERD_OK) {
			fprintf(stderr, "herd ckpt: %s: %s\n", path, shell_last_error());
			goto out;
		}
	}
	kept = kept_encode(&f);
	if (kept != NULL && herd_ckpt_add_blob(ck, KEPT_BLOB, kept, strlen(kept),
					       HERD_CKPT_BLOB_RANK0) != HERD_OK) {
		fprintf(stderr, "herd ckpt: %s: %s\n", path, shell_last_error());
		goto out;
	}
	if (herd_ckpt_save(ck, step) != HERD_OK) {
		fprintf(stderr, "herd ckpt: importing %s: %s\n", path, shell_last_error());
		goto out;
	}
	printf("%s/step-%012" PRId64 ": %zu tensors from %s\n", dir, step, f.n, path);
	rc = SHELL_EXIT_OK;
out:
	if (ck != NULL && herd_ckpt_wait(ck) != HERD_OK && rc == SHELL_EXIT_OK)
		rc = failure();
	herd_ckpt_free(ck);
	st_close(&f);
	free(kept);
	return rc;
}

/* --format FORMAT (only safetensors) anywhere among the arguments; removes
 * it from argv.  -1 on a bad format, else the new argc. */
static int take_format(int argc, char **argv)
{
	int n = 0;

	for (int i = 0; i < argc; i++) {
		const char *v = NULL;

		if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
			v = argv[++i];
		else if (strncmp(argv[i], "--format=", 9) == 0)
			v = argv[i] + 9;
		else if (strcmp(argv[i], "--format") == 0)
			return -1;
		if (v == NULL)
			argv[n++] = argv[i];
		else if (strcmp(v, "safetensors") != 0)
			return -1;
	}
	return n;
}

/* ------------------------------------------------------------ interval */

/* One TIER=SAVE,LOST[,BUSY] of herd ckpt interval. */
struct tier {
	char name[64];
	double save_s, lost_s, busy_s;
};

static int ckpt_interval(int argc, char **argv)
{
	herd_ckpt_interval_model m = { 0 };
	struct tier *tiers;
	json_t *rows = NULL;
	int ntiers = 0;
	bool have_mttf = false;

	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--mttf") == 0 && v != NULL) {
			if (herd_duration_parse(v, &m.mttf_s) != HERD_OK)
				return usage_error("--mttf '%s' is not a duration (3600, 90m, 8h, 2d)", v);
			have_mttf = true;
			argv[i] = argv[i + 1] = NULL;
			i++;
		} else if (strcmp(argv[i], "--max-overhead") == 0 && v != NULL) {
			char *end;

			m.max_overhead = strtod(v, &end);
			if (*end != '\0' || !(m.max_overhead > 0 && m.max_overhead < 1))
				return usage_error("--max-overhead '%s' is not a fraction between 0 and 1",
						   v);
			argv[i] = argv[i + 1] = NULL;
			i++;
		} else if (argv[i][0] == '-') {
			return usage_error("interval: option '%s' is unknown or lacks its value",
					   argv[i]);
		}
	}
	if (!have_mttf)
		return usage_error("interval needs --mttf TIME, the job's mean time to failure%s",
				   "");
	/* TIER=SAVE,LOST[,BUSY], read once. */
	tiers = calloc((size_t)argc + 1, sizeof(*tiers));
	if (tiers == NULL) {
		shell_message("herd ckpt", "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	for (int i = 0; i < argc; i++) {
		struct tier *t = &tiers[ntiers];
		const char *eq = argv[i] != NULL ? strchr(argv[i], '=') : NULL;
		char extra;
		int got;

		if (argv[i] == NULL)
			continue;
		got = eq != NULL && eq > argv[i] && eq - argv[i] < (ptrdiff_t)sizeof(t->name)
			      ? sscanf(eq + 1, "%lf,%lf,%lf%c", &t->save_s, &t->lost_s, &t->busy_s,
				       &extra) : 0;
		if (got != 2 && got != 3) {
			free(tiers);
			return usage_error("'%s' is not TIER=SAVE,LOST[,BUSY] (seconds: "
					   "storage=4.2,95)", argv[i]);
		}
		memcpy(t->name, argv[i], (size_t)(eq - argv[i]));
		ntiers++;
	}
	if (ntiers == 0) {
		free(tiers);
		return usage_error("interval: give at least one TIER=SAVE,LOST (peers=0.3,20)%s", "");
	}
	if (json) {
		rows = json_array();
	} else {
		printf("mean time to failure %.0f s; saves may stall at most %.1f%% of the time\n",
		       m.mttf_s, 100 * (m.max_overhead > 0 ? m.max_overhead : 0.035));
		printf("%-10s %8s %8s %9s %11s %9s %8s  %s\n", "tier", "save s", "lost s", "Young s",
		       "interval s", "overhead", "ETTR", "set by");
	}
	for (int i = 0; i < ntiers; i++) {
		const struct tier *t = &tiers[i];
		herd_ckpt_interval_choice c;

		m.save_s = t->save_s;
		m.lost_s = t->lost_s;
		m.min_interval_s = t->busy_s;
		if (herd_ckpt_interval(&m, &c) != HERD_OK) {
			json_decref(rows);
			free(tiers);
			return failure();
		}
		if (rows != NULL) {
			json_array_append_new(rows, json_pack(
				"{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s?}", "tier", t->name,
				"save_s", m.save_s, "lost_s", m.lost_s, "busy_s", m.min_interval_s,
				"young_s", c.young_s, "optimum_s", c.optimum_s, "interval_s",
				c.interval_s, "overhead", c.overhead, "ettr", c.ettr, "bound",
				c.bound[0] ? c.bound : NULL));
			continue;
		}
		printf("%-10s %8.2f %8.1f %9.1f %11.1f %8.2f%% %8.4f  %s\n", t->name, m.save_s,
		       m.lost_s, c.young_s, c.interval_s, 100 * c.overhead, c.ettr,
		       c.bound[0] ? c.bound : "the optimum");
	}
	free(tiers);
	if (rows != NULL) {
		json_t *doc = json_pack("{s:f, s:f, s:o}", "mttf_s", m.mttf_s, "max_overhead",
					m.max_overhead > 0 ? m.max_overhead : 0.035, "tiers", rows);

		json_dumpf(doc, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(doc);
	}
	return SHELL_EXIT_OK;
}

/* ---------------------------------------------------------------- hold */

static int ckpt_hold(int argc, char **argv)
{
	const char *bind = NULL;
	uint64_t budget = 0;
	long steps = 0;
	char *end;

	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--bind") == 0 && v != NULL) {
			bind = v;
		} else if (strcmp(argv[i], "--budget") == 0 && v != NULL) {
			if (herd_size_parse(v, &budget) != HERD_OK || budget == 0)
				return usage_error("--budget '%s' is not a size (256M, 4G)", v);
		} else if (strcmp(argv[i], "--steps") == 0 && v != NULL) {
			steps = strtol(v, &end, 10);
			if (*end != '\0' || steps < 1 || steps > 2)
				return usage_error("--steps '%s' is not 1 or 2", v);
		} else if (v == NULL && argv[i][0] == '-') {
			return usage_error("option '%s' needs a value", argv[i]);
		} else {
			return usage_error("hold: unrecognized argument '%s'", argv[i]);
		}
		i++;
	}
	if (herd_agent_ckpt_hold(STDIN_FILENO, STDOUT_FILENO, bind, budget, (int)steps) != HERD_OK)
		return failure();
	return SHELL_EXIT_OK;
}

/* ---------------------------------------------------------------- main */

int cmd_ckpt(int argc, char **argv)
{
	const char *sub;

	if (argc < 2)
		return usage_error("which command: ls, verify, inspect, diff, export, import, hold or "
				   "interval?%s",
				   "");
	sub = argv[1];
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(ckpt_usage, stdout);
			return SHELL_EXIT_OK;
		}
	argc -= 2;
	argv += 2;
	if (strcmp(sub, "hold") == 0)
		return ckpt_hold(argc, argv);
	if (strcmp(sub, "interval") == 0) {
		int n = 0;

		for (int i = 0; i < argc; i++)
			if (strcmp(argv[i], "--json") == 0)
				json = true;
			else
				argv[n++] = argv[i];
		return ckpt_interval(n, argv);
	}
	if (strcmp(sub, "export") == 0 || strcmp(sub, "import") == 0) {
		argc = take_format(argc, argv);
		if (argc < 0)
			return usage_error("--format takes 'safetensors' (the one format)%s", "");
	}
	{
		int n = 0;
		bool listing = strcmp(sub, "ls") == 0 || strcmp(sub, "verify") == 0 ||
			       strcmp(sub, "inspect") == 0 || strcmp(sub, "diff") == 0;

		for (int i = 0; i < argc; i++) {
			if (listing && strcmp(argv[i], "--json") == 0)
				json = true;
			else if (strcmp(sub, "ls") == 0 && strcmp(argv[i], "--verify") == 0)
				ls_verify = true;
			else if (argv[i][0] == '-' && argv[i][1] != '\0')
				return usage_error("unrecognized option '%s'", argv[i]);
			else
				argv[n++] = argv[i];
		}
		argc = n;
	}
	if (strcmp(sub, "ls") == 0)
		return ckpt_ls(argc, argv);
	if (strcmp(sub, "verify") == 0)
		return ckpt_verify(argc, argv);
	if (strcmp(sub, "inspect") == 0)
		return ckpt_inspect(argc, argv);
	if (strcmp(sub, "diff") == 0)
		return ckpt_diff(argc, argv);
	if (strcmp(sub, "export") == 0) {
		if (argc != 3)
			return usage_error("export takes DIR STEP OUT%s", "");
		return ckpt_export(argv[0], argv[1], argv[2]);
	}
	if (strcmp(sub, "import") == 0) {
		if (argc != 2 && argc != 3)
			return usage_error("import takes FILE DIR [STEP]%s", "");
		return ckpt_import(argv[0], argv[1], argc == 3 ? argv[2] : NULL);
	}
	return usage_error("unknown command '%s' (ls, verify, inspect, diff, export, import, hold, "
			   "interval)", sub);
}
