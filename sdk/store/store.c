/*
 * sdk/store/store.c - herd_store: argument checks, key prefixes and
 * timeouts in front of the backends (TCP client, file store).
 */
#include <limits.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "base.h"

#define DEFAULT_TIMEOUT_MS 300000

struct herd_store {
	herd__store_backend *backend;  /* shared with prefix handles */
	char *prefix;                  /* "" for a root handle */
	size_t prefix_len;
};

herd_status herd__store_opts_resolve(const herd_store_opts *opts, herd_store_opts *out)
{
	herd_store_opts defaults = HERD_STORE_OPTS_INIT;

	if (opts == NULL)
		opts = &defaults;
	HERD__CHECK_VERSION("herd_store", opts, herd_store_opts, STORE_OPTS);
	if (opts->timeout_ms < 0 || opts->connect_timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_store_opts: negative timeout (%d ms, "
				   "connect %d ms)", opts->timeout_ms, opts->connect_timeout_ms);
	*out = *opts;
	if (out->timeout_ms == 0)
		out->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (out->connect_timeout_ms == 0)
		out->connect_timeout_ms = out->timeout_ms;
	return HERD_OK;
}

static herd_status wrap_backend(herd_store **out, herd__store_backend *b)
{
	herd_store *s;
	herd_status st = herd__calloc(&s, 1, sizeof(*s), "a store handle");

	if (st == HERD_OK)
		st = herd__strdup(&s->prefix, "");
	if (st != HERD_OK) {
		free(s);
		b->ops->destroy(b);
		return st;
	}
	atomic_init(&b->refs, 1);
	s->backend = b;
	*out = s;
	return HERD_OK;
}

herd_status herd_store_connect(herd_store **out, const char *address,
			       const herd_store_opts *opts)
{
	herd__store_backend *b;
	herd_store_opts o;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_store_connect: out is NULL");
	*out = NULL;
	HERD_CHECK(herd__store_opts_resolve(opts, &o));
	if (address == NULL) {
		address = herd__param_str(HERD__P_STORE);
		if (address == NULL)
			return herd__error(HERD_EINVAL, "no store address given and HERD_STORE "
					   "is not set");
	}
	HERD_CHECK(herd__store_tcp_connect(&b, address, &o));
	b->timeout_ms = o.timeout_ms;
	return wrap_backend(out, b);
}

herd_status herd__store_local_addr(const herd_store *s, char *addr, size_t cap)
{
	if (s->backend->ops->local_addr == NULL)
		return herd__error(HERD_EUNAVAIL, "the store has no network connection");
	return s->backend->ops->local_addr(s->backend, addr, cap);
}

herd_status herd_store_open_file(herd_store **out, const char *dir, const herd_store_opts *opts)
{
	herd__store_backend *b;
	herd_store_opts o;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_store_open_file: out is NULL");
	*out = NULL;
	if (dir == NULL || dir[0] == '\0')
		return herd__error(HERD_EINVAL, "herd_store_open_file: no directory given");
	HERD_CHECK(herd__store_opts_resolve(opts, &o));
	HERD_CHECK(herd__store_file_open(&b, dir, &o));
	b->timeout_ms = o.timeout_ms;
	return wrap_backend(out, b);
}

herd_status herd_store_prefix(herd_store **out, herd_store *parent, const char *prefix)
{
	herd_store *s;
	size_t n;

	if (out == NULL || parent == NULL || prefix == NULL)
		return herd__error(HERD_EINVAL, "herd_store_prefix: out, parent and prefix must "
				   "not be NULL");
	*out = NULL;
	n = strlen(prefix);
	if (parent->prefix_len + n >= HERD_STORE_KEY_MAX)
		return herd__error(HERD_EINVAL, "store prefix of %zu bytes leaves no room for keys "
				   "(at most %d bytes in all)", parent->prefix_len + n,
				   HERD_STORE_KEY_MAX);
	HERD_CHECK(herd__calloc(&s, 1, sizeof(*s), "a store handle"));
	s->prefix = malloc(parent->prefix_len + n + 1);
	if (s->prefix == NULL) {
		free(s);
		return herd__error(HERD_ENOMEM, "out of memory copying a store prefix");
	}
	memcpy(s->prefix, parent->prefix, parent->prefix_len);
	memcpy(s->prefix + parent->prefix_len, prefix, n + 1);
	s->prefix_len = parent->prefix_len + n;
	s->backend = parent->backend;
	atomic_fetch_add(&s->backend->refs, 1);
	*out = s;
	return HERD_OK;
}

void herd_store_free(herd_store *store)
{
	if (store == NULL)
		return;
	if (atomic_fetch_sub(&store->backend->refs, 1) == 1)
		store->backend->ops->destroy(store->backend);
	free(store->prefix);
	free(store);
}

/* Checks a key and writes prefix + key into full. */
static herd_status full_key(const herd_store *s, const char *key, const char *fn,
			    char full[HERD_STORE_KEY_MAX + 1])
{
	size_t n;

	if (s == NULL || key == NULL)
		return herd__error(HERD_EINVAL, "%s: store and key must not be NULL", fn);
	n = strlen(key);
	if (n == 0)
		return herd__error(HERD_EINVAL, "%s: empty key", fn);
	if (s->prefix_len + n > HERD_STORE_KEY_MAX) {
		char q[80];

		herd__store_quote(q, sizeof(q), key, n);
		return herd__error(HERD_EINVAL, "%s: key %s is %zu bytes with its prefix; at most "
				   "%d allowed", fn, q, s->prefix_len + n, HERD_STORE_KEY_MAX);
	}
	memcpy(full, s->prefix, s->prefix_len);
	memcpy(full + s->prefix_len, key, n + 1);
	return HERD_OK;
}

static herd_status check_value(const void *value, size_t len, const char *what, const char *fn)
{
	if (value == NULL && len > 0)
		return herd__error(HERD_EINVAL, "%s: %s is NULL but its length is %zu", fn, what,
				   len);
	if (len > HERD_STORE_VALUE_MAX)
		return herd__error(HERD_EINVAL, "%s: %s of %zu bytes exceeds the limit of %u bytes",
				   fn, what, len, HERD_STORE_VALUE_MAX);
	return HERD_OK;
}

static herd_status wait_timeout(const herd_store *s, int timeout_ms, const char *fn, int *out)
{
	HERD_CHECK(herd__check_timeout(fn, timeout_ms));
	/* No deadline: as long as an int of milliseconds goes (24 days). */
	*out = timeout_ms == HERD_TIMEOUT_DEFAULT ? s->backend->timeout_ms
	       : timeout_ms == HERD_TIMEOUT_NONE  ? INT_MAX
						  : timeout_ms;
	return HERD_OK;
}

herd_status herd_store_set(herd_store *store, const char *key, const void *value, size_t len)
{
	char full[HERD_STORE_KEY_MAX + 1];

	HERD_CHECK(full_key(store, key, "herd_store_set", full));
	HERD_CHECK(check_value(value, len, "value", "herd_store_set"));
	return store->backend->ops->set(store->backend, full, value == NULL ? "" : value, len,
					store->backend->timeout_ms);
}

herd_status herd_store_get(herd_store *store, const char *key, int timeout_ms, void **value,
			   size_t *len)
{
	char full[HERD_STORE_KEY_MAX + 1];
	size_t ignored;
	int ms = 0;

	if (value == NULL)
		return herd__error(HERD_EINVAL, "herd_store_get: value is NULL");
	*value = NULL;
	if (len == NULL)
		len = &ignored;
	*len = 0;
	HERD_CHECK(full_key(store, key, "herd_store_get", full));
	HERD_CHECK(wait_timeout(store, timeout_ms, "herd_store_get", &ms));
	return store->backend->ops->get(store->backend, full, ms, value, len);
}

herd_status herd_store_add(herd_store *store, const char *key, int64_t delta, int64_t *result)
{
	char full[HERD_STORE_KEY_MAX + 1];
	int64_t ignored;

	HERD_CHECK(full_key(store, key, "herd_store_add", full));
	return store->backend->ops->add(store->backend, full, delta,
					result != NULL ? result : &ignored,
					store->backend->timeout_ms);
}

herd_status herd_store_compare_set(herd_store *store, const char *key, const void *expected,
				   size_t expected_len, const void *desired, size_t desired_len,
				   bool *swapped, void **current, size_t *current_len)
{
	char full[HERD_STORE_KEY_MAX + 1];
	void *cur = NULL;
	size_t cur_len = 0;
	bool sw = false;
	herd_status st;

	if (current != NULL)
		*current = NULL;
	if (current_len != NULL)
		*current_len = 0;
	HERD_CHECK(full_key(store, key, "herd_store_compare_set", full));
	if (expected == NULL && expected_len > 0)
		return herd__error(HERD_EINVAL, "herd_store_compare_set: expected is NULL (the key "
				   "absent) but expected_len is %zu", expected_len);
	HERD_CHECK(check_value(expected, expected_len, "expected value", "herd_store_compare_set"));
	HERD_CHECK(check_value(desired, desired_len, "desired value", "herd_store_compare_set"));
	st = store->backend->ops->compare_set(store->backend, full, expected, expected_len,
					      desired == NULL ? "" : desired, desired_len, &sw,
					      &cur, &cur_len, store->backend->timeout_ms);
	if (st != HERD_OK)
		return st;
	if (swapped != NULL)
		*swapped = sw;
	if (current != NULL)
		*current = cur;
	else
		free(cur);
	if (current_len != NULL)
		*current_len = cur_len;
	return HERD_OK;
}

herd_status herd_store_delete(herd_store *store, const char *key, bool *existed)
{
	char full[HERD_STORE_KEY_MAX + 1];
	bool ignored;

	HERD_CHECK(full_key(store, key, "herd_store_delete", full));
	return store->backend->ops->del(store->backend, full, existed != NULL ? existed : &ignored,
					store->backend->timeout_ms);
}

herd_status herd_store_wait(herd_store *store, const char *const *keys, size_t nkeys,
			    int timeout_ms)
{
	char **full = NULL;
	herd_status st;
	size_t i = 0;
	int ms = 0;

	if (store == NULL || keys == NULL)
		return herd__error(HERD_EINVAL, "herd_store_wait: store and keys must not be NULL");
	if (nkeys == 0 || nkeys > HERD_STORE_WAIT_MAX_KEYS)
		return herd__error(HERD_EINVAL, "herd_store_wait: %zu keys (1 to %d allowed)",
				   nkeys, HERD_STORE_WAIT_MAX_KEYS);
	HERD_CHECK(wait_timeout(store, timeout_ms, "herd_store_wait", &ms));
	HERD_CHECK(herd__calloc(&full, nkeys, sizeof(*full), "the keys of a wait"));
	for (i = 0; i < nkeys; i++) {
		char buf[HERD_STORE_KEY_MAX + 1];

		HERD_CHECK_GOTO(full_key(store, keys[i], "herd_store_wait", buf), st, out);
		HERD_CHECK_GOTO(herd__strdup(&full[i], buf), st, out);
	}
	st = store->backend->ops->wait(store->backend, (const char *const *)full, nkeys, ms);
out:
	for (size_t j = 0; j < nkeys; j++)
		free(full[j]);
	free(full);
	return st;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

herd_status herd_store_keys(herd_store *store, const char *prefix, char ***keys, size_t *n)
{
	herd__store_keylist list = { NULL, 0, 0 };
	char full[HERD_STORE_KEY_MAX + 1];
	size_t plen = prefix != NULL ? strlen(prefix) : 0, bytes = 0;
	herd_status st;
	char **out, *p;

	if (keys != NULL)
		*keys = NULL;
	if (n != NULL)
		*n = 0;
	if (store == NULL || keys == NULL || n == NULL)
		return herd__error(HERD_EINVAL, "herd_store_keys: store, keys and n must not be NULL");
	if (store->prefix_len + plen > HERD_STORE_KEY_MAX)
		return herd__error(HERD_EINVAL, "herd_store_keys: a prefix of %zu bytes with the "
				   "handle's (at most %d)", store->prefix_len + plen,
				   HERD_STORE_KEY_MAX);
	memcpy(full, store->prefix, store->prefix_len);
	memcpy(full + store->prefix_len, prefix != NULL ? prefix : "", plen + 1);
	st = store->backend->ops->keys(store->backend, full, &list, store->backend->timeout_ms);
	for (size_t i = 0; st == HERD_OK && i < list.n; i++)
		bytes += strlen(list.v[i]) - store->prefix_len + 1;
	/* one block: the NULL-terminated array, then the keys without the handle's prefix */
	if (st == HERD_OK)
		st = herd__calloc(&out, 1, (list.n + 1) * sizeof(char *) + bytes, "a listing of keys");
	if (st == HERD_OK) {
		if (list.n > 1)
			qsort(list.v, list.n, sizeof(*list.v), key_cmp);
		p = (char *)(out + list.n + 1);
		for (size_t i = 0; i < list.n; i++) {
			size_t len = strlen(list.v[i]) - store->prefix_len;

			out[i] = p;
			memcpy(p, list.v[i] + store->prefix_len, len + 1);
			p += len + 1;
		}
		out[list.n] = NULL;
		*keys = out;
		*n = list.n;
	}
	for (size_t i = 0; i < list.n; i++)
		free(list.v[i]);
	free(list.v);
	return st;
}

/* ---- shared by the backends ---------------------------------------------- */

herd_status herd__store_keylist_add(herd__store_keylist *list, const void *key, size_t len,
				    const char *prefix, const char *where)
{
	char *copy;

	if (list->n == HERD_STORE_KEYS_MAX) {
		char q[80];

		herd__store_quote(q, sizeof(q), prefix, strlen(prefix));
		return herd__error(HERD_ENORESOURCE, "%s: more than %d keys start with %s (list "
				   "a longer prefix)", where, HERD_STORE_KEYS_MAX, q);
	}
	if (list->n == list->cap) {
		size_t ncap = list->cap ? 2 * list->cap : 64;
		char **v = realloc(list->v, ncap * sizeof(*v));

		if (v == NULL)
			return herd__error(HERD_ENOMEM, "%s: out of memory listing keys", where);
		list->v = v;
		list->cap = ncap;
	}
	copy = malloc(len + 1);
	if (copy == NULL)
		return herd__error(HERD_ENOMEM, "%s: out of memory listing keys", where);
	memcpy(copy, key, len);
	copy[len] = '\0';
	list->v[list->n++] = copy;
	return HERD_OK;
}

herd_status herd__store_missing_error(const char *where, int timeout_ms, size_t nkeys,
				      size_t nmissing, const herd__store_bytes *shown,
				      size_t nshown)
{
	char list[640];
	size_t o = 0;

	list[0] = '\0';
	for (size_t i = 0; i < nshown && o + 8 < sizeof(list); i++) {
		char q[200];
		int n;

		herd__store_quote(q, sizeof(q), shown[i].p, shown[i].n);
		n = snprintf(list + o, sizeof(list) - o, "%s%s", i > 0 ? ", " : "", q);
		if (n < 0 || (size_t)n >= sizeof(list) - o) {
			list[o] = '\0';
			break;
		}
		o += (size_t)n;
	}
	if (nshown < nmissing && o + 8 < sizeof(list))
		snprintf(list + o, sizeof(list) - o, ", ...");
	if (nkeys == 1)
		return herd__error(HERD_ETIMEDOUT, "%s: key %s not set within %d ms", where, list,
				   timeout_ms);
	return herd__error(HERD_ETIMEDOUT, "%s: %zu of %zu keys not set within %d ms: %s", where,
			   nmissing, nkeys, timeout_ms, list);
}

herd_status herd__store_counter_add(const void *cur, size_t cur_len, int64_t delta,
				    int64_t *sum, char text[HERD__STORE_COUNTER_LEN])
{
	int64_t value = 0;

	if (cur != NULL) {
		char digits[HERD__STORE_COUNTER_LEN];
		char *end;
		char q[64];

		herd__store_quote(q, sizeof(q), cur, cur_len);
		if (cur_len == 0 || cur_len >= sizeof(digits))
			return herd__error(HERD_EFORMAT, "its value %s is not a decimal integer", q);
		memcpy(digits, cur, cur_len);
		digits[cur_len] = '\0';
		errno = 0;
		value = strtoll(digits, &end, 10);
		if (*end != '\0' || errno != 0 || !(digits[0] == '-' || (digits[0] >= '0' &&
									 digits[0] <= '9')))
			return herd__error(HERD_EFORMAT, "its value %s is not a decimal integer", q);
	}
	if ((delta > 0 && value > INT64_MAX - delta) || (delta < 0 && value < INT64_MIN - delta))
		return herd__error(HERD_EINVAL, "adding %" PRId64 " to %" PRId64 " overflows int64",
				   delta, value);
	*sum = value + delta;
	snprintf(text, HERD__STORE_COUNTER_LEN, "%" PRId64, *sum);
	return HERD_OK;
}
