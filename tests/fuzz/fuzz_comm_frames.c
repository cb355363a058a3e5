/*
 * tests/fuzz/fuzz_comm_frames.c - the communicator's decoders of what
 * peers send, on arbitrary bytes.  The first byte picks one:
 *   0  the info record a rank publishes at init (herd__comm_info_parse):
 *      fails only with HERD_EFORMAT or HERD_EVERSION naming the origin;
 *      what it accepts packs and parses back to the same fields;
 *   1  a control connection's byte stream (herd__ctl_frame, and the FAILED
 *      payload): every frame lies inside the bytes, garbage is refused;
 *   2  a connection's HELLO (herd__tcp_hello_check) for a rank, size and
 *      expected peer taken from the input: what it accepts comes from a
 *      rank that may call this one;
 *   3  a message header's fingerprint as a mismatch message formats it
 *      (herd__fp_format): terminated and inside its buffer whatever the
 *      call kind, dtype and reduction claimed.
 * It must never crash, leak or hang.
 *
 *   fuzz_comm_frames -max_total_time=60 tests/fuzz/corpus/fuzz_comm_frames
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "comm/core.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_comm_frames: %s: %s\n", what, herd_last_error());
	abort();
}

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static void info(const uint8_t *data, size_t size)
{
	herd__peer *p = calloc(2, sizeof(*p));
	int64_t rank, nranks, rank2, nranks2;
	char *enc = NULL;
	size_t len = 0;
	herd_status st;

	if (p == NULL)
		return;
	st = herd__comm_info_parse(&p[0], "fuzz", data, size, &rank, &nranks);
	if (st != HERD_OK) {
		if (st != HERD_EFORMAT && st != HERD_EVERSION)
			die("unexpected status");
		if (strstr(herd_last_error(), "fuzz") == NULL)
			die("the message does not name the origin");
		free(p);
		return;
	}
	if (!terminated(p[0].host, sizeof(p[0].host)) ||
	    !terminated(p[0].boot_id, sizeof(p[0].boot_id)) ||
	    !terminated(p[0].addrs, sizeof(p[0].addrs)))
		die("an unterminated string");
	if (rank < 0 || rank > INT32_MAX || nranks < 1 || nranks > INT32_MAX || p[0].pid < 0 ||
	    p[0].streams < 1 || p[0].streams > HERD__STREAMS_MAX)
		die("a field out of range");
	if (herd__comm_info_pack(&p[0], (int)rank, (int)nranks, &enc, &len) != HERD_OK)
		die("an accepted record does not pack");
	if (herd__comm_info_parse(&p[1], "packed", enc, len, &rank2, &nranks2) != HERD_OK)
		die("a packed record does not parse");
	if (rank2 != rank || nranks2 != nranks || strcmp(p[0].host, p[1].host) != 0 ||
	    strcmp(p[0].boot_id, p[1].boot_id) != 0 || strcmp(p[0].addrs, p[1].addrs) != 0 ||
	    p[0].shm_dev != p[1].shm_dev || p[0].shm_ino != p[1].shm_ino ||
	    p[0].pidns != p[1].pidns || p[0].pid != p[1].pid || p[0].transport != p[1].transport ||
	    p[0].streams != p[1].streams)
		die("a record changed through pack and parse");
	free(enc);
	free(p);
}

static void control(const uint8_t *data, size_t size)
{
	size_t off = 0;

	/* Each frame takes at least a header: bounded by size / 8. */
	while (off < size) {
		herd__ctl_hdr h;
		const uint8_t *payload = NULL;
		long used = herd__ctl_frame(data + off, size - off, &h, &payload);

		if (used <= 0)
			return;
		if ((size_t)used > size - off || (size_t)used < sizeof(h) ||
		    payload != data + off + sizeof(h) || h.len > HERD__CTL_PAYLOAD_MAX)
			die("a frame outside the bytes");
		if (h.type == HERD__CTL_FAILED) {
			herd_status code;
			const char *text;
			int text_len;
			char msg[HERD__CTL_PAYLOAD_MAX + 64];

			if (herd__ctl_failed_parse(payload, h.len, &code, &text, &text_len)) {
				if (text < (const char *)payload || text_len < 0 ||
				    text + text_len > (const char *)payload + h.len)
					die("the message lies outside the payload");
				if (code != HERD_ETIMEDOUT && code != HERD_EMISMATCH &&
				    code != HERD_EPEER)
					die("a status a peer may not send");
				snprintf(msg, sizeof(msg), "failed first: %.*s", text_len, text);
			}
		}
		off += (size_t)used;
	}
}

static void hello(const uint8_t *data, size_t size)
{
	/* The communicator id the HELLO must carry. */
	static const uint8_t id[HERD__COMM_ID_LEN] = { 'h', 'e', 'r', 'd', 'f', 'u', 'z', 'z' };
	uint8_t nonce[HERD__AUTH_NONCE_LEN];
	int rank, size_, from, kind, want_from;

	if (size < 4)
		return;
	rank = data[0] % 8;
	size_ = data[1] % 9 + 1;
	want_from = from = (int8_t)data[2];
	kind = data[3];
	if (!herd__tcp_hello_check(data + 4, size - 4, id, rank, size_, &from, &kind, nonce))
		return;
	if (size - 4 != 64)
		die("a HELLO of the wrong length");
	if (want_from >= 0 ? from != want_from : (from <= rank || from >= size_))
		die("a HELLO from a rank that may not call");
}

static void fingerprint(const uint8_t *data, size_t size)
{
	herd__fp fp;
	char small[24], big[160];

	if (size < 8)
		return;
	memset(&fp, 0, sizeof(fp));
	fp.kind = data[0];
	fp.dtype = data[1];
	fp.redop = data[2];
	memcpy(&fp.root, data + 3, sizeof(fp.root));
	fp.seq = data[7];
	if (size >= 16)
		memcpy(&fp.count, data + 8, sizeof(fp.count));
	memset(small, 0x55, sizeof(small));
	herd__fp_format(&fp, small, sizeof(small));
	herd__fp_format(&fp, big, sizeof(big));
	if (!terminated(small, sizeof(small)) || !terminated(big, sizeof(big)))
		die("a fingerprint overran its buffer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0: info(data + 1, size - 1); break;
	case 1: control(data + 1, size - 1); break;
	case 2: hello(data + 1, size - 1); break;
	default: fingerprint(data + 1, size - 1); break;
	}
	herd_clear_error();
	return 0;
}
