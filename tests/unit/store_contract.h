/*
 * tests/unit/store_contract.h - the behaviour every herd_store has, TCP or
 * file.  Included by test_store_tcp.c and test_store_file.c, which define
 * contract_open() (a fresh handle on the store under test, also usable in a
 * forked child) and contract_where (text every error message about the
 * store must contain: its address or directory), then call
 * run_store_contract().
 *
 * Every wait in here is bounded: timeouts are at most a few seconds, loops
 * are counted, children are reaped with a deadline.
 */
#ifndef HERD_TEST_STORE_CONTRACT_H
#define HERD_TEST_STORE_CONTRACT_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "herd/store.h"
#include "net.h"
#include "test.h"

/* Opens a new handle on the store under test with the given timeout. */
static herd_status contract_open(herd_store **out, int timeout_ms);
static const char *contract_where(void);

static int64_t now_ms(void)
{
	return herd__net_now_ms();
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Waits up to timeout_ms for a child; kills it when it overstays.  Its exit code, or -1. */
static int reap_child(pid_t pid, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0)
			return -1;
		if (now_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		sleep_ms(5);
	}
}

/* A handle under a prefix of its own, so tests never see each other's keys. */
static herd_store *open_scoped(const char *scope, int timeout_ms)
{
	herd_store *root = NULL, *s = NULL;
	char prefix[128];

	if (contract_open(&root, timeout_ms) != HERD_OK) {
		TEST_FAIL_("cannot open the store: %s", herd_last_error());
		return NULL;
	}
	snprintf(prefix, sizeof(prefix), "test/%ld/%s/", (long)getpid(), scope);
	if (herd_store_prefix(&s, root, prefix) != HERD_OK)
		TEST_FAIL_("herd_store_prefix: %s", herd_last_error());
	herd_store_free(root);
	return s;
}

static void test_store_set_then_get_returns_the_bytes(void)
{
	herd_store *s = open_scoped("setget", 5000);
	const char bin[5] = { 'a', 0, 'b', (char)0xff, 0 };
	void *v = NULL;
	size_t len = 99;

	if (s == NULL)
		return;
	CHECK_OK(herd_store_set(s, "k", "hello", 5));
	CHECK_OK(herd_store_get(s, "k", 0, &v, &len));
	CHECK_INT(len, 5);
	CHECK_STR((char *)v, "hello");
	herd_free(v);
	/* Binary bytes, embedded NULs, and a NUL after the value. */
	CHECK_OK(herd_store_set(s, "bin", bin, sizeof(bin)));
	CHECK_OK(herd_store_get(s, "bin", 0, &v, &len));
	CHECK_INT(len, 5);
	CHECK(v != NULL && memcmp(v, bin, 5) == 0 && ((char *)v)[5] == '\0');
	herd_free(v);
	/* An empty value exists. */
	CHECK_OK(herd_store_set(s, "empty", NULL, 0));
	CHECK_OK(herd_store_get(s, "empty", 0, &v, &len));
	CHECK_INT(len, 0);
	CHECK_STR((char *)v, "");
	herd_free(v);
	/* Overwrite; len may be NULL. */
	CHECK_OK(herd_store_set(s, "k", "bye", 3));
	CHECK_OK(herd_store_get(s, "k", 0, &v, NULL));
	CHECK_STR((char *)v, "bye");
	herd_free(v);
	herd_store_free(s);
}

static void test_store_large_values_round_trip(void)
{
	herd_store *s = open_scoped("large", 20000);
	size_t sizes[] = { 1u << 20, HERD_STORE_VALUE_MAX };
	void *v = NULL;
	size_t len = 0;

	if (s == NULL)
		return;
	for (size_t i = 0; i < 2; i++) {
		uint8_t *big = malloc(sizes[i]);

		for (size_t j = 0; j < sizes[i]; j++)
			big[j] = (uint8_t)(j * 31 + i);
		CHECK_OK(herd_store_set(s, "big", big, sizes[i]));
		CHECK_OK(herd_store_get(s, "big", 0, &v, &len));
		CHECK_INT(len, sizes[i]);
		CHECK(v != NULL && memcmp(v, big, sizes[i]) == 0);
		herd_free(v);
		free(big);
	}
	herd_store_free(s);
}

