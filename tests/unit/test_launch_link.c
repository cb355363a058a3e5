/*
 * The launcher's end of a helper channel (sdk/launch/link.c) when the
 * helper is gone before the launcher writes to it: ssh that cannot reach
 * its host prints its reason and exits 255, and whether the launcher's
 * first write comes before or after that is a race.  These tests force
 * the "after" order with a real child process: the error is the helper's
 * end, and its words are quoted, not "Broken pipe".  And what a helper
 * prints where frames should be: text (a login banner) is named and
 * quoted, not read as a frame length; its stdout is held up to the
 * buffer's limit, the frames that fill it exactly included, and a helper
 * that prints more than the caller consumes is stopped at the limit.
 * Through the engine: a helper that ended before the launcher's write
 * (ssh exits as herd exec ends, a command on its way) still hands over
 * what it printed last.
 */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "launch/engine.h"
#include "launch/launch_internal.h"
#include "net.h"
#include "test.h"

#define REASON "ssh: connect to host 127.0.0.9 port 22: Connection refused"

/* Starts sh -c script as a helper and attaches it to l. */
static void start_helper(herd__launch_link *l, const char *script)
{
	const char *argv[] = { "sh", "-c", script, NULL };
	herd__launch_channel ch;

	herd__launch_link_init(l);
	CHECK_OK(herd__launch_spawn_helper(argv, NULL, &ch));
	herd__launch_link_attach(l, &ch);
}

/* Waits (at most 10 s) until the helper has closed its stdin: a write
 * then fails with EPIPE.  Probed with a zero-length poll on the pipe. */
static bool wait_stdin_closed(herd__launch_link *l)
{
	for (int i = 0; i < 1000; i++) {
		struct pollfd p = { .fd = l->ch.wfd, .events = POLLOUT };

		if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0)
			return true;
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	return false;
}

static void flush_quotes(herd__launch_link *l)
{
	char says[HERD__LAUNCH_LINK_ERR_MAX + 8];

	CHECK(wait_stdin_closed(l));
	CHECK_OK(herd__buf_append(&l->out, "spec", 4));
	CHECK_ERR(herd__launch_link_flush(l), HERD_ECLOSED, "its herd exec ended");
	herd__launch_link_says(l, says, sizeof(says));
	CHECK(strstr(says, "Connection refused") != NULL);
	if (strstr(says, "Connection refused") == NULL)
		fprintf(stderr, "  the helper said \"%s\"\n", says);
	herd__launch_link_reap(l, 5000);
	herd__launch_link_free(l);
}

static void test_flush_after_the_helper_exited_quotes_its_reason(void)
{
	herd__launch_link l;

	start_helper(&l, "echo '" REASON "' >&2; exit 255");
	flush_quotes(&l);
}

/* Its stdin closed, its words a moment later: the flush waits for them. */
static void test_flush_after_stdin_closed_waits_for_the_reason(void)
{
	herd__launch_link l;

	start_helper(&l, "exec 0<&-; sleep 0.3; echo '" REASON "' >&2; exit 255");
	flush_quotes(&l);
}

/* A helper that closed stdin and says nothing is given up on in time. */
static void test_flush_to_a_silent_helper_ends_within_the_wait(void)
{
	herd__launch_link l;
	int64_t t0;

	start_helper(&l, "exec 0<&-; exec sleep 30");
	CHECK(wait_stdin_closed(&l));
	CHECK_OK(herd__buf_append(&l.out, "spec", 4));
	t0 = herd__net_now_ms();
	CHECK_ERR(herd__launch_link_flush(&l), HERD_ECLOSED, "its herd exec ended");
	CHECK(herd__net_now_ms() - t0 < HERD__LAUNCH_LINK_GONE_WAIT_MS + 1000);
	herd__launch_link_reap(&l, 0);
	herd__launch_link_free(&l);
}

/* link_frame's verdict on bytes that arrived, framed (a frame came) or not. */
static herd_status frame_of(const char *bytes, size_t n, bool framed, size_t *len)
{
	herd__launch_link l;
	const char *payload;
	herd_status st;

	herd__launch_link_init(&l);
	l.framed = framed;
	CHECK_OK(herd__buf_append(&l.in, bytes, n));
	st = herd__launch_link_frame(&l, &payload, len);
	herd__launch_link_free(&l);
	return st;
}

static void test_text_where_a_frame_starts_is_named_and_quoted(void)
{
	static const char frame[] = "\0\0\0\x03\x80\x80\x80";
	char buf[512], line[200];
	size_t len;

	snprintf(buf, sizeof(buf), "Welcome to n1\r\n%.*s", 7, frame);
	CHECK_ERR(frame_of(buf, strlen("Welcome to n1\r\n") + 7, false, &len), HERD_EFORMAT,
		  "printed text before herd's protocol: 'Welcome to n1'; a login banner on stdout?");
	CHECK_ERR(frame_of("\n\0\0\0\x03\x80\x80\x80", 8, false, &len), HERD_EFORMAT,
		  "printed an empty line before herd's protocol");
	CHECK_ERR(frame_of("oops\n", 5, true, &len), HERD_EFORMAT,
		  "printed text amid herd's protocol: 'oops'");
	/* A control byte is shown escaped; UTF-8 as it is, cut whole */
	CHECK_ERR(frame_of("Hi\x1b[1m there\n", 13, false, &len), HERD_EFORMAT,
		  "'Hi\\x1b[1m there'");
	memset(line, 'a', 79);
	memcpy(line + 79, "\xc3\xa9\xc3\xa9", 4);
	CHECK_ERR(frame_of(line, 83, false, &len), HERD_EFORMAT, "aaaa...'");
	/* Only four bytes so far: text too */
	CHECK_ERR(frame_of("Welc", 4, false, &len), HERD_EFORMAT, "'Welc...'");
	/* Binary that is not a frame is not text: the frame's own error */
	CHECK_ERR(frame_of("\x01\x02\x03\x04", 4, false, &len), HERD_EFORMAT,
		  "node protocol: frame of 16909060 bytes exceeds the limit");
	/* A frame is a frame */
	CHECK_OK(frame_of(frame, 7, false, &len));
	CHECK_INT(len, 3);
}

