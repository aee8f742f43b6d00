/* Multipart bodies and uploads (uploads.h). */
#include "server/uploads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "server/media_probe.h"

#define MAX_FILES 8
#define MAX_FIELDS 64
#define MAX_FIELD_BYTES (64 * 1024)

h3_status h3_multipart_new(h3_srv *srv, h3_multipart **out) {
  h3_multipart *mp = calloc(1, sizeof *mp);
  if (!mp || !(mp->fields = json_object())) {
    free(mp);
    return h3_fail(H3_ERR_NOMEM, "multipart");
  }
  mp->srv = srv;
  mp->cur_file = -1;
  *out = mp;
  return H3_OK;
}

static void close_file(h3_multipart_file *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}

void h3_multipart_discard(h3_multipart *mp) {
  if (!mp) return;
  for (int i = 0; i < mp->nfiles; i++) {
    close_file(&mp->files[i]);
    if (mp->files[i].tmp[0]) unlink(mp->files[i].tmp);
    mp->files[i].tmp[0] = '\0';
  }
}

void h3_multipart_free(h3_multipart *mp) {
  if (!mp) return;
  for (int i = 0; i < mp->nfiles; i++) {
    close_file(&mp->files[i]);
    if (mp->files[i].tmp[0]) unlink(mp->files[i].tmp);
  }
  free(mp->files);
  json_decref(mp->fields);
  free(mp->text);
  free(mp);
}

static enum MHD_Result fail(h3_multipart *mp, unsigned code, const char *fmt, const char *arg) {
  if (!mp->err_code) {
    mp->err_code = code;
    snprintf(mp->err, sizeof mp->err, fmt, arg);
  }
  return MHD_NO;
}

/* The text field being read is complete. */
static void flush_text(h3_multipart *mp) {
  if (!mp->in_text) return;
  mp->in_text = false;
  if (mp->err_code) return;
  if (json_object_get(mp->fields, mp->cur_key)) {
    fail(mp, 400, "%s: the field is given twice", mp->cur_key);
    return;
  }
  if (json_object_size(mp->fields) >= MAX_FIELDS) {
    fail(mp, 400, "more than %s form fields", "64");
    return;
  }
  json_t *v = json_stringn(mp->text ? mp->text : "", mp->text_len);
  if (!v) {
    fail(mp, 400, "%s: not UTF-8 text", mp->cur_key);
    return;
  }
  json_object_set_new(mp->fields, mp->cur_key, v);
  mp->text_len = 0;
}

static enum MHD_Result new_file(h3_multipart *mp, const char *key, const char *filename) {
  if (mp->nfiles >= MAX_FILES) return fail(mp, 400, "more than %s files in one request", "8");
  h3_multipart_file *g = realloc(mp->files, (size_t)(mp->nfiles + 1) * sizeof *g);
  if (!g) return fail(mp, 503, "%s", "out of memory");
  mp->files = g;
  h3_multipart_file *f = &mp->files[mp->nfiles];
  memset(f, 0, sizeof *f);
  f->fd = -1;
  snprintf(f->field, sizeof f->field, "%s", key);
  snprintf(f->client_name, sizeof f->client_name, "%s", filename);
  char id[40], name[96];
  h3_srv_new_id(".part-", id, sizeof id);
  snprintf(name, sizeof name, "uploads/%s", id);
  h3_srv_path(mp->srv, name, f->tmp, sizeof f->tmp);
  f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (f->fd < 0) {
    H3_LOGW("upload: %s: %s", f->tmp, strerror(errno));
    f->tmp[0] = 0;
    return fail(mp, 500, "cannot store the upload: %s", strerror(errno));
  }
  mp->cur_file = mp->nfiles++;
  return MHD_YES;
}