struct delayed_set {
	herd_store *s;
	const char *key;
	int delay_ms;
};

static void *set_later(void *arg)
{
	struct delayed_set *d = arg;

	sleep_ms(d->delay_ms);
	if (herd_store_set(d->s, d->key, "late", 4) != HERD_OK)
		return (void *)1;
	return NULL;
}

static void test_store_get_waits_until_another_thread_sets_the_key(void)
{
	herd_store *s = open_scoped("getwait-thread", 5000), *other;
	struct delayed_set d;
	pthread_t t;
	void *v = NULL, *ret = (void *)1;
	int64_t t0, took;

	if (s == NULL)
		return;
	/* The setter uses its own connection; the same-handle case is below. */
	other = open_scoped("getwait-thread", 5000);
	d = (struct delayed_set){ other, "k", 200 };
	t0 = now_ms();
	CHECK_INT(pthread_create(&t, NULL, set_later, &d), 0);
	CHECK_OK(herd_store_get(s, "k", 3000, &v, NULL));
	took = now_ms() - t0;
	CHECK_STR((char *)v, "late");
	CHECK(took >= 150 && took < 2000);
	herd_free(v);
	pthread_join(t, &ret);
	CHECK(ret == NULL);
	herd_store_free(other);
	herd_store_free(s);
}

static void test_store_get_and_set_share_one_handle_across_threads(void)
{
	herd_store *s = open_scoped("samehandle", 5000);
	struct delayed_set d;
	pthread_t t;
	void *v = NULL, *ret = (void *)1;
	int64_t t0;

	if (s == NULL)
		return;
	/* A get blocked on the handle must not hold up a set on the same handle. */
	d = (struct delayed_set){ s, "k", 100 };
	t0 = now_ms();
	CHECK_INT(pthread_create(&t, NULL, set_later, &d), 0);
	CHECK_OK(herd_store_get(s, "k", 4000, &v, NULL));
	CHECK(now_ms() - t0 < 2000);
	CHECK_STR((char *)v, "late");
	herd_free(v);
	pthread_join(t, &ret);
	CHECK(ret == NULL);
	herd_store_free(s);
}

struct adder {
	herd_store *s;
	int n;
	int failures;
};

static void *add_many(void *arg)
{
	struct adder *a = arg;

	for (int i = 0; i < a->n; i++)
		if (herd_store_add(a->s, "count", 1, NULL) != HERD_OK)
			a->failures++;
	return NULL;
}

