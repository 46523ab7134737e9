/*
 * metering/record.c: project ids cut between characters and cleaned to
 * well-formed UTF-8.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "metering/record.h"

/* A project id from the control plane goes into JSON (the spill file) and
 * Redis: cut between characters, ill-formed bytes replaced. */
START_TEST(test_project_is_cut_and_cleaned_as_utf8)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"proj-\xc3\xa9t\xc3\xa9", 10, "proj-\xc3\xa9t\xc3\xa9"}, /* well-formed: as is */
        {"x\xff\xfey", 4, "x??y"},                                /* not UTF-8 */
        {"a\0b", 3, "a?b"},                                       /* NUL would end the string */
        {"\xc0\xaf", 2, "??"},                                    /* overlong '/' */
        {"\xed\xa0\x80z", 4, "???z"},                             /* a surrogate */
        {"\xf4\x90\x80\x80", 4, "????"},                          /* above U+10FFFF */
        {"ab\xe2\x82", 4, "ab??"},                                /* a character cut by the control plane */
    };
    char in[300], want[300];
    size_t i;

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        char *p = gw_metering_project_dup(cases[i].in, cases[i].len);
        ck_assert_msg(strcmp(p, cases[i].out) == 0, "case %zu: got \"%s\"", i, p);
        free(p);
    }
    /* 255 bytes then a 2-byte character: cut before it, not inside */
    memset(in, 'a', 255);
    memcpy(in + 255, "\xc3\xa9", 2);
    memset(want, 'a', 255);
    want[255] = '\0';
    char *p = gw_metering_project_dup(in, 257);
    ck_assert_str_eq(p, want);
    free(p);
    /* 254 bytes then a 4-byte character: likewise */
    memcpy(in + 254, "\xf0\x9f\xa6\x8e", 4);
    want[254] = '\0';
    p = gw_metering_project_dup(in, 258);
    ck_assert_str_eq(p, want);
    free(p);
    /* exactly 256 bytes ending in a whole character: kept */
    memcpy(in + 254, "\xc3\xa9", 2);
    p = gw_metering_project_dup(in, 256);
    ck_assert_uint_eq(strlen(p), 256);
    ck_assert_int_eq(memcmp(p, in, 256), 0);
    free(p);
}
END_TEST

static Suite *record_suite(void)
{
    Suite *s = suite_create("record");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_project_is_cut_and_cleaned_as_utf8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(record_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
