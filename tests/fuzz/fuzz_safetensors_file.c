/* libFuzzer target: the input is a whole .safetensors file.  It is written to
 * the scratch folder and opened as a set (h3_st_set_open: open, header,
 * mmap); then every tensor is read through the stage readers (st_read.c:
 * float dtypes -> f32, integer dtypes -> i64), the values are checked against
 * the dtype conversions (a float dtype survives f32 and back bit for bit),
 * the shape-based config detection of the DiT and the text encoder runs on
 * the set, and the set is written back with h3_st_write and re-read: the
 * copy must hold the same tensors.  Nothing may crash, leak or hang. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "fuzz_util.h"
#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/dit_config.h"
#include "model/dit_weights.h"
#include "model/text_encoder.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static int is_nan_bits(h3_dtype dt, const uint8_t *p) {
  switch (dt) {
  case H3_DT_F32: {
    float f;
    memcpy(&f, p, 4);
    return isnan(f);
  }
  case H3_DT_BF16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return (h & 0x7f80) == 0x7f80 && (h & 0x007f);
  }
  case H3_DT_F16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return (h & 0x7c00) == 0x7c00 && (h & 0x03ff);
  }
  case H3_DT_F8E4M3: return (p[0] & 0x7f) == 0x7f;
  case H3_DT_F8E5M2: return (p[0] & 0x7c) == 0x7c && (p[0] & 0x03);
  default: return 0;
  }
}

/* f32 values read from a float tensor: exact, and back to the dtype bit for bit. */
static void check_floats(const h3_st_entry *e, const float *v, size_t n) {
  const uint8_t *src = h3_st_data(e);
  size_t es = h3_dtype_size(e->dtype);
  for (size_t i = 0; i < n; i++) {
    const uint8_t *p = src + i * es;
    if (e->dtype == H3_DT_F64) {
      double d;
      memcpy(&d, p, 8);
      double l = h3_load_f64(src, e->dtype, i);
      FZ_ASSERT(isnan(d) ? isnan(l) && isnan(v[i]) : l == d && !isnan(v[i]));
      /* narrowing: the nearest float, or an infinity past the float range */
      if (!isnan(d) && fabs(d) <= 3.4028234663852886e38) FZ_ASSERT(fabs((double)v[i] - d) <= fmax(fabs(d) * 0x1p-24, 0x1p-150));
      continue;
    }
    if (is_nan_bits(e->dtype, p)) {
      FZ_ASSERT(isnan(v[i]));
      continue;
    }
    FZ_ASSERT(!isnan(v[i]));
    FZ_ASSERT((double)v[i] == h3_load_f64(src, e->dtype, i));
    uint8_t back[8] = {0};
    h3_convert_from_f32(back, e->dtype, &v[i], 1);
    FZ_ASSERT(memcmp(back, p, es) == 0);
  }
}

static void check_ints(const h3_st_entry *e, const int64_t *v, size_t n) {
  const uint8_t *src = h3_st_data(e);
  size_t es = h3_dtype_size(e->dtype);
  for (size_t i = 0; i < n; i++) {
    const uint8_t *p = src + i * es;
    int64_t want;
    switch (e->dtype) {
    case H3_DT_I8: want = (int8_t)p[0]; break;
    case H3_DT_U8:
    case H3_DT_BOOL: want = p[0]; break;
    case H3_DT_I16: {
      int16_t x;
      memcpy(&x, p, 2);
      want = x;
      break;
    }
    case H3_DT_I32: {
      int32_t x;
      memcpy(&x, p, 4);
      want = x;
      break;
    }
    case H3_DT_I64: memcpy(&want, p, 8); break;
    default: fz_assert_fail("an integer dtype", __FILE__, __LINE__);
    }
    FZ_ASSERT(v[i] == want);
  }
}

static void read_all(const h3_st_set *s) {
  for (size_t i = 0; i < h3_st_set_count(s); i++) {
    const h3_st_entry *e = h3_st_set_at(s, i);
    h3_tensor shape;
    size_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    FZ_ASSERT(n * h3_dtype_size(e->dtype) == e->end - e->begin);
    if (h3_dtype_is_float(e->dtype)) {
      float *v = NULL;
      h3_status st = h3_st_read_f32(s, e->name, &v, &shape);
      FZ_ASSERT(st == H3_OK && v != NULL);
      check_floats(e, v, n);
      free(v);
      int64_t *iv = (int64_t *)1;
      st = h3_st_read_i64(s, e->name, &iv, NULL);
      fz_check_failed(st, e->name);
    } else {
      int64_t *v = NULL;
      h3_status st = h3_st_read_i64(s, e->name, &v, &shape);
      FZ_ASSERT(st == H3_OK && v != NULL);
      check_ints(e, v, n);
      free(v);
      float *fv = (float *)1;
      st = h3_st_read_f32(s, e->name, &fv, NULL);
      fz_check_failed(st, e->name);
    }
    FZ_ASSERT(shape.ndim == e->ndim && shape.dtype == e->dtype);
    FZ_ASSERT(h3_st_check_shape(s, e->name, &shape, e->ndim, e->shape) == H3_OK);
    int64_t want[H3_MAX_DIMS + 1];
    for (int d = 0; d < e->ndim; d++) want[d] = -1;
    FZ_ASSERT(h3_st_check_shape(s, e->name, &shape, e->ndim, want) == H3_OK);
    want[e->ndim] = 1;
    fz_check_failed(h3_st_check_shape(s, e->name, &shape, e->ndim + 1, want), e->name);
  }
  float *v = NULL;
  fz_check_failed(h3_st_read_f32(s, "\x01no such tensor", &v, NULL), "no such tensor");
}

