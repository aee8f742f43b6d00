/* The display-matrix rotation of a video reference as references.py applies
 * it: turns = round(rotation / 90) % 4 and np.rot90(frames, k=-turns,
 * axes=(1, 2)) (video_read.h).  Pure: no FFmpeg. */
#include <math.h>
#include <string.h>

#include "media/video_read.h"

int h3_video_rotation_turns(int rotation) {
  /* Python round() of the correctly rounded quotient: half to even */
  long t = (long)nearbyint((double)rotation / 90.0);
  int r = (int)(t % 4);
  return r < 0 ? r + 4 : r;
}

void h3_video_rotate_rgb8(const uint8_t *src, int w, int h, int turns, uint8_t *dst) {
  turns &= 3;
  if (turns == 0) {
    memcpy(dst, src, (size_t)w * (size_t)h * 3);
    return;
  }
  /* np.rot90(k=-1) (clockwise): out (w rows x h cols), out[y][x] = in[h-1-x][y];
   * k=-2: out[y][x] = in[h-1-y][w-1-x]; k=-3 (= k=1, counterclockwise):
   * out[y][x] = in[x][w-1-y]. */
  const int ow = (turns & 1) ? h : w, oh = (turns & 1) ? w : h;
  for (int y = 0; y < oh; y++) {
    uint8_t *o = dst + (size_t)y * (size_t)ow * 3;
    for (int x = 0; x < ow; x++, o += 3) {
      int sy, sx;
      if (turns == 1) sy = h - 1 - x, sx = y;
      else if (turns == 2) sy = h - 1 - y, sx = w - 1 - x;
      else sy = x, sx = w - 1 - y;
      const uint8_t *s = src + ((size_t)sy * (size_t)w + (size_t)sx) * 3;
      o[0] = s[0], o[1] = s[1], o[2] = s[2];
    }
  }
}
