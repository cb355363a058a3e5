/*
 * sdk/base/auth.c - nonces, challenge MACs and the job secret (auth.h).
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "base.h"

void herd__auth_mac(uint8_t out[HERD__AUTH_MAC_LEN], const void *secret, size_t secret_len,
		    const uint8_t first[HERD__AUTH_NONCE_LEN],
		    const uint8_t second[HERD__AUTH_NONCE_LEN], const char *label)
{
	uint8_t msg[2 * HERD__AUTH_NONCE_LEN + 64];
	size_t llen = strlen(label);
	unsigned int outlen = HERD__AUTH_MAC_LEN;

	if (llen > 64)
		llen = 64;
	memcpy(msg, first, HERD__AUTH_NONCE_LEN);
	memcpy(msg + HERD__AUTH_NONCE_LEN, second, HERD__AUTH_NONCE_LEN);
	memcpy(msg + 2 * HERD__AUTH_NONCE_LEN, label, llen);
	if (HMAC(EVP_sha256(), secret, (int)secret_len, msg, 2 * HERD__AUTH_NONCE_LEN + llen,
		 out, &outlen) == NULL)
		/* Cannot happen with SHA-256; a MAC of zeros then fails to verify
		 * on the other side rather than passing. */
		RAND_bytes(out, HERD__AUTH_MAC_LEN);
}

int herd__auth_mac_equal(const uint8_t want[HERD__AUTH_MAC_LEN], const void *got, size_t len)
{
	return len == HERD__AUTH_MAC_LEN && CRYPTO_memcmp(want, got, len) == 0;
}

herd_status herd__auth_random(void *buf, size_t n)
{
	if (RAND_bytes(buf, (int)n) != 1)
		return herd__error(HERD_EUNAVAIL, "OpenSSL's random generator failed");
	return HERD_OK;
}

herd_status herd__auth_secret(const char *given, const char **out)
{
	const char *s = given != NULL ? given : herd__param_str(HERD__P_JOB_SECRET);

	*out = NULL;
	if (s == NULL || s[0] == '\0')
		return herd__error(HERD_EINVAL, "no job secret: pass one in the options or set "
				   "HERD_JOB_SECRET (herd launch sets it for its ranks)");
	*out = s;
	return HERD_OK;
}
