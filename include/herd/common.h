/*
 * herd/common.h - the error model, versions and memory rules shared by every
 * part of libherd.
 *
 * Every fallible function returns a herd_status: HERD_OK (0) on success, a
 * negative code otherwise.  The code says what kind of failure it was; the
 * message from herd_last_error() says what a person needs to act on it (which
 * file, host, rank, key or value, and what was expected instead).
 */
#ifndef HERD_COMMON_H
#define HERD_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HERD_STATIC) || !defined(__GNUC__)
#define HERD_EXTERN
#else
#define HERD_EXTERN __attribute__((visibility("default")))
#endif

/* Version of the headers; herd_version() gives that of the library. */
#define HERD_VERSION_MAJOR 0
#define HERD_VERSION_MINOR 1
#define HERD_VERSION_PATCH 0
#define HERD_VERSION_STRING "0.1.0"
#define HERD_VERSION_NUMBER \
	(HERD_VERSION_MAJOR * 10000 + HERD_VERSION_MINOR * 100 + HERD_VERSION_PATCH)

/*
 * The status codes, from one list: X(NAME, value, description).
 * Values are stable once released; new codes are appended.
 */
#define HERD_STATUS_MAP(X)                                                    \
	X(OK, 0, "success")                                                   \
	X(EINVAL, -1, "invalid argument")                                     \
	X(ENOMEM, -2, "out of memory")                                        \
	X(EIO, -3, "input/output error")                                      \
	X(EFORMAT, -4, "malformed data")                                      \
	X(EVERSION, -5, "unsupported format version")                         \
	X(ENOTFOUND, -6, "not found")                                         \
	X(EUNAVAIL, -7, "not available on this system")                       \
	X(ESYS, -8, "system call failed")                                     \
	X(ETIMEDOUT, -9, "deadline expired")                                  \
	X(EPEER, -10, "peer failed")                                          \
	X(EMISMATCH, -11, "mismatched calls between ranks")                   \
	X(ENORESOURCE, -12, "request cannot be satisfied")                    \
	X(EABORTED, -13, "operation aborted")                                 \
	X(EAUTH, -14, "authentication failed")                                \
	X(ECLOSED, -15, "connection closed")                                  \
	X(EEXIST, -16, "already exists")                                      \
	X(EBUSY, -17, "resource busy")                                        \
	X(EINTERNAL, -18, "internal error")                                   \
	X(ENODEV, -19, "no usable GPU")                                       \
	X(ECORRUPT, -20, "data exists but does not verify")

typedef enum herd_status {
#define HERD_STATUS_ENUM_(name, value, desc) HERD_##name = (value),
	HERD_STATUS_MAP(HERD_STATUS_ENUM_)
#undef HERD_STATUS_ENUM_
} herd_status;

/*
 * The code's name as written in C ("HERD_ETIMEDOUT").  Never NULL;
 * unknown codes give "HERD_UNKNOWN".  Thread-safe, static storage.
 */
HERD_EXTERN const char *herd_status_name(herd_status status);

/*
 * What a status code means, in a few words for people ("deadline
 * expired"), as the description column of HERD_STATUS_MAP.  Never NULL;
 * unknown codes give "unknown status".  Thread-safe, static storage.
 */
HERD_EXTERN const char *herd_status_describe(herd_status status);

/*
 * The message of the last error raised on the calling thread: what was wrong
 * and where.  Never NULL (empty when no error has been raised).  The string
 * belongs to the thread and stays valid until the thread's next herd call
 * that fails.  A successful call does not clear it.
 */
HERD_EXTERN const char *herd_last_error(void);

/* Forgets the calling thread's last error message. */
HERD_EXTERN void herd_clear_error(void);

/* The library's version string ("0.1.0"); static storage. */
HERD_EXTERN const char *herd_version(void);

