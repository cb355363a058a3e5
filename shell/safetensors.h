/*
 * shell/safetensors.h - the safetensors format as `herd ckpt` reads it
 * (https://github.com/huggingface/safetensors): an 8-byte little-endian
 * header length N, N bytes of JSON
 *   {"__metadata__": {"k": "v"},
 *    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}}
 * then the tensors' bytes, dense, row-major and little-endian, offsets
 * counted from the end of the header.  The reader is strict as the
 * reference reader is, for files from anywhere: the header is bounded, so
 * is the number of tensors (ST_TENSORS_MAX), its JSON has no duplicate
 * keys, every entry has a known dtype, a shape whose size matches its
 * offsets, and the tensors tile the data exactly (no gap, no overlap,
 * nothing after).  Its checks take time in n log n of the tensors.
 */
#ifndef HERD_SHELL_SAFETENSORS_H
#define HERD_SHELL_SAFETENSORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "herd.h"

/* The reference reader's bound on the header. */
#define ST_HEADER_MAX (100u * 1024u * 1024u)

/*
 * herd's bound on the tensors of one file: 2^20 (1,048,576).  The largest
 * models hold some tens of thousands of tensors, spread over many files;
 * a 100 MiB header could list two million.
 */
#define ST_TENSORS_MAX (1u << 20)

/* One tensor of a safetensors file, as its header describes it. */
struct st_entry {
	const char *name;          /* borrowed from the JSON */
	herd_dtype dtype;
	int ndim;
	uint64_t shape[HERD_CKPT_MAX_DIMS];
	uint64_t begin, end;
	bool scalar;               /* shape [] in the file: saved as [1] */
};

/* A parsed safetensors file. */
struct st_file {
	const char *path;          /* what messages name */
	int fd;                    /* st_open: the file, mapped read-only */
	uint8_t *map;
	size_t size;
	json_t *header;
	struct st_entry *entries;  /* sorted by offset */
	size_t n;
	const uint8_t *data;       /* the byte buffer after the header */
	uint64_t data_len;
	char error[512];           /* why it was refused: "PATH: what" */
};

/* The file's name for dtype ("F32"), or NULL when safetensors has none. */
const char *st_dtype_name(herd_dtype dtype);

/*
 * Checks the SIZE bytes at BYTES (borrowed: they must outlive f) as a
 * safetensors file named PATH in messages.  0, or -1 with f->error set.
 * st_close(f) afterwards either way.
 */
int st_parse(struct st_file *f, const void *bytes, size_t size, const char *path);

/* Maps the file at PATH and checks it as st_parse does.  Anything but a
 * regular file (a FIFO, a device, a directory) is refused at once: "PATH
 * is a FIFO, not a regular file". */
int st_open(struct st_file *f, const char *path);

void st_close(struct st_file *f);

/*
 * A name from an untrusted file, fit for a terminal: printable ASCII as
 * is, other bytes as \xNN, at most about 80 characters.
 */
void shell_safe_name(const char *s, size_t len, char *buf, size_t cap);

#endif
