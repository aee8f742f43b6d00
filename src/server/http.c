/* The daemon (libmicrohttpd, a thread per connection: an event stream may
 * block in its reader while the others answer), the routing table, the API
 * key, body limits and the answer helpers (http.h). */
#include "server/http.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "server/routes.h"
#include "server/uploads.h"

static const h3_route k_routes[] = {
    {"POST", "/v1/videos", H3_BODY_FORM, h3_v1_create},
    {"GET", "/v1/videos", H3_BODY_NONE, h3_v1_list},
    {"GET", "/v1/videos/{}", H3_BODY_NONE, h3_v1_get},
    {"DELETE", "/v1/videos/{}", H3_BODY_NONE, h3_v1_delete},
    {"GET", "/v1/videos/{}/content", H3_BODY_NONE, h3_v1_content},
    {"POST", "/api/ai/queue", H3_BODY_JSON, h3_q_create},
    {"GET", "/api/ai/queue", H3_BODY_NONE, h3_q_list},
    {"GET", "/api/ai/queue/{}", H3_BODY_NONE, h3_q_get},
    {"PATCH", "/api/ai/queue/{}", H3_BODY_JSON, h3_q_patch},
    {"DELETE", "/api/ai/queue/{}", H3_BODY_NONE, h3_q_delete},
    {"POST", "/api/images", H3_BODY_UPLOAD, h3_q_upload},
    {"GET", "/api/events", H3_BODY_NONE, h3_r_events},
    {"GET", "/api/files/{*}", H3_BODY_NONE, h3_r_files},
    {"GET", "/api/status", H3_BODY_NONE, h3_r_status},
    {"GET", "/health", H3_BODY_NONE, h3_r_health},
    {"GET", "/api/loras", H3_BODY_NONE, h3_r_loras},
    {"GET", "/openapi.json", H3_BODY_NONE, h3_r_openapi},
    {"GET", "/g/{}", H3_BODY_NONE, h3_r_app},
    {"GET", "/", H3_BODY_NONE, h3_r_app},
    {"GET", "/assets/{*}", H3_BODY_NONE, h3_r_asset},
};
#define N_ROUTES (sizeof k_routes / sizeof *k_routes)

/* Routes anyone may ask for: the health check, and the web UI's page and assets (static files without
 * data: the API calls it makes carry the key). */
static bool is_public(const h3_route *rt) {
  return rt && (rt->fn == h3_r_health || rt->fn == h3_r_app || rt->fn == h3_r_asset);
}

/* ---- answers ---- */

void h3_http_common_headers(h3_req *r, struct MHD_Response *resp, bool cache) {
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  if (!cache) MHD_add_response_header(resp, "Cache-Control", "no-store");
  if (r->srv->cfg.cors_origin) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->srv->cfg.cors_origin);
    MHD_add_response_header(resp, "Vary", "Origin");
  }
}

static enum MHD_Result queue(h3_req *r, unsigned code, struct MHD_Response *resp) {
  if (code >= 400) h3_multipart_discard(r->mp); /* a refused upload leaves nothing by the time it is answered */
  if (!resp) return MHD_NO;
  enum MHD_Result ret = MHD_queue_response(r->conn, code, resp);
  MHD_destroy_response(resp);
  return ret;
}

