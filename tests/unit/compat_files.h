/*
 * tests/unit/compat_files.h - where the compatibility tests find the files
 * and frames that an earlier herd wrote (tests/fixtures/compat/), and where
 * their --write DIR mode puts new ones.
 */
#ifndef HERD_TESTS_COMPAT_FILES_H
#define HERD_TESTS_COMPAT_FILES_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char out_dir[2048];   /* --write: where the files go */

static void compat_path(const char *name, char *path, size_t cap)
{
	const char *root = getenv("HERD_SOURCE_DIR");

	if (out_dir[0] != '\0')
		snprintf(path, cap, "%s/%s", out_dir, name);
	else
		snprintf(path, cap, "%s/tests/fixtures/compat/%s", root ? root : ".", name);
}

/*
 * `TEST --write DIR`: new fixtures go to DIR (made if missing), *write is
 * set; false (a message said why) when DIR cannot be made.  Without it
 * the test reads the fixtures of the source tree.
 */
static bool compat_write_mode(int argc, char **argv, bool *write)
{
	*write = argc == 3 && strcmp(argv[1], "--write") == 0;
	if (!*write)
		return true;
	snprintf(out_dir, sizeof(out_dir), "%s", argv[2]);
	if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
		perror(out_dir);
		return false;
	}
	return true;
}

#endif /* HERD_TESTS_COMPAT_FILES_H */
