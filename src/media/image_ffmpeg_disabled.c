/* Built with -DH3_MEDIA=OFF (no FFmpeg): PNG and BMP input is not
 * available; JPEG (libjpeg-turbo), WebP (libwebp) and PNM input still is. */
#include "media/image_ffmpeg.h"

h3_status h3_ffmpeg_image_decode(const uint8_t *data, size_t n, h3_image_codec codec, const char *name,
                                 int64_t max_pixels, int pal_entries, int pal_ramp, int *w, int *h, uint8_t **rgb,
                                 char *pix_fmt, size_t cap) {
  (void)data, (void)n, (void)max_pixels, (void)pal_entries, (void)pal_ramp, (void)w, (void)h, (void)pix_fmt, (void)cap;
  *rgb = 0;
  static const char *names[] = {"PNG", "BMP"};
  return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s input needs FFmpeg; this h3 was built without it (-DH3_MEDIA=OFF)", name,
                 names[codec == H3_IMAGE_CODEC_BMP]);
}
