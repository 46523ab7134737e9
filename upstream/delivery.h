/*
 * Egress billed as it is delivered: what the gateway writes to a client
 * socket for a sandbox is held per client connection until the client's TCP
 * has acknowledged it (TCP_INFO tcpi_bytes_acked), checked once a second
 * while a connection holds any and
 * when it closes; what is never delivered (the client reset the connection,
 * or did not take it within 10 s of a close) is never billed. docs/metering.md
 * "Metering" states the bound.
 */
#ifndef GW_UPSTREAM_DELIVERY_H
#define GW_UPSTREAM_DELIVERY_H

#include <stdint.h>
#include <h2o.h>

typedef struct st_gw_deliveries_t gw_deliveries_t;

/* Bills `egress` bytes of a sandbox (sandbox_id valid during the call only). */
typedef void (*gw_delivery_bill_cb)(void *data, const char *sandbox_id, int no_activity, uint64_t egress);

/* The held bytes of one worker's client connections, checked every check_ms
 * (0: only at close). */
gw_deliveries_t *gw_deliveries_new(h2o_loop_t *loop, uint64_t check_ms, gw_delivery_bill_cb cb, void *data);
/* Bills what every connection has delivered so far (gw_deliveries_settle_all),
 * then frees. NULL is a no-op. */
void gw_deliveries_free(gw_deliveries_t *d);

/* `bytes` more for sandbox_id (copied) were written (`written`: h2o
 * reported the write done) or are about to be handed to h2o (0) toward the
 * client socket sock: held until acknowledged. sock must be reported to
 * gw_deliveries_close before it is disposed. */
void gw_deliveries_hold(gw_deliveries_t *d, h2o_socket_t *sock, const char *sandbox_id, int no_activity, uint64_t bytes,
                        int written);

/* sock is being disposed, its descriptor still open: bills what its client
 * acknowledged. What the client reset the connection on, or what an
 * abortive close (SO_LINGER 0) drops, is never billed. When bytes are still
 * in flight on a graceful close, the connection is followed for up to 10 s
 * on a duplicate of its descriptor (the FIN sent after the data now): what
 * is acknowledged by then is billed, the rest not. No-op for a socket that
 * holds nothing. */
void gw_deliveries_close(gw_deliveries_t *d, h2o_socket_t *sock);

/* Bills what each connection's client has acknowledged so far (at shutdown,
 * before the last metering hand-over). */
void gw_deliveries_settle_all(gw_deliveries_t *d);

/* Bytes held, not yet billed, over all connections. */
uint64_t gw_deliveries_held(const gw_deliveries_t *d);

/* Pure, for tests. The plaintext in `wire` bytes of the kernel's queue:
 * over TLS the queue less the least record overhead (22 bytes per 16 KiB
 * record), so that plaintext is never under-estimated (a byte never
 * delivered is never billed). */
uint64_t gw_delivery_plaintext(uint64_t wire, int tls);

#endif
