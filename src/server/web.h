/* The web gallery built into the binary: the files of web/dist (made by `npm run build` in web/), embedded
 * by cmake/embed_web.cmake at build time with their gzip variants.  Without a built UI the table holds one
 * page, /index.html, saying so (src/server/web_missing.html) and h3_web_built is 0 (docs/HTTP.md). */
#ifndef H3_SERVER_WEB_H
#define H3_SERVER_WEB_H

#include <stddef.h>

typedef struct h3_web_file {
  const char *path;          /* "/index.html", "/assets/index-<hash>.js", ... */
  const char *mime;
  const unsigned char *data;
  size_t len;
  const unsigned char *gz;   /* the gzip variant (NULL: none) */
  size_t gz_len;
} h3_web_file;

extern const h3_web_file h3_web_files[];
extern const int h3_web_n_files;
extern const int h3_web_built;

/* The file of that path, or NULL. */
const h3_web_file *h3_web_find(const char *path);

#endif
