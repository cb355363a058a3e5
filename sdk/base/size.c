/*
 * sdk/base/size.c - herd_size_parse, the one reader of sizes in bytes
 * ("64M", "1.5GiB") for the API, the environment and the herd program,
 * and herd_duration_parse, of durations ("90m", "8h").
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "base.h"

herd_status herd_size_parse(const char *text, uint64_t *bytes)
{
	static const struct {
		const char *unit;
		int shift;
	} units[] = { { "", 0 },     { "b", 0 },    { "k", 10 },   { "kb", 10 }, { "kib", 10 },
		      { "m", 20 },   { "mb", 20 },  { "mib", 20 }, { "g", 30 },  { "gb", 30 },
		      { "gib", 30 }, { "t", 40 },   { "tb", 40 },  { "tib", 40 } };
	const char *p = text;
	uint64_t whole = 0;
	double frac = 0, scale = 1;

	if (text == NULL || bytes == NULL)
		return herd__error(HERD_EINVAL, "herd_size_parse: %s is NULL",
				   text == NULL ? "text" : "bytes");
	if (!isdigit((unsigned char)*p))
		goto bad;
	for (; isdigit((unsigned char)*p); p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (whole > UINT64_MAX / 10 || (whole == UINT64_MAX / 10 && d > UINT64_MAX % 10))
			goto bad;
		whole = whole * 10 + d;
	}
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			goto bad;
		for (; isdigit((unsigned char)*p); p++) {
			scale /= 10;
			frac += (*p - '0') * scale;
		}
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		uint64_t v, f;

		if (strcasecmp(p, units[i].unit) != 0)
			continue;
		if (whole > (UINT64_MAX >> units[i].shift))
			goto bad;
		v = whole << units[i].shift;
		f = (uint64_t)(frac * (double)((uint64_t)1 << units[i].shift));
		if (v > UINT64_MAX - f)
			goto bad;
		*bytes = v + f;
		return HERD_OK;
	}
bad:
	return herd__error(HERD_EINVAL, "\"%s\" is not a size in bytes (digits, then B, K, KiB, "
			   "M, MiB, G, GiB, T or TiB; at most 2^64 - 1 bytes)", text);
}

herd_status herd_duration_parse(const char *text, double *seconds)
{
	char *end;
	double v;

	if (text == NULL || seconds == NULL)
		return herd__error(HERD_EINVAL, "herd_duration_parse: text and seconds are required");
	v = strtod(text, &end);
	if (end != text && *end != '\0' && end[1] == '\0') {
		if (*end == 'm')
			v *= 60, end++;
		else if (*end == 'h')
			v *= 3600, end++;
		else if (*end == 'd')
			v *= 86400, end++;
		else if (*end == 's')
			end++;
	}
	if (end == text || *end != '\0' || !(v > 0) || !isfinite(v))
		return herd__error(HERD_EINVAL, "\"%s\" is not a duration (seconds, or with s, m, h "
				   "or d: 90m, 8h)", text);
	*seconds = v;
	return HERD_OK;
}
