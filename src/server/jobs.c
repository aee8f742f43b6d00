/* Requests to jobs and jobs to JSON (jobs.h). */
#include "server/jobs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/options.h"
#include "engine/params_io.h"
#include "engine/request_params.h"
#include "media/image_read.h"
#include "server/sse.h"
#include "server/worker.h"

const char *h3_rating_name(int rating) { return rating > 0 ? "approved" : rating < 0 ? "rejected" : NULL; }

/* ---- the request ---- */

typedef struct inputs {
  json_t *obj; /* {"first_frame": id, "last_frame": id, "references": [{"type", "id", "audio"}]} */
} inputs;

static h3_status field_fail(unsigned *code, unsigned c, char *param, size_t pcap, const char *name, h3_status st) {
  *code = c;
  snprintf(param, pcap, "%s", name);
  return st;
}

/* An upload id of the store, of kind `want` (NULL: any); its kind in kind_out. */
static h3_status upload_ref(h3_srv *s, const char *field, const json_t *v, const char *want, char *kind_out,
                            unsigned *code, char *param, size_t pcap, const char **id_out) {
  if (!json_is_string(v))
    return field_fail(code, 400, param, pcap, field,
                      h3_fail(H3_ERR_INVALID, "%s: expected an upload id (from POST /api/images)", field));
  const char *id = json_string_value(v);
  h3_upload u;
  bool found = false;
  h3_status st = strlen(id) < sizeof u.id ? s->store->ops->upload_get(s->store, id, &u, &found) : H3_OK;
  if (st != H3_OK) return field_fail(code, 500, param, pcap, field, st);
  if (!found)
    return field_fail(code, 400, param, pcap, field, h3_fail(H3_ERR_INVALID, "%s: no upload '%.60s'", field, id));
  if (want && strcmp(u.kind, want) != 0)
    return field_fail(code, 400, param, pcap, field,
                      h3_fail(H3_ERR_INVALID, "%s: upload %s is %s %s, not %s %s", field, id,
                              u.kind[0] == 'i' || u.kind[0] == 'a' ? "an" : "a", u.kind,
                              want[0] == 'i' || want[0] == 'a' ? "an" : "a", want));
  if (kind_out) snprintf(kind_out, 8, "%s", u.kind);
  *id_out = id;
  return H3_OK;
}

/* load_image's size of an uploaded keyframe (its header: the job decodes it), for the canvas rule. */
static h3_status upload_image_size(h3_srv *s, const char *id, const char *field, int *w, int *h) {
  h3_upload u;
  bool found = false;
  H3_TRY(s->store->ops->upload_get(s->store, id, &u, &found));
  if (!found) return h3_fail(H3_ERR_NOT_FOUND, "%s: no upload '%.60s'", field, id);
  char path[4200], name[96];
  h3_srv_path(s, u.file, path, sizeof path);
  snprintf(name, sizeof name, "upload %s", id); /* the client's name for it, not the server's path */
  uint8_t *data = NULL;
  size_t n = 0;
  h3_status st = h3_image_file_bytes(path, NULL, &data, &n);
  if (st == H3_OK) st = h3_image_size_buffer(data, n, name, NULL, w, h);
  free(data);
  if (st != H3_OK) h3_error_prefix("%s", field);
  return st;
}

