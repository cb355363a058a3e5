/*
 * The reduction kernels and element types: every type x reduction against a
 * double-precision reference, the AVG scaling, and the conversions of the
 * narrow floating types exhaustively against an independent
 * round-to-nearest-even (and against the CPU's own F16C conversion where
 * it has one).
 */
#include <math.h>

#include "comm/comm_internal.h"
#include "test.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define HAVE_F16C_CHECK 1
#endif

/* ---- reference conversions, written from the definitions ----------------- */

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Neighbours of a positive float, and rint() for a non-negative double,
 * without libm (the unit tests do not link it). */
static float float_up(float f)
{
	return bitsf(fbits(f) + 1);
}

static float float_down(float f)
{
	return bitsf(fbits(f) - 1);
}

static double ref_rint(double a)
{
	volatile double t;

	if (a >= 0x1p52)
		return a;
	t = a + 0x1p52;  /* the FPU rounds to nearest even here */
	return t - 0x1p52;
}

/* The value of a binary16 bit pattern. */
static double ref_half_value(uint16_t h)
{
	int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	double v;

	if (exp == 0x1f)
		v = mant ? NAN : INFINITY;
	else if (exp == 0)
		v = ldexp(mant, -24);
	else
		v = ldexp(1024 + mant, exp - 25);
	return sign ? -v : v;
}

/*
 * Rounds a double to a format with `mbits` stored mantissa bits, exponent
 * bias `bias` and `ebits` exponent bits, to nearest even, by scaling to an
 * integer significand and rounding that to nearest even.
 * x must be exactly representable in double with room to spare, which is
 * the case for every value the tests pass.
 */
static uint16_t ref_round(double x, int mbits, int ebits, int bias)
{
	uint16_t sign = signbit(x) ? (uint16_t)(1u << (mbits + ebits)) : 0;
	int emax = (1 << ebits) - 1;
	double a = fabs(x), r;
	int e;

	if (isnan(x))
		return 0;  /* callers check NaN separately */
	if (isinf(a))
		return (uint16_t)(sign | emax << mbits);
	if (a < ldexp(1.0, 1 - bias)) {
		/* subnormal range: units of 2^(1 - bias - mbits) */
		r = ref_rint(ldexp(a, bias - 1 + mbits));
		return (uint16_t)(sign | (uint16_t)r);  /* r == 2^mbits is the smallest normal */
	}
	frexp(a, &e);                                /* a = f * 2^e, f in [0.5, 1) */
	e -= 1;                                      /* a = g * 2^e, g in [1, 2) */
	r = ref_rint(ldexp(a, mbits - e));             /* in [2^mbits, 2^(mbits+1)] */
	if (r == ldexp(1.0, mbits + 1)) {
		r /= 2;
		e++;
	}
	if (e + bias >= emax)
		return (uint16_t)(sign | emax << mbits);
	return (uint16_t)(sign | (e + bias) << mbits | ((uint16_t)r - (1u << mbits)));
}

static uint16_t ref_to_half(double x)
{
	return ref_round(x, 10, 5, 15);
}

static uint16_t ref_to_bf16(double x)
{
	return ref_round(x, 7, 8, 127);
}

static int half_is_nan(uint16_t h)
{
	return (h & 0x7fff) > 0x7c00;
}

static int bf16_is_nan(uint16_t h)
{
	return (h & 0x7fff) > 0x7f80;
}

/* ---- conversions ---------------------------------------------------------- */

/*
 * Long arrays take the vector path (F16C where the CPU has it), single
 * elements the scalar one: every conversion test runs both, element by
 * element, and they must agree bit for bit.
 */
static void to_float_one_by_one(float *dst, const uint16_t *src, size_t n, herd_dtype dt)
{
	for (size_t i = 0; i < n; i++)
		herd__narrow_to_float(dst + i, src + i, 1, dt);
}

static void to_half_one_by_one(uint16_t *dst, const float *src, size_t n, herd_dtype dt)
{
	for (size_t i = 0; i < n; i++)
		herd__float_to_narrow(dst + i, src + i, 1, dt);
}

/* Converts n floats both ways into out; returns how many differ. */
static size_t to_half_both(uint16_t *out, const float *in, size_t n, herd_dtype dt)
{
	uint16_t *one = malloc(n * sizeof(*one) + 1);
	size_t diff = 0;

	herd__float_to_narrow(out, in, n, dt);
	if (one == NULL)
		return n;
	to_half_one_by_one(one, in, n, dt);
	for (size_t i = 0; i < n; i++) {
		if (one[i] != out[i] && diff++ < 3)
			TEST_FAIL_("%s: float 0x%08x -> 0x%04x in bulk, 0x%04x alone",
				   herd_dtype_name(dt), fbits(in[i]), out[i], one[i]);
	}
	free(one);
	return diff;
}

static void test_half_to_float_exhaustive_matches_definition(void)
{
	static uint16_t src[65536];
	static float dst[65536], one[65536];
	int bad = 0;

	for (int i = 0; i < 65536; i++)
		src[i] = (uint16_t)i;
	herd__narrow_to_float(dst, src, 65536, HERD_FLOAT16);
	to_float_one_by_one(one, src, 65536, HERD_FLOAT16);
	for (int i = 0; i < 65536; i++) {
		double want = ref_half_value((uint16_t)i);
		uint32_t expect = fbits((float)want);

		if (half_is_nan((uint16_t)i)) {
			/* NaN stays NaN, quieted, sign and payload kept */
			expect = (uint32_t)(i & 0x8000) << 16 | 0x7fc00000u |
				 (uint32_t)(i & 0x3ff) << 13;
		}
		if ((fbits(dst[i]) != expect || fbits(one[i]) != expect) && bad++ < 5)
			TEST_FAIL_("half 0x%04x -> 0x%08x in bulk, 0x%08x alone, expected 0x%08x", i,
				   fbits(dst[i]), fbits(one[i]), expect);
	}
	CHECK_INT(bad, 0);
}