static void test_store_one_handle_serves_concurrent_threads(void)
{
	herd_store *s = open_scoped("threads", 10000);
	struct adder a[4];
	pthread_t t[4];
	int64_t total = 0;

	if (s == NULL)
		return;
	for (int i = 0; i < 4; i++) {
		a[i] = (struct adder){ s, 200, 0 };
		CHECK_INT(pthread_create(&t[i], NULL, add_many, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_INT(a[i].failures, 0);
	}
	CHECK_OK(herd_store_add(s, "count", 0, &total));
	CHECK_INT(total, 800);
	herd_store_free(s);
}

static void test_store_get_waits_until_another_process_sets_the_key(void)
{
	herd_store *s = open_scoped("getwait-proc", 5000);
	void *v = NULL;
	pid_t pid;

	if (s == NULL)
		return;
	pid = fork();
	if (pid == 0) {
		herd_store *c = NULL, *p = NULL;
		char prefix[128];
		int ok;

		/* The parent's scope, under the parent's pid. */
		snprintf(prefix, sizeof(prefix), "test/%ld/getwait-proc/", (long)getppid());
		ok = contract_open(&c, 5000) == HERD_OK && herd_store_prefix(&p, c, prefix) == HERD_OK;
		sleep_ms(200);
		ok = ok && herd_store_set(p, "k", "from child", 10) == HERD_OK;
		herd_store_free(p);
		herd_store_free(c);
		_exit(ok ? 0 : 1);
	}
	CHECK(pid > 0);
	CHECK_OK(herd_store_get(s, "k", 4000, &v, NULL));
	CHECK_STR((char *)v, "from child");
	herd_free(v);
	CHECK_INT(reap_child(pid, 5000), 0);
	herd_store_free(s);
}

static void test_store_get_times_out_naming_key_and_store(void)
{
	herd_store *s = open_scoped("timeout", 5000);
	void *v = (void *)1;
	size_t len = 7;
	int64_t t0, took;

	if (s == NULL)
		return;
	t0 = now_ms();
	CHECK_ERR(herd_store_get(s, "never", 300, &v, &len), HERD_ETIMEDOUT, "never\" not set "
		  "within 300 ms");
	took = now_ms() - t0;
	CHECK(strstr(herd_last_error(), contract_where()) != NULL);
	CHECK(strstr(herd_last_error(), "/timeout/never") != NULL);
	CHECK(v == NULL);
	CHECK_INT(len, 0);
	CHECK(took >= 290 && took < 1300);
	printf("  [timing] get with a 300 ms deadline on a missing key returned ETIMEDOUT after "
	       "%lld ms\n", (long long)took);
	/* timeout 0 checks once. */
	t0 = now_ms();
	CHECK_ERR(herd_store_get(s, "never", 0, &v, NULL), HERD_ETIMEDOUT, "never");
	CHECK(now_ms() - t0 < 200);
	herd_store_free(s);
}

static void test_store_add_counts_atomically(void)
{
	herd_store *s = open_scoped("add", 5000);
	int64_t n = 0;
	void *v = NULL;

	if (s == NULL)
		return;
	CHECK_OK(herd_store_add(s, "c", 5, &n));
	CHECK_INT(n, 5);
	CHECK_OK(herd_store_add(s, "c", -7, &n));
	CHECK_INT(n, -2);
	CHECK_OK(herd_store_get(s, "c", 0, &v, NULL));
	CHECK_STR((char *)v, "-2");
	herd_free(v);
	/* A value set as text counts too. */
	CHECK_OK(herd_store_set(s, "t", "40", 2));
	CHECK_OK(herd_store_add(s, "t", 2, &n));
	CHECK_INT(n, 42);
	CHECK_OK(herd_store_set(s, "word", "forty", 5));
	CHECK_ERR(herd_store_add(s, "word", 1, &n), HERD_EFORMAT, "\"forty\" is not a decimal");
	CHECK(strstr(herd_last_error(), "word") != NULL);
	CHECK_OK(herd_store_get(s, "word", 0, &v, NULL));
	CHECK_STR((char *)v, "forty");
	herd_free(v);
	CHECK_OK(herd_store_set(s, "max", "9223372036854775807", 19));
	CHECK_ERR(herd_store_add(s, "max", 1, NULL), HERD_EINVAL, "overflows");
	CHECK_OK(herd_store_add(s, "max", -7, &n));
	CHECK_INT(n, INT64_MAX - 7);
	herd_store_free(s);
}

static void test_store_add_is_atomic_across_8_processes(void)
{
	enum { PROCS = 8, ADDS = 200 };
	herd_store *s = open_scoped("add8", 20000);
	pid_t pids[PROCS];
	int64_t total = -1, t0 = now_ms();

	if (s == NULL)
		return;
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			herd_store *c = NULL, *p = NULL;
			char prefix[128];
			int ok;

			snprintf(prefix, sizeof(prefix), "test/%ld/add8/", (long)getppid());
			ok = contract_open(&c, 20000) == HERD_OK &&
			     herd_store_prefix(&p, c, prefix) == HERD_OK;
			for (int j = 0; ok && j < ADDS; j++)
				ok = herd_store_add(p, "total", 1, NULL) == HERD_OK;
			if (!ok)
				fprintf(stderr, "child: %s\n", herd_last_error());
			herd_store_free(p);
			herd_store_free(c);
			_exit(ok ? 0 : 1);
		}
		CHECK(pids[i] > 0);
	}
	for (int i = 0; i < PROCS; i++)
		CHECK_INT(reap_child(pids[i], 60000), 0);
	CHECK_OK(herd_store_add(s, "total", 0, &total));
	CHECK_INT(total, PROCS * ADDS);
	printf("  [timing] %d processes x %d adds took %lld ms\n", PROCS, ADDS,
	       (long long)(now_ms() - t0));
	herd_store_free(s);
}