enum MHD_Result h3_http_json(h3_req *r, unsigned code, json_t *body) {
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  if (!text) return MHD_NO;
  size_t n = strlen(text);
  char *t = realloc(text, n + 2); /* a final newline, as curl users expect */
  if (t) {
    text = t;
    text[n++] = '\n';
    text[n] = 0;
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  h3_http_common_headers(r, resp, false);
  return queue(r, code, resp);
}

static const char *error_type(unsigned code) {
  switch (code) {
  case 401: return "authentication_error";
  case 403: return "permission_error";
  case 404: return "not_found_error";
  case 405: return "method_not_allowed";
  case 409: return "conflict_error";
  case 413: return "request_too_large";
  case 415: return "unsupported_media_type";
  case 429: return "rate_limit_error";
  case 503: return "server_unavailable";
  default: return code >= 500 ? "server_error" : "invalid_request_error";
  }
}

/* The engine's messages speak the command line ("--size 100x100: ..."): the API's names have no dashes. */
static void api_terms(char *msg) {
  char *w = msg, prev = ' ';
  const char *p = msg;
  while (*p) {
    if (p[0] == '-' && p[1] == '-' && islower((unsigned char)p[2]) && (prev == ' ' || prev == '(' || prev == '/')) {
      p += 2;
      while (islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '_') {
        prev = *p;
        *w++ = *p == '-' ? '_' : *p;
        p++;
      }
      continue;
    }
    prev = *p;
    *w++ = *p++;
  }
  *w = 0;
}

static enum MHD_Result error_v(h3_req *r, unsigned code, const char *param, const char *extra_header,
                               const char *extra_value, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  api_terms(msg);
  if (code == 500 && h3_store_unavailable()) { /* a shared store between reconnects: not our fault, retry */
    code = 503;
    if (!extra_header) extra_header = "Retry-After", extra_value = "1";
  }
  json_t *e = json_pack("{s:s, s:s}", "message", msg, "type", error_type(code));
  json_object_set_new(e, "param", param ? json_string(param) : json_null());
  json_object_set_new(e, "code", json_null());
  json_t *body = json_pack("{s:o}", "error", e);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (!text) return MHD_NO;
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  if (extra_header) MHD_add_response_header(resp, extra_header, extra_value);
  h3_http_common_headers(r, resp, false);
  if (r->srv->cfg.verbose) H3_LOGI("%s %s -> %u %s", r->method, r->url, code, msg);
  return queue(r, code, resp);
}

enum MHD_Result h3_http_error(h3_req *r, unsigned code, const char *param, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  enum MHD_Result ret = error_v(r, code, param, NULL, NULL, fmt, ap);
  va_end(ap);
  return ret;
}

static enum MHD_Result error_with(h3_req *r, unsigned code, const char *hname, const char *hvalue, const char *fmt,
                                  ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result error_with(h3_req *r, unsigned code, const char *hname, const char *hvalue, const char *fmt,
                                  ...) {
  va_list ap;
  va_start(ap, fmt);
  enum MHD_Result ret = error_v(r, code, NULL, hname, hvalue, fmt, ap);
  va_end(ap);
  return ret;
}

enum MHD_Result h3_http_status_error(h3_req *r, h3_status st, const char *param) {
  const char *m = h3_last_error();
  switch (st) {
  case H3_ERR_INVALID:
  case H3_ERR_FORMAT:
    return h3_http_error(r, 400, param, "%s", m);
  case H3_ERR_NOT_FOUND:
    return h3_http_error(r, 404, param, "%s", m);
  case H3_ERR_UNSUPPORTED:
    return h3_http_error(r, 400, param, "%s", m);
  case H3_ERR_NOMEM:
    return h3_http_error(r, 503, param, "%s", m);
  default:
    if (h3_store_unavailable()) /* a shared store between reconnects: try again */
      return h3_http_error(r, 503, param, "%s", m);
    H3_LOGW("%s %s: %s", r->method, r->url, m);
    return h3_http_error(r, 500, param, "%s", m);
  }
}

enum MHD_Result h3_http_text(h3_req *r, unsigned code, const char *mime, const char *text) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", mime);
  h3_http_common_headers(r, resp, false);
  return queue(r, code, resp);
}

const char *h3_http_query(h3_req *r, const char *key) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

json_t *h3_http_body_object(h3_req *r, enum MHD_Result *ret) {
  if (!r->body || !r->body_len) {
    *ret = h3_http_error(r, 400, NULL, "the request needs a JSON object body");
    return NULL;
  }
  json_error_t err;
  json_t *o = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &err);
  if (!o) {
    *ret = h3_http_error(r, 400, NULL, "malformed JSON: %s (line %d, column %d)", err.text, err.line, err.column);
    return NULL;
  }
  if (!json_is_object(o)) {
    json_decref(o);
    *ret = h3_http_error(r, 400, NULL, "the body must be a JSON object");
    return NULL;
  }
  return o;
}

