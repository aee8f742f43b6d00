#include "media/wav_writer.h"
#include "io/outfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_u16(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static void put_f32(uint8_t *p, float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  put_u32(p, u);
}

h3_status h3_wav_write(const char *path, const h3_audio_track *a) {
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "h3_wav_write: empty output path");
  H3_TRY(h3_audio_check(a, path));
  const uint32_t rate = (uint32_t)(a->sample_rate ? a->sample_rate : H3_MEDIA_SAMPLE_RATE);
  const uint32_t ch = (uint32_t)a->channels;
  const uint64_t data_bytes = (uint64_t)a->num_samples * ch * 4;
  if (data_bytes + H3_WAV_HEADER_BYTES - 8 > 0xFFFFFFFFull)
    return h3_fail(H3_ERR_INVALID, "%s: %lld samples are too many for a WAV file (4 GiB limit)", path,
                   (long long)a->num_samples);

  uint8_t h[H3_WAV_HEADER_BYTES];
  memcpy(h, "RIFF", 4);
  put_u32(h + 4, (uint32_t)(data_bytes + H3_WAV_HEADER_BYTES - 8));
  memcpy(h + 8, "WAVE", 4);
  memcpy(h + 12, "fmt ", 4);
  put_u32(h + 16, 18);            /* fmt chunk size */
  put_u16(h + 20, 3);             /* WAVE_FORMAT_IEEE_FLOAT */
  put_u16(h + 22, ch);            /* channels */
  put_u32(h + 24, rate);          /* samples per second */
  put_u32(h + 28, rate * ch * 4); /* average bytes per second */
  put_u16(h + 32, ch * 4);        /* block align */
  put_u16(h + 34, 32);            /* bits per sample */
  put_u16(h + 36, 0);             /* cbSize */
  memcpy(h + 38, "fact", 4);
  put_u32(h + 42, 4);
  put_u32(h + 46, (uint32_t)a->num_samples); /* sample frames */
  memcpy(h + 50, "data", 4);
  put_u32(h + 54, (uint32_t)data_bytes);

  enum { BLOCK = 4096 };
  uint8_t *buf = malloc((size_t)BLOCK * ch * 4);
  if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  h3_outfile of;
  h3_status st = h3_outfile_begin(&of, path);
  if (st != H3_OK) {
    free(buf);
    return st;
  }
  const char *tmp = of.write_path;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = h3_fail(H3_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    h3_outfile_abort(&of);
    free(buf);
    return st;
  }
  if (fwrite(h, 1, sizeof h, f) != sizeof h) st = h3_fail(H3_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
  for (int64_t s0 = 0; s0 < a->num_samples && st == H3_OK; s0 += BLOCK) {
    int64_t n = a->num_samples - s0 < BLOCK ? a->num_samples - s0 : BLOCK;
    uint8_t *o = buf;
    for (int64_t i = 0; i < n; i++)
      for (uint32_t c = 0; c < ch; c++, o += 4) put_f32(o, a->data[(s0 + i) * a->stride_s + (ptrdiff_t)c * a->stride_c]);
    size_t nb = (size_t)(o - buf);
    if (fwrite(buf, 1, nb, f) != nb) st = h3_fail(H3_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
  }
  if (fclose(f) != 0 && st == H3_OK) st = h3_fail(H3_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
  if (st == H3_OK) st = h3_outfile_commit(&of);
  else h3_outfile_abort(&of);
  free(buf);
  return st;
}
