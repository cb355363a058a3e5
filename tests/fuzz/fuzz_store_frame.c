/*
 * libFuzzer target: bytes as a store connection would receive them.
 *
 * The input is read twice: as a stream of frames, split under the limit
 * before authentication and the one after, each payload decoded and
 * checked as a request, as the server does; and whole, as one payload.
 * Nothing may crash, leak, read out of bounds or allocate beyond what the
 * input's size justifies.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base.h"
#include "store/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use_message(const herd__store_msg *m)
{
	volatile size_t sink = 0;

	if (herd__store_request_check(m) == HERD_OK) {
		sink += m->key.n + m->val.n;
		for (size_t i = 0; i < m->nkeys; i++)
			sink += herd__store_msg_item(m->keys, i).n;
	}
	for (size_t i = 0; i < m->nmissing; i++)
		sink += herd__store_msg_item(m->missing, i).n;
	(void)herd__store_type_name(m->type);
	(void)sink;
}

static void decode_payload(const uint8_t *p, size_t n)
{
	herd__store_msg m;

	if (herd__store_msg_decode(&m, p, n) != HERD_OK)
		return;
	use_message(&m);
	herd__store_msg_free(&m);
}

static void split_frames(const uint8_t *data, size_t size, size_t limit)
{
	herd__buf b = { 0 };

	/* Fed in two pieces, as reads would deliver them. */
	for (size_t piece = 0; piece < 2; piece++) {
		size_t from = piece == 0 ? 0 : size / 2, to = piece == 0 ? size / 2 : size;

		if (herd__buf_append(&b, data + from, to - from) != HERD_OK)
			break;
		for (int frames = 0; frames < 1024; frames++) {
			size_t n;

			if (herd__store_frame_peek(&b, limit, &n) != HERD_OK) {
				herd__buf_free(&b);
				return;
			}
			if (n == SIZE_MAX)
				break;
			decode_payload(b.data + b.off + 4, n);
			herd__buf_consume(&b, 4 + n);
		}
	}
	herd__buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char quoted[64];

	herd_log_set_level(HERD_LOG_ERROR);
	split_frames(data, size, HERD__STORE_FRAME_MAX_PREAUTH);
	split_frames(data, size, HERD__STORE_FRAME_MAX);
	if (size > 0)
		decode_payload(data, size);
	herd__store_quote(quoted, sizeof(quoted), data, size);
	return 0;
}