/* h3_st_write of the set's tensors (and metadata) and a re-read: same tensors. */
static void round_trip(const h3_st_set *s, const h3_st_file *f) {
  size_t n = h3_st_set_count(s);
  h3_st_write_item *items = calloc(n ? n : 1, sizeof *items);
  FZ_ASSERT(items != NULL);
  int writable = 1;
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_set_at(s, i);
    items[i].name = e->name;
    items[i].t = h3_st_tensor(e);
    if (!e->name[0]) writable = 0; /* the writer refuses an empty name */
  }
  /* Only the "format" key is copied: the writer takes pairs, the reader has no
   * iterator over metadata. */
  const char *meta[2] = {"format", h3_st_metadata(f, "format")};
  size_t n_meta = meta[1] ? 1 : 0;
  char out[2048];
  fz_path("copy.safetensors", out, sizeof out);
  h3_status st = h3_st_write(out, items, n, meta, n_meta);
  if (!writable) {
    fz_check_failed(st, out);
    free(items);
    return;
  }
  FZ_ASSERT(st == H3_OK);
  h3_st_file *g = NULL;
  st = h3_st_open(out, &g);
  FZ_ASSERT(st == H3_OK);
  FZ_ASSERT(h3_st_count(g) == n);
  if (meta[1]) FZ_ASSERT(h3_st_metadata(g, "format") && !strcmp(h3_st_metadata(g, "format"), meta[1]));
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *a = h3_st_set_at(s, i), *b = h3_st_find(g, a->name);
    FZ_ASSERT(b != NULL && b->dtype == a->dtype && b->ndim == a->ndim);
    FZ_ASSERT(memcmp(b->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim) == 0);
    FZ_ASSERT(b->end - b->begin == a->end - a->begin);
    if (a->end > a->begin) FZ_ASSERT(memcmp(h3_st_data(a), h3_st_data(b), a->end - a->begin) == 0);
  }
  h3_st_close(g);
  free(items);
}

static void detect_configs(const h3_st_set *s) {
  h3_dit_config dc;
  h3_status st = h3_dit_config_detect(s, &dc);
  fz_note("h3_dit_config_detect", st);
  if (st == H3_OK) {
    FZ_ASSERT(h3_dit_config_validate(&dc, "fuzz") == H3_OK);
    (void)h3_dit_param_count(&dc, 1);
  } else {
    fz_check_failed(st, NULL);
  }
  h3_dit_convention conv;
  st = h3_dit_convention_detect(s, 0, &conv);
  if (st != H3_OK) fz_check_failed(st, h3_st_set_path(s));
  static const char *const prefixes[] = {"", "model.language_model.", "model."};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    h3_te_config tc;
    st = h3_te_config_detect(s, prefixes[i], &tc);
    fz_note("h3_te_config_detect", st);
    if (st == H3_OK)
      FZ_ASSERT(h3_te_config_validate(&tc, "fuzz") == H3_OK);
    else
      fz_check_failed(st, NULL);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[2048];
  fz_clear();
  fz_write("in.safetensors", data, size, path, sizeof path);
  h3_st_set *s = (h3_st_set *)1;
  h3_status st = h3_st_set_open(path, &s);
  fz_note("h3_st_set_open", st);
  if (st != H3_OK) {
    FZ_ASSERT(s == NULL);
    fz_check_failed(st, path);
    return 0;
  }
  FZ_ASSERT(h3_st_set_nfiles(s) == 1);
  const h3_st_file *f = h3_st_set_file(s, 0);
  FZ_ASSERT(h3_st_set_count(s) == h3_st_count(f));
  for (size_t i = 0; i < h3_st_set_count(s); i++) {
    const h3_st_entry *e = h3_st_set_at(s, i);
    FZ_ASSERT(h3_st_set_find(s, e->name) == e && h3_st_find(f, e->name) == e);
    FZ_ASSERT(e->end <= (uint64_t)size && (e->end == e->begin || h3_st_data(e) != NULL));
  }
  read_all(s);
  detect_configs(s);
  round_trip(s, f);
  h3_st_set_close(s);
  return 0;
}
