/* JPEG decoding checks against the system libjpeg-turbo (not part of the build: needs libjpeg's headers).
 *
 *   jpeg_check exact         h3_image_decode (image_jpeg.c: libjpeg-turbo with Pillow's settings) vs libjpeg's own
 *                            decode (JCS_RGB, ISLOW, fancy upsampling, jpeg_mem_src) on generated JPEGs: sizes, 9
 *                            sampling layouts, 4 qualities, progressive, restarts, optimised tables, greyscale,
 *                            arithmetic coding.  Equal by construction: this checks the glue (row copies, RGBX,
 *                            greyscale replication), not a decoder.
 *   jpeg_check corrupt       3000 JPEGs with corrupted entropy bytes: equal output where libjpeg succeeds?
 *   jpeg_check ffmpeg-idct   FFmpeg's mjpeg decoder (idct=int/simple/auto/faani/simplemmx) vs libjpeg's ISLOW
 *                            planes (raw_data_out): why JPEG is not decoded with FFmpeg
 *   jpeg_check write DIR     writes the exact and corrupt sets, plus truncated files, into DIR (for pil_check.py)
 *
 * Build and run: tools/media_check/run.sh (JSIMD_FORCENONE=1 makes libjpeg-turbo use its C code paths). */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <libavcodec/avcodec.h>

#include "media/image_read.h"

struct err { struct jpeg_error_mgr pub; jmp_buf jb; int warns; };
static void on_err(j_common_ptr c) { longjmp(((struct err *)c->err)->jb, 1); }
static void on_msg(j_common_ptr c, int lvl) { if (lvl < 0) ((struct err *)c->err)->warns++; }

static unsigned char *encode(const unsigned char *rgb, int w, int h, int q, int hs, int vs, int chs, int cvs,
                             int prog, int grey, int rst, int opt, int arith, unsigned long *n) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  unsigned char *buf = NULL;
  jpeg_mem_dest(&c, &buf, n);
  c.image_width = w, c.image_height = h, c.input_components = grey ? 1 : 3;
  c.in_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, q, TRUE);
  if (!grey) {
    c.comp_info[0].h_samp_factor = hs, c.comp_info[0].v_samp_factor = vs;
    for (int i = 1; i < 3; i++) c.comp_info[i].h_samp_factor = chs, c.comp_info[i].v_samp_factor = cvs;
  }
  if (prog) jpeg_simple_progression(&c);
  c.restart_interval = rst;
  c.optimize_coding = opt;
  c.arith_code = arith;
  jpeg_start_compress(&c, TRUE);
  unsigned char *row = malloc((size_t)w * 3);
  while (c.next_scanline < (unsigned)h) {
    const unsigned char *src = rgb + (size_t)c.next_scanline * w * 3;
    if (grey)
      for (int x = 0; x < w; x++) row[x] = src[x * 3 + 1];
    else
      memcpy(row, src, (size_t)w * 3);
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  free(row);
  return buf;
}

/* libjpeg RGB (NULL when libjpeg errors) */
static unsigned char *ref_rgb(const unsigned char *d, unsigned long n, int *w, int *h, int *warns) {
  struct jpeg_decompress_struct c;
  struct err e;
  unsigned char *volatile out = NULL;
  c.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = on_err, e.pub.emit_message = on_msg, e.warns = 0;
  if (setjmp(e.jb)) {
    jpeg_destroy_decompress(&c);
    free(out);
    return NULL;
  }
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, d, n);
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_RGB, c.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&c);
  *w = (int)c.output_width, *h = (int)c.output_height;
  out = malloc((size_t)*w * *h * 3);
  while (c.output_scanline < c.output_height) {
    JSAMPROW r = out + (size_t)c.output_scanline * *w * 3;
    jpeg_read_scanlines(&c, &r, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  if (warns) *warns = e.warns;
  return out;
}

/* libjpeg's component planes before upsampling */
static void ref_planes(const unsigned char *d, unsigned long n, unsigned char *pl[3], int stride[3], int dw[3], int dh[3],
                       int *nc) {
  struct jpeg_decompress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, d, n);
  jpeg_read_header(&c, TRUE);
  c.raw_data_out = TRUE, c.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&c);
  *nc = c.num_components;
  int maxv = c.max_v_samp_factor;
  for (int i = 0; i < *nc; i++) {
    stride[i] = (int)c.comp_info[i].width_in_blocks * 8;
    pl[i] = calloc((size_t)stride[i], c.comp_info[i].height_in_blocks * 8 + 64);
    dw[i] = (int)c.comp_info[i].downsampled_width, dh[i] = (int)c.comp_info[i].downsampled_height;
  }
  JSAMPROW rows[3][32];
  int y = 0;
  while (c.output_scanline < c.output_height) {
    JSAMPARRAY arr[3];
    for (int i = 0; i < *nc; i++) {
      int vr = c.comp_info[i].v_samp_factor * 8, y0 = y / maxv * c.comp_info[i].v_samp_factor;
      for (int k = 0; k < vr; k++) rows[i][k] = pl[i] + (size_t)(y0 + k) * stride[i];
      arr[i] = rows[i];
    }
    jpeg_read_raw_data(&c, arr, maxv * 8);
    y += maxv * 8;
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
}

