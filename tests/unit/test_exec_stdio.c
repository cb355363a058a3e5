/*
 * tests/unit/test_exec_stdio.c - `herd exec --stdio` driven directly over
 * pipes, speaking the node protocol as a launcher does: a spec in, then
 * ready, started, output, exited and done events out; commands obeyed;
 * a closed stdin stops the ranks; a malformed spec is refused with an
 * error frame; the node's flight recorders sent as copies when it does
 * not share the launcher's trace directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#include "comm/comm_internal.h"
#include "comm/trace.h"
#include "herd/trace.h"
#include "launch/launch_internal.h"
#include "net.h"

struct exec_proc {
	pid_t pid;
	int to, from;      /* its stdin, its stdout */
	herd__buf in;
	void *payload;     /* of the last event, which points into it */
	bool rings;        /* rings frames are events (else passed over: a node
			    * says what it knows of itself before done when a
			    * rank failed) */
};

static int exec_spawn(struct exec_proc *x)
{
	const char *bin = getenv("HERD_BIN");
	int in[2], out[2];

	memset(x, 0, sizeof(*x));
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
		return -1;
	x->pid = fork();
	if (x->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(bin, bin, "exec", "--stdio", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	x->to = in[1];
	x->from = out[0];
	herd__buf_init(&x->in, HERD__LAUNCH_FRAME_MAX + 4);
	return 0;
}

static void send_frame(struct exec_proc *x, herd__buf *b)
{
	CHECK(write(x->to, b->data + b->off, b->len - b->off) == (ssize_t)(b->len - b->off));
	herd__buf_free(b);
}

/* The next event within 10 s; HERD_ECLOSED at the end of the stream. */
static herd_status next_event(struct exec_proc *x, herd__launch_msg *m)
{
	int64_t deadline = herd__net_deadline(10000);

	for (;;) {
		size_t len;
		ssize_t got;
		struct pollfd p = { .fd = x->from, .events = POLLIN };

		HERD_CHECK(herd__launch_frame_peek(&x->in, &len));
		if (len != SIZE_MAX) {
			/* The event points into its payload: keep a copy until
			 * the next one. */
			free(x->payload);
			x->payload = malloc(len);
			memcpy(x->payload, x->in.data + x->in.off + 4, len);
			herd__buf_consume(&x->in, len + 4);
			if (!x->rings && herd__launch_payload_type(x->payload, len) ==
					 HERD__LAUNCH_T_RINGS)
				continue;
			return herd__launch_msg_decode(m, x->payload, len);
		}
		if (poll(&p, 1, herd__net_remaining_ms(deadline)) <= 0)
			return herd__error(HERD_ETIMEDOUT, "no event from herd exec within 10 s");
		HERD_CHECK(herd__buf_reserve(&x->in, 65536));
		got = read(x->from, x->in.data + x->in.len, x->in.cap - x->in.len);
		if (got <= 0)
			return herd__error(HERD_ECLOSED, "herd exec closed its stdout");
		x->in.len += (size_t)got;
	}
}

static int exec_wait(struct exec_proc *x)
{
	int status = -1;

	for (int i = 0; i < 1000; i++) {
		if (waitpid(x->pid, &status, WNOHANG) == x->pid)
			return status;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	kill(x->pid, SIGKILL);
	waitpid(x->pid, &status, 0);
	return -1;
}

static void spec_init(herd__node_spec *s, char **argv, int *ranks, int n)
{
	static char *env[] = { "FROM_SPEC=yes", NULL };

	memset(s, 0, sizeof(*s));
	s->job_id = "job-1";
	s->store = "127.0.0.1:1";
	s->secret = "s3cret";
	s->host = "nodeA";
	s->master_addr = "127.0.0.1";
	s->master_port = 29500;
	s->restart_count = 0;
	s->world_size = 4;
	s->nnodes = 2;
	s->node_rank = 1;
	s->nranks = n;
	s->ranks = ranks;
	s->argv = argv;
	s->env = env;
	s->grace_ms = 1000;
}

/* Starts herd exec and sends it the spec of argv on ranks, then go unless
 * gated; 0 once sent. */
static int exec_start_gated(struct exec_proc *x, herd__buf *b, char **argv, int *ranks, int n,
			    bool gated)
{
	herd__node_spec s;

	if (exec_spawn(x) != 0) {
		CHECK(0);
		return -1;
	}
	spec_init(&s, argv, ranks, n);
	CHECK_OK(herd__launch_enc_spec(b, &s));
	send_frame(x, b);
	if (!gated) {
		CHECK_OK(herd__launch_enc_go(b));
		send_frame(x, b);
	}
	return 0;
}

static int exec_start(struct exec_proc *x, herd__buf *b, char **argv, int *ranks, int n)
{
	return exec_start_gated(x, b, argv, ranks, n, false);
}

/*
 * Reaps herd exec, which must exit with code (any way when code < 0), and
 * frees what exec_spawn set up.
 */
static void exec_finish(struct exec_proc *x, int code)
{
	int st = exec_wait(x);

	if (code >= 0)
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == code);
	close(x->from);
	herd__buf_free(&x->in);
	free(x->payload);
}

static void test_exec_runs_the_spec_and_reports_every_event(void)
{
	char *argv[] = { "sh", "-c", "echo $RANK $LOCAL_RANK $GROUP_RANK $FROM_SPEC; "
			 "echo warn >&2; exit $LOCAL_RANK", NULL };
	int ranks[] = { 2, 3 };
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;
	int started = 0, exited = 0, outs = 0, errs = 0, done = 0, codes[4] = { -1, -1, -1, -1 };
	long pids[4] = { 0, 0, 0, 0 };
	char lines[4][64] = { "", "", "", "" };

	if (exec_start(&x, &b, argv, ranks, 2) != 0)
		return;
	CHECK_OK(next_event(&x, &m));
	CHECK_INT(m.type, HERD__LAUNCH_T_READY);
	CHECK(m.pid == x.pid);
	herd__launch_msg_free(&m);
	for (int i = 0; i < 20 && !done; i++) {
		if (next_event(&x, &m) != HERD_OK) {
			CHECK(0);
			break;
		}
		CHECK(m.rank == 2 || m.rank == 3 || m.type == HERD__LAUNCH_T_DONE);
		switch (m.type) {
		case HERD__LAUNCH_T_STARTED:
			/* Nothing about a rank comes before its start. */
			CHECK(pids[m.rank] == 0 && codes[m.rank] == -1 && lines[m.rank][0] == '\0');
			pids[m.rank] = (long)m.pid;
			started++;
			break;
		case HERD__LAUNCH_T_OUT:
			CHECK(pids[m.rank] > 0 && codes[m.rank] == -1);
			if (m.s == HERD_JOB_STDOUT) {
				snprintf(lines[m.rank], sizeof(lines[0]), "%.*s", (int)m.data_len,
					 m.data);
				outs++;
			} else {
				CHECK(m.data_len == 4 && memcmp(m.data, "warn", 4) == 0);
				errs++;
			}
			break;
		case HERD__LAUNCH_T_EXITED:
			CHECK_INT(m.state, HERD_JOB_RANK_EXITED);
			codes[m.rank] = (int)m.code;
			exited++;
			break;
		case HERD__LAUNCH_T_DONE:
			done = 1;
			break;
		default:
			CHECK(0);
		}
		herd__launch_msg_free(&m);
	}
	CHECK_INT(started, 2);
	CHECK_INT(exited, 2);
	CHECK_INT(outs, 2);
	CHECK_INT(errs, 2);
	CHECK_INT(done, 1);
	CHECK_STR(lines[2], "2 0 1 yes");
	CHECK_STR(lines[3], "3 1 1 yes");
	CHECK_INT(codes[2], 0);
	CHECK_INT(codes[3], 1);
	close(x.to);
	CHECK_ERR(next_event(&x, &m), HERD_ECLOSED, "closed");
	exec_finish(&x, 0);
}

static void test_exec_stops_its_ranks_when_stdin_closes(void)
{
	char *argv[] = { "sleep", "1000", NULL };
	int ranks[] = { 0, 1 };
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;
	long pids[2] = { 0, 0 };
	int exited = 0;

	if (exec_start(&x, &b, argv, ranks, 2) != 0)
		return;
	for (int i = 0; i < 3; i++) {
		CHECK_OK(next_event(&x, &m));
		if (m.type == HERD__LAUNCH_T_STARTED)
			pids[m.rank] = (long)m.pid;
		herd__launch_msg_free(&m);
	}
	CHECK(pids[0] > 0 && pids[1] > 0);
	CHECK(kill((pid_t)pids[0], 0) == 0);
	/* The launcher goes away. */
	close(x.to);
	for (int i = 0; i < 5; i++) {
		if (next_event(&x, &m) != HERD_OK)
			break;
		if (m.type == HERD__LAUNCH_T_EXITED) {
			CHECK_INT(m.state, HERD_JOB_RANK_SIGNALED);
			CHECK_INT(m.sig, SIGTERM);
			exited++;
		}
		herd__launch_msg_free(&m);
	}
	CHECK_INT(exited, 2);
	exec_finish(&x, 1);
	CHECK(kill((pid_t)pids[0], 0) != 0 && errno == ESRCH);
	CHECK(kill((pid_t)pids[1], 0) != 0 && errno == ESRCH);
}

static void test_exec_obeys_signal_command(void)
{
	char *argv[] = { "sh", "-c", "trap 'echo usr1; exit 4' USR1; echo up; "
			 "while :; do sleep 0.05; done", NULL };
	int ranks[] = { 0 };
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;
	int code = -1, saw_up = 0;

	if (exec_start(&x, &b, argv, ranks, 1) != 0)
		return;
	for (int i = 0; i < 10 && code < 0; i++) {
		if (next_event(&x, &m) != HERD_OK)
			break;
		if (m.type == HERD__LAUNCH_T_OUT && m.data_len == 2 && !saw_up) {
			saw_up = 1;
			CHECK_OK(herd__launch_enc_signal(&b, SIGUSR1));
			send_frame(&x, &b);
		}
		if (m.type == HERD__LAUNCH_T_EXITED)
			code = (int)m.code;
		herd__launch_msg_free(&m);
	}
	CHECK_INT(saw_up, 1);
	CHECK_INT(code, 4);
	close(x.to);
	exec_finish(&x, -1);
}

/*
 * Ranks start on go only: a stop before it (the launcher saw another node
 * fail) reports every rank exited FAILED_START, none started, and the
 * program never ran (it would have made a file).
 */
static void test_exec_starts_no_rank_before_go(void)
{
	char *dir = make_tmpdir(), ran[256];
	char *argv[] = { "sh", "-c", "touch \"$0\"", ran, NULL };
	int ranks[] = { 0, 1 }, failed = 0, done = 0;
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;

	snprintf(ran, sizeof(ran), "%s/ran", dir);
	if (exec_start_gated(&x, &b, argv, ranks, 2, true) != 0) {
		rm_tree(dir);
		return;
	}
	CHECK_OK(next_event(&x, &m));
	CHECK_INT(m.type, HERD__LAUNCH_T_READY);
	herd__launch_msg_free(&m);
	usleep(200 * 1000);
	CHECK(access(ran, F_OK) != 0);
	CHECK_OK(herd__launch_enc_stop(&b, 0));
	send_frame(&x, &b);
	for (int i = 0; i < 10 && !done; i++) {
		if (next_event(&x, &m) != HERD_OK) {
			CHECK(0);
			break;
		}
		CHECK(m.type == HERD__LAUNCH_T_EXITED || m.type == HERD__LAUNCH_T_DONE);
		if (m.type == HERD__LAUNCH_T_EXITED) {
			CHECK_INT(m.state, HERD_JOB_RANK_FAILED_START);
			CHECK(m.err_len > 0 && memmem(m.err, m.err_len, "before its ranks started",
						      24) != NULL);
			failed++;
		}
		done += m.type == HERD__LAUNCH_T_DONE;
		herd__launch_msg_free(&m);
	}
	CHECK_INT(failed, 2);
	CHECK_INT(done, 1);
	CHECK(access(ran, F_OK) != 0);
	close(x.to);
	exec_finish(&x, -1);
	herd__buf_free(&b);
	rm_tree(dir);
}

/*
 * One exec of a rank that sleeps, its node's trace directory dir holding
 * the ring of "00ab" rank 0 and, when token_there, the launcher's token
 * file: asked for its rings, it sends each as a ring frame (kept into
 * keep, when not NULL), unless the token says it shares the directory.
 * Returns the ring frames seen before done.
 */
static int rings_sent(const char *dir, bool token_there, const char *keep)
{
	char env_dir[4200], tok[4200];
	char *env[] = { env_dir, NULL };
	char *argv[] = { "sh", "-c", "echo up; sleep 5", NULL };
	int ranks[] = { 0 }, rings = 0, done = 0, answered = 0;
	herd__node_spec s;
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;

	snprintf(env_dir, sizeof(env_dir), "HERD_TRACE_DIR=%s", dir);
	snprintf(tok, sizeof(tok), "%s/launcher", dir);
	unlink(tok);
	if (token_there)
		CHECK_OK(herd__write_file_atomic(tok, "0123abcd", 8, 0600));
	if (exec_spawn(&x) != 0) {
		CHECK(0);
		return -1;
	}
	x.rings = true;
	spec_init(&s, argv, ranks, 1);
	s.env = env;
	s.trace_token = "0123abcd";
	CHECK_OK(herd__launch_enc_spec(&b, &s));
	CHECK_OK(herd__launch_enc_go(&b));
	send_frame(&x, &b);
	for (int i = 0; i < 20 && !done; i++) {
		if (next_event(&x, &m) != HERD_OK) {
			CHECK(0);
			break;
		}
		if (m.type == HERD__LAUNCH_T_OUT) {
			/* The rank runs: the rings, then the end. */
			CHECK_OK(herd__launch_enc_rings(&b, 7, NULL));
			CHECK_OK(herd__launch_enc_stop(&b, 0));
			send_frame(&x, &b);
		} else if (m.type == HERD__LAUNCH_T_READY) {
			/* It says whether it sends copies. */
			CHECK_INT(m.copies, !token_there);
		} else if (m.type == HERD__LAUNCH_T_RING) {
			rings++;
			if (keep != NULL)
				CHECK_OK(herd__trace_keep_copy(keep, m.data, m.data_len));
		} else if (m.type == HERD__LAUNCH_T_RINGS) {
			/* The answer ends, after its copies, with the request's
			 * number. */
			CHECK(rings > 0 || token_there);
			CHECK_INT(m.seq, 7);
			answered++;
		}
		done += m.type == HERD__LAUNCH_T_DONE;
		herd__launch_msg_free(&m);
	}
	CHECK_INT(done, 1);
	/* Asked, and not again before done: its rank was stopped by the
	 * launcher, not failed on its own. */
	CHECK_INT(answered, 1);
	close(x.to);
	exec_finish(&x, -1);
	return rings;
}

static void test_exec_sends_copies_of_its_rings_unless_it_shares_the_directory(void)
{
	char *dir = make_tmpdir(), *keep = make_tmpdir(), path[4200];
	herd__trace t;
	herd__trace_entry *e;
	herd__trace_head h;
	char *text = NULL, junk[8192];
	int fd;

	/* A ring of this process, rank 0 of 2, in an allreduce since call 3. */
	setenv("HERD_TRACE_DIR", dir, 1);
	herd__trace_open(&t, "00ab", 0, 2, "nodeA", 16);
	unsetenv("HERD_TRACE_DIR");
	CHECK(t.head != NULL && t.path[0] != '\0');
	for (uint64_t k = 1; k <= 3 && t.head != NULL; k++) {
		e = herd__trace_begin(&t, k, k, HERD__OP_ALLREDUCE, HERD_FLOAT32, HERD_SUM, -1, 64,
				      -1, 0, herd__trace_now_coarse());
		if (k < 3)
			herd__trace_end(e, HERD_OK, herd__trace_now_coarse());
	}
	CHECK_INT(rings_sent(dir, false, keep), 1);
	snprintf(path, sizeof(path), "%s/00ab.0.trace", keep);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && read(fd, &h, sizeof(h)) == (ssize_t)sizeof(h));
	if (fd >= 0)
		close(fd);
	CHECK_INT(h.rank, 0);
	CHECK_INT(h.size, 2);
	CHECK_INT(h.pid, getpid());
	/* This process, as its node saw it (running, sleeping, or in D
	 * while it fsyncs the first copy). */
	CHECK(h.copied_proc >= 'A' && h.copied_proc <= 'Z' && h.copied_proc != 'X');
	CHECK(h.copied_ns > 0);
	CHECK_INT((int)h.next, 3);
	/* The copy reads as the ring does: rank 0 inside allreduce #3, rank 1
	 * not read. */
	CHECK_OK(herd_trace_report(keep, HERD_TRACE_TEXT, &text));
	if (text == NULL || strstr(text, "inside allreduce #3") == NULL ||
	    strstr(text, "rank 1: its flight recorder was not found") == NULL)
		fprintf(stderr, "%s\n", text != NULL ? text : herd_last_error());
	CHECK(text != NULL && strstr(text, "inside allreduce #3") != NULL &&
	      strstr(text, "rank 1: its flight recorder was not found") != NULL);
	free(text);
	/* A node that finds the launcher's token shares its directory. */
	CHECK_INT(rings_sent(dir, true, NULL), 0);

	/* What is not a copy is not kept. */
	memset(junk, 0, sizeof(junk));
	CHECK_INT(herd__trace_keep_copy(keep, junk, 100), HERD_EFORMAT);
	memcpy(junk, t.head, sizeof(h));
	CHECK_INT(herd__trace_keep_copy(keep, junk, sizeof(junk)), HERD_EFORMAT);  /* no copied_ns */
	((herd__trace_head *)(void *)junk)->copied_proc = 'S';
	((herd__trace_head *)(void *)junk)->cap = 65;
	CHECK_INT(herd__trace_keep_copy(keep, junk, sizeof(junk)), HERD_EFORMAT);  /* cut short */
	((herd__trace_head *)(void *)junk)->cap = 1;
	memcpy(((herd__trace_head *)(void *)junk)->id, "../x", 5);
	CHECK_INT(herd__trace_keep_copy(keep, junk, sizeof(junk)), HERD_EFORMAT);
	CHECK(strstr(herd_last_error(), "not hex") != NULL);
	herd__trace_close(&t);
	rm_tree(dir);
	rm_tree(keep);
}

static void test_exec_refuses_a_malformed_spec(void)
{
	/* A stop command where the spec belongs. */
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;

	if (exec_spawn(&x) != 0) {
		CHECK(0);
		return;
	}
	CHECK_OK(herd__launch_enc_stop(&b, 0));
	send_frame(&x, &b);
	CHECK_OK(next_event(&x, &m));
	CHECK_INT(m.type, HERD__LAUNCH_T_ERROR);
	CHECK_INT(m.st, HERD_EFORMAT);
	CHECK(m.msg_len > 0 && strstr(m.msg, "expected a spec frame") != NULL);
	herd__launch_msg_free(&m);
	close(x.to);
	exec_finish(&x, 1);
}

static void test_proto_rejects_bad_frames(void)
{
	herd__buf b = { 0 };
	herd__launch_msg m;
	herd__node_spec s;
	size_t len;
	/* A map {"v": 2, "t": "done"}: another version. */
	static const unsigned char v2[] = { 0x82, 0xa1, 'v', 0x02, 0xa1, 't', 0xa4, 'd', 'o', 'n',
					    'e' };
	/* {"v": 1, "t": "out", "rank": 0, "s": 3, "data": ""}: no stream 3. */
	static const unsigned char bad_s[] = { 0x85, 0xa1, 'v', 0x01, 0xa1, 't', 0xa3, 'o', 'u',
					       't', 0xa4, 'r', 'a', 'n', 'k', 0x00, 0xa1, 's',
					       0x03, 0xa4, 'd', 'a', 't', 'a', 0xa0 };

	CHECK_ERR(herd__launch_msg_decode(&m, v2, sizeof(v2)), HERD_EVERSION, "version 2");
	CHECK_ERR(herd__launch_msg_decode(&m, bad_s, sizeof(bad_s)), HERD_EFORMAT,
		  "\"s\" is 3");
	CHECK_ERR(herd__launch_msg_decode(&m, "\xc1", 1), HERD_EFORMAT, "msgpack");
	/* Round trip of an exited event, and a spec decoded as a spec only. */
	CHECK_OK(herd__launch_enc_exited(&b, 7, HERD_JOB_RANK_FAILED_START, 127, 0, "exec failed"));
	CHECK_OK(herd__launch_frame_peek(&b, &len));
	CHECK_OK(herd__launch_msg_decode(&m, b.data + b.off + 4, len));
	CHECK_INT(m.rank, 7);
	CHECK_INT(m.state, HERD_JOB_RANK_FAILED_START);
	CHECK(m.err_len == 11 && memcmp(m.err, "exec failed", 11) == 0);
	CHECK_ERR(herd__launch_spec_decode(&s, b.data + b.off + 4, len), HERD_EFORMAT,
		  "expected a spec frame, got exited");
	herd__launch_msg_free(&m);
	herd__buf_free(&b);
	/* An oversized frame is refused from its length alone. */
	herd__buf_append(&b, "\x7f\xff\xff\xff", 4);
	CHECK_ERR(herd__launch_frame_peek(&b, &len), HERD_EFORMAT, "exceeds the limit");
	herd__buf_free(&b);
}

/* The peak RSS of process pid in KiB (VmHWM), or -1. */
static long peak_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmHWM: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/*
 * A rank that floods its stdout with 40 MB of short lines while the
 * launcher reads nothing for a while: herd exec stops reading the rank's
 * pipe once about a MiB of frames waits, so that its memory stays bounded
 * (the rank waits in write), and once read again every byte arrives, in
 * lines frames as the spec asked, then the rank's exit and done.
 */
static void test_exec_flood_waits_for_the_launcher_in_bounded_memory(void)
{
	char *argv[] = { "sh", "-c", "yes | head -c 40000000", NULL };
	int ranks[] = { 0 };
	struct exec_proc x;
	herd__buf b = { 0 };
	herd__launch_msg m;
	herd__node_spec s;
	size_t bytes = 0;
	long kib;
	int outs = 0, code = -1, done = 0;
	struct timespec nap = { 1, 500 * 1000 * 1000 };

	if (exec_spawn(&x) != 0) {
		CHECK(0);
		return;
	}
	spec_init(&s, argv, ranks, 1);
	s.lines = true;
	CHECK_OK(herd__launch_enc_spec(&b, &s));
	send_frame(&x, &b);
	CHECK_OK(herd__launch_enc_go(&b));
	send_frame(&x, &b);
	nanosleep(&nap, NULL);
	kib = peak_kib(x.pid);
	CHECK(kib > 0);
	/* 40 MB held would be over 100 MiB of frames. */
	if (kib >= 64 * 1024)
		TEST_FAIL_("herd exec reached %ld KiB while its reader paused", kib);
	for (int i = 0; i < 1000000 && !done; i++) {
		if (next_event(&x, &m) != HERD_OK) {
			CHECK(0);
			break;
		}
		if (m.type == HERD__LAUNCH_T_LINES) {
			CHECK(m.data_len > 0 && m.data[m.data_len - 1] == '\n');
			bytes += m.data_len;
		}
		outs += m.type == HERD__LAUNCH_T_OUT;
		if (m.type == HERD__LAUNCH_T_EXITED)
			code = (int)m.code;
		done = m.type == HERD__LAUNCH_T_DONE;
		herd__launch_msg_free(&m);
	}
	CHECK_INT(done, 1);
	CHECK_INT(code, 0);
	CHECK_INT(outs, 0);
	CHECK_INT(bytes, 40000000);
	close(x.to);
	exec_finish(&x, 0);
}

int main(void)
{
	const char *bin = getenv("HERD_BIN");

	TEST_RUN(test_proto_rejects_bad_frames);
	if (bin == NULL || access(bin, X_OK) != 0) {
		printf("skipped: HERD_BIN (the herd program) is not set\n");
		return test_failures ? 1 : 77;
	}
	signal(SIGPIPE, SIG_IGN);
	TEST_RUN(test_exec_runs_the_spec_and_reports_every_event);
	TEST_RUN(test_exec_flood_waits_for_the_launcher_in_bounded_memory);
	TEST_RUN(test_exec_stops_its_ranks_when_stdin_closes);
	TEST_RUN(test_exec_obeys_signal_command);
	TEST_RUN(test_exec_starts_no_rank_before_go);
	TEST_RUN(test_exec_refuses_a_malformed_spec);
	TEST_RUN(test_exec_sends_copies_of_its_rings_unless_it_shares_the_directory);
	return TEST_DONE();
}
