/*
 * sdk/ckpt/interval.c - what saves cost (herd_ckpt_get_stats), and the
 * checkpoint interval that minimises the expected loss to failures
 * (herd_ckpt_interval, herd_ckpt_ettr, herd_ckpt_model).
 *
 * The model is Daly's first order one ("A higher order estimate of the
 * optimum checkpoint interval for restart dumps", 2006): work of Ts
 * seconds in segments of tau, each followed by a save of C; failures a
 * Poisson process of mean M; each costs R and the segment under way.  The
 * expected wall time is
 *
 *   T(tau) = M e^(R/M) (e^((tau + C)/M) - 1) Ts / tau,
 *
 * so the effective training time ratio Ts / T is
 * tau / (M e^(R/M) (e^((tau + C)/M) - 1)), and the best tau minimises
 * (e^((tau + C)/M) - 1) / tau, found here by golden-section search (the
 * function is unimodal in tau).  Young's sqrt(2 C M) is its limit for
 * C << M.  CheckFreq (FAST 2021) bounds the stall of its saves to a
 * fraction of the training time: the interval is raised to C / bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handle.h"

#define DEFAULT_MAX_OVERHEAD 0.035

herd_status herd_ckpt_get_stats(const herd_ckpt *ck, herd_ckpt_stats *out)
{
	if (ck == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_get_stats: ck and out must not be NULL");
	*out = ck->stats;
	return HERD_OK;
}

static herd_status check_model(const herd_ckpt_interval_model *m, const char *fn)
{
	if (m == NULL)
		return herd__error(HERD_EINVAL, "%s: the model is NULL", fn);
	if (!(m->save_s > 0) || !isfinite(m->save_s))
		return herd__error(HERD_EINVAL, "%s: save_s is %g; expected the stall of a save, more "
				   "than 0 seconds", fn, m->save_s);
	if (!(m->lost_s >= 0) || !isfinite(m->lost_s))
		return herd__error(HERD_EINVAL, "%s: lost_s is %g; expected 0 seconds or more", fn,
				   m->lost_s);
	if (!(m->mttf_s > 0) || !isfinite(m->mttf_s))
		return herd__error(HERD_EINVAL, "%s: mttf_s is %g; expected more than 0 seconds", fn,
				   m->mttf_s);
	if (!(m->max_overhead >= 0 && m->max_overhead < 1))
		return herd__error(HERD_EINVAL, "%s: max_overhead is %g; expected 0 (the default, "
				   "0.035) to less than 1", fn, m->max_overhead);
	if (!(m->min_interval_s >= 0) || !isfinite(m->min_interval_s))
		return herd__error(HERD_EINVAL, "%s: min_interval_s is %g; expected 0 or more", fn,
				   m->min_interval_s);
	return HERD_OK;
}

/* (e^((tau + C)/M) - 1) / tau: what the best interval minimises. */
static double cost(const herd_ckpt_interval_model *m, double tau)
{
	return expm1((tau + m->save_s) / m->mttf_s) / tau;
}

double herd_ckpt_ettr(const herd_ckpt_interval_model *m, double interval_s)
{
	double w;

	if (m == NULL || !(m->save_s > 0) || !(m->lost_s >= 0) || !(m->mttf_s > 0) ||
	    !(interval_s > 0) || !isfinite(interval_s))
		return 0;
	w = m->mttf_s * exp(m->lost_s / m->mttf_s) * expm1((interval_s + m->save_s) / m->mttf_s);
	return isfinite(w) && w > 0 ? interval_s / w : 0;
}