static AVFrame *ff_decode(const unsigned char *d, int n, const char *idct) {
  const AVCodec *co = avcodec_find_decoder(AV_CODEC_ID_MJPEG);
  AVCodecContext *c = avcodec_alloc_context3(co);
  AVDictionary *o = NULL;
  av_dict_set(&o, "idct", idct, 0);
  av_dict_set(&o, "threads", "1", 0);
  if (avcodec_open2(c, co, &o) < 0) exit(1);
  av_dict_free(&o);
  AVPacket *p = av_packet_alloc();
  av_new_packet(p, n);
  memcpy(p->data, d, (size_t)n);
  AVFrame *f = av_frame_alloc();
  int r = avcodec_send_packet(c, p);
  if (r >= 0) r = avcodec_receive_frame(c, f);
  if (r < 0) {
    avcodec_send_packet(c, NULL);
    r = avcodec_receive_frame(c, f);
  }
  if (r < 0) exit(1);
  av_packet_free(&p);
  avcodec_free_context(&c);
  return f;
}

static void make_img(unsigned char *p, int w, int h, int seed) {
  unsigned s = (unsigned)seed * 2654435761u + 1;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      s ^= s << 13, s ^= s >> 17, s ^= s << 5;
      unsigned char *q = p + ((size_t)y * w + x) * 3;
      double u = (double)x / w, v = (double)y / h;
      int k = seed % 4;
      int noise = k == 0 ? (int)(s % 256) - 128 : (k == 1 ? (int)(s % 32) - 16 : 0);
      int base[3] = {(int)(255 * u), (int)(255 * v), (int)(128 + 127 * sin(10 * u + 7 * v))};
      if (k == 3) base[0] = (x ^ y) & 1 ? 255 : 0, base[1] = 255 - base[0], base[2] = (s & 1) * 255;
      if (((x / 7) + (y / 5)) % 4 == 0) base[0] = 255, base[1] = 0, base[2] = 40;
      for (int c = 0; c < 3; c++) {
        int t = base[c] + noise;
        q[c] = (unsigned char)(t < 0 ? 0 : t > 255 ? 255 : t);
      }
    }
}

static const int sizes[][2] = {{1, 1}, {2, 3}, {5, 4}, {17, 9}, {37, 29}, {64, 48}, {200, 150}, {33, 65}, {640, 360}, {9, 200}};
static const int samp[][4] = {{1, 1, 1, 1}, {2, 1, 1, 1}, {2, 2, 1, 1}, {1, 2, 1, 1}, {4, 1, 1, 1},
                              {2, 2, 2, 1}, {4, 2, 1, 1}, {1, 4, 1, 1}, {2, 2, 1, 2}};
static const int quals[] = {30, 75, 95, 100};