enum MHD_Result h3_multipart_iterator(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                      const char *content_type, const char *transfer_encoding, const char *data,
                                      uint64_t off, size_t size) {
  (void)kind;
  (void)content_type;
  (void)transfer_encoding;
  h3_multipart *mp = cls;
  if (mp->err_code) return MHD_NO;
  if (!key) key = "";
  if (strlen(key) >= sizeof mp->cur_key) return fail(mp, 400, "%s", "a form field name is too long");
  if (filename) { /* a file part */
    if (mp->cur_file < 0 || strcmp(mp->files[mp->cur_file].field, key) != 0 ||
        (off == 0 && mp->files[mp->cur_file].bytes > 0)) {
      flush_text(mp);
      if (new_file(mp, key, filename) != MHD_YES) return MHD_NO;
    }
    h3_multipart_file *f = &mp->files[mp->cur_file];
    mp->total += (int64_t)size;
    if (mp->total > mp->srv->cfg.max_upload_bytes) {
      char lim[48];
      snprintf(lim, sizeof lim, "%lld", (long long)mp->srv->cfg.max_upload_bytes);
      return fail(mp, 413, "the upload is over the limit of %s bytes (--max-upload-mb)", lim);
    }
    for (size_t done = 0; done < size;) {
      ssize_t w = write(f->fd, data + done, size - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return fail(mp, 500, "cannot store the upload: %s", strerror(errno));
      done += (size_t)w;
    }
    f->bytes += (int64_t)size;
    return MHD_YES;
  }
  /* a text field */
  /* libmicrohttpd may announce a value with an empty first call: a new value is a new key, or
   * offset 0 after some text */
  if (!mp->in_text || strcmp(mp->cur_key, key) != 0 || (off == 0 && mp->text_len > 0)) {
    flush_text(mp);
    if (mp->err_code) return MHD_NO;
    snprintf(mp->cur_key, sizeof mp->cur_key, "%s", key);
    mp->in_text = true;
    mp->text_len = 0;
    mp->cur_file = -1;
  }
  if (mp->text_len + size > MAX_FIELD_BYTES) return fail(mp, 413, "%s: a form field over 64 KiB", key);
  char *t = realloc(mp->text, mp->text_len + size + 1);
  if (!t) return fail(mp, 503, "%s", "out of memory");
  mp->text = t;
  memcpy(mp->text + mp->text_len, data, size);
  mp->text_len += size;
  return MHD_YES;
}

const char *h3_multipart_error(h3_multipart *mp, unsigned *code) {
  if (!mp) return NULL;
  flush_text(mp);
  for (int i = 0; i < mp->nfiles; i++) close_file(&mp->files[i]);
  if (!mp->err_code) return NULL;
  *code = mp->err_code;
  return mp->err;
}

h3_status h3_upload_accept(h3_srv *srv, h3_multipart *mp, int i, h3_upload *u, unsigned *code) {
  memset(u, 0, sizeof *u);
  h3_multipart_file *f = &mp->files[i];
  *code = 500;
  if (!f->tmp[0]) return h3_fail(H3_ERR_INTERNAL, "upload %d: already taken", i);
  close_file(f);
  h3_media_info info;
  h3_status st = h3_media_probe(f->tmp, &info);
  if (st != H3_OK) {
    *code = 415;
    h3_error_prefix("%s", f->field);
    return st;
  }
  h3_srv_new_id("file_", u->id, sizeof u->id);
  snprintf(u->kind, sizeof u->kind, "%s", info.kind);
  snprintf(u->mime, sizeof u->mime, "%s", info.mime);
  snprintf(u->file, sizeof u->file, "uploads/%s.%s", u->id, info.ext);
  u->bytes = f->bytes;
  u->width = info.width;
  u->height = info.height;
  u->duration = info.duration;
  /* shown to people only: printable characters, no folders */
  const char *base = strrchr(f->client_name, '/');
  base = base ? base + 1 : f->client_name;
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)base; *p && k + 1 < sizeof u->client_name; p++)
    u->client_name[k++] = *p < 0x20 || *p == 0x7f || *p == '\\' ? '_' : (char)*p;
  u->client_name[k] = 0;
  u->created_at = h3_srv_now();
  char dst[4200];
  h3_srv_path(srv, u->file, dst, sizeof dst);
  if (rename(f->tmp, dst) != 0) return h3_fail(H3_ERR_IO, "upload: %s: %s", dst, strerror(errno));
  f->tmp[0] = 0;
  if (!strcmp(u->kind, "video")) {
    char pname[96], ppath[4200];
    snprintf(pname, sizeof pname, "uploads/%s.poster.png", u->id);
    h3_srv_path(srv, pname, ppath, sizeof ppath);
    if (h3_media_poster(dst, ppath) == H3_OK) snprintf(u->poster_file, sizeof u->poster_file, "%s", pname);
    else H3_LOGW("upload %s: no poster: %s", u->id, h3_last_error());
  }
  st = srv->store->ops->upload_put(srv->store, u);
  if (st != H3_OK) {
    unlink(dst);
    if (u->poster_file[0]) {
      char ppath[4200];
      h3_srv_path(srv, u->poster_file, ppath, sizeof ppath);
      unlink(ppath);
    }
  }
  return st;
}

json_t *h3_upload_json(const h3_upload *u) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:f, s:I}", "id", u->id, "object", "upload", "kind",
                        u->kind, "mime", u->mime, "bytes", (json_int_t)u->bytes, "width", (json_int_t)u->width,
                        "height", (json_int_t)u->height, "duration", u->duration, "created_at",
                        (json_int_t)u->created_at);
  char url[160];
  snprintf(url, sizeof url, "/api/files/%s", u->file);
  json_object_set_new(o, "url", json_string(url));
  if (u->poster_file[0]) {
    snprintf(url, sizeof url, "/api/files/%s", u->poster_file);
    json_object_set_new(o, "poster_url", json_string(url));
  } else {
    json_object_set_new(o, "poster_url", json_null());
  }
  json_object_set_new(o, "filename", u->client_name[0] ? json_string(u->client_name) : json_null());
  if (!json_object_get(o, "filename")) json_object_set_new(o, "filename", json_null()); /* not UTF-8 */
  return o;
}
