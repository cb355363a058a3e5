/*
 * sdk/topo/ibverbs.c - RDMA devices from libibverbs: name, netdev, PCI
 * location, and per port its state, link layer, rate and GIDs.  Built
 * without libibverbs, the node says so in rdma_note.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd_config.h"
#include "probe.h"

/* RoCE devices have 256-entry GID tables, mostly empty; more is not sane. */
#define HERD_RDMA_MAX_GIDS 256

/* Bits of ibv_port_attr.active_width and .active_speed (the IB spec's). */
static int ib_lanes(unsigned width)
{
	switch (width) {
	case 1: return 1;
	case 2: return 4;
	case 4: return 8;
	case 8: return 12;
	case 16: return 2;
	default: return 0;
	}
}

/* Per-lane data rate in tenths of Gb/s, as ibstat rounds them. */
static int ib_lane_decigbps(unsigned speed)
{
	switch (speed) {
	case 1: return 25;    /* SDR */
	case 2: return 50;    /* DDR */
	case 4: return 100;   /* QDR */
	case 8: return 100;   /* FDR10 */
	case 16: return 140;  /* FDR */
	case 32: return 250;  /* EDR */
	case 64: return 500;  /* HDR */
	case 128: return 1000; /* NDR */
	default: return 0;
	}
}

int herd__topo_ib_rate_gbps(unsigned width, unsigned speed)
{
	return ib_lanes(width) * ib_lane_decigbps(speed) / 10;
}

const char *herd__topo_ib_state_str(int state)
{
	/* enum ibv_port_state, in order. */
	static const char *const names[] = { "nop", "down", "init", "armed", "active",
					     "active_defer" };

	if (state < 0 || state >= (int)(sizeof(names) / sizeof(names[0])))
		return "unknown";
	return names[state];
}

void herd__topo_gid_format(const uint8_t raw[16], char *buf)
{
	for (int i = 0; i < 8; i++)
		snprintf(buf + i * 5, 6, "%02x%02x%s", raw[2 * i], raw[2 * i + 1], i < 7 ? ":" : "");
}

#if HERD_HAVE_IBVERBS

#include <infiniband/verbs.h>

static int rdma_compare(const void *a, const void *b)
{
	/* mlx5_2 before mlx5_10. */
	return strverscmp(((const herd_rdma_device *)a)->name,
			  ((const herd_rdma_device *)b)->name);
}

/* The netdev of the same function: the first name under device/net/. */
static void rdma_netdev(herd_rdma_device *rd)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", rd->name);
	dir = opendir(path);
	if (dir == NULL)
		return;
	while ((de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (rd->netdev[0] == '\0' || strcmp(de->d_name, rd->netdev) < 0)
			herd__strlcpy(rd->netdev, de->d_name, sizeof(rd->netdev));
	}
	closedir(dir);
}

static herd_status rdma_gids(struct ibv_context *ctx, uint8_t port, int table_len,
			     herd_rdma_port *rp)
{
	int n = table_len < HERD_RDMA_MAX_GIDS ? table_len : HERD_RDMA_MAX_GIDS;
	static const uint8_t zero[16];
	char **gids = NULL;
	char text[40];

	if (n <= 0)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&gids, (size_t)n, sizeof(*gids), "RDMA GIDs"));
	HERD_MUT(char **, rp->gids) = gids;
	/* Empty RoCE entries answer an error or zeros; both are skipped. */
	for (int i = 0; i < n; i++) {
		union ibv_gid gid;

		if (ibv_query_gid(ctx, port, i, &gid) != 0 || memcmp(gid.raw, zero, 16) == 0)
			continue;
		herd__topo_gid_format(gid.raw, text);
		HERD_CHECK(herd__strdup(&gids[rp->ngids], text));
		rp->ngids++;
	}
	return HERD_OK;
}