static void test_store_compare_set_swaps_only_on_a_match(void)
{
	herd_store *s = open_scoped("cas", 5000);
	void *cur = (void *)1;
	size_t len = 9;
	bool swapped = false;

	if (s == NULL)
		return;
	/* Absent expected, key absent: created. */
	CHECK_OK(herd_store_compare_set(s, "k", NULL, 0, "one", 3, &swapped, &cur, &len));
	CHECK_INT(swapped, 1);
	CHECK_STR((char *)cur, "one");
	CHECK_INT(len, 3);
	herd_free(cur);
	/* Absent expected, key present: not swapped, the current value comes back. */
	CHECK_OK(herd_store_compare_set(s, "k", NULL, 0, "two", 3, &swapped, &cur, &len));
	CHECK_INT(swapped, 0);
	CHECK_STR((char *)cur, "one");
	herd_free(cur);
	/* Wrong expected value. */
	CHECK_OK(herd_store_compare_set(s, "k", "uno", 3, "two", 3, &swapped, &cur, NULL));
	CHECK_INT(swapped, 0);
	CHECK_STR((char *)cur, "one");
	herd_free(cur);
	/* A prefix of the value is not the value. */
	CHECK_OK(herd_store_compare_set(s, "k", "on", 2, "two", 3, &swapped, NULL, NULL));
	CHECK_INT(swapped, 0);
	/* The right one. */
	CHECK_OK(herd_store_compare_set(s, "k", "one", 3, "two", 3, &swapped, &cur, &len));
	CHECK_INT(swapped, 1);
	CHECK_STR((char *)cur, "two");
	herd_free(cur);
	CHECK_OK(herd_store_get(s, "k", 0, &cur, NULL));
	CHECK_STR((char *)cur, "two");
	herd_free(cur);
	/* Expecting a value of a key that is absent: not swapped, current NULL. */
	CHECK_OK(herd_store_compare_set(s, "nokey", "x", 1, "y", 1, &swapped, &cur, &len));
	CHECK_INT(swapped, 0);
	CHECK(cur == NULL);
	CHECK_INT(len, 0);
	CHECK_ERR(herd_store_get(s, "nokey", 0, &cur, NULL), HERD_ETIMEDOUT, "nokey");
	/* An empty expected value differs from an absent key. */
	CHECK_OK(herd_store_set(s, "e", "", 0));
	CHECK_OK(herd_store_compare_set(s, "e", NULL, 0, "z", 1, &swapped, NULL, NULL));
	CHECK_INT(swapped, 0);
	CHECK_OK(herd_store_compare_set(s, "e", "", 0, "z", 1, &swapped, NULL, NULL));
	CHECK_INT(swapped, 1);
	herd_store_free(s);
}

static void *cas_waiter(void *arg)
{
	herd_store *s = arg;
	void *v = NULL;
	herd_status st = herd_store_get(s, "created", 3000, &v, NULL);

	herd_free(v);
	return st == HERD_OK ? NULL : (void *)1;
}

static void test_store_compare_set_and_add_wake_waiters(void)
{
	herd_store *s = open_scoped("cas-wake", 5000), *w = open_scoped("cas-wake", 5000);
	const char *keys[] = { "counted" };
	pthread_t t;
	void *ret = (void *)1;

	if (s == NULL || w == NULL)
		return;
	CHECK_INT(pthread_create(&t, NULL, cas_waiter, w), 0);
	sleep_ms(100);
	CHECK_OK(herd_store_compare_set(s, "created", NULL, 0, "x", 1, NULL, NULL, NULL));
	pthread_join(t, &ret);
	CHECK(ret == NULL);
	CHECK_OK(herd_store_add(s, "counted", 1, NULL));
	CHECK_OK(herd_store_wait(w, keys, 1, 1000));
	herd_store_free(w);
	herd_store_free(s);
}

