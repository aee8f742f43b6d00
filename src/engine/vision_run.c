#include "engine/vision_run.h"

#include <stdio.h>

#include "engine/mem_check.h"

h3_status h3_vision_run(h3_backend *be, h3_vision_tower *vt, const h3_vt_weights *vw, const float *pixels,
                        int64_t rows, const int64_t grid[3], const char *what, h3_vt_output *vo) {
  int64_t lv[H3_VT_MAX_DEEPSTACK];
  int mi[H3_VT_MAX_DEEPSTACK];
  const int levels = h3_vt_deepstack_levels(&vw->cfg, lv, mi);
  char msg[240];
  snprintf(msg, sizeof msg, "the vision tower's activations for %s (%lld patches)", what, (long long)rows);
  H3_TRY(h3_mem_check(be, h3_vt_plan_bytes(vt, rows, levels), msg));
  const int64_t g[1][3] = {{grid[0], grid[1], grid[2]}};
  H3_TRY(h3_vt_forward(vt, pixels, rows, g, 1, NULL, vo));
  if (vo->tokens != h3_vt_grid_tokens(grid, vw->proc.merge))
    return h3_fail(H3_ERR_INTERNAL, "vision tower: %lld tokens for grid (%lld, %lld, %lld)", (long long)vo->tokens,
                   (long long)grid[0], (long long)grid[1], (long long)grid[2]);
  return H3_OK;
}
