/*
 * herd/cluster.h - discovery: what is in this node or cluster, and how it is
 * wired.
 *
 * An inventory (herd_cluster) is a list of nodes.  Each node records its CPUs,
 * NUMA nodes, memory, GPUs, network interfaces and RDMA devices, with the PCI
 * location of every device, so that the topology matrix (the legend of
 * `nvidia-smi topo -m`) can be computed for any inventory, probed or loaded.
 *
 * The structs below are read-only views: every pointer in them is owned by
 * the herd_cluster they came from and lives as long as it.  Callers never
 * allocate them; new fields are only ever appended.
 *
 * Inventories encode to msgpack (canonical: fixed key order, shortest
 * integer forms) and to JSON, both carrying the format version in key "v".
 */
#ifndef HERD_CLUSTER_H
#define HERD_CLUSTER_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the inventory format written by this library. */
#define HERD_INVENTORY_VERSION 1

#define HERD_PCI_ID_LEN 16     /* "0000:18:00.0" and its NUL */
#define HERD_PCI_MAX_SWITCHES 8
#define HERD_NAME_LEN 64       /* interface, device and UUID strings */

/* Where a PCI device sits, as far as the topology matrix needs it. */
typedef struct herd_pci_loc {
	/* "dddd:bb:dd.f", lower-case hex; empty for a device with no PCI
	 * function (a virtual interface). */
	char bus_id[HERD_PCI_ID_LEN];
	/* The PCI host bridge (root complex) above the device, as
	 * "dddd:bb" of its root bus; two devices under one host bridge
	 * are at most PHB apart. */
	char host_bridge[HERD_PCI_ID_LEN];
	/* NUMA node the device is attached to, -1 when unknown. */
	int numa_node;
	/* PCIe switches between the host bridge and the device, outermost
	 * first, each named by the bus id of its upstream port. */
	int nswitches;
	char switches[HERD_PCI_MAX_SWITCHES][HERD_PCI_ID_LEN];
} herd_pci_loc;

/* A direct NVLink connection from one GPU to another GPU. */
typedef struct herd_nvlink {
	char peer_bus_id[HERD_PCI_ID_LEN]; /* the peer GPU's PCI bus id */
	int links;                         /* number of links to it */
} herd_nvlink;

/* A GPU.  Keyed by uuid and PCI bus id, never by an index. */
typedef struct herd_gpu {
	char uuid[HERD_NAME_LEN];   /* "GPU-8f2c...", as NVML and CUDA print it */
	char name[96];              /* "NVIDIA H100 80GB HBM3" */
	herd_pci_loc pci;
	uint64_t memory_bytes;
	int cc_major, cc_minor;     /* compute capability, 0.0 when unknown */
	/* Links into an NVSwitch fabric: every two GPUs that both have some
	 * reach each other over NVLink with min(a, b) links. */
	int nvswitch_links;
	size_t nnvlinks;            /* direct GPU-GPU links */
	const herd_nvlink *nvlinks;
	int ecc;                    /* ECC mode: 1 on, 0 off, -1 unknown */
	/* PCIe link now and at most (generation, lanes); 0 when unknown.  A
	 * GPU at rest may train its link down to save power: compare widths. */
	int pcie_gen, pcie_width, pcie_max_gen, pcie_max_width;
} herd_gpu;

/* A network interface (a netdev, as `ip link` lists them). */
typedef struct herd_netdev {
	char name[HERD_NAME_LEN];   /* "eth0", "ibp24s0" */
	char state[16];             /* operstate: "up", "down", "unknown", ... */
	int mtu;
	int64_t speed_mbps;         /* -1 when the driver does not say */
	size_t naddrs;
	const char *const *addrs;   /* "10.0.0.5/24", "fe80::1/64" */
	herd_pci_loc pci;           /* bus_id empty for virtual interfaces */
} herd_netdev;

/* One port of an RDMA device. */
typedef struct herd_rdma_port {
	int port;                   /* 1-based port number */
	char state[16];             /* "active", "down", "init", ... */
	char link_layer[16];        /* "infiniband", "ethernet" */
	int rate_gbps;              /* active width x speed, 0 when down */
	size_t ngids;
	const char *const *gids;    /* non-zero GIDs, "fe80:0000:...:0001" */
} herd_rdma_port;

/* An RDMA device (libibverbs). */
typedef struct herd_rdma_device {
	char name[HERD_NAME_LEN];   /* "mlx5_0" */
	char netdev[HERD_NAME_LEN]; /* the netdev of the same function, or "" */
	herd_pci_loc pci;
	size_t nports;
	const herd_rdma_port *ports;
} herd_rdma_device;

