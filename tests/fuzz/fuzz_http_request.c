/* libFuzzer target: raw bytes as one HTTP connection to h3 serve's request handling — routing, the
 * API key, body limits, JSON and multipart parsing (libmicrohttpd's post processor), uploads probed
 * with FFmpeg, the job store on SQLite, every route's answer — on a daemon without a socket: the bytes
 * go in through a socket pair and the daemon is run by hand until it has answered.  No worker runs
 * (jobs stay queued); the event hub is stopped (event streams end at once).  It must never crash,
 * hang or leak. */
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "server/http.h"
#include "server/sse.h"

#define FUZZ_ASSERT(c)            \
  do {                            \
    if (!(c)) __builtin_trap();   \
  } while (0)

static h3_srv g_srv;

static void setup(void) {
  h3_set_log_level(H3_LOG_ERROR);
  static char dir[] = "h3fuzz-http.XXXXXX"; /* in the working folder (run_server_short.sh: a scratch one) */
  FUZZ_ASSERT(mkdtemp(dir) != NULL);
  h3_srv *s = &g_srv;
  char p[4300];
  snprintf(p, sizeof p, "%s/toy", dir);
  setenv("H3_TOY_DIR", p, 1); /* before the settings are first read */
  h3_srv_config_init(&s->cfg);
  s->cfg.api_key = NULL; /* every input reaches the routes; the key check is one compare (tests cover it) */
  s->cfg.max_upload_bytes = 1 << 20;
  s->cfg.max_body_bytes = 64 << 10;
  s->cfg.max_queue = 50;
  snprintf(s->outputs, sizeof s->outputs, "%s", dir);
  snprintf(p, sizeof p, "%s/videos", dir);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/uploads", dir);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/h3.db", dir);
  FUZZ_ASSERT(h3_store_sqlite_open(p, &s->store) == H3_OK);
  FUZZ_ASSERT(h3_hub_open(s->store, &s->hub) == H3_OK);
  h3_hub_stop(s->hub);
  h3_engine_config ec;
  h3_engine_config_init(&ec);
  ec.threads = 1;
  FUZZ_ASSERT(h3_engine_open(&ec, &s->engine) == H3_OK);
  snprintf(s->model_name, sizeof s->model_name, "h3-toy");
  pthread_mutex_init(&s->mem_mu, NULL);
  s->started_at = h3_srv_now();
  FUZZ_ASSERT(h3_http_start_manual(s) == H3_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int once;
  if (!once) {
    setup();
    once = 1;
  }
  int sv[2];
  FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  int sz = 1 << 20;
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  size_t off = 0;
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FUZZ_ASSERT(MHD_add_connection(g_srv.mhd, sv[0], (const struct sockaddr *)&a, sizeof a) == MHD_YES);
  char buf[65536];
  bool eof = false, shut = false;
  for (int i = 0; i < 2000 && !eof; i++) {
    if (off < size) {
      ssize_t w = write(sv[1], data + off, size - off);
      if (w > 0) off += (size_t)w;
    }
    if (off >= size && !shut) {
      shutdown(sv[1], SHUT_WR);
      shut = true;
    }
    MHD_run(g_srv.mhd);
    for (;;) {
      ssize_t r = read(sv[1], buf, sizeof buf);
      if (r == 0) eof = true;
      if (r <= 0) break;
    }
  }
  close(sv[1]);
  for (int i = 0; i < 4; i++) MHD_run(g_srv.mhd); /* the daemon closes its end */
  return 0;
}
