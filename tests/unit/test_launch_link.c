/*
 * The launcher's end of a helper channel (sdk/launch/link.c) when the
 * helper is gone before the launcher writes to it: ssh that cannot reach
 * its host prints its reason and exits 255, and whether the launcher's
 * first write comes before or after that is a race.  These tests force
 * the "after" order with a real child process: the error is the helper's
 * end, and its words are quoted, not "Broken pipe".
 */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
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

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	TEST_RUN(test_flush_after_the_helper_exited_quotes_its_reason);
	TEST_RUN(test_flush_after_stdin_closed_waits_for_the_reason);
	TEST_RUN(test_flush_to_a_silent_helper_ends_within_the_wait);
	return TEST_DONE();
}