/* A NUMA node and the CPUs local to it. */
typedef struct herd_numa_node {
	int os_index;
	uint64_t memory_bytes;
	const char *cpus;           /* CPU list as Linux prints it: "0-15,32-47" */
} herd_numa_node;

/* One machine. */
typedef struct herd_node {
	const char *hostname;
	const char *cpu_model;      /* "" when unknown */
	int packages, cores, threads;
	uint64_t memory_bytes;      /* total */
	uint64_t memory_available_bytes; /* at the time of the probe */
	size_t nnuma;
	const herd_numa_node *numa;
	size_t ngpus;
	const herd_gpu *gpus;       /* in PCI bus id order */
	/* Why GPUs are absent or incomplete ("NVIDIA driver not found: ..."),
	 * NULL when there is nothing to say (also when a file omits it). */
	const char *gpu_note;
	size_t nnetdevs;
	const herd_netdev *netdevs;
	size_t nrdma;
	const herd_rdma_device *rdma;
	/* Why RDMA devices are absent, NULL when there is nothing to say
	 * (also when a file omits it). */
	const char *rdma_note;
	/* The NVIDIA driver's version ("580.95.05"), NULL when there is none
	 * or it is unknown (also when a file omits it). */
	const char *gpu_driver;
	/* On a node with GPUs: the CUDA version its driver supports ("13.0")
	 * and the NCCL a process there loads (libnccl.so.2 from the library
	 * path, "2.28.9"); NULL when unknown or absent. */
	const char *cuda_driver;
	const char *nccl;
} herd_node;

/* An inventory: a list of nodes.  Opaque. */
typedef struct herd_cluster herd_cluster;

#define HERD_DISCOVER_OPTS_VERSION 2

/*
 * Progress of a discovery of many nodes: nodes answered, failed and still
 * pending.  Called on the discovering thread, at most every 100 ms and once
 * at the end.
 */
typedef void (*herd_discover_progress_fn)(void *userdata, size_t done, size_t failed,
					  size_t pending);

/* Options of herd_cluster_discover.  A zeroed field means its default. */
typedef struct herd_discover_opts {
	unsigned int version;       /* HERD_DISCOVER_OPTS_VERSION */
	/* Load this inventory file (JSON or msgpack) instead of probing.
	 * When NULL, the file named by HERD_INVENTORY, if set, is loaded. */
	const char *inventory;
	/* Version 2: many nodes, at most one of the three. */
	const char *hosts;          /* a hostlist expression: "node[01-04]" (over ssh) */
	const char *hostfile;       /* an Open MPI / DeepSpeed hostfile's hosts (over ssh) */
	int slurm;                  /* non-zero: the nodes of this Slurm allocation
				     * (SLURM_JOB_NODELIST), in one srun step */
	int timeout_ms;             /* per node, from its start (0: 30 s) */
	const char *herd_program;   /* `herd` on the nodes; default $HERD_PROGRAM,
				     * else "herd" */
	herd_discover_progress_fn progress;  /* may be NULL */
	void *userdata;             /* progress's */
} herd_discover_opts;

#define HERD_DISCOVER_OPTS_INIT { HERD_DISCOVER_OPTS_VERSION, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL }

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
 * did, HERD_EFORMAT for a malformed hostlist or hostfile, HERD_EINVAL for
 * two kinds of nodes at once.  Every helper process it starts has ended
 * when it returns.
 */
HERD_EXTERN herd_status herd_cluster_discover(herd_cluster **out,
					      const herd_discover_opts *opts);

/*
 * The nodes a discovery could not inventory: how many, and failure i's
 * host and reason (borrowed from the cluster).  They are part of the
 * inventory: saved, loaded and encoded with it ("failed"; absent when
 * there are none).
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
typedef enum herd_format {
	HERD_FORMAT_AUTO = 0,       /* save: by file extension (.json), else msgpack */
	HERD_FORMAT_MSGPACK = 1,
	HERD_FORMAT_JSON = 2,
	/* What `herd probe --text` prints, for channels that carry lines of
	 * text (ssh, srun --label): "herd-probe 1 HOSTNAME", the msgpack
	 * encoding in base64 lines of 76 characters, "end"; each line ends in
	 * a newline.  The decoder reads it as it reads the other two. */
	HERD_FORMAT_TEXT = 3
} herd_format;

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
					    herd_format format, void **data,
					    size_t *len);

/*
 * Writes an inventory file atomically (a temporary file renamed into
 * place).  HERD_FORMAT_AUTO picks JSON for a name ending in ".json".
 */