/* "bytes=A-B", "bytes=A-", "bytes=-N" against a file of `size` bytes: 1 ok, 0 none given, -1 unsatisfiable. */
static int parse_range(const char *h, int64_t size, int64_t *a, int64_t *b) {
  if (!h) return 0;
  if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ',')) return 0; /* other units, several ranges: the whole file */
  const char *p = h + 6;
  char *end;
  if (*p == '-') {
    long long n = strtoll(p + 1, &end, 10);
    if (end == p + 1 || *end || n <= 0) return -1;
    *a = size > n ? size - n : 0;
    *b = size - 1;
  } else {
    long long x = strtoll(p, &end, 10);
    if (end == p || *end != '-' || x < 0) return -1;
    *a = x;
    const char *q = end + 1;
    if (!*q) {
      *b = size - 1;
    } else {
      long long y = strtoll(q, &end, 10);
      if (end == q || *end || y < x) return -1;
      *b = y < size ? y : size - 1;
    }
  }
  return *a < size ? 1 : -1;
}

enum MHD_Result h3_http_file(h3_req *r, const char *path, const char *mime) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return h3_http_error(r, 404, NULL, "no such file");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return h3_http_error(r, 404, NULL, "no such file");
  }
  int64_t a = 0, b = st.st_size - 1;
  const int rg = parse_range(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Range"), st.st_size, &a, &b);
  if (rg < 0) {
    close(fd);
    char cr[64];
    snprintf(cr, sizeof cr, "bytes */%lld", (long long)st.st_size);
    return error_with(r, 416, "Content-Range", cr, "the range is outside the file (%lld bytes)",
                      (long long)st.st_size);
  }
  const uint64_t len = st.st_size ? (uint64_t)(b - a + 1) : 0;
  struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, fd, (uint64_t)a);
  if (!resp) {
    close(fd);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", mime);
  MHD_add_response_header(resp, "Accept-Ranges", "bytes");
  if (rg > 0) {
    char cr[96];
    snprintf(cr, sizeof cr, "bytes %lld-%lld/%lld", (long long)a, (long long)b, (long long)st.st_size);
    MHD_add_response_header(resp, "Content-Range", cr);
  }
  h3_http_common_headers(r, resp, true);
  return queue(r, rg > 0 ? 206 : 200, resp);
}

/* ---- routing ---- */

/* 1 when `path` matches `pattern` (captures into r), 0 otherwise. */
static int match(const char *pattern, const char *path, h3_req *r) {
  int k = 0;
  const char *p = pattern, *u = path;
  while (*p && *u) {
    if (p[0] == '{' && p[1] == '*') {
      size_t n = strlen(u);
      if (!n || n >= sizeof r->rest) return 0;
      memcpy(r->rest, u, n + 1);
      return 1;
    }
    if (p[0] == '{') {
      const char *slash = strchr(u, '/');
      size_t n = slash ? (size_t)(slash - u) : strlen(u);
      if (!n || n >= sizeof r->arg[0] || k >= 2) return 0;
      memcpy(r->arg[k], u, n);
      r->arg[k][n] = 0;
      k++;
      u += n;
      p += 2;
      continue;
    }
    if (*p != *u) return 0;
    p++;
    u++;
  }
  if (*u == '/' && !u[1] && !*p && u != path) u++; /* one trailing slash */
  return !*p && !*u;
}