static void test_half_round_trip_and_midpoints_round_to_even(void)
{
	static float in[65536 * 3];
	static uint16_t out[65536 * 3];
	size_t n = 0;
	int bad = 0;

	/* every finite half and both infinities convert back to themselves */
	for (int i = 0; i < 65536; i++) {
		if (!half_is_nan((uint16_t)i))
			in[n++] = (float)ref_half_value((uint16_t)i);
	}
	bad += (int)to_half_both(out, in, n, HERD_FLOAT16);
	for (size_t k = 0, i = 0; i < 65536; i++) {
		if (half_is_nan((uint16_t)i))
			continue;
		if (out[k] != i && bad++ < 5)
			TEST_FAIL_("float %a -> 0x%04x, expected 0x%04x", in[k], out[k],
				   (unsigned)i);
		k++;
	}
	/* between neighbours h, h+1 (magnitudes, both signs): the midpoint goes
	 * to the even one, one float ulp off it to the nearer; the neighbour
	 * of 0x7bff is 65536, where the midpoint 65520 overflows to Inf */
	n = 0;
	for (int s = 0; s < 2; s++) {
		for (int h = 0; h < 0x7c00; h++) {
			double lo = ref_half_value((uint16_t)h);
			double hi = h == 0x7bff ? 65536.0 : ref_half_value((uint16_t)(h + 1));
			float mid = (float)((lo + hi) / 2);

			in[n++] = s ? -mid : mid;
			in[n++] = s ? -float_down(mid) : float_down(mid);
			in[n++] = s ? -float_up(mid) : float_up(mid);
		}
	}
	bad += (int)to_half_both(out, in, n, HERD_FLOAT16);
	for (size_t k = 0; k < n; k++) {
		int h = (int)(k / 3) % 0x7c00;
		uint16_t sign = k / 3 >= 0x7c00 ? 0x8000 : 0;
		uint16_t even = (uint16_t)(sign | (h & 1 ? h + 1 : h));
		uint16_t want = k % 3 == 0 ? even : k % 3 == 1 ? (uint16_t)(sign | h)
							      : (uint16_t)(sign | (h + 1));

		if (out[k] != want && bad++ < 10)
			TEST_FAIL_("float %a -> 0x%04x, expected 0x%04x", in[k], out[k], want);
	}
	CHECK_INT(bad, 0);
}

static void test_float_to_half_random_floats_match_reference(void)
{
	enum { N = 1 << 20 };
	float *in = malloc(N * sizeof(*in));
	uint16_t *out = malloc(N * sizeof(*out));
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int bad = 0;

	CHECK(in != NULL && out != NULL);
	if (in == NULL || out == NULL)
		goto out;
	/* uniform bit patterns, then a second pass concentrated on the range
	 * where halves live (exponents 2^-26 .. 2^17) */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < N; i++) {
			uint32_t u;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			u = (uint32_t)(x >> 32);
			if (pass == 1)
				u = (u & 0x807fffffu) | (uint32_t)(101 + (x & 0xffff) % 44) << 23;
			in[i] = bitsf(u);
		}
		bad += (int)to_half_both(out, in, N, HERD_FLOAT16);
		for (size_t i = 0; i < N; i++) {
			if (isnan(in[i])) {
				if ((!half_is_nan(out[i]) || (out[i] >> 15) != fbits(in[i]) >> 31) &&
				    bad++ < 5)
					TEST_FAIL_("NaN 0x%08x -> 0x%04x", fbits(in[i]), out[i]);
				continue;
			}
			if (out[i] != ref_to_half(in[i]) && bad++ < 5)
				TEST_FAIL_("float %a (0x%08x) -> 0x%04x, expected 0x%04x", in[i],
					   fbits(in[i]), out[i], ref_to_half(in[i]));
		}
	}
	CHECK_INT(bad, 0);
out:
	free(in);
	free(out);
}

#ifdef HAVE_F16C_CHECK
__attribute__((target("f16c"))) static uint16_t hw_to_half(float f)
{
	return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("f16c"))) static float hw_from_half(uint16_t h)
{
	return _cvtsh_ss(h);
}
#endif

/* The CPU's own conversion (F16C) is a third opinion, where there is one,
 * NaNs included; the library's scalar path must give the same bits. */
static void test_half_conversions_agree_with_f16c(void)
{
#ifdef HAVE_F16C_CHECK
	enum { N = 1 << 20 };
	static float f[N], one[65536];
	static uint16_t h[N];
	uint64_t x = 12345;
	int bad = 0;

	if (!__builtin_cpu_supports("f16c"))
		TEST_SKIP("no F16C on this CPU");
	for (int i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	to_float_one_by_one(one, h, 65536, HERD_FLOAT16);
	for (int i = 0; i < 65536; i++) {
		float hw = hw_from_half((uint16_t)i);

		if (fbits(hw) != fbits(one[i]) && bad++ < 5)
			TEST_FAIL_("half 0x%04x: 0x%08x, F16C says 0x%08x", i, fbits(one[i]),
				   fbits(hw));
	}
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		f[i] = bitsf((uint32_t)(x >> 32));
	}
	bad += (int)to_half_both(h, f, N, HERD_FLOAT16);
	for (size_t i = 0; i < N; i++) {
		uint16_t hw = hw_to_half(f[i]);

		if (hw != h[i] && bad++ < 5)
			TEST_FAIL_("float 0x%08x: 0x%04x, F16C says 0x%04x", fbits(f[i]), h[i], hw);
	}
	CHECK_INT(bad, 0);
#else
	TEST_SKIP("built for a CPU without F16C's intrinsics");
#endif
}

