/*
 * sdk/topo/health.c - herd health: the driver's checks from nvml.c, then on
 * each GPU the CUDA runtime can reach the copy-bandwidth probe and, at
 * level 2, the burn (kernels/), and last the Xid events the kernel log
 * holds for each GPU (those of the checks just run included).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd_config.h"
#include "kernel_log.h"
#include "probe.h"

#if HERD_HAVE_CUDA
#include "kernels.h"
#endif

#define DEFAULT_BURN_SECONDS 5.0
#define DEFAULT_BURN_ORDER 8192
#define DEFAULT_COPY_BYTES ((size_t)1 << 30)
#define COPY_REPEATS 10

/* A measured rate against what it is compared with: under half is a
 * fault, under 70% worth a look. */
#define RATE_FAIL 0.5
#define RATE_WARN 0.7

const char *herd_health_result_name(herd_health_result r)
{
	switch (r) {
	case HERD_HEALTH_PASS: return "pass";
	case HERD_HEALTH_WARN: return "warn";
	case HERD_HEALTH_FAIL: return "fail";
	case HERD_HEALTH_SKIP: return "skip";
	}
	return "unknown";
}

herd_status herd__health_add(herd_health_gpu *g, const char *name, herd_health_result result,
			     double value, const char *unit, const char *fmt, ...)
{
	herd_health_check *checks, *c;
	va_list ap;

	checks = realloc(g->checks, (g->nchecks + 1) * sizeof(*checks));
	if (checks == NULL)
		return herd__error(HERD_ENOMEM, "out of memory recording a health check");
	g->checks = checks;
	c = &checks[g->nchecks++];
	memset(c, 0, sizeof(*c));
	herd__strlcpy(c->name, name, sizeof(c->name));
	herd__strlcpy(c->unit, unit, sizeof(c->unit));
	c->result = result;
	c->value = value;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	return HERD_OK;
}

#if HERD_HAVE_CUDA

/* A check that failed to run: SKIP where no GPU can be used, FAIL else. */
static herd_status add_error(herd_health_gpu *g, const char *name, herd_status st)
{
	return herd__health_add(g, name, st == HERD_ENODEV || st == HERD_EUNAVAIL ?
				HERD_HEALTH_SKIP : HERD_HEALTH_FAIL, 0, "", "%s",
				herd_last_error());
}

static herd_status add_rate(herd_health_gpu *g, const char *name, double gbps, double ref,
			    const char *against)
{
	double frac = ref > 0 ? gbps / ref : 0;

	if (ref <= 0)
		return herd__health_add(g, name, HERD_HEALTH_PASS, gbps, "GB/s",
					"%.1f GB/s (%s unknown)", gbps, against);
	return herd__health_add(g, name, frac < RATE_FAIL ? HERD_HEALTH_FAIL :
				frac < RATE_WARN ? HERD_HEALTH_WARN : HERD_HEALTH_PASS, gbps,
				"GB/s", "%.1f GB/s, %.0f%% of %s's %.1f", gbps, 100 * frac, against,
				ref);
}

static herd_status cuda_checks(herd_health_gpu *g, const herd__health_ref *ref,
			       const herd_health_opts *o)
{
	static const struct {
		herd__kcopy kind;
		const char *name;
	} copies[] = {
		{ HERD__KCOPY_D2D, "copy-d2d" },
		{ HERD__KCOPY_H2D, "copy-h2d" },
		{ HERD__KCOPY_D2H, "copy-d2h" },
	};
	int dev = herd__cudart_device_of(g->bus_id);
	herd_status st;

	if (dev < 0) {
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");

		return herd__health_add(g, "cuda", HERD_HEALTH_SKIP, 0, "", "the CUDA runtime "
					"does not see this GPU%s%s", vis ? ": CUDA_VISIBLE_DEVICES=" : "",
					vis ? vis : "");
	}
	st = herd__k_set_device(dev);
	if (st != HERD_OK)
		return add_error(g, "cuda", st);
	for (size_t i = 0; i < sizeof(copies) / sizeof(copies[0]); i++) {
		bool d2d = copies[i].kind == HERD__KCOPY_D2D;
		double gbps = 0;

		st = herd__k_copy_bandwidth(copies[i].kind, d2d ? o->copy_bytes : o->copy_bytes / 4,
					    COPY_REPEATS, &gbps);
		HERD_CHECK(st == HERD_OK ? add_rate(g, copies[i].name, gbps,
						    d2d ? ref->memory_gbps : ref->link_gbps,
						    d2d ? "the memory" : "the PCIe link")
					 : add_error(g, copies[i].name, st));
	}
	if (o->level >= 2) {
		herd__kburn b;

		st = herd__k_burn(o->burn_seconds, o->burn_order, &b);
		if (st != HERD_OK)
			return add_error(g, "burn", st);
		HERD_CHECK(herd__health_add(g, "burn", b.wrong > 0 || b.iterations == 0 ?
					    HERD_HEALTH_FAIL : HERD_HEALTH_PASS, b.tflops,
					    "TFLOP/s", "%ld float32 products of order %d in %.1f s, "
					    "%.1f TFLOP/s, %llu elements wrong", b.iterations, b.n,
					    b.seconds, b.tflops, (unsigned long long)b.wrong));
	}
	return HERD_OK;
}

