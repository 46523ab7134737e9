/*
 * Reading secret files (see secret_file.h). Group access is allowed, for a
 * root:lizard 0640 file; access by others is refused rather than warned
 * about: a cookie secret anyone on the host can read lets them mint cookies
 * for every sandbox, and a ticket key lets them decrypt every recorded
 * session resumed with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "common/secret_file.h"
#include "common/errfmt.h"

int gw_secret_file_read(const char *path, size_t max_size, char **buf, size_t *len, char **err)
{
    struct stat st;
    char *data = NULL;
    size_t size = 0;
    ssize_t n;
    int fd;

    *buf = NULL;
    *len = 0;
    *err = NULL;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
        return gw_errorf(err, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        gw_errorf(err, "%s: %s", path, strerror(errno));
        goto Error;
    }
    if (!S_ISREG(st.st_mode)) {
        gw_errorf(err, "%s: not a regular file", path);
        goto Error;
    }
    if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
        gw_errorf(err, "%s: readable or writable by others (mode %04o); make it 0600 or 0640 (chmod o-rw)", path,
                  (unsigned)(st.st_mode & 07777));
        goto Error;
    }
    if ((data = malloc(max_size + 1)) == NULL) {
        gw_errorf(err, "%s: out of memory", path);
        goto Error;
    }
    /* one byte more than allowed tells "too large" from "exactly the limit" */
    while (size <= max_size && (n = read(fd, data + size, max_size + 1 - size)) != 0) {
        if (n == -1) {
            if (errno == EINTR)
                continue;
            gw_errorf(err, "%s: %s", path, strerror(errno));
            goto Error;
        }
        size += (size_t)n;
    }
    if (size > max_size) {
        gw_errorf(err, "%s: larger than %zu bytes", path, max_size);
        goto Error;
    }
    data[size] = '\0';
    close(fd);
    *buf = data;
    *len = size;
    return 0;

Error:
    if (data != NULL) {
        OPENSSL_cleanse(data, size);
        free(data);
    }
    close(fd);
    return -1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int gw_secret_file_next_line(const char *buf, size_t len, size_t *pos, size_t *lineno, const char **line, size_t *line_len)
{
    const char *end = buf + len, *p, *eol, *s, *e;

    for (p = buf + *pos; p < end; p = eol + 1) {
        ++*lineno;
        if ((eol = memchr(p, '\n', end - p)) == NULL)
            eol = end;
        for (s = p, e = eol; s < e && is_blank(*s); ++s)
            ;
        while (e > s && (is_blank(e[-1]) || e[-1] == '\r'))
            --e;
        if (s == e || *s == '#')
            continue;
        *pos = eol - buf + (eol < end);
        *line = s;
        *line_len = e - s;
        return 1;
    }
    *pos = len;
    return 0;
}
