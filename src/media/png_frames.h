/* Frames as PNG files: DIR/frame_00000.png, frame_00001.png, ... (RGB, 8 bit),
 * encoded with FFmpeg's PNG encoder.  The folder is created (mkdir -p); every
 * file is written atomically ("<file>.tmp.<pid>" then rename; removed on failure).
 * Float frames are converted to uint8 with the reference's rule (media.h). */
#ifndef H3_MEDIA_PNG_FRAMES_H
#define H3_MEDIA_PNG_FRAMES_H

#include "media/media.h"

/* Writes frame i of `frames` as DIR/frame_%05d.png with number first_index + i,
 * so a streaming decoder can write chunk by chunk.  On failure the files
 * already written stay (each is complete); the failing one is not left behind. */
h3_status h3_png_write_frames(const char *dir, const h3_video_frames *frames, int first_index);

/* One RGB8 image (rows top to bottom, 3 bytes per pixel, tightly packed) as a
 * PNG in memory: *out malloc'd (free()), *n its bytes. */
h3_status h3_png_encode_rgb8(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *n);

#endif
