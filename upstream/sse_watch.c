/*
 * Comment lines of event streams (see sse_watch.h). The WHATWG grammar:
 * a line starting with ':' is a comment, an empty line dispatches the
 * event, any other line is a field. Only a line's first byte is looked at;
 * the rest of the line is skipped to its end with memchr.
 */
#include <string.h>
#include "upstream/exchange.h"
#include "upstream/sse_watch.h"

enum {
    AT_LINE_START = 0, /* the next byte starts a line */
    AFTER_CR,          /* a CR ended the last line: a LF next belongs to it */
    IN_COMMENT,        /* inside a ':' line */
    IN_FIELD,          /* inside a field line (already reported) */
};

void gw_sse_watch_init(gw_sse_watch_t *w)
{
    w->state = AT_LINE_START;
}

/* The end of the line that starts at p: its CR or LF, or end. */
static const char *line_end(const char *p, const char *end)
{
    const char *lf = memchr(p, '\n', (size_t)(end - p)), *cr = memchr(p, '\r', (size_t)((lf != NULL ? lf : end) - p));
    return cr != NULL ? cr : lf != NULL ? lf : end;
}

int gw_sse_watch_feed(gw_sse_watch_t *w, const char *buf, size_t len)
{
    const char *p, *end;
    int seen = 0;

    if (len == 0) /* an empty input buffer may have no bytes at all (NULL) */
        return 0;
    p = buf;
    end = buf + len;
    while (p != end) {
        switch (w->state) {
        case AFTER_CR:
            w->state = AT_LINE_START;
            if (*p == '\n')
                ++p;
            break;
        case AT_LINE_START:
            if (*p == '\r') {
                w->state = AFTER_CR;
                ++p;
            } else if (*p == '\n') {
                ++p;
            } else if (*p == ':') {
                w->state = IN_COMMENT;
                ++p;
            } else {
                w->state = IN_FIELD;
                seen = 1;
            }
            break;
        default: /* IN_COMMENT, IN_FIELD: to the line's end */
            p = line_end(p, end);
            if (p != end) {
                w->state = *p == '\r' ? AFTER_CR : AT_LINE_START;
                ++p;
            }
            break;
        }
    }
    return seen;
}

void gw_exchange_watch_events(gw_exchange_t *ex, const char *buf, size_t len)
{
    ex->no_activity = 1;
    ex->sse_watched = 1;
    gw_sse_watch_init(&ex->sse);
    gw_exchange_events_seen(ex, buf, len);
}

void gw_exchange_events_seen(gw_exchange_t *ex, const char *buf, size_t len)
{
    if (gw_sse_watch_feed(&ex->sse, buf, len) && ex->proxy->meter != NULL)
        gw_worker_meter_touch(ex->proxy->meter, ex->sandbox_id);
}
