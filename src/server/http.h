/* The HTTP layer of `h3 serve` on libmicrohttpd: one routing table (method,
 * path pattern, what body it takes, handler), the API key check, body and
 * upload limits, and the helpers every handler answers with (JSON, errors in
 * the OpenAI shape {"error": {"message", "type", "param", "code"}}, files with
 * ranges, event streams). */
#ifndef H3_SERVER_HTTP_H
#define H3_SERVER_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/server.h"

typedef struct h3_multipart h3_multipart;

typedef enum h3_body_kind {
  H3_BODY_NONE = 0,   /* a body is read and ignored */
  H3_BODY_JSON = 1,   /* application/json (up to max_body_bytes) */
  H3_BODY_FORM = 2,   /* JSON, or multipart/form-data with files (up to max_upload_bytes) */
  H3_BODY_UPLOAD = 3, /* multipart/form-data only */
} h3_body_kind;

typedef struct h3_req h3_req;
typedef enum MHD_Result (*h3_handler)(h3_req *r);

typedef struct h3_route {
  const char *method;
  const char *pattern; /* "/v1/videos/{}/content"; a final "{*}" takes the rest of the path */
  h3_body_kind body;
  h3_handler fn;
} h3_route;

struct h3_req {
  h3_srv *srv;
  struct MHD_Connection *conn;
  const char *method, *url;
  const h3_route *route;
  char arg[2][128];            /* the {} captures */
  char rest[1024];             /* the {*} capture */
  char *body;                  /* a JSON body (NUL-terminated) */
  size_t body_len, body_cap;
  h3_multipart *mp;            /* a multipart body (uploads.c) */
  struct MHD_PostProcessor *pp;
  unsigned deferred_code;      /* an error found while the body streamed in, answered at its end */
  char deferred_msg[256];
  char deferred_hname[32], deferred_hvalue[128]; /* a header of that answer */
  int64_t discarded;           /* bytes dropped after such an error */
  bool json_body;              /* the body is JSON (else multipart) */
  bool answered;               /* a response is queued */
  double t0;
};

/* A JSON answer (takes the reference to `body`). */
enum MHD_Result h3_http_json(h3_req *r, unsigned code, json_t *body);
/* An error answer; `param` names the field (or NULL). */
enum MHD_Result h3_http_error(h3_req *r, unsigned code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The error of an h3_status from the engine's option table or the store, as 400 / 500. */
enum MHD_Result h3_http_status_error(h3_req *r, h3_status st, const char *param);
/* A query argument (NULL when absent). */
const char *h3_http_query(h3_req *r, const char *key);
/* The JSON body as an object: NULL after answering 400 (malformed, not an object). */
json_t *h3_http_body_object(h3_req *r, enum MHD_Result *ret);
/* A file of the outputs folder (Range: bytes=... answered with 206). */
enum MHD_Result h3_http_file(h3_req *r, const char *path, const char *mime);
/* A fixed text (not copied: static storage). */
enum MHD_Result h3_http_text(h3_req *r, unsigned code, const char *mime, const char *text);
/* Adds the headers every answer carries (CORS when configured, nosniff, no caching). */
void h3_http_common_headers(h3_req *r, struct MHD_Response *resp, bool cache);

/* The daemon on cfg.host:cfg.port (port 0: any; srv->port is set to the bound port). */
h3_status h3_http_start(h3_srv *srv);
/* A daemon without a listening socket or threads: the caller adds connections (MHD_add_connection) and
 * runs them (MHD_run) — the fuzz target.  Event streams must not wait: stop the hub first. */
h3_status h3_http_start_manual(h3_srv *srv);
/* Stop accepting new connections (the listening socket closes). */
void h3_http_quiesce(h3_srv *srv);
void h3_http_stop(h3_srv *srv);

#endif
