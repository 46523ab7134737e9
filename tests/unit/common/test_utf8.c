/* Unit tests for common/utf8.c: well-formed UTF-8, character by character. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/utf8.h"

#define LEN(s) gw_utf8_char_len(s, sizeof(s) - 1)

START_TEST(test_each_length)
{
    ck_assert_uint_eq(LEN("a"), 1);
    ck_assert_uint_eq(gw_utf8_char_len("", 1), 1); /* NUL is a character */
    ck_assert_uint_eq(LEN("\x7f"), 1);
    ck_assert_uint_eq(LEN("\xc2\x80"), 2);         /* U+0080 */
    ck_assert_uint_eq(LEN("\xc3\xa9"), 2);         /* é */
    ck_assert_uint_eq(LEN("\xdf\xbf"), 2);         /* U+07FF */
    ck_assert_uint_eq(LEN("\xe0\xa0\x80"), 3);     /* U+0800 */
    ck_assert_uint_eq(LEN("\xe2\x82\xac"), 3);     /* € */
    ck_assert_uint_eq(LEN("\xed\x9f\xbf"), 3);     /* U+D7FF, just below the surrogates */
    ck_assert_uint_eq(LEN("\xee\x80\x80"), 3);     /* U+E000, just above */
    ck_assert_uint_eq(LEN("\xef\xbf\xbf"), 3);     /* U+FFFF */
    ck_assert_uint_eq(LEN("\xf0\x90\x80\x80"), 4); /* U+10000 */
    ck_assert_uint_eq(LEN("\xf0\x9f\x98\x80"), 4); /* 😀 */
    ck_assert_uint_eq(LEN("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF */
    /* only the first character counts */
    ck_assert_uint_eq(LEN("\xc3\xa9x"), 2);
}
END_TEST

START_TEST(test_ill_formed)
{
    ck_assert_uint_eq(LEN("\x80"), 0); /* a lone continuation byte */
    ck_assert_uint_eq(LEN("\xbf"), 0);
    ck_assert_uint_eq(LEN("\xc0\xaf"), 0);         /* overlong '/' */
    ck_assert_uint_eq(LEN("\xc1\xbf"), 0);         /* overlong */
    ck_assert_uint_eq(LEN("\xe0\x9f\xbf"), 0);     /* overlong U+07FF */
    ck_assert_uint_eq(LEN("\xf0\x8f\xbf\xbf"), 0); /* overlong U+FFFF */
    ck_assert_uint_eq(LEN("\xed\xa0\x80"), 0);     /* U+D800, a surrogate */
    ck_assert_uint_eq(LEN("\xed\xbf\xbf"), 0);     /* U+DFFF */
    ck_assert_uint_eq(LEN("\xf4\x90\x80\x80"), 0); /* U+110000 */
    ck_assert_uint_eq(LEN("\xf5\x80\x80\x80"), 0);
    ck_assert_uint_eq(LEN("\xff"), 0);
    ck_assert_uint_eq(LEN("\xc3\x28"), 0); /* the second byte is not a continuation */
    ck_assert_uint_eq(LEN("\xe2\x82\x28"), 0);
    ck_assert_uint_eq(LEN("\xf0\x9f\x98\x28"), 0);
    /* cut by the end of what may be read */
    ck_assert_uint_eq(gw_utf8_char_len("\xc3\xa9", 1), 0);
    ck_assert_uint_eq(gw_utf8_char_len("\xe2\x82\xac", 2), 0);
    ck_assert_uint_eq(gw_utf8_char_len("\xf0\x9f\x98\x80", 3), 0);
}
END_TEST

/* Every code point: its encoding is accepted exactly when it is a scalar value. */
START_TEST(test_every_code_point)
{
    unsigned char b[4];
    size_t n, wrong = 0;
    uint32_t first_wrong = 0;

    for (uint32_t cp = 0; cp <= 0x10ffff; ++cp) {
        if (cp < 0x80) {
            b[0] = (unsigned char)cp;
            n = 1;
        } else if (cp < 0x800) {
            b[0] = (unsigned char)(0xc0 | cp >> 6);
            b[1] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 2;
        } else if (cp < 0x10000) {
            b[0] = (unsigned char)(0xe0 | cp >> 12);
            b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
            b[2] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 3;
        } else {
            b[0] = (unsigned char)(0xf0 | cp >> 18);
            b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
            b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
            b[3] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 4;
        }
        size_t want = cp >= 0xd800 && cp <= 0xdfff ? 0 : n;
        if (gw_utf8_char_len(b, n) != want && wrong++ == 0)
            first_wrong = cp;
    }
    ck_assert_msg(wrong == 0, "%zu code points judged wrong, the first U+%04X", wrong, (unsigned)first_wrong);
}
END_TEST

START_TEST(test_whole_strings)
{
    ck_assert_int_eq(gw_utf8_is_valid("", 0), 1);
    ck_assert_int_eq(gw_utf8_is_valid("plain ascii", 11), 1);
    ck_assert_int_eq(gw_utf8_is_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14), 1);
    ck_assert_int_eq(gw_utf8_is_valid("caf\xc3", 4), 0);        /* cut at the end */
    ck_assert_int_eq(gw_utf8_is_valid("a\xed\xa0\x80z", 5), 0); /* a surrogate inside */
    ck_assert_int_eq(gw_utf8_is_valid("a\0b", 3), 1);           /* NUL is the caller's call */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_each_length);
    tcase_add_test(tc, test_ill_formed);
    tcase_add_test(tc, test_every_code_point);
    tcase_add_test(tc, test_whole_strings);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