static h3_status parse_references(h3_srv *s, const json_t *v, json_t *refs, unsigned *code, char *param, size_t pcap) {
  if (!json_is_array(v))
    return field_fail(code, 400, param, pcap, "references",
                      h3_fail(H3_ERR_INVALID, "references: expected a list of upload ids or {\"id\", \"type\"}"));
  size_t i;
  const json_t *it;
  json_array_foreach(v, i, it) {
    char name[48];
    snprintf(name, sizeof name, "references[%zu]", i);
    const json_t *idv = it, *typev = NULL, *audiov = NULL;
    if (json_is_object(it)) {
      const char *k;
      const json_t *x;
      json_object_foreach((json_t *)it, k, x) {
        if (!strcmp(k, "id") || !strcmp(k, "upload_id") || !strcmp(k, "file_id")) idv = x;
        else if (!strcmp(k, "type")) typev = x;
        else if (!strcmp(k, "audio")) audiov = x;
        else
          return field_fail(code, 400, param, pcap, name,
                            h3_fail(H3_ERR_INVALID, "%s.%s: unknown field (id, type, audio)", name, k));
      }
      if (idv == it)
        return field_fail(code, 400, param, pcap, name, h3_fail(H3_ERR_INVALID, "%s: no \"id\"", name));
    }
    char kind[8] = "";
    const char *id = NULL;
    H3_TRY(upload_ref(s, name, idv, NULL, kind, code, param, pcap, &id));
    const char *type = kind;
    if (typev) {
      const char *t = json_string_value(typev);
      static const char *ok[] = {"image", "video", "silent_video", "audio"};
      bool good = false;
      for (int k = 0; k < 4; k++) good |= t && !strcmp(t, ok[k]);
      if (!good)
        return field_fail(code, 400, param, pcap, name,
                          h3_fail(H3_ERR_INVALID, "%s.type: expected image, video, silent_video or audio", name));
      const char *need = !strcmp(t, "silent_video") ? "video" : t;
      if (strcmp(need, kind) != 0)
        return field_fail(code, 400, param, pcap, name,
                          h3_fail(H3_ERR_INVALID, "%s: upload %s is %s, not %s", name, id, kind, need));
      type = t;
    }
    json_t *e = json_pack("{s:s, s:s}", "type", type, "id", id);
    if (audiov) {
      const char *aid = NULL;
      char an[64];
      snprintf(an, sizeof an, "%s.audio", name);
      if (strcmp(type, "video") != 0)
        return json_decref(e), field_fail(code, 400, param, pcap, an,
                                          h3_fail(H3_ERR_INVALID, "%s: only a video reference takes an audio clip", an));
      h3_status st = upload_ref(s, an, audiov, "audio", NULL, code, param, pcap, &aid);
      if (st != H3_OK) return json_decref(e), st;
      json_object_set_new(e, "audio", json_string(aid));
    }
    json_array_append_new(refs, e);
  }
  return H3_OK;
}

/* One option of the table from a request field. */
static h3_status set_option(const h3_opt_targets *t, const char *key, const json_t *v, bool text) {
  if (text && json_is_string(v)) return h3_opt_set(t, key, json_string_value(v));
  json_t *one = json_object();
  json_object_set(one, key, (json_t *)v);
  h3_status st = h3_opt_parse_json_object(t, one);
  json_decref(one);
  return st;
}

static void format_seconds(double s, char *buf, size_t cap) {
  snprintf(buf, cap, "%.2f", s);
  char *dot = strchr(buf, '.');
  if (!dot) return;
  char *e = buf + strlen(buf) - 1;
  while (e > dot && *e == '0') *e-- = 0;
  if (e == dot) *e = 0;
}

/* The keyframe slot a request field or multipart file names: the OpenAI name (input_reference), the option
 * table's (first_frame, last_frame) and diffusers' (image, last_image); NULL for any other field. */
static const char *keyframe_slot(const char *key) {
  if (!strcmp(key, "input_reference") || !strcmp(key, "first_frame") || !strcmp(key, "image")) return "first_frame";
  if (!strcmp(key, "last_frame") || !strcmp(key, "last_image")) return "last_frame";
  return NULL;
}

