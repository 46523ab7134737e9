/*
 * Secret files that reload by themselves: inotify on the directories of the
 * certificate, key, ticket-key, cookie-secret and link-key files. Kubernetes
 * updates a mounted Secret by swapping the directory's `..data` symlink;
 * an editor or `mv` replaces the file itself. Either is a change here, and
 * the main thread then reloads as SIGHUP does.
 */
#ifndef GW_GATEWAY_SECRET_WATCH_H
#define GW_GATEWAY_SECRET_WATCH_H

#include <stddef.h>

/* at most this many files are watched (their directories, once each) */
#define GW_SECRET_WATCH_MAX 64

typedef struct st_gw_secret_watch_t gw_secret_watch_t;

/* Watches the directories of the `n` paths (NULL entries skipped). Returns
 * the watch, or NULL with *err (malloc'd) when inotify is not available or
 * a directory cannot be watched (the caller goes on with SIGHUP only). */
gw_secret_watch_t *gw_secret_watch_new(const char *const *paths, size_t n, char **err);

/* The descriptor to poll for input (non-blocking, close-on-exec). */
int gw_secret_watch_fd(gw_secret_watch_t *w);

/* Reads the pending events; returns 1 when one concerns a watched file (its
 * name in its directory, or the directory's `..data`), 0 otherwise. */
int gw_secret_watch_read(gw_secret_watch_t *w);

/* gw_secret_watch_free(NULL) is a no-op. */
void gw_secret_watch_free(gw_secret_watch_t *w);

#endif
