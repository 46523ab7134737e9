/*
 * The access log's writer: worker threads hand it whole lines, and one
 * thread of its own writes them to the file. A worker never waits for the
 * disk: appending is one memcpy under a mutex, and a line that does not fit
 * in the bounded buffer is dropped and counted, never waited for.
 */
#ifndef GW_OBSERVE_LOG_WRITER_H
#define GW_OBSERVE_LOG_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_gw_log_writer_t gw_log_writer_t;

/* Starts the writer thread for `fd` with `capacity` bytes of buffer (two
 * halves: one filling while the other is written). The fd stays the
 * caller's and must outlive the writer; replacing the file behind it with
 * dup2() (log rotation) is safe at any time. Aborts on failure (h2o's
 * out-of-memory policy). */
gw_log_writer_t *gw_log_writer_new(int fd, size_t capacity);

/* Writes what is buffered, stops the thread and frees. NULL is a no-op. */
void gw_log_writer_free(gw_log_writer_t *w);

/* Queues one whole line (len bytes, newline included). Returns 0, or -1
 * when the buffer has no room for it: the line is dropped and counted.
 * Thread-safe; never blocks on I/O. */
int gw_log_writer_append(gw_log_writer_t *w, const char *line, size_t len);

/* Lines dropped because the buffer was full, and lines written, since start. */
uint64_t gw_log_writer_dropped(gw_log_writer_t *w);
uint64_t gw_log_writer_written(gw_log_writer_t *w);

#endif
