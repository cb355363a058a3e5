/*
 * tests/unit/test_compat_frames.c - what an earlier herd sent, this one
 * reads: golden streams of whole frames (a 4-byte big-endian length and a
 * msgpack payload) under tests/fixtures/compat/, written by the encoders
 * of sdk/launch/proto.c and sdk/store/proto.c, read back frame by frame
 * with today's decoders and exact field values, and encoded again to the
 * same bytes.
 *
 *   launch-frames.bin   the node protocol: a leaf spec (ranks, argv, env,
 *                       gpus, workdir, log dir), a relay's spec (sub,
 *                       width, rsh, rcmd; no workdir or log dir), signal,
 *                       stop, go, ready, error, started, out (bytes that
 *                       are not UTF-8), exited in its three states,
 *                       paused and continued, done, and relay frames
 *                       around a started, a spec and another relay;
 *                       then (added since) a spec that says the launcher
 *                       takes lines frames, and a lines frame
 *   store-frames.bin    the store protocol: hello, auth, auth_ok, then
 *                       set, get, add, cas (with and without "exp"), del,
 *                       wait and keys requests with their replies, the
 *                       timed-out replies of a get and a wait ("missing"),
 *                       a failed request's reply and a connection's error
 *
 * The store's frames are written field by field in the order the client
 * (sdk/store/client.c) and the server (sdk/store/server.c) write them.
 *
 * `test_compat_frames --write DIR` writes the files again; only a
 * deliberate change of a protocol may do that, and then the previous
 * files must still decode (or the protocol version must change).
 */
#include <errno.h>
#include <sys/stat.h>

#include "test.h"

#include "base.h"
#include "buf.h"
#include "launch/launch_internal.h"
#include "store/proto.h"
#include "compat_files.h"

