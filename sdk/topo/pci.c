/*
 * sdk/topo/pci.c - PCI bus ids: parsing, the canonical form, their order,
 * and the PCI function behind a sysfs device, for the probes of sdk/topo
 * and the planner of sdk/alloc.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pci.h"

/* Reads 1 to max_digits hex digits at *p; advances *p past them. */
static bool parse_hex(const char **p, int max_digits, unsigned long *value)
{
	const char *s = *p;
	unsigned long v = 0;
	int n = 0;

	for (; n < max_digits; n++, s++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		v = v * 16 + (unsigned long)d;
	}
	if (n == 0)
		return false;
	*p = s;
	*value = v;
	return true;
}

/* domain:bus:dev.fn, the domain optional; false for anything else. */
static bool pci_parse(const char *in, unsigned long f[4])
{
	const char *p = in;
	unsigned long a, b;

	if (in == NULL || !parse_hex(&p, 8, &a) || *p++ != ':' || !parse_hex(&p, 2, &b))
		return false;
	if (*p == ':') {
		p++;
		f[0] = a;
		f[1] = b;
		if (!parse_hex(&p, 2, &f[2]))
			return false;
	} else {
		/* "bb:dd.f": what was read as domain and bus are bus and device. */
		if (a > 0xff)
			return false;
		f[0] = 0;
		f[1] = a;
		f[2] = b;
	}
	if (*p++ != '.' || !parse_hex(&p, 1, &f[3]) || *p != '\0')
		return false;
	/* 7 domain digits is what fits HERD_PCI_ID_LEN; Linux uses up to 5. */
	return f[0] <= 0xfffffff && f[2] <= 0x1f && f[3] <= 7;
}

bool herd__topo_pci_normalize(const char *in, char out[HERD_PCI_ID_LEN])
{
	unsigned long f[4];

	out[0] = '\0';
	if (!pci_parse(in, f))
		return false;
	snprintf(out, HERD_PCI_ID_LEN, "%04lx:%02lx:%02lx.%lx", f[0], f[1], f[2], f[3]);
	return true;
}

int herd__topo_pci_compare(const char *a, const char *b)
{
	unsigned long fa[4], fb[4];
	bool oka = pci_parse(a, fa), okb = pci_parse(b, fb);

	if (oka != okb)
		return oka ? -1 : 1;
	if (!oka)
		return strcmp(a ? a : "", b ? b : "");
	for (int i = 0; i < 4; i++)
		if (fa[i] != fb[i])
			return fa[i] < fb[i] ? -1 : 1;
	return 0;
}

/* A directory name that is a PCI function the kernel knows. */
static bool is_pci_function(const char *name, char out[HERD_PCI_ID_LEN])
{
	char path[PATH_MAX];

	/* sysfs names functions in the canonical form, so anything else
	 * ("pci0000:00", "virtio2", "net") is not one. */
	if (!herd__topo_pci_normalize(name, out) || strcmp(out, name) != 0)
		return false;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", name);
	return access(path, F_OK) == 0;
}

bool herd__topo_sysfs_pci_function(const char *path, char out[HERD_PCI_ID_LEN])
{
	char *real = realpath(path, NULL);
	char *slash;
	bool found = false;

	out[0] = '\0';
	if (real == NULL)
		return false;
	while (!found && (slash = strrchr(real, '/')) != NULL && slash != real) {
		found = is_pci_function(slash + 1, out);
		*slash = '\0';
	}
	free(real);
	if (!found)
		out[0] = '\0';
	return found;
}