static herd_status rdma_ports(struct ibv_context *ctx, herd_rdma_device *rd, char **note)
{
	struct ibv_device_attr attr;
	herd_rdma_port *ports = NULL;
	int rc;

	/* The verbs queries return an errno value rather than set errno. */
	rc = ibv_query_device(ctx, &attr);
	if (rc != 0)
		return herd__topo_note_append(note, "%s: cannot read the device: %s", rd->name,
					      strerror(rc));
	HERD_CHECK(herd__calloc(&ports, attr.phys_port_cnt, sizeof(*ports), "RDMA ports"));
	HERD_MUT(herd_rdma_port *, rd->ports) = ports;
	for (int p = 1; p <= (int)attr.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		herd_rdma_port *rp = &ports[rd->nports];

		rc = ibv_query_port(ctx, (uint8_t)p, &pa);
		if (rc != 0) {
			HERD_CHECK(herd__topo_note_append(note, "%s port %d: cannot read the port: %s",
							  rd->name, p, strerror(rc)));
			continue;
		}
		rd->nports++;
		rp->port = p;
		herd__strlcpy(rp->state, herd__topo_ib_state_str(pa.state), sizeof(rp->state));
		/* Old drivers leave the link layer unspecified; that is InfiniBand. */
		herd__strlcpy(rp->link_layer,
			      pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "ethernet" : "infiniband",
			      sizeof(rp->link_layer));
		rp->rate_gbps = pa.state == IBV_PORT_ACTIVE
					? herd__topo_ib_rate_gbps(pa.active_width, pa.active_speed)
					: 0;
		HERD_CHECK(rdma_gids(ctx, (uint8_t)p, pa.gid_tbl_len, rp));
	}
	return HERD_OK;
}

static herd_status rdma_device(struct hwloc_topology *topo, struct ibv_device *dev,
			       herd_rdma_device *rd, char **note)
{
	char path[PATH_MAX], bus_id[HERD_PCI_ID_LEN];
	struct ibv_context *ctx;
	herd_status st;

	herd__strlcpy(rd->name, ibv_get_device_name(dev), sizeof(rd->name));
	rdma_netdev(rd);
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", rd->name);
	if (herd__topo_sysfs_pci_function(path, bus_id))
		herd__topo_pci_locate(topo, bus_id, &rd->pci);
	else
		herd__topo_pci_none(&rd->pci);
	/* A device this user may not open is still listed, without ports. */
	ctx = ibv_open_device(dev);
	if (ctx == NULL)
		return herd__topo_note_append(note, "%s: cannot open the device: %s", rd->name,
					      strerror(errno));
	st = rdma_ports(ctx, rd, note);
	ibv_close_device(ctx);
	return st;
}

herd_status herd__topo_probe_rdma(struct hwloc_topology *topo, herd_node *node)
{
	char **note = &HERD_MUT(char *, node->rdma_note);
	herd_rdma_device *rds = NULL;
	struct ibv_device **list;
	herd_status st = HERD_OK;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (list == NULL)
		return herd__topo_note_append(note, "RDMA unavailable: cannot list the RDMA "
					      "devices: %s", strerror(errno));
	if (n <= 0) {
		st = herd__topo_note_append(note, "RDMA unavailable: no RDMA device found");
		goto out;
	}
	HERD_CHECK_GOTO(herd__calloc(&rds, (size_t)n, sizeof(*rds), "RDMA devices"), st, out);
	HERD_MUT(herd_rdma_device *, node->rdma) = rds;
	for (int i = 0; i < n; i++) {
		node->nrdma++;
		HERD_CHECK_GOTO(rdma_device(topo, list[i], &rds[i], note), st, out);
	}
	qsort(rds, node->nrdma, sizeof(*rds), rdma_compare);
out:
	ibv_free_device_list(list);
	return st;
}

#else /* !HERD_HAVE_IBVERBS */

herd_status herd__topo_probe_rdma(struct hwloc_topology *topo, herd_node *node)
{
	return herd__topo_note_append(&HERD_MUT(char *, node->rdma_note),
				      "RDMA unavailable: libherd was built without libibverbs");
}

#endif /* HERD_HAVE_IBVERBS */
