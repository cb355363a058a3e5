/*
 * herd/redop.h - reductions: how collectives (herd/comm.h) combine the
 * ranks' elements.  Values are stable once released.
 */
#ifndef HERD_REDOP_H
#define HERD_REDOP_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reductions.  AVG is the sum divided by the number of ranks (for integers,
 * truncated toward zero). */
typedef enum herd_redop {
	HERD_SUM = 0,
	HERD_PROD = 1,
	HERD_MIN = 2,
	HERD_MAX = 3,
	HERD_AVG = 4,
	HERD_REDOP_COUNT
} herd_redop;

/* "sum", "prod", "min", "max", "avg"; "unknown" otherwise. */
HERD_EXTERN const char *herd_redop_name(herd_redop op);

/* Parses a reduction name. */
HERD_EXTERN herd_status herd_redop_parse(const char *name, herd_redop *out);

#ifdef __cplusplus
}
#endif

#endif /* HERD_REDOP_H */
