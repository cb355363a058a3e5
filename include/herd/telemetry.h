/*
 * herd/telemetry.h - what a node's GPUs, CPUs, memory, network and disks
 * are doing, sampled on a period, kept in a ring, and streamed from remote
 * nodes.
 *
 * A sample is one plain struct (herd_telemetry_sample): per GPU from NVML
 * (loaded at run time, as discovery loads it: no GPU or driver leaves the
 * GPU part empty with a note), per node from /proc and /sys.  Rates
 * (CPU busy, network and disk bytes per second, PCIe and NVLink
 * throughput) are over the time since the sampler's previous sample: the
 * first sample of a sampler has them at -1 (but for PCIe throughput from a
 * driver without PCIe byte counters: NVML's own 20 ms count, there from
 * the first sample; docs/telemetry.md).  A value the source does not
 * give (a GPU without power readings, an older driver) is -1; a
 * sample never holds made-up figures.
 *
 *     herd_telemetry *t;
 *     herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
 *     o.period_ms = 1000;
 *     if (herd_telemetry_create(&t, &o) == HERD_OK && herd_telemetry_start(t) == HERD_OK) {
 *         herd_telemetry_sample *s = malloc(sizeof(*s));
 *         uint64_t seq = 0;
 *         // poll herd_telemetry_fd(t) in your loop, then:
 *         while (herd_telemetry_next(t, &seq, s) == HERD_OK)
 *             printf("%s: %d GPUs\n", s->host, s->ngpus);
 *         herd_telemetry_free(t);
 *     }
 *
 * A sampler either takes samples when asked (herd_telemetry_take, no
 * thread) or, once started, on its own thread every period_ms into a ring
 * of the last ring_size samples; each new sample makes herd_telemetry_fd
 * readable and calls the callback, if any, on the sampler's thread.
 *
 * Which process holds which GPU: NVML's list of compute and graphics
 * processes of each GPU, each named with its job and rank from its own
 * environment (HERD_JOB_ID and HERD_RANK, else SLURM_JOB_ID and
 * SLURM_PROCID, else RANK, when /proc lets this user read it) or, failing
 * that, from the GPU's lease record (herd/lease.h): job only, rank -1.
 *
 * Samples travel as msgpack maps (herd_telemetry_pack) with a "v" key;
 * herd_telemetry_unpack is the strict decoder (unknown keys ignored,
 * wrong types and out-of-range values refused with the path named).
 */
#ifndef HERD_TELEMETRY_H
#define HERD_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format version of a packed sample. */
#define HERD_TELEMETRY_FORMAT_VERSION 1

/* The most of each kind one sample holds; more are left out (and counted
 * in the sample's dropped field). */
#define HERD_TELEMETRY_MAX_GPUS 16
#define HERD_TELEMETRY_MAX_CPUS 512
#define HERD_TELEMETRY_MAX_NETS 16
#define HERD_TELEMETRY_MAX_DISKS 16
#define HERD_TELEMETRY_MAX_PROCS 64

/* A process using a GPU. */
typedef struct herd_telemetry_proc {
	int gpu;                    /* index into the sample's gpus[] */
	int64_t pid;
	int64_t mem_used;           /* bytes of GPU memory; -1: not known */
	char job[HERD_NAME_LEN];    /* herd or Slurm job id; "" when none found */
	int rank;                   /* rank in that job; -1 when none found */
	char comm[32];              /* its command name (/proc/PID/comm) */
	double late_ms;             /* while herd launch names this rank a straggler: how
				     * much later than the others' median it arrives at the
				     * job's collectives, ms (its flight recorder's mark);
				     * 0 otherwise */
} herd_telemetry_proc;

/* One GPU.  -1 in any number: the driver does not say. */
typedef struct herd_telemetry_gpu {
	int index;                  /* NVML's index */
	char uuid[HERD_NAME_LEN];
	char bus_id[HERD_PCI_ID_LEN]; /* "0000:1b:00.0" */
	char name[HERD_NAME_LEN];   /* "NVIDIA H100 80GB HBM3" */
	double util_gpu;            /* percent of the period a kernel ran (DCGM_FI_DEV_GPU_UTIL) */
	double util_mem;            /* percent of the period memory was read or written */
	int64_t mem_used;           /* bytes */
	int64_t mem_total;          /* bytes */
	double power_w;             /* watts */
	double power_limit_w;       /* the enforced limit, watts */
	int64_t energy_mj;          /* energy since the driver loaded, millijoules */
	double temp_c;              /* degrees Celsius */
	double sm_clock_mhz;
	double mem_clock_mhz;
	int64_t throttle;           /* NVML's clock event reasons, a bit mask */
	int64_t ecc_sbe;            /* corrected ECC errors, volatile, total */
	int64_t ecc_dbe;            /* uncorrected ECC errors, volatile, total */
	int64_t xid;                /* the last Xid of this GPU in the kernel log; 0: none;
				     * -1: the log cannot be read (xid_count too) */
	int64_t xid_count;          /* Xid events seen for this GPU since the sampler started */
	double pcie_tx_bps;         /* bytes per second, as NVML counts them */
	double pcie_rx_bps;
	double nvlink_tx_bps;       /* all links of the GPU together */
	double nvlink_rx_bps;
} herd_telemetry_gpu;

