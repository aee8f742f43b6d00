/* The h3_job_store contract (src/server/store.h) on the SQLite implementation: enqueue and claim in
 * order, the queue limit, conditional transitions, progress and finish, list (status, search with
 * LIKE's characters literal, cursor and offset paging, totals), rating, remove only from the allowed
 * statuses, crash recovery (fail or requeue), the event log (ids grow, survive a reopen), uploads,
 * the files it names, the schema migrated once by user_version and a newer database refused.
 * A second implementation (issue #21) should pass the same checks. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/store.h"
#include "testutil.h"

static h3_job_store *open_store(const char *path) {
  h3_job_store *s = NULL;
  h3_status st = h3_store_sqlite_open(path, &s);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  return s;
}

static void new_job(h3_job_store *s, const char *id, const char *prompt, int max_active, bool *full) {
  h3_job j;
  memset(&j, 0, sizeof j);
  snprintf(j.id, sizeof j.id, "%s", id);
  j.prompt = strdup(prompt);
  j.params_json = strdup("{\"prompt\":\"x\",\"seed\":18446744073709551615}");
  j.seed = UINT64_MAX; /* beyond SQLite's integers: kept as text */
  j.width = 256;
  j.height = 128;
  CHECK(s->ops->enqueue(s, &j, max_active, full) == H3_OK);
  if (!*full) CHECK(j.seq > 0 && j.created_at > 0 && j.status == H3_JOB_QUEUED);
  h3_job_clear(&j);
}