static int mode_ffmpeg_idct(void) {
  const char *idcts[] = {"int", "simple", "auto", "faani", "simplemmx"};
  for (int ii = 0; ii < 5; ii++) {
    long tot = 0, diff = 0, files = 0;
    int maxd = 0;
    for (int si = 0; si < 10; si++)
      for (int sa = 0; sa < 4; sa++) /* the layouts FFmpeg maps to yuvj444/422/420/440 */
        for (int qi = 0; qi < 4; qi++)
          for (int pr = 0; pr < 2; pr++)
            for (int seed = 0; seed < 6; seed++) {
              int w = sizes[si][0], h = sizes[si][1];
              unsigned char *img = malloc((size_t)w * h * 3);
              make_img(img, w, h, seed + si * 7);
              unsigned long n;
              unsigned char *j = encode(img, w, h, quals[qi], samp[sa][0], samp[sa][1], 1, 1, pr, 0, 0, 0, 0, &n);
              unsigned char *pl[3];
              int st[3], dw[3], dh[3], nc;
              ref_planes(j, n, pl, st, dw, dh, &nc);
              AVFrame *f = ff_decode(j, (int)n, idcts[ii]);
              for (int c = 0; c < nc; c++) {
                for (int y = 0; y < dh[c]; y++)
                  for (int x = 0; x < dw[c]; x++) {
                    int a = pl[c][(size_t)y * st[c] + x], b = f->data[c][(size_t)y * f->linesize[c] + x];
                    tot++;
                    if (a != b) diff++, maxd = abs(a - b) > maxd ? abs(a - b) : maxd;
                  }
                free(pl[c]);
              }
              files++;
              av_frame_free(&f);
              free(j);
              free(img);
            }
    printf("FFmpeg idct=%-10s %ld JPEGs, %ld samples: %ld differ from libjpeg ISLOW (%.2f%%), max %d\n", idcts[ii],
           files, tot, diff, 100.0 * diff / tot, maxd);
  }
  return 0;
}

/* The generated set: file k of make_exact (returns NULL past the end; *skip for combinations not made). */
#define EXACT_MODES 8 /* baseline, progressive, grey, restarts, progressive+restarts, optimised, arithmetic, arith+prog */
static unsigned char *make_exact(int k, unsigned long *n, int *w, int *h, int *skip) {
  int mode = k % EXACT_MODES, qi = k / EXACT_MODES % 4, sa = k / EXACT_MODES / 4 % 9, si = k / EXACT_MODES / 4 / 9;
  *skip = 0;
  if (si >= 10) return NULL;
  *w = sizes[si][0], *h = sizes[si][1];
  int prog = mode == 1 || mode == 4 || mode == 7, grey = mode == 2, rst = mode == 3 ? 3 : (mode == 4 ? 2 : 0);
  int opt = mode == 5, arith = mode >= 6;
  if (grey && sa) {
    *skip = 1;
    return NULL;
  }
  unsigned char *img = malloc((size_t)*w * *h * 3);
  make_img(img, *w, *h, si * 31 + sa * 7 + qi + mode);
  unsigned char *j = encode(img, *w, *h, quals[qi], samp[sa][0], samp[sa][1], samp[sa][2], samp[sa][3], prog, grey, rst,
                            opt, arith, n);
  free(img);
  return j;
}

static int mode_exact(void) {
  long files = 0, bytes = 0, bad_files = 0, bad_bytes = 0, refused = 0, pil_refuses = 0;
  for (int k = 0;; k++) {
    unsigned long n;
    int w, h, skip;
    unsigned char *j = make_exact(k, &n, &w, &h, &skip);
    if (skip) continue;
    if (!j) break;
    int rw, rh;
    unsigned char *ref = ref_rgb(j, n, &rw, &rh, NULL);
    h3_image img;
    files++;
    if (h3_image_decode(j, n, "t.jpg", NULL, &img, NULL) != H3_OK) {
      if (strstr(h3_last_error(), "blocks PIL hands libjpeg")) { /* arithmetic-coded, > 64 KiB: as PIL */
        pil_refuses++;
      } else {
        printf("refused file %d (%dx%d): %s\n", k, w, h, h3_last_error());
        refused++;
      }
    } else {
      long d = img.width != rw || img.height != rh;
      for (long i = 0; !d && i < (long)w * h * 3; i++) d += img.rgb[i] != ref[i];
      bytes += (long)w * h * 3;
      if (d) bad_files++, bad_bytes += d;
      h3_image_free(&img);
    }
    free(j), free(ref);
  }
  printf("h3 vs libjpeg-turbo: %ld JPEGs, %ld differ (%ld of %ld bytes), %ld refused as PIL refuses them "
         "(arithmetic-coded data across PIL's 64 KiB blocks), %ld refused otherwise\n",
         files, bad_files, bad_bytes, bytes, pil_refuses, refused);
  return bad_files || refused;
}

