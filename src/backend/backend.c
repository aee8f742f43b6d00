#include "backend/backend.h"

void h3_backend_destroy(h3_backend *be) {
  if (be && be->ops && be->ops->destroy) be->ops->destroy(be);
}
