/*
 * tests/unit/test_serve.c - herd/serve.h from C: every bad field of a
 * spec refused by name; HAProxy missing or too old; the front door's
 * slots and statistics through a real HAProxy; a service of
 * examples/replica.c started, scaled through the control socket, a
 * replica killed and restarted alone, stopped; a job of ranks refusing
 * to be scaled.
 */
#include <jansson.h>
#include <signal.h>
#include <time.h>

#include "launch/haproxy.h"
#include "test.h"

static bool have_haproxy(void)
{
	return system("command -v haproxy >/dev/null 2>&1") == 0;
}

/* A port whose n ports from it are free on 127.0.0.1 now (none: 0). */
static int free_ports(int n)
{
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int tries = 0; tries < 100; tries++) {
		int base = 20000 + rand() % 38000, ok = 1;

		for (int p = base; ok && p < base + n; p++) {
			char cmd[160];

			snprintf(cmd, sizeof(cmd), "python3 -c \"import socket; s=socket.socket(); "
				 "s.bind(('127.0.0.1', %d))\" 2>/dev/null", p);
			ok = system(cmd) == 0;
		}
		if (ok)
			return base;
	}
	return 0;
}

static void test_bad_specs(void)
{
	const char *argv[] = { "true", NULL };
	herd_serve_spec s = HERD_SERVE_SPEC_INIT;
	herd_serve *svc = NULL;

	CHECK_ERR(herd_serve_start(&svc, NULL), HERD_EINVAL, "spec is NULL");
	s.port = 8000;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "herd_serve_spec.argv");
	s.argv = argv;
	s.min_replicas = 0;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "min_replicas 0, max_replicas 1");
	s.min_replicas = 3;
	s.max_replicas = 2;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "1 <= min_replicas <= max_replicas");
	s.min_replicas = 1;
	s.replicas = 5;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "herd_serve_spec.replicas is 5");
	s.replicas = 0;
	s.port = 0;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "herd_serve_spec.port is 0");
	s.port = 65535;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "go beyond 65535");
	s.port = 8000;
	s.health = "health";
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "herd_serve_spec.health is \"health\"");
	s.health = NULL;
	s.grace_ms = -1;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "must not be negative");
	s.grace_ms = 0;
	s.where = HERD_JOB_HOSTS;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "herd_serve_spec.hosts");
	s.version = 99;
	CHECK_ERR(herd_serve_start(&svc, &s), HERD_EINVAL, "HERD_SERVE_SPEC_INIT");
	CHECK(svc == NULL);
}

static void test_haproxy_missing_or_old(void)
{
	char ver[32], *dir = make_tmpdir(), path[512];
	FILE *f;

	setenv("HERD_HAPROXY", "/nonexistent/haproxy", 1);
	CHECK_ERR(herd__haproxy_check(NULL, ver, sizeof(ver)), HERD_EUNAVAIL,
		  "HAProxy is not installed here");
	snprintf(path, sizeof(path), "%s/haproxy", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f != NULL) {
		fputs("#!/bin/sh\necho 'HA-Proxy version 1.9.16 2020/07/31'\n", f);
		fclose(f);
	}
	chmod(path, 0755);
	setenv("HERD_HAPROXY", path, 1);
	CHECK_ERR(herd__haproxy_check(NULL, ver, sizeof(ver)), HERD_EUNAVAIL,
		  "is HAProxy 1.9.16; herd needs 2.0 or newer");
	f = fopen(path, "w");
	if (f != NULL) {
		fputs("#!/bin/sh\necho 'nginx version: nginx/1.22.1'\n", f);
		fclose(f);
	}
	CHECK_ERR(herd__haproxy_check(NULL, ver, sizeof(ver)), HERD_EUNAVAIL,
		  "not HAProxy's version");
	unsetenv("HERD_HAPROXY");
	rm_tree(dir);
}

/* The slots through the runtime API, read back from `show stat`. */
static void test_haproxy_slots(void)
{
	herd__haproxy hp;
	herd__haproxy_conf c = { .bind = "127.0.0.1", .slots = 3, .health = "/health",
				 .queue_ms = 1000 };
	herd__haproxy_stat st[3], be;
	char why[256];

	if (!have_haproxy())
		TEST_SKIP("no haproxy here");
	c.port = free_ports(1);
	CHECK(c.port > 0);
	CHECK_OK(herd__haproxy_start(&hp, &c));
	CHECK(herd__haproxy_running(&hp, why, sizeof(why)));
	CHECK_OK(herd__haproxy_stats(&hp, st, 3, &be));
	CHECK_STR(st[0].status, "MAINT");
	CHECK_STR(st[2].status, "MAINT");
	CHECK(!st[1].up);
	CHECK_OK(herd__haproxy_slot_addr(&hp, 1, "127.0.0.1", 9));
	CHECK_OK(herd__haproxy_slot_state(&hp, 1, "drain"));
	CHECK_OK(herd__haproxy_stats(&hp, st, 3, &be));
	CHECK(strcmp(st[1].status, "MAINT") != 0);
	CHECK_STR(st[0].status, "MAINT");
	CHECK_ERR(herd__haproxy_slot_state(&hp, 1, "sideways"), HERD_EINVAL, "HAProxy refused");
	herd__haproxy_stop(&hp);
	CHECK(!herd__haproxy_running(&hp, why, sizeof(why)));
	CHECK(access(hp.sock, F_OK) != 0);
}