/* file t of the corrupt set: a 4:2:0 JPEG with 1..3 entropy bytes replaced */
static unsigned char *make_corrupt(int t, unsigned long *n) {
  int prog = t % 2, rst = (t / 2) % 3 == 0 ? 0 : 4, w = 48 + t % 17, h = 40 + t % 13;
  unsigned char *img = malloc((size_t)w * h * 3);
  make_img(img, w, h, t);
  unsigned char *j = encode(img, w, h, 85, 2, 2, 1, 1, prog, 0, rst, 0, 0, n);
  free(img);
  unsigned s = (unsigned)t * 2654435761u + 7;
  size_t sos = 0;
  for (size_t i = 2; i + 1 < *n; i++)
    if (j[i] == 0xFF && j[i + 1] == 0xDA) {
      sos = i;
      break;
    }
  for (int q = 0; q < 1 + t % 3; q++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    size_t p = sos + 20 + s % (*n - sos - 40);
    if (j[p] != 0xFF && j[p - 1] != 0xFF) j[p] = (unsigned char)((s >> 8) == 0xFF ? 0xFE : (s >> 8));
  }
  return j;
}

static int mode_corrupt(void) {
  int same = 0, differ = 0, mine_refused = 0, ref_failed = 0, both_failed = 0, warned = 0, noted = 0;
  for (int t = 0; t < 3000; t++) {
    unsigned long n;
    unsigned char *j = make_corrupt(t, &n);
    int rw, rh, warns = 0;
    unsigned char *ref = ref_rgb(j, n, &rw, &rh, &warns);
    h3_image img;
    h3_image_info info;
    int r = h3_image_decode(j, n, "f.jpg", NULL, &img, &info);
    if (!ref) {
      ref_failed++;
      if (r == H3_OK) h3_image_free(&img);
      else both_failed++;
    } else if (r != H3_OK) {
      mine_refused++;
    } else {
      if (img.width == rw && img.height == rh && memcmp(img.rgb, ref, (size_t)rw * rh * 3) == 0)
        same++, warned += warns > 0, noted += warns > 0 && strstr(info.note, "warning") != NULL;
      else
        differ++;
      h3_image_free(&img);
    }
    free(ref), free(j);
  }
  printf("corrupted JPEGs: libjpeg fails on %d (h3 too: %d); of the rest %d equal (%d with libjpeg warnings, %d of "
         "them noted in info.note), %d differ, %d refused by h3\n",
         ref_failed, both_failed, same, warned, noted, differ, mine_refused);
  return differ || mine_refused || ref_failed != both_failed || noted != warned;
}

static void put(const char *dir, const char *leaf, const unsigned char *d, size_t n) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, leaf);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(d, 1, n, f) != n) {
    perror(p);
    exit(1);
  }
  fclose(f);
}

/* the exact and corrupt sets, and truncations: inside the headers, mid-scan, no EOI (sequential and progressive) */
static int mode_write(const char *dir) {
  int files = 0;
  char leaf[64];
  for (int k = 0;; k++) {
    unsigned long n;
    int w, h, skip;
    unsigned char *j = make_exact(k, &n, &w, &h, &skip);
    if (skip) continue;
    if (!j) break;
    snprintf(leaf, sizeof leaf, "exact_%04d.jpg", k);
    put(dir, leaf, j, n), files++;
    if (k % 7 == 0) { /* cut variants */
      const size_t cuts[4] = {n - 2, n / 2, n * 9 / 10, 200 < n ? 200 : n / 3};
      for (int c = 0; c < 4; c++) {
        snprintf(leaf, sizeof leaf, "cut%d_%04d.jpg", c, k);
        put(dir, leaf, j, cuts[c]), files++;
      }
    }
    free(j);
  }
  for (int t = 0; t < 3000; t++) {
    unsigned long n;
    unsigned char *j = make_corrupt(t, &n);
    snprintf(leaf, sizeof leaf, "corrupt_%04d.jpg", t);
    put(dir, leaf, j, n), files++;
    free(j);
  }
  printf("%d JPEG files written to %s\n", files, dir);
  return 0;
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "exact";
  h3_set_log_level(H3_LOG_ERROR); /* corrupt-JPEG warnings: expected here */
  if (!strcmp(m, "ffmpeg-idct")) return mode_ffmpeg_idct();
  if (!strcmp(m, "corrupt")) return mode_corrupt();
  if (!strcmp(m, "write") && argc > 2) return mode_write(argv[2]);
  return mode_exact();
}
