/*
 * sdk/ckpt/agree.c - the few collectives the save and restore paths agree
 * through, which degrade to copies in a world of one rank.
 */
#include <stdlib.h>
#include <string.h>

#include "handle.h"

herd_status herd__ckpt_allgather(herd_ckpt *ck, const void *mine, void *all, size_t bytes)
{
	if (ck->comm == NULL) {
		memcpy(all, mine, bytes);
		return HERD_OK;
	}
	return herd_comm_allgather(ck->comm, mine, all, bytes, HERD_UINT8);
}

herd_status herd__ckpt_bcast(herd_ckpt *ck, void *buf, size_t bytes)
{
	if (ck->comm == NULL)
		return HERD_OK;
	return herd_comm_broadcast(ck->comm, buf, buf, bytes, HERD_UINT8, 0);
}

herd_status herd__ckpt_agree(herd_ckpt *ck, herd_status local, int *failed_rank)
{
	herd__ckpt_verdict v;
	int32_t mine = local, *all = NULL;
	const char *host = NULL;
	herd_status st;
	int f = -1;

	*failed_rank = -1;
	if (ck->comm == NULL) {
		if (local != HERD_OK)
			*failed_rank = 0;
		return local;
	}
	HERD_CHECK(herd__calloc(&all, (size_t)ck->size, sizeof(int32_t), "statuses"));
	st = herd_comm_allgather(ck->comm, &mine, all, 1, HERD_INT32);
	for (int r = 0; st == HERD_OK && r < ck->size; r++)
		if (all[r] != HERD_OK) {
			f = r;
			break;
		}
	if (st != HERD_OK || f < 0)
		goto out;
	memset(&v, 0, sizeof(v));
	if (f == ck->rank) {
		v.status = mine;
		v.rank = f;
		herd__strlcpy(v.msg, herd_last_error(), sizeof(v.msg));
	}
	st = herd_comm_broadcast(ck->comm, &v, &v, sizeof(v), HERD_UINT8, f);
	if (st != HERD_OK)
		goto out;
	*failed_rank = f;
	st = all[f];
	(void)herd_comm_host(ck->comm, f, &host);
	herd__error(st, "rank %d (host %s): %s", f, host != NULL ? host : "?", v.msg);
out:
	free(all);
	return st;
}
