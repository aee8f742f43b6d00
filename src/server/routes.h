/* The handlers of `h3 serve`'s routes (the table is in http.c; docs/HTTP.md). */
#ifndef H3_SERVER_ROUTES_H
#define H3_SERVER_ROUTES_H

#include "server/http.h"

/* routes_v1.c: the OpenAI-style video API */
enum MHD_Result h3_v1_create(h3_req *r);
enum MHD_Result h3_v1_list(h3_req *r);
enum MHD_Result h3_v1_get(h3_req *r);
enum MHD_Result h3_v1_content(h3_req *r);
enum MHD_Result h3_v1_delete(h3_req *r);

/* routes_queue.c: the gallery UI's queue */
enum MHD_Result h3_q_create(h3_req *r);
enum MHD_Result h3_q_list(h3_req *r);
enum MHD_Result h3_q_get(h3_req *r);
enum MHD_Result h3_q_patch(h3_req *r);
enum MHD_Result h3_q_delete(h3_req *r);
enum MHD_Result h3_q_upload(h3_req *r);

/* routes_misc.c */
enum MHD_Result h3_r_events(h3_req *r);
enum MHD_Result h3_r_files(h3_req *r);
enum MHD_Result h3_r_status(h3_req *r);
enum MHD_Result h3_r_health(h3_req *r);
enum MHD_Result h3_r_loras(h3_req *r);
enum MHD_Result h3_r_openapi(h3_req *r);
enum MHD_Result h3_r_app(h3_req *r);   /* /, /g/{id}: the web UI's page */
enum MHD_Result h3_r_asset(h3_req *r); /* /assets/...: its scripts and styles */

/* Shared by the route files (routes_misc.c): the job of the path's {id}; false after answering 500, or 404
 * "no NOUN '{id}'" (noun: "job" for the queue, "video" for the OpenAI-style API). */
bool h3_route_job_of(h3_req *r, const char *noun, h3_job *j, enum MHD_Result *ret);

#endif
