/* libFuzzer target: the configuration loader (config/config.c). Any JSON
 * text either loads or is refused with a message; never a crash or a leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *err = NULL;
    gw_config_t *config = NULL;

    memcpy(text, data, size);
    text[size] = '\0';
    if (gw_config_load_string(text, "fuzz.json", &config, &err) == 0) {
        if (config == NULL || config->num_domains == 0)
            __builtin_trap();
        gw_config_free(config);
    } else if (err == NULL || strncmp(err, "config: ", 8) != 0) {
        __builtin_trap();
    }
    free(err);
    free(text);
    return 0;
}