static void test_bfloat16_conversions_round_to_nearest_even(void)
{
	static uint16_t h[65536], back[65536];
	static float f[65536];
	enum { N = 1 << 20 };
	float *in = malloc(N * sizeof(*in));
	uint16_t *out = malloc(N * sizeof(*out));
	uint64_t x = 777;
	int bad = 0;

	CHECK(in != NULL && out != NULL);
	if (in == NULL || out == NULL)
		goto out;
	for (int i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	herd__narrow_to_float(f, h, 65536, HERD_BFLOAT16);
	herd__float_to_narrow(back, f, 65536, HERD_BFLOAT16);
	for (int i = 0; i < 65536; i++) {
		if (fbits(f[i]) != (uint32_t)i << 16 && bad++ < 5)
			TEST_FAIL_("bf16 0x%04x -> 0x%08x", i, fbits(f[i]));
		if (bf16_is_nan((uint16_t)i) ? !bf16_is_nan(back[i]) || (back[i] ^ i) & 0x8000
					      : back[i] != i) {
			if (bad++ < 5)
				TEST_FAIL_("bf16 0x%04x -> float -> 0x%04x", i, back[i]);
		}
	}
	/* midpoints and their neighbours, random patterns */
	for (size_t i = 0; i < N; i++) {
		uint32_t u;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		u = (uint32_t)(x >> 32);
		if (i % 3 == 0)
			u = (u & 0xffff0000u) | 0x8000u;                     /* tie */
		else if (i % 3 == 1)
			u = (u & 0xffff0000u) | (x & 1 ? 0x8001u : 0x7fffu); /* beside it */
		in[i] = bitsf(u);
	}
	bad += (int)to_half_both(out, in, N, HERD_BFLOAT16);
	for (size_t i = 0; i < N; i++) {
		if (isnan(in[i]) ? !bf16_is_nan(out[i]) : out[i] != ref_to_bf16(in[i])) {
			if (bad++ < 5)
				TEST_FAIL_("float 0x%08x -> bf16 0x%04x, expected 0x%04x",
					   fbits(in[i]), out[i], ref_to_bf16(in[i]));
		}
	}
	/* the largest float rounds up to Inf; the one below the tie does not */
	{
		float big[3] = { bitsf(0x7f7fffffu), bitsf(0x7f7f7fffu), bitsf(0xff7f8000u) };
		uint16_t r[3];

		herd__float_to_narrow(r, big, 3, HERD_BFLOAT16);
		CHECK_INT(r[0], 0x7f80);
		CHECK_INT(r[1], 0x7f7f);
		CHECK_INT(r[2], 0xff80);  /* tie, odd mantissa: up to -Inf */
	}
	CHECK_INT(bad, 0);
out:
	free(in);
	free(out);
}

/* ---- reductions ------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Element i of a buffer of dtype as a double (integers of 64 bits may lose
 * bits: tests use values that do not). */
static double get_elem(const void *buf, size_t i, herd_dtype dt)
{
	switch (dt) {
	case HERD_INT8: return ((const int8_t *)buf)[i];
	case HERD_UINT8: return ((const uint8_t *)buf)[i];
	case HERD_INT32: return ((const int32_t *)buf)[i];
	case HERD_UINT32: return ((const uint32_t *)buf)[i];
	case HERD_INT64: return (double)((const int64_t *)buf)[i];
	case HERD_UINT64: return (double)((const uint64_t *)buf)[i];
	case HERD_FLOAT16: return ref_half_value(((const uint16_t *)buf)[i]);
	case HERD_BFLOAT16: return bitsf((uint32_t)((const uint16_t *)buf)[i] << 16);
	case HERD_FLOAT32: return ((const float *)buf)[i];
	case HERD_FLOAT64: return ((const double *)buf)[i];
	default: return 0;
	}
}

static int64_t get_int(const void *buf, size_t i, herd_dtype dt)
{
	switch (dt) {
	case HERD_INT8: return ((const int8_t *)buf)[i];
	case HERD_UINT8: return ((const uint8_t *)buf)[i];
	case HERD_INT32: return ((const int32_t *)buf)[i];
	case HERD_UINT32: return ((const uint32_t *)buf)[i];
	case HERD_INT64: return ((const int64_t *)buf)[i];
	case HERD_UINT64: return (int64_t)((const uint64_t *)buf)[i];
	default: return 0;
	}
}

static int is_float(herd_dtype dt)
{
	return dt >= HERD_FLOAT16;
}

/* Stores v (exact for integers within range; rounded to nearest even for
 * the float types) as element i. */
static void put_elem(void *buf, size_t i, herd_dtype dt, double v)
{
	switch (dt) {
	case HERD_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case HERD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case HERD_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case HERD_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case HERD_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case HERD_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case HERD_FLOAT16: ((uint16_t *)buf)[i] = ref_to_half(v); break;
	case HERD_BFLOAT16: ((uint16_t *)buf)[i] = ref_to_bf16(v); break;
	case HERD_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case HERD_FLOAT64: ((double *)buf)[i] = v; break;
	default: break;
	}
}

static void put_int(void *buf, size_t i, herd_dtype dt, uint64_t v)
{
	switch (dt) {
	case HERD_INT8: case HERD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case HERD_INT32: case HERD_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case HERD_INT64: case HERD_UINT64: ((uint64_t *)buf)[i] = v; break;
	default: break;
	}
}

/* A random element: integers over their whole range (so that SUM and PROD
 * wrap), floats over a range where products and sums stay finite, with
 * NaN, Inf and signed zeros sprinkled in. */
static void put_random(void *buf, size_t i, herd_dtype dt)
{
	uint64_t r = next_rand();

	if (!is_float(dt)) {
		put_int(buf, i, dt, r);
		return;
	}
	switch (r % 64) {
	case 0: put_elem(buf, i, dt, NAN); break;
	case 1: put_elem(buf, i, dt, INFINITY); break;
	case 2: put_elem(buf, i, dt, -INFINITY); break;
	case 3: put_elem(buf, i, dt, 0.0); break;
	case 4: put_elem(buf, i, dt, -0.0); break;
	default: {
		/* up to 2^12 in magnitude with fractional bits, some tiny */
		double v = ldexp((double)((int64_t)r >> 8) / 9007199254740992.0 * 2,
				 (int)(r % 13) - (r % 5 == 0 ? 20 : 0));
		put_elem(buf, i, dt, v);
	}
	}
}

/* Whether the element is the expected double rounded to the type (any NaN
 * matches NaN; zeros must match in sign too). */
static int elem_matches(const void *buf, size_t i, herd_dtype dt, double want)
{
	double got = get_elem(buf, i, dt);
	double round_want;

	if (isnan(want))
		return isnan(got);
	switch (dt) {
	case HERD_FLOAT16: round_want = ref_half_value(ref_to_half(want)); break;
	case HERD_BFLOAT16: round_want = bitsf((uint32_t)ref_to_bf16(want) << 16); break;
	case HERD_FLOAT32: round_want = (float)want; break;
	default: round_want = want; break;
	}
	return got == round_want && (got != 0 || signbit(got) == signbit(round_want));
}

static double ref_op(double x, double y, herd_redop op)
{
	switch (op) {
	case HERD_SUM: return x + y;
	case HERD_PROD: return x * y;
	case HERD_MIN: return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
	case HERD_MAX: return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
	default: return NAN;
	}
}

/* Integer reference: wrap-around for SUM and PROD, in the type's width. */
static uint64_t ref_int_op(int64_t x, int64_t y, herd_redop op, int is_signed)
{
	switch (op) {
	case HERD_SUM: return (uint64_t)x + (uint64_t)y;
	case HERD_PROD: return (uint64_t)x * (uint64_t)y;
	case HERD_MIN:
		if (is_signed)
			return (uint64_t)(x < y ? x : y);
		return (uint64_t)x < (uint64_t)y ? (uint64_t)x : (uint64_t)y;
	case HERD_MAX:
		if (is_signed)
			return (uint64_t)(x > y ? x : y);
		return (uint64_t)x > (uint64_t)y ? (uint64_t)x : (uint64_t)y;
	default: return 0;
	}
}

static int is_signed_int(herd_dtype dt)
{
	return dt == HERD_INT8 || dt == HERD_INT32 || dt == HERD_INT64;
}

/* One dtype x op over n elements, out of place and with dst aliasing a and b. */
static int check_reduce(herd_dtype dt, herd_redop op, size_t n)
{
	size_t es = herd_dtype_size(dt);
	unsigned char *a = malloc(n * es + 1), *b = malloc(n * es + 1);
	unsigned char *d = malloc(n * es + 1), *want = malloc(n * es + 1);
	unsigned char *a2 = malloc(n * es + 1), *b2 = malloc(n * es + 1);
	double *wantd = malloc((n + 1) * sizeof(double));
	int bad = 0;

	if (!a || !b || !d || !want || !a2 || !b2 || !wantd) {
		TEST_FAIL_("out of memory");
		bad = 1;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		put_random(a, i, dt);
		put_random(b, i, dt);
		if (is_float(dt)) {
			wantd[i] = ref_op(get_elem(a, i, dt), get_elem(b, i, dt), op);
		} else {
			put_int(want, i, dt,
				ref_int_op(get_int(a, i, dt), get_int(b, i, dt), op,
					   is_signed_int(dt)));
		}
	}
	memcpy(a2, a, n * es);
	memcpy(b2, b, n * es);
	for (int alias = 0; alias < 3; alias++) {
		unsigned char *dst = alias == 0 ? d : alias == 1 ? a2 : b2;

		memcpy(a2, a, n * es);
		memcpy(b2, b, n * es);
		herd__reduce(dst, a2, b2, n, dt, op);
		for (size_t i = 0; i < n; i++) {
			int ok = is_float(dt) ? elem_matches(dst, i, dt, wantd[i])
					      : memcmp(dst + i * es, want + i * es, es) == 0;
			if (!ok && bad++ < 3)
				TEST_FAIL_("%s %s n=%zu alias=%d [%zu]: %g %s %g = %g, expected %g",
					   herd_dtype_name(dt), herd_redop_name(op), n, alias, i,
					   get_elem(a, i, dt), herd_redop_name(op),
					   get_elem(b, i, dt), get_elem(dst, i, dt),
					   is_float(dt) ? wantd[i] : get_elem(want, i, dt));
		}
	}
out:
	free(a);
	free(b);
	free(d);
	free(want);
	free(a2);
	free(b2);
	free(wantd);
	return bad;
}

static void test_reduce_every_dtype_and_op_matches_reference(void)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 511, 512, 513,
					1009, 4099 };
	int bad = 0;

	for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
		for (int op = 0; op < HERD_AVG; op++)
			for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
				bad += check_reduce((herd_dtype)dt, (herd_redop)op, sizes[s]);
	CHECK_INT(bad, 0);
}

