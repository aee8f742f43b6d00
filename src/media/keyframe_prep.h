/* fl2va keyframe preprocessing as diffusers does it (spec pipeline.md §5.1,
 * fl2va-addendum.md §A.1/§A.3; diffusers modular_pipelines/minimax_h3/
 * before_encoder.py MiniMaxH3ResizeStep and encoders.py
 * encode_vae_condition / MiniMaxH3KeyframeVaeEncoderStep).
 *
 * Geometry (on RGB8 images; convert to RGB first, see image_read.h):
 *   - a keyframe whose size already equals the canvas is used untouched;
 *   - the keyframe at packed index 0 (the first present one: `image`, or a lone
 *     `last_image`) is stretched: PIL resize((W, H), LANCZOS);
 *   - the keyframe at packed index 1 (`last_image` next to `image`) is
 *     cover-resized then centre-cropped: s = max(W / w, H / h) (float64),
 *     (rw, rh) = (max(W, round(w s)), max(H, round(h s))) with Python's round
 *     (half to even), PIL LANCZOS to (rw, rh), crop at
 *     left = max(0, (rw - W) // 2), top = max(0, (rh - H) // 2).
 * The canvas itself comes from the first present keyframe's size through
 * h3_resolve_canvas / h3_request_resolve (src/pipeline/request.h), unless the
 * request gives height and width.
 *
 * Pixels for the video VAE: the canvas-sized RGB8 image as float32
 * (1, 3, 1, H, W) -> x / 255 -> (x - mean_c) / std_c with ImageNet
 * mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225) as float32, every
 * step a separately rounded float32 operation.  The reference runs this on the
 * VAE's device: on CUDA, PyTorch's division by a Python scalar is a multiply
 * by float32(1 / 255) (BinaryDivTrueKernel.cu, "a * reciprocal(b)"); on CPU it
 * is a true division.  The two differ for a few byte values (see the test). */
#ifndef H3_MEDIA_KEYFRAME_PREP_H
#define H3_MEDIA_KEYFRAME_PREP_H

#include <stdint.h>

#include "core/error.h"
#include "media/resize_lanczos.h"

typedef enum h3_keyframe_fit {
  H3_KEYFRAME_STRETCH = 0, /* packed index 0 */
  H3_KEYFRAME_COVER = 1,   /* packed index 1 */
} h3_keyframe_fit;

/* The fit of the keyframe at packed index i (0 or 1). */
static inline h3_keyframe_fit h3_keyframe_fit_for_index(int index) {
  return index == 0 ? H3_KEYFRAME_STRETCH : H3_KEYFRAME_COVER;
}

/* How x / 255 is evaluated (see above). */
typedef enum h3_pixel_div_rule {
  H3_PIXEL_DIV_CUDA = 0, /* x * float32(1 / 255): the reference on a GPU (default) */
  H3_PIXEL_DIV_CPU = 1,  /* x / 255: the reference on a CPU */
} h3_pixel_div_rule;

/* The cover rule's resize target and crop origin for a w x h source on a
 * W x H canvas. */
h3_status h3_keyframe_cover_geometry(int w, int h, int W, int H, int *rw, int *rh, int *left, int *top);

/* The canvas-sized RGB8 keyframe: dst is H x W x 3. */
h3_status h3_keyframe_fit_rgb8(const uint8_t *src, int w, int h, int W, int H, h3_keyframe_fit fit, uint8_t *dst);
/* As above with an explicit Pillow rule set (tests against older Pillow). */
h3_status h3_keyframe_fit_rgb8_ex(const uint8_t *src, int w, int h, int W, int H, h3_keyframe_fit fit,
                                  h3_pil_resize_rules rules, uint8_t *dst);

/* The VAE's pixels: rgb (H x W x 3) -> out planar float32 (3, H, W), i.e. the
 * reference's (1, 3, 1, H, W) tensor. */
void h3_keyframe_normalise(const uint8_t *rgb, int W, int H, h3_pixel_div_rule rule, float *out);

/* Both steps: canvas_rgb (H x W x 3, may be NULL) and pixels (3 x H x W). */
h3_status h3_keyframe_prepare(const uint8_t *src, int w, int h, int W, int H, h3_keyframe_fit fit,
                              h3_pixel_div_rule rule, uint8_t *canvas_rgb, float *pixels);

#endif