static void test_store_delete_removes_the_key(void)
{
	herd_store *s = open_scoped("del", 5000);
	bool existed = false;
	void *v = NULL;

	if (s == NULL)
		return;
	CHECK_OK(herd_store_set(s, "k", "v", 1));
	CHECK_OK(herd_store_delete(s, "k", &existed));
	CHECK_INT(existed, 1);
	CHECK_ERR(herd_store_get(s, "k", 0, &v, NULL), HERD_ETIMEDOUT, "k\"");
	CHECK_OK(herd_store_delete(s, "k", &existed));
	CHECK_INT(existed, 0);
	CHECK_OK(herd_store_delete(s, "k", NULL));
	/* A deleted counter starts again from 0. */
	CHECK_OK(herd_store_add(s, "c", 3, NULL));
	CHECK_OK(herd_store_delete(s, "c", NULL));
	{
		int64_t n = 0;

		CHECK_OK(herd_store_add(s, "c", 1, &n));
		CHECK_INT(n, 1);
	}
	herd_store_free(s);
}

static void test_store_wait_returns_when_every_key_exists(void)
{
	herd_store *s = open_scoped("wait", 5000), *other = open_scoped("wait", 5000);
	const char *keys[] = { "a", "b", "c" };
	struct delayed_set d;
	pthread_t t;
	int64_t t0, took;

	if (s == NULL || other == NULL)
		return;
	CHECK_OK(herd_store_set(s, "a", "1", 1));
	CHECK_OK(herd_store_set(s, "b", "1", 1));
	/* One missing: times out naming only it. */
	t0 = now_ms();
	CHECK_ERR(herd_store_wait(s, keys, 3, 250), HERD_ETIMEDOUT,
		  "1 of 3 keys not set within 250 ms");
	took = now_ms() - t0;
	CHECK(strstr(herd_last_error(), "wait/c\"") != NULL);
	CHECK(strstr(herd_last_error(), "wait/a\"") == NULL);
	CHECK(strstr(herd_last_error(), contract_where()) != NULL);
	CHECK(took >= 240 && took < 1300);
	CHECK_ERR(herd_store_wait(s, keys, 3, 0), HERD_ETIMEDOUT, "wait/c\"");
	/* Released by the last set. */
	d = (struct delayed_set){ other, "c", 150 };
	t0 = now_ms();
	CHECK_INT(pthread_create(&t, NULL, set_later, &d), 0);
	CHECK_OK(herd_store_wait(s, keys, 3, 3000));
	took = now_ms() - t0;
	CHECK(took >= 100 && took < 2000);
	pthread_join(t, NULL);
	CHECK_OK(herd_store_wait(s, keys, 3, 0));
	herd_store_free(other);
	herd_store_free(s);
}

static void test_store_wait_takes_up_to_its_maximum_of_keys(void)
{
	enum { N = HERD_STORE_WAIT_MAX_KEYS };
	herd_store *s = open_scoped("waitmax", 20000);
	const char **keys = calloc(N + 1, sizeof(*keys));
	char (*names)[16] = calloc(N + 1, sizeof(*names));

	if (s == NULL || keys == NULL || names == NULL)
		goto out;
	for (int i = 0; i <= N; i++) {
		snprintf(names[i], sizeof(names[i]), "w%d", i);
		keys[i] = names[i];
	}
	for (int i = 1; i < N; i++)
		CHECK_OK(herd_store_set(s, keys[i], "", 0));
	CHECK_ERR(herd_store_wait(s, keys, N, 0), HERD_ETIMEDOUT, "1 of 4096 keys");
	CHECK(strstr(herd_last_error(), "waitmax/w0\"") != NULL);
	CHECK_OK(herd_store_set(s, keys[0], "", 0));
	CHECK_OK(herd_store_wait(s, keys, N, 0));
	CHECK_ERR(herd_store_wait(s, keys, N + 1, 0), HERD_EINVAL, "4097 keys");
out:
	free(keys);
	free(names);
	herd_store_free(s);
}

