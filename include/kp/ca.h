/*
 * The install's own CA and the leaf certificates it signs for intercepted
 * hosts, kept apart from the TLS sessions that show them (tls.h): the CA is
 * loaded once, made once by --make-ca, and asked for a host's leaf on every
 * intercepted CONNECT. Leaves live in a cache bounded by --leaf-cache, the
 * least recently used going first, and are minted again after a day so no
 * leaf in use is near its expiry.
 *
 * Certificates and keys leave this header as the TLS library's own objects
 * behind opaque types (OpenSSL: X509 and EVP_PKEY), which the session side
 * hands straight to the same library; nothing here names that library.
 */
#ifndef KP_CA_H
#define KP_CA_H

#include <stddef.h>
#include <stdio.h>

struct kp_config;

struct ca;              /* the CA certificate and key, the leaf key, the leaf cache */
struct ca_leaf_cert;    /* a leaf certificate: OpenSSL's X509 */
struct ca_leaf_key;     /* the key every leaf certifies: OpenSSL's EVP_PKEY */

/*
 * Loads --ca-cert and --ca-key (refusing a key others can read) and makes
 * the leaf key; --leaf-cache bounds the cache. NULL with a reason in err.
 */
struct ca *ca_new(const struct kp_config *cfg, char *err, size_t errlen);
void ca_free(struct ca *ca);

/*
 * --make-ca DIR: a fresh EC P-256 CA in DIR/ca.crt and DIR/ca.key (0600),
 * name-constrained to the --intercept patterns when there are any; tells
 * out how to trust it. Refuses to overwrite. 0, or -1 with a message on err.
 */
int ca_make(const char *dir, const struct kp_config *cfg, FILE *out, FILE *err);

/*
 * The leaf for host (DNS name or IP literal), from the cache or minted now,
 * and its key. Both are borrowed: the certificate until the next ca_leaf()
 * may evict it, so a user that keeps it takes its own reference (as
 * SSL_use_certificate does). 0, or -1 when none can be made for host.
 */
int ca_leaf(struct ca *ca, const char *host, struct ca_leaf_cert **cert,
            struct ca_leaf_key **key);

/* Leaf certificates held in the cache now. */
size_t ca_leaves_cached(const struct ca *ca);

/* ca_leaf()'s certificate as PEM into out. Bytes written, or -1. */
int ca_leaf_pem(struct ca *ca, const char *host, char *out, size_t len);

#endif