static void test_reduce_integer_wraps_and_extremes(void)
{
	int8_t a8[4] = { 127, -128, -128, 100 }, b8[4] = { 1, -1, -128, 3 }, d8[4];
	uint8_t ua[2] = { 255, 16 }, ub[2] = { 1, 16 }, ud[2];
	int64_t a64[2] = { INT64_MAX, INT64_MIN }, b64[2] = { 1, -1 }, d64[2];
	uint64_t u64a[1] = { UINT64_MAX }, u64b[1] = { UINT64_MAX }, u64d[1];

	herd__reduce(d8, a8, b8, 4, HERD_INT8, HERD_SUM);
	CHECK_INT(d8[0], -128);
	CHECK_INT(d8[1], 127);
	CHECK_INT(d8[2], 0);
	CHECK_INT(d8[3], 103);
	herd__reduce(d8, a8, b8, 4, HERD_INT8, HERD_PROD);
	CHECK_INT(d8[0], 127);
	CHECK_INT(d8[1], -128);
	CHECK_INT(d8[2], 0);
	CHECK_INT(d8[3], 44);  /* 300 mod 256 */
	herd__reduce(d8, a8, b8, 4, HERD_INT8, HERD_MIN);
	CHECK_INT(d8[0], 1);
	CHECK_INT(d8[1], -128);
	herd__reduce(ud, ua, ub, 2, HERD_UINT8, HERD_SUM);
	CHECK_INT(ud[0], 0);
	herd__reduce(ud, ua, ub, 2, HERD_UINT8, HERD_PROD);
	CHECK_INT(ud[1], 0);  /* 256 */
	herd__reduce(ud, ua, ub, 2, HERD_UINT8, HERD_MAX);
	CHECK_INT(ud[0], 255);
	herd__reduce(d64, a64, b64, 2, HERD_INT64, HERD_SUM);
	CHECK(d64[0] == INT64_MIN && d64[1] == INT64_MAX);
	herd__reduce(u64d, u64a, u64b, 1, HERD_UINT64, HERD_PROD);
	CHECK(u64d[0] == 1);
	herd__reduce(u64d, u64a, u64b, 1, HERD_UINT64, HERD_MIN);
	CHECK(u64d[0] == UINT64_MAX);
}

