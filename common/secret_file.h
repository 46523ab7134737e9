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

/* The lines of a secret file that say something: walks buf[*pos..len) to the
 * next line that is not blank and does not start with '#', and sets *line
 * to it without surrounding blanks (space, tab, a trailing CR); *lineno
 * counts every line (1-based, for messages that name the line, never its
 * bytes). Returns 1 with a line, 0 at the end. Start with *pos = 0 and
 * *lineno = 0. */
int gw_secret_file_next_line(const char *buf, size_t len, size_t *pos, size_t *lineno, const char **line, size_t *line_len);

#endif
