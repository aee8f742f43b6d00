/* A clone without a built web UI still builds h3, and h3 serve's page then says how to build it: the table
 * cmake/embed_web.cmake writes for a web/dist that does not exist (tests/CMakeLists.txt generates it at
 * build time, as the h3 build does for a fresh clone) holds exactly the page src/server/web_missing.html,
 * marked as not built. */
#include <string.h>

#include "server/web.h"
#include "testutil.h"

#define MIN_CHECKS 9

static int has(const h3_web_file *f, const char *s) {
  const size_t n = strlen(s);
  for (size_t i = 0; i + n <= f->len; i++)
    if (!memcmp(f->data + i, s, n)) return 1;
  return 0;
}

int main(void) {
  CHECK(h3_web_built == 0);
  CHECK(h3_web_n_files == 1);
  const h3_web_file *f = &h3_web_files[0];
  CHECK(!strcmp(f->path, "/index.html"));
  CHECK(!strncmp(f->mime, "text/html", 9));
  CHECK(f->len > 200 && f->gz == NULL);
  CHECK_MSG(has(f, "<meta name=\"h3-ui\" content=\"missing\">"), "the page marks itself as the missing UI (the tests read it)");
  CHECK_MSG(has(f, "npm ci") && has(f, "npm run build"), "the page says how to build the UI");
  CHECK_MSG(has(f, "cmake --build"), "and how to build h3 again");
  CHECK_MSG(has(f, "/openapi.json"), "and where the API is described");
  return h3t_finish(MIN_CHECKS);
}