static const h3_route *route_of(h3_req *r, const char *method, const char *path, char *allow, size_t cap) {
  const h3_route *hit = NULL;
  size_t k = 0;
  allow[0] = 0;
  const char *m = !strcmp(method, "HEAD") ? "GET" : method;
  for (size_t i = 0; i < N_ROUTES; i++) {
    h3_req tmp;
    memset(&tmp.arg, 0, sizeof tmp.arg);
    if (!match(k_routes[i].pattern, path, &tmp)) continue;
    if (!strstr(allow, k_routes[i].method))
      k += (size_t)snprintf(allow + k, k < cap ? cap - k : 0, "%s%s", k ? ", " : "", k_routes[i].method);
    if (!hit && !strcmp(k_routes[i].method, m)) {
      hit = &k_routes[i];
      match(hit->pattern, path, r);
    }
  }
  return hit;
}

/* Constant-time comparison of the bearer token. */
static bool key_ok(const char *have, const char *want) {
  size_t n = strlen(want), m = have ? strlen(have) : 0;
  unsigned char d = (unsigned char)(n != m);
  for (size_t i = 0; i < n; i++) d |= (unsigned char)(want[i] ^ (i < m ? have[i] : 0));
  return d == 0;
}

static bool authorized(h3_req *r) {
  const char *key = r->srv->cfg.api_key;
  if (!key || !*key) return true;
  const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
  h += 7;
  while (*h == ' ') h++;
  return key_ok(h, key);
}

static bool has_dotdot(const char *path) {
  for (const char *p = path; (p = strstr(p, "..")); p += 2)
    if ((p == path || p[-1] == '/') && (p[2] == '/' || !p[2])) return true;
  return false;
}

static bool content_type_is(h3_req *r, const char *prefix) {
  const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
  return ct && !strncasecmp(ct, prefix, strlen(prefix));
}

/* An answer decided before the body: at once when there is none, else after reading (and dropping) it, so
 * that a client still writing its body reads the answer instead of a broken pipe. */
