/* The vision tower on one processed image or video, as the keyframes, the image references and the video
 * references run it: the memory check of its activations in the tower's own precision, the forward, and the
 * token count the grid must give. */
#ifndef H3_ENGINE_VISION_RUN_H
#define H3_ENGINE_VISION_RUN_H

#include <stdint.h>

#include "backend/backend.h"
#include "core/error.h"
#include "model/vision_tower.h"

/* pixels [rows, ...] for ONE grid (t, gh, gw); `what` names the input in the memory message ("a 1344x768
 * keyframe"); *vo receives the outputs (the caller frees them with h3_vt_output_free, also on failure). */
h3_status h3_vision_run(h3_backend *be, h3_vision_tower *vt, const h3_vt_weights *vw, const float *pixels,
                        int64_t rows, const int64_t grid[3], const char *what, h3_vt_output *vo);

#endif
