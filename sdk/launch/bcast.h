/*
 * sdk/launch/bcast.h - the node side of herd_bcast (`herd bcast --receive`):
 * Internal to libherd and the herd program.
 */
#ifndef HERD_LAUNCH_BCAST_H
#define HERD_LAUNCH_BCAST_H

#include <stdint.h>

#include "herd/common.h"

/*
 * Receives a file on stdin (bytes, then its XXH3-64 as 8 bytes little
 * endian), into a temporary file beside dest, verified, renamed to dest
 * with mode; forwards the same stream to the hosts of the hostlist forward
 * (NULL: none) over ssh, each running this with no forward.  Prints one
 * line per host on stdout, "herd-bcast ok HOST" or "herd-bcast fail HOST
 * REASON", this node's HOST being ".".  HERD_OK once every line is out,
 * whatever they say; an error for bad arguments.
 */
herd_status herd__bcast_receive(const char *dest, uint64_t bytes, int mode, const char *forward,
				const char *program, int timeout_ms);

#endif /* HERD_LAUNCH_BCAST_H */
