/*
 * shell/interrupt.c - what Ctrl-C stops besides the Lua code: the
 * communicators and the jobs of the session.
 *
 * A SIGINT that reaches running code (shell/run.c) also writes a byte to
 * a pipe; a thread of the program reads it and, from outside the signal
 * handler, aborts every open communicator (herd_comm_abort: pending calls
 * return HERD_EABORTED at once, here and on the peers) and interrupts every
 * job of the session not launched with detach = true, as a Ctrl-C on herd
 * launch does (herd_job_interrupt: SIGINT to its ranks, SIGKILL after its
 * grace period, state "interrupted"; another Ctrl-C kills them at once),
 * and stops every service of the session (herd_serve_interrupt: drained
 * and stopped; another Ctrl-C kills its replicas at once), so that a
 * script blocked in a collective, in job:wait or in svc:wait returns and
 * the "interrupted!" error reaches it.  Objects register when they are made
 * and leave before they are freed, under the one lock the thread holds
 * while it acts, so it never touches a freed object.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

enum kind { COMM, JOB, SERVICE };

struct entry {
	void *obj;
	enum kind kind;
	bool detach;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;
static size_t nentries, cap;
static int pipefd[2] = { -1, -1 };
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void act(void)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nentries; i++) {
		if (entries[i].kind == COMM)
			herd_comm_abort((herd_comm *)entries[i].obj);
		else if (entries[i].kind == SERVICE)
			herd_serve_interrupt((herd_serve *)entries[i].obj);
		else if (!entries[i].detach)
			herd_job_interrupt((herd_job *)entries[i].obj, SIGINT);
	}
	pthread_mutex_unlock(&lock);
}

static void *watch(void *arg)
{
	char buf[16];

	(void)arg;
	for (;;) {
		ssize_t n = read(pipefd[0], buf, sizeof(buf));

		if (n > 0)
			act();
		else if (n == 0 || errno != EINTR)
			return NULL;
	}
}

static void start(void)
{
	pthread_t t;
	pthread_attr_t a;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return;
	fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, watch, NULL) != 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		pipefd[0] = pipefd[1] = -1;
	}
	pthread_attr_destroy(&a);
}

static void add(void *obj, enum kind kind, bool detach)
{
	pthread_once(&once, start);
	pthread_mutex_lock(&lock);
	if (nentries == cap) {
		size_t ncap = cap ? 2 * cap : 16;
		struct entry *e = realloc(entries, ncap * sizeof(*e));

		if (e == NULL) {
			pthread_mutex_unlock(&lock);
			return; /* not stopped by Ctrl-C; everything else works */
		}
		entries = e;
		cap = ncap;
	}
	entries[nentries++] = (struct entry){ obj, kind, detach };
	pthread_mutex_unlock(&lock);
}

void shell_interrupt_add_comm(herd_comm *comm)
{
	add(comm, COMM, false);
}

void shell_interrupt_add_job(herd_job *job, bool detach)
{
	add(job, JOB, detach);
}

void shell_interrupt_add_service(herd_serve *svc)
{
	add(svc, SERVICE, false);
}

void shell_interrupt_remove(const void *obj)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nentries; i++) {
		if (entries[i].obj == obj) {
			entries[i] = entries[--nentries];
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

void shell_interrupt_signal(void)
{
	int saved = errno;
	char c = 1;

	if (pipefd[1] >= 0 && write(pipefd[1], &c, 1) < 0) {
		/* full: an interrupt is already pending */
	}
	errno = saved;
}
