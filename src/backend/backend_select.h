/* Choosing a backend by name: "cpu", "cuda" (device 0) or "cuda:N", or NULL /
 * "auto" for CUDA when this build has it and a device is present, else CPU. */
#ifndef H3_BACKEND_SELECT_H
#define H3_BACKEND_SELECT_H

#include "backend/backend.h"

h3_status h3_backend_create_named(const char *name, h3_backend **out);
/* Whether this build includes the CUDA backend. */
int h3_backend_has_cuda(void);

#endif
