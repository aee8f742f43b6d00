/* Images in the terminal: the kitty graphics protocol (kitty, Ghostty) and
 * iTerm2's inline images (iTerm2, WezTerm), the terminal told from the
 * environment; a PNG of the RGB8 image, base64 in the escape sequences.
 * Used by --show for the denoising previews. */
#ifndef H3_CLI_TERM_GRAPHICS_H
#define H3_CLI_TERM_GRAPHICS_H

#include <stdint.h>
#include <stdio.h>

#include "h3/h3.h"

typedef enum h3_term_gfx {
  H3_GFX_NONE = 0,
  H3_GFX_KITTY = 1,
  H3_GFX_ITERM2 = 2,
} h3_term_gfx;

/* From TERM, TERM_PROGRAM, LC_TERMINAL, KITTY_WINDOW_ID, GHOSTTY_RESOURCES_DIR, WEZTERM_EXECUTABLE. */
h3_term_gfx h3_term_gfx_detect(void);
const char *h3_term_gfx_name(h3_term_gfx g);

/* Write the image (scaled zoom times, nearest neighbour) as one escape sequence
 * (kitty: chunks of 4096 base64 bytes) followed by a newline. */
h3_status h3_term_gfx_show(FILE *f, h3_term_gfx g, const uint8_t *rgb, int width, int height, int zoom);

#endif
