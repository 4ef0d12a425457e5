/* tests/fuzz/fuzz_report.c - libFuzzer target for the report's readers: any
 * bytes go to vram_report_add_data() (recognition, then the snapshot, OOM,
 * JSON Lines or CSV reader) with a small max_points and max_blocks so that
 * downsampling and merging run too. It must not crash, leak or overread; a
 * refusal must leave the report without inputs and say why; an accepted
 * input must print as JSON that parses, and as a page whose data holds no
 * '<', '>' or '&' (nothing an input holds can end the page's script). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vramkit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vram_report_opts o;
    vram_report_opts_init(&o);
    o.max_points = 8;
    o.max_blocks = 4;
    o.generated_time_s = 1;
    vram_report *r;
    if (vram_report_create(&o, &r))
        abort();
    vram_report_input_info info;
    int rc = vram_report_add_data(r, "fuzz", data, size, &info);
    if (rc) {
        if (vram_report_inputs(r) != 0 || !*vram_last_error() ||
            (rc != VRAM_EPARSE && rc != VRAM_EHOSTMEM && rc != VRAM_ELIMIT))
            abort();
        vram_report_destroy(r);
        return 0;
    }
    if (vram_report_inputs(r) != 1 || !memchr(info.summary, '\0', sizeof info.summary))
        abort();
    vram_buffer s = {0};
    if (vram_report_print(r, vram_write_buffer, &s, VRAM_PRINT_JSON))
        abort();
    cJSON *j = cJSON_Parse(s.data);
    if (!j)
        abort();
    cJSON_Delete(j);
    s.len = 0;
    rc = vram_report_print(r, vram_write_buffer, &s, 0);
    if (rc == 0) {
        const char *at = strstr(s.data, "id=\"vram-report-data\">");
        const char *end = at ? strstr(at, "</script>") : NULL;
        if (!end)
            abort();
        for (const char *p = at + strlen("id=\"vram-report-data\">"); p < end; p++)
            if (*p == '<' || *p == '>' || *p == '&')
                abort();
    } else if (rc != VRAM_ENOSYS) {
        abort();
    }
    vram_buffer_free(&s);
    vram_report_destroy(r);
    return 0;
}