static void test_reduce_min_max_propagate_nan_either_side(void)
{
	float a[4] = { NAN, 1.0f, NAN, -0.0f }, b[4] = { 1.0f, NAN, NAN, 2.0f }, d[4];
	double da[2] = { NAN, 3.0 }, db[2] = { -1.0, NAN }, dd[2];
	uint16_t ha[2] = { 0x7e00, 0x3c00 }, hb[2] = { 0x3c00, 0x7e00 }, hd[2];
	uint16_t ba[2] = { 0x7fc0, 0x3f80 }, bb[2] = { 0x3f80, 0xffc0 }, bd[2];

	for (int op = HERD_MIN; op <= HERD_MAX; op++) {
		herd__reduce(d, a, b, 4, HERD_FLOAT32, (herd_redop)op);
		CHECK(isnan(d[0]) && isnan(d[1]) && isnan(d[2]));
		CHECK(d[3] == (op == HERD_MIN ? -0.0f : 2.0f));
		herd__reduce(dd, da, db, 2, HERD_FLOAT64, (herd_redop)op);
		CHECK(isnan(dd[0]) && isnan(dd[1]));
		herd__reduce(hd, ha, hb, 2, HERD_FLOAT16, (herd_redop)op);
		CHECK(half_is_nan(hd[0]) && half_is_nan(hd[1]));
		herd__reduce(bd, ba, bb, 2, HERD_BFLOAT16, (herd_redop)op);
		CHECK(bf16_is_nan(bd[0]) && bf16_is_nan(bd[1]));
	}
}

/* float16 sums round once: 2048 + 1 is a tie in float16 and goes to even
 * (2048), 2049 + 1 = 2050 exactly; bfloat16 keeps 8 bits. */
static void test_reduce_half_sum_rounds_to_nearest_even(void)
{
	uint16_t a[3] = { ref_to_half(2048), ref_to_half(2050), ref_to_half(65504) };
	uint16_t b[3] = { ref_to_half(1), ref_to_half(1), ref_to_half(16) }, d[3];
	uint16_t ba[2] = { ref_to_bf16(256), ref_to_bf16(258) };
	uint16_t bb[2] = { ref_to_bf16(1), ref_to_bf16(1) }, bd[2];

	herd__reduce(d, a, b, 3, HERD_FLOAT16, HERD_SUM);
	CHECK(ref_half_value(d[0]) == 2048);
	CHECK(ref_half_value(d[1]) == 2052);  /* 2051 is a tie: to even (2052) */
	CHECK_INT(d[2], 0x7c00);              /* 65520: a tie that overflows */
	herd__reduce(bd, ba, bb, 2, HERD_BFLOAT16, HERD_SUM);
	CHECK_INT(bd[0], ref_to_bf16(256));
	CHECK_INT(bd[1], ref_to_bf16(260));
}

/* ---- AVG scaling ------------------------------------------------------------ */