static enum MHD_Result early(h3_req *r, bool *answered, unsigned code, const char *hname, const char *hvalue,
                             const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result early(h3_req *r, bool *answered, unsigned code, const char *hname, const char *hvalue,
                             const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
  const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Transfer-Encoding");
  const bool body = (cl && strtoll(cl, NULL, 10) > 0) || (te && (strstr(te, "chunked") || strstr(te, "Chunked")));
  if (!body) return error_with(r, code, hname, hvalue, "%s", msg);
  r->deferred_code = code;
  snprintf(r->deferred_msg, sizeof r->deferred_msg, "%s", msg);
  if (hname) {
    snprintf(r->deferred_hname, sizeof r->deferred_hname, "%s", hname);
    snprintf(r->deferred_hvalue, sizeof r->deferred_hvalue, "%s", hvalue);
  }
  *answered = false;
  return MHD_YES;
}

/* The first call of a request: route, key, limits, body set-up.  Returns MHD_YES with *answered false to go
 * on reading the body. */
static enum MHD_Result begin(h3_req *r, bool *answered) {
  *answered = true;
  h3_srv *s = r->srv;
  if (atomic_load(&s->stopping)) return h3_http_error(r, 503, NULL, "the server is shutting down");
  char path[2048];
  snprintf(path, sizeof path, "%s", r->url);
  if (strlen(r->url) >= sizeof path) return h3_http_error(r, 414, NULL, "the path is too long");
  if (has_dotdot(path) || strchr(path, '\\')) return h3_http_error(r, 400, NULL, "'..' is not allowed in paths");
  if (s->cfg.cors_origin && !strcmp(r->method, "OPTIONS")) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    h3_http_common_headers(r, resp, false);
    return queue(r, 204, resp);
  }
  char allow[128];
  r->route = route_of(r, r->method, path, allow, sizeof allow);
  const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
  const int64_t len = cl ? strtoll(cl, NULL, 10) : -1;
  /* A body over a limit is refused; one within the drain bound is read and dropped first, so the client,
   * still sending, is not reset before it can read the answer (an early close makes its socket send RST) */
  const int64_t drain = s->cfg.max_upload_bytes + ((int64_t)64 << 20);
  if (len > s->cfg.max_upload_bytes + 65536) {
    if (len <= drain)
      return early(r, answered, 413, NULL, NULL, "the body (%lld bytes) is over the server's limit", (long long)len);
    return h3_http_error(r, 413, NULL, "the body (%lld bytes) is over the server's limit", (long long)len);
  }
  if (!is_public(r->route) && !authorized(r))
    return early(r, answered, 401, "WWW-Authenticate", "Bearer", "missing or wrong API key (Authorization: Bearer KEY)");
  if (!r->route) {
    if (*allow)
      return early(r, answered, 405, "Allow", allow, "%s is not allowed on %s (allowed: %s)", r->method, path, allow);
    return early(r, answered, 404, NULL, NULL, "no route %s", path);
  }
  const h3_body_kind bk = r->route->body;
  const bool multipart = content_type_is(r, "multipart/form-data");
  int64_t limit = bk == H3_BODY_JSON || (bk == H3_BODY_FORM && !multipart) ? s->cfg.max_body_bytes
                  : bk == H3_BODY_NONE                                      ? 65536
                                                                            : s->cfg.max_upload_bytes + 65536;
  if (len > limit) {
    if (len <= drain)
      return early(r, answered, 413, NULL, NULL, "the body (%lld bytes) is over this route's limit of %lld bytes",
                   (long long)len, (long long)limit);
    return h3_http_error(r, 413, NULL, "the body (%lld bytes) is over this route's limit of %lld bytes",
                         (long long)len, (long long)limit);
  }
  if (bk == H3_BODY_UPLOAD && !multipart)
    return early(r, answered, 415, NULL, NULL, "this route takes multipart/form-data (files)");
  if (bk == H3_BODY_JSON && multipart) return early(r, answered, 415, NULL, NULL, "this route takes a JSON body");
  if ((bk == H3_BODY_FORM || bk == H3_BODY_UPLOAD) && multipart) {
    h3_status st = h3_multipart_new(s, &r->mp);
    if (st != H3_OK) return h3_http_status_error(r, st, NULL);
    r->pp = MHD_create_post_processor(r->conn, 65536, h3_multipart_iterator, r->mp);
    if (!r->pp) return h3_http_error(r, 400, NULL, "malformed multipart/form-data (no boundary?)");
  } else if (bk == H3_BODY_JSON || bk == H3_BODY_FORM) {
    r->json_body = true;
  }
  *answered = false;
  return MHD_YES;
}

static void defer(h3_req *r, unsigned code, const char *msg) {
  if (r->deferred_code) return;
  r->deferred_code = code;
  snprintf(r->deferred_msg, sizeof r->deferred_msg, "%s", msg);
}

