#include "cli/term_graphics.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "media/png_frames.h"

static bool env_is(const char *name, const char *value) {
  const char *v = getenv(name);
  return v && !strcmp(v, value);
}
static bool env_has(const char *name, const char *part) {
  const char *v = getenv(name);
  return v && strstr(v, part);
}
static bool env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

h3_term_gfx h3_term_gfx_detect(void) {
  if (env_set("KITTY_WINDOW_ID") || env_has("TERM", "kitty") || env_is("TERM_PROGRAM", "ghostty") ||
      env_has("TERM", "ghostty") || env_set("GHOSTTY_RESOURCES_DIR"))
    return H3_GFX_KITTY;
  if (env_is("TERM_PROGRAM", "iTerm.app") || env_is("LC_TERMINAL", "iTerm2") || env_is("TERM_PROGRAM", "WezTerm") ||
      env_set("WEZTERM_EXECUTABLE"))
    return H3_GFX_ITERM2;
  return H3_GFX_NONE;
}

const char *h3_term_gfx_name(h3_term_gfx g) {
  return g == H3_GFX_KITTY ? "kitty" : g == H3_GFX_ITERM2 ? "iTerm2" : "none";
}

static char *base64(const uint8_t *d, size_t n, size_t *out_len) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const size_t len = 4 * ((n + 2) / 3);
  char *o = malloc(len + 1);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    o[k++] = tab[(v >> 18) & 63];
    o[k++] = tab[(v >> 12) & 63];
    o[k++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
    o[k++] = i + 2 < n ? tab[v & 63] : '=';
  }
  o[k] = 0;
  *out_len = k;
  return o;
}

h3_status h3_term_gfx_show(FILE *f, h3_term_gfx g, const uint8_t *rgb, int width, int height, int zoom) {
  if (g == H3_GFX_NONE) return H3_OK;
  if (zoom < 1) zoom = 1;
  const int W = width * zoom, H = height * zoom;
  uint8_t *big = NULL;
  const uint8_t *img = rgb;
  if (zoom > 1) {
    big = malloc((size_t)W * (size_t)H * 3);
    if (!big) return h3_fail(H3_ERR_NOMEM, "preview");
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) memcpy(big + ((size_t)y * W + x) * 3, rgb + ((size_t)(y / zoom) * width + x / zoom) * 3, 3);
    img = big;
  }
  uint8_t *png = NULL;
  size_t n = 0;
  h3_status st = h3_png_encode_rgb8(img, W, H, &png, &n);
  free(big);
  if (st != H3_OK) return st;
  size_t blen = 0;
  char *b64 = base64(png, n, &blen);
  free(png);
  if (!b64) return h3_fail(H3_ERR_NOMEM, "preview");
  if (g == H3_GFX_KITTY) {
    /* a=T transmit and display, f=100 PNG, q=2 no replies; m=1 while more chunks follow */
    for (size_t off = 0; off < blen; off += 4096) {
      const size_t len = blen - off < 4096 ? blen - off : 4096;
      const int more = off + len < blen;
      if (off == 0) fprintf(f, "\033_Ga=T,f=100,q=2,m=%d;%.*s\033\\", more, (int)len, b64 + off);
      else fprintf(f, "\033_Gm=%d;%.*s\033\\", more, (int)len, b64 + off);
    }
  } else {
    fprintf(f, "\033]1337;File=inline=1;size=%zu;width=%dpx;height=%dpx;preserveAspectRatio=1:%s\a", n, W, H, b64);
  }
  fputc('\n', f);
  fflush(f);
  free(b64);
  return H3_OK;
}