static json_t *status_of(herd_serve *svc)
{
	char *text = NULL;
	json_t *o;

	if (herd_serve_status(svc, &text) != HERD_OK)
		return NULL;
	o = json_loads(text, 0, NULL);
	free(text);
	return o;
}

static json_int_t replica_field(json_t *o, size_t i, const char *key)
{
	return json_integer_value(json_object_get(json_array_get(json_object_get(o, "replicas"),
								 i), key));
}

static void test_service(void)
{
	const char *bin = getenv("HERD_BIN");
	char replica[1024];
	const char *argv[] = { replica, "--work-ms", "1", NULL };
	herd_serve_spec s = HERD_SERVE_SPEC_INIT;
	herd_serve *svc = NULL;
	json_t *o;
	json_int_t pid;
	bool failed = true, restarted = false;

	if (!have_haproxy())
		TEST_SKIP("no haproxy here");
	if (bin == NULL)
		TEST_SKIP("HERD_BIN is not set (run under ctest)");
	snprintf(replica, sizeof(replica), "%.*s/example_replica",
		 (int)(strrchr(bin, '/') - bin), bin);
	s.argv = argv;
	s.port = free_ports(4);
	s.min_replicas = 1;
	s.max_replicas = 3;
	s.health = "/health";
	s.grace_ms = 2000;
	s.output = NULL;
	CHECK(s.port > 0);
	CHECK_OK(herd_serve_start(&svc, &s));
	if (svc == NULL)
		return;
	CHECK_OK(herd_serve_wait_ready(svc, 1, 30000));
	CHECK_ERR(herd_serve_scale(svc, 4), HERD_EINVAL, "runs 1 to 3 replicas: 4 is beyond them");
	/* As herd job scale does: through the control socket. */
	CHECK_OK(herd_jobs_scale(herd_serve_id(svc), 2));
	CHECK_OK(herd_serve_wait_ready(svc, 2, 30000));
	o = status_of(svc);
	CHECK(o != NULL && json_integer_value(json_object_get(o, "wanted")) == 2);
	pid = o != NULL ? replica_field(o, 1, "pid") : 0;
	json_decref(o);
	CHECK(pid > 0);
	if (pid > 0)
		kill((pid_t)pid, SIGKILL);
	/* Restarted alone: its count 1, the other's 0 (20 s at most). */
	for (int k = 0; k < 200 && !restarted; k++) {
		o = status_of(svc);
		restarted = o != NULL && replica_field(o, 1, "restarts") == 1 &&
			    replica_field(o, 1, "pid") != pid &&
			    strcmp(json_string_value(json_object_get(json_array_get(
				json_object_get(o, "replicas"), 1), "state")), "ready") == 0;
		if (restarted)
			CHECK(replica_field(o, 0, "restarts") == 0);
		json_decref(o);
		if (!restarted)
			usleep(100 * 1000);
	}
	CHECK(restarted);
	CHECK_OK(herd_serve_stop(svc));
	CHECK_OK(herd_serve_wait(svc, 0, &failed));
	CHECK(!failed);
	CHECK(herd_serve_failure(svc) == NULL);
	CHECK_ERR(herd_serve_restart(svc, true), HERD_ECLOSED, "is over");
	herd_serve_free(svc);
}

static void test_job_is_no_service(void)
{
	const char *argv[] = { "sleep", "30", NULL };
	herd_job_spec js = HERD_JOB_SPEC_INIT;
	herd_job *job = NULL;

	js.argv = argv;
	js.nranks = 1;
	CHECK_OK(herd_job_launch(&job, &js));
	if (job == NULL)
		return;
	CHECK_ERR(herd_jobs_scale(herd_job_id(job), 2), HERD_EINVAL, "a job of ranks, not a service");
	CHECK_ERR(herd_jobs_restart(herd_job_id(job), true), HERD_EINVAL, "no replicas");
	herd_job_kill(job);
	herd_job_free(job);
}

int main(void)
{
	char *run = make_tmpdir();

	/* The jobs' control sockets of this test's own. */
	setenv("XDG_RUNTIME_DIR", run, 1);
	signal(SIGPIPE, SIG_IGN);
	TEST_RUN(test_bad_specs);
	TEST_RUN(test_haproxy_missing_or_old);
	TEST_RUN(test_haproxy_slots);
	TEST_RUN(test_service);
	TEST_RUN(test_job_is_no_service);
	rm_tree(run);
	return TEST_DONE();
}
