/*
 * tests/fuzz/fuzz_launch_proto.c - the node protocol (`herd exec`: what a
 * node supervisor reads from its launcher, and what the launcher reads
 * from its nodes) on arbitrary bytes.  The input is read as a stream of
 * frames, each payload decoded as what its type says (a spec, or an
 * event or command), and whole, as one payload of each kind.  Nothing may
 * crash, leak or allocate beyond the protocol's limits; failures are
 * HERD_EFORMAT or HERD_EVERSION naming the protocol; and a spec that
 * decodes must encode and decode again to the same spec.
 *
 *   fuzz_launch_proto -max_total_time=60 tests/fuzz/corpus/fuzz_launch_proto
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "buf.h"
#include "launch/launch_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what)
{
	fprintf(stderr, "fuzz_launch_proto: %s: %s\n", what, herd_last_error());
	abort();
}

static void expect_failure(herd_status st)
{
	if (st != HERD_EFORMAT && st != HERD_EVERSION)
		die("a failure other than HERD_EFORMAT or HERD_EVERSION");
	if (strstr(herd_last_error(), "node protocol") == NULL)
		die("a failure that does not name the node protocol");
}

static bool same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool same_strv(char **a, char **b)
{
	size_t i = 0;

	if (a == NULL || b == NULL)
		return a == b;
	for (; a[i] != NULL && b[i] != NULL; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return a[i] == NULL && b[i] == NULL;
}

/* A decoded spec encodes and decodes again to itself. */
static void check_spec_roundtrip(const herd__node_spec *s)
{
	herd__node_spec again;
	herd__buf buf;
	size_t plen = SIZE_MAX;

	herd__buf_init(&buf, 0);
	if (herd__launch_enc_spec(&buf, s) != HERD_OK)
		die("a decoded spec does not encode");
	if (herd__launch_frame_peek(&buf, &plen) != HERD_OK || plen == SIZE_MAX)
		die("an encoded spec is not a whole frame");
	if (herd__launch_spec_decode(&again, buf.data + buf.len - plen, plen) != HERD_OK)
		die("an encoded spec does not decode");
	if (!same_str(again.job_id, s->job_id) || !same_str(again.secret, s->secret) ||
	    !same_str(again.host, s->host) || again.world_size != s->world_size ||
	    again.nranks != s->nranks || again.grace_ms != s->grace_ms ||
	    again.nsub != s->nsub || !same_strv(again.argv, s->argv) ||
	    !same_strv(again.env, s->env) ||
	    (s->nranks > 0 && memcmp(again.ranks, s->ranks, (size_t)s->nranks * sizeof(int)) != 0))
		die("a spec changed in the round trip");
	herd__node_spec_free(&again);
	herd__buf_free(&buf);
}

static void decode_spec(const uint8_t *p, size_t n)
{
	herd__node_spec s;
	herd_status st = herd__launch_spec_decode(&s, p, n);

	if (st != HERD_OK) {
		expect_failure(st);
		return;
	}
	if (s.argv == NULL || s.argv[0] == NULL || s.env == NULL || s.nranks < 1)
		die("an accepted spec without argv, env or ranks");
	check_spec_roundtrip(&s);
	herd__node_spec_free(&s);
}

static void decode_msg(const uint8_t *p, size_t n)
{
	herd__launch_msg m;
	herd_status st = herd__launch_msg_decode(&m, p, n);

	if (st != HERD_OK) {
		expect_failure(st);
		return;
	}
	(void)herd__launch_type_name(m.type);
	herd__launch_msg_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	herd__buf buf;

	herd_log_set_level(HERD_LOG_ERROR);
	herd__buf_init(&buf, 0);
	if (size > 0 && herd__buf_append(&buf, data, size) != HERD_OK)
		return 0;
	/* As a stream: each whole frame (a 4-byte length, then the payload)
	 * decoded as its type says, up to the first bad one. */
	for (int frames = 0; frames < 64; frames++) {
		size_t plen = SIZE_MAX;
		const uint8_t *p;

		if (herd__launch_frame_peek(&buf, &plen) != HERD_OK || plen == SIZE_MAX)
			break;
		p = buf.data + buf.off + 4;
		if (herd__launch_payload_type(p, plen) == HERD__LAUNCH_T_SPEC)
			decode_spec(p, plen);
		else
			decode_msg(p, plen);
		herd__buf_consume(&buf, 4 + plen);
	}
	herd__buf_free(&buf);
	/* Whole, as one payload: as a spec, and as what its type says. */
	decode_spec(data, size);
	if (herd__launch_payload_type(data, size) != HERD__LAUNCH_T_SPEC)
		decode_msg(data, size);
	return 0;
}
