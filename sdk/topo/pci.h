/*
 * sdk/topo/pci.h - PCI bus ids (pci.c), shared by the probes of sdk/topo
 * and the planner of sdk/alloc.  Internal to libherd.
 */
#ifndef HERD_TOPO_PCI_H
#define HERD_TOPO_PCI_H

#include <stdbool.h>

#include "herd/cluster.h"

/*
 * Normalizes a PCI bus id to lower-case "dddd:bb:dd.f": NVML's 8-digit
 * domain ("00000000:18:00.0") shrinks to 4 digits, a missing domain
 * ("18:00.0") is 0000.  False (out empty) when in is not a bus id.
 */
bool herd__topo_pci_normalize(const char *in, char out[HERD_PCI_ID_LEN]);

/* Orders bus ids by (domain, bus, device, function); malformed ones last. */
int herd__topo_pci_compare(const char *a, const char *b);

/*
 * The nearest PCI function at or above the device that the sysfs link path
 * resolves to (/sys/class/net/eth0/device -> its virtio device -> the PCI
 * function holding it).  False when there is none (a virtual device).
 */
bool herd__topo_sysfs_pci_function(const char *path, char out[HERD_PCI_ID_LEN]);

#endif /* HERD_TOPO_PCI_H */