static void test_reduce_scale_divides_and_truncates_toward_zero(void)
{
	enum { N = 1037 };
	static const int divs[] = { 1, 2, 3, 4, 7, 1000 };
	int bad = 0;

	for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++) {
		size_t es = herd_dtype_size((herd_dtype)dt);
		unsigned char *buf = malloc(N * es), *orig = malloc(N * es);

		if (buf == NULL || orig == NULL) {
			TEST_FAIL_("out of memory");
			free(buf);
			free(orig);
			return;
		}
		for (size_t i = 0; i < N; i++)
			put_random(orig, i, (herd_dtype)dt);
		/* the extremes of the integer types */
		if (!is_float((herd_dtype)dt)) {
			put_int(orig, 0, (herd_dtype)dt, 1ull << (8 * es - 1));
			put_int(orig, 1, (herd_dtype)dt, (1ull << (8 * es - 1)) - 1);
			put_int(orig, 2, (herd_dtype)dt, ~0ull);
		}
		for (size_t k = 0; k < sizeof(divs) / sizeof(divs[0]); k++) {
			int n = divs[k];

			memcpy(buf, orig, N * es);
			herd__reduce_scale(buf, N, (herd_dtype)dt, n);
			for (size_t i = 0; i < N; i++) {
				int ok;

				if (is_float((herd_dtype)dt)) {
					ok = elem_matches(buf, i, (herd_dtype)dt,
							  get_elem(orig, i, (herd_dtype)dt) / n);
				} else if (is_signed_int((herd_dtype)dt)) {
					int64_t v = get_int(orig, i, (herd_dtype)dt);
					ok = get_int(buf, i, (herd_dtype)dt) == v / n;
				} else {
					uint64_t v = (uint64_t)get_int(orig, i, (herd_dtype)dt);
					if (es < 8)
						v &= (1ull << (8 * es)) - 1;
					ok = (uint64_t)get_int(buf, i, (herd_dtype)dt) == v / (uint64_t)n;
				}
				if (!ok && bad++ < 5)
					TEST_FAIL_("%s [%zu] %g / %d = %g", herd_dtype_name((herd_dtype)dt),
						   i, get_elem(orig, i, (herd_dtype)dt), n,
						   get_elem(buf, i, (herd_dtype)dt));
			}
		}
		free(buf);
		free(orig);
	}
	CHECK_INT(bad, 0);
	{
		int32_t v[3] = { -7, 7, INT32_MIN };

		herd__reduce_scale(v, 3, HERD_INT32, 2);
		CHECK_INT(v[0], -3);
		CHECK_INT(v[1], 3);
		CHECK_INT(v[2], INT32_MIN / 2);
	}
}

/* ---- names ------------------------------------------------------------------ */

static void test_dtype_sizes_names_and_nccl_tests_aliases(void)
{
	static const struct {
		const char *name;
		herd_dtype dt;
	} names[] = {
		{ "int8", HERD_INT8 },       { "char", HERD_INT8 },       { "uint8", HERD_UINT8 },
		{ "int32", HERD_INT32 },     { "int", HERD_INT32 },       { "uint32", HERD_UINT32 },
		{ "int64", HERD_INT64 },     { "uint64", HERD_UINT64 },   { "half", HERD_FLOAT16 },
		{ "float16", HERD_FLOAT16 }, { "fp16", HERD_FLOAT16 },    { "bfloat16", HERD_BFLOAT16 },
		{ "bf16", HERD_BFLOAT16 },   { "float", HERD_FLOAT32 },   { "float32", HERD_FLOAT32 },
		{ "double", HERD_FLOAT64 },  { "float64", HERD_FLOAT64 }, { "FLOAT", HERD_FLOAT32 },
		{ "float8_e4m3fn", HERD_FLOAT8_E4M3 }, { "fp8_e4m3", HERD_FLOAT8_E4M3 },
		{ "f8e5m2", HERD_FLOAT8_E5M2 }, { "e5m2", HERD_FLOAT8_E5M2 },
	};
	static const size_t sizes[HERD_DTYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1 };
	herd_dtype dt;

	for (int t = 0; t < HERD_DTYPE_COUNT; t++) {
		CHECK_INT(herd_dtype_size((herd_dtype)t), sizes[t]);
		CHECK_OK(herd_dtype_parse(herd_dtype_name((herd_dtype)t), &dt));
		CHECK_INT(dt, t);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		dt = HERD_DTYPE_COUNT;
		CHECK_OK(herd_dtype_parse(names[i].name, &dt));
		CHECK_INT(dt, names[i].dt);
	}
	CHECK_STR(herd_dtype_name(HERD_BFLOAT16), "bfloat16");
	CHECK_STR(herd_dtype_name(HERD_FLOAT32), "float32");
	CHECK_STR(herd_dtype_name(HERD_DTYPE_COUNT), "unknown");
	CHECK_STR(herd_dtype_name((herd_dtype)-1), "unknown");
	CHECK_INT(herd_dtype_size(HERD_DTYPE_COUNT), 0);
	CHECK_ERR(herd_dtype_parse("float128", &dt), HERD_EINVAL, "\"float128\"");
	CHECK_ERR(herd_dtype_parse("", &dt), HERD_EINVAL, "expected one of int8");
	CHECK_ERR(herd_dtype_parse(NULL, &dt), HERD_EINVAL, "name");
	CHECK_ERR(herd_dtype_parse("int", NULL), HERD_EINVAL, "out");
}

static void test_redop_names_parse_back(void)
{
	herd_redop op;

	for (int o = 0; o < HERD_REDOP_COUNT; o++) {
		CHECK_OK(herd_redop_parse(herd_redop_name((herd_redop)o), &op));
		CHECK_INT(op, o);
	}
	CHECK_STR(herd_redop_name(HERD_AVG), "avg");
	CHECK_STR(herd_redop_name(HERD_REDOP_COUNT), "unknown");
	CHECK_OK(herd_redop_parse("MAX", &op));
	CHECK_INT(op, HERD_MAX);
	CHECK_ERR(herd_redop_parse("mean", &op), HERD_EINVAL, "\"mean\"");
	CHECK_ERR(herd_redop_parse(NULL, &op), HERD_EINVAL, "name");
}