static void test_store_prefixes_isolate_keys(void)
{
	herd_store *root = open_scoped("prefix", 5000), *a = NULL, *b = NULL, *ab = NULL;
	void *v = NULL;

	if (root == NULL)
		return;
	CHECK_OK(herd_store_prefix(&a, root, "job1/"));
	CHECK_OK(herd_store_prefix(&b, root, "job2/"));
	CHECK_OK(herd_store_set(a, "x", "in a", 4));
	CHECK_ERR(herd_store_get(b, "x", 0, &v, NULL), HERD_ETIMEDOUT, "prefix/job2/x\"");
	CHECK_ERR(herd_store_get(root, "x", 0, &v, NULL), HERD_ETIMEDOUT, "prefix/x\"");
	CHECK_OK(herd_store_get(root, "job1/x", 0, &v, NULL));
	CHECK_STR((char *)v, "in a");
	herd_free(v);
	/* Prefixes stack, and a child outlives its parent. */
	CHECK_OK(herd_store_prefix(&ab, a, "comm0/"));
	herd_store_free(a);
	herd_store_free(root);
	CHECK_OK(herd_store_set(ab, "rank0", "addr", 4));
	CHECK_OK(herd_store_add(ab, "n", 2, NULL));
	/* Keys are plain strings: ".." means nothing, so it reaches no other prefix. */
	CHECK_ERR(herd_store_get(b, "../job1/comm0/rank0", 0, &v, NULL), HERD_ETIMEDOUT,
		  "job2/../job1/comm0/rank0\"");
	CHECK_OK(herd_store_get(ab, "rank0", 0, &v, NULL));
	CHECK_STR((char *)v, "addr");
	herd_free(v);
	herd_store_free(ab);
	herd_store_free(b);
}

static void test_store_rejects_bad_arguments(void)
{
	herd_store *s = open_scoped("args", 5000), *p = NULL;
	char long_key[HERD_STORE_KEY_MAX + 2];
	const char *none[1] = { "" };
	void *v = NULL;

	if (s == NULL)
		return;
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	CHECK_ERR(herd_store_set(s, NULL, "v", 1), HERD_EINVAL, "NULL");
	CHECK_ERR(herd_store_set(s, "", "v", 1), HERD_EINVAL, "empty key");
	CHECK_ERR(herd_store_set(s, long_key, "v", 1), HERD_EINVAL, "at most 4096");
	CHECK_ERR(herd_store_set(s, "k", NULL, 3), HERD_EINVAL, "NULL");
	CHECK_ERR(herd_store_set(s, "k", "v", (size_t)HERD_STORE_VALUE_MAX + 1), HERD_EINVAL,
		  "exceeds the limit");
	CHECK_ERR(herd_store_get(s, "k", -5, &v, NULL), HERD_EINVAL, "-5 ms");
	CHECK_ERR(herd_store_get(s, "k", 0, NULL, NULL), HERD_EINVAL, "NULL");
	CHECK_ERR(herd_store_wait(s, none, 0, 0), HERD_EINVAL, "0 keys");
	CHECK_ERR(herd_store_wait(s, none, 1, 0), HERD_EINVAL, "empty key");
	CHECK_ERR(herd_store_compare_set(s, "k", NULL, 2, "v", 1, NULL, NULL, NULL), HERD_EINVAL,
		  "expected_len");
	CHECK_ERR(herd_store_prefix(&p, NULL, "x"), HERD_EINVAL, "NULL");
	CHECK(p == NULL);
	herd_store_free(NULL);
	herd_store_free(s);
}