#else /* !HERD_HAVE_CUDA */

static herd_status cuda_checks(herd_health_gpu *g, const herd__health_ref *ref,
			       const herd_health_opts *o)
{
	(void)ref;
	(void)o;
	return herd__health_add(g, "cuda", HERD_HEALTH_SKIP, 0, "", "libherd was built without "
				"CUDA: no bandwidth probe or burn");
}

#endif /* HERD_HAVE_CUDA */

/* ---- Xid events ----------------------------------------------------------------- */

/*
 * The Xids that say the GPU or its memory failed (NVIDIA's Xid catalogue):
 * a double-bit ECC error, row remapping failures, an NVLink error, the GPU
 * off the bus, uncontained ECC errors, GSP and firmware faults.  Others
 * (13 graphics engine exception, 31 memory page fault, 43 a context
 * stopped, ...) are mostly an application's faults: worth a look.
 */
static const struct {
	int code;
	const char *what;
} xid_fatal[] = {
	{ 48, "double-bit ECC error" },      { 61, "internal micro-controller breakpoint" },
	{ 62, "internal micro-controller halt" }, { 63, "ECC page retirement or row remap" },
	{ 64, "row remapping failure" },     { 74, "NVLink error" },
	{ 79, "GPU has fallen off the bus" }, { 92, "high single-bit ECC error rate" },
	{ 94, "contained ECC error" },       { 95, "uncontained ECC error" },
	{ 119, "GSP RPC timeout" },          { 120, "GSP error" },
	{ 140, "unrecovered ECC error" },
};

#define XID_CODES_MAX 16

typedef struct xid_tally {
	int code[XID_CODES_MAX];
	int count[XID_CODES_MAX];
	int ncodes, total;
} xid_tally;

const char *herd__xid_fatal(int code)
{
	for (size_t i = 0; i < sizeof(xid_fatal) / sizeof(xid_fatal[0]); i++)
		if (xid_fatal[i].code == code)
			return xid_fatal[i].what;
	return NULL;
}

static void xid_count(xid_tally *t, int code)
{
	int i;

	t->total++;
	for (i = 0; i < t->ncodes && t->code[i] != code; i++)
		;
	if (i == t->ncodes && t->ncodes == XID_CODES_MAX)
		return;
	if (i == t->ncodes) {
		t->code[t->ncodes] = code;
		t->count[t->ncodes++] = 0;
	}
	t->count[i]++;
}

struct xid_scan {
	const herd_health_report *r;
	xid_tally *tally;
};

static void xid_line(const char *line, void *arg)
{
	struct xid_scan *s = arg;

	for (size_t g = 0; g < s->r->ngpus; g++) {
		int code = herd__xid_of(line, s->r->gpus[g].bus_id);

		if (code > 0)
			xid_count(&s->tally[g], code);
	}
}

/* The "xid" check of every GPU: FAIL for an Xid of a failing GPU, WARN
 * for others, PASS for none, SKIP when the log cannot be read. */
static herd_status xid_checks(herd_health_report *r)
{
	xid_tally *tally = NULL;
	struct xid_scan s;
	herd__klog log;
	char why[300];
	herd_status st = HERD_OK;

	HERD_CHECK(herd__calloc(&tally, r->ngpus > 0 ? r->ngpus : 1, sizeof(*tally), "Xid counts"));
	s.r = r;
	s.tally = tally;
	if (!herd__klog_open(&log, why, sizeof(why))) {
		for (size_t g = 0; g < r->ngpus && st == HERD_OK; g++)
			st = herd__health_add(&r->gpus[g], "xid", HERD_HEALTH_SKIP, 0, "",
					      "the kernel log cannot be read: %s", why);
		free(tally);
		return st;
	}
	/* every record /dev/kmsg still holds, or the whole file, read once */
	herd__klog_read(&log, xid_line, &s, true, 1000000);
	herd__klog_close(&log);
	for (size_t g = 0; g < r->ngpus && st == HERD_OK; g++) {
		const xid_tally *t = &tally[g];
		herd_health_result res = HERD_HEALTH_PASS;
		char detail[200];
		size_t o = 0;

		detail[0] = '\0';
		for (int i = 0; i < t->ncodes && o < sizeof(detail); i++) {
			const char *what = herd__xid_fatal(t->code[i]);
			int n = snprintf(detail + o, sizeof(detail) - o, "%sXid %d x%d%s%s%s",
					 i > 0 ? ", " : "", t->code[i], t->count[i],
					 what != NULL ? " (" : "", what != NULL ? what : "",
					 what != NULL ? ")" : "");

			if (what != NULL)
				res = HERD_HEALTH_FAIL;
			else if (res == HERD_HEALTH_PASS)
				res = HERD_HEALTH_WARN;
			if (n > 0)
				o += (size_t)n;
		}
		st = t->total == 0
			     ? herd__health_add(&r->gpus[g], "xid", HERD_HEALTH_PASS, 0, "events",
						"no Xid in the kernel log")
			     : herd__health_add(&r->gpus[g], "xid", res, t->total, "events", "%s",
						detail);
	}
	free(tally);
	return st;
}

