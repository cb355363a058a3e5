/*
 * sdk/topo/netdev.c - network interfaces: getifaddrs for names and IP
 * addresses, /sys/class/net for state, MTU, speed and the PCI function.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "probe.h"

int herd__topo_prefix_len(const struct sockaddr *mask)
{
	unsigned char bytes[16];
	size_t n;
	int len = 0;

	if (mask == NULL)
		return -1;
	if (mask->sa_family == AF_INET) {
		struct sockaddr_in sin;

		memcpy(&sin, mask, sizeof(sin));
		n = 4;
		memcpy(bytes, &sin.sin_addr, n);
	} else if (mask->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6;

		memcpy(&sin6, mask, sizeof(sin6));
		n = 16;
		memcpy(bytes, &sin6.sin6_addr, n);
	} else {
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		len += __builtin_popcount(bytes[i]);
	return len;
}

herd_status herd__topo_format_addr(const struct sockaddr *addr,
				   const struct sockaddr *mask, char **out)
{
	char host[INET6_ADDRSTRLEN], text[INET6_ADDRSTRLEN + 16];
	int prefix = herd__topo_prefix_len(mask);
	bool ok;

	*out = NULL;
	if (addr == NULL)
		return HERD_OK;
	if (addr->sa_family == AF_INET) {
		struct sockaddr_in sin;

		memcpy(&sin, addr, sizeof(sin));
		ok = inet_ntop(AF_INET, &sin.sin_addr, host, sizeof(host)) != NULL;
		if (prefix < 0)
			prefix = 32;
	} else if (addr->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6;

		memcpy(&sin6, addr, sizeof(sin6));
		ok = inet_ntop(AF_INET6, &sin6.sin6_addr, host, sizeof(host)) != NULL;
		if (prefix < 0)
			prefix = 128;
	} else {
		return HERD_OK;
	}
	if (!ok)
		return HERD_OK;
	snprintf(text, sizeof(text), "%s/%d", host, prefix);
	return herd__strdup(out, text);
}

static bool is_ip(const struct sockaddr *addr)
{
	return addr != NULL && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
}

static bool same_name(const struct ifaddrs *ifa, const char *name)
{
	return ifa->ifa_name != NULL && strcmp(ifa->ifa_name, name) == 0;
}

/* getifaddrs lists an interface once per address; the first one names it. */
static bool first_of_name(const struct ifaddrs *ifs, const struct ifaddrs *ifa)
{
	for (const struct ifaddrs *p = ifs; p != ifa; p = p->ifa_next)
		if (same_name(p, ifa->ifa_name))
			return false;
	return ifa->ifa_name != NULL;
}

static herd_status netdev_addrs(const struct ifaddrs *ifs, herd_netdev *nd)
{
	char **addrs = NULL;
	size_t n = 0;

	for (const struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next)
		if (same_name(ifa, nd->name) && is_ip(ifa->ifa_addr))
			n++;
	HERD_CHECK(herd__calloc(&addrs, n, sizeof(*addrs), "interface addresses"));
	HERD_MUT(char **, nd->addrs) = addrs;
	for (const struct ifaddrs *ifa = ifs; ifa != NULL && nd->naddrs < n; ifa = ifa->ifa_next) {
		if (!same_name(ifa, nd->name) || !is_ip(ifa->ifa_addr))
			continue;
		HERD_CHECK(herd__topo_format_addr(ifa->ifa_addr, ifa->ifa_netmask,
						  &addrs[nd->naddrs]));
		if (addrs[nd->naddrs] != NULL)
			nd->naddrs++;
	}
	return HERD_OK;
}

/* An integer sysfs attribute; false when unreadable or not a number. */
static bool netdev_attr(const char *name, const char *attr, long long *value)
{
	char path[PATH_MAX], line[64];
	char *end;

	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", name, attr);
	if (!herd__topo_read_line(path, line, sizeof(line)))
		return false;
	errno = 0;
	*value = strtoll(line, &end, 10);
	return end != line && errno == 0;
}

static void netdev_sysfs(struct hwloc_topology *topo, herd_netdev *nd)
{
	char path[PATH_MAX], bus_id[HERD_PCI_ID_LEN];
	long long v;

	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", nd->name);
	if (!herd__topo_read_line(path, nd->state, sizeof(nd->state)) || nd->state[0] == '\0')
		herd__strlcpy(nd->state, "unknown", sizeof(nd->state));
	nd->mtu = netdev_attr(nd->name, "mtu", &v) && v > 0 && v <= INT_MAX ? (int)v : 0;
	/* Reading speed fails (EINVAL) on a link that is down or virtual,
	 * and some drivers write -1: both mean "not said". */
	nd->speed_mbps = netdev_attr(nd->name, "speed", &v) && v >= 0 ? v : -1;
	snprintf(path, sizeof(path), "/sys/class/net/%s/device", nd->name);
	if (herd__topo_sysfs_pci_function(path, bus_id))
		herd__topo_pci_locate(topo, bus_id, &nd->pci);
	else
		herd__topo_pci_none(&nd->pci);
}

herd_status herd__topo_probe_netdevs(struct hwloc_topology *topo, herd_node *node)
{
	struct ifaddrs *ifs = NULL;
	herd_netdev *nds = NULL;
	herd_status st = HERD_OK;
	size_t n = 0;

	/* A sandbox without netlink is no reason to fail discovery. */
	if (getifaddrs(&ifs) != 0) {
		herd__log_warn("cannot list network interfaces: %s", strerror(errno));
		return HERD_OK;
	}
	for (const struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next)
		if (first_of_name(ifs, ifa))
			n++;
	HERD_CHECK_GOTO(herd__calloc(&nds, n, sizeof(*nds), "network interfaces"), st, out);
	HERD_MUT(herd_netdev *, node->netdevs) = nds;
	for (const struct ifaddrs *ifa = ifs; ifa != NULL && node->nnetdevs < n;
	     ifa = ifa->ifa_next) {
		herd_netdev *nd;

		if (!first_of_name(ifs, ifa))
			continue;
		nd = &nds[node->nnetdevs++];
		herd__strlcpy(nd->name, ifa->ifa_name, sizeof(nd->name));
		netdev_sysfs(topo, nd);
		HERD_CHECK_GOTO(netdev_addrs(ifs, nd), st, out);
	}
out:
	freeifaddrs(ifs);
	return st;
}