#define CHECK_BYTES(a, alen, b, blen)                                              \
	do {                                                                       \
		test_checks++;                                                     \
		if ((size_t)(alen) != (size_t)(blen) ||                            \
		    ((size_t)(alen) > 0 && memcmp((a), (b), (size_t)(alen)) != 0)) \
			TEST_FAIL_("%s (%zu bytes) differs from %s (%zu bytes)", #a, \
				   (size_t)(alen), #b, (size_t)(blen));             \
	} while (0)

/* ---- files -------------------------------------------------------------- */


/* A golden file's bytes; the test stops if it is missing. */
static char *golden(const char *name, size_t *len)
{
	char path[4096];
	char *data = NULL;

	compat_path(name, path, sizeof(path));
	if (herd__read_file(path, 1 << 24, &data, len) != HERD_OK) {
		fprintf(stderr, "cannot read a fixture: %s\n", herd_last_error());
		exit(1);
	}
	return data;
}

static void write_golden(const char *name, const herd__buf *b)
{
	char path[4096];

	compat_path(name, path, sizeof(path));
	if (herd__write_file_atomic(path, b->data + b->off, b->len - b->off, 0644) != HERD_OK) {
		fprintf(stderr, "cannot write %s: %s\n", path, herd_last_error());
		exit(1);
	}
}

/* A stream of frames read from the front. */
typedef struct frames {
	herd__buf buf;
	size_t limit;
	int count;
} frames;

static void frames_open(frames *f, const char *name, size_t limit)
{
	char *data;
	size_t len = 0;

	memset(f, 0, sizeof(*f));
	f->limit = limit;
	data = golden(name, &len);
	CHECK_OK(herd__buf_append(&f->buf, data, len));
	free(data);
}

/* The next whole frame (*frame: its 4-byte length and payload); false at
 * the end of the stream or at a frame cut short. */
static bool frames_next(frames *f, const uint8_t **frame, size_t *frame_len)
{
	size_t n = SIZE_MAX;

	if (f->buf.len == f->buf.off)
		return false;
	CHECK_OK(herd__frame_peek(&f->buf, f->limit, "golden stream", &n));
	if (n == SIZE_MAX) {
		CHECK(!"a whole frame at the end of the stream");
		return false;
	}
	*frame = f->buf.data + f->buf.off;
	*frame_len = n + 4;
	f->count++;
	return true;
}

static void frames_consume(frames *f, size_t frame_len)
{
	herd__buf_consume(&f->buf, frame_len);
}

static void frames_close(frames *f, int want)
{
	CHECK_INT(f->count, want);
	CHECK_INT(f->buf.len - f->buf.off, 0);
	herd__buf_free(&f->buf);
}

/* ---- the node protocol -------------------------------------------------- */

static char *leaf_argv[] = { "python3", "train.py", "--lr=3e-4", "--run name", NULL };
static char *leaf_env[] = { "OMP_NUM_THREADS=8", "NCCL_DEBUG=INFO", "EMPTY=", NULL };
static int leaf_ranks[] = { 4, 5, 6, 7 };

/* Node 1 of 2: four ranks of eight, a GPU each, a workdir and a log dir. */
static const herd__node_spec leaf_spec = {
	.job_id = "job-20240611-a", .store = "tcp://10.1.0.1:29400",
	.secret = "8f14e45fceea167a5a36dedd4bea2543", .host = "gpu-b",
	.master_addr = "10.1.0.1", .master_port = 29500, .restart_count = 2,
	.world_size = 8, .nnodes = 2, .node_rank = 1, .nranks = 4, .ranks = leaf_ranks,
	.argv = leaf_argv, .env = leaf_env, .workdir = "/scratch/runs/a",
	.log_dir = "/scratch/runs/a/logs", .grace_ms = 5000, .gpus_per_rank = 1,
};

static char *relay_argv[] = { "/bin/sh", "-c", "exec ./worker", NULL };
static char *relay_env[] = { NULL };
static char *relay_sub[] = { "node-02", "node-03", "node-04", "node-05", "node-06", NULL };
static char *relay_rsh[] = { "ssh", "-o", "BatchMode=yes", "-p", "2222", NULL };
static int relay_ranks[] = { 2, 3 };

/* Node 1 of 7, a relay for nodes 2..6: no workdir or log dir, no GPUs. */
static const herd__node_spec relay_spec = {
	.job_id = "big", .store = "tcp://head:29400", .secret = "00ff", .host = "node-01",
	.master_addr = "head", .master_port = 0, .restart_count = 0, .world_size = 14,
	.nnodes = 7, .node_rank = 1, .nranks = 2, .ranks = relay_ranks, .argv = relay_argv,
	.env = relay_env, .workdir = NULL, .log_dir = NULL, .grace_ms = 0, .gpus_per_rank = 0,
	.nsub = 5, .sub = relay_sub, .width = 2, .rsh = relay_rsh,
	.rcmd = "/opt/herd/bin/herd exec --relay",
};

/* A node 5's spec, which the launcher sends wrapped. */
static int sub_ranks[] = { 10, 11 };
static const herd__node_spec sub_spec = {
	.job_id = "big", .store = "tcp://head:29400", .secret = "00ff", .host = "node-05",
	.master_addr = "head", .master_port = 0, .world_size = 14, .nnodes = 7, .node_rank = 5,
	.nranks = 2, .ranks = sub_ranks, .argv = relay_argv, .env = relay_env,
};

/* Node 5 again, from a launcher that takes lines frames. */
static const herd__node_spec lines_spec = {
	.job_id = "big", .store = "tcp://head:29400", .secret = "00ff", .host = "node-05",
	.master_addr = "head", .master_port = 0, .world_size = 14, .nnodes = 7, .node_rank = 5,
	.nranks = 2, .ranks = sub_ranks, .argv = relay_argv, .env = relay_env, .lines = true,
};

static const char out_line[] = "step 10 loss=0.25 \xff\xfe\x01 \xe2\x9c\x93";
/* Three lines, the second empty, the third not UTF-8. */
static const char out_lines[] = "step 11\n\nstep 12 \xff\xfe\n";
#define ERR_MSG "workdir /scratch/runs/a: No such file or directory"
#define FAIL_MSG "exec python3: No such file or directory"

/* The payload of a frame encoded alone (without its length). */
static void payload_of(herd__buf *one, const uint8_t **p, size_t *n)
{
	*p = one->data + one->off + 4;
	*n = one->len - one->off - 4;
}

static void encode_launch_stream(herd__buf *b)
{
	herd__buf one = { 0 }, two = { 0 };
	const uint8_t *p;
	size_t n;

	CHECK_OK(herd__launch_enc_spec(b, &leaf_spec));
	CHECK_OK(herd__launch_enc_spec(b, &relay_spec));
	CHECK_OK(herd__launch_enc_signal(b, 15));
	CHECK_OK(herd__launch_enc_stop(b, 3000));
	CHECK_OK(herd__launch_enc_stop(b, 0));
	CHECK_OK(herd__launch_enc_go(b));
	CHECK_OK(herd__launch_enc_ready(b, "gpu-b", 31337, false));
	CHECK_OK(herd__launch_enc_error(b, HERD_EBUSY, ERR_MSG));
	CHECK_OK(herd__launch_enc_started(b, 7, 2147483647L));
	CHECK_OK(herd__launch_enc_out(b, 7, HERD_JOB_STDERR, out_line, sizeof(out_line) - 1));
	CHECK_OK(herd__launch_enc_out(b, 4, HERD_JOB_STDOUT, "", 0));
	CHECK_OK(herd__launch_enc_exited(b, 7, HERD_JOB_RANK_EXITED, 3, 0, NULL));
	CHECK_OK(herd__launch_enc_exited(b, 6, HERD_JOB_RANK_SIGNALED, 0, 9, NULL));
	CHECK_OK(herd__launch_enc_exited(b, 5, HERD_JOB_RANK_FAILED_START, 127, 0, FAIL_MSG));
	CHECK_OK(herd__launch_enc_paused(b, 4, 19));
	CHECK_OK(herd__launch_enc_paused(b, 4, 0));
	CHECK_OK(herd__launch_enc_done(b));
	/* Up: a child's started; down: a subtree node's spec; up: a relay's
	 * relay of its child's done. */
	CHECK_OK(herd__launch_enc_started(&one, 10, 4242));
	payload_of(&one, &p, &n);
	CHECK_OK(herd__launch_enc_relay(b, 5, (const char *)p, n));
	herd__buf_free(&one);
	CHECK_OK(herd__launch_enc_spec(&one, &sub_spec));
	payload_of(&one, &p, &n);
	CHECK_OK(herd__launch_enc_relay(b, 5, (const char *)p, n));
	herd__buf_free(&one);
	CHECK_OK(herd__launch_enc_done(&one));
	payload_of(&one, &p, &n);
	CHECK_OK(herd__launch_enc_relay(&two, 6, (const char *)p, n));
	payload_of(&two, &p, &n);
	CHECK_OK(herd__launch_enc_relay(b, 4, (const char *)p, n));
	herd__buf_free(&one);
	herd__buf_free(&two);
	CHECK_OK(herd__launch_enc_spec(b, &lines_spec));
	CHECK_OK(herd__launch_enc_lines(b, 11, HERD_JOB_STDOUT, out_lines, sizeof(out_lines) - 1));
}

#define LAUNCH_FRAMES 22

static void check_strv(char **got, char *const *want, const char *what)
{
	size_t i = 0;

	if (got == NULL || want == NULL) {
		if (got != want)
			TEST_FAIL_("%s: one of the arrays is NULL", what);
		return;
	}
	for (; want[i] != NULL && got[i] != NULL; i++)
		CHECK_STR(got[i], want[i]);
	if (want[i] != NULL || got[i] != NULL)
		TEST_FAIL_("%s: %zu entries in common, then the arrays differ in length", what, i);
}

static void check_opt_str(const char *got, const char *want, const char *what)
{
	if (want == NULL) {
		if (got != NULL)
			TEST_FAIL_("%s: \"%s\", expected none", what, got);
		return;
	}
	CHECK_STR(got, want);
}

/* A spec payload decodes to want's fields and encodes to the same frame. */
static void check_spec(const uint8_t *frame, size_t frame_len, const herd__node_spec *want)
{
	herd__node_spec s;
	herd__buf again = { 0 };

	CHECK_INT(herd__launch_payload_type(frame + 4, frame_len - 4), HERD__LAUNCH_T_SPEC);
	CHECK_OK(herd__launch_spec_decode(&s, frame + 4, frame_len - 4));
	CHECK_STR(s.job_id, want->job_id);
	CHECK_STR(s.store, want->store);
	CHECK_STR(s.secret, want->secret);
	CHECK_STR(s.host, want->host);
	CHECK_STR(s.master_addr, want->master_addr);
	CHECK_INT(s.master_port, want->master_port);
	CHECK_INT(s.restart_count, want->restart_count);
	CHECK_INT(s.world_size, want->world_size);
	CHECK_INT(s.nnodes, want->nnodes);
	CHECK_INT(s.node_rank, want->node_rank);
	CHECK_INT(s.grace_ms, want->grace_ms);
	CHECK_INT(s.gpus_per_rank, want->gpus_per_rank);
	CHECK_INT(s.lines, want->lines);
	check_opt_str(s.workdir, want->workdir, "workdir");
	check_opt_str(s.log_dir, want->log_dir, "logdir");
	CHECK_INT(s.nranks, want->nranks);
	for (int i = 0; i < s.nranks && i < want->nranks; i++)
		CHECK_INT(s.ranks[i], want->ranks[i]);
	check_strv(s.argv, want->argv, "argv");
	check_strv(s.env, want->env, "env");
	CHECK_INT(s.nsub, want->nsub);
	check_strv(s.sub, want->sub, "sub");
	CHECK_INT(s.width, want->width);
	check_strv(s.rsh, want->rsh, "rsh");
	check_opt_str(s.rcmd, want->rcmd, "rcmd");
	CHECK_OK(herd__launch_enc_spec(&again, &s));
	CHECK_BYTES(again.data + again.off, again.len - again.off, frame, frame_len);
	herd__buf_free(&again);
	herd__node_spec_free(&s);
}

/* A NUL-terminated copy of a decoded string (NULL stays NULL). */
static char *dup_bytes(const char *p, size_t n)
{
	char *s;

	if (p == NULL)
		return NULL;
	s = malloc(n + 1);
	if (s == NULL)
		abort();
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* Encodes a decoded (non-spec) message again. */
static herd_status reencode_launch(herd__buf *b, const herd__launch_msg *m)
{
	herd_status st = HERD_EINTERNAL;
	char *s;

	switch (m->type) {
	case HERD__LAUNCH_T_SIGNAL:
		return herd__launch_enc_signal(b, (int)m->sig);
	case HERD__LAUNCH_T_STOP:
		return herd__launch_enc_stop(b, (int)m->grace);
	case HERD__LAUNCH_T_GO:
		return herd__launch_enc_go(b);
	case HERD__LAUNCH_T_READY:
		s = dup_bytes(m->host, m->host_len);
		st = herd__launch_enc_ready(b, s, (long)m->pid, m->copies != 0);
		free(s);
		return st;
	case HERD__LAUNCH_T_ERROR:
		s = dup_bytes(m->msg, m->msg_len);
		st = herd__launch_enc_error(b, (herd_status)m->st, s);
		free(s);
		return st;
	case HERD__LAUNCH_T_STARTED:
		return herd__launch_enc_started(b, (int)m->rank, (long)m->pid);
	case HERD__LAUNCH_T_OUT:
		return herd__launch_enc_out(b, (int)m->rank, (herd_job_stream)m->s, m->data,
					    m->data_len);
	case HERD__LAUNCH_T_LINES:
		return herd__launch_enc_lines(b, (int)m->rank, (herd_job_stream)m->s, m->data,
					      m->data_len);
	case HERD__LAUNCH_T_EXITED:
		s = dup_bytes(m->err, m->err_len);
		st = herd__launch_enc_exited(b, (int)m->rank, (herd_job_rank_state)m->state,
					     (int)m->code, (int)m->sig, s);
		free(s);
		return st;
	case HERD__LAUNCH_T_PAUSED:
		return herd__launch_enc_paused(b, (int)m->rank, (int)m->sig);
	case HERD__LAUNCH_T_DONE:
		return herd__launch_enc_done(b);
	case HERD__LAUNCH_T_RELAY:
		return herd__launch_enc_relay(b, (int)m->node, m->frame, m->frame_len);
	default:
		return st;
	}
}

/* Decodes a (non-spec) payload of type t, and encodes it again to the same bytes. */
static void decode_launch(herd__launch_msg *m, const uint8_t *p, size_t n, herd__launch_type t)
{
	herd__buf again = { 0 };

	CHECK_INT(herd__launch_payload_type(p, n), t);
	CHECK_OK(herd__launch_msg_decode(m, p, n));
	CHECK_INT(m->type, t);
	CHECK_OK(reencode_launch(&again, m));
	if (again.len - again.off >= 4)
		CHECK_BYTES(again.data + again.off + 4, again.len - again.off - 4, p, n);
	else
		CHECK(!"a frame encoded again");
	herd__buf_free(&again);
}

#define CHECK_TEXT(p, n, want) CHECK_BYTES(p, n, want, strlen(want))

/* Frame i (from 0) of the launch stream, whole. */
static void check_launch_frame(int i, const uint8_t *frame, size_t frame_len)
{
	const uint8_t *p = frame + 4;
	size_t n = frame_len - 4;
	herd__launch_msg m, in, in2;

	switch (i) {
	case 0:
		check_spec(frame, frame_len, &leaf_spec);
		return;
	case 1:
		check_spec(frame, frame_len, &relay_spec);
		return;
	default:
		break;
	}
	memset(&m, 0, sizeof(m));
	switch (i) {
	case 2:
		decode_launch(&m, p, n, HERD__LAUNCH_T_SIGNAL);
		CHECK_INT(m.sig, 15);
		break;
	case 3:
	case 4:
		decode_launch(&m, p, n, HERD__LAUNCH_T_STOP);
		CHECK_INT(m.grace, i == 3 ? 3000 : 0);
		break;
	case 5:
		decode_launch(&m, p, n, HERD__LAUNCH_T_GO);
		break;
	case 6:
		decode_launch(&m, p, n, HERD__LAUNCH_T_READY);
		CHECK_TEXT(m.host, m.host_len, "gpu-b");
		CHECK_INT(m.pid, 31337);
		break;
	case 7:
		decode_launch(&m, p, n, HERD__LAUNCH_T_ERROR);
		CHECK_INT(m.st, HERD_EBUSY);
		CHECK_TEXT(m.msg, m.msg_len, ERR_MSG);
		break;
	case 8:
		decode_launch(&m, p, n, HERD__LAUNCH_T_STARTED);
		CHECK_INT(m.rank, 7);
		CHECK_INT(m.pid, 2147483647);
		break;
	case 9:
		decode_launch(&m, p, n, HERD__LAUNCH_T_OUT);
		CHECK_INT(m.rank, 7);
		CHECK_INT(m.s, HERD_JOB_STDERR);
		CHECK_BYTES(m.data, m.data_len, out_line, sizeof(out_line) - 1);
		break;
	case 10:
		decode_launch(&m, p, n, HERD__LAUNCH_T_OUT);
		CHECK_INT(m.rank, 4);
		CHECK_INT(m.s, HERD_JOB_STDOUT);
		CHECK(m.data != NULL);
		CHECK_INT(m.data_len, 0);
		break;
	case 11:
		decode_launch(&m, p, n, HERD__LAUNCH_T_EXITED);
		CHECK_INT(m.rank, 7);
		CHECK_INT(m.state, HERD_JOB_RANK_EXITED);
		CHECK_INT(m.code, 3);
		CHECK_INT(m.sig, 0);
		CHECK(m.err == NULL);
		break;
	case 12:
		decode_launch(&m, p, n, HERD__LAUNCH_T_EXITED);
		CHECK_INT(m.rank, 6);
		CHECK_INT(m.state, HERD_JOB_RANK_SIGNALED);
		CHECK_INT(m.code, 0);
		CHECK_INT(m.sig, 9);
		CHECK(m.err == NULL);
		break;
	case 13:
		decode_launch(&m, p, n, HERD__LAUNCH_T_EXITED);
		CHECK_INT(m.rank, 5);
		CHECK_INT(m.state, HERD_JOB_RANK_FAILED_START);
		CHECK_INT(m.code, 127);
		CHECK_INT(m.sig, 0);
		CHECK_TEXT(m.err, m.err_len, FAIL_MSG);
		break;
	case 14:
	case 15:
		decode_launch(&m, p, n, HERD__LAUNCH_T_PAUSED);
		CHECK_INT(m.rank, 4);
		CHECK_INT(m.sig, i == 14 ? 19 : 0);
		break;
	case 16:
		decode_launch(&m, p, n, HERD__LAUNCH_T_DONE);
		break;
	case 17:
		decode_launch(&m, p, n, HERD__LAUNCH_T_RELAY);
		CHECK_INT(m.node, 5);
		decode_launch(&in, (const uint8_t *)m.frame, m.frame_len, HERD__LAUNCH_T_STARTED);
		CHECK_INT(in.rank, 10);
		CHECK_INT(in.pid, 4242);
		herd__launch_msg_free(&in);
		break;
	case 18: {
		/* The wrapped spec, as a relay's child reads it once unwrapped. */
		herd__buf whole = { 0 };
		uint8_t len_be[4];

		decode_launch(&m, p, n, HERD__LAUNCH_T_RELAY);
		CHECK_INT(m.node, 5);
		len_be[0] = (uint8_t)(m.frame_len >> 24);
		len_be[1] = (uint8_t)(m.frame_len >> 16);
		len_be[2] = (uint8_t)(m.frame_len >> 8);
		len_be[3] = (uint8_t)m.frame_len;
		CHECK_OK(herd__buf_append(&whole, len_be, 4));
		CHECK_OK(herd__buf_append(&whole, m.frame, m.frame_len));
		check_spec(whole.data, whole.len, &sub_spec);
		herd__buf_free(&whole);
		break;
	}
	case 19:
		decode_launch(&m, p, n, HERD__LAUNCH_T_RELAY);
		CHECK_INT(m.node, 4);
		decode_launch(&in, (const uint8_t *)m.frame, m.frame_len, HERD__LAUNCH_T_RELAY);
		CHECK_INT(in.node, 6);
		decode_launch(&in2, (const uint8_t *)in.frame, in.frame_len, HERD__LAUNCH_T_DONE);
		herd__launch_msg_free(&in2);
		herd__launch_msg_free(&in);
		break;
	case 20:
		check_spec(frame, frame_len, &lines_spec);
		return;
	case 21:
		decode_launch(&m, p, n, HERD__LAUNCH_T_LINES);
		CHECK_INT(m.rank, 11);
		CHECK_INT(m.s, HERD_JOB_STDOUT);
		CHECK_BYTES(m.data, m.data_len, out_lines, sizeof(out_lines) - 1);
		break;
	default:
		TEST_FAIL_("launch frame %d: more frames than written", i);
		break;
	}
	herd__launch_msg_free(&m);
}

static void test_launch_golden_frames_decode_and_encode_identically(void)
{
	frames f;
	const uint8_t *frame;
	size_t frame_len;

	frames_open(&f, "launch-frames.bin", HERD__LAUNCH_FRAME_MAX);
	while (frames_next(&f, &frame, &frame_len)) {
		check_launch_frame(f.count - 1, frame, frame_len);
		frames_consume(&f, frame_len);
	}
	frames_close(&f, LAUNCH_FRAMES);
}

/* Today's encoders write the golden stream byte for byte. */
static void test_launch_frames_encode_as_golden(void)
{
	herd__buf b = { 0 };
	char *gold;
	size_t len = 0;

	gold = golden("launch-frames.bin", &len);
	encode_launch_stream(&b);
	CHECK_BYTES(b.data + b.off, b.len - b.off, gold, len);
	herd__buf_free(&b);
	free(gold);
}

/* ---- the store protocol ------------------------------------------------- */

typedef struct sbytes {
	const void *p;
	size_t n;
} sbytes;

#define B(s) { s, sizeof(s) - 1 }
#define MAX_ITEMS 4

/*
 * One store frame: its type, the fields it has (HERD__STORE_F_*) and their
 * values.  The same description writes a frame and checks a decoded one.
 */
typedef struct sframe {
	herd__store_type type;
	uint32_t has;
	uint64_t id;
	sbytes key, val, exp, msg, nonce, mac;
	int64_t delta, ms, st, n;
	sbytes keys[MAX_ITEMS];
	size_t nkeys;
	sbytes missing[MAX_ITEMS];
	size_t nmissing;
} sframe;

enum {
	F_ID = HERD__STORE_F_ID, F_KEY = HERD__STORE_F_KEY, F_KEYS = HERD__STORE_F_KEYS,
	F_VAL = HERD__STORE_F_VAL, F_EXP = HERD__STORE_F_EXP, F_DELTA = HERD__STORE_F_DELTA,
	F_MS = HERD__STORE_F_MS, F_ST = HERD__STORE_F_ST, F_N = HERD__STORE_F_N,
	F_MSG = HERD__STORE_F_MSG, F_NONCE = HERD__STORE_F_NONCE, F_MAC = HERD__STORE_F_MAC,
	F_MISSING = HERD__STORE_F_MISSING,
};

#define NONCE_S "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f" \
		"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"
#define NONCE_C "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0" \
		"\xef\xee\xed\xec\xeb\xea\xe9\xe8\xe7\xe6\xe5\xe4\xe3\xe2\xe1\xe0"
#define MAC_C "\x5a\x5a\x5a\x5a\xa5\xa5\xa5\xa5\x5a\x5a\x5a\x5a\xa5\xa5\xa5\xa5" \
	      "\x00\x00\x00\x00\x11\x11\x11\x11\x22\x22\x22\x22\x33\x33\x33\x33"
#define MAC_S "\x33\x33\x33\x33\x22\x22\x22\x22\x11\x11\x11\x11\x00\x00\x00\x00" \
	      "\xa5\xa5\xa5\xa5\x5a\x5a\x5a\x5a\xa5\xa5\xa5\xa5\x5a\x5a\x5a\x5a"

static const sframe store_frames[] = {
	/* The handshake. */
	{ .type = HERD__STORE_T_HELLO, .has = F_NONCE, .nonce = B(NONCE_S) },
	{ .type = HERD__STORE_T_AUTH, .has = F_NONCE | F_MAC, .nonce = B(NONCE_C),
	  .mac = B(MAC_C) },
	{ .type = HERD__STORE_T_AUTH_OK, .has = F_MAC, .mac = B(MAC_S) },
	/* set, and its reply. */
	{ .type = HERD__STORE_T_SET, .has = F_ID | F_KEY | F_VAL, .id = 1,
	  .key = B("job/a/master"), .val = B("10.1.0.1:29500") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST, .id = 1, .st = HERD_OK },
	/* set of a binary value, empty value. */
	{ .type = HERD__STORE_T_SET, .has = F_ID | F_KEY | F_VAL, .id = 2,
	  .key = B("job/a/blob"), .val = B("\x00\x01\xff\x80") },
	{ .type = HERD__STORE_T_SET, .has = F_ID | F_KEY | F_VAL, .id = 3,
	  .key = B("job/a/empty"), .val = B("") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST, .id = 3, .st = HERD_OK },
	/* get, waiting; its value. */
	{ .type = HERD__STORE_T_GET, .has = F_ID | F_KEY | F_MS, .id = 4,
	  .key = B("job/a/master"), .ms = 30000 },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_VAL, .id = 4, .st = HERD_OK,
	  .val = B("10.1.0.1:29500") },
	/* get, not waiting, of a missing key. */
	{ .type = HERD__STORE_T_GET, .has = F_ID | F_KEY | F_MS, .id = 5,
	  .key = B("job/a/none"), .ms = 0 },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_MISSING, .id = 5,
	  .st = HERD_ETIMEDOUT, .missing = { B("job/a/none") }, .nmissing = 1 },
	/* add, up and down. */
	{ .type = HERD__STORE_T_ADD, .has = F_ID | F_KEY | F_DELTA, .id = 6,
	  .key = B("job/a/count"), .delta = 5 },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_N, .id = 6, .st = HERD_OK,
	  .n = 12 },
	{ .type = HERD__STORE_T_ADD, .has = F_ID | F_KEY | F_DELTA, .id = 7,
	  .key = B("job/a/count"), .delta = -20 },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_N, .id = 7, .st = HERD_OK,
	  .n = -8 },
	/* cas with an expected value: swapped. */
	{ .type = HERD__STORE_T_CAS, .has = F_ID | F_KEY | F_EXP | F_VAL, .id = 8,
	  .key = B("job/a/leader"), .exp = B("node-01"), .val = B("node-02") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_N | F_VAL, .id = 8, .st = HERD_OK,
	  .n = 1, .val = B("node-02") },
	/* cas of an absent key (no "exp"): not swapped, the current value. */
	{ .type = HERD__STORE_T_CAS, .has = F_ID | F_KEY | F_VAL, .id = 9,
	  .key = B("job/a/leader"), .val = B("node-03") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_N | F_VAL, .id = 9, .st = HERD_OK,
	  .n = 0, .val = B("node-02") },
	/* del. */
	{ .type = HERD__STORE_T_DEL, .has = F_ID | F_KEY, .id = 10, .key = B("job/a/leader") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_N, .id = 10, .st = HERD_OK, .n = 1 },
	/* wait for three keys: one missing at the deadline. */
	{ .type = HERD__STORE_T_WAIT, .has = F_ID | F_MS | F_KEYS, .id = 11, .ms = 1500,
	  .keys = { B("job/a/ready/0"), B("job/a/ready/1"), B("job/a/ready/2") }, .nkeys = 3 },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_MISSING, .id = 11,
	  .st = HERD_ETIMEDOUT, .missing = { B("job/a/ready/2") }, .nmissing = 1 },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST, .id = 12, .st = HERD_OK },
	/* keys under a prefix, and every key (an empty prefix). */
	{ .type = HERD__STORE_T_KEYS, .has = F_ID | F_KEY, .id = 13, .key = B("job/a/") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_KEYS, .id = 13, .st = HERD_OK,
	  .keys = { B("job/a/master"), B("job/a/count"), B("job/a/blob") }, .nkeys = 3 },
	{ .type = HERD__STORE_T_KEYS, .has = F_ID | F_KEY, .id = 14, .key = B("") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_KEYS, .id = 14, .st = HERD_OK,
	  .nkeys = 0 },
	/* A failed request's reply, and a broken connection's error. */
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_MSG, .id = 15,
	  .st = HERD_EFORMAT, .msg = B("add to key \"job/a/master\": its value is not an integer") },
	{ .type = HERD__STORE_T_REPLY, .has = F_ID | F_ST | F_MSG, .id = 18446744073709551615u,
	  .st = HERD_ENORESOURCE, .msg = B("70000 keys start with \"\" (a listing holds at most "
					   "65536)") },
	{ .type = HERD__STORE_T_ERROR, .has = F_ST | F_MSG, .st = HERD_EAUTH,
	  .msg = B("store protocol: the client's proof does not match") },
};

