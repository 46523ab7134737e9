/*
 * The viewer of desktop ports (proto:<n> = rfb, CONTRACT.md Desktops): the
 * noVNC files of desktop.viewer_dir (Debian's novnc package by default),
 * read and gzip-compressed once at start, served from memory on the
 * desktop's own preview host, so the sandbox ships nothing for it:
 *
 *   /                          302 to the viewer, set up to connect back to
 *                              this host (no-store: it says view-only or not)
 *   /.lizard/viewer/<v>/<file> a file, immutable (<v> is a digest of every
 *                              file: another viewer is another URL)
 *
 * Nothing here blocks at request time: the files are in memory.
 */
#ifndef GW_HTTP_VIEWER_H
#define GW_HTTP_VIEWER_H

#include <h2o.h>

/* Where the viewer's files live, and the path its WebSocket is opened on
 * (any path works: the viewer asks for this one). */
#define GW_VIEWER_PREFIX "/.lizard/viewer/"
#define GW_VIEWER_WS_PATH ".lizard/rfb"

/* Bounds of what is read: files, bytes of them all, directory depth. */
#define GW_VIEWER_MAX_FILES 2048
#define GW_VIEWER_MAX_BYTES (64 * 1024 * 1024)
#define GW_VIEWER_MAX_DEPTH 8

typedef struct st_gw_viewer_t gw_viewer_t;

/* Reads every regular file under `dir` (symbolic links followed; names
 * starting with '.' skipped) and compresses the text ones. Returns the
 * viewer, or NULL with *err (malloc'd) when dir cannot be read, holds no
 * vnc.html, or is over the bounds. Blocks: at start only. */
gw_viewer_t *gw_viewer_load(const char *dir, char **err);
/* NULL is a no-op. */
void gw_viewer_free(gw_viewer_t *v);
/* gw_viewer_load of `dir` (NULL: none) with one line on stderr that says
 * what was loaded, or why nothing was: the gateway starts without a viewer
 * then (desktop ports keep their WebSocket; their / is not_http_port). */
gw_viewer_t *gw_viewer_load_or_say(const char *dir);
/* Files loaded and their bytes (before compression), for the start's log line. */
size_t gw_viewer_count(const gw_viewer_t *v, size_t *bytes);

/* Answers a GET or HEAD of `path` (origin-form, query allowed) when it is
 * the viewer's (`view_only`: the viewer is told so, and drops its keyboard;
 * the gateway enforces it anyway) and returns 1; returns 0 for any other
 * request (the caller answers not_http_port). `v` must outlive the
 * response (the bodies are sent from it). */
int gw_viewer_serve(const gw_viewer_t *v, h2o_req_t *req, h2o_iovec_t path, int view_only);

#endif