static enum MHD_Result body_chunk(h3_req *r, const char *data, size_t n) {
  if (r->deferred_code) { /* the answer is decided: drop the rest, up to a bound */
    r->discarded += (int64_t)n;
    return r->discarded > r->srv->cfg.max_upload_bytes + ((int64_t)64 << 20) ? MHD_NO : MHD_YES;
  }
  if (r->pp) {
    if (MHD_post_process(r->pp, data, n) != MHD_YES) {
      unsigned code = 400;
      const char *msg = h3_multipart_error(r->mp, &code);
      defer(r, code, msg ? msg : "malformed multipart/form-data");
    }
    return MHD_YES;
  }
  if (!r->json_body) {
    r->discarded += (int64_t)n;
    if (r->discarded > 65536) defer(r, 413, "this route takes no body");
    return MHD_YES;
  }
  if ((int64_t)(r->body_len + n) > r->srv->cfg.max_body_bytes) {
    char m[128];
    snprintf(m, sizeof m, "the body is over this route's limit of %lld bytes", (long long)r->srv->cfg.max_body_bytes);
    defer(r, 413, m);
    return MHD_YES;
  }
  if (r->body_len + n + 1 > r->body_cap) {
    size_t cap = r->body_cap ? r->body_cap : 4096;
    while (cap < r->body_len + n + 1) cap *= 2;
    char *b = realloc(r->body, cap);
    if (!b) {
      defer(r, 503, "out of memory");
      return MHD_YES;
    }
    r->body = b;
    r->body_cap = cap;
  }
  memcpy(r->body + r->body_len, data, n);
  r->body_len += n;
  r->body[r->body_len] = 0;
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  (void)version;
  h3_srv *s = cls;
  h3_req *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->srv = s;
    r->conn = conn;
    r->method = method;
    r->url = url;
    r->t0 = h3_srv_now();
    *con_cls = r;
    bool answered;
    enum MHD_Result ret = begin(r, &answered);
    r->answered = answered;
    return ret;
  }
  if (r->answered) { /* answered on the first call: the rest of the body is not read */
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (*upload_data_size) {
    enum MHD_Result ret = body_chunk(r, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return ret;
  }
  if (!r->route) { /* answered after the body */
    r->answered = true;
    return error_with(r, r->deferred_code, r->deferred_hname[0] ? r->deferred_hname : NULL, r->deferred_hvalue, "%s",
                      r->deferred_msg);
  }
  if (r->pp) {
    MHD_destroy_post_processor(r->pp); /* flushes the last part */
    r->pp = NULL;
    unsigned code = 400;
    const char *msg = h3_multipart_error(r->mp, &code);
    if (msg) defer(r, code, msg);
  }
  r->answered = true;
  if (r->deferred_code)
    return error_with(r, r->deferred_code, r->deferred_hname[0] ? r->deferred_hname : NULL, r->deferred_hvalue, "%s",
                      r->deferred_msg);
  return r->route->fn(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)conn;
  h3_srv *s = cls;
  h3_req *r = *con_cls;
  if (!r) return;
  if (s->cfg.verbose)
    H3_LOGI("%s %s %.1f ms%s", r->method, r->url, (h3_srv_now() - r->t0) * 1e3,
            toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
  if (r->pp) MHD_destroy_post_processor(r->pp);
  h3_multipart_free(r->mp);
  free(r->body);
  free(r);
  *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char m[512];
  vsnprintf(m, sizeof m, fmt, ap);
  size_t n = strlen(m);
  while (n && m[n - 1] == '\n') m[--n] = 0;
  H3_LOGD("http: %s", m);
}

h3_status h3_http_start(h3_srv *srv) {
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  char port[16];
  snprintf(port, sizeof port, "%d", srv->cfg.port);
  int rc = getaddrinfo(srv->cfg.host, port, &hints, &ai);
  if (rc != 0 || !ai) return h3_fail(H3_ERR_INVALID, "--host %s: %s", srv->cfg.host, gai_strerror(rc));
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_USE_ITC |
                   MHD_USE_ERROR_LOG;
  if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  srv->mhd = MHD_start_daemon(flags, (uint16_t)srv->cfg.port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR,
                              ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg.max_connections,
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0u, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
                              MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1u << 20), MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                              NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128u << 10), MHD_OPTION_END);
  if (!srv->mhd) {
    h3_status st = h3_fail(H3_ERR_IO, "cannot listen on %s port %d: %s", srv->cfg.host, srv->cfg.port,
                           errno ? strerror(errno) : "libmicrohttpd refused");
    freeaddrinfo(ai);
    return st;
  }
  freeaddrinfo(ai);
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = di ? di->port : srv->cfg.port;
  return H3_OK;
}

h3_status h3_http_start_manual(h3_srv *srv) {
  srv->mhd = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, srv,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)(128u << 10), MHD_OPTION_END);
  return srv->mhd ? H3_OK : h3_fail(H3_ERR_INTERNAL, "libmicrohttpd refused a daemon without a socket");
}

void h3_http_quiesce(h3_srv *srv) {
  if (!srv->mhd) return;
  MHD_socket fd = MHD_quiesce_daemon(srv->mhd);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

void h3_http_stop(h3_srv *srv) {
  if (srv->mhd) MHD_stop_daemon(srv->mhd);
  srv->mhd = NULL;
}