#define STORE_FRAMES ((int)(sizeof(store_frames) / sizeof(store_frames[0])))

/*
 * Encodes f with today's encoder calls, fields in the order the client and
 * the server write them: id, key, st, n, ms, delta, exp, val, msg, keys,
 * missing, nonce, mac.
 */
static herd_status encode_store(herd__buf *b, const sframe *f)
{
	herd__store_enc e;

	herd__store_enc_begin(&e, b, f->type);
	if (f->has & F_ID)
		herd__store_enc_uint(&e, "id", f->id);
	if (f->has & F_KEY)
		herd__store_enc_bin(&e, "key", f->key.p, f->key.n);
	if (f->has & F_ST)
		herd__store_enc_int(&e, "st", f->st);
	if (f->has & F_N)
		herd__store_enc_int(&e, "n", f->n);
	if (f->has & F_MS)
		herd__store_enc_int(&e, "ms", f->ms);
	if (f->has & F_DELTA)
		herd__store_enc_int(&e, "delta", f->delta);
	if (f->has & F_EXP)
		herd__store_enc_bin(&e, "exp", f->exp.p, f->exp.n);
	if (f->has & F_VAL)
		herd__store_enc_bin(&e, "val", f->val.p, f->val.n);
	if (f->has & F_MSG)   /* a str, as herd__store_enc_str writes it */
		herd__frame_str(&e, "msg", f->msg.p, f->msg.n);
	if (f->has & F_KEYS) {
		herd__store_enc_array(&e, "keys", f->nkeys);
		for (size_t i = 0; i < f->nkeys; i++)
			herd__store_enc_item(&e, f->keys[i].p, f->keys[i].n);
	}
	if (f->has & F_MISSING) {
		herd__store_enc_array(&e, "missing", f->nmissing);
		for (size_t i = 0; i < f->nmissing; i++)
			herd__store_enc_item(&e, f->missing[i].p, f->missing[i].n);
	}
	if (f->has & F_NONCE)
		herd__store_enc_bin(&e, "nonce", f->nonce.p, f->nonce.n);
	if (f->has & F_MAC)
		herd__store_enc_bin(&e, "mac", f->mac.p, f->mac.n);
	return herd__store_enc_end(&e);
}

