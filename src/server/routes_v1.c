/* The OpenAI-style video API: POST/GET /v1/videos, GET/DELETE /v1/videos/{id},
 * GET /v1/videos/{id}/content.  Shapes as OpenAI's (the official clients
 * work unchanged): the video object, the cursor-paged list, the deleted
 * object, errors as {"error": {...}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/jobs.h"
#include "server/routes.h"

static enum MHD_Result create_from(h3_req *r, const json_t *fields, bool text, unsigned ok_code, bool detail) {
  h3_job j;
  unsigned code = 400;
  char param[64];
  h3_status st = h3_jobs_create(r->srv, fields, text, r->mp, &j, &code, param, sizeof param);
  if (st != H3_OK) return h3_http_error(r, code, *param ? param : NULL, "%s", h3_last_error());
  json_t *o = h3_job_json(r->srv, &j, detail);
  h3_job_clear(&j);
  return h3_http_json(r, ok_code, o);
}

enum MHD_Result h3_v1_create(h3_req *r) {
  if (r->mp) return create_from(r, r->mp->fields, true, 200, false);
  enum MHD_Result ret;
  json_t *o = h3_http_body_object(r, &ret);
  if (!o) return ret;
  ret = create_from(r, o, false, 200, false);
  json_decref(o);
  return ret;
}

/* A whole number query argument in [lo, hi] (def when absent); false after answering 400. */
static bool query_int(h3_req *r, const char *key, long long lo, long long hi, long long def, long long *out,
                      enum MHD_Result *ret) {
  const char *v = h3_http_query(r, key);
  *out = def;
  if (!v) return true;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (!*v || *end || x < lo || x > hi) {
    *ret = h3_http_error(r, 400, key, "%s '%.40s': expected a whole number from %lld to %lld", key, v, lo, hi);
    return false;
  }
  *out = x;
  return true;
}

enum MHD_Result h3_v1_list(h3_req *r) {
  enum MHD_Result ret;
  long long limit;
  if (!query_int(r, "limit", 1, 100, 20, &limit, &ret)) return ret;
  const char *order = h3_http_query(r, "order");
  if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0)
    return h3_http_error(r, 400, "order", "order '%.20s': expected asc or desc", order);
  h3_job_query q = {.limit = (int)limit, .ascending = order && !strcmp(order, "asc")};
  const char *after = h3_http_query(r, "after");
  if (after && *after) {
    h3_job a;
    bool found = false;
    h3_status st = strlen(after) < sizeof a.id ? r->srv->store->ops->get(r->srv->store, after, &a, &found) : H3_OK;
    if (st != H3_OK) return h3_http_status_error(r, st, "after");
    if (!found) return h3_http_error(r, 400, "after", "after: no video '%.60s'", after);
    q.after_seq = a.seq;
    h3_job_clear(&a);
  }
  h3_job_list l;
  h3_status st = r->srv->store->ops->list(r->srv->store, &q, &l);
  if (st != H3_OK) return h3_http_status_error(r, st, NULL);
  json_t *data = json_array();
  for (int i = 0; i < l.n; i++) json_array_append_new(data, h3_job_json(r->srv, &l.jobs[i], false));
  json_t *o = json_pack("{s:s, s:o, s:b}", "object", "list", "data", data, "has_more", l.has_more);
  json_object_set_new(o, "first_id", l.n ? json_string(l.jobs[0].id) : json_null());
  json_object_set_new(o, "last_id", l.n ? json_string(l.jobs[l.n - 1].id) : json_null());
  h3_job_list_free(&l);
  return h3_http_json(r, 200, o);
}

enum MHD_Result h3_v1_get(h3_req *r) {
  h3_job j;
  enum MHD_Result ret;
  if (!h3_route_job_of(r, "video", &j, &ret)) return ret;
  json_t *o = h3_job_json(r->srv, &j, false);
  h3_job_clear(&j);
  return h3_http_json(r, 200, o);
}

enum MHD_Result h3_v1_content(h3_req *r) {
  const char *variant = h3_http_query(r, "variant");
  if (variant && strcmp(variant, "video") != 0 && strcmp(variant, "thumbnail") != 0) {
    if (!strcmp(variant, "spritesheet")) return h3_http_error(r, 404, "variant", "variant spritesheet: not made here");
    return h3_http_error(r, 400, "variant", "variant '%.20s': expected video or thumbnail", variant);
  }
  h3_job j;
  enum MHD_Result ret;
  if (!h3_route_job_of(r, "video", &j, &ret)) return ret;
  const bool thumb = variant && !strcmp(variant, "thumbnail");
  if (j.status != H3_JOB_COMPLETED) {
    ret = h3_http_error(r, 409, NULL, "video %s is %s: no content", j.id, h3_job_status_name(j.status));
  } else if (!(thumb ? j.poster_file : j.video_file)[0]) {
    ret = h3_http_error(r, 404, "variant", "video %s has no %s", j.id, thumb ? "thumbnail" : "file");
  } else {
    char path[4200];
    h3_srv_path(r->srv, thumb ? j.poster_file : j.video_file, path, sizeof path);
    ret = h3_http_file(r, path, thumb ? "image/png" : "video/mp4");
  }
  h3_job_clear(&j);
  return ret;
}

enum MHD_Result h3_v1_delete(h3_req *r) {
  h3_delete_result res;
  h3_job after;
  h3_status st = h3_jobs_delete(r->srv, r->arg[0], &res, &after);
  if (st != H3_OK) return h3_http_status_error(r, st, NULL);
  if (res == H3_DELETE_NOT_FOUND) return h3_http_error(r, 404, NULL, "no video '%s'", r->arg[0]);
  if (res == H3_DELETE_DELETED)
    return h3_http_json(r, 200, json_pack("{s:s, s:s, s:b}", "id", r->arg[0], "object", "video.deleted", "deleted", 1));
  json_t *o = h3_job_json(r->srv, &after, false);
  h3_job_clear(&after);
  return h3_http_json(r, res == H3_DELETE_CANCELLING ? 202 : 200, o);
}