/* One network interface (from /proc/net/dev; loopback left out). */
typedef struct herd_telemetry_net {
	char name[HERD_NAME_LEN];
	uint64_t rx_bytes, tx_bytes;    /* counters since boot */
	double rx_bps, tx_bps;          /* over the last period; -1 on the first sample */
} herd_telemetry_net;

/* One block device (from /proc/diskstats; whole disks, no partitions). */
typedef struct herd_telemetry_disk {
	char name[HERD_NAME_LEN];
	uint64_t read_bytes, write_bytes;
	double read_bps, write_bps;
	double util;                    /* percent of the period with I/O in flight */
} herd_telemetry_disk;

/* Which parts a sampler reads (herd_telemetry_opts.parts; 0: all). */
enum {
	HERD_TELEMETRY_GPU = 1u << 0,
	HERD_TELEMETRY_CPU = 1u << 1,   /* CPU per core, load */
	HERD_TELEMETRY_MEM = 1u << 2,
	HERD_TELEMETRY_NET = 1u << 3,
	HERD_TELEMETRY_DISK = 1u << 4,
	HERD_TELEMETRY_PROCS = 1u << 5  /* GPU processes, with job and rank */
};

/* One sample of one node.  Plain data: copy it with memcpy. */
typedef struct herd_telemetry_sample {
	uint64_t seq;               /* 1, 2, ... within its sampler */
	int64_t time_ms;            /* wall clock, Unix milliseconds */
	int64_t period_ms;          /* since the previous sample; 0 on the first */
	char host[HERD_HOST_LEN];   /* the short name (up to the first '.') */
	/* CPU: the whole node and each core, percent busy; -1 on the first sample */
	double cpu_busy;
	int ncpus;
	float cpu_core[HERD_TELEMETRY_MAX_CPUS];
	double load1;               /* /proc/loadavg */
	int64_t mem_total;          /* bytes, /proc/meminfo */
	int64_t mem_available;
	int ngpus;
	herd_telemetry_gpu gpus[HERD_TELEMETRY_MAX_GPUS];
	char gpu_note[128];         /* why there are no GPUs ("NVIDIA driver not found ...") */
	int nprocs;
	herd_telemetry_proc procs[HERD_TELEMETRY_MAX_PROCS];
	int nnets;
	herd_telemetry_net nets[HERD_TELEMETRY_MAX_NETS];
	int ndisks;
	herd_telemetry_disk disks[HERD_TELEMETRY_MAX_DISKS];
	int dropped;                /* items past the caps above, left out */
} herd_telemetry_sample;

/* A sampler.  Opaque. */
typedef struct herd_telemetry herd_telemetry;

/* Called on the sampler's thread with each new sample (borrowed for the call). */
typedef void (*herd_telemetry_fn)(void *userdata, const herd_telemetry_sample *sample);

#define HERD_TELEMETRY_OPTS_VERSION 1

/* Options of a sampler.  A zeroed field means its default. */
typedef struct herd_telemetry_opts {
	unsigned int version;       /* HERD_TELEMETRY_OPTS_VERSION */
	int period_ms;              /* between samples once started; default 1000, at least 10 */
	size_t ring_size;           /* samples kept; default 300 */
	unsigned parts;             /* HERD_TELEMETRY_* bits; 0: all */
	herd_telemetry_fn callback; /* may be NULL */
	void *userdata;
	const char *lease_dir;      /* for the GPU processes' jobs; NULL: herd_lease_dir's */
} herd_telemetry_opts;

#define HERD_TELEMETRY_OPTS_INIT { HERD_TELEMETRY_OPTS_VERSION, 0, 0, 0, NULL, NULL, NULL }

/*
 * A sampler of this node.  Opens NVML when GPUs are asked for (no NVML is
 * not an error: samples say why in gpu_note).  Starts no thread.  Free
 * with herd_telemetry_free.
 */
