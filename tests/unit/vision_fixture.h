/* Shared by the vision tests (test_vision_processor.c, test_vision_tower.c,
 * test_fl2va.c): the formula images of tools/golden/make_vision_fixtures.py,
 * and the two tiny Qwen3-VL checkpoints they run on:
 *   - tests/golden/text_encoder/ (committed with the text encoder; its
 *     vision tower is random and never compared there): the no-fixture
 *     invariants, both namings (model.visual.* and the Comfy visual.*);
 *   - tests/golden/vision/ (make_vision_fixtures.py; absent until the lead
 *     generates it): the reference comparisons.
 * Header-only. */
#ifndef H3_TEST_VISION_FIXTURE_H
#define H3_TEST_VISION_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "testutil.h"

/* The script's formula_image: [h, w, 3] RGB8, malloc'd. */
static inline uint8_t *vfx_formula_image(int w, int h, int s) {
  uint8_t *p = malloc((size_t)w * (size_t)h * 3 + 1);
  if (!p) return NULL;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      for (int64_t c = 0; c < 3; c++) {
        int64_t v = x * (3 + s % 5) + y * (5 + s % 7) + c * 85 + ((x * y) % (17 + s)) * 3 + ((x ^ (3 * y)) & 31) +
                    11 * (int64_t)s;
        p[(y * w + x) * 3 + c] = (uint8_t)(v % 256);
      }
  return p;
}

static inline int vfx_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Unpack a fixture's model/ folder (config.json, index, gzipped shards) into
 * dst (created).  0 on success. */
static inline int vfx_unpack_model(const char *golden_model_dir, const char *dst) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && cp '%s/config.json' '%s/' && (cp '%s'/*.index.json '%s/' 2>/dev/null || true) && "
           "for f in '%s'/*.safetensors.gz; do gzip -dc \"$f\" > '%s'/$(basename \"$f\" .gz) || exit 1; done",
           dst, golden_model_dir, dst, golden_model_dir, dst, golden_model_dir, dst);
  int rc = system(cmd);
  if (rc != 0) fprintf(stderr, "unpacking %s failed\n", golden_model_dir);
  return rc;
}

#endif
