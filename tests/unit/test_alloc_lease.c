/*
 * GPU leases on real files with real flock(2), in a temporary directory:
 * a lease is held while its holder lives and frees itself when the holder
 * is killed; acquisition is all or nothing; readers trust the lock, not
 * the record; lease files that something else made, and lease
 * directories that cannot be used, give clear errors and lease nothing.
 * Then herd_alloc holding leases on a fixture standing for this node.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

#include "test_alloc_util.h"

static const char *const A = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
static const char *const B = "GPU-bbbbbbbb-0000-0000-0000-000000000002";
static const char *const C = "GPU-cccccccc-0000-0000-0000-000000000003";

static herd_lease_opts lease_opts(const char *dir, const char *job)
{
	herd_lease_opts o = HERD_LEASE_OPTS_INIT;

	o.dir = dir;
	o.job_id = job;
	return o;
}

/* A node of the given UUIDs, through an inventory decoded from JSON. */
static herd_cluster *node_of(const char *const *uuids, size_t n)
{
	char json[8192];
	size_t len = 0;
	herd_cluster *c = NULL;

	len += (size_t)snprintf(json, sizeof(json),
				"{\"v\":1,\"nodes\":[{\"hostname\":\"n1\",\"cpu_model\":\"\","
				"\"packages\":1,\"cores\":2,\"threads\":2,\"memory_bytes\":1,"
				"\"memory_available_bytes\":1,\"numa\":[],\"gpus\":[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(json + len, sizeof(json) - len,
					"%s{\"uuid\":\"%s\",\"name\":\"g\",\"pci\":{\"bus_id\":"
					"\"0000:%02zx:00.0\",\"host_bridge\":\"0000:00\","
					"\"numa_node\":0,\"switches\":[]},\"memory_bytes\":1,"
					"\"cc_major\":9,\"cc_minor\":0,\"nvswitch_links\":0,"
					"\"nvlinks\":[]}",
					i ? "," : "", uuids[i], i + 1);
	snprintf(json + len, sizeof(json) - len, "],\"netdevs\":[],\"rdma\":[]}]}");
	if (herd_cluster_decode(&c, json, strlen(json), "test node") != HERD_OK) {
		fprintf(stderr, "cannot build node: %s\n", herd_last_error());
		exit(1);
	}
	return c;
}

/* The lease states of A, B, C in dir as "free,exclusive,..." */
static const char *states(const char *dir)
{
	static char buf[256];
	const char *uuids[] = { A, B, C };
	herd_cluster *c = node_of(uuids, 3);
	herd_lease_opts o = lease_opts(dir, NULL);
	herd_alloc_gpu_status *s = NULL;
	size_t n = 0;

	if (herd_alloc_gpu_status_query(test_node(c, 0), &o, &s, &n) != HERD_OK) {
		snprintf(buf, sizeof(buf), "error: %s", herd_last_error());
	} else {
		snprintf(buf, sizeof(buf), "%s,%s,%s", herd_lease_state_name(s[0].state),
			 herd_lease_state_name(s[1].state), herd_lease_state_name(s[2].state));
	}
	herd_free(s);
	herd_cluster_free(c);
	return buf;
}

/* Status of one UUID (A, B or C) in dir. */
static herd_alloc_gpu_status status_of(const char *dir, size_t which)
{
	const char *uuids[] = { A, B, C };
	herd_cluster *c = node_of(uuids, 3);
	herd_lease_opts o = lease_opts(dir, NULL);
	herd_alloc_gpu_status *s = NULL, out;
	size_t n = 0;

	memset(&out, 0, sizeof(out));
	if (herd_alloc_gpu_status_query(test_node(c, 0), &o, &s, &n) == HERD_OK)
		out = s[which];
	herd_free(s);
	herd_cluster_free(c);
	return out;
}

static char *path_in(const char *dir, const char *name)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

static char *lock_path(const char *dir, const char *uuid)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s.lock", dir, uuid);
	return buf;
}

/*
 * A child that takes the leases of uuids (exclusive or shared), says so on
 * a pipe, and waits to be killed.  Returns its pid once it holds them, or
 * -1 if it could not.
 */
