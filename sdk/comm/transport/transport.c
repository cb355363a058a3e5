/*
 * sdk/comm/transport/transport.c - the table of transports that the core
 * goes through (transport.h), naming none itself.  A new transport
 * (ibverbs) is a folder beside these and a row here.
 */
#include <stddef.h>

#include "comm/core.h"

/* In the order of preference: a pair takes the first that can connect it. */
const herd__transport *const herd__transports[] = {
	&herd__shm_transport,       /* ranks of one host */
	&herd__tcp_transport,       /* any pair; and every pair's control connection */
	&herd__nccl_transport,      /* device memory, through an NCCL communicator */
	NULL,
};
