/* Keyframe images for the vision stages (stage_images.h). */
#include "cli/stage_images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/log.h"
#include "media/image_read.h"
#include "media/keyframe_prep.h"

int h3_cli_take_images(int *argc, char **argv, h3_cli_images *im) {
  memset(im, 0, sizeof *im);
  int out = 0;
  for (int i = 0; i < *argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--image")) {
      if (i + 1 >= *argc) return h3_cli_usage_error("option '--image' needs a value");
      v = argv[++i];
    } else if (!strncmp(a, "--image=", 8)) {
      v = a + 8;
    } else {
      argv[out++] = argv[i];
      continue;
    }
    if (im->n >= H3_CLI_MAX_IMAGES)
      return h3_cli_usage_error("at most %d --image options (the first and the last keyframe)", H3_CLI_MAX_IMAGES);
    if (!*v) return h3_cli_usage_error("option '--image' needs a file name");
    im->path[im->n++] = v;
  }
  *argc = out;
  return 0;
}

static int parse_side(const char *s, const char *name, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 32 || v > 16384 || v % 32 != 0)
    return h3_cli_usage_error("%s must be a multiple of 32 from 32 to 16384, not '%s'", name, s);
  *out = (int)v;
  return 0;
}

int h3_cli_canvas(const char *width, const char *height, int *W, int *H) {
  *W = *H = 0;
  if (!width && !height) return 0;
  if (!width || !height) return h3_cli_usage_error("give both --width and --height, or neither");
  int rc = parse_side(width, "--width", W);
  return rc ? rc : parse_side(height, "--height", H);
}

h3_status h3_cli_read_images(h3_cli_images *im, int W, int H) {
  for (int i = 0; i < im->n; i++) {
    h3_image img = {0};
    h3_image_info info;
    H3_TRY(h3_image_read(im->path[i], NULL, &img, &info));
    H3_LOGI("image %d: %s, %dx%d (%s, %s)", i + 1, im->path[i], img.width, img.height,
            h3_image_format_name(info.format), info.pil_mode);
    if (W > 0 && H > 0 && (img.width != W || img.height != H)) {
      uint8_t *fit = malloc((size_t)W * (size_t)H * 3);
      if (!fit) {
        h3_image_free(&img);
        return h3_fail(H3_ERR_NOMEM, "%s: canvas image", im->path[i]);
      }
      h3_status s = h3_keyframe_fit_rgb8(img.rgb, img.width, img.height, W, H, h3_keyframe_fit_for_index(i), fit);
      h3_image_free(&img);
      if (s != H3_OK) {
        free(fit);
        h3_error_prefix("%s", im->path[i]);
        return s;
      }
      H3_LOGI("image %d: %s onto the %dx%d canvas", i + 1, i == 0 ? "stretched" : "cover-cropped", W, H);
      im->rgb[i] = fit;
      im->w[i] = W;
      im->h[i] = H;
    } else {
      im->rgb[i] = img.rgb;
      im->w[i] = img.width;
      im->h[i] = img.height;
    }
  }
  return H3_OK;
}

void h3_cli_images_free(h3_cli_images *im) {
  for (int i = 0; i < im->n; i++) free(im->rgb[i]);
  memset(im->rgb, 0, sizeof im->rgb);
}

h3_status h3_cli_encode_images(h3_vision_tower *vt, const h3_vt_weights *w, const h3_cli_images *im, h3_vt_pixels *px,
                               h3_vt_output *out) {
  const uint8_t *rgb[H3_CLI_MAX_IMAGES];
  for (int i = 0; i < im->n; i++) rgb[i] = im->rgb[i];
  H3_TRY(h3_vt_process_images(&w->proc, im->n, rgb, im->w, im->h, px));
  for (int i = 0; i < px->n; i++)
    H3_LOGI("image %d: grid (%lld, %lld, %lld) -> %lld vision tokens", i + 1, (long long)px->grid[i][0],
            (long long)px->grid[i][1], (long long)px->grid[i][2], (long long)h3_vt_grid_tokens(px->grid[i], w->proc.merge));
  return h3_vt_forward(vt, px->values, px->rows, (const int64_t(*)[3])px->grid, px->n, NULL, out);
}
