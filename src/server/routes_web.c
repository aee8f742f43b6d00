/* The web gallery's routes: / and /g/{id} answer the UI's page (the same
 * page: the UI reads the path), /assets/... its scripts and styles, from the
 * files built into the binary (web.h), gzipped for clients that take it.  The
 * page is never cached (a new build shows at the next load); the assets have
 * content hashes in their names and are cached for good. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/routes.h"
#include "server/web.h"

const h3_web_file *h3_web_find(const char *path) {
  for (int i = 0; i < h3_web_n_files; i++)
    if (!strcmp(h3_web_files[i].path, path)) return &h3_web_files[i];
  return NULL;
}

/* Does the client take gzip?  An Accept-Encoding entry "gzip" (or "*") whose q is not 0. */
static bool takes_gzip(h3_req *r) {
  const char *ae = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept-Encoding");
  for (const char *p = ae; p && *p;) {
    while (*p == ' ' || *p == ',') p++;
    const size_t n = strcspn(p, " ;,");
    const bool name = (n == 4 && !strncasecmp(p, "gzip", 4)) || (n == 1 && *p == '*');
    const char *end = p + strcspn(p, ",");
    double q = 1;
    const char *qs = strstr(p, "q=");
    if (qs && qs < end) q = strtod(qs + 2, NULL);
    if (name && q > 0) return true;
    p = end;
  }
  return false;
}

static enum MHD_Result send_file(h3_req *r, const h3_web_file *f, bool immutable) {
  const bool gz = f->gz && takes_gzip(r);
  struct MHD_Response *resp = MHD_create_response_from_buffer(gz ? f->gz_len : f->len,
                                                              (void *)(gz ? f->gz : f->data), MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", f->mime);
  if (f->gz) MHD_add_response_header(resp, "Vary", "Accept-Encoding");
  if (gz) MHD_add_response_header(resp, "Content-Encoding", "gzip");
  MHD_add_response_header(resp, "Cache-Control", immutable ? "public, max-age=31536000, immutable" : "no-store");
  h3_http_common_headers(r, resp, true);
  enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
  MHD_destroy_response(resp);
  return ret;
}

enum MHD_Result h3_r_app(h3_req *r) {
  const h3_web_file *f = h3_web_find("/index.html");
  if (!f) return h3_http_error(r, 500, NULL, "the web UI has no index.html");
  return send_file(r, f, false);
}

enum MHD_Result h3_r_asset(h3_req *r) {
  char path[1100];
  snprintf(path, sizeof path, "/assets/%s", r->rest);
  const h3_web_file *f = h3_web_find(path);
  if (!f)
    return h3_http_error(r, 404, NULL, h3_web_built ? "no asset '%s'" : "no asset '%s' (the web UI was not built)",
                         path);
  return send_file(r, f, true);
}
