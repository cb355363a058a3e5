/*
 * sdk/base/base.h - internal helpers every module of libherd uses: raising
 * errors, propagating them, logging.  Not part of the public API.
 */
#ifndef HERD_BASE_H
#define HERD_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "herd/common.h"

#define HERD_PRINTF(fmt_idx, arg_idx) \
	__attribute__((format(printf, fmt_idx, arg_idx)))

/*
 * Records a message for herd_last_error() on the calling thread and returns
 * code, so that a failure is raised in one statement:
 *     return herd__error(HERD_EFORMAT, "%s: field \"gpus\": expected an array", path);
 */
herd_status herd__error(herd_status code, const char *fmt, ...) HERD_PRINTF(2, 3);

/* Like herd__error, with ": <strerror(err)>" appended. */
herd_status herd__error_errno(herd_status code, int err, const char *fmt, ...)
	HERD_PRINTF(3, 4);

/*
 * Prefixes the current thread's error message with more context
 * ("loading x.json: " + message) and returns code unchanged.
 */
herd_status herd__error_wrap(herd_status code, const char *fmt, ...) HERD_PRINTF(2, 3);

/*
 * The one check of a public options struct's version: 1 .. what this
 * library knows (a struct newer than the library is refused, not misread).
 * HERD_EINVAL naming the call, the struct and the macro that initializes
 * it.  NAME names the macros: COMM_OPTS for HERD_COMM_OPTS_VERSION and
 * HERD_COMM_OPTS_INIT.
 */
