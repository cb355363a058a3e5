/*
 * sdk/comm/bootstrap.c - a job's store when the engine that started the
 * ranks (srun, mpirun, torchrun with its agent's store) names none: every
 * rank derives the same address, ports and secret from what the engine
 * gave it, rank 0 serves there and the others find it.
 *
 *   host    given by the caller (the first node of the Slurm step, rank 0's
 *           host, MASTER_ADDR); rank 0 listens on every address, or on
 *           127.0.0.1 when the host is 127.0.0.1
 *   ports   HERD__BOOT_PORTS consecutive ports from one derived from the
 *           job's tag ("slurm:JOB.STEP"); rank 0 takes the first it can
 *           bind, the others try each in turn until one authenticates
 *   secret  HMAC-SHA256(key, tag): key is what the engine shares with the
 *           job's ranks only, or else the user's secret file
 *           (~/.herd/secret, 0600 in a 0700 directory, created on first
 *           use), which every node of a cluster with shared home
 *           directories reads alike
 *
 * A port another program holds is passed over (it refuses, or cannot
 * prove the secret); so is another job's store, whose secret differs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/hmac.h>

#include "base.h"
#include "bootstrap.h"
#include "net.h"
#include "auth.h"

#define SECRET_BYTES 32
#define PORT_LO 20000
#define PORT_SPAN 40000

/* FNV-1a: the same port on every rank for the same tag. */
static uint32_t tag_hash(const char *tag)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)tag; *p != '\0'; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

int herd__boot_port(const char *tag, int k)
{
	return PORT_LO + (int)((tag_hash(tag) + (uint32_t)k) % PORT_SPAN);
}

static void hex(char *out, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static herd_status secret_path(char *path, size_t cap)
{
	const char *home = getenv("HOME");
	struct passwd *pw;

	if (home == NULL || home[0] == '\0') {
		pw = getpwuid(getuid());
		home = pw != NULL ? pw->pw_dir : NULL;
	}
	if (home == NULL || home[0] == '\0')
		return herd__error(HERD_EINVAL, "no home directory (HOME is not set) for the "
				   "user's secret file; set HERD_JOB_SECRET on every rank");
	if ((size_t)snprintf(path, cap, "%s/.herd/secret", home) >= cap)
		return herd__error(HERD_EINVAL, "HOME=%s is too long", home);
	return HERD_OK;
}

/* Reads the secret file: a regular file of this user that nobody else can read. */
static herd_status secret_read(const char *path, char *out, size_t cap)
{
	struct stat sb;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "%s", path);
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != getuid() ||
	    (sb.st_mode & 077) != 0) {
		close(fd);
		return herd__error(HERD_EINVAL, "%s: expected a regular file of user %u that "
				   "only its owner can read (chmod 600); it keeps other users "
				   "out of this user's jobs", path, (unsigned)getuid());
	}
	got = read(fd, out, cap - 1);
	close(fd);
	if (got < 16)
		return herd__error(HERD_EFORMAT, "%s: expected at least 16 bytes of secret, "
				   "found %zd", path, got < 0 ? (ssize_t)0 : got);
	out[got] = '\0';
	return HERD_OK;
}

/* Creates the file with a fresh secret unless another process was first
 * (link(2) does not replace, on NFS too). */
static herd_status secret_create(const char *path)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 400], host[256], text[2 * SECRET_BYTES + 2];
	unsigned char raw[SECRET_BYTES];
	herd_status st = HERD_OK;
	char *slash;
	int fd;

	herd__strlcpy(dir, path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return herd__error_errno(HERD_EIO, errno, "creating %s", dir);
	HERD_CHECK(herd__auth_random(raw, SECRET_BYTES));
	hex(text, raw, SECRET_BYTES);
	strcat(text, "\n");
	/* Unique across the nodes that share the home directory. */
	if (gethostname(host, sizeof(host)) != 0)
		herd__strlcpy(host, "host", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(tmp, sizeof(tmp), "%s.tmp-%s-%ld", path, host, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return herd__error_errno(HERD_EIO, errno, "creating %s", tmp);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) || fsync(fd) != 0)
		st = herd__error_errno(HERD_EIO, errno, "writing %s", tmp);
	close(fd);
	if (st == HERD_OK && link(tmp, path) != 0 && errno != EEXIST)
		st = herd__error_errno(HERD_EIO, errno, "creating %s", path);
	unlink(tmp);
	return st;
}