/* Fills l until the helper's output ends or fill fails; each whole frame
 * is consumed when consume.  Bounded: 10 s. */
static herd_status fill_all(herd__launch_link *l, bool consume)
{
	for (int i = 0; i < 10000; i++) {
		struct pollfd p = { .fd = l->ch.rfd, .events = POLLIN };
		const char *payload;
		size_t len;
		herd_status st;

		(void)poll(&p, 1, 1);
		st = herd__launch_link_fill(l);
		while (consume && st == HERD_OK && herd__launch_link_frame(l, &payload, &len) == HERD_OK &&
		       len != SIZE_MAX)
			herd__buf_consume(&l->in, len + 4);
		if (st != HERD_OK)
			return st;
	}
	return HERD_OK;
}

static void test_stdout_is_held_up_to_its_limit(void)
{
	herd__launch_link l;

	/* Two frames of the largest size: each fills the buffer exactly. */
	start_helper(&l, "for i in 1 2; do printf '\\000\\100\\000\\000'; "
			 "head -c 4194304 /dev/zero; done");
	CHECK_ERR(fill_all(&l, true), HERD_ECLOSED, "its herd exec ended");
	herd__launch_link_reap(&l, 5000);
	herd__launch_link_free(&l);

	/* Unconsumed: exactly the limit is the helper's whole answer... */
	start_helper(&l, "head -c 65536 /dev/zero");
	l.in.max = 65536;
	CHECK_ERR(fill_all(&l, false), HERD_ECLOSED, "its herd exec ended");
	CHECK_INT(l.in.len - l.in.off, 65536);
	herd__launch_link_reap(&l, 5000);
	herd__launch_link_free(&l);

	/* ... one byte more is too much, and stops the reading there */
	start_helper(&l, "head -c 10000000 /dev/zero");
	l.in.max = 65536;
	CHECK_ERR(fill_all(&l, false), HERD_EFORMAT,
		  "printed more than 64 KiB on its stdout, the most herd reads from it; "
		  "stopped reading it");
	CHECK_INT(l.in.len - l.in.off, 65536);
	CHECK(l.in.cap <= 2 * 65536 + 1);
	herd__launch_link_close(&l);
	herd__launch_link_reap(&l, 5000);
	herd__launch_link_free(&l);
}

struct last_words {
	char got[64];
	size_t n;
	bool ended, input_after_end;
	herd_status st;
};

static void lw_input(void *userdata, size_t h, herd__buf *in)
{
	struct last_words *w = userdata;
	size_t n = in->len - in->off;

	(void)h;
	if (w->ended)
		w->input_after_end = true;
	if (n > sizeof(w->got) - 1 - w->n)
		n = sizeof(w->got) - 1 - w->n;
	memcpy(w->got + w->n, in->data + in->off, n);
	w->n += n;
	herd__buf_consume(in, in->len - in->off);
}

static void lw_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	struct last_words *w = userdata;

	(void)h;
	w->ended = true;
	w->st = end->st;
}

/* A helper that printed its last words and ended before the launcher
 * wrote to it: the write fails (EPIPE), and its words still arrive,
 * before its end is reported. */
static void test_engine_takes_what_an_ended_helper_printed_before_a_write(void)
{
	const char *argv[] = { "sh", "-c", "printf 'done, and the rings'; exit 0", NULL };
	struct last_words w = { .st = HERD_OK };
	herd__engine_client client = { .userdata = &w, .input = lw_input, .ended = lw_ended };
	herd__launch_channel ch;
	herd__launch_link probe;
	herd__engine *e = NULL;
	size_t h = 0;

	CHECK_OK(herd__launch_spawn_helper(argv, NULL, &ch));
	/* Its stdin closed: it has ended, its words wait in the pipe. */
	herd__launch_link_init(&probe);
	probe.ch.wfd = ch.wfd;
	CHECK(wait_stdin_closed(&probe));
	CHECK_OK(herd__engine_create(&e, NULL, &client, NULL));
	CHECK_OK(herd__engine_attach(e, &ch, 0, 1, 65536, &h));
	CHECK_OK(herd__buf_append(&herd__engine_link(e, h)->out, "stop", 4));
	herd__engine_flush(e, h);
	for (int i = 0; i < 100 && !w.ended; i++)
		CHECK_OK(herd__engine_run_once(e, herd__net_now_ms() + 100));
	CHECK(w.ended);
	CHECK(!w.input_after_end);
	if (strcmp(w.got, "done, and the rings") != 0)
		fprintf(stderr, "  got \"%s\" (ended with %s)\n", w.got, herd_status_name(w.st));
	CHECK(strcmp(w.got, "done, and the rings") == 0);
	herd__engine_free(e, 5000);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	TEST_RUN(test_flush_after_the_helper_exited_quotes_its_reason);
	TEST_RUN(test_flush_after_stdin_closed_waits_for_the_reason);
	TEST_RUN(test_engine_takes_what_an_ended_helper_printed_before_a_write);
	TEST_RUN(test_flush_to_a_silent_helper_ends_within_the_wait);
	TEST_RUN(test_text_where_a_frame_starts_is_named_and_quoted);
	TEST_RUN(test_stdout_is_held_up_to_its_limit);
	return TEST_DONE();
}