#define HERD__CHECK_VERSION(fn, p, type, NAME)                                           \
	HERD_CHECK(herd__check_version((fn), #type, (p)->version, HERD_##NAME##_VERSION, \
				       "HERD_" #NAME "_INIT"))
herd_status herd__check_version(const char *fn, const char *type, unsigned int version,
				unsigned int max, const char *init);

/* The one check of a timeout argument (common.h): 0 or more,
 * HERD_TIMEOUT_NONE or HERD_TIMEOUT_DEFAULT; HERD_EINVAL naming fn. */
herd_status herd__check_timeout(const char *fn, int timeout_ms);

/* Return the status of expr from the calling function when it fails. */
#define HERD_CHECK(expr)                                  \
	do {                                              \
		herd_status herd_check_st_ = (expr);      \
		if (herd_check_st_ != HERD_OK)            \
			return herd_check_st_;            \
	} while (0)

/* Store the status of expr in st and jump to label when it fails. */
#define HERD_CHECK_GOTO(expr, st, label)      \
	do {                                  \
		(st) = (expr);                \
		if ((st) != HERD_OK)          \
			goto label;           \
	} while (0)

/* The HERD_* environment variables and their readers (herd__param_*). */
#include "param.h"

/* Logging to stderr, filtered by herd_log_get_level(). */
void herd__log(herd_log_level level, const char *fmt, ...) HERD_PRINTF(2, 3);
#define herd__log_error(...) herd__log(HERD_LOG_ERROR, __VA_ARGS__)
#define herd__log_warn(...) herd__log(HERD_LOG_WARN, __VA_ARGS__)
#define herd__log_info(...) herd__log(HERD_LOG_INFO, __VA_ARGS__)
#define herd__log_debug(...) herd__log(HERD_LOG_DEBUG, __VA_ARGS__)

/* Allocation that raises HERD_ENOMEM (with what for) instead of returning NULL. */
herd_status herd__calloc(void *out_ptr, size_t n, size_t size, const char *what);

/* strdup that raises HERD_ENOMEM. s may be NULL (then *out is NULL). */
herd_status herd__strdup(char **out, const char *s);

/*
 * A library loaded at run time (the NVIDIA driver, NVML, NCCL): its entry
 * points by name into the function pointers of a struct, at each one's
 * offset.  herd__dl_open loads lib (dlopen, RTLD_NOW | RTLD_LOCAL) and
 * fills api; it returns the handle, or NULL with why saying what is
 * missing (dlerror's text, or "LIB lacks SYMBOL") when the
 * library or a required symbol is absent.  Optional symbols left NULL.
 */
typedef struct herd__dl_symbol {
	const char *name;
	size_t offset;
	bool required;
} herd__dl_symbol;

#define HERD__DL_SYM(type, fn, field, required) { #fn, offsetof(type, field), required }

void *herd__dl_open(const char *lib, const herd__dl_symbol *syms, size_t n, void *api,
		    char *why, size_t cap);

/* Frees the calling thread's dlerror state (glibc keeps it until the
 * thread ends, which a thread still ending as the process exits never
 * does): after a dlopen or dlsym that failed. */
void herd__dl_forget(void);

/* The NCCL that device collectives load, and that discovery reports. */
#define HERD_NCCL_LIBRARY "libnccl.so.2"

/* A formatted string in memory of its own (free), or NULL when memory
 * runs out. */
char *herd__vformat(const char *fmt, va_list ap);

/* Copies src into dst[cap], truncating; always NUL-terminates. */
void herd__strlcpy(char *dst, const char *src, size_t cap);

/*
 * Reads a whole file into a fresh buffer (NUL-terminated, the NUL not
 * counted in *len).  Refuses files larger than max_len with HERD_EFORMAT,
 * and anything but a regular file (a FIFO, a device, a directory) with
 * HERD_EIO at once: opening never waits for a writer.
 */
herd_status herd__read_file(const char *path, size_t max_len, char **out, size_t *len);

/*
 * A job's secret from a file (a Kubernetes Secret mounted as one, named
 * by HERD_JOB_SECRET_FILE): 64 hex digits, a newline after them allowed,
 * into out (cap at least 65).  HERD_EINVAL naming the variable when path
 * is NULL or empty, and the file when it cannot be read or holds
 * something else.
 */
herd_status herd__read_secret_file(const char *path, char *out, size_t cap);

/* "a FIFO", "a directory", "a character device"... for a st_mode, in
 * messages that say why a path is not the regular file expected. */
const char *herd__file_kind(unsigned int mode);

/*
 * HERD_OK when path does not exist or is a regular file, which a new file
 * may replace by rename; HERD_EINVAL naming what it is (a device, a FIFO,
 * a symbolic link, a directory) otherwise: that is never replaced.
 */
herd_status herd__check_replaceable(const char *path);

/*
 * Writes data to path atomically: a temporary file beside it (created
 * anew with mode, less the umask; never through a link), fsync, rename,
 * fsync of the directory.  Refuses a path that herd__check_replaceable
 * refuses; HERD_ENOTFOUND when path's directory does not exist, HERD_EIO
 * for other failures to write.
 */
herd_status herd__write_file_atomic(const char *path, const void *data, size_t len,
				    mode_t mode);
/* The same without the fsyncs: a reader sees the old file or the whole
 * new one, but a crash may lose both; for scratch rewritten often. */
herd_status herd__write_file_scratch(const char *path, const void *data, size_t len,
				     mode_t mode);

/* Whether id is a job id, usable as one path component: 1 to 63
 * characters, no '/', not starting with '.'.  HERD_EINVAL saying so. */
herd_status herd__check_job_id(const char *id);

/*
 * mkdir -p with mode for the directories it creates: dir and those above
 * it; what exists already stays as it is.  HERD_EIO naming the directory
 * that could not be made, or dir when it exists and is not a directory;
 * HERD_EINVAL for an empty or overlong path.
 */
herd_status herd__mkdirs(const char *dir, mode_t mode);

/* fsync of a directory, so that renames and creations in it are durable. */
herd_status herd__fsync_dir(const char *dir);

/*
 * A growing NUL-terminated string.  herd__text_printf remembers the first
 * failure (out of memory) rather than making every call checked;
 * herd__text_take raises it.  A zeroed herd__text is empty and ready.
 */
typedef struct herd__text {
	char *s;
	size_t len, cap;
	bool failed;
} herd__text;

void herd__text_printf(herd__text *t, const char *fmt, ...) HERD_PRINTF(2, 3);

/* Hands the string over (*out, malloc'ed) or raises HERD_ENOMEM. */
herd_status herd__text_take(herd__text *t, char **out);

void herd__text_free(herd__text *t);

/*
 * A JSON object (jansson's json_t) written into out as block-style YAML
 * (sdk/base/yaml.c): mappings and sequences in blocks, strings
 * double-quoted.  HERD_EINVAL for a document that is not an object,
 * HERD_ENOMEM.
 */
struct json_t;
herd_status herd__yaml(const struct json_t *doc, herd__text *out);

#endif /* HERD_BASE_H */