static herd_status user_key(char *out, size_t cap)
{
	char path[PATH_MAX];
	herd_status st;

	HERD_CHECK(secret_path(path, sizeof(path)));
	st = secret_read(path, out, cap);
	if (st != HERD_ENOTFOUND)
		return st;
	HERD_CHECK(secret_create(path));
	return secret_read(path, out, cap);
}

herd_status herd__boot_secret(const char *shared_key, const char *tag, char *out, size_t cap)
{
	char key[512];
	unsigned char mac[32];
	unsigned int len = sizeof(mac);

	if (cap < 2 * sizeof(mac) + 1)
		return herd__error(HERD_EINVAL, "herd__boot_secret: buffer too small");
	if (shared_key != NULL && shared_key[0] != '\0')
		herd__strlcpy(key, shared_key, sizeof(key));
	else
		HERD_CHECK(user_key(key, sizeof(key)));
	if (HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)tag, strlen(tag),
		 mac, &len) == NULL)
		return herd__error(HERD_EINTERNAL, "HMAC-SHA256 of the job's tag failed");
	hex(out, mac, sizeof(mac));
	return HERD_OK;
}

herd_status herd__boot_serve(herd_store_server **out, const herd__boot *b)
{
	herd_store_server_opts sv = HERD_STORE_SERVER_OPTS_INIT;
	herd_status st = HERD_OK;

	sv.host = strcmp(b->host, "127.0.0.1") == 0 ? "127.0.0.1" : "0.0.0.0";
	sv.secret = b->secret;
	for (int k = 0; k < HERD__BOOT_PORTS; k++) {
		sv.port = herd__boot_port(b->tag, k);
		st = herd_store_server_start(out, &sv);
		if (st == HERD_OK)
			return HERD_OK;
	}
	return herd__error_wrap(st, "rank 0 cannot host the job's store on any of ports %d "
				"to %d (derived from \"%s\"); the last said: ",
				herd__boot_port(b->tag, 0),
				herd__boot_port(b->tag, HERD__BOOT_PORTS - 1), b->tag);
}

herd_status herd__boot_connect(herd_store **out, const herd__boot *b, int timeout_ms,
			       char *addr, size_t cap)
{
	int64_t deadline = herd__net_deadline(timeout_ms);
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	char last[512] = "nothing answered";
	int try_ms = 300;

	*out = NULL;
	so.secret = b->secret;
	so.timeout_ms = timeout_ms;
	/* Short tries first, so that a port that is not rank 0's (silent,
	 * another job's) does not hold up the next; longer each round, so
	 * that a slow rank 0 (a loaded node) still gets through. */
	for (;; try_ms = try_ms < 2500 ? 2 * try_ms : 5000) {
		for (int k = 0; k < HERD__BOOT_PORTS; k++) {
			int left = herd__net_remaining_ms(deadline);
			herd_status st;

			if (left <= 0)
				return herd__error(HERD_ETIMEDOUT, "no store of this job answered "
						   "at %s, ports %d to %d (derived from \"%s\"; "
						   "rank 0 hosts it) within %d ms; last: %s",
						   b->host, herd__boot_port(b->tag, 0),
						   herd__boot_port(b->tag, HERD__BOOT_PORTS - 1),
						   b->tag, timeout_ms, last);
			if (strchr(b->host, ':') != NULL)
				snprintf(addr, cap, "[%s]:%d", b->host, herd__boot_port(b->tag, k));
			else
				snprintf(addr, cap, "%s:%d", b->host, herd__boot_port(b->tag, k));
			so.connect_timeout_ms = left < try_ms ? left : try_ms;
			st = herd_store_connect(out, addr, &so);
			if (st == HERD_OK)
				return HERD_OK;
			if (st == HERD_EINVAL)
				return st;
			snprintf(last, sizeof(last), "%s", herd_last_error());
		}
	}
}