HERD_EXTERN herd_status herd_telemetry_create(herd_telemetry **out, const herd_telemetry_opts *opts);

/*
 * Takes a sample now into *out (rates since this sampler's previous
 * sample) and puts it in the ring.  Not with a started sampler (HERD_EINVAL).
 * Blocks for the reads only: well under a millisecond for /proc, and per
 * GPU NVML's queries, a few milliseconds, or some 40 ms where the driver
 * has no PCIe byte counters and NVML's throughput query samples for 20 ms
 * in each direction.
 */
HERD_EXTERN herd_status herd_telemetry_take(herd_telemetry *t, herd_telemetry_sample *out);

/* Starts the sampler's thread: a sample at once, then every period_ms. */
HERD_EXTERN herd_status herd_telemetry_start(herd_telemetry *t);

/*
 * A descriptor readable while a sample newer than the last one
 * herd_telemetry_next returned waits in the ring; poll it, do not read it.
 * It follows one reader: with several readers of next (each with its own
 * *seq), one that catches up clears it for all; others poll with a
 * timeout, or share one reader's samples.
 */
HERD_EXTERN int herd_telemetry_fd(const herd_telemetry *t);

/*
 * The oldest sample in the ring with seq greater than *seq, into *out;
 * *seq becomes its seq.  HERD_ENOTFOUND when there is none yet (a sample
 * overwritten in the ring is skipped: out->seq tells how many).
 * Thread-safe; never blocks.
 */
HERD_EXTERN herd_status herd_telemetry_next(herd_telemetry *t, uint64_t *seq,
					    herd_telemetry_sample *out);

/* The newest sample into *out; HERD_ENOTFOUND when there is none yet. */
HERD_EXTERN herd_status herd_telemetry_latest(herd_telemetry *t, herd_telemetry_sample *out);

/*
 * Stops the thread (if started) without waiting out its period, closes
 * NVML, frees.  Accepts NULL.  From the callback too: the thread then
 * frees the sampler as the callback returns.  A thread stuck in a read of
 * its sources (an NVML call on a GPU that fell off the bus, a /proc file
 * of a process stuck in the kernel) is waited for 5 s at most: then free
 * returns, says so at warning level, and the thread frees the sampler
 * when the read returns, calling the callback no more.  A callback under
 * way is waited for.
 */
HERD_EXTERN void herd_telemetry_free(herd_telemetry *t);

/*
 * The sample as a msgpack map into *buf (malloc, the caller frees) of *len
 * bytes: equal samples give equal bytes.
 */
HERD_EXTERN herd_status herd_telemetry_pack(const herd_telemetry_sample *s, void **buf,
					    size_t *len);

/* A packed sample back into *out; HERD_EFORMAT or HERD_EVERSION with the path named. */
HERD_EXTERN herd_status herd_telemetry_unpack(const void *buf, size_t len,
					      herd_telemetry_sample *out);

/*
 * The sample as one line of JSON (no newline) into *out (malloc, the
 * caller frees), keys as herd_telemetry_pack writes them.  HERD_EFORMAT for
 * a counter above INT64_MAX, which has no JSON form here.
 */
HERD_EXTERN herd_status herd_telemetry_json(const herd_telemetry_sample *s, char **out);

/* ---- streams from many nodes ---------------------------------------------- */