h3_status h3_jobs_create(h3_srv *s, const json_t *fields, bool text_fields, h3_multipart *mp, h3_job *out,
                         unsigned *code, char *param, size_t pcap) {
  memset(out, 0, sizeof *out);
  *code = 400;
  param[0] = 0;
  h3_gen_params p;
  h3_gen_params_init(&p);
  h3_opt_targets t = {.params = &p, .remote = true, .context = ""};
  json_t *in = json_object();
  json_t *refs = json_array();
  h3_status st = H3_OK;
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)fields, key, v) {
    if (!strcmp(key, "model")) { /* the OpenAI clients send one: this server has its one model */
      if (!json_is_string(v) && !json_is_null(v))
        st = field_fail(code, 400, param, pcap, key, h3_fail(H3_ERR_INVALID, "model: expected a string"));
    } else if (keyframe_slot(key)) {
      const json_t *idv = v;
      if (json_is_object(v)) idv = json_object_get(v, "file_id"); /* {"file_id": ...} as OpenAI's clients send */
      const char *id = NULL;
      if (json_is_null(v)) continue;
      st = upload_ref(s, key, idv, "image", NULL, code, param, pcap, &id);
      if (st == H3_OK) {
        const char *slot = keyframe_slot(key);
        if (json_object_get(in, slot))
          st = field_fail(code, 400, param, pcap, key,
                          h3_fail(H3_ERR_INVALID, "%s: the %s keyframe is given twice (%s)", key,
                                  slot[0] == 'l' ? "last" : "first",
                                  slot[0] == 'l' ? "last_frame, last_image" : "input_reference, first_frame, image"));
        else json_object_set_new(in, slot, json_string(id));
      }
    } else if (!strcmp(key, "references")) {
      st = parse_references(s, v, refs, code, param, pcap);
    } else {
      st = set_option(&t, key, v, text_fields);
      if (st != H3_OK) field_fail(code, 400, param, pcap, key, st);
    }
    if (st != H3_OK) break;
  }
  /* files of a multipart body: input_reference is the first keyframe */
  for (int i = 0; st == H3_OK && mp && i < mp->nfiles; i++) {
    const char *f = mp->files[i].field;
    if (!keyframe_slot(f)) {
      st = field_fail(code, 400, param, pcap, f,
                      h3_fail(H3_ERR_INVALID, "%s: a file where none is taken (input_reference, first_frame, image, "
                                              "last_frame, last_image)", f));
      break;
    }
    const char *slot = keyframe_slot(f);
    if (json_object_get(in, slot)) {
      st = field_fail(code, 400, param, pcap, f, h3_fail(H3_ERR_INVALID, "%s: given twice", f));
      break;
    }
    h3_upload u;
    unsigned c = 500;
    st = h3_upload_accept(s, mp, i, &u, &c);
    if (st != H3_OK) {
      field_fail(code, c, param, pcap, f, st);
      break;
    }
    if (strcmp(u.kind, "image") != 0) {
      st = field_fail(code, 400, param, pcap, f, h3_fail(H3_ERR_INVALID, "%s: expected an image, got %s %s", f,
                                                         u.kind[0] == 'a' ? "an" : "a", u.kind));
      break;
    }
    json_object_set_new(in, slot, json_string(u.id));
  }
  if (st == H3_OK && (!p.prompt || !*p.prompt))
    st = field_fail(code, 400, param, pcap, "prompt", h3_fail(H3_ERR_INVALID, "prompt: required (a non-empty text)"));
  /* LoRAs are names of files in the server's LoRA folder (the option table took only bare names) */
  if (st == H3_OK && p.n_loras && !s->cfg.lora_dir)
    st = field_fail(code, 400, param, pcap, "lora",
                    h3_fail(H3_ERR_INVALID, "lora: this server has no LoRA folder (h3 serve --lora-dir DIR)"));
  if (st == H3_OK && p.n_loras && h3_params_set_string(&p.lora_dir, s->cfg.lora_dir) != H3_OK)
    st = field_fail(code, 500, param, pcap, "", h3_fail(H3_ERR_NOMEM, "job"));
  if (st == H3_OK) {
    st = h3_check_prompt_text("prompt", p.prompt, strlen(p.prompt));
    if (st != H3_OK) field_fail(code, 400, param, pcap, "prompt", st);
  }
  h3_request q;
  h3_resolved_request rr;
  h3_keyframe_dims kd = {.first_name = "first_frame", .last_name = "last_frame"};
  for (int k = 0; st == H3_OK && k < 2; k++) { /* the keyframes' sizes: the canvas follows the first one's */
    const char *slot = k ? "last_frame" : "first_frame";
    const char *id = json_string_value(json_object_get(in, slot));
    if (!id) continue;
    if (k) kd.last = true;
    else kd.first = true;
    st = upload_image_size(s, id, slot, k ? &kd.last_w : &kd.first_w, k ? &kd.last_h : &kd.first_h);
    if (st != H3_OK) field_fail(code, 400, param, pcap, slot, st);
  }
  if (st == H3_OK) { /* the request's rules now, not when the worker gets to it */
    st = h3_params_to_request_ex(&p, h3_engine_is_toy(s->engine), &kd, &q, &rr);
    if (st != H3_OK) { /* the field the message starts with ("--size 100x100: ...", "request: ...") */
      const char *m = h3_last_error();
      while (*m == '-') m++;
      char word[48];
      snprintf(word, sizeof word, "%.*s", (int)strcspn(m, " :'"), m);
      field_fail(code, 400, param, pcap, h3_opt_known(word) ? word : "", st);
    }
  }
  h3_params_set_string(&p.lora_dir, NULL); /* the server's own setting: not stored with the job */
  if (st == H3_OK) {
    if (!p.has_seed) p.seed = h3_random_seed(), p.has_seed = true; /* drawn once: the job shows it, a rerun keeps it */
    if (json_array_size(refs)) json_object_set(in, "references", refs);
    out->params_json = h3_params_to_json(&p);
    out->inputs_json = json_object_size(in) ? json_dumps(in, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    out->prompt = strdup(p.prompt);
    if (!out->params_json || !out->prompt) st = field_fail(code, 500, param, pcap, "", h3_fail(H3_ERR_NOMEM, "job"));
  }
  if (st == H3_OK) {
    h3_srv_new_id("video_", out->id, sizeof out->id);
    out->seed = p.seed;
    out->width = rr.width;
    out->height = rr.height;
    out->frames = rr.num_frames;
    out->steps = rr.num_inference_steps;
    out->seconds = rr.duration_s;
    out->eta_s = -1;
    bool full = false;
    st = s->store->ops->enqueue(s->store, out, s->cfg.max_queue, &full);
    if (st != H3_OK) field_fail(code, 500, param, pcap, "", st);
    else if (full)
      st = field_fail(code, 429, param, pcap, "",
                      h3_fail(H3_ERR_INVALID, "the queue is full (%d jobs queued or running; --max-queue)",
                              s->cfg.max_queue));
  }
  json_decref(in);
  json_decref(refs);
  h3_gen_params_clear(&p);
  if (st != H3_OK) {
    h3_job_clear(out);
    return st;
  }
  h3_jobs_publish(s, out);
  h3_worker_wake(s->worker);
  return H3_OK;
}

