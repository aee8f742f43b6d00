/* Jobs as both API families see them: a request (JSON or form fields, and
 * the files of a multipart body) checked field by field through the engine's
 * option table and enqueued; the job object; cancel-or-delete; the events a
 * change publishes. */
#ifndef H3_SERVER_JOBS_H
#define H3_SERVER_JOBS_H

#include <jansson.h>

#include "server/server.h"
#include "server/uploads.h"

/* A new job from `fields` (a JSON object; text_fields: every value is a form field's text) and the files
 * of `mp` (may be NULL).  On failure *code is the HTTP status, param the field at fault ("" when none) and
 * h3_last_error() the message. */
h3_status h3_jobs_create(h3_srv *s, const json_t *fields, bool text_fields, h3_multipart *mp, h3_job *out,
                         unsigned *code, char *param, size_t pcap);

/* The job object (detail: also its params, timings and status history). */
json_t *h3_job_json(const h3_srv *s, const h3_job *j, bool detail);

/* A generation_update event with the job object. */
void h3_jobs_publish(h3_srv *s, const h3_job *j);
/* Re-reads the job from the store and publishes it. */
void h3_jobs_publish_id(h3_srv *s, const char *id);

typedef enum h3_delete_result {
  H3_DELETE_NOT_FOUND = 0,
  H3_DELETE_CANCELLED,   /* it was queued or running: now cancelled */
  H3_DELETE_CANCELLING,  /* running: asked to stop, not stopped yet */
  H3_DELETE_DELETED,     /* it had finished: deleted with its files */
} h3_delete_result;
/* DELETE: cancels an active job, deletes a finished one and its files.  *after: the job as it is now
 * (for cancelled / cancelling; cleared otherwise). */
h3_status h3_jobs_delete(h3_srv *s, const char *id, h3_delete_result *res, h3_job *after);

/* Rating words: "approved" 1, "rejected" -1, null 0. */
const char *h3_rating_name(int rating);

#endif
