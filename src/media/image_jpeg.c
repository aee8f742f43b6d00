/* JPEG -> RGB8 through libjpeg-turbo with Pillow's settings (image_jpeg.h).
 *
 * libjpeg reports errors through error_exit, which must not return: it
 * longjmps back here and the message libjpeg formats becomes an h3_fail.  All
 * state that lives across setjmp is in a heap context reached through one
 * pointer that is never reassigned, so nothing is clobbered by the jump. */
#include "media/image_jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

_Static_assert(sizeof((h3_jpeg_result *)0)->warning >= JMSG_LENGTH_MAX, "format_message writes JMSG_LENGTH_MAX bytes");

typedef struct ctx {
  struct jpeg_decompress_struct c;
  struct jpeg_error_mgr err;
  struct jpeg_source_mgr src;
  struct jpeg_progress_mgr progress;
  jmp_buf jb;
  int too_many_scans;
  const uint8_t *data; /* the file */
  size_t n, limit;     /* its size; the bytes handed to libjpeg so far (PIL's blocks) */
  size_t skip;         /* a skip_input_data past them */
  h3_jpeg_result *res;
  uint8_t *rgb; /* the output while decoding (freed on error) */
  uint8_t *row; /* one scanline of JCS_EXT_RGBX */
} ctx;

static void on_error_exit(j_common_ptr c) { longjmp(((ctx *)c->client_data)->jb, 1); }

/* libjpeg's emit_message with tracing off: warnings (level -1) are counted,
 * the first one is reported (kept here instead of printed to stderr). */
static void on_emit_message(j_common_ptr c, int level) {
  if (level >= 0) return;
  ctx *x = c->client_data;
  if (c->err->num_warnings == 0) c->err->format_message(c, x->res->warning);
  c->err->num_warnings++;
}

static void on_output_message(j_common_ptr c) { (void)c; } /* nothing goes to stderr */

static void on_progress(j_common_ptr c) {
  ctx *x = c->client_data;
  if (((j_decompress_ptr)c)->input_scan_number > H3_JPEG_MAX_SCANS) {
    x->too_many_scans = 1;
    longjmp(x->jb, 1);
  }
}

/* PIL's source (JpegDecode.c): the bytes PIL has handed over, then suspension.  ImageFile.load hands libjpeg the
 * file PIL_MAXBLOCK bytes at a time, calling the decoder again with the unconsumed rest plus the next block each
 * time it suspends, and raises "image file is truncated" when a suspended decoder meets the end of the file.  The
 * blocks matter: libjpeg's arithmetic decoder cannot suspend (JERR_CANT_SUSPEND), so PIL refuses an
 * arithmetic-coded scan that crosses a block boundary. */
#define PIL_MAXBLOCK 65536
static void src_init(j_decompress_ptr c) { (void)c; }
static boolean src_fill(j_decompress_ptr c) {
  (void)c;
  return FALSE;
}
static void src_skip(j_decompress_ptr c, long k) { /* PIL's skip_input_data: a skip past the block is kept */
  ctx *x = c->client_data;
  struct jpeg_source_mgr *s = c->src;
  if (k <= 0) return;
  if ((size_t)k > s->bytes_in_buffer) {
    x->skip = (size_t)k - s->bytes_in_buffer;
    s->next_input_byte += s->bytes_in_buffer;
    s->bytes_in_buffer = 0;
  } else {
    s->next_input_byte += k;
    s->bytes_in_buffer -= (size_t)k;
    x->skip = 0;
  }
}

/* The next block (after a suspension); 0 at the end of the file. */
static int refill(ctx *x) {
  do {
    if (x->limit >= x->n) return 0;
    x->limit = x->n - x->limit > PIL_MAXBLOCK ? x->limit + PIL_MAXBLOCK : x->n;
    size_t pos = (size_t)(x->src.next_input_byte - x->data), avail = x->limit - pos;
    if (x->skip) { /* decode(): skip_input_data(skip) first, and wait for more data while some is left */
      size_t m = x->skip < avail ? x->skip : avail;
      pos += m, avail -= m, x->skip -= m;
    }
    x->src.next_input_byte = x->data + pos;
    x->src.bytes_in_buffer = x->skip ? 0 : avail;
  } while (x->skip);
  return 1;
}

static h3_status truncated(const char *name, const char *where) {
  return h3_fail(H3_ERR_FORMAT, "%s: truncated JPEG file (the data ends %s; PIL refuses it too)", name, where);
}