/*
 * A watch: the samples of many nodes as they come, for a live view (herd
 * top) or a job's report (herd launch --monitor).
 *
 * Every node runs `herd probe --watch --period MS` (started as discovery
 * starts `herd probe`: over ssh, one client per node, with the ssh launch
 * backend's options and HERD_SSH / HERD_SSH_ARGS; in a Slurm allocation
 * one srun step with a task per node, HERD_SRUN / HERD_SRUN_ARGS), which
 * samples its node every period and writes each sample on its stdout as a
 * record (herd_telemetry_record).  The watch decodes every record with
 * herd_telemetry_unpack and queues the samples for the caller, each with
 * its host set to the node's name as the watch reached it (the hostlist's
 * "node07", "127.0.0.2"), so that the host says which node it is.  With no
 * nodes named it watches this node, with a sampler in this process (no
 * herd program is run).
 *
 *     herd_telemetry_watch *w;
 *     herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
 *     o.hosts = "node[01-04]";
 *     o.period_ms = 1000;
 *     if (herd_telemetry_watch_start(&w, &o) == HERD_OK) {
 *         herd_telemetry_sample *s = malloc(sizeof(*s));
 *         while (herd_telemetry_watch_live(w) > 0) {
 *             // or poll herd_telemetry_watch_fd(w) in your own loop
 *             herd_telemetry_watch_wait(w, HERD_TIMEOUT_NONE);
 *             while (herd_telemetry_watch_next(w, NULL, s) == HERD_OK)
 *                 printf("%s: CPU %.0f%%\n", s->host, s->cpu_busy);
 *             // herd_telemetry_watch_node(w, i, &n) says how node i fares
 *         }
 *         herd_telemetry_watch_free(w);
 *     }
 *
 * Each node is in one state (herd_telemetry_node_state): starting until
 * its first sample, then streaming; a node that fails stays failed, with
 * the reason in words: unreachable (ssh or srun could not reach it: ssh's
 * own words), not started (no first sample within start_timeout_ms, or
 * herd probe ended before one: its exit status and last words), stalled
 * (no sample for stall_ms after one: a node that stops sending is given up
 * at that deadline, never waited on), ended (its stream ended: herd probe
 * exited, the channel closed) or bad record (something that is not a
 * sample: the decoder's message).  A stalled or bad node's helper is
 * stopped at once; the other nodes stream on.
 *
 * Rate and memory are bounded: period_ms is at least 100; the queue holds
 * at most queue samples (their packed bytes, a few KiB each), the oldest
 * dropped when a new one finds it full; a node that falls behind its
 * watcher drops samples itself.  Every sample lost on the way is counted
 * in its node's lost (from the gaps in seq and the drops here).
 *
 * Threads: the watch runs the remote-run engine (ssh and srun clients,
 * their deadlines) on a thread of its own, started by
 * herd_telemetry_watch_start and joined by herd_telemetry_watch_free, with
 * every signal blocked; the helpers it starts get SIGTERM if that thread
 * dies (a crash of the process included).  All the calls below but free
 * are thread-safe.
 */

/* How a node of a watch fares.  From UNREACHABLE on, a node has failed for good. */
typedef enum herd_telemetry_node_state {
	HERD_TELEMETRY_NODE_STARTING = 0,   /* its helper is starting; no sample yet */
	HERD_TELEMETRY_NODE_STREAMING,      /* samples come */
	HERD_TELEMETRY_NODE_UNREACHABLE,    /* ssh or srun could not reach it or run herd there */
	HERD_TELEMETRY_NODE_NOT_STARTED,    /* no first sample by the start deadline */
	HERD_TELEMETRY_NODE_STALLED,        /* no sample for stall_ms after one */
	HERD_TELEMETRY_NODE_ENDED,          /* its stream ended while watched */
	HERD_TELEMETRY_NODE_BAD_RECORD      /* it sent something that is not a sample */
} herd_telemetry_node_state;

/* The state's name: "starting", "streaming", "unreachable", "not started",
 * "stalled", "ended", "bad record"; "?" for another value. */
HERD_EXTERN const char *herd_telemetry_node_state_name(herd_telemetry_node_state state);

/* One node of a watch, as herd_telemetry_watch_node copies it. */
typedef struct herd_telemetry_node {
	const char *host;           /* as reached; the watch's, valid until free */
	herd_telemetry_node_state state;
	char why[512];              /* a failed node's reason: "ssh: connect to host ...",
				     * "no sample within 30 s", "herd probe exited 127: ..." */
	uint64_t samples;           /* samples received from it */
	uint64_t lost;              /* its samples that did not reach the queue's reader:
				     * gaps in seq, and dropped from a full queue */
	int64_t last_ms;            /* time_ms of its last sample (its clock); 0: none yet */
} herd_telemetry_node;

/* A watch.  Opaque. */
typedef struct herd_telemetry_watch herd_telemetry_watch;

#define HERD_TELEMETRY_WATCH_OPTS_VERSION 1

/* Options of a watch.  A zeroed field means its default. */
typedef struct herd_telemetry_watch_opts {
	unsigned int version;       /* HERD_TELEMETRY_WATCH_OPTS_VERSION */
	/* The nodes, at most one of the three (none: this node, in process). */
	const char *hosts;          /* a hostlist expression: "node[01-04]" (over ssh) */
	const char *hostfile;       /* an Open MPI / DeepSpeed hostfile's hosts (over ssh) */
	bool slurm;                 /* the nodes of this Slurm allocation (SLURM_JOB_NODELIST),
				     * in one srun step */
	int period_ms;              /* between samples; default 1000, at least 100 */
	int start_timeout_ms;       /* per node, from its start to its first sample (0: 30 s) */
	int stall_ms;               /* a streaming node silent this long has stalled
				     * (0: three periods and 2 s) */
	size_t queue;               /* most samples waiting for the caller (0: 64 and 4 a node) */
	const char *herd_program;   /* `herd` on the nodes; default $HERD_PROGRAM, else "herd" */
} herd_telemetry_watch_opts;

