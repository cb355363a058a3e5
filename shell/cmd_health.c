/*
 * shell/cmd_health.c - herd health: per-GPU checks in DCGM-style levels
 * (herd/health.h), as a table or JSON.  Exit status 0 when every check of
 * every GPU passed (or warned), 1 when one failed, 2 when nothing could be
 * checked or some check could not run.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd.h"
#include "shell.h"

static const char health_usage[] =
	"usage: herd health [--level 1|2] [--seconds S] [--json]\n"
	"\n"
	"Checks every GPU of this node and says pass, warn, fail or skip for each check.\n"
	"  --level 1     the driver's view (ECC, memory rows, temperature, power, clocks,\n"
	"                clock events, PCIe link) and the copy-bandwidth probe (default)\n"
	"  --level 2     level 1 and a burn: float32 matrix products through cuBLAS,\n"
	"                every one checked\n"
	"  (each level)  the Xid events the kernel log holds for each GPU (/dev/kmsg,\n"
	"                or the file HERD_KERNEL_LOG names): fail for an Xid of a failing\n"
	"                GPU (48, 63, 64, 74, 79, 94, 95, ...), warn for the others\n"
	"  --seconds S   the burn's length per GPU (default 5, at most 3600)\n"
	"  --json        one JSON document instead of the table\n"
	"Exit status:\n"
	"  0    no check failed or was skipped (warnings aside)\n"
	"  1    some check failed\n"
	"  2    some check, or every GPU (no driver: no GPU checked), could not\n"
	"       be checked; or a usage error\n";

static int exit_status(const herd_health_report *r)
{
	int skipped = r->ngpus == 0;

	for (size_t g = 0; g < r->ngpus; g++) {
		if (r->gpus[g].result == HERD_HEALTH_FAIL)
			return 1;
		for (size_t c = 0; c < r->gpus[g].nchecks; c++)
			skipped |= r->gpus[g].checks[c].result == HERD_HEALTH_SKIP;
	}
	return skipped ? 2 : 0;
}

static void print_table(const herd_health_report *r)
{
	if (r->ngpus == 0) {
		printf("no GPU checked: %s\n", r->note);
		return;
	}
	for (size_t g = 0; g < r->ngpus; g++) {
		const herd_health_gpu *h = &r->gpus[g];

		printf("GPU%d  %s  %s  %s: %s\n", h->index, h->name, h->bus_id, h->uuid,
		       herd_health_result_name(h->result));
		for (size_t c = 0; c < h->nchecks; c++)
			printf("  %-13s %-4s  %s\n", h->checks[c].name,
			       herd_health_result_name(h->checks[c].result), h->checks[c].detail);
	}
}

static json_t *report_json(const herd_health_report *r, int status)
{
	json_t *doc = json_object(), *gpus = json_array();

	json_object_set_new(doc, "level", json_integer(r->level));
	json_object_set_new(doc, "exit_status", json_integer(status));
	json_object_set_new(doc, "note", r->ngpus == 0 ? json_string(r->note) : json_null());
	for (size_t g = 0; g < r->ngpus; g++) {
		const herd_health_gpu *h = &r->gpus[g];
		json_t *gj = json_object(), *checks = json_array();

		json_object_set_new(gj, "index", json_integer(h->index));
		json_object_set_new(gj, "name", json_string(h->name));
		json_object_set_new(gj, "bus_id", json_string(h->bus_id));
		json_object_set_new(gj, "uuid", json_string(h->uuid));
		json_object_set_new(gj, "result", json_string(herd_health_result_name(h->result)));
		for (size_t c = 0; c < h->nchecks; c++) {
			const herd_health_check *k = &h->checks[c];
			json_t *cj = json_object();

			json_object_set_new(cj, "name", json_string(k->name));
			json_object_set_new(cj, "result", json_string(herd_health_result_name(k->result)));
			json_object_set_new(cj, "value", json_real(k->value));
			json_object_set_new(cj, "unit", json_string(k->unit));
			json_object_set_new(cj, "detail", json_string(k->detail));
			json_array_append_new(checks, cj);
		}
		json_object_set_new(gj, "checks", checks);
		json_array_append_new(gpus, gj);
	}
	json_object_set_new(doc, "gpus", gpus);
	return doc;
}

int cmd_health(int argc, char **argv)
{
	herd_health_opts o = { .version = HERD_HEALTH_OPTS_VERSION, .level = 1 };
	herd_health_report *r = NULL;
	int json = 0, status;

	for (int i = 1; i < argc; i++) {
		const char *v;
		char *end;
		int rc;

		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(health_usage, stdout);
			return SHELL_EXIT_OK;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if ((rc = shell_option_value(argc, argv, &i, "--level", &v)) != 0) {
			if (rc < 0 || shell_parse_int(v, 1, 2, &o.level) != 0)
				return shell_usage_error("health", "--level %s: expected 1 or 2",
							 rc < 0 ? "needs a value" : v);
		} else if ((rc = shell_option_value(argc, argv, &i, "--seconds", &v)) != 0) {
			if (rc < 0)
				return shell_usage_error("health", "option '%s' needs a value",
							 "--seconds");
			o.burn_seconds = strtod(v, &end);
			if (end == v || *end != '\0' || !(o.burn_seconds > 0 &&
							   o.burn_seconds <= 3600))
				return shell_usage_error("health", "--seconds %s: expected more than 0 "
							 "and at most 3600", v);
		} else {
			return shell_usage_error("health", argv[i][0] == '-' ? "unrecognized option '%s'"
								       : "unexpected argument '%s'",
						 argv[i]);
		}
	}
	if (herd_health_run(&r, &o) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		return 2;
	}
	status = exit_status(r);
	if (json) {
		if (shell_json_emit(report_json(r, status)) != 0)
			status = 2;
	} else {
		print_table(r);
	}
	herd_health_free(r);
	return status;
}