/* ---- the 8-bit floats, from their definitions ---------------------------- */

typedef struct f8def {
	herd_dtype dt;
	int mbits, bias;
	int ieee;          /* the all-ones exponent is Inf and NaN (E5M2) */
} f8def;

static const f8def f8defs[2] = {
	{ HERD_FLOAT8_E4M3, 3, 7, 0 },
	{ HERD_FLOAT8_E5M2, 2, 15, 1 },
};

static double pow2(int e)
{
	double r = 1;

	for (; e > 0; e--)
		r *= 2;
	for (; e < 0; e++)
		r /= 2;
	return r;
}

/* The value of a code: E4M3's S.1111.111 and E5M2's S.11111.mm (mm != 0)
 * are NaNs, S.11111.00 of E5M2 infinities. */
static double f8_value(const f8def *d, unsigned code)
{
	unsigned e = (code & 0x7fu) >> d->mbits, m = code & ((1u << d->mbits) - 1u);
	unsigned eall = (1u << (7 - d->mbits)) - 1u;
	double v;

	if (e == eall && (d->ieee || m == (1u << d->mbits) - 1u))
		v = d->ieee && m == 0 ? INFINITY : NAN;
	else if (e == 0)
		v = m * pow2(1 - d->bias - d->mbits);
	else
		v = (1 + m * pow2(-d->mbits)) * pow2((int)e - d->bias);
	return code & 0x80u ? -v : v;
}

/* x rounded into the type by definition: the nearest finite code of x's
 * sign (which saturates), a tie to the even code; a NaN to a NaN. */
static unsigned f8_round(const f8def *d, float x)
{
	unsigned sign = fbits(x) >> 31 ? 0x80u : 0u, best = sign;
	double bestd = INFINITY, ax = x < 0 ? -(double)x : (double)x;

	if (x != x)
		return d->ieee ? sign | 0x7eu : sign | 0x7fu;
	if (ax >= f8_value(d, d->ieee ? 0x7bu : 0x7eu))
		return sign | (d->ieee ? 0x7bu : 0x7eu);  /* saturation */
	for (unsigned c = 0; c < 0x80u; c++) {
		double v = f8_value(d, c), dist;

		if (v != v || v == INFINITY)
			continue;
		dist = v > ax ? v - ax : ax - v;
		if (dist < bestd || (dist == bestd && (c & 1u) == 0)) {
			bestd = dist;
			best = sign | c;
		}
	}
	return best;
}

static int f8_is_nan(const f8def *d, unsigned code)
{
	double v = f8_value(d, code);

	return v != v;
}

/* Every code to float32 is its value; every finite code comes back, an
 * infinity as the largest finite value of its sign (saturation). */
static void test_float8_codes_convert_exactly_and_back(void)
{
	for (int t = 0; t < 2; t++) {
		const f8def *d = &f8defs[t];
		uint8_t codes[256], back[256];
		float f[256];
		int bad = 0;

		for (int c = 0; c < 256; c++)
			codes[c] = (uint8_t)c;
		herd__narrow_to_float(f, codes, 256, d->dt);
		herd__float_to_narrow(back, f, 256, d->dt);
		for (unsigned c = 0; c < 256; c++) {
			double want = f8_value(d, c);
			int ok = want != want ? f[c] != f[c] && (fbits(f[c]) >> 31) == (c >> 7) &&
							f8_is_nan(d, back[c]) && (back[c] & 0x80u) == (c & 0x80u)
					      : (double)f[c] == want && (fbits(f[c]) >> 31) == (c >> 7) &&
							back[c] == (want == INFINITY || want == -INFINITY
								    ? (c & 0x80u) | 0x7bu : c);

			if (!ok && bad++ < 5)
				TEST_FAIL_("%s code 0x%02x: float %g (0x%08x), back 0x%02x; "
					   "value %g", herd_dtype_name(d->dt), c, (double)f[c],
					   fbits(f[c]), back[c], want);
			test_checks++;
		}
	}
}

/* Midpoints of neighbouring codes (ties to even) and a float either side,
 * random floats over the whole range, and the edges, against f8_round. */
static void test_float8_rounding_matches_definition(void)
{
	enum { N = 200000 };
	static float in[N];
	static uint8_t out[N];
	uint64_t x = 4242;

	for (int t = 0; t < 2; t++) {
		const f8def *d = &f8defs[t];
		size_t n = 0;
		int bad = 0;

		for (unsigned c = 0; c + 1 < 0x80u && n + 6 < N; c++) {
			double a = f8_value(d, c), b = f8_value(d, c + 1);
			float mid;

			if (a != a || b != b || b == INFINITY)
				continue;
			mid = (float)((a + b) / 2);  /* exact: a few bits */
			in[n++] = mid;
			in[n++] = -mid;
			in[n++] = float_up(mid);
			in[n++] = mid > 0 ? float_down(mid) : mid;
		}
		in[n++] = INFINITY;
		in[n++] = -INFINITY;
		in[n++] = NAN;
		in[n++] = 3.4e38f;
		in[n++] = -0.0f;
		in[n++] = bitsf(1);  /* the smallest float32 subnormal */
		while (n < N) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* exponents from 2^-30 to 2^19, either sign */
			in[n++] = bitsf((uint32_t)(x & 0x807fffffu) |
					(uint32_t)(97 + (x >> 40) % 50) << 23);
		}
		herd__float_to_narrow(out, in, N, d->dt);
		for (size_t i = 0; i < N; i++) {
			unsigned want = f8_round(d, in[i]);
			int ok = f8_is_nan(d, want) ? f8_is_nan(d, out[i]) : out[i] == want;

			if (!ok && bad++ < 5)
				TEST_FAIL_("%s: float %a (0x%08x) -> 0x%02x, expected 0x%02x",
					   herd_dtype_name(d->dt), (double)in[i], fbits(in[i]),
					   out[i], want);
			test_checks++;
		}
	}
}

