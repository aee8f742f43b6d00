/* Decodes every file of a folder with h3_image_read (load_image semantics) for pil_check.py: OUT/<name>.rgb holds
 * "W H\n" and the RGB8 bytes, OUT/<name>.err the message of a refusal.  Not part of the build.
 *   h3_decode_dir DIR OUT        (tools/media_check/run.sh builds and runs it) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h3/h3.h"
#include "media/image_read.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DIR OUT\n", argv[0]);
    return 2;
  }
  h3_set_log_level(H3_LOG_ERROR); /* corrupt-JPEG warnings: expected here */
  DIR *dd = opendir(argv[1]);
  if (!dd) {
    perror(argv[1]);
    return 1;
  }
  struct dirent *e;
  int ok = 0, refused = 0;
  while ((e = readdir(dd))) {
    if (e->d_name[0] == '.') continue;
    char in[2048], out[2048];
    snprintf(in, sizeof in, "%s/%s", argv[1], e->d_name);
    h3_image img;
    h3_status st = h3_image_read(in, NULL, &img, NULL);
    snprintf(out, sizeof out, "%s/%s.%s", argv[2], e->d_name, st == H3_OK ? "rgb" : "err");
    FILE *f = fopen(out, "wb");
    if (!f) {
      perror(out);
      return 1;
    }
    if (st == H3_OK) {
      fprintf(f, "%d %d\n", img.width, img.height);
      fwrite(img.rgb, 1, (size_t)img.width * img.height * 3, f);
      h3_image_free(&img);
      ok++;
    } else {
      fprintf(f, "%s\n", h3_last_error());
      refused++;
    }
    fclose(f);
  }
  closedir(dd);
  printf("h3: %d files decoded, %d refused\n", ok, refused);
  return 0;
}