static h3_status decode(ctx *x, const uint8_t *data, size_t n, const char *name, int64_t max_pixels) {
  j_decompress_ptr c = &x->c;
  h3_jpeg_result *res = x->res;
  if (setjmp(x->jb)) {
    char msg[JMSG_LENGTH_MAX] = "";
    const int code = x->err.msg_code;
    if (!x->too_many_scans) c->err->format_message((j_common_ptr)c, msg);
    jpeg_destroy_decompress(c);
    if (x->too_many_scans)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: progressive JPEG with more than %d scans is refused (a decoding-time "
                     "bomb; TurboJPEG's limit)", name, H3_JPEG_MAX_SCANS);
    if (code == JERR_CANT_SUSPEND && x->limit >= x->n) return truncated(name, "inside arithmetic-coded data");
    if (code == JERR_CANT_SUSPEND)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: arithmetic-coded JPEG data crosses one of the %d-byte blocks PIL hands "
                     "libjpeg, whose arithmetic decoder cannot wait for the next: PIL refuses the file (\"broken data "
                     "stream\"), and so does h3", name, PIL_MAXBLOCK);
    return h3_fail(H3_ERR_FORMAT, "%s: corrupt or unsupported JPEG data (libjpeg: %s)", name, msg);
  }
  c->err = jpeg_std_error(&x->err);
  x->err.error_exit = on_error_exit;
  x->err.emit_message = on_emit_message;
  x->err.output_message = on_output_message;
  c->client_data = x; /* kept by jpeg_create_decompress; error_exit needs it from the start */
  jpeg_create_decompress(c);
  x->src.init_source = src_init;
  x->src.fill_input_buffer = src_fill;
  x->src.skip_input_data = src_skip;
  x->src.resync_to_restart = jpeg_resync_to_restart;
  x->src.term_source = src_init;
  x->data = data, x->n = n;
  x->limit = n < PIL_MAXBLOCK ? n : PIL_MAXBLOCK;
  x->src.next_input_byte = data;
  x->src.bytes_in_buffer = x->limit;
  c->src = &x->src;
  x->progress.progress_monitor = on_progress;
  c->progress = &x->progress;

  for (;;) {
    int r = jpeg_read_header(c, FALSE); /* as PIL: tables-only datastreams are skipped */
    if (r == JPEG_HEADER_TABLES_ONLY) continue;
    if (r != JPEG_SUSPENDED) break;
    if (!refill(x)) {
      jpeg_destroy_decompress(c);
      return truncated(name, "inside its headers");
    }
  }
  res->width = (int)c->image_width;
  res->height = (int)c->image_height;
  res->components = c->num_components;
  res->progressive = c->progressive_mode != 0;
  res->arithmetic = c->arith_code != 0;
  if (c->num_components != 1 && c->num_components != 3) {
    jpeg_destroy_decompress(c);
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: JPEG with %d components is not supported (only greyscale and 3-channel%s)",
                   name, res->components, res->components == 4 ? "; CMYK/YCCK are not" : "");
  }
  if (res->width < 1 || res->height < 1 || (int64_t)res->width * res->height > max_pixels) {
    jpeg_destroy_decompress(c);
    return h3_fail(H3_ERR_INVALID, "%s: JPEG of %dx%d pixels exceeds the limit of %lld", name, res->width, res->height,
                   (long long)max_pixels);
  }
  /* JpegDecode.c: rawmode "L" -> JCS_GRAYSCALE, "RGB" (made "RGBX" by decode.c with libjpeg-turbo) -> JCS_EXT_RGBX;
   * jpeg_color_space is libjpeg's guess (PIL's jpegmode is ""); the rest are libjpeg's defaults, set for clarity */
  c->out_color_space = c->num_components == 1 ? JCS_GRAYSCALE : JCS_EXT_RGBX;
  c->dct_method = JDCT_ISLOW;
  c->do_fancy_upsampling = TRUE;
  c->do_block_smoothing = TRUE;
  c->scale_num = c->scale_denom = 1;
  while (!jpeg_start_decompress(c))
    if (!refill(x)) {
      jpeg_destroy_decompress(c);
      return truncated(name, "before its last scan");
    }
  const int W = (int)c->output_width, H = (int)c->output_height, k = c->output_components;
  if (W != res->width || H != res->height || (k != 1 && k != 4)) {
    jpeg_destroy_decompress(c);
    return h3_fail(H3_ERR_FORMAT, "%s: libjpeg decodes %dx%d x %d, the header says %dx%d", name, W, H, k, res->width,
                   res->height);
  }
  x->rgb = malloc((size_t)W * H * 3);
  x->row = malloc((size_t)W * 4);
  if (!x->rgb || !x->row) {
    jpeg_destroy_decompress(c);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory (%dx%d)", name, W, H);
  }
  while (c->output_scanline < c->output_height) {
    const int y = (int)c->output_scanline;
    JSAMPROW rp = x->row;
    if (jpeg_read_scanlines(c, &rp, 1) != 1) {
      if (refill(x)) continue;
      jpeg_destroy_decompress(c);
      return truncated(name, "before its last row");
    }
    uint8_t *o = x->rgb + (size_t)y * W * 3;
    if (k == 1)
      for (int i = 0; i < W; i++) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = x->row[i];
    else
      for (int i = 0; i < W; i++) o[3 * i] = x->row[4 * i], o[3 * i + 1] = x->row[4 * i + 1], o[3 * i + 2] = x->row[4 * i + 2];
  }
  /* called once, as PIL does: FALSE (suspended: the block or the file ends before the EOI marker) is accepted
   * (JpegDecode.c, case 4), an error is not */
  (void)jpeg_finish_decompress(c);
  res->warnings = x->err.num_warnings;
  jpeg_destroy_decompress(c);
  return H3_OK;
}

h3_status h3_jpeg_decode_rgb(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, uint8_t **rgb,
                             h3_jpeg_result *res) {
  *rgb = NULL;
  memset(res, 0, sizeof *res);
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
  snprintf(res->library, sizeof res->library, "libjpeg-turbo %d.%d.%d", LIBJPEG_TURBO_VERSION_NUMBER / 1000000,
           LIBJPEG_TURBO_VERSION_NUMBER / 1000 % 1000, LIBJPEG_TURBO_VERSION_NUMBER % 1000);
#else
  snprintf(res->library, sizeof res->library, "libjpeg %d", JPEG_LIB_VERSION);
#endif
  ctx *x = calloc(1, sizeof *x);
  if (!x) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
  x->res = res;
  h3_status st = decode(x, data, n, name, max_pixels);
  if (st == H3_OK) {
    *rgb = x->rgb;
    x->rgb = NULL;
  } else {
    res->warnings = x->err.num_warnings;
  }
  free(x->rgb);
  free(x->row);
  free(x);
  return st;
}
