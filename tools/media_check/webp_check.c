/* WebP: h3_image_decode (image_webp.c: libwebp as Pillow calls it) vs libwebp's WebPDecodeRGBA, on every .webp file
 * of a folder.  Equal by construction: this checks the glue (demuxer, RGBA -> RGB), not a decoder.
 * Not part of the build.  Build and run: tools/media_check/run.sh */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

#include "media/image_read.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  DIR *dd = opendir(argv[1]);
  if (!dd) return 1;
  struct dirent *e;
  int files = 0, bad = 0;
  while ((e = readdir(dd))) {
    if (!strstr(e->d_name, ".webp")) continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", argv[1], e->d_name);
    FILE *f = fopen(p, "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    int w = 0, h = 0;
    uint8_t *ref = WebPDecodeRGBA(b, (size_t)n, &w, &h);
    h3_image img;
    h3_image_info info;
    files++;
    if (h3_image_decode(b, (size_t)n, p, NULL, &img, &info) != H3_OK || !ref) {
      printf("%s: %s\n", p, ref ? h3_last_error() : "libwebp fails");
      bad++;
    } else {
      long d = img.width != w || img.height != h;
      for (long i = 0; !d && i < (long)w * h; i++)
        for (int c = 0; c < 3; c++) d += ref[i * 4 + c] != img.rgb[i * 3 + c];
      if (d) bad++, printf("%s (%s, %s): %ld bytes differ\n", e->d_name, info.pil_mode, info.decoder, d);
      h3_image_free(&img);
    }
    WebPFree(ref);
    free(b);
  }
  closedir(dd);
  printf("%d files, %d differ\n", files, bad);
  return bad != 0;
}