static herd_status check_opts(herd_health_opts *o, const herd_health_opts *in)
{
	memset(o, 0, sizeof(*o));
	o->version = HERD_HEALTH_OPTS_VERSION;
	if (in != NULL)
		*o = *in;
	HERD__CHECK_VERSION("herd_health_run", o, herd_health_opts, HEALTH_OPTS);
	if (o->level == 0)
		o->level = 1;
	if (o->level != 1 && o->level != 2)
		return herd__error(HERD_EINVAL, "herd_health_run: level %d: expected 1 or 2",
				   o->level);
	if (o->burn_seconds == 0)
		o->burn_seconds = DEFAULT_BURN_SECONDS;
	if (!(o->burn_seconds > 0 && o->burn_seconds <= 3600))
		return herd__error(HERD_EINVAL, "herd_health_run: burn of %g s: expected more "
				   "than 0 and at most 3600", o->burn_seconds);
	if (o->burn_order == 0)
		o->burn_order = DEFAULT_BURN_ORDER;
	if (o->burn_order < 16 || o->burn_order > 32768 || o->burn_order % 16 != 0)
		return herd__error(HERD_EINVAL, "herd_health_run: burn order %d: expected a "
				   "multiple of 16 from 16 to 32768", o->burn_order);
	if (o->copy_bytes == 0)
		o->copy_bytes = DEFAULT_COPY_BYTES;
	if (o->copy_bytes < 4096 || o->copy_bytes > ((size_t)64 << 30))
		return herd__error(HERD_EINVAL, "herd_health_run: copy of %zu bytes: expected "
				   "4 KiB to 64 GiB", o->copy_bytes);
	return HERD_OK;
}

static herd_health_result worst(const herd_health_gpu *g)
{
	herd_health_result w = g->nchecks > 0 ? HERD_HEALTH_SKIP : HERD_HEALTH_FAIL;

	/* FAIL over WARN over PASS over SKIP: a GPU whose every check was
	 * skipped was not checked. */
	for (size_t i = 0; i < g->nchecks; i++) {
		herd_health_result r = g->checks[i].result;

		if (r == HERD_HEALTH_FAIL || (r == HERD_HEALTH_WARN && w != HERD_HEALTH_FAIL) ||
		    (r == HERD_HEALTH_PASS && w == HERD_HEALTH_SKIP))
			w = r;
	}
	return w;
}

herd_status herd_health_run(herd_health_report **out, const herd_health_opts *opts)
{
	herd_health_report *r = NULL;
	herd__health_ref *refs = NULL;
	herd_health_opts o;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_health_run: out is NULL");
	*out = NULL;
	HERD_CHECK(check_opts(&o, opts));
	HERD_CHECK(herd__calloc(&r, 1, sizeof(*r), "a health report"));
	r->level = o.level;
	st = herd__nvml_health(r, &refs, r->note, sizeof(r->note));
	if (st == HERD_EUNAVAIL) {
		/* No GPU to check is an answer, not an error. */
		*out = r;
		return HERD_OK;
	}
	for (size_t i = 0; st == HERD_OK && i < r->ngpus; i++)
		st = cuda_checks(&r->gpus[i], &refs[i], &o);
	if (st == HERD_OK)
		st = xid_checks(r);
	free(refs);
	if (st != HERD_OK) {
		herd_health_free(r);
		return st;
	}
	for (size_t i = 0; i < r->ngpus; i++)
		r->gpus[i].result = worst(&r->gpus[i]);
	*out = r;
	return HERD_OK;
}

void herd_health_free(herd_health_report *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->ngpus; i++)
		free(r->gpus[i].checks);
	free(r->gpus);
	free(r);
}