static sbytes of(herd__store_bytes b)
{
	sbytes r = { b.p, b.n };

	return r;
}

/* The description of a decoded message (pointing into its payload). */
static void store_frame_of(sframe *f, const herd__store_msg *m)
{
	memset(f, 0, sizeof(*f));
	f->type = m->type;
	f->has = m->has;
	f->id = m->id;
	f->key = of(m->key);
	f->val = of(m->val);
	f->exp = of(m->exp);
	f->msg = of(m->msg);
	f->nonce = of(m->nonce);
	f->mac = of(m->mac);
	f->delta = m->delta;
	f->ms = m->ms;
	f->st = m->st;
	f->n = m->n;
	f->nkeys = m->nkeys;
	for (size_t i = 0; i < m->nkeys && i < MAX_ITEMS; i++)
		f->keys[i] = of(herd__store_msg_item(m->keys, i));
	f->nmissing = m->nmissing;
	for (size_t i = 0; i < m->nmissing && i < MAX_ITEMS; i++)
		f->missing[i] = of(herd__store_msg_item(m->missing, i));
}

#define CHECK_FIELD_BYTES(got, want) CHECK_BYTES((got).p, (got).n, (want).p, (want).n)

static void check_store_frame(int i, const uint8_t *frame, size_t frame_len)
{
	const sframe *w = &store_frames[i];
	herd__store_msg m;
	herd__buf again = { 0 };
	sframe got;

	CHECK_OK(herd__store_msg_decode(&m, frame + 4, frame_len - 4));
	CHECK_STR(herd__store_type_name(m.type), herd__store_type_name(w->type));
	CHECK_INT(m.has, w->has);
	CHECK(m.id == w->id);
	if (w->has & F_KEY)
		CHECK_BYTES(m.key.p, m.key.n, w->key.p, w->key.n);
	if (w->has & F_VAL)
		CHECK_BYTES(m.val.p, m.val.n, w->val.p, w->val.n);
	if (w->has & F_EXP)
		CHECK_BYTES(m.exp.p, m.exp.n, w->exp.p, w->exp.n);
	if (w->has & F_MSG)
		CHECK_BYTES(m.msg.p, m.msg.n, w->msg.p, w->msg.n);
	if (w->has & F_NONCE)
		CHECK_BYTES(m.nonce.p, m.nonce.n, w->nonce.p, w->nonce.n);
	if (w->has & F_MAC)
		CHECK_BYTES(m.mac.p, m.mac.n, w->mac.p, w->mac.n);
	CHECK_INT(m.delta, w->delta);
	CHECK_INT(m.ms, w->ms);
	CHECK_INT(m.st, w->st);
	CHECK_INT(m.n, w->n);
	CHECK_INT(m.nkeys, w->nkeys);
	for (size_t k = 0; k < m.nkeys && k < w->nkeys; k++) {
		herd__store_bytes b = herd__store_msg_item(m.keys, k);

		CHECK_BYTES(b.p, b.n, w->keys[k].p, w->keys[k].n);
	}
	CHECK_INT(m.nmissing, w->nmissing);
	for (size_t k = 0; k < m.nmissing && k < w->nmissing; k++) {
		herd__store_bytes b = herd__store_msg_item(m.missing, k);

		CHECK_BYTES(b.p, b.n, w->missing[k].p, w->missing[k].n);
	}
	/* A request is one the server takes. */
	if ((w->has & F_ID) && w->type != HERD__STORE_T_REPLY)
		CHECK_OK(herd__store_request_check(&m));
	store_frame_of(&got, &m);
	CHECK_OK(encode_store(&again, &got));
	CHECK_BYTES(again.data + again.off, again.len - again.off, frame, frame_len);
	herd__buf_free(&again);
	herd__store_msg_free(&m);
}

