/*
 * Whether this kernel takes kTLS transmit (Linux's "tls" upper-layer
 * protocol with TLS_TX keys): checked once at start on a loopback socket
 * pair, logged, and reported in /readyz ("ktls"; docs/tls.md, kTLS).
 */
#ifndef GW_TLS_KTLS_H
#define GW_TLS_KTLS_H

#include <stddef.h>

/* Connects a TCP socket pair over 127.0.0.1, attaches the "tls" ULP to one
 * end, gives it a TLS 1.3 AES-128-GCM transmit key and sends five bytes: 1
 * when the other end reads one TLS 1.3 application-data record of the
 * expected length (5 + 5 + 1 + 16 bytes), 0 when the kernel refuses a step
 * (why: the step and strerror, e.g. "TCP_ULP tls: No such file or directory"
 * for a kernel built without CONFIG_TLS), -1 when the probe itself could not
 * run (no loopback socket; why says so). Blocking, bounded by a 1 s receive
 * timeout: call it before the workers start. `why` gets at most `size`
 * bytes, NUL-terminated. */
int gw_ktls_probe(char *why, size_t size);

/* The probe's answer, 1 or 0, run once per process (the first call; later
 * calls return its answer) and logged once on stderr with its reason. */
int gw_ktls_checked(void);

#endif
