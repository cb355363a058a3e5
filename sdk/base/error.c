/*
 * sdk/base/error.c - status codes and the per-thread last-error message.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

#define HERD_ERROR_MSG_LEN 1024

static _Thread_local char last_error[HERD_ERROR_MSG_LEN];

const char *herd_status_describe(herd_status status)
{
	switch (status) {
#define HERD_STATUS_STR_(name, value, desc) \
	case HERD_##name:                   \
		return desc;
		HERD_STATUS_MAP(HERD_STATUS_STR_)
#undef HERD_STATUS_STR_
	}
	return "unknown status";
}

const char *herd_status_name(herd_status status)
{
	switch (status) {
#define HERD_STATUS_NAME_(name, value, desc) \
	case HERD_##name:                    \
		return "HERD_" #name;
		HERD_STATUS_MAP(HERD_STATUS_NAME_)
#undef HERD_STATUS_NAME_
	}
	return "HERD_UNKNOWN";
}

const char *herd_last_error(void)
{
	return last_error;
}

void herd_clear_error(void)
{
	last_error[0] = '\0';
}

const char *herd_version(void)
{
	return HERD_VERSION_STRING;
}

herd_status herd__error(herd_status code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	herd__log_debug("error %s: %s", herd_status_name(code), last_error);
	return code;
}

herd_status herd__error_errno(herd_status code, int err, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	n = strlen(last_error);
	snprintf(last_error + n, sizeof(last_error) - n, ": %s", strerror(err));
	herd__log_debug("error %s: %s", herd_status_name(code), last_error);
	return code;
}

herd_status herd__error_wrap(herd_status code, const char *fmt, ...)
{
	char prefix[HERD_ERROR_MSG_LEN];
	size_t plen, mlen;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	/* Shift the message right to make room, dropping what no longer fits. */
	plen = strlen(prefix);
	mlen = strnlen(last_error, sizeof(last_error) - 1);
	if (plen + mlen >= sizeof(last_error))
		mlen = sizeof(last_error) - 1 - plen;
	memmove(last_error + plen, last_error, mlen);
	memcpy(last_error, prefix, plen);
	last_error[plen + mlen] = '\0';
	return code;
}

herd_status herd__check_version(const char *fn, const char *type, unsigned int version,
				unsigned int max, const char *init)
{
	if (version >= 1 && version <= max)
		return HERD_OK;
	return herd__error(HERD_EINVAL, "%s: %s.version is %u; this library knows 1..%u "
			   "(initialize it with %s)", fn, type, version, max, init);
}

herd_status herd__check_timeout(const char *fn, int timeout_ms)
{
	if (timeout_ms >= 0 || timeout_ms == HERD_TIMEOUT_NONE || timeout_ms == HERD_TIMEOUT_DEFAULT)
		return HERD_OK;
	return herd__error(HERD_EINVAL, "%s: timeout of %d ms (use 0 or more, HERD_TIMEOUT_NONE "
			   "or HERD_TIMEOUT_DEFAULT)", fn, timeout_ms);
}

char *herd__vformat(const char *fmt, va_list ap)
{
	char *s = NULL;

	return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}