/*
 * herd's settings: the HERD_* environment variables that libherd reads,
 * each with its type, default and meaning in one table (`herd help env`
 * prints it).  herd_env_get gives the value of setting name ("HERD_SSH")
 * as the environment holds it: NULL when unset (an empty string when set
 * empty), and NULL with HERD_EINVAL's message for a name that is not one
 * of herd's settings.  The string belongs to the environment.  Thread-safe
 * as getenv is.
 */
HERD_EXTERN const char *herd_env_get(const char *name);

/* The table of herd's settings as `herd help env` prints it, in a fresh
 * string the caller frees with herd_free; NULL when out of memory. */
HERD_EXTERN char *herd_env_table(void);

/*
 * Frees memory that a herd function handed to the caller as a plain buffer
 * (for example the bytes of herd_cluster_encode).  Accepts NULL.
 */
HERD_EXTERN void herd_free(void *ptr);

/*
 * The timeout of a call that waits, in milliseconds, the same in every
 * header: 0 looks once and does not wait, a positive count waits at most
 * that long, and the two sentinels below.  (In an options struct, 0 means
 * the default, as every zeroed field does.)
 */
#define HERD_TIMEOUT_NONE (-1)      /* wait without a deadline */
#define HERD_TIMEOUT_DEFAULT (-2)   /* the deadline the object was given at its start */

/*
 * Parses a size in bytes: digits, an optional fraction, then an optional
 * unit in any case: B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB, TiB, all
 * powers of 1024 ("1.5G" is 1610612736 bytes; a fraction of a byte is
 * dropped).  HERD_EINVAL naming text for anything else, or for more than
 * 2^64 - 1 bytes.
 */
HERD_EXTERN herd_status herd_size_parse(const char *text, uint64_t *bytes);

/*
 * Parses a duration: a number of seconds, more than 0, with an optional
 * unit: s, m (minutes), h or d ("90m" is 5400, "8h" 28800).  HERD_EINVAL
 * naming text for anything else.
 */
HERD_EXTERN herd_status herd_duration_parse(const char *text, double *seconds);

/*
 * Whether a new file may be written at path: HERD_OK when nothing is there
 * or a regular file is; HERD_EINVAL, naming path and what it is, for
 * anything else (a directory, a device, a FIFO, a socket, a symbolic
 * link), which herd_file_write never replaces.  For a program that takes
 * an output path: checked when the path is given, before the work whose
 * result it is to hold.  Thread-safe.
 */
HERD_EXTERN herd_status herd_file_check(const char *path);

/*
 * Writes len bytes of data to path as herd writes every result file: a
 * new temporary file beside path (created with mode less the umask),
 * fsync'd and renamed over path, then the directory fsync'd, so that a
 * reader sees the old file or the whole new one.  Refuses what
 * herd_file_check refuses; never writes through a link, into a device or
 * a FIFO, nor into the bytes of another name of the same file (a hard link
 * keeps them).  path's directory must exist (else HERD_ENOTFOUND) and be
 * writable; HERD_EIO naming the file when it cannot be written (nothing is
 * left beside path then).  Blocks on the disk only; thread-safe for
 * distinct paths.
 */
HERD_EXTERN herd_status herd_file_write(const char *path, const void *data, size_t len,
					unsigned int mode);

/* Log levels for HERD_LOG=error|warn|info|debug (default warn). */
typedef enum herd_log_level {
	HERD_LOG_ERROR = 0,
	HERD_LOG_WARN = 1,
	HERD_LOG_INFO = 2,
	HERD_LOG_DEBUG = 3
} herd_log_level;

/*
 * Sets the level of the messages libherd writes to stderr, overriding
 * HERD_LOG.  Thread-safe.  libherd never writes to stdout.
 */
HERD_EXTERN void herd_log_set_level(herd_log_level level);

/* The level in force: herd_log_set_level's, else HERD_LOG's, else WARN. */
HERD_EXTERN herd_log_level herd_log_get_level(void);

#ifdef __cplusplus
}
#endif

#endif /* HERD_COMMON_H */
