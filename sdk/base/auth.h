/*
 * sdk/base/auth.h - what every authenticated connection of herd shares
 * (the store's, the communicator's control and data links, herd exec's
 * connect-back): random nonces, the HMAC of a challenge under the job
 * secret, its comparison in constant time, and where the secret comes
 * from.  OpenSSL does the cryptography.
 *
 * A handshake: each side sends a fresh nonce; each proves the secret by
 * sending HMAC-SHA256(secret, its peer's nonce || its own || label), the
 * label naming the direction, so that no answer can be replayed or
 * reflected.
 */
#ifndef HERD_BASE_AUTH_H
#define HERD_BASE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "herd/common.h"

#define HERD__AUTH_NONCE_LEN 32
#define HERD__AUTH_MAC_LEN 32

/* HMAC-SHA256(secret, first || second || label) into out (label: at most
 * 64 bytes are used). */
void herd__auth_mac(uint8_t out[HERD__AUTH_MAC_LEN], const void *secret, size_t secret_len,
		    const uint8_t first[HERD__AUTH_NONCE_LEN],
		    const uint8_t second[HERD__AUTH_NONCE_LEN], const char *label);

/* Whether got (len bytes) is exactly want, compared in constant time. */
int herd__auth_mac_equal(const uint8_t want[HERD__AUTH_MAC_LEN], const void *got, size_t len);

/* Fills buf with n bytes from OpenSSL's random generator. */
herd_status herd__auth_random(void *buf, size_t n);

/*
 * The job secret: given when not NULL, else HERD_JOB_SECRET.  HERD_EINVAL
 * when both are missing or empty.
 */
herd_status herd__auth_secret(const char *given, const char **out);

#endif /* HERD_BASE_AUTH_H */
