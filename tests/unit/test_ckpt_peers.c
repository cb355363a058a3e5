/*
 * tests/unit/test_ckpt_peers.c - the checkpoint holder and its protocol
 * (sdk/ckpt/peer.c), a real holder on loopback on a thread of this
 * process: puts, manifests, lists and fetches; which saves it keeps and
 * drops; its budget; its token; its end when its input closes.  And the
 * interval arithmetic (herd_ckpt_interval, herd_ckpt_ettr,
 * herd_ckpt_model) against Young's and Daly's closed forms.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/peer.h"
#include "net.h"
#include "test.h"

struct holder_thread {
	pthread_t t;
	int in[2], out[2];
	herd__peer_hold_opts o;
	herd_status st;
	herd__peer_addr addr;
};

static void *hold_main(void *arg)
{
	struct holder_thread *h = arg;

	h->st = herd__peer_hold(h->in[0], h->out[1], &h->o);
	return NULL;
}

/* A holder on loopback with budget bytes and steps kept; its address in h->addr. */
static void holder_start(struct holder_thread *h, uint64_t budget, int steps)
{
	char line[128] = "";
	ssize_t got;
	int port = 0;

	memset(h, 0, sizeof(*h));
	if (pipe(h->in) != 0 || pipe(h->out) != 0) {
		perror("pipe");
		exit(1);
	}
	h->o.bind = "127.0.0.1";
	h->o.budget = budget;
	h->o.steps = steps;
	pthread_create(&h->t, NULL, hold_main, h);
	got = read(h->out[0], line, sizeof(line) - 1);
	CHECK(got > 0);
	line[got > 0 ? got : 0] = '\0';
	CHECK(sscanf(line, "hold %d %32s", &port, h->addr.token) == 2);
	strcpy(h->addr.host, "127.0.0.1");
	h->addr.port = port;
}

/* Closes the holder's input: it ends, and says so. */
static void holder_stop(struct holder_thread *h)
{
	close(h->in[1]);
	pthread_join(h->t, NULL);
	CHECK_INT(h->st, HERD_OK);
	close(h->in[0]);
	close(h->out[0]);
	close(h->out[1]);
}

static int64_t soon(void)
{
	return herd__net_deadline(5000);
}

static herd_status put(const herd__peer_addr *a, herd__peer_key k, int rank, size_t size,
		       uint8_t fill)
{
	herd__peer_conn c;
	uint8_t *buf = malloc(size + 1);
	herd_status st;

	memset(buf, fill, size);
	st = herd__peer_connect(&c, a, soon());
	if (st == HERD_OK)
		st = herd__peer_put_begin(&c, &k, rank, size, soon());
	if (st == HERD_OK)
		st = herd__peer_put_bytes(&c, buf, size, soon());
	if (st == HERD_OK)
		st = herd__peer_put_end(&c, soon());
	herd__peer_close(&c);
	free(buf);
	return st;
}

static herd_status commit(const herd__peer_addr *a, herd__peer_key k, const char *manifest)
{
	herd__peer_conn c;
	herd_status st = herd__peer_connect(&c, a, soon());

	if (st == HERD_OK)
		st = herd__peer_put_manifest(&c, &k, manifest, strlen(manifest), soon());
	herd__peer_close(&c);
	return st;
}

/* "step/id:m:ranks" per save held, in the holder's order, e.g. "5/7:m:0,1 6/8:-:0". */
static void listing(const herd__peer_addr *a, char *out, size_t cap)
{
	herd__peer_step *s = NULL;
	herd__peer_conn c;
	size_t n = 0, o = 0;

	out[0] = '\0';
	CHECK_OK(herd__peer_connect(&c, a, soon()));
	CHECK_OK(herd__peer_list(&c, &s, &n, soon()));
	herd__peer_close(&c);
	for (size_t i = 0; i < n && o < cap; i++) {
		o += (size_t)snprintf(out + o, cap - o, "%s%" PRId64 "/%" PRIu64 ":%s:", i ? " " : "",
				      s[i].key.step, s[i].key.id, s[i].manifest ? "m" : "-");
		for (size_t f = 0; f < s[i].nfiles && o < cap; f++)
			o += (size_t)snprintf(out + o, cap - o, "%s%d", f ? "," : "", s[i].ranks[f]);
	}
	herd__peer_steps_free(s, n);
}

