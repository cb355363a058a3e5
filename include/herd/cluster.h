/*
 * herd/cluster.h - discovery: what is in this node or cluster, and how it is
 * wired.
 *
 * An inventory (herd_cluster) is a list of nodes.  Each node records its CPUs,
 * NUMA nodes, memory, GPUs, network interfaces and RDMA devices, with the PCI
 * location of every device, so that the topology matrix (the legend of
 * `nvidia-smi topo -m`) can be computed for any inventory, probed or loaded.
 *
 * Inventories encode to msgpack (canonical: fixed key order, shortest
 * integer forms) and to JSON, both carrying the format version in key "v".
 */
#ifndef HERD_CLUSTER_H
#define HERD_CLUSTER_H

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the inventory format written by this library. */
#define HERD_CLUSTER_INVENTORY_VERSION 1

/* An inventory: a list of nodes.  Opaque. */
typedef struct herd_cluster herd_cluster;

#define HERD_CLUSTER_DISCOVER_OPTS_VERSION 2

/*
 * Progress of a discovery of many nodes: nodes answered, failed and still
 * pending.  Called on the discovering thread, at most every 100 ms and once
 * at the end.
 */
typedef void (*herd_cluster_discover_progress_fn)(void *userdata, size_t done,
						  size_t failed, size_t pending);

/* Options of herd_cluster_discover.  A zeroed field means its default. */
typedef struct herd_cluster_discover_opts {
	unsigned int version;       /* HERD_CLUSTER_DISCOVER_OPTS_VERSION */
	/* Load this inventory file (JSON or msgpack) instead of probing.
	 * When NULL, the file named by HERD_INVENTORY, if set, is loaded. */
	const char *inventory;
	/* Version 2: many nodes, at most one of the three. */
	const char *hosts;          /* a hostlist expression: "node[01-04]" (over ssh) */
	const char *hostfile;       /* an Open MPI / DeepSpeed hostfile's hosts (over ssh) */
	bool slurm;                 /* true: the nodes of this Slurm allocation
				     * (SLURM_JOB_NODELIST), in one srun step */
	int timeout_ms;             /* per node, from its start (0: 30 s) */
	const char *herd_program;   /* `herd` on the nodes; default $HERD_PROGRAM,
				     * else "herd" */
	herd_cluster_discover_progress_fn progress;  /* may be NULL */
	void *userdata;             /* progress's */
} herd_cluster_discover_opts;

#define HERD_CLUSTER_DISCOVER_OPTS_INIT \
	{ HERD_CLUSTER_DISCOVER_OPTS_VERSION, NULL, NULL, NULL, false, 0, NULL, NULL, NULL }

/*
 * Discovers this node (or loads opts->inventory) into *out, which the
 * caller frees with herd_cluster_free.  opts may be NULL.  Probing does not
 * fail because hardware is absent: a node without GPUs or RDMA devices says
 * why in gpu_note / rdma_note.  Blocks for the duration of the probe
 * (typically well under a second); thread-safe.  On failure *out is NULL.
 *
 * With opts->hosts, ->hostfile or ->slurm it discovers those nodes instead:
 * `herd probe` runs on every node at once (ssh: one client per node, the
 * options and HERD_SSH / HERD_SSH_ARGS of the ssh launch backend, at most
 * HERD_DISCOVER_FANOUT at a time, default 256; Slurm: one srun step with
 * one task per node, HERD_SRUN / HERD_SRUN_ARGS), each node's inventory is
 * decoded with the strict decoder and the nodes are merged, in the order
 * given, into one inventory; each node's hostname is the name it was
 * reached by.  A node that cannot be reached, runs past the timeout or
 * prints something that is not an inventory is listed among the failures
 * (herd_cluster_failure) with its reason (ssh's words, the timeout, the
 * decoder's message); the call returns HERD_OK when at least one node
 * answered, HERD_EUNAVAIL (the first reasons in the message) when none
 * did, HERD_EFORMAT for a malformed hostlist or hostfile, HERD_ENOTFOUND
 * for a hostfile that does not exist, HERD_EINVAL for one that is not a
 * regular file and for two kinds of nodes at once.  A node's answer may be
 * at most 1 MiB (an inventory is a few KiB): a node that prints more is
 * stopped there and listed among the failures, as is one that prints text
 * (a login banner) before its answer.  Every helper process it starts has
 * ended when it returns.
 */
