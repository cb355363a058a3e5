/*
 * The telemetry watch (herd_telemetry_watch_*) and its node side
 * (herd_agent_telemetry_watch), without ssh: this node in process; the
 * node side's records on pipes; and many "nodes" through a stand-in for
 * ssh (HERD_SSH) that runs each node's command here, chosen by its host
 * name, and through a stand-in for srun (HERD_SRUN, a task per node with
 * its lines labelled as srun --label labels them): a node that streams,
 * one that prints a banner, one that never answers, one that stalls, one
 * whose stream ends, one ssh cannot reach and one without herd, each
 * reported in its own state with its reason while the first streams on;
 * free stops every helper, which ends by itself (its stdin closed).
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "herd/sys/agent.h"
#include "watch_check.h"

static char *dir;

/* ---- the node side ------------------------------------------------------------ */

typedef struct agent_run {
	int in_fd, out_fd, stop_fd;
	uint64_t count, dropped;
	herd_telemetry_record format;
	herd_status st;
} agent_run;

static void *agent_thread(void *arg)
{
	agent_run *r = arg;

	r->st = herd_agent_telemetry_watch(r->in_fd, r->out_fd, r->stop_fd, 100, r->count,
					   r->format, &r->dropped);
	return NULL;
}

/* All of fd until its end. */
static size_t read_all(int fd, unsigned char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t r;

	while (len < cap && (r = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)r;
	return len;
}

static void test_agent_writes_count_frames_that_unpack_in_order(void)
{
	int in[2], out[2];
	agent_run r = { .count = 3, .format = HERD_TELEMETRY_RECORD_FRAME, .stop_fd = -1 };
	static unsigned char buf[1 << 20];
	herd_telemetry_sample *s = malloc(sizeof(*s));
	char host[256];
	pthread_t t;
	size_t len, at = 0, n = 0;

	gethostname(host, sizeof(host));
	host[strcspn(host, ".")] = '\0';
	CHECK(pipe(in) == 0 && pipe(out) == 0);
	r.in_fd = in[0];
	r.out_fd = out[1];
	CHECK_INT(pthread_create(&t, NULL, agent_thread, &r), 0);
	pthread_join(t, NULL);
	close(out[1]);
	CHECK_OK(r.st);
	CHECK_INT(r.dropped, 0);
	len = read_all(out[0], buf, sizeof(buf));
	while (at + 4 <= len) {
		uint32_t plen = (uint32_t)buf[at] << 24 | (uint32_t)buf[at + 1] << 16 |
				(uint32_t)buf[at + 2] << 8 | buf[at + 3];

		CHECK(plen > 0 && at + 4 + plen <= len);
		if (plen == 0 || at + 4 + plen > len)
			break;
		CHECK_OK(herd_telemetry_unpack(buf + at + 4, plen, s));
		CHECK_INT(s->seq, n + 1);
		CHECK_STR(s->host, host);
		at += 4 + plen;
		n++;
	}
	CHECK_INT(n, 3);
	CHECK_INT(at, len);
	close(in[0]);
	close(in[1]);
	close(out[0]);
	free(s);
}

static void test_agent_stops_at_its_inputs_end_and_at_stop(void)
{
	for (int how = 0; how < 2; how++) {
		int in[2], out[2], stop[2];
		agent_run r = { .format = HERD_TELEMETRY_RECORD_JSON };
		static unsigned char buf[1 << 20];
		pthread_t t;
		size_t len;

		CHECK(pipe(in) == 0 && pipe(out) == 0 && pipe(stop) == 0);
		r.in_fd = in[0];
		r.out_fd = out[1];
		r.stop_fd = stop[0];
		CHECK_INT(pthread_create(&t, NULL, agent_thread, &r), 0);
		/* The first line comes at once; then its input ends, or a stop. */
		len = 0;
		while (len == 0 || buf[len - 1] != '\n') {
			ssize_t got = read(out[0], buf + len, sizeof(buf) - len);

			if (got <= 0)
				break;
			len += (size_t)got;
		}
		CHECK(len > 0 && strncmp((char *)buf, "{", 1) == 0);
		if (how == 0) {
			CHECK_INT(write(in[1], "ignored\n", 8), 8);
			close(in[1]);
		} else {
			CHECK_INT(write(stop[1], "x", 1), 1);
		}
		pthread_join(t, NULL);
		CHECK_OK(r.st);
		close(in[0]);
		if (how == 1)
			close(in[1]);
		close(out[0]);
		close(out[1]);
		close(stop[0]);
		close(stop[1]);
	}
}

static void test_agent_refuses_a_period_under_100_ms(void)
{
	CHECK_ERR(herd_agent_telemetry_watch(-1, 1, -1, 99, 1, HERD_TELEMETRY_RECORD_FRAME, NULL),
		  HERD_EINVAL, "a period of 99 ms; give 100 ms to 24 h");
}

/* ---- this node, in process -------------------------------------------------------- */

static void test_watch_of_this_node_streams_its_samples(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	const herd_telemetry_node_state want[] = { HERD_TELEMETRY_NODE_STREAMING };
	herd_telemetry_watch *w = NULL;
	herd_telemetry_node info;
	watch_seen seen;
	char host[256];

	memset(&seen, 0, sizeof(seen));
	gethostname(host, sizeof(host));
	host[strcspn(host, ".")] = '\0';
	o.period_ms = 100;
	CHECK_OK(herd_telemetry_watch_start(&w, &o));
	if (w == NULL)
		return;
	CHECK_INT(herd_telemetry_watch_nodes(w), 1);
	CHECK(watch_until(w, &seen, want, 3, 20000));
	CHECK_OK(herd_telemetry_watch_node(w, 0, &info));
	CHECK_STR(info.host, host);
	CHECK_INT(info.state, HERD_TELEMETRY_NODE_STREAMING);
	CHECK_STR(info.why, "");
	CHECK_INT(info.lost, 0);
	CHECK(info.last_ms > 0);
	CHECK_INT(seen.first[0], 1);
	CHECK(seen.last[0] >= 3);
	CHECK_INT(seen.count[0], seen.last[0]);
	CHECK_INT(seen.bad_order + seen.bad_host + seen.bad_node, 0);
	CHECK_INT(herd_telemetry_watch_live(w), 1);
	CHECK_ERR(herd_telemetry_watch_node(w, 1, &info), HERD_EINVAL, "no such node");
	herd_telemetry_watch_free(w);
}

static void test_watch_queue_keeps_the_newest_and_counts_the_rest_lost(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	herd_telemetry_sample *s = malloc(sizeof(*s));
	herd_telemetry_watch *w = NULL;
	herd_telemetry_node info;
	uint64_t prev = 0;
	size_t taken = 0;

	o.period_ms = 100;
	o.queue = 3;
	CHECK_OK(herd_telemetry_watch_start(&w, &o));
	if (w == NULL)
		return;
	/* Nothing taken for a while: at least seven samples come, three are kept. */
	for (int k = 0; k < 200; k++) {
		CHECK_OK(herd_telemetry_watch_node(w, 0, &info));
		if (info.samples >= 7)
			break;
		usleep(50 * 1000);
	}
	CHECK(info.samples >= 7);
	CHECK(info.lost >= 4);
	CHECK_OK(herd_telemetry_watch_next(w, NULL, s));
	CHECK(s->seq >= 5);
	prev = s->seq;
	taken = 1;
	while (taken < 3 && herd_telemetry_watch_next(w, NULL, s) == HERD_OK) {
		CHECK_INT(s->seq, prev + 1);
		prev = s->seq;
		taken++;
	}
	CHECK_INT(taken, 3);
	herd_telemetry_watch_free(w);
	free(s);
}

static void test_watch_options_are_checked(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	herd_telemetry_watch *w = (herd_telemetry_watch *)&o;

	o.period_ms = 50;
	CHECK_ERR(herd_telemetry_watch_start(&w, &o), HERD_EINVAL, "period_ms 50: give 100 ms");
	CHECK(w == NULL);
	o.period_ms = 0;
	o.hosts = "a";
	o.slurm = true;
	CHECK_ERR(herd_telemetry_watch_start(&w, &o), HERD_EINVAL, "give one");
	o.slurm = false;
	o.stall_ms = -1;
	CHECK_ERR(herd_telemetry_watch_start(&w, &o), HERD_EINVAL, "stall_ms -1 is negative");
	o.stall_ms = 0;
	o.hosts = "a[1-";
	CHECK_ERR(herd_telemetry_watch_start(&w, &o), HERD_EFORMAT, "a[1-");
	o.hosts = NULL;
	o.version = 0;
	CHECK_ERR(herd_telemetry_watch_start(&w, &o), HERD_EINVAL, "HERD_TELEMETRY_WATCH_OPTS_INIT");
	CHECK_ERR(herd_telemetry_watch_next(NULL, NULL, NULL), HERD_EINVAL, "NULL");
	CHECK_INT(herd_telemetry_watch_fd(NULL), -1);
	CHECK_INT(herd_telemetry_watch_nodes(NULL), 0);
	CHECK_STR(herd_telemetry_node_state_name(HERD_TELEMETRY_NODE_NOT_STARTED), "not started");
	CHECK_STR(herd_telemetry_node_state_name((herd_telemetry_node_state)99), "?");
	herd_telemetry_watch_free(NULL);
}

/* ---- many nodes through a stand-in for ssh ------------------------------------------ */

/*
 * ssh [OPTIONS] -- HOST COMMAND: runs COMMAND here as node HOST, or acts
 * out a failure the host's name says.  Its pid in DIR/pid.HOST; the exit
 * status of a COMMAND it waits for in DIR/exit.HOST (written only when
 * the shell was not ended first).
 */
static const char fake_ssh[] =
	"#!/bin/sh\n"
	"while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n"
	"shift\n"
	"host=$1\n"
	"shift\n"
	"echo $$ >\"$WATCH_DIR/pid.$host\"\n"
	"case $host in\n"
	"banner) echo 'Welcome to banner'; exec sleep 30 ;;\n"
	"silent) exec sleep 30 ;;\n"
	"refused) echo \"ssh: connect to host $host port 22: Connection refused\" >&2; exit 255 ;;\n"
	"stalls) eval \"$* --count 2\"; exec sleep 30 ;;\n"
	"ends) eval \"exec $* --count 2\" ;;\n"
	"noherd) echo 'sh: 1: herd: not found' >&2; exit 127 ;;\n"
	"esac\n"
	"eval \"$*\"\n"
	"echo $? >\"$WATCH_DIR/exit.$host\"\n";

static void test_watch_over_ssh_reports_each_node_and_streams_on(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	const herd_telemetry_node_state want[] = {
		HERD_TELEMETRY_NODE_STREAMING,  HERD_TELEMETRY_NODE_BAD_RECORD,
		HERD_TELEMETRY_NODE_NOT_STARTED, HERD_TELEMETRY_NODE_STALLED,
		HERD_TELEMETRY_NODE_ENDED,       HERD_TELEMETRY_NODE_UNREACHABLE,
		HERD_TELEMETRY_NODE_NOT_STARTED, HERD_TELEMETRY_NODE_STREAMING,
	};
	static const char *const why[] = {
		"", "printed text before herd's protocol: 'Welcome to banner'; a login banner on stdout?",
		"no sample within 3.0 s", "no sample for 1.0 s after sample 2",
		"herd probe --watch exited 0",
		"ssh: connect to host refused port 22: Connection refused",
		"herd probe --watch exited 127: sh: 1: herd: not found", "",
	};
	static const char *const hosts[] = { "alpha", "banner", "silent", "stalls", "ends",
					     "refused", "noherd", "omega" };
	herd_telemetry_watch *w = NULL;
	watch_seen seen;
	char *script;
	long pids[8];
	int64_t t0;

	memset(&seen, 0, sizeof(seen));
	setenv("WATCH_DIR", dir, 1);
	script = watch_script(dir, "ssh", fake_ssh);
	setenv("HERD_SSH", script, 1);
	free(script);
	setenv("HERD_PROGRAM", getenv("HERD_BIN"), 1);
	o.hosts = "alpha,banner,silent,stalls,ends,refused,noherd,omega";
	o.period_ms = 100;
	o.start_timeout_ms = 3000;
	o.stall_ms = 1000;
	CHECK_OK(herd_telemetry_watch_start(&w, &o));
	if (w == NULL)
		return;
	CHECK_INT(herd_telemetry_watch_nodes(w), 8);
	if (!watch_until(w, &seen, want, 5, 30000)) {
		TEST_FAIL_("the nodes did not reach their states within 30 s");
		watch_print(w, &seen);
	}
	for (size_t i = 0; i < 8; i++) {
		herd_telemetry_node info;

		CHECK_OK(herd_telemetry_watch_node(w, i, &info));
		CHECK_STR(info.host, hosts[i]);
		CHECK_INT(info.state, want[i]);
		CHECK_STR(info.why, why[i]);
	}
	/* The stalled node's two samples came; the stream that ended, its two. */
	CHECK_INT(seen.count[3], 2);
	CHECK_INT(seen.count[4], 2);
	CHECK(seen.count[0] >= 5 && seen.count[7] >= 5);
	CHECK_INT(seen.first[0], 1);
	CHECK_INT(seen.bad_order + seen.bad_host + seen.bad_node, 0);
	CHECK_INT(herd_telemetry_watch_live(w), 2);
	t0 = watch_now_ms();
	herd_telemetry_watch_free(w);
	printf("     free took %lld ms\n", (long long)(watch_now_ms() - t0));
	CHECK(watch_now_ms() - t0 < 10000);
	/* Every helper is gone; the streaming ones' herd saw its stdin end
	 * and exited 0 by itself, before any signal. */
	for (size_t i = 0; i < 8; i++) {
		char name[64];

		snprintf(name, sizeof(name), "pid.%s", hosts[i]);
		pids[i] = watch_number(dir, name);
		CHECK(pids[i] > 0);
		if (pids[i] > 0 && !watch_gone(pids[i]))
			TEST_FAIL_("%s's helper (pid %ld) is still there after free", hosts[i], pids[i]);
	}
	CHECK_INT(watch_number(dir, "exit.alpha"), 0);
	CHECK_INT(watch_number(dir, "exit.omega"), 0);
	unsetenv("HERD_SSH");
}

/* ---- many nodes through a stand-in for srun ------------------------------------------ */

/*
 * srun [OPTIONS] PROGRAM WORDS...: a task per node of --nodelist, each
 * with the step's stdin and its lines labelled "T: " as srun --label
 * labels them; node sb's stream stops after two samples (its task goes
 * on, silent).  Each task's pid in DIR/pid.NODE.
 */
static const char fake_srun[] =
	"#!/bin/sh\n"
	"nodes=\n"
	"while [ $# -gt 0 ]; do\n"
	"  case $1 in --nodelist=*) nodes=${1#--nodelist=} ;; --*) ;; *) break ;; esac\n"
	"  shift\n"
	"done\n"
	"exec 3<&0\n"
	"t=0\n"
	"for n in $(echo \"$nodes\" | tr , ' '); do\n"
	"  if [ $n = sb ]; then extra='--count 2'; else extra=; fi\n"
	"  sh -c 'echo $$ >\"$WATCH_DIR/pid.'$n'\"; exec \"$@\"' sh \"$@\" $extra <&3 |\n"
	"    sed -u \"s/^/$t: /\" &\n"
	"  t=$((t + 1))\n"
	"done\n"
	"wait\n";

static void test_watch_in_one_srun_step_reads_text_records_by_task(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	const herd_telemetry_node_state want[] = { HERD_TELEMETRY_NODE_STREAMING,
						   HERD_TELEMETRY_NODE_STALLED };
	herd_telemetry_watch *w = NULL;
	herd_telemetry_node info;
	watch_seen seen;
	char *script;

	memset(&seen, 0, sizeof(seen));
	setenv("WATCH_DIR", dir, 1);
	script = watch_script(dir, "srun", fake_srun);
	setenv("HERD_SRUN", script, 1);
	free(script);
	setenv("HERD_PROGRAM", getenv("HERD_BIN"), 1);
	setenv("SLURM_JOB_ID", "77", 1);
	setenv("SLURM_JOB_NODELIST", "sa,sb", 1);
	unsetenv("SLURM_NODELIST");
	unsetenv("SLURM_TASKS_PER_NODE");
	o.slurm = true;
	o.period_ms = 100;
	o.stall_ms = 1000;
	CHECK_OK(herd_telemetry_watch_start(&w, &o));
	if (w == NULL)
		return;
	if (!watch_until(w, &seen, want, 5, 30000)) {
		TEST_FAIL_("the tasks did not reach their states within 30 s");
		watch_print(w, &seen);
	}
	CHECK_OK(herd_telemetry_watch_node(w, 0, &info));
	CHECK_STR(info.host, "sa");
	CHECK_OK(herd_telemetry_watch_node(w, 1, &info));
	CHECK_STR(info.host, "sb");
	CHECK_STR(info.why, "no sample for 1.0 s after sample 2");
	CHECK_INT(seen.count[1], 2);
	CHECK_INT(seen.first[0], 1);
	CHECK_INT(seen.bad_order + seen.bad_host + seen.bad_node, 0);
	herd_telemetry_watch_free(w);
	CHECK(watch_gone(watch_number(dir, "pid.sa")));
	CHECK(watch_gone(watch_number(dir, "pid.sb")));
	unsetenv("HERD_SRUN");
	unsetenv("SLURM_JOB_ID");
	unsetenv("SLURM_JOB_NODELIST");
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (getenv("HERD_BIN") == NULL) {
		fprintf(stderr, "HERD_BIN (the herd program) is not set\n");
		return 1;
	}
	dir = make_tmpdir();
	TEST_RUN(test_agent_writes_count_frames_that_unpack_in_order);
	TEST_RUN(test_agent_stops_at_its_inputs_end_and_at_stop);
	TEST_RUN(test_agent_refuses_a_period_under_100_ms);
	TEST_RUN(test_watch_of_this_node_streams_its_samples);
	TEST_RUN(test_watch_queue_keeps_the_newest_and_counts_the_rest_lost);
	TEST_RUN(test_watch_options_are_checked);
	TEST_RUN(test_watch_over_ssh_reports_each_node_and_streams_on);
	TEST_RUN(test_watch_in_one_srun_step_reads_text_records_by_task);
	rm_tree(dir);
	return TEST_DONE();
}
