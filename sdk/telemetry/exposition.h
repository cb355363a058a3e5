/*
 * sdk/telemetry/exposition.h - writing the Prometheus text format 0.0.4
 * (exposition.c): families, label sets, numbers; and the families of a
 * telemetry sample.  Internal to libherd; metrics.c (herd/metrics.h)
 * writes herd's own families with it.
 */
#ifndef HERD_TELEMETRY_EXPOSITION_H
#define HERD_TELEMETRY_EXPOSITION_H

#include <stdint.h>

#include "buf.h"
#include "herd/telemetry.h"

/* A text being written: a family's header waits for its first series, so
 * that a family without series leaves nothing. */
typedef struct herd__expo {
	herd__buf buf;
	herd_status failed;         /* the first failure to append, else HERD_OK */
	const char *name;           /* the current family */
	const char *type, *help;    /* its header, until written; NULL after */
} herd__expo;

/* A label set being built: {a="1",b="x"} with values escaped. */
typedef struct herd__labels {
	char text[2048];
	size_t len;
} herd__labels;

/* The next family: name, type ("gauge", "counter") and one line of help. */
void herd__expo_family(herd__expo *x, const char *name, const char *type, const char *help);

/* Empties l; herd__labels_add adds name="value" (value escaped; cut to fit). */
void herd__labels_reset(herd__labels *l);
void herd__labels_add(herd__labels *l, const char *name, const char *value);
void herd__labels_addi(herd__labels *l, const char *name, int64_t value);

/* One series of the current family: its labels (NULL: none) and value. */
void herd__expo_value(herd__expo *x, const herd__labels *l, double v);
void herd__expo_int(herd__expo *x, const herd__labels *l, int64_t v);

/*
 * The families of sample s (DCGM's per GPU, herd_gpu_*, herd_node_*,
 * herd_telemetry_*).  minors[i]: GPU i's device minor number (the device
 * label "nvidiaN"), -1 when unknown.
 */
void herd__expo_sample(herd__expo *x, const herd_telemetry_sample *s, const int *minors);

/* The GPU labels of herd's own families: gpu and UUID. */
void herd__expo_gpu_labels(herd__labels *l, const herd_telemetry_gpu *g);

#endif /* HERD_TELEMETRY_EXPOSITION_H */