static void test_store_keys_lists_a_prefix_in_byte_order(void)
{
	herd_store *s = open_scoped("keys", 5000), *sub = NULL;
	char long_key[320], **keys = NULL;
	size_t n = 99;

	if (s == NULL)
		return;
	/* long enough that the file store names its file by a hash */
	memset(long_key, 'a', sizeof(long_key) - 1);
	memcpy(long_key, "a/long/", 7);
	long_key[sizeof(long_key) - 1] = '\0';
	CHECK_OK(herd_store_set(s, "b", "1", 1));
	CHECK_OK(herd_store_set(s, "a", "2", 1));
	CHECK_OK(herd_store_add(s, "a/count", 1, NULL));
	CHECK_OK(herd_store_set(s, long_key, "3", 1));
	CHECK_OK(herd_store_set(s, "z y%", "4", 1));

	CHECK_OK(herd_store_keys(s, "", &keys, &n));
	CHECK_INT(n, 5);
	if (n == 5) {
		CHECK_STR(keys[0], "a");
		CHECK_STR(keys[1], "a/count");
		CHECK_STR(keys[2], long_key);
		CHECK_STR(keys[3], "b");
		CHECK_STR(keys[4], "z y%");
		CHECK(keys[5] == NULL);
	}
	herd_free(keys);
	CHECK_OK(herd_store_keys(s, "a/", &keys, &n));
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(keys[0], "a/count");
		CHECK_STR(keys[1], long_key);
	}
	herd_free(keys);
	CHECK_OK(herd_store_keys(s, "nothing", &keys, &n));
	CHECK_INT(n, 0);
	CHECK(keys != NULL && keys[0] == NULL);
	herd_free(keys);
	/* a prefix handle lists its own keys, without its prefix */
	CHECK_OK(herd_store_prefix(&sub, s, "a/"));
	CHECK_OK(herd_store_keys(sub, NULL, &keys, &n));
	CHECK_INT(n, 2);
	if (n == 2)
		CHECK_STR(keys[0], "count");
	herd_free(keys);
	herd_store_free(sub);
	/* deleted keys leave the listing */
	CHECK_OK(herd_store_delete(s, long_key, NULL));
	CHECK_OK(herd_store_delete(s, "b", NULL));
	CHECK_OK(herd_store_keys(s, "", &keys, &n));
	CHECK_INT(n, 3);
	herd_free(keys);
	CHECK_ERR(herd_store_keys(NULL, "", &keys, &n), HERD_EINVAL, "herd_store_keys");
	CHECK(keys == NULL && n == 0);
	herd_store_free(s);
}

static void test_store_keys_refuses_more_than_its_maximum(void)
{
	herd_store *s = open_scoped("keysmax", 10000);
	char **keys = (char **)&keys;
	size_t n = 99;

	if (s == NULL)
		return;
	for (int i = 0; i <= HERD_STORE_KEYS_MAX; i++) {
		char k[32];

		snprintf(k, sizeof(k), "k%05d", i);
		if (herd_store_set(s, k, "", 0) != HERD_OK) {
			TEST_FAIL_("set %s: %s", k, herd_last_error());
			break;
		}
	}
	CHECK_ERR(herd_store_keys(s, "k", &keys, &n), HERD_ENORESOURCE, "4096");
	CHECK(keys == NULL && n == 0);
	CHECK_OK(herd_store_keys(s, "k0409", &keys, &n));
	CHECK_INT(n, 7); /* k04090 .. k04096 */
	herd_free(keys);
	herd_store_free(s);
}

static void run_store_contract(void)
{
	TEST_RUN(test_store_set_then_get_returns_the_bytes);
	TEST_RUN(test_store_large_values_round_trip);
	TEST_RUN(test_store_get_waits_until_another_thread_sets_the_key);
	TEST_RUN(test_store_get_and_set_share_one_handle_across_threads);
	TEST_RUN(test_store_one_handle_serves_concurrent_threads);
	TEST_RUN(test_store_get_waits_until_another_process_sets_the_key);
	TEST_RUN(test_store_get_times_out_naming_key_and_store);
	TEST_RUN(test_store_add_counts_atomically);
	TEST_RUN(test_store_add_is_atomic_across_8_processes);
	TEST_RUN(test_store_compare_set_swaps_only_on_a_match);
	TEST_RUN(test_store_compare_set_and_add_wake_waiters);
	TEST_RUN(test_store_delete_removes_the_key);
	TEST_RUN(test_store_wait_returns_when_every_key_exists);
	TEST_RUN(test_store_wait_takes_up_to_its_maximum_of_keys);
	TEST_RUN(test_store_prefixes_isolate_keys);
	TEST_RUN(test_store_rejects_bad_arguments);
	TEST_RUN(test_store_keys_lists_a_prefix_in_byte_order);
	TEST_RUN(test_store_keys_refuses_more_than_its_maximum);
}

#endif /* HERD_TEST_STORE_CONTRACT_H */
