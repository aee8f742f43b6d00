/* The gallery UI's routes: /api/ai/queue (enqueue, list with status / search /
 * offset paging, one job, rating, cancel-or-delete) and POST /api/images
 * (uploads: images, videos, audio). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/jobs.h"
#include "server/media_probe.h"
#include "server/routes.h"

enum MHD_Result h3_q_create(h3_req *r) {
  enum MHD_Result ret;
  json_t *o = h3_http_body_object(r, &ret);
  if (!o) return ret;
  h3_job j;
  unsigned code = 400;
  char param[64];
  h3_status st = h3_jobs_create(r->srv, o, false, NULL, &j, &code, param, sizeof param);
  json_decref(o);
  if (st != H3_OK) return h3_http_error(r, code, *param ? param : NULL, "%s", h3_last_error());
  json_t *jo = h3_job_json(r->srv, &j, true);
  h3_job_clear(&j);
  return h3_http_json(r, 201, jo);
}

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

enum MHD_Result h3_q_list(h3_req *r) {
  enum MHD_Result ret;
  long long limit, offset;
  if (!query_int(r, "limit", 1, 200, 50, &limit, &ret) || !query_int(r, "offset", 0, (long long)1 << 40, 0, &offset, &ret))
    return ret;
  h3_job_query q = {.limit = (int)limit, .offset = offset};
  const char *status = h3_http_query(r, "status");
  if (status && *status) { /* one status or several, comma-separated */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", status);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int k = h3_job_status_parse(t);
      if (k < 0)
        return h3_http_error(r, 400, "status",
                             "status '%.30s': expected queued, in_progress, completed, failed or cancelled", t);
      q.status_mask |= H3_JOB_MASK(k);
    }
  }
  const char *search = h3_http_query(r, "search");
  if (search && strlen(search) > 500) return h3_http_error(r, 400, "search", "search: at most 500 characters");
  q.search = search;
  h3_job_list l;
  h3_status st = r->srv->store->ops->list(r->srv->store, &q, &l);
  if (st != H3_OK) return h3_http_status_error(r, st, NULL);
  json_t *items = json_array();
  for (int i = 0; i < l.n; i++) json_array_append_new(items, h3_job_json(r->srv, &l.jobs[i], false));
  json_t *o = json_pack("{s:o, s:I, s:I, s:I, s:b}", "items", items, "total", (json_int_t)l.total, "limit",
                        (json_int_t)limit, "offset", (json_int_t)offset, "has_more", l.has_more);
  h3_job_list_free(&l);
  return h3_http_json(r, 200, o);
}

enum MHD_Result h3_q_get(h3_req *r) {
  h3_job j;
  enum MHD_Result ret;
  if (!h3_route_job_of(r, "job", &j, &ret)) return ret;
  json_t *o = h3_job_json(r->srv, &j, true);
  h3_job_clear(&j);
  return h3_http_json(r, 200, o);
}

enum MHD_Result h3_q_patch(h3_req *r) {
  enum MHD_Result ret;
  json_t *o = h3_http_body_object(r, &ret);
  if (!o) return ret;
  const char *key;
  json_t *v;
  int rating = 0;
  bool have = false;
  json_object_foreach(o, key, v) {
    if (strcmp(key, "rating") != 0) {
      ret = h3_http_error(r, 400, key, "%s: unknown field (rating is the one a job takes)", key);
      json_decref(o);
      return ret;
    }
    const char *s = json_string_value(v);
    if (json_is_null(v)) rating = 0;
    else if (s && !strcmp(s, "approved")) rating = 1;
    else if (s && !strcmp(s, "rejected")) rating = -1;
    else {
      json_decref(o);
      return h3_http_error(r, 400, "rating", "rating: expected \"approved\", \"rejected\" or null");
    }
    have = true;
  }
  json_decref(o);
  if (!have) return h3_http_error(r, 400, "rating", "rating: required");
  bool found = false;
  h3_status st = r->srv->store->ops->set_rating(r->srv->store, r->arg[0], rating, &found);
  if (st != H3_OK) return h3_http_status_error(r, st, NULL);
  if (!found) return h3_http_error(r, 404, NULL, "no job '%s'", r->arg[0]);
  h3_job j;
  if (!h3_route_job_of(r, "job", &j, &ret)) return ret;
  h3_jobs_publish(r->srv, &j);
  json_t *jo = h3_job_json(r->srv, &j, true);
  h3_job_clear(&j);
  return h3_http_json(r, 200, jo);
}

enum MHD_Result h3_q_delete(h3_req *r) {
  h3_delete_result res;
  h3_job after;
  h3_status st = h3_jobs_delete(r->srv, r->arg[0], &res, &after);
  if (st != H3_OK) return h3_http_status_error(r, st, NULL);
  if (res == H3_DELETE_NOT_FOUND) return h3_http_error(r, 404, NULL, "no job '%s'", r->arg[0]);
  if (res == H3_DELETE_DELETED) return h3_http_json(r, 200, json_pack("{s:s, s:b}", "id", r->arg[0], "deleted", 1));
  json_t *o = h3_job_json(r->srv, &after, true);
  h3_job_clear(&after);
  return h3_http_json(r, res == H3_DELETE_CANCELLING ? 202 : 200, o);
}

enum MHD_Result h3_q_upload(h3_req *r) {
  h3_multipart *mp = r->mp;
  if (!mp || mp->nfiles == 0) return h3_http_error(r, 400, NULL, "no files in the form (images, videos or audio)");
  for (int i = 0; i < mp->nfiles; i++) { /* every file is media, or none is kept */
    if (!mp->files[i].bytes) return h3_http_error(r, 400, mp->files[i].field, "%s: an empty file", mp->files[i].field);
    h3_media_info info;
    if (h3_media_probe(mp->files[i].tmp, &info) != H3_OK)
      return h3_http_error(r, 415, mp->files[i].field, "%s: %s", mp->files[i].field, h3_last_error());
  }
  json_t *list = json_array(), *ids = json_array();
  for (int i = 0; i < mp->nfiles; i++) {
    h3_upload u;
    unsigned code = 500;
    if (h3_upload_accept(r->srv, mp, i, &u, &code) != H3_OK) {
      json_decref(list);
      json_decref(ids);
      return h3_http_error(r, code, mp->files[i].field, "%s", h3_last_error());
    }
    json_array_append_new(list, h3_upload_json(&u));
    json_array_append_new(ids, json_string(u.id));
  }
  return h3_http_json(r, 201, json_pack("{s:o, s:o}", "uploads", list, "ids", ids));
}