HERD_EXTERN herd_status herd_cluster_discover(herd_cluster **out,
					      const herd_cluster_discover_opts *opts);

/*
 * The nodes a discovery could not inventory: how many, and failure i's
 * host and reason (borrowed from the cluster; HERD_EINVAL naming i and the
 * count when i is out of range, *host and *reason NULL then).  They are
 * part of the inventory: saved, loaded and encoded with it ("failed";
 * absent when there are none).
 */
HERD_EXTERN size_t herd_cluster_failure_count(const herd_cluster *cluster);
HERD_EXTERN herd_status herd_cluster_failure(const herd_cluster *cluster, size_t i,
					     const char **host, const char **reason);

/*
 * Differences between the nodes of an inventory that break or slow
 * training, each given to fn as a hostlist of the nodes concerned (those
 * that differ from the most common value; every node when there is none)
 * and a sentence: GPU model or count, a node with fewer GPUs than its
 * siblings, GPU driver, CUDA or NCCL versions, NIC speed or MTU among the
 * interfaces that are up, RDMA on some nodes only.  Returns the number of
 * warnings (0 for one node), or -1 with herd_last_error set when memory
 * runs out.
 */
typedef void (*herd_cluster_warning_fn)(void *userdata, const char *nodes, const char *message);
HERD_EXTERN long herd_cluster_check(const herd_cluster *cluster, herd_cluster_warning_fn fn,
				    void *userdata);

/* Inventory encodings. */
typedef enum herd_cluster_format {
	HERD_CLUSTER_FORMAT_AUTO = 0,       /* save: by file extension (.json), else msgpack */
	HERD_CLUSTER_FORMAT_MSGPACK = 1,
	HERD_CLUSTER_FORMAT_JSON = 2,
	/* What `herd probe --text` prints, for channels that carry lines of
	 * text (ssh, srun --label): "herd-probe 1 HOSTNAME", the msgpack
	 * encoding in base64 lines of 76 characters, "end"; each line ends in
	 * a newline.  The decoder reads it as it reads the other two. */
	HERD_CLUSTER_FORMAT_TEXT = 3
} herd_cluster_format;

/*
 * Reads an inventory file, JSON, msgpack or text (told apart by content), into
 * *out.  A malformed, truncated or hostile file gives HERD_EFORMAT (or
 * HERD_EVERSION) and a message naming the file and the offending field.
 */
HERD_EXTERN herd_status herd_cluster_load(herd_cluster **out, const char *path);

/*
 * Decodes an inventory from memory, of at most 64 MiB.  origin names the
 * data in error messages (a file name, "stdin"); may be NULL.
 */
HERD_EXTERN herd_status herd_cluster_decode(herd_cluster **out, const void *data,
					    size_t len, const char *origin);

/*
 * Encodes an inventory.  *data (freed with herd_free) receives the bytes and
 * *len their count; JSON output is indented text ending in a newline and is
 * also NUL-terminated (the NUL not counted).  An inventory that the
 * decoder would refuse (a malformed bus id, say) is not encoded: the call
 * returns HERD_EINVAL naming the field.
 */
HERD_EXTERN herd_status herd_cluster_encode(const herd_cluster *cluster,
					    herd_cluster_format format, void **data,
					    size_t *len);

/*
 * Writes an inventory file atomically (a temporary file renamed into
 * place).  HERD_CLUSTER_FORMAT_AUTO picks JSON for a name ending in ".json".
 */
HERD_EXTERN herd_status herd_cluster_save(const herd_cluster *cluster,
					  const char *path, herd_cluster_format format);

/* Frees an inventory and everything borrowed from it.  Accepts NULL. */
HERD_EXTERN void herd_cluster_free(herd_cluster *cluster);

/* Number of nodes. */
HERD_EXTERN size_t herd_cluster_node_count(const herd_cluster *cluster);

/*
 * Node i (0-based) into *node, borrowed from the cluster.  HERD_EINVAL
 * naming i and the count when i is out of range (*node NULL then).
 */
HERD_EXTERN herd_status herd_cluster_node(const herd_cluster *cluster, size_t i,
					  const herd_node **node);

#ifdef __cplusplus
}
#endif

#endif /* HERD_CLUSTER_H */
