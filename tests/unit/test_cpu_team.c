/* tests/unit/test_cpu_team.c - the cpu executor's thread team
 * (src/engine/cpu/team.h): every part of every job runs exactly once, on
 * as many distinct threads as the team has, and the caller gets control
 * back only when all parts are done; teams of 2 to 8 made and destroyed in
 * a loop; a team of fewer than two is refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/team.h"

#define MAX_PARTS 8

typedef struct job {
    atomic_int ran[MAX_PARTS];
    pthread_t who[MAX_PARTS];
    int parts_seen[MAX_PARTS];
    atomic_int finished;
} job;

static void part_fn(void *arg, int part, int parts)
{
    job *j = arg;
    atomic_fetch_add(&j->ran[part], 1);
    j->who[part] = pthread_self();
    j->parts_seen[part] = parts;
    for (volatile int spin = 0; spin < 2000; spin++) /* let the parts overlap */
        ;
    atomic_fetch_add(&j->finished, 1);
}

static void test_every_part_once(void **state)
{
    (void)state;
    for (int n = 2; n <= MAX_PARTS; n++) {
        vram__team *t;
        assert_int_equal(vram__team_create(n, &t), 0);
        assert_int_equal(vram__team_size(t), n);
        for (int rep = 0; rep < 300; rep++) {
            job j;
            memset(&j, 0, sizeof j);
            vram__team_run(t, part_fn, &j);
            /* Back only when every part is done. */
            assert_int_equal(atomic_load(&j.finished), n);
            for (int p = 0; p < n; p++) {
                assert_int_equal(atomic_load(&j.ran[p]), 1);
                assert_int_equal(j.parts_seen[p], n);
            }
            assert_true(pthread_equal(j.who[0], pthread_self()));
            for (int p = 0; p < n; p++)
                for (int q = p + 1; q < n; q++)
                    assert_false(pthread_equal(j.who[p], j.who[q]));
        }
        vram__team_destroy(t);
    }
    assert_int_equal(vram__team_size(NULL), 1);
    vram__team_destroy(NULL);
}

static void test_too_small(void **state)
{
    (void)state;
    vram__team *t = (vram__team *)&t;
    assert_int_equal(vram__team_create(1, &t), VRAM_EINVAL);
    assert_null(t);
    assert_non_null(strstr(vram_last_error(), "a thread team of 1 (at least 2)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_part_once),
        cmocka_unit_test(test_too_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