static void test_put_commit_list_fetch(void)
{
	struct holder_thread h;
	herd__peer_key k = { 1, 5, 7 };
	herd__peer_conn c;
	uint8_t got[64];
	char list[256], *m = NULL;
	size_t mlen = 0;

	holder_start(&h, 1 << 20, 1);
	CHECK_OK(put(&h.addr, k, 0, 100, 0xa0));
	CHECK_OK(put(&h.addr, k, 1, 200, 0xa1));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "5/7:-:0,1");
	CHECK_OK(commit(&h.addr, k, "the manifest"));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "5/7:m:0,1");
	CHECK_OK(herd__peer_connect(&c, &h.addr, soon()));
	CHECK_OK(herd__peer_fetch(&c, &k, 1, 150, 50, got, soon()));
	CHECK(got[0] == 0xa1 && got[49] == 0xa1);
	CHECK_OK(herd__peer_fetch_manifest(&c, &k, &m, &mlen, soon()));
	CHECK(mlen == 12 && memcmp(m, "the manifest", 12) == 0);
	free(m);
	/* Beyond the bytes held, a rank not held, a save not held: refused, the
	 * connection still in step for the next request. */
	CHECK_ERR(herd__peer_fetch(&c, &k, 1, 190, 20, got, soon()), HERD_EINVAL, "beyond the 200");
	CHECK_ERR(herd__peer_fetch(&c, &k, 2, 0, 1, got, soon()), HERD_ENOTFOUND,
		  "saved rank 2 is not held here");
	k.id = 8;
	CHECK_ERR(herd__peer_fetch_manifest(&c, &k, &m, &mlen, soon()), HERD_ENOTFOUND,
		  "its manifest is not held here");
	k.id = 7;
	CHECK_OK(herd__peer_fetch(&c, &k, 0, 0, 10, got, soon()));
	CHECK(got[9] == 0xa0);
	herd__peer_close(&c);
	holder_stop(&h);
}

static void test_which_saves_are_kept(void)
{
	struct holder_thread h;
	char list[256];

	holder_start(&h, 1 << 20, 1);
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 5, 7 }, 0, 10, 1));
	CHECK_OK(commit(&h.addr, (herd__peer_key){ 1, 5, 7 }, "m5"));
	/* The next save arrives beside the committed one... */
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 6, 8 }, 0, 10, 2));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "5/7:m:0 6/8:-:0");
	/* ... and its commit drops it (one committed step kept). */
	CHECK_OK(commit(&h.addr, (herd__peer_key){ 1, 6, 8 }, "m6"));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "6/8:m:0");
	/* A failed run left step 7 uncommitted; the restarted run, from step 6,
	 * saves step 7 again under another id: the leftover goes, the newest
	 * committed save stays. */
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 7, 9 }, 0, 10, 3));
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 7, 10 }, 0, 10, 4));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "6/8:m:0 7/10:-:0");
	/* Another checkpoint directory of the job keeps apart. */
	CHECK_OK(put(&h.addr, (herd__peer_key){ 2, 3, 11 }, 0, 10, 5));
	CHECK_OK(commit(&h.addr, (herd__peer_key){ 2, 3, 11 }, "other"));
	CHECK_OK(commit(&h.addr, (herd__peer_key){ 1, 7, 10 }, "m7"));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "7/10:m:0 3/11:m:0");
	/* The job went back to step 4 (storage's, say) and saves step 5: step 7,
	 * even committed last, is of a timeline given up, and goes. */
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 5, 12 }, 0, 10, 6));
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "3/11:m:0 5/12:-:0");
	holder_stop(&h);
}

static void test_budget_and_token(void)
{
	struct holder_thread h;
	herd__peer_addr wrong;
	herd__peer_conn c;
	char list[256];

	holder_start(&h, 1000, 1);
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 1, 1 }, 0, 600, 1));
	CHECK_OK(commit(&h.addr, (herd__peer_key){ 1, 1, 1 }, "m1"));
	/* The newest committed save is never dropped for room. */
	CHECK_ERR(put(&h.addr, (herd__peer_key){ 1, 2, 2 }, 0, 600, 2), HERD_ENORESOURCE,
		  "over this holder's budget of 1000 (HERD_CKPT_PEER_BYTES)");
	listing(&h.addr, list, sizeof(list));
	CHECK_STR(list, "1/1:m:0");
	CHECK_OK(put(&h.addr, (herd__peer_key){ 1, 2, 2 }, 0, 300, 2));
	wrong = h.addr;
	memset(wrong.token, 'f', HERD__PEER_TOKEN_LEN);
	CHECK_ERR(herd__peer_connect(&c, &wrong, soon()), HERD_EAUTH, "wrong token");
	holder_stop(&h);
}

static void test_holders_list_parses(void)
{
	herd__peer_addr *a = NULL;
	size_t n = 0;

	CHECK_OK(herd__peer_parse("h1:4000/0123456789abcdef0123456789abcdef,-,"
				  "[::1]:5/ffffffffffffffffffffffffffffffff", &a, &n));
	CHECK(n == 3 && a[0].port == 4000 && a[1].port == 0 && a[2].port == 5);
	CHECK_STR(a[0].host, "h1");
	CHECK_STR(a[2].host, "[::1]");
	free(a);
	CHECK_ERR(herd__peer_parse("h1:4000/short", &a, &n), HERD_EINVAL, "entry 1");
	CHECK_ERR(herd__peer_parse("-,:4000/0123456789abcdef0123456789abcdef", &a, &n),
		  HERD_EINVAL, "entry 2");
	CHECK_ERR(herd__peer_parse("h1:99999/0123456789abcdef0123456789abcdef", &a, &n),
		  HERD_EINVAL, "HOST:PORT/TOKEN");
}

