/*
 * Error messages for `char **err` (see errfmt.h): formatted at their exact
 * length, never cut.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/memory.h>
#include "common/errfmt.h"

int gw_verrorf(char **err, const char *fmt, va_list args)
{
    va_list again;
    int n;

    va_copy(again, args);
    n = vsnprintf(NULL, 0, fmt, args);
    if (n < 0) {
        /* only an invalid format can get here: say so rather than nothing */
        static const char bad[] = "(unprintable error message)";
        *err = h2o_mem_alloc(sizeof(bad));
        memcpy(*err, bad, sizeof(bad));
    } else {
        *err = h2o_mem_alloc((size_t)n + 1);
        vsnprintf(*err, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    return -1;
}

char *gw_strf(const char *fmt, ...)
{
    va_list args;
    char *s;

    va_start(args, fmt);
    gw_verrorf(&s, fmt, args);
    va_end(args);
    return s;
}

int gw_errorf(char **err, const char *fmt, ...)
{
    va_list args;

    va_start(args, fmt);
    gw_verrorf(err, fmt, args);
    va_end(args);
    return -1;
}
