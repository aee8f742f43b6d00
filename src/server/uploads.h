/* multipart/form-data bodies (through libmicrohttpd's post processor): text
 * fields are kept as strings, file parts stream to temporary files in
 * <outputs>/uploads/ under the size limit; then each file is accepted by its
 * content (media_probe.h), named by the server (uploads/<id>.<ext>, never
 * the client's name), given a poster if it is a video, and recorded in the
 * store.  Whatever is not accepted is removed when the request ends. */
#ifndef H3_SERVER_UPLOADS_H
#define H3_SERVER_UPLOADS_H

#include <jansson.h>
#include <microhttpd.h>

#include "server/server.h"

typedef struct h3_multipart_file {
  char field[64];
  char client_name[256];
  char tmp[4200];   /* the temporary file ("" once taken or removed) */
  int fd;
  int64_t bytes;
} h3_multipart_file;

typedef struct h3_multipart {
  h3_srv *srv;
  json_t *fields;   /* name -> string */
  h3_multipart_file *files;
  int nfiles;
  int64_t total;    /* file bytes so far */
  unsigned err_code;
  char err[256];
  /* the part being read */
  int cur_file;     /* index, or -1 for a text field */
  char cur_key[64];
  char *text;
  size_t text_len;
  bool in_text;
} h3_multipart;

h3_status h3_multipart_new(h3_srv *srv, h3_multipart **out);
/* The partial files of a refused request removed now, before its answer goes out (not when the
 * connection's request completes: a client that reads the answer finds no .part file left). */
void h3_multipart_discard(h3_multipart *mp);
void h3_multipart_free(h3_multipart *mp);
enum MHD_Result h3_multipart_iterator(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                      const char *content_type, const char *transfer_encoding, const char *data,
                                      uint64_t off, size_t size);
/* The error so far (NULL when none) and its HTTP status; after the body ended it also closes the last part. */
const char *h3_multipart_error(h3_multipart *mp, unsigned *code);

/* Accept file i: probe it, keep it as uploads/<id>.<ext> (+ a poster for a video), record it.
 * *code: the HTTP status of a refusal (415 not media, 500 otherwise). */
h3_status h3_upload_accept(h3_srv *srv, h3_multipart *mp, int i, h3_upload *out, unsigned *code);
/* The upload as the API shows it. */
json_t *h3_upload_json(const h3_upload *u);

#endif