#define HERD_TELEMETRY_WATCH_OPTS_INIT \
	{ HERD_TELEMETRY_WATCH_OPTS_VERSION, NULL, NULL, false, 0, 0, 0, 0, NULL }

/*
 * Starts watching the nodes of opts (NULL: this node, every second) into
 * *out, freed with herd_telemetry_watch_free.  Returns once the nodes are
 * resolved and their helpers are being started; it does not wait for
 * samples.  HERD_EINVAL for a bad option (named: a period under 100 ms,
 * two kinds of nodes at once), HERD_EFORMAT for a malformed hostlist or
 * hostfile, HERD_ENOTFOUND for a hostfile that does not exist, HERD_EUNAVAIL
 * outside a Slurm allocation with slurm set; nothing is left running then
 * and *out is NULL.  A node that cannot be reached is not an error of the
 * call: its state says so.
 */
HERD_EXTERN herd_status herd_telemetry_watch_start(herd_telemetry_watch **out,
						   const herd_telemetry_watch_opts *opts);

/*
 * A descriptor readable while a sample waits in the queue or a node's
 * state has changed since herd_telemetry_watch_next last returned
 * HERD_ENOTFOUND: poll it, do not read or close it (the watch's).
 */
HERD_EXTERN int herd_telemetry_watch_fd(const herd_telemetry_watch *w);

/*
 * The oldest queued sample into *out, from node *node (an index into the
 * watch's nodes; node may be NULL); its host is the node's name as
 * reached.  HERD_ENOTFOUND when none waits (then read the nodes' states:
 * the descriptor is readable again at the next change).  Never blocks.
 */
HERD_EXTERN herd_status herd_telemetry_watch_next(herd_telemetry_watch *w, size_t *node,
						  herd_telemetry_sample *out);

/*
 * Waits until herd_telemetry_watch_fd is readable, at most timeout_ms
 * (common.h's meaning; HERD_TIMEOUT_DEFAULT waits as HERD_TIMEOUT_NONE).
 * HERD_OK, or HERD_ETIMEDOUT.
 */
HERD_EXTERN herd_status herd_telemetry_watch_wait(herd_telemetry_watch *w, int timeout_ms);

/* The watch's nodes, in the order given (one, this node, without hosts). */
HERD_EXTERN size_t herd_telemetry_watch_nodes(const herd_telemetry_watch *w);

/* Node i's state, host and counts into *out; HERD_EINVAL for i out of range. */
HERD_EXTERN herd_status herd_telemetry_watch_node(herd_telemetry_watch *w, size_t i,
						  herd_telemetry_node *out);

/* The nodes starting or streaming: 0 once every node has failed. */
HERD_EXTERN size_t herd_telemetry_watch_live(herd_telemetry_watch *w);

/*
 * Stops the watch and frees it.  Every helper's stdin is closed first, so
 * that each `herd probe --watch` sees its end of input and exits 0 by
 * itself; those still there after 2 s (a node gone silent) are ended
 * (SIGTERM to ssh or srun, SIGKILL half a second later) and reaped: free
 * returns within 4 s whatever the nodes do.  Accepts NULL.
 */
HERD_EXTERN void herd_telemetry_watch_free(herd_telemetry_watch *w);

/*
 * The record formats of `herd probe --watch` (herd_agent_telemetry_watch
 * writes them, a watch reads the first two):
 *   FRAME  a 4-byte big-endian length, then herd_telemetry_pack's msgpack
 *          map (its "v" the format version) of that many bytes, at most
 *          HERD_TELEMETRY_RECORD_MAX: the default, over ssh;
 *   TEXT   the same map as lines for channels that carry lines (srun
 *          --label): "herd-telemetry 1", the map in base64 lines of 76
 *          characters, "end", each line ending in a newline;
 *   JSON   herd_telemetry_json's line and a newline, for people and tools.
 */
typedef enum herd_telemetry_record {
	HERD_TELEMETRY_RECORD_FRAME = 0,
	HERD_TELEMETRY_RECORD_TEXT = 1,
	HERD_TELEMETRY_RECORD_JSON = 2
} herd_telemetry_record;

/* The most bytes of one packed sample in a record. */
#define HERD_TELEMETRY_RECORD_MAX (1u << 20)

#ifdef __cplusplus
}
#endif

#endif /* HERD_TELEMETRY_H */
