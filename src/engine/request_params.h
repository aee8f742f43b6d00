/* The request a job runs, from its params: every default resolved here and
 * only here (the release's, or the built-in toy's small ones), the
 * reference's request rules applied (pipeline/request.c), the refusals
 * phrased in the user's terms (option names, seconds). */
#ifndef H3_ENGINE_REQUEST_PARAMS_H
#define H3_ENGINE_REQUEST_PARAMS_H

#include <stdbool.h>

#include "h3/h3.h"
#include "pipeline/request.h"

/* The built-in toy's defaults (the release's are 124 frames at 1344x768, 50 steps). */
#define H3_TOY_FRAMES 22
#define H3_TOY_SIZE 256
#define H3_TOY_STEPS 4

/* The toy's canvas rule for keyframes without a size: the release's rule
 * (768 short edge, 768x1344 area) at a third of the scale. */
#define H3_TOY_CANVAS_SHORT_EDGE 256
#define H3_TOY_CANVAS_MAX_PIXELS (256 * 448)
/* The toy's short edge for image references (the release's is 2048). */
#define H3_TOY_REF_IMAGE_SHORT_EDGE 128

/* The keyframes' sizes as load_image gives them (after orientation), and how
 * to name each in messages ("--first-frame photo.png"). */
typedef struct h3_keyframe_dims {
  bool first, last;
  int first_w, first_h, last_w, last_h;
  const char *first_name, *last_name;
} h3_keyframe_dims;

/* Keyframes' sizes are read from the files' headers (media/image_read.h
 * h3_image_size_buffer). */
h3_status h3_params_to_request(const h3_gen_params *p, bool toy, h3_request *q, h3_resolved_request *rr);
/* With the sizes given (kd NULL: no keyframes). */
h3_status h3_params_to_request_ex(const h3_gen_params *p, bool toy, const h3_keyframe_dims *kd, h3_request *q,
                                  h3_resolved_request *rr);
/* ref2va: the references' kinds in request order (the set rules and the
 * workflow); without a frame count the release's default (124) is taken (the
 * reference has none: an engine default). */
h3_status h3_params_to_request_refs(const h3_gen_params *p, bool toy, const h3_request_ref *refs, int n_refs,
                                    h3_request *q, h3_resolved_request *rr);
/* The size of a keyframe file (h3_image_size_buffer); errors name `option path`. */
h3_status h3_keyframe_file_size(const char *path, const char *option, int *w, int *h);

#endif
