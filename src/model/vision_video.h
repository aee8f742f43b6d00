/* The Qwen3-VL VIDEO path of a ref2va video reference (spec pipeline.md §6,
 * ref2va-addendum.md §B.3; diffusers encoders.py
 * MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames /
 * _gather_vision_features; transformers models/qwen3_vl/
 * video_processing_qwen3_vl.py Qwen3VLVideoProcessor):
 *
 *   sampling   the normalised 24-fps frames read at 2 fps: cursor = 0, 12, 24,
 *              ... (stride fps / sample_fps), index round(cursor) while < n,
 *              deduplicated; fewer than temporal_patch (2) indices is refused
 *              ("must run at least 13 frames"); timestamps c / 2 s, the last
 *              repeated to fill a pair, one per block: the mean of its pair,
 *              labelled "<%.1f seconds>" (Python's format: the exact binary
 *              value rounded half to even, as glibc's printf does);
 *   processor  video_preprocessor_config.json (required: its class defaults
 *              are not the release's, §B.3), do_sample_frames=False,
 *              cap_pixels_per_frame False: smart_resize(num_frames, H, W,
 *              temporal_factor = temporal_patch, factor = patch * merge,
 *              size.shortest_edge, size.longest_edge) -- sides under factor
 *              scaled up first (int() truncation), round-to-factor, budget
 *              t_bar h w with t_bar = round(n / 2) * 2, beta = sqrt(n H W /
 *              max) -- torchvision BICUBIC antialiased uint8 resize of every
 *              frame (media/resize_bicubic_aa.h), fused rescale + normalize in
 *              f32 as the image processor, the last frame repeated to an even
 *              count, patches permuted (t, gh/m, gw/m, m, m, C, T, P, P):
 *              row ((t (gh/m) + R) (gw/m) + Q) m^2 + a m + b, column
 *              ((c T + s) P + y) P + x; video_grid_thw (n_pad / T, gh, gw);
 *   check      grid t must equal the number of block timestamps (encoders.py
 *              raises otherwise).
 * The tower (vision_tower.h) takes the grid as it is: t > 1 repeats the
 * position-embedding interpolation and the 2-D rotary per temporal group and
 * attends within each group (cu_seqlens). */
#ifndef H3_MODEL_VISION_VIDEO_H
#define H3_MODEL_VISION_VIDEO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "model/vision_tower.h"

/* video_preprocessor_config.json with Qwen3VLVideoProcessor's class defaults
 * for absent fields (patch 16, temporal 2, merge 2, size {131072, 786432},
 * mean / std 0.5, rescale 1/255, BICUBIC); `video_processor_type`, when
 * present, must be "Qwen3VLVideoProcessor". */
h3_status h3_vt_video_proc_config_from_json(const json_t *root, const char *label, h3_vt_proc_config *out);
h3_status h3_vt_video_proc_config_load(const char *path, h3_vt_proc_config *out);
/* video_preprocessor_config.json in the folder of the image processor's file
 * (p->label); H3_ERR_NOT_FOUND naming it when absent. */
h3_status h3_vt_video_proc_locate(const h3_vt_proc_config *image_proc, char *out, size_t cap);

/* transformers' video smart_resize (see above); H3_ERR_INVALID as it raises. */
h3_status h3_vt_smart_resize_video(int64_t num_frames, int64_t height, int64_t width, int64_t temporal_factor,
                                   int64_t factor, int64_t min_pixels, int64_t max_pixels, int64_t *out_h,
                                   int64_t *out_w);

/* The 2-fps sampling: indices[*n_idx] (cap entries at most) of an n-frame
 * video at `fps`, block timestamps ts[*n_blocks] (cap_blocks at most).
 * `name` labels errors. */
h3_status h3_vt_video_sample(int64_t n, double fps, double sample_fps, int64_t temporal_patch, const char *name,
                             int64_t *indices, int cap, int *n_idx, double *ts, int cap_blocks, int *n_blocks);
/* "<%.1f seconds>" of a block timestamp. */
void h3_vt_video_label(double ts, char out[32]);

/* One video (n frames, each w x h RGB8, frames[i] pointing at frame i)
 * through the processor: pixel_values_videos [rows, 3 T P P] (malloc'd) and
 * video_grid_thw. */
h3_status h3_vt_process_video(const h3_vt_proc_config *p, const uint8_t *const *frames, int n, int w, int h,
                              float **values, int64_t *rows, int64_t grid[3]);

#endif