static pid_t holder(const char *dir, const char *const *uuids, size_t n, int shared)
{
	int fds[2];
	char c = 0;
	pid_t pid;

	if (pipe(fds) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		herd_lease_opts o = lease_opts(dir, "job-h");
		herd_lease *l = NULL;

		close(fds[0]);
		c = herd_lease_acquire(&l, uuids, n, shared, &o) == HERD_OK ? 'y' : 'n';
		if (write(fds[1], &c, 1) != 1)
			_exit(2);
		for (int i = 0; i < 600; i++) /* at most a minute */
			sleep(1);
		_exit(0);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], &c, 1) != 1 || c != 'y') {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		pid = -1;
	}
	close(fds[0]);
	return pid;
}

static void kill_holder(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_lease_held_recorded_released_and_file_kept(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(dir, "job-7");
	const char *both[] = { B, A };
	herd_lease *l = NULL;
	herd_alloc_gpu_status s;
	struct stat sb;
	char want[64], *text;

	CHECK_STR(states(dir), "free,free,free");
	CHECK_OK(herd_lease_acquire(&l, both, 2, 0, &o));
	CHECK_INT(herd_lease_gpu_count(l), 2);
	CHECK_STR(states(dir), "exclusive,exclusive,free");
	s = status_of(dir, 1);
	CHECK_STR(s.job, "job-7");
	CHECK_INT(s.pid, getpid());
	CHECK(s.since > 0 && s.since <= (int64_t)time(NULL));
	CHECK(s.user[0] != '\0');
	CHECK_STR(s.note, "");
	/* The record, as documented. */
	text = read_text(lock_path(dir, A));
	snprintf(want, sizeof(want), "\npid=%d\n", (int)getpid());
	CHECK(text != NULL && strncmp(text, "herd-lease v=1\nuuid=", 20) == 0);
	CHECK(text != NULL && strstr(text, want) != NULL && strstr(text, "\njob=job-7\n") != NULL &&
	      strstr(text, "\nmode=exclusive\n") != NULL);
	free(text);
	/* In a private directory (this one is mkdtemp's 0700) owner-only. */
	CHECK_INT(stat(lock_path(dir, A), &sb), 0);
	CHECK_INT(sb.st_mode & 0777, 0600);
	herd_lease_free(l);
	/* In a shared one (1777, as /run/herd) every user may lock it; only
	 * its creator may write a record. */
	CHECK_INT(chmod(dir, 01777), 0);
	l = NULL;
	CHECK_OK(herd_lease_acquire(&l, both, 2, 0, &o));
	CHECK_INT(stat(lock_path(dir, A), &sb), 0);
	CHECK_INT(sb.st_mode & 0777, 0644);
	herd_lease_free(l);
	CHECK_STR(states(dir), "free,free,free");
	/* Released: the file stays (never deleted), emptied. */
	CHECK_INT(stat(lock_path(dir, A), &sb), 0);
	CHECK_INT(sb.st_size, 0);
	herd_lease_free(NULL);
	rm_tree(dir);
}

static void test_lease_busy_is_all_or_nothing(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(dir, "job-8");
	const char *only_b[] = { B };
	const char *abc[] = { C, A, B };
	herd_lease *l = NULL;
	char want[128];
	pid_t h = holder(dir, only_b, 1, 0);

	CHECK(h > 0);
	CHECK_STR(states(dir), "free,exclusive,free");
	snprintf(want, sizeof(want), "GPU %s is held by job job-h (pid %d", B, (int)h);
	CHECK_ERR(herd_lease_acquire(&l, abc, 3, 0, &o), HERD_EBUSY, want);
	CHECK(l == NULL);
	/* A was locked before B failed; it was let go again, and C never taken. */
	CHECK_STR(states(dir), "free,exclusive,free");
	/* The same process cannot take a GPU twice either. */
	CHECK_OK(herd_lease_acquire(&l, abc, 1, 0, &o));
	{
		herd_lease *again = NULL;

		CHECK_ERR(herd_lease_acquire(&again, abc, 1, 0, &o), HERD_EBUSY,
			  "is held by job job-8");
		CHECK(again == NULL);
	}
	herd_lease_free(l);
	kill_holder(h);
	rm_tree(dir);
}

static void test_lease_of_a_killed_holder_frees_itself(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(dir, NULL);
	const char *ab[] = { A, B };
	herd_lease *l = NULL;
	herd_alloc_gpu_status s;
	pid_t h = holder(dir, ab, 2, 0);

	CHECK(h > 0);
	s = status_of(dir, 0);
	CHECK_INT(s.state, HERD_LEASE_EXCLUSIVE);
	CHECK_INT(s.pid, h);
	kill_holder(h);
	/* The record is still there; the lock is not, and the lock decides. */
	{
		char *text = read_text(lock_path(dir, A));

		CHECK(text != NULL && strstr(text, "pid=") != NULL);
		free(text);
	}
	CHECK_STR(states(dir), "free,free,free");
	s = status_of(dir, 0);
	CHECK_INT(s.pid, 0);
	CHECK_OK(herd_lease_acquire(&l, ab, 2, 0, &o));
	herd_lease_free(l);
	rm_tree(dir);
}

static void test_lease_shared_holders_exclude_exclusive_ones(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(dir, NULL);
	const char *a[] = { A };
	herd_lease *l = NULL, *l2 = NULL;
	pid_t h = holder(dir, a, 1, 1);

	CHECK(h > 0);
	CHECK_STR(states(dir), "shared,free,free");
	CHECK_OK(herd_lease_acquire(&l, a, 1, 1, &o));
	CHECK_ERR(herd_lease_acquire(&l2, a, 1, 0, &o), HERD_EBUSY, "is held by");
	kill_holder(h);
	CHECK_STR(states(dir), "shared,free,free");
	herd_lease_free(l);
	CHECK_STR(states(dir), "free,free,free");
	CHECK_OK(herd_lease_acquire(&l2, a, 1, 0, &o));
	CHECK_ERR(herd_lease_acquire(&l, a, 1, 1, &o), HERD_EBUSY, "is held exclusively by");
	herd_lease_free(l2);
	rm_tree(dir);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

/* A process that locks a file the way something else might, no record. */
static pid_t foreign_locker(const char *path)
{
	int fds[2];
	char c = 0;
	pid_t pid;

	if (pipe(fds) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd = open(path, O_RDWR | O_CREAT, 0644);

		c = fd >= 0 && flock(fd, LOCK_EX) == 0 ? 'y' : 'n';
		if (write(fds[1], &c, 1) != 1)
			_exit(2);
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1 || c != 'y')
		pid = -1;
	close(fds[0]);
	return pid;
}

static void test_lease_files_written_by_something_else(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(dir, NULL);
	const char *a[] = { A }, *b[] = { B }, *c[] = { C }, *ab[] = { A, B };
	herd_lease *l = NULL;
	herd_alloc_gpu_status s;
	pid_t h;

	/* Garbage nobody locks: free, and taken over. */
	write_file(lock_path(dir, A), "\x01\x02 not a lease\n");
	CHECK_STR(states(dir), "free,free,free");
	CHECK_OK(herd_lease_acquire(&l, a, 1, 0, &o));
	herd_lease_free(l);
	l = NULL;
	/* Garbage someone locks: held, by an unknown holder. */
	write_file(lock_path(dir, B), "garbage");
	h = foreign_locker(lock_path(dir, B));
	CHECK(h > 0);
	s = status_of(dir, 1);
	CHECK_INT(s.state, HERD_LEASE_EXCLUSIVE);
	CHECK_STR(s.note, "lease file holds something herd did not write");
	CHECK_ERR(herd_lease_acquire(&l, b, 1, 0, &o), HERD_EBUSY, "a process that left no record");
	kill_holder(h);
	/* A directory where a lease file should be. */
	CHECK_INT(mkdir(lock_path(dir, C), 0700), 0);
	CHECK_ERR(herd_lease_acquire(&l, c, 1, 0, &o), HERD_EINVAL, "Is a directory");
	CHECK_STR(states(dir), "free,free,unknown");
	s = status_of(dir, 2);
	CHECK(strstr(s.note, "is not a regular file") != NULL);
	rmdir(lock_path(dir, C));
	/* A symbolic link: never followed. */
	CHECK_INT(symlink("/etc/passwd", lock_path(dir, C)), 0);
	CHECK_ERR(herd_lease_acquire(&l, c, 1, 0, &o), HERD_EINVAL, "is a symbolic link");
	CHECK(strstr(status_of(dir, 2).note, "is a symbolic link") != NULL);
	unlink(lock_path(dir, C));
	/* A FIFO: no hang, an error. */
	CHECK_INT(mkfifo(lock_path(dir, C), 0600), 0);
	CHECK_ERR(herd_lease_acquire(&l, c, 1, 0, &o), HERD_EINVAL, "is not a regular file");
	CHECK_STR(states(dir), "free,free,unknown");
	/* And nothing leased half-way when one of several is bad. */
	{
		const char *abc[] = { A, B, C };

		CHECK_ERR(herd_lease_acquire(&l, abc, 3, 0, &o), HERD_EINVAL,
			  "is not a regular file");
		CHECK(l == NULL);
		CHECK_STR(states(dir), "free,free,unknown");
	}
	unlink(lock_path(dir, C));
	/* A hard link to a file of ours: its bytes are not the record's to replace. */
	{
		char other[4096], text[64] = "";
		FILE *f;

		snprintf(other, sizeof(other), "%s/precious", dir);
		write_file(other, "precious\n");
		CHECK_INT(link(other, lock_path(dir, C)), 0);
		CHECK_ERR(herd_lease_acquire(&l, c, 1, 0, &o), HERD_EINVAL, "has 2 names");
		CHECK(l == NULL);
		f = fopen(other, "r");
		CHECK(f != NULL && fgets(text, sizeof(text), f) != NULL);
		if (f != NULL)
			fclose(f);
		CHECK_STR(text, "precious\n");
		unlink(lock_path(dir, C));
		unlink(other);
	}
	CHECK_OK(herd_lease_acquire(&l, ab, 2, 0, &o));
	herd_lease_free(l);
	l = NULL;
	/* A record rewritten while a holder holds the lease, naming another
	 * live process and another job: the kernel's word on who holds the
	 * lock wins, and the note says the record is not the holder's. */
	h = holder(dir, a, 1, 0);
	CHECK(h > 0);
	{
		char fake[256];

		snprintf(fake, sizeof(fake), "herd-lease v=1\nuuid=%s\njob=forged\npid=%d\n"
			 "user=mallory\nuid=4242\nhost=elsewhere\nsince=1\nmode=exclusive\n", A,
			 (int)getpid());
		write_file(lock_path(dir, A), fake);
	}
	s = status_of(dir, 0);
	CHECK_INT(s.state, HERD_LEASE_EXCLUSIVE);
	CHECK_INT(s.pid, h);
	CHECK(strcmp(s.job, "forged") != 0 && strcmp(s.user, "mallory") != 0);
	CHECK(strstr(s.note, "does not hold the lock") != NULL);
	kill_holder(h);
	rm_tree(dir);
}

static void test_lease_bad_names_and_arguments(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(dir, NULL);
	const char *evil[] = { "../../etc/passwd" };
	const char *dotted[] = { ".hidden" };
	const char *twice[] = { A, B, A };
	herd_lease *l = NULL;
	char buf[64];

	CHECK_ERR(herd_lease_acquire(&l, evil, 1, 0, &o), HERD_EINVAL,
		  "GPU UUID '../../etc/passwd' cannot name a lease file");
	CHECK_ERR(herd_lease_acquire(&l, dotted, 1, 0, &o), HERD_EINVAL,
		  "cannot name a lease file");
	CHECK_ERR(herd_lease_acquire(&l, twice, 3, 0, &o), HERD_EINVAL, "is named twice");
	CHECK_ERR(herd_lease_acquire(&l, NULL, 2, 0, &o), HERD_EINVAL, "uuids is NULL");
	CHECK_ERR(herd_lease_acquire(NULL, twice, 1, 0, &o), HERD_EINVAL, "out is NULL");
	o.version = 7;
	CHECK_ERR(herd_lease_acquire(&l, twice, 1, 0, &o), HERD_EINVAL, "HERD_LEASE_OPTS_INIT");
	CHECK_ERR(herd_lease_dir(NULL, buf, 0), HERD_EINVAL, "buf is NULL or empty");
	CHECK(l == NULL);
	rm_tree(dir);
}

static void test_lease_directory_choice_and_bad_directories(void)
{
	char *dir = make_tmpdir();
	herd_lease_opts o = lease_opts(NULL, NULL);
	const char *a[] = { A };
	herd_lease *l = NULL;
	char buf[4096], *sub;
	struct stat sb;

	/* The option, else HERD_LEASE_DIR. */
	setenv("HERD_LEASE_DIR", "/from/env", 1);
	CHECK_OK(herd_lease_dir(&o, buf, sizeof(buf)));
	CHECK_STR(buf, "/from/env");
	o.dir = dir;
	CHECK_OK(herd_lease_dir(&o, buf, sizeof(buf)));
	CHECK_STR(buf, dir);
	unsetenv("HERD_LEASE_DIR");
	o.dir = NULL;
	CHECK_OK(herd_lease_dir(&o, buf, sizeof(buf)));
	CHECK(strcmp(buf, "/run/herd") == 0 || strstr(buf, "/herd") != NULL);
	/* Missing: nothing leased yet; created (0700) when a lease is taken. */
	sub = strdup(path_in(dir, "leases"));
	o.dir = sub;
	CHECK_STR(states(sub), "free,free,free");
	CHECK(stat(sub, &sb) != 0);
	CHECK_OK(herd_lease_acquire(&l, a, 1, 0, &o));
	CHECK(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700);
	herd_lease_free(l);
	l = NULL;
	/* Parents are not created. */
	o.dir = path_in(dir, "no/such/dir");
	CHECK_ERR(herd_lease_acquire(&l, a, 1, 0, &o), HERD_ESYS, "cannot create lease directory");
	/* A file where the directory should be. */
	write_file(path_in(dir, "file"), "x");
	o.dir = path_in(dir, "file");
	CHECK_ERR(herd_lease_acquire(&l, a, 1, 0, &o), HERD_ESYS, "(not a directory)");
	CHECK(strncmp(states(path_in(dir, "file")), "error: cannot use lease directory", 33) == 0);
	CHECK(l == NULL);
	free(sub);
	rm_tree(dir);
}

/*
 * A directory this process may not read: as root, a child that dropped to
 * nobody tries it; otherwise this process, after chmod 0.
 */
static void test_lease_unreadable_directory_is_a_clear_error(void)
{
	char *dir = make_tmpdir();
	char *locked = strdup(path_in(dir, "locked"));
	int status = -1;
	pid_t pid;

	CHECK_INT(mkdir(locked, 0700), 0);
	CHECK_INT(chmod(dir, 0755), 0);
	pid = fork();
	if (pid == 0) {
		herd_lease_opts o = lease_opts(locked, NULL);
		const char *a[] = { A };
		herd_lease *l = NULL;
		herd_status st;

		if (geteuid() == 0) {
			if (setgid(65534) != 0 || setuid(65534) != 0)
				_exit(77); /* no CAP_SETUID here: nothing to test */
		} else if (chmod(locked, 0) != 0) {
			_exit(11);
		}
		st = herd_lease_acquire(&l, a, 1, 0, &o);
		if (st != HERD_ESYS || strstr(herd_last_error(), "Permission denied") == NULL)
			_exit(12);
		if (strncmp(states(locked), "error: cannot use lease directory", 33) != 0 ||
		    strstr(states(locked), "Permission denied") == NULL)
			_exit(13);
		_exit(l == NULL ? 0 : 14);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 77))
		CHECK_INT(WEXITSTATUS(status), 0);
	free(locked);
	rm_tree(dir);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		TEST_SKIP("root cannot drop to uid 65534 here");
}

/* herd_alloc on a fixture standing for this node, holding leases. */
static void test_alloc_holds_leases_and_replans_around_them(void)
{
	char *dir = make_tmpdir();
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_alloc_opts opts = HERD_ALLOC_OPTS_INIT;
	herd_plan *p1 = NULL, *p2 = NULL, *p3 = NULL;

	opts.lease_dir = dir;
	opts.job_id = "first";
	opts.ignore_slurm = 1;
	req.gpus = 2;
	CHECK_OK(herd_alloc(&p1, c, &req, &opts));
	CHECK_STR(plan_gpus(p1), "0,1");
	CHECK_INT(herd_plan_held(p1), 1);
	opts.job_id = "second";
	CHECK_OK(herd_alloc(&p2, c, &req, &opts));
	CHECK_STR(plan_gpus(p2), "2,3");
	CHECK_ERR(herd_alloc(&p3, c, &req, &opts), HERD_ENORESOURCE, "GPU0 held by job first (pid");
	/* Released but still readable. */
	herd_plan_release(p1);
	CHECK_INT(herd_plan_held(p1), 0);
	CHECK_STR(plan_gpus(p1), "0,1");
	herd_plan_release(p1);
	CHECK_OK(herd_alloc(&p3, c, &req, &opts));
	CHECK_STR(plan_gpus(p3), "0,1");
	herd_plan_free(p3);
	herd_plan_free(p2);
	herd_plan_free(p1);
	/* A lease file something else broke: that GPU is never handed out. */
	CHECK_INT(unlink(lock_path(dir, test_node(c, 0)->gpus[1].uuid)), 0);
	CHECK_INT(mkdir(lock_path(dir, test_node(c, 0)->gpus[1].uuid), 0700), 0);
	p1 = NULL;
	CHECK_OK(herd_alloc(&p1, c, &req, &opts));
	CHECK_STR(plan_gpus(p1), "2,3");
	herd_plan_free(p1);
	/* A multi-node plan cannot be held here. */
	herd_cluster_free(c);
	c = multi_node("dgx-h100.json", "dgx-h100", "far", 2);
	p1 = NULL;
	CHECK_ERR(herd_alloc(&p1, c, &req, &opts), HERD_ENOTFOUND,
		  "only this node's GPUs can be leased");
	opts.plan_only = 1;
	CHECK_OK(herd_alloc(&p1, c, &req, &opts));
	CHECK_INT(herd_plan_held(p1), 0);
	herd_plan_free(p1);
	herd_cluster_free(c);
	rm_tree(dir);
}

/* wait_ms: a request that cannot be met now is met when a holder goes. */
static void test_alloc_waits_for_a_holder_to_go(void)
{
	char *dir = make_tmpdir();
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	const herd_node *node = test_node(c, 0);
	const char *all[4];
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_alloc_opts opts = HERD_ALLOC_OPTS_INIT;
	herd_plan *p = NULL;
	pid_t h, killer;

	for (size_t i = 0; i < 4; i++)
		all[i] = node->gpus[i].uuid;
	h = holder(dir, all, 4, 0);
	CHECK(h > 0);
	opts.lease_dir = dir;
	opts.ignore_slurm = 1;
	req.gpus = 4;
	CHECK_ERR(herd_alloc(&p, c, &req, &opts), HERD_ENORESOURCE, "has 0 free of 4");
	/* A second child kills the holder in 300 ms. */
	killer = fork();
	if (killer == 0) {
		struct timespec ts = { 0, 300 * 1000000L };

		nanosleep(&ts, NULL);
		kill(h, SIGKILL);
		_exit(0);
	}
	opts.wait_ms = 10000;
	CHECK_OK(herd_alloc(&p, c, &req, &opts));
	CHECK_INT(herd_plan_gpu_count(p), 4);
	herd_plan_free(p);
	waitpid(killer, NULL, 0);
	waitpid(h, NULL, 0);
	opts.wait_ms = -1;
	CHECK_ERR(herd_alloc(&p, c, &req, &opts), HERD_EINVAL, "wait_ms is -1");
	herd_cluster_free(c);
	rm_tree(dir);
}

int main(void)
{
	unsetenv("HERD_INVENTORY");
	unsetenv("HERD_LEASE_DIR");
	unsetenv("SLURM_JOB_ID");
	TEST_RUN(test_lease_held_recorded_released_and_file_kept);
	TEST_RUN(test_lease_busy_is_all_or_nothing);
	TEST_RUN(test_lease_of_a_killed_holder_frees_itself);
	TEST_RUN(test_lease_shared_holders_exclude_exclusive_ones);
	TEST_RUN(test_lease_files_written_by_something_else);
	TEST_RUN(test_lease_bad_names_and_arguments);
	TEST_RUN(test_lease_directory_choice_and_bad_directories);
	TEST_RUN(test_lease_unreadable_directory_is_a_clear_error);
	TEST_RUN(test_alloc_holds_leases_and_replans_around_them);
	TEST_RUN(test_alloc_waits_for_a_holder_to_go);
	return TEST_DONE();
}