static void test_interval_meets_young_and_daly(void)
{
	herd_ckpt_interval_model m = { .save_s = 10, .lost_s = 60, .mttf_s = 86400 };
	herd_ckpt_interval_choice c;
	double young = sqrt(2 * 10 * 86400.0);

	CHECK_OK(herd_ckpt_interval(&m, &c));
	CHECK(fabs(c.young_s - young) < 1e-6);
	/* C << M: Daly's optimum is Young's, less C (to first order). */
	CHECK(fabs(c.optimum_s - (young - 10)) / young < 0.01);
	CHECK(c.interval_s == c.optimum_s && c.bound[0] == '\0');
	/* A minimum: either side is worse. */
	CHECK(herd_ckpt_ettr(&m, c.interval_s) > herd_ckpt_ettr(&m, 0.8 * c.interval_s));
	CHECK(herd_ckpt_ettr(&m, c.interval_s) > herd_ckpt_ettr(&m, 1.25 * c.interval_s));
	/* Without failures, ETTR is the time not stalled. */
	m.mttf_s = 1e12;
	CHECK(fabs(herd_ckpt_ettr(&m, 90) - 0.9) < 1e-6);
	/* A stall of 10 s a save, kept under 3.5% of the time: 286 s. */
	m.mttf_s = 600;
	CHECK_OK(herd_ckpt_interval(&m, &c));
	CHECK(fabs(c.interval_s - 10 / 0.035) < 1e-6);
	CHECK_STR(c.bound, "the overhead bound");
	m.min_interval_s = 500;
	CHECK_OK(herd_ckpt_interval(&m, &c));
	CHECK(c.interval_s == 500);
	CHECK_STR(c.bound, "the save's own time");
	m.save_s = 0;
	CHECK_ERR(herd_ckpt_interval(&m, &c), HERD_EINVAL, "save_s is 0");
	m.save_s = 1;
	m.max_overhead = 2;
	CHECK_ERR(herd_ckpt_interval(&m, &c), HERD_EINVAL, "max_overhead is 2");
}

static void test_model_from_measured_saves(void)
{
	char *dir = make_tmpdir(), source[160], start[64];
	herd_ckpt_interval_model m;
	herd_ckpt_stats s;
	herd_ckpt *ck = NULL;
	double w[1024] = { 0 };
	uint64_t shape[1] = { 1024 };
	struct timespec now;

	unsetenv("HERD_CKPT_MTTF");
	unsetenv("HERD_RESTART_COUNT");
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", w, HERD_FLOAT64, 1, shape, NULL, NULL));
	CHECK_ERR(herd_ckpt_model(ck, HERD_CKPT_TIER_STORAGE, &m, source, sizeof(source)),
		  HERD_ENOTFOUND, "no save to storage yet");
	CHECK_OK(herd_ckpt_save(ck, 1));
	CHECK_OK(herd_ckpt_save_async(ck, 2));
	CHECK_OK(herd_ckpt_wait(ck));
	CHECK_OK(herd_ckpt_get_stats(ck, &s));
	CHECK(s.storage.saves == 2 && s.peers.saves == 0);
	CHECK(s.storage.stall_s > 0 && s.storage.busy_s >= s.storage.stall_max_s * 0.5);
	CHECK_ERR(herd_ckpt_model(ck, HERD_CKPT_TIER_STORAGE, &m, source, sizeof(source)),
		  HERD_ENOTFOUND, "set HERD_CKPT_MTTF");
	setenv("HERD_CKPT_MTTF", "2h", 1);
	CHECK_OK(herd_ckpt_model(ck, HERD_CKPT_TIER_STORAGE, &m, source, sizeof(source)));
	CHECK(m.mttf_s == 7200 && m.lost_s == 30 && m.save_s > 0);
	CHECK_STR(source, "HERD_CKPT_MTTF=2h");
	setenv("HERD_CKPT_MTTF", "soon", 1);
	CHECK_ERR(herd_ckpt_model(ck, HERD_CKPT_TIER_STORAGE, &m, source, sizeof(source)),
		  HERD_EINVAL, "HERD_CKPT_MTTF='soon' is not a duration");
	/* From the job's failures: 2 in the 100 s since it started. */
	unsetenv("HERD_CKPT_MTTF");
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(start, sizeof(start), "%.3f", (double)now.tv_sec - 100);
	setenv("HERD_JOB_START", start, 1);
	setenv("HERD_RESTART_COUNT", "2", 1);
	CHECK_OK(herd_ckpt_model(ck, HERD_CKPT_TIER_STORAGE, &m, source, sizeof(source)));
	CHECK(m.mttf_s > 49 && m.mttf_s < 52);
	CHECK(strstr(source, "this job's 2 failures") != NULL);
	unsetenv("HERD_JOB_START");
	unsetenv("HERD_RESTART_COUNT");
	herd_ckpt_free(ck);
	rm_tree(dir);
}

int main(void)
{
	TEST_RUN(test_put_commit_list_fetch);
	TEST_RUN(test_which_saves_are_kept);
	TEST_RUN(test_budget_and_token);
	TEST_RUN(test_holders_list_parses);
	TEST_RUN(test_interval_meets_young_and_daly);
	TEST_RUN(test_model_from_measured_saves);
	return TEST_DONE();
}
