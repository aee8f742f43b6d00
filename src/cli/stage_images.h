/* The keyframe images of the vision stages (vision-encode, text-encode
 * --image): repeatable --image options, reading as diffusers' load_image
 * (media/image_read.h), the optional fit onto a canvas
 * (media/keyframe_prep.h: index 0 stretched, index 1 cover-cropped), and the
 * image processor + vision tower run on them. */
#ifndef H3_CLI_STAGE_IMAGES_H
#define H3_CLI_STAGE_IMAGES_H

#include <stdint.h>

#include "model/vision_tower.h"

#define H3_CLI_MAX_IMAGES 2 /* fl2va: the first and the last keyframe */

typedef struct h3_cli_images {
  int n;
  const char *path[H3_CLI_MAX_IMAGES];
  uint8_t *rgb[H3_CLI_MAX_IMAGES];
  int w[H3_CLI_MAX_IMAGES], h[H3_CLI_MAX_IMAGES];
} h3_cli_images;

/* Move every "--image PATH" / "--image=PATH" out of argv (in order) into im;
 * *argc shrinks accordingly.  Returns 0, or 2 after a usage error (too many,
 * a missing value). */
int h3_cli_take_images(int *argc, char **argv, h3_cli_images *im);
/* Parse "--width W --height H" values (both or neither; NULL: not given);
 * 0 / 0 when not given.  Returns 0 or 2 after a usage error. */
int h3_cli_canvas(const char *width, const char *height, int *W, int *H);
/* Read the images; with a canvas (W, H > 0) fit each onto it as the fl2va
 * resize step does (packed index 0 stretched, 1 cover-cropped). */
h3_status h3_cli_read_images(h3_cli_images *im, int W, int H);
void h3_cli_images_free(h3_cli_images *im);

/* Processor + tower on the images: px and out receive the batch. */
h3_status h3_cli_encode_images(h3_vision_tower *vt, const h3_vt_weights *w, const h3_cli_images *im, h3_vt_pixels *px,
                               h3_vt_output *out);

#endif
