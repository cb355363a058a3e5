/*
 * herd/node.h - one machine of an inventory: its CPUs, NUMA nodes, memory,
 * GPUs, network interfaces and RDMA devices, with the PCI location of every
 * device, and the topology matrix between its GPUs and NICs (the legend of
 * `nvidia-smi topo -m`), computed for any node, probed or loaded.
 *
 * The structs below are read-only views: every pointer in them is owned by
 * the herd_cluster they came from (herd/cluster.h) and lives as long as it.
 * Callers never allocate them; new fields are only ever appended.  They
 * are named for what they are (herd_gpu, herd_netdev, herd_link), as the
 * other headers' calls take them too.
 */
#ifndef HERD_NODE_H
#define HERD_NODE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HERD_PCI_ID_LEN 16     /* "0000:18:00.0" and its NUL */
#define HERD_PCI_MAX_SWITCHES 8
#define HERD_NAME_LEN 64       /* interface, device and UUID strings */
#define HERD_HOST_LEN 256      /* a host name (Linux allows 64 characters, DNS 253) */

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

/* The link between two devices of a node: its kind and, for NVLink, how
 * many links it bonds. */
typedef struct herd_link {
	herd_link_kind kind;
	int nvlinks;                /* the # of NV#, 0 otherwise */
} herd_link;

#define HERD_NODE_LINK_CODE_LEN 8

/*
 * The matrix code of a link ("X", "NV18", "PIX", "SYS"), written into buf
 * (HERD_NODE_LINK_CODE_LEN bytes); returns buf.
 */
HERD_EXTERN const char *herd_node_link_code(herd_link link, char buf[HERD_NODE_LINK_CODE_LEN]);

/* The link between GPUs i and j of a node (0-based). */
HERD_EXTERN herd_status herd_node_gpu_link(const herd_node *node, size_t i,
					   size_t j, herd_link *out);

/*
 * The NICs of the topology matrix: the node's RDMA devices when it has
 * any, else its netdevs that sit on a PCI function.
 */
HERD_EXTERN size_t herd_node_nic_count(const herd_node *node);

/*
 * NIC j of the matrix: its name and PCI location, borrowed from the node
 * (name or pci may be NULL when not wanted).  HERD_EINVAL naming j and the
 * count when j is out of range.
 */
HERD_EXTERN herd_status herd_node_nic(const herd_node *node, size_t j,
				      const char **name,
				      const herd_pci_loc **pci);

/* The link between GPU i and matrix NIC j of a node (0-based). */
HERD_EXTERN herd_status herd_node_gpu_nic_link(const herd_node *node, size_t gpu,
					       size_t nic, herd_link *out);

#ifdef __cplusplus
}
#endif

#endif /* HERD_NODE_H */