HERD_EXTERN herd_status herd_cluster_save(const herd_cluster *cluster,
					  const char *path, herd_format format);

/* Frees an inventory and everything borrowed from it.  Accepts NULL. */
HERD_EXTERN void herd_cluster_free(herd_cluster *cluster);

/* Number of nodes. */
HERD_EXTERN size_t herd_cluster_node_count(const herd_cluster *cluster);

/* Node i (0-based), borrowed from the cluster; NULL when out of range. */
HERD_EXTERN const herd_node *herd_cluster_node(const herd_cluster *cluster,
					       size_t i);

/* How two devices are connected, in the legend of `nvidia-smi topo -m`. */
typedef enum herd_link_kind {
	HERD_LINK_SELF = 0,   /* X: the same device */
	HERD_LINK_NVLINK = 1, /* NV#: a bonded set of # NVLinks */
	HERD_LINK_PIX = 2,    /* through at most one PCIe switch */
	HERD_LINK_PXB = 3,    /* through several PCIe switches, no host bridge */
	HERD_LINK_PHB = 4,    /* through a PCIe host bridge (the CPU) */
	HERD_LINK_NODE = 5,   /* between host bridges within one NUMA node */
	HERD_LINK_SYS = 6     /* across the interconnect between NUMA nodes */
} herd_link_kind;

typedef struct herd_link {
	herd_link_kind kind;
	int nvlinks;                /* the # of NV#, 0 otherwise */
} herd_link;

#define HERD_LINK_STR_LEN 8

/*
 * Writes the matrix code of a link ("X", "NV18", "PIX", "SYS") into buf
 * and returns buf.
 */
HERD_EXTERN const char *herd_link_str(herd_link link, char buf[HERD_LINK_STR_LEN]);

/* The link between GPUs i and j of a node (0-based). */
HERD_EXTERN herd_status herd_node_gpu_link(const herd_node *node, size_t i,
					   size_t j, herd_link *out);

/*
 * The NICs of the topology matrix: the node's RDMA devices when it has
 * any, else its netdevs that sit on a PCI function.
 */
HERD_EXTERN size_t herd_node_nic_count(const herd_node *node);

/* NIC j of the matrix: its name and PCI location, borrowed from the node. */
HERD_EXTERN herd_status herd_node_nic(const herd_node *node, size_t j,
				      const char **name,
				      const herd_pci_loc **pci);

/* The link between GPU i and matrix NIC j of a node (0-based). */
HERD_EXTERN herd_status herd_node_gpu_nic_link(const herd_node *node, size_t gpu,
					       size_t nic, herd_link *out);

#define HERD_GPU_VERSIONS_LEN 256

/*
 * Hostlist expressions, as Slurm writes them ("node[01-04,07]",
 * "a[1-2]b[3-4]", "login,gpu[1-2]"; a range keeps the width of its low
 * end: "[08-10]" is 08 09 10).  herd_hostlist_expand gives the names in
 * order, duplicates kept, as one block freed with herd_free (*names points
 * at n strings inside it); HERD_EFORMAT with the column of what is wrong,
 * also beyond 65536 names.  herd_hostlist_compress writes names back as
 * `scontrol show hostlist` does, order kept, so that Slurm and
 * herd_hostlist_expand read them back: neighbouring names that differ in
 * their trailing number share a bracket, a number one above the last
 * continues a range when both are unpadded or have the range's padded
 * width ("n[08-10]", "n[9-11]", "n[09,010]"), a name with text after its
 * number stays whole (*expr freed with herd_free); HERD_EINVAL naming a
 * name an expression cannot hold.  Beyond Slurm, expand also takes text
 * after a bracket ("node[1-2]-ib").
 */
HERD_EXTERN herd_status herd_hostlist_expand(const char *expr, char ***names, size_t *n);
HERD_EXTERN herd_status herd_hostlist_compress(const char *const *names, size_t n,
					       char **expr);

/*
 * The GPU software of this machine as libherd sees it, one line for
 * people: the CUDA toolkit and NCCL libherd was built with and the driver
 * found at run time, e.g. "built with CUDA 13.0.88 and NCCL 2.28.9; driver
 * 580.159.04 (CUDA 13.0)", "built with CUDA 13.0.88 and NCCL 2.28.9;
 * NVIDIA driver not found (...)" or "built without CUDA, without NCCL;
 * ...".  Writes into buf and returns it.
 */
HERD_EXTERN const char *herd_gpu_versions(char buf[HERD_GPU_VERSIONS_LEN]);

#ifdef __cplusplus
}
#endif

#endif /* HERD_CLUSTER_H */
