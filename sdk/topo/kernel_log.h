/*
 * sdk/topo/kernel_log.h - the kernel log, read as herd health reads it
 * once and as telemetry reads it on and on, and the NVIDIA driver's Xid
 * records in it.  Internal to libherd.
 */
#ifndef HERD_TOPO_KERNEL_LOG_H
#define HERD_TOPO_KERNEL_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* Longest line passed on; longer ones are dropped. */
#define HERD__KLOG_LINE_MAX 8192

/*
 * An open kernel log: /dev/kmsg (every record the kernel's ring still
 * holds, then each new one), or the file HERD_KERNEL_LOG names (a saved
 * `dmesg` of a machine, or a file something appends to), from its start.
 */
typedef struct herd__klog {
	int fd;
	bool kmsg;
	size_t have;                      /* bytes of an unfinished line in buf */
	char buf[HERD__KLOG_LINE_MAX];
	char path[256];
} herd__klog;

/* Opens the log; false with why[cap] ("/dev/kmsg: Permission denied")
 * when it cannot be read.  Raises nothing. */
bool herd__klog_open(herd__klog *k, char *why, size_t cap);

/*
 * Passes each line written since the previous call to fn, without waiting
 * for more.  A file's last line without its newline waits for the next
 * call, unless final (a file read once, whole); a file that shrank is read
 * again from its start.  At most max_reads reads of the log per call (a
 * record of /dev/kmsg each, up to 8 KiB of a file): the rest waits.
 */
void herd__klog_read(herd__klog *k, void (*fn)(const char *line, void *arg), void *arg,
		     bool final, long max_reads);

/* Closes the log.  Accepts one that did not open. */
void herd__klog_close(herd__klog *k);

/*
 * The Xid of an NVIDIA driver record in a kernel log line ("NVRM: Xid
 * (PCI:0000:1b:00): 79, pid=...") for the GPU at bus_id ("0000:1b:00.0"),
 * or -1 when the line is not one of that GPU's.
 */
int herd__xid_of(const char *line, const char *bus_id);

/* What an Xid that says the GPU or its memory failed means ("GPU has
 * fallen off the bus" for 79); NULL for the others (mostly an
 * application's faults).  topo/health.c. */
const char *herd__xid_fatal(int code);
/* Whether line is an Xid record at all (a cheap test before herd__xid_of). */
bool herd__xid_line(const char *line);

#endif /* HERD_TOPO_KERNEL_LOG_H */