/* ---- the job object ---- */

static json_t *time_or_null(double t) { return t > 0 ? json_integer((json_int_t)t) : json_null(); }

static json_t *parsed(const char *text) {
  if (!text) return json_null();
  json_t *o = json_loads(text, 0, NULL);
  return o ? o : json_null();
}

/* One input of the job as the gallery shows it: {role, type, id, kind, url, poster_url}; an upload the
 * store no longer has keeps its id with null urls. */
static json_t *input_medium(const h3_srv *s, const char *role, const char *type, const char *id) {
  h3_upload u;
  bool found = false;
  if (!id || strlen(id) >= sizeof u.id || s->store->ops->upload_get(s->store, id, &u, &found) != H3_OK) found = false;
  json_t *o = json_pack("{s:s, s:s, s:s}", "role", role, "type", type, "id", id ? id : "");
  json_object_set_new(o, "kind", found ? json_string(u.kind) : json_null());
  char url[160];
  snprintf(url, sizeof url, "/api/files/%s", found ? u.file : "");
  json_object_set_new(o, "url", found ? json_string(url) : json_null());
  snprintf(url, sizeof url, "/api/files/%s", found ? u.poster_file : "");
  json_object_set_new(o, "poster_url", found && u.poster_file[0] ? json_string(url) : json_null());
  return o;
}

/* The inputs in the order the model reads them: the keyframes, then the references (a video's audio after
 * it). */
