/*
 * tests/unit/ckpt_test_files.h - what the checkpoint tests do to files
 * under their directory: flip a byte of one (corruption a checksum must
 * catch) and capture what a call writes on stderr (its warnings).
 */
#ifndef HERD_TESTS_CKPT_TEST_FILES_H
#define HERD_TESTS_CKPT_TEST_FILES_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

/* Flips one byte of a file at off (from the end when negative). */
static inline void ckpt_test_flip_byte(const char *path, long off)
{
	int fd = open(path, O_RDWR);
	struct stat sb;
	uint8_t c = 0;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	if (off < 0 && fstat(fd, &sb) == 0)
		off += (long)sb.st_size;
	CHECK(pread(fd, &c, 1, off) == 1);
	c ^= 0x5a;
	CHECK(pwrite(fd, &c, 1, off) == 1);
	close(fd);
}

/* Runs fn with stderr captured into buf, through dir/stderr.txt. */
static inline void ckpt_test_capture_stderr(const char *dir, void (*fn)(void *), void *arg,
					    char *buf, size_t cap)
{
	char path[300];
	int saved = dup(2), fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr.txt", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && saved >= 0);
	if (fd < 0 || saved < 0) {
		buf[0] = '\0';
		return;
	}
	fflush(stderr);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, cap - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
}

#endif
