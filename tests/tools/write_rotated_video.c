/* Writes tests/data/video/rot90.mov (see tests/tools/make_test_videos.sh): 30
 * frames of 48x32 rgb24 at 24 fps with a display matrix of 90 degrees, through
 * tests/unit/video_fixture.h.  Not part of the build. */
#include <stdio.h>

#include "video_fixture.h"

static void pat(int i, int w, int h, uint8_t *rgb) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = rgb + ((size_t)y * w + x) * 3;
      p[0] = (uint8_t)(i * 8 + x * 2), p[1] = (uint8_t)(x * 5), p[2] = (uint8_t)(y * 7 + (x > y ? 60 : 0));
    }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.mov\n", argv[0]);
    return 2;
  }
  vfix_spec sp = {.format = "mov", .w = 48, .h = 32, .n = 30, .num = 24, .den = 1, .rotation = 90};
  return vfix_write(argv[1], &sp, pat) ? 1 : 0;
}
