/* libFuzzer target: image input on untrusted keyframe files, as
 * h3_image_decode runs it -- container probing (PNG chunks, JPEG markers,
 * WebP chunks, BMP headers, EXIF / XMP), JPEG through libjpeg-turbo (our
 * error manager, suspending source and scan limit), WebP through libwebp's
 * demuxer and decoder, the PNM reader and the orientation transpositions.
 * Built without FFmpeg: PNG and BMP stop after probing with "needs FFmpeg".
 * Any crash, sanitizer report or leak is a bug; errors are expected. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "media/image_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int quiet;
  if (!quiet) h3_set_log_level(H3_LOG_ERROR), quiet = 1; /* corrupt-JPEG warnings are expected */
  h3_image_read_opts o;
  h3_image_read_opts_default(&o);
  o.max_pixels = 4 << 20; /* keep each run small */
  h3_image img;
  h3_image_info info;
  if (h3_image_decode(data, n, "fuzz", &o, &img, &info) == H3_OK) {
    /* touch every byte, so that uninitialised or short buffers show */
    uint64_t sum = 0;
    const size_t nb = (size_t)img.width * img.height * 3;
    for (size_t i = 0; i < nb; i++) sum += img.rgb[i];
    if (sum > 255u * (uint64_t)nb || img.width < 1 || img.height < 1 || strlen(info.decoder) >= sizeof info.decoder)
      abort();
    h3_image_free(&img);
  }
  return 0;
}