static json_t *input_media(const h3_srv *s, const char *inputs_json) {
  json_t *list = json_array();
  json_t *in = inputs_json ? json_loads(inputs_json, 0, NULL) : NULL;
  if (!json_is_object(in)) {
    json_decref(in);
    return list;
  }
  const char *first = json_string_value(json_object_get(in, "first_frame"));
  const char *last = json_string_value(json_object_get(in, "last_frame"));
  if (first) json_array_append_new(list, input_medium(s, "first_frame", "image", first));
  if (last) json_array_append_new(list, input_medium(s, "last_frame", "image", last));
  size_t i;
  json_t *r;
  json_array_foreach(json_object_get(in, "references"), i, r) {
    const char *type = json_string_value(json_object_get(r, "type"));
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *audio = json_string_value(json_object_get(r, "audio"));
    if (!type || !id) continue;
    json_array_append_new(list, input_medium(s, "reference", type, id));
    if (audio) json_array_append_new(list, input_medium(s, "reference_audio", "audio", audio));
  }
  json_decref(in);
  return list;
}

json_t *h3_job_json(const h3_srv *s, const h3_job *j, bool detail) {
  char size[48], secs[32], url[160];
  snprintf(size, sizeof size, "%lldx%lld", (long long)j->width, (long long)j->height);
  format_seconds(j->seconds, secs, sizeof secs);
  json_t *o = json_object();
  json_object_set_new(o, "id", json_string(j->id));
  json_object_set_new(o, "object", json_string("video"));
  json_object_set_new(o, "status", json_string(h3_job_status_name(j->status)));
  json_object_set_new(o, "progress", json_integer((json_int_t)floor(j->progress)));
  json_object_set_new(o, "created_at", time_or_null(j->created_at));
  json_object_set_new(o, "started_at", time_or_null(j->started_at));
  json_object_set_new(o, "completed_at", time_or_null(j->completed_at));
  json_object_set_new(o, "expires_at", json_null());
  json_object_set_new(o, "model", json_string(s->model_name));
  json_object_set_new(o, "prompt", j->prompt ? json_string(j->prompt) : json_null());
  json_object_set_new(o, "seconds", json_string(secs));
  json_object_set_new(o, "size", json_string(size));
  if (j->seed <= (uint64_t)INT64_MAX) json_object_set_new(o, "seed", json_integer((json_int_t)j->seed));
  else {
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)j->seed);
    json_object_set_new(o, "seed", json_string(b));
  }
  json_object_set_new(o, "num_frames", json_integer(j->frames));
  json_object_set_new(o, "num_inference_steps", json_integer(j->steps));
  json_object_set_new(o, "remixed_from_video_id", json_null());
  if (j->status == H3_JOB_FAILED || j->status == H3_JOB_CANCELLED)
    json_object_set_new(o, "error", json_pack("{s:s, s:s}", "code", j->error_code[0] ? j->error_code : "failed",
                                              "message", j->error ? j->error : h3_job_status_name(j->status)));
  else json_object_set_new(o, "error", json_null());
  json_object_set_new(o, "phase", j->phase[0] ? json_string(j->phase) : json_null());
  json_object_set_new(o, "step", json_integer(j->step));
  json_object_set_new(o, "total_steps", json_integer(j->total_steps));
  json_object_set_new(o, "eta_s", j->eta_s >= 0 ? json_real(round(j->eta_s * 10) / 10) : json_null());
  const char *rt = h3_rating_name(j->rating);
  json_object_set_new(o, "rating", rt ? json_string(rt) : json_null());
  if (j->status == H3_JOB_COMPLETED && j->video_file[0]) {
    snprintf(url, sizeof url, "/v1/videos/%s/content", j->id);
    json_object_set_new(o, "video_url", json_string(url));
    snprintf(url, sizeof url, "/api/files/%s", j->video_file);
    json_object_set_new(o, "file_url", json_string(url));
  } else {
    json_object_set_new(o, "video_url", json_null());
    json_object_set_new(o, "file_url", json_null());
  }
  if (j->status == H3_JOB_COMPLETED && j->poster_file[0]) {
    snprintf(url, sizeof url, "/api/files/%s", j->poster_file);
    json_object_set_new(o, "thumbnail_url", json_string(url));
  } else {
    json_object_set_new(o, "thumbnail_url", json_null());
  }
  json_object_set_new(o, "input_media", input_media(s, j->inputs_json));
  if (detail) {
    json_object_set_new(o, "params", parsed(j->params_json));
    json_object_set_new(o, "inputs", parsed(j->inputs_json));
    json_t *res = parsed(j->resolved_json);
    if (json_is_object(res)) json_object_del(res, "output"); /* the server's own path */
    json_object_set_new(o, "resolved_params", res);
    json_object_set_new(o, "timings", parsed(j->timings_json));
    json_object_set_new(o, "history", parsed(j->history_json));
  }
  return o;
}