int main(void) {
  char dir[] = "/tmp/h3-store-test.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char db[256];
  snprintf(db, sizeof db, "%s/h3.db", dir);
  h3_job_store *s = open_store(db);
  if (!s) return h3t_finish(1);
  bool full = false;
  new_job(s, "video_a", "a red fox", 3, &full);
  new_job(s, "video_b", "100% blue_whale", 3, &full);
  new_job(s, "video_c", "a cat", 3, &full);
  CHECK(!full);
  new_job(s, "video_d", "one too many", 3, &full);
  CHECK(full); /* three active at most */
  int64_t counts[H3_JOB_STATUS_COUNT];
  CHECK(s->ops->counts(s, counts) == H3_OK && counts[H3_JOB_QUEUED] == 3);

  /* claim: the oldest first, in_progress */
  h3_job j;
  bool found = false;
  CHECK(s->ops->claim_next(s, "w1", 30, &j, &found) == H3_OK && found && !strcmp(j.id, "video_a"));
  CHECK(j.status == H3_JOB_IN_PROGRESS && j.started_at > 0 && j.seed == UINT64_MAX && j.width == 256);
  j.progress = 42;
  snprintf(j.phase, sizeof j.phase, "denoise");
  j.step = 3;
  j.total_steps = 9;
  j.eta_s = 1.5;
  h3_lease_state ls = H3_LEASE_LOST;
  CHECK(s->ops->update_progress(s, &j, &ls) == H3_OK && ls == H3_LEASE_HELD); /* its worker's lease holds */
  h3_job g;
  CHECK(s->ops->get(s, "video_a", &g, &found) == H3_OK && found);
  CHECK(g.progress == 42 && !strcmp(g.phase, "denoise") && g.step == 3 && g.total_steps == 9 && g.eta_s == 1.5);
  CHECK(g.history_json && strstr(g.history_json, "in_progress"));
  h3_job_clear(&g);

  /* transitions only from the statuses given */
  bool changed = true;
  CHECK(s->ops->transition(s, "video_a", H3_JOB_MASK(H3_JOB_QUEUED), H3_JOB_CANCELLED, "x", &changed) == H3_OK);
  CHECK(!changed); /* it is running, not queued */
  CHECK(s->ops->transition(s, "video_c", H3_JOB_MASK(H3_JOB_QUEUED), H3_JOB_CANCELLED, "by a client", &changed) ==
        H3_OK);
  CHECK(changed);
  CHECK(s->ops->transition(s, "nope", H3_JOB_ACTIVE, H3_JOB_CANCELLED, NULL, &changed) == H3_OK && !changed);

  /* finish */
  j.status = H3_JOB_COMPLETED;
  j.progress = 100;
  snprintf(j.video_file, sizeof j.video_file, "videos/video_a.mp4");
  j.timings_json = strdup("{\"total_s\":1}");
  bool lost = true;
  CHECK(s->ops->finish(s, &j, NULL, &lost) == H3_OK && !lost);
  CHECK(s->ops->finish(s, &j, NULL, &lost) == H3_OK && lost); /* the lease went with the finish: nothing changes */
  h3_job_clear(&j);
  CHECK(s->ops->get(s, "video_a", &g, &found) == H3_OK && found && g.status == H3_JOB_COMPLETED &&
        g.completed_at > 0 && !strcmp(g.video_file, "videos/video_a.mp4"));
  h3_job_clear(&g);

  /* rating, list */
  CHECK(s->ops->set_rating(s, "video_a", 1, &found) == H3_OK && found);
  CHECK(s->ops->set_rating(s, "nope", 1, &found) == H3_OK && !found);
  h3_job_list l;
  h3_job_query q = {.limit = 10};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.n == 3 && l.total == 3 && !strcmp(l.jobs[0].id, "video_c"));
  CHECK(l.n == 3 && l.jobs[2].rating == 1);
  h3_job_list_free(&l);
  q = (h3_job_query){.limit = 10, .search = "100%"};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.n == 1 && !strcmp(l.jobs[0].id, "video_b"));
  h3_job_list_free(&l);
  q = (h3_job_query){.limit = 10, .search = "1_0"};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.n == 0); /* '_' is literal */
  h3_job_list_free(&l);
  q = (h3_job_query){.limit = 10, .search = "RED FOX"};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.n == 1);
  h3_job_list_free(&l);
  q = (h3_job_query){.limit = 1, .ascending = true};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.n == 1 && l.has_more && !strcmp(l.jobs[0].id, "video_a"));
  const int64_t cursor = l.n ? l.jobs[0].seq : 0;
  h3_job_list_free(&l);
  q = (h3_job_query){.limit = 5, .ascending = true, .after_seq = cursor};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.n == 2 && !l.has_more && !strcmp(l.jobs[0].id, "video_b"));
  h3_job_list_free(&l);
  q = (h3_job_query){.limit = 5, .offset = 2, .status_mask = H3_JOB_MASK(H3_JOB_QUEUED) | H3_JOB_MASK(H3_JOB_COMPLETED)};
  CHECK(s->ops->list(s, &q, &l) == H3_OK && l.total == 2 && l.n == 0);
  h3_job_list_free(&l);

  /* remove only finished jobs */
  bool removed = true;
  CHECK(s->ops->remove(s, "video_b", H3_JOB_FINISHED, &found, &removed) == H3_OK && found && !removed);
  CHECK(s->ops->remove(s, "video_c", H3_JOB_FINISHED, &found, &removed) == H3_OK && found && removed);
  CHECK(s->ops->get(s, "video_c", &g, &found) == H3_OK && !found);

  /* events and uploads */
  int64_t e1 = 0, e2 = 0, last = 0;
  CHECK(s->ops->event_append(s, "generation_update", "video_a", "{\"n\":1}", &e1) == H3_OK);
  CHECK(s->ops->event_append(s, "generation_deleted", "video_c", "{\"n\":2}", &e2) == H3_OK && e2 == e1 + 1);
  h3_event_list ev;
  CHECK(s->ops->events_after(s, e1, 10, &ev) == H3_OK && ev.n == 1 && ev.ev[0].id == e2 &&
        !strcmp(ev.ev[0].type, "generation_deleted"));
  h3_event_list_free(&ev);
  h3_upload u = {.id = "file_x", .kind = "image", .file = "uploads/file_x.png", .mime = "image/png", .bytes = 9,
                 .width = 2, .height = 3, .client_name = "a.png", .created_at = 1};
  CHECK(s->ops->upload_put(s, &u) == H3_OK);
  h3_upload u2;
  CHECK(s->ops->upload_get(s, "file_x", &u2, &found) == H3_OK && found && u2.width == 2 && !strcmp(u2.kind, "image"));
  char **names = NULL;
  int nn = 0;
  CHECK(s->ops->files(s, &names, &nn) == H3_OK && nn == 2);
  for (int i = 0; i < nn; i++) free(names[i]);
  free(names);

  /* a crash: b is claimed (in progress) when the process dies */
  CHECK(s->ops->claim_next(s, "w1", 30, &j, &found) == H3_OK && found && !strcmp(j.id, "video_b"));
  h3_job_clear(&j);
  s->ops->close(s);
  s = open_store(db); /* reopened: the schema is not applied twice */
  if (!s) return h3t_finish(1);
  CHECK(s->ops->event_last_id(s, &last) == H3_OK && last == e2);
  int n = 0;
  CHECK(s->ops->recover(s, false, &n) == H3_OK && n == 1);
  CHECK(s->ops->get(s, "video_b", &g, &found) == H3_OK && found && g.status == H3_JOB_FAILED &&
        !strcmp(g.error_code, "interrupted"));
  h3_job_clear(&g);
  new_job(s, "video_e", "requeued", 0, &full);
  CHECK(s->ops->claim_next(s, "w1", 30, &j, &found) == H3_OK && found && !strcmp(j.id, "video_e"));
  h3_job_clear(&j);
  CHECK(s->ops->recover(s, true, &n) == H3_OK && n == 1);
  CHECK(s->ops->get(s, "video_e", &g, &found) == H3_OK && found && g.status == H3_JOB_QUEUED && g.started_at == 0);
  CHECK(g.history_json && strstr(g.history_json, "requeued"));
  h3_job_clear(&g);
  char msg[256];
  CHECK(s->ops->check(s, msg, sizeof msg) == H3_OK && !strcmp(msg, "ok"));
  s->ops->close(s);

  /* a database from a newer h3 is refused */
  sqlite3 *raw = NULL;
  CHECK(sqlite3_open(db, &raw) == SQLITE_OK);
  CHECK(sqlite3_exec(raw, "PRAGMA user_version = 999", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(raw);
  h3_job_store *s2 = NULL;
  CHECK(h3_store_sqlite_open(db, &s2) == H3_ERR_FORMAT && strstr(h3_last_error(), "newer"));
  if (s2) s2->ops->close(s2);

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return h3t_finish(59);
}
