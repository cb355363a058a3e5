/*
 * The file store: the shared contract on a fresh directory, then what only
 * a store on a file system has to get right: hostile key names, long keys,
 * a lock held by a stuck process, no stray files.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "store_contract.h"

static char root_dir[256];   /* a fresh temporary directory */
static char store_dir[300];  /* root_dir/store, the contract's store */

static herd_status open_dir(herd_store **out, const char *dir, int timeout_ms)
{
	herd_store_opts o = HERD_STORE_OPTS_INIT;

	o.timeout_ms = timeout_ms;
	return herd_store_open_file(out, dir, &o);
}

static herd_status contract_open(herd_store **out, int timeout_ms)
{
	return open_dir(out, store_dir, timeout_ms);
}

static const char *contract_where(void)
{
	return store_dir;
}

/* Calls fn on each entry of dir but . and ..; returns how many there were. */
static int list_dir(const char *dir, void (*fn)(const char *name, void *arg), void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		if (fn != NULL)
			fn(e->d_name, arg);
	}
	closedir(d);
	return n;
}

static void check_store_name(const char *name, void *arg)
{
	/* Value files, long keys' names and the lock; never a temporary file
	 * left behind. */
	bool known = strncmp(name, "k-", 2) == 0 || strncmp(name, "h-", 2) == 0 ||
		     strncmp(name, "n-", 2) == 0;

	(void)arg;
	if (strcmp(name, "lock") == 0)
		return;
	CHECK(known &&
	      strspn(name + 2, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-%") ==
		      strlen(name + 2));
	if (!known)
		fprintf(stderr, "unexpected file in the store: %s\n", name);
}

static void remove_tree(const char *dir);

static void remove_entry(const char *name, void *arg)
{
	char path[600];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", (const char *)arg, name);
	if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		remove_tree(path);
	else
		unlink(path);
}

static void remove_tree(const char *dir)
{
	list_dir(dir, remove_entry, (void *)dir);
	rmdir(dir);
}

static void test_store_file_keys_cannot_escape_the_directory(void)
{
	static const char *const keys[] = {
		"../escape", "../../etc/passwd", "..", ".", "/abs/path", "a/b/c", "a/../../b",
		"%2F..%2F", "k-x", "lock", "t-0123", "sp ace\ttab\nnl", "\x7f\xff\xfe",
	};
	enum { N = sizeof(keys) / sizeof(keys[0]) };
	char dir[320];
	herd_store *s = NULL;

	snprintf(dir, sizeof(dir), "%s/escape", root_dir);
	CHECK_OK(open_dir(&s, dir, 2000));
	if (s == NULL)
		return;
	for (int i = 0; i < N; i++)
		CHECK_OK(herd_store_set(s, keys[i], keys[i], strlen(keys[i])));
	for (int i = 0; i < N; i++) {
		void *v = NULL;

		CHECK_OK(herd_store_get(s, keys[i], 0, &v, NULL));
		CHECK_STR((char *)v, keys[i]);
		herd_free(v);
	}
	/* Everything stayed inside: one file per key, and the lock. */
	CHECK_INT(list_dir(dir, check_store_name, NULL), N + 1);
	/* Beside the store directories, nothing new appeared. */
	CHECK_INT(list_dir(root_dir, NULL, NULL), 2);
	{
		struct stat sb;

		CHECK(stat("/etc/passwd", &sb) == 0);
		CHECK(lstat("/abs", &sb) != 0);
	}
	herd_store_free(s);
}

static void test_store_file_long_keys_get_hashed_names(void)
{
	herd_store *s = NULL;
	char a[HERD_STORE_KEY_MAX + 1], b[HERD_STORE_KEY_MAX + 1];
	char dir[320];
	void *v = NULL;

	snprintf(dir, sizeof(dir), "%s/long", root_dir);
	CHECK_OK(open_dir(&s, dir, 2000));
	if (s == NULL)
		return;
	/* Two long keys that differ in their last byte only. */
	memset(a, '/', HERD_STORE_KEY_MAX);
	a[HERD_STORE_KEY_MAX] = '\0';
	memcpy(b, a, sizeof(a));
	b[HERD_STORE_KEY_MAX - 1] = '.';
	CHECK_OK(herd_store_set(s, a, "A", 1));
	CHECK_OK(herd_store_set(s, b, "B", 1));
	CHECK_OK(herd_store_get(s, a, 0, &v, NULL));
	CHECK_STR((char *)v, "A");
	herd_free(v);
	CHECK_OK(herd_store_get(s, b, 0, &v, NULL));
	CHECK_STR((char *)v, "B");
	herd_free(v);
	/* two hashed value files, each with its key beside it, and the lock */
	CHECK_INT(list_dir(dir, check_store_name, NULL), 5);
	CHECK_OK(herd_store_delete(s, a, NULL));
	CHECK_INT(list_dir(dir, check_store_name, NULL), 3);
	herd_store_free(s);
}

static void test_store_file_lock_held_by_a_stuck_process_times_out(void)
{
	char lock_path[400];
	herd_store *s = NULL;
	void *v = NULL;
	int64_t t0, took;
	int pipefd[2];
	pid_t pid;
	char c;

	CHECK_OK(open_dir(&s, store_dir, 300));
	if (s == NULL)
		return;
	snprintf(lock_path, sizeof(lock_path), "%s/lock", store_dir);
	CHECK_INT(pipe(pipefd), 0);
	pid = fork();
	if (pid == 0) {
		int fd = open(lock_path, O_RDWR | O_CREAT, 0600);

		if (fd < 0 || flock(fd, LOCK_EX) != 0)
			_exit(1);
		if (write(pipefd[1], "L", 1) != 1)
			_exit(1);
		sleep_ms(20000); /* killed long before */
		_exit(0);
	}
	close(pipefd[1]);
	CHECK(read(pipefd[0], &c, 1) == 1);
	close(pipefd[0]);
	t0 = now_ms();
	CHECK_ERR(herd_store_set(s, "stuck", "v", 1), HERD_ETIMEDOUT, "lock file stayed locked");
	took = now_ms() - t0;
	CHECK(strstr(herd_last_error(), store_dir) != NULL);
	CHECK(strstr(herd_last_error(), "stuck") != NULL);
	CHECK(took >= 290 && took < 1300);
	printf("  [timing] set behind a lock held by a stuck process: HERD_ETIMEDOUT after %lld ms "
	       "(timeout 300 ms)\n", (long long)took);
	/* Reads do not need the lock. */
	t0 = now_ms();
	CHECK_ERR(herd_store_get(s, "stuck", 0, &v, NULL), HERD_ETIMEDOUT, "stuck");
	CHECK(now_ms() - t0 < 100);
	/* The kernel drops a dead process's lock. */
	kill(pid, SIGKILL);
	CHECK_INT(reap_child(pid, 5000), -1);
	t0 = now_ms();
	CHECK_OK(herd_store_set(s, "stuck", "v", 1));
	printf("  [timing] after kill -9 of the lock holder, the next set took %lld ms\n",
	       (long long)(now_ms() - t0));
	herd_store_free(s);
}

static void test_store_file_open_checks_its_directory(void)
{
	char path[400];
	herd_store *s = (herd_store *)1;
	struct stat sb;
	int fd;

	/* Missing parents are created, private to the user. */
	snprintf(path, sizeof(path), "%s/new/deeper/store", root_dir);
	CHECK_OK(open_dir(&s, path, 1000));
	CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700);
	herd_store_free(s);
	/* A file where the directory should be. */
	snprintf(path, sizeof(path), "%s/plainfile", root_dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	close(fd);
	s = (herd_store *)1;
	CHECK_ERR(open_dir(&s, path, 1000), HERD_EIO, "plainfile");
	CHECK(s == NULL);
	unlink(path);
	CHECK_ERR(herd_store_open_file(&s, "", NULL), HERD_EINVAL, "no directory");
	CHECK_ERR(herd_store_open_file(&s, NULL, NULL), HERD_EINVAL, "no directory");
	snprintf(path, sizeof(path), "%s/new", root_dir);
	remove_tree(path);
}

static void test_store_file_value_files_are_replaced_whole(void)
{
	herd_store *s = NULL;
	char dir[320];

	snprintf(dir, sizeof(dir), "%s/whole", root_dir);
	CHECK_OK(open_dir(&s, dir, 2000));
	if (s == NULL)
		return;
	/* Many sets of the same key leave one file and no temporary ones. */
	for (int i = 0; i < 50; i++) {
		char v[16];

		snprintf(v, sizeof(v), "%d", i);
		CHECK_OK(herd_store_set(s, "k", v, strlen(v)));
	}
	CHECK_INT(list_dir(dir, check_store_name, NULL), 2);
	herd_store_free(s);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	int rc;

	snprintf(root_dir, sizeof(root_dir), "%s/herd-store-test-XXXXXX",
		 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	if (mkdtemp(root_dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(store_dir, sizeof(store_dir), "%s/store", root_dir);
	run_store_contract();
	TEST_RUN(test_store_file_keys_cannot_escape_the_directory);
	TEST_RUN(test_store_file_long_keys_get_hashed_names);
	TEST_RUN(test_store_file_lock_held_by_a_stuck_process_times_out);
	TEST_RUN(test_store_file_open_checks_its_directory);
	TEST_RUN(test_store_file_value_files_are_replaced_whole);
	/* The contract's keys all became value files; nothing else is in there. */
	list_dir(store_dir, check_store_name, NULL);
	rc = TEST_DONE();
	remove_tree(root_dir);
	return rc;
}
