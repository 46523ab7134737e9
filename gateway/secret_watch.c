/*
 * inotify on the directories of the secret files (gateway/secret_watch.h).
 * A directory, not the file: a mounted Secret's file is a symlink through
 * `..data`, which kubelet replaces with rename(2), and a file replaced by
 * `mv` is a new inode; a watch on the old inode would see neither.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
#include "common/errfmt.h"
#include "gateway/secret_watch.h"

#define WATCH_EVENTS (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)

typedef struct st_watched_t {
    int wd;     /* the directory's watch */
    char *name; /* the file's name in it */
} watched_t;

struct st_gw_secret_watch_t {
    int fd;
    size_t n;
    watched_t files[GW_SECRET_WATCH_MAX];
};

gw_secret_watch_t *gw_secret_watch_new(const char *const *paths, size_t n, char **err)
{
    gw_secret_watch_t *w = calloc(1, sizeof(*w));
    size_t i;

    if (w == NULL) {
        gw_errorf(err, "secret watch: out of memory");
        return NULL;
    }
    if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
        gw_errorf(err, "secret watch: inotify: %s", strerror(errno));
        free(w);
        return NULL;
    }
    for (i = 0; i != n; ++i) {
        const char *slash;
        char dir[PATH_MAX];
        if (paths[i] == NULL)
            continue;
        if (w->n == GW_SECRET_WATCH_MAX) {
            gw_errorf(err, "secret watch: more than %d files", GW_SECRET_WATCH_MAX);
            goto Error;
        }
        if ((slash = strrchr(paths[i], '/')) == NULL) {
            dir[0] = '.', dir[1] = '\0';
        } else if ((size_t)(slash - paths[i]) >= sizeof(dir)) {
            gw_errorf(err, "secret watch: %s: path too long", paths[i]);
            goto Error;
        } else {
            size_t len = slash == paths[i] ? 1 : (size_t)(slash - paths[i]);
            memcpy(dir, paths[i], len);
            dir[len] = '\0';
        }
        /* inotify returns the same wd for a directory watched twice */
        int wd = inotify_add_watch(w->fd, dir, WATCH_EVENTS);
        if (wd == -1) {
            gw_errorf(err, "secret watch: %s: %s", dir, strerror(errno));
            goto Error;
        }
        w->files[w->n].wd = wd;
        w->files[w->n].name = strdup(slash == NULL ? paths[i] : slash + 1);
        if (w->files[w->n].name == NULL) {
            gw_errorf(err, "secret watch: out of memory");
            goto Error;
        }
        ++w->n;
    }
    return w;
Error:
    gw_secret_watch_free(w);
    return NULL;
}

int gw_secret_watch_fd(gw_secret_watch_t *w)
{
    return w->fd;
}

int gw_secret_watch_read(gw_secret_watch_t *w)
{
    /* aligned as inotify(7) asks; holds many events, each at most sizeof(event) + NAME_MAX + 1 */
    char buf[16 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    int relevant = 0;
    ssize_t len;

    while ((len = read(w->fd, buf, sizeof(buf))) > 0 || (len == -1 && errno == EINTR)) {
        const char *p;
        const struct inotify_event *ev;
        for (p = buf; len > 0 && p < buf + len; p += sizeof(*ev) + ev->len) {
            ev = (const struct inotify_event *)p;
            if (ev->mask & IN_Q_OVERFLOW) {
                relevant = 1; /* events were lost: reload to be sure */
                continue;
            }
            if (ev->len == 0)
                continue;
            for (size_t i = 0; i != w->n; ++i) {
                if (w->files[i].wd == ev->wd && (strcmp(ev->name, w->files[i].name) == 0 || strcmp(ev->name, "..data") == 0))
                    relevant = 1;
            }
        }
    }
    return relevant;
}

void gw_secret_watch_free(gw_secret_watch_t *w)
{
    size_t i;

    if (w == NULL)
        return;
    for (i = 0; i != w->n; ++i)
        free(w->files[i].name);
    if (w->fd != -1)
        close(w->fd);
    free(w);
}