herd_status herd_ckpt_interval(const herd_ckpt_interval_model *m, herd_ckpt_interval_choice *out)
{
	const double phi = (sqrt(5.0) - 1) / 2;
	double lo, hi, a, b, fa, fb, bound, tau;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_interval: out is NULL");
	memset(out, 0, sizeof(*out));
	HERD_CHECK(check_model(m, "herd_ckpt_interval"));
	/* On a log scale: the optimum lies between C/1000 and 10 M. */
	lo = log(m->save_s / 1000);
	hi = log(10 * m->mttf_s + m->save_s);
	a = hi - phi * (hi - lo);
	b = lo + phi * (hi - lo);
	fa = cost(m, exp(a));
	fb = cost(m, exp(b));
	for (int i = 0; i < 200 && hi - lo > 1e-9; i++) {
		if (fa < fb) {
			hi = b;
			b = a;
			fb = fa;
			a = hi - phi * (hi - lo);
			fa = cost(m, exp(a));
		} else {
			lo = a;
			a = b;
			fa = fb;
			b = lo + phi * (hi - lo);
			fb = cost(m, exp(b));
		}
	}
	out->optimum_s = exp((lo + hi) / 2);
	out->young_s = sqrt(2 * m->save_s * m->mttf_s);
	tau = out->optimum_s;
	bound = m->save_s / (m->max_overhead > 0 ? m->max_overhead : DEFAULT_MAX_OVERHEAD);
	if (bound > tau) {
		tau = bound;
		snprintf(out->bound, sizeof(out->bound), "the overhead bound");
	}
	if (m->min_interval_s > tau) {
		tau = m->min_interval_s;
		snprintf(out->bound, sizeof(out->bound), "the save's own time");
	}
	out->interval_s = tau;
	out->overhead = m->save_s / tau;
	out->ettr = herd_ckpt_ettr(m, tau);
	return HERD_OK;
}

herd_status herd_ckpt_model(const herd_ckpt *ck, herd_ckpt_tier tier,
			    herd_ckpt_interval_model *out, char *source, size_t cap)
{
	const herd_ckpt_tier_stats *ts;
	const char *rate = herd__param_str(HERD__P_CKPT_MTTF);
	const char *start = herd__param_str(HERD__P_JOB_START);
	const char *restarts = herd__param_str(HERD__P_RESTART_COUNT);
	int cost_ms = 0;

	if (ck == NULL || out == NULL || source == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "herd_ckpt_model: ck, out and source are required");
	if (tier != HERD_CKPT_TIER_PEERS && tier != HERD_CKPT_TIER_STORAGE)
		return herd__error(HERD_EINVAL, "herd_ckpt_model: tier %d is neither storage nor "
				   "peers' memory", (int)tier);
	memset(out, 0, sizeof(*out));
	source[0] = '\0';
	ts = tier == HERD_CKPT_TIER_PEERS ? &ck->stats.peers : &ck->stats.storage;
	if (ts->saves == 0)
		return herd__error(HERD_ENOTFOUND, "no save to %s yet: its stall is not known",
				   herd_ckpt_tier_name(tier));
	out->save_s = ts->stall_s / (double)ts->saves;
	if (out->save_s <= 0)
		out->save_s = 1e-6;
	out->min_interval_s = ts->busy_s / (double)ts->saves;
	HERD_CHECK(herd__param_ms(HERD__P_CKPT_RESTART_COST, &cost_ms));
	out->lost_s = cost_ms > 0 ? cost_ms / 1000.0 : 0;
	if (ck->last.tier == tier)
		out->lost_s += ck->last.seconds;
	if (rate != NULL && rate[0] != '\0') {
		if (herd_duration_parse(rate, &out->mttf_s) != HERD_OK)
			return herd__error(HERD_EINVAL, "HERD_CKPT_MTTF='%s' is not a duration (8h, "
					   "90m, 3600)", rate);
		snprintf(source, cap, "HERD_CKPT_MTTF=%s", rate);
		return HERD_OK;
	}
	if (start != NULL && restarts != NULL && atoi(restarts) > 0) {
		struct timespec now;
		double t0 = strtod(start, NULL);

		clock_gettime(CLOCK_REALTIME, &now);
		out->mttf_s = ((double)now.tv_sec + now.tv_nsec / 1e9 - t0) / atoi(restarts);
		if (t0 > 0 && out->mttf_s > 0) {
			snprintf(source, cap, "this job's %d failure%s in %.0f s", atoi(restarts),
				 atoi(restarts) > 1 ? "s" : "", out->mttf_s * atoi(restarts));
			return HERD_OK;
		}
	}
	return herd__error(HERD_ENOTFOUND, "no mean time to failure: set HERD_CKPT_MTTF (8h, "
			   "90m), or let the job fail once");
}
