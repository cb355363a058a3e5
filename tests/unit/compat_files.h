/*
 * tests/unit/compat_files.h - where the compatibility tests find the files
 * and frames that an earlier herd wrote (tests/fixtures/compat/), and where
 * their --write DIR mode puts new ones.
 */
#ifndef HERD_TESTS_COMPAT_FILES_H
#define HERD_TESTS_COMPAT_FILES_H

#include <stdio.h>
#include <stdlib.h>

static char out_dir[2048];   /* --write: where the files go */

static void compat_path(const char *name, char *path, size_t cap)
{
	const char *root = getenv("HERD_SOURCE_DIR");

	if (out_dir[0] != '\0')
		snprintf(path, cap, "%s/%s", out_dir, name);
	else
		snprintf(path, cap, "%s/tests/fixtures/compat/%s", root ? root : ".", name);
}

#endif /* HERD_TESTS_COMPAT_FILES_H */
