/*
 * shell/signals.c - the self-pipe through which a command's loop hears of
 * the signals it catches (herd launch, herd top, herd probe --watch): the
 * handler writes the signal's number, a byte, to a non-blocking pipe whose
 * read end the loop polls beside its other descriptors, so that the loop
 * acts on the signal outside the handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shell.h"

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(sig_pipe[1], &c, 1) < 0) {
		/* Full: the loop has signals to read already. */
	}
	errno = saved;
}

int shell_signals_catch(const char *pname, const int *sigs, size_t n)
{
	struct sigaction sa;

	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "%s: cannot create the pipe that tells of signals: %s\n", pname,
			strerror(errno));
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < n; i++)
		sigaction(sigs[i], &sa, NULL);
	return sig_pipe[0];
}