static void encode_store_stream(herd__buf *b)
{
	for (int i = 0; i < STORE_FRAMES; i++)
		CHECK_OK(encode_store(b, &store_frames[i]));
}

static void test_store_golden_frames_decode_and_encode_identically(void)
{
	frames f;
	const uint8_t *frame;
	size_t frame_len;

	frames_open(&f, "store-frames.bin", HERD__STORE_FRAME_MAX);
	while (frames_next(&f, &frame, &frame_len)) {
		/* The handshake's frames fit the limit before authentication. */
		if (f.count <= 3)
			CHECK(frame_len - 4 <= HERD__STORE_FRAME_MAX_PREAUTH);
		if (f.count <= STORE_FRAMES)
			check_store_frame(f.count - 1, frame, frame_len);
		frames_consume(&f, frame_len);
	}
	frames_close(&f, STORE_FRAMES);
}

static void test_store_frames_encode_as_golden(void)
{
	herd__buf b = { 0 };
	char *gold;
	size_t len = 0;

	gold = golden("store-frames.bin", &len);
	encode_store_stream(&b);
	CHECK_BYTES(b.data + b.off, b.len - b.off, gold, len);
	herd__buf_free(&b);
	free(gold);
}

/* ---- writing ------------------------------------------------------------ */

static void write_frames(void)
{
	herd__buf b = { 0 };

	encode_launch_stream(&b);
	write_golden("launch-frames.bin", &b);
	herd__buf_free(&b);
	encode_store_stream(&b);
	write_golden("store-frames.bin", &b);
	herd__buf_free(&b);
}

int main(int argc, char **argv)
{
	bool write;

	if (!compat_write_mode(argc, argv, &write))
		return 1;
	if (write) {
		write_frames();
		return test_failures == 0 ? 0 : 1;
	}
	TEST_RUN(test_launch_golden_frames_decode_and_encode_identically);
	TEST_RUN(test_launch_frames_encode_as_golden);
	TEST_RUN(test_store_golden_frames_decode_and_encode_identically);
	TEST_RUN(test_store_frames_encode_as_golden);
	return TEST_DONE();
}
