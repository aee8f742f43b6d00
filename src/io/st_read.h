/* Reading whole tensors of a safetensors set into host arrays, converted to
 * f32 or i64, with the checks a stage input needs. */
#ifndef H3_IO_ST_READ_H
#define H3_IO_ST_READ_H

#include "io/safetensors.h"

/* Any float dtype -> f32 (malloc'd; free with free()).  `shape` receives the
 * stored shape.  Missing tensor: H3_ERR_NOT_FOUND naming file and tensor. */
h3_status h3_st_read_f32(const h3_st_set *s, const char *name, float **out, h3_tensor *shape);
/* Any integer dtype -> i64. */
h3_status h3_st_read_i64(const h3_st_set *s, const char *name, int64_t **out, h3_tensor *shape);
/* Check a shape; dims < 0 in `want` match anything.  Error names file and tensor. */
h3_status h3_st_check_shape(const h3_st_set *s, const char *name, const h3_tensor *got, int ndim,
                            const int64_t *want);

#endif
