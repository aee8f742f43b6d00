/* The rest of the routes: the event stream, files of the outputs folder, the
 * server's status, the health check and the OpenAPI document (the web UI's
 * routes are in routes_web.c), and the job lookup the route files share. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rss.h"
#include "engine/lora_path.h"
#include "server/assets.h"
#include "server/routes.h"
#include "server/sse.h"
#include "server/web.h"
#include "server/worker.h"

/* ---- /api/events ---- */

#define HEARTBEAT_MS 15000

typedef struct sse_conn {
  h3_srv *srv;
  int64_t last;
  char *buf;
  size_t len, pos;
} sse_conn;

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
  (void)pos;
  sse_conn *c = cls;
  while (c->pos >= c->len) {
    free(c->buf);
    c->buf = NULL;
    c->len = c->pos = 0;
    char *text;
    size_t n;
    int rc = h3_hub_wait(c->srv->hub, &c->last, &text, &n, HEARTBEAT_MS);
    if (rc < 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (rc == 0) {
      static const char ping[] = ": ping\n\n";
      text = strdup(ping);
      n = sizeof ping - 1;
      if (!text) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    c->buf = text;
    c->len = n;
  }
  size_t k = c->len - c->pos < max ? c->len - c->pos : max;
  memcpy(out, c->buf + c->pos, k);
  c->pos += k;
  return (ssize_t)k;
}

static void sse_free(void *cls) {
  sse_conn *c = cls;
  h3_hub_listeners(c->srv->hub, -1);
  free(c->buf);
  free(c);
}

enum MHD_Result h3_r_events(h3_req *r) {
  const char *lei = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
  if (!lei) lei = h3_http_query(r, "last_event_id");
  int64_t last = h3_hub_last_id(r->srv->hub); /* without one: the events from now on */
  if (lei && *lei) {
    char *end;
    long long x = strtoll(lei, &end, 10);
    if (*end || x < 0) return h3_http_error(r, 400, "Last-Event-ID", "Last-Event-ID '%.30s': expected an event id", lei);
    last = x;
  }
  sse_conn *c = calloc(1, sizeof *c);
  if (!c) return MHD_NO;
  c->srv = r->srv;
  c->last = last;
  char hello[96];
  snprintf(hello, sizeof hello, "retry: 2000\n: h3 events after %lld\n\n", (long long)last);
  c->buf = strdup(hello);
  c->len = c->buf ? strlen(c->buf) : 0;
  struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, c, sse_free);
  if (!resp) {
    free(c->buf);
    free(c);
    return MHD_NO;
  }
  h3_hub_listeners(r->srv->hub, 1);
  MHD_add_response_header(resp, "Content-Type", "text/event-stream");
  MHD_add_response_header(resp, "X-Accel-Buffering", "no");
  h3_http_common_headers(r, resp, false);
  enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* ---- /api/files/... ---- */

static const char *mime_of(const char *name) {
  static const char *map[][2] = {{".mp4", "video/mp4"},   {".png", "image/png"},        {".jpg", "image/jpeg"},
                                 {".webp", "image/webp"}, {".bmp", "image/bmp"},        {".gif", "image/gif"},
                                 {".mkv", "video/x-matroska"}, {".avi", "video/x-msvideo"}, {".wav", "audio/wav"},
                                 {".mp3", "audio/mpeg"},  {".flac", "audio/flac"},      {".ogg", "audio/ogg"},
                                 {".aac", "audio/aac"},   {".m4a", "audio/mp4"},        {".mka", "audio/x-matroska"}};
  const char *dot = strrchr(name, '.');
  for (size_t i = 0; dot && i < sizeof map / sizeof *map; i++)
    if (!strcmp(dot, map[i][0])) return map[i][1];
  return "application/octet-stream";
}

enum MHD_Result h3_r_files(h3_req *r) {
  const char *slash = strchr(r->rest, '/');
  if (!slash || strchr(slash + 1, '/')) return h3_http_error(r, 404, NULL, "no such file");
  const size_t dl = (size_t)(slash - r->rest);
  const bool dir_ok = (dl == 6 && !strncmp(r->rest, "videos", 6)) || (dl == 7 && !strncmp(r->rest, "uploads", 7));
  if (!dir_ok || !h3_srv_safe_name(slash + 1)) return h3_http_error(r, 404, NULL, "no such file");
  char path[4200];
  h3_srv_path(r->srv, r->rest, path, sizeof path);
  return h3_http_file(r, path, mime_of(slash + 1));
}

/* ---- /api/status, /health ---- */

enum MHD_Result h3_r_status(h3_req *r) {
  h3_srv *s = r->srv;
  int64_t counts[H3_JOB_STATUS_COUNT];
  h3_status st = s->store->ops->counts(s->store, counts);
  if (st != H3_OK) return h3_http_status_error(r, st, NULL);
  json_t *queue = json_object();
  for (int i = 0; i < H3_JOB_STATUS_COUNT; i++)
    json_object_set_new(queue, h3_job_status_name((h3_job_status)i), json_integer(counts[i]));
  char running[40];
  h3_worker_running(s->worker, running, sizeof running);
  json_t *o = json_object();
  json_object_set_new(o, "status", json_string("ok"));
  json_object_set_new(o, "version", json_string(H3_VERSION_STRING));
  json_object_set_new(o, "model", json_string(s->model_name));
  json_object_set_new(o, "model_path", json_string(h3_engine_model(s->engine)));
  json_object_set_new(o, "toy", json_boolean(h3_engine_is_toy(s->engine)));
  json_object_set_new(o, "web_ui", json_boolean(h3_web_built)); /* the gallery was built into this binary */
  json_object_set_new(o, "device", json_string(h3_engine_device(s->engine)));
  json_object_set_new(o, "precision",
                      json_string(h3_engine_precision(s->engine) == H3_PRECISION_BF16 ? "bf16" : "f32"));
  json_object_set_new(o, "uptime_s", json_real(h3_srv_now() - s->started_at));
  json_object_set_new(o, "queue", queue);
  json_object_set_new(o, "running", running[0] ? json_string(running) : json_null());
  pthread_mutex_lock(&s->mem_mu);
  const h3_memory_report m = s->mem;
  const bool have = s->mem_valid;
  pthread_mutex_unlock(&s->mem_mu);
  json_t *res = json_array();
  for (int i = 0; have && i < m.n_models; i++)
    json_array_append_new(res, json_pack("{s:s, s:b, s:I, s:I}", "name", m.models[i].name, "open", m.models[i].open,
                                         "host_bytes", (json_int_t)m.models[i].host_bytes, "device_bytes",
                                         (json_int_t)m.models[i].device_bytes));
  json_object_set_new(o, "resident", res);
  json_object_set_new(o, "device_memory",
                      have && m.device_total ? json_pack("{s:I, s:I, s:I}", "total", (json_int_t)m.device_total, "used",
                                                         (json_int_t)m.device_used, "weights",
                                                         (json_int_t)m.device_weights)
                                             : json_null());
  json_object_set_new(o, "prompt_cache", json_pack("{s:i, s:I}", "entries", have ? m.prompt_cache_entries : 0, "bytes",
                                                   (json_int_t)(have ? m.prompt_cache_bytes : 0)));
  json_object_set_new(o, "keyframe_cache", json_pack("{s:i, s:I}", "entries", have ? m.keyframe_cache_entries : 0,
                                                     "bytes", (json_int_t)(have ? m.keyframe_cache_bytes : 0)));
  json_object_set_new(o, "reference_cache", json_pack("{s:i, s:I}", "entries", have ? m.reference_cache_entries : 0,
                                                     "bytes", (json_int_t)(have ? m.reference_cache_bytes : 0)));
  size_t rss = 0, peak = 0;
  h3_process_rss(&rss, &peak);
  json_object_set_new(o, "host_rss", json_integer((json_int_t)rss));
  json_object_set_new(o, "host_rss_peak", json_integer((json_int_t)peak));
  json_object_set_new(o, "listeners", json_integer(h3_hub_listeners(s->hub, 0)));
  json_object_set_new(o, "last_event_id", json_integer(h3_hub_last_id(s->hub)));
  json_object_set_new(o, "limits", json_pack("{s:I, s:I, s:i}", "max_upload_bytes", (json_int_t)s->cfg.max_upload_bytes,
                                             "max_body_bytes", (json_int_t)s->cfg.max_body_bytes, "max_queue",
                                             s->cfg.max_queue));
  return h3_http_json(r, 200, o);
}

/* ---- /api/loras: the LoRAs a request may name (h3 serve --lora-dir) ---- */

static int by_name(const void *a, const void *b) {
  return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

enum MHD_Result h3_r_loras(h3_req *r) {
  h3_srv *s = r->srv;
  json_t *list = json_array();
  DIR *d = s->cfg.lora_dir ? opendir(s->cfg.lora_dir) : NULL;
  for (struct dirent *de; d && (de = readdir(d));) {
    const size_t n = strlen(de->d_name);
    if (n < 13 || strcmp(de->d_name + n - 12, ".safetensors") || !h3_lora_name_ok(de->d_name, n)) continue;
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", s->cfg.lora_dir, de->d_name);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    json_array_append_new(list, json_pack("{s:s,s:I}", "name", de->d_name, "bytes", (json_int_t)st.st_size));
  }
  if (d) closedir(d);
  const size_t n = json_array_size(list);
  json_t **items = n ? malloc(n * sizeof *items) : NULL;
  for (size_t i = 0; items && i < n; i++) items[i] = json_incref(json_array_get(list, i));
  if (items) {
    qsort(items, n, sizeof *items, by_name);
    json_array_clear(list);
    for (size_t i = 0; i < n; i++) json_array_append_new(list, items[i]);
    free(items);
  }
  return h3_http_json(r, 200, json_pack("{s:b,s:o}", "enabled", s->cfg.lora_dir != NULL, "loras", list));
}

enum MHD_Result h3_r_health(h3_req *r) { return h3_http_json(r, 200, json_pack("{s:s}", "status", "ok")); }

/* ---- /openapi.json: the embedded document, the request schema from the option table ---- */

static char *g_openapi;
static pthread_once_t g_openapi_once = PTHREAD_ONCE_INIT;

static void build_openapi(void) {
  json_t *doc = json_loads(h3_srv_asset_openapi_json, 0, NULL);
  if (!doc) return;
  char *schema = h3_params_schema_json();
  json_t *params = schema ? json_loads(schema, 0, NULL) : NULL;
  free(schema);
  json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
  if (params && schemas) {
    json_object_del(params, "$schema");
    json_object_set_new(schemas, "GenerationParams", params);
  } else {
    json_decref(params);
  }
  json_object_set_new(json_object_get(doc, "info"), "version", json_string(H3_VERSION_STRING));
  g_openapi = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(doc);
}

enum MHD_Result h3_r_openapi(h3_req *r) {
  pthread_once(&g_openapi_once, build_openapi);
  if (!g_openapi) return h3_http_error(r, 500, NULL, "the OpenAPI document does not parse");
  return h3_http_text(r, 200, "application/json", g_openapi);
}

bool h3_route_job_of(h3_req *r, const char *noun, h3_job *j, enum MHD_Result *ret) {
  bool found = false;
  h3_status st = r->srv->store->ops->get(r->srv->store, r->arg[0], j, &found);
  if (st != H3_OK) {
    *ret = h3_http_status_error(r, st, NULL);
    return false;
  }
  if (!found) {
    *ret = h3_http_error(r, 404, NULL, "no %s '%s'", noun, r->arg[0]);
    return false;
  }
  return true;
}
