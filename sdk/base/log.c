/*
 * sdk/base/log.c - logging to stderr, filtered by HERD_LOG or
 * herd_log_set_level().
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"

#define HERD_LOG_UNSET (-1)

static atomic_int log_level = HERD_LOG_UNSET;

/*
 * HERD_LOG's level.  Not through herd__param_choice: its error would call
 * back into the logging whose level is being read, and overwrite the
 * message of an error being raised.
 */
static herd_log_level log_level_from_env(void)
{
	const herd__param_info *in = herd__param_get(HERD__P_LOG);
	const char *env = herd__param_str(HERD__P_LOG);
	int level = env != NULL ? herd__param_choice_of(HERD__P_LOG, env) : -1;

	if (level >= 0)
		return (herd_log_level)level;
	if (env != NULL)
		fprintf(stderr, "herd: warning: HERD_LOG=%s is not one of %s; using %s\n", env,
			in->values, in->dflt);
	return (herd_log_level)herd__param_choice_of(HERD__P_LOG, in->dflt);
}

void herd_log_set_level(herd_log_level level)
{
	if (level < HERD_LOG_ERROR)
		level = HERD_LOG_ERROR;
	if (level > HERD_LOG_DEBUG)
		level = HERD_LOG_DEBUG;
	atomic_store(&log_level, (int)level);
}

herd_log_level herd_log_get_level(void)
{
	int level = atomic_load(&log_level);

	if (level == HERD_LOG_UNSET) {
		int expected = HERD_LOG_UNSET;

		level = (int)log_level_from_env();
		/* Another thread may have set it meanwhile; theirs wins. */
		if (!atomic_compare_exchange_strong(&log_level, &expected, level))
			level = expected;
	}
	return (herd_log_level)level;
}

void herd__log(herd_log_level level, const char *fmt, ...)
{
	static const char *const tags[] = { "error", "warn", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (level > herd_log_get_level())
		return;
	n = snprintf(line, sizeof(line), "herd[%ld] %s: ", (long)getpid(), tags[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	/* One write per message, so lines from threads never interleave. */
	strcat(line, "\n");
	fputs(line, stderr);
}