/* The edges, spelled out: saturation and the ties at the top and bottom. */
static void test_float8_edges(void)
{
	static const struct {
		herd_dtype dt;
		float in;
		uint8_t out;
	} cases[] = {
		{ HERD_FLOAT8_E4M3, 448.0f, 0x7e },   { HERD_FLOAT8_E4M3, 464.0f, 0x7e },
		{ HERD_FLOAT8_E4M3, 465.0f, 0x7e },   { HERD_FLOAT8_E4M3, 1e30f, 0x7e },
		{ HERD_FLOAT8_E4M3, INFINITY, 0x7e }, { HERD_FLOAT8_E4M3, -INFINITY, 0xfe },
		{ HERD_FLOAT8_E4M3, NAN, 0x7f },      { HERD_FLOAT8_E4M3, 0.001953125f, 0x01 },
		{ HERD_FLOAT8_E4M3, 0.0009765625f, 0x00 }, { HERD_FLOAT8_E4M3, 0.0029296875f, 0x02 },
		{ HERD_FLOAT8_E4M3, -0.0f, 0x80 },    { HERD_FLOAT8_E4M3, 17.0f, 0x58 },
		{ HERD_FLOAT8_E4M3, 19.0f, 0x5a },    { HERD_FLOAT8_E5M2, 57344.0f, 0x7b },
		{ HERD_FLOAT8_E5M2, 61440.0f, 0x7b }, { HERD_FLOAT8_E5M2, INFINITY, 0x7b },
		{ HERD_FLOAT8_E5M2, -1e30f, 0xfb },   { HERD_FLOAT8_E5M2, 1.0f, 0x3c },
		{ HERD_FLOAT8_E5M2, 9.0f, 0x48 },     { HERD_FLOAT8_E5M2, 0x1p-16f, 0x01 },
	};
	uint8_t b;
	float f;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		herd__float_to_narrow(&b, &cases[i].in, 1, cases[i].dt);
		if (b != cases[i].out)
			TEST_FAIL_("%s: %a -> 0x%02x, expected 0x%02x", herd_dtype_name(cases[i].dt),
				   (double)cases[i].in, b, cases[i].out);
		test_checks++;
	}
	b = 0x7c;  /* E5M2 infinity stays one on the way to float32 */
	herd__narrow_to_float(&f, &b, 1, HERD_FLOAT8_E5M2);
	CHECK(f == INFINITY);
}

/* The public conversions are the kernels' own: the same bits both ways,
 * and a refusal for the types they do not convert. */
static void test_public_half_conversions_are_the_kernels(void)
{
	enum { N = 4096 };
	static uint16_t h[N], back[N], mine[N];
	static float f[N], g[N];
	herd_dtype types[4] = { HERD_FLOAT16, HERD_BFLOAT16, HERD_FLOAT8_E4M3, HERD_FLOAT8_E5M2 };

	for (int t = 0; t < 4; t++) {
		for (size_t i = 0; i < N; i++)
			h[i] = (uint16_t)(i * 16 + (size_t)t);
		CHECK_OK(herd_dtype_to_float32(h, f, N, types[t]));
		herd__narrow_to_float(g, h, N, types[t]);
		CHECK(memcmp(f, g, sizeof(f)) == 0);
		for (size_t i = 0; i < N; i++)
			f[i] = (float)i * 0.37f - 700.0f;
		CHECK_OK(herd_dtype_from_float32(f, back, N, types[t]));
		herd__float_to_narrow(mine, f, N, types[t]);
		CHECK(memcmp(back, mine, sizeof(back)) == 0);
	}
	CHECK_OK(herd_dtype_to_float32(NULL, NULL, 0, HERD_FLOAT16));
	CHECK_ERR(herd_dtype_to_float32(h, f, 1, HERD_FLOAT32), HERD_EINVAL,
		  "float32 is not float16, bfloat16, float8_e4m3 or float8_e5m2");
	CHECK_ERR(herd_dtype_from_float32(f, NULL, 1, HERD_BFLOAT16), HERD_EINVAL, "dst is NULL");
}

int main(void)
{
	TEST_RUN(test_half_to_float_exhaustive_matches_definition);
	TEST_RUN(test_half_round_trip_and_midpoints_round_to_even);
	TEST_RUN(test_float_to_half_random_floats_match_reference);
	TEST_RUN(test_half_conversions_agree_with_f16c);
	TEST_RUN(test_bfloat16_conversions_round_to_nearest_even);
	TEST_RUN(test_float8_codes_convert_exactly_and_back);
	TEST_RUN(test_float8_rounding_matches_definition);
	TEST_RUN(test_float8_edges);
	TEST_RUN(test_public_half_conversions_are_the_kernels);
	TEST_RUN(test_reduce_every_dtype_and_op_matches_reference);
	TEST_RUN(test_reduce_integer_wraps_and_extremes);
	TEST_RUN(test_reduce_min_max_propagate_nan_either_side);
	TEST_RUN(test_reduce_half_sum_rounds_to_nearest_even);
	TEST_RUN(test_reduce_scale_divides_and_truncates_toward_zero);
	TEST_RUN(test_dtype_sizes_names_and_nccl_tests_aliases);
	TEST_RUN(test_redop_names_parse_back);
	return TEST_DONE();
}
