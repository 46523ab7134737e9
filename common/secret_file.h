/*
 * Secret files (cookie secrets, TLS session ticket keys): read whole and
 * bounded, and refused when anyone but their owner and group may read or
 * write them. Shared by every module; depends on nothing of the project's.
 */
#ifndef GW_COMMON_SECRET_FILE_H
#define GW_COMMON_SECRET_FILE_H

#include <stddef.h>

/* Reads the regular file `path` (at most `max_size` bytes) into *buf
 * (malloc'd, NUL-terminated after *len bytes; the caller cleanses it with
 * OPENSSL_cleanse and frees it). Returns 0, or -1 with *err (malloc'd,
 * "<path>: <problem>", never any byte of the file) and *buf NULL. */
int gw_secret_file_read(const char *path, size_t max_size, char **buf, size_t *len, char **err);

#endif