void h3_jobs_publish(h3_srv *s, const h3_job *j) {
  json_t *o = h3_job_json(s, j, false);
  if (o) h3_hub_publish(s->hub, "generation_update", j->id, o);
  json_decref(o);
}

void h3_jobs_publish_id(h3_srv *s, const char *id) {
  h3_job j;
  bool found = false;
  if (s->store->ops->get(s->store, id, &j, &found) == H3_OK && found) h3_jobs_publish(s, &j);
  if (found) h3_job_clear(&j);
}

/* ---- delete ---- */

static void remove_file(h3_srv *s, const char *name) {
  if (!name || !*name || !h3_srv_safe_name(strrchr(name, '/') ? strrchr(name, '/') + 1 : name)) return;
  char path[4200];
  h3_srv_path(s, name, path, sizeof path);
  unlink(path);
}

h3_status h3_jobs_delete(h3_srv *s, const char *id, h3_delete_result *res, h3_job *after) {
  *res = H3_DELETE_NOT_FOUND;
  memset(after, 0, sizeof *after);
  h3_job j;
  bool found = false;
  H3_TRY(s->store->ops->get(s->store, id, &j, &found));
  if (!found) return H3_OK;
  h3_status st = H3_OK;
  if (j.status == H3_JOB_QUEUED) {
    bool changed = false;
    st = s->store->ops->transition(s->store, id, H3_JOB_MASK(H3_JOB_QUEUED), H3_JOB_CANCELLED, "cancelled by a client",
                                   &changed);
    if (st == H3_OK && !changed) { /* the worker took it meanwhile */
      h3_job_clear(&j);
      H3_TRY(s->store->ops->get(s->store, id, &j, &found));
      if (!found) return H3_OK;
    }
  }
  if (st == H3_OK && j.status == H3_JOB_IN_PROGRESS) {
    /* the flag in the store reaches the worker that runs it, on whichever server (a shared store also
     * notifies them all); this server's own worker is told at once */
    bool asked = false;
    st = s->store->ops->request_cancel(s->store, id, &asked);
    if (st == H3_OK && h3_worker_cancel(s->worker, id)) h3_worker_wait_not_running(s->worker, id, 10000);
  }
  if (st == H3_OK && (j.status == H3_JOB_QUEUED || j.status == H3_JOB_IN_PROGRESS)) {
    h3_job_clear(&j);
    st = s->store->ops->get(s->store, id, &j, &found);
    if (st == H3_OK && found) {
      *res = j.status == H3_JOB_IN_PROGRESS ? H3_DELETE_CANCELLING : H3_DELETE_CANCELLED;
      if (j.status == H3_JOB_CANCELLED && *res == H3_DELETE_CANCELLED) h3_jobs_publish(s, &j);
      *after = j;
      return H3_OK;
    }
    return st;
  }
  if (st == H3_OK) {
    bool removed = false;
    st = s->store->ops->remove(s->store, id, H3_JOB_FINISHED, &found, &removed);
    if (st == H3_OK && removed) {
      remove_file(s, j.video_file);
      remove_file(s, j.poster_file);
      json_t *d = json_pack("{s:s, s:s, s:b}", "id", id, "object", "video.deleted", "deleted", 1);
      h3_hub_publish(s->hub, "generation_deleted", id, d);
      json_decref(d);
      *res = H3_DELETE_DELETED;
    }
  }
  h3_job_clear(&j);
  return st;
}
