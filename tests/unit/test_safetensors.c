/* safetensors: writer round trip, strict validation of corrupt files, sharded
 * sets (index.json), folder mode, writer atomicity, large sparse files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "testutil.h"

#define MIN_CHECKS 590 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static char g_dir[512];

static const char *tpath(const char *name) {
  static char buf[8][1024];
  static int k;
  char *p = buf[k++ & 7];
  snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
  return p;
}

static int contains(const char *hay, const char *needle) { return needle == NULL || strstr(hay, needle) != NULL; }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Raw file: 8-byte LE length (hdr length, or `n_override` when >= 0), the
 * header text, then `data_len` bytes 0, 1, 2, ... */
static void write_raw(const char *path, const char *hdr, long long n_override, size_t data_len) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(2);
  }
  uint64_t n = n_override >= 0 ? (uint64_t)n_override : strlen(hdr);
  uint8_t l[8];
  for (int i = 0; i < 8; i++) l[i] = (uint8_t)(n >> (8 * i));
  fwrite(l, 1, 8, f);
  fwrite(hdr, 1, strlen(hdr), f);
  for (size_t i = 0; i < data_len; i++) fputc((int)(i & 0xff), f);
  fclose(f);
}

/* Opening must fail with a message naming the file and (when given) the tensor. */
static void bad_file(const char *tag, const char *hdr, long long n_override, size_t data_len, const char *must1,
                     const char *must2) {
  char name[256];
  snprintf(name, sizeof name, "bad_%s.safetensors", tag);
  const char *path = tpath(name);
  write_raw(path, hdr, n_override, data_len);
  h3_st_file *f = (h3_st_file *)1;
  h3_status st = h3_st_open(path, &f);
  const char *msg = h3_last_error();
  CHECK_MSG(st != H3_OK, "%s: opened a corrupt file", tag);
  CHECK_MSG(f == NULL, "%s: out pointer not cleared", tag);
  CHECK_MSG(contains(msg, path), "%s: message lacks the path: %s", tag, msg);
  CHECK_MSG(contains(msg, must1), "%s: message lacks '%s': %s", tag, must1, msg);
  CHECK_MSG(contains(msg, must2), "%s: message lacks '%s': %s", tag, must2, msg);
  printf("  %-16s %s: %s\n", tag, h3_status_name(st), msg);
  /* The same through the set API. */
  h3_st_set *s = (h3_st_set *)1;
  st = h3_st_set_open(path, &s);
  CHECK_MSG(st != H3_OK && s == NULL, "%s: set_open accepted a corrupt file", tag);
  CHECK_MSG(contains(h3_last_error(), path), "%s: set message lacks the path: %s", tag, h3_last_error());
  if (st == H3_OK) h3_st_set_close(s);
}

static void good_file(const char *tag, const char *hdr, size_t data_len, size_t expect_count) {
  char name[256];
  snprintf(name, sizeof name, "good_%s.safetensors", tag);
  const char *path = tpath(name);
  write_raw(path, hdr, -1, data_len);
  h3_st_file *f = NULL;
  h3_status st = h3_st_open(path, &f);
  CHECK_MSG(st == H3_OK, "%s: %s", tag, h3_last_error());
  if (st == H3_OK) {
    CHECK_MSG(h3_st_count(f) == expect_count, "%s: count %zu", tag, h3_st_count(f));
    h3_st_close(f);
  }
}

static void test_roundtrip(void) {
  float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 1e10f};
  uint16_t bf16[4];
  float bf_src[4] = {1.0f, -3.5f, 0.15625f, 65536.0f};
  for (int i = 0; i < 4; i++) bf16[i] = h3_f32_to_bf16(bf_src[i]);
  uint16_t f16[3] = {h3_f32_to_f16(0.5f), h3_f32_to_f16(-1.0f), h3_f32_to_f16(2048.0f)};
  uint8_t e4[5] = {h3_f32_to_e4m3(448.0f), h3_f32_to_e4m3(-1.0f), h3_f32_to_e4m3(0.125f), 0, 0x7f};
  uint8_t e5[2] = {h3_f32_to_e5m2(57344.0f), h3_f32_to_e5m2(-0.25f)};
  int64_t i64[2] = {-1, (int64_t)1 << 40};
  double f64[1] = {3.141592653589793};
  uint8_t bl[1] = {1};
  int32_t i32[1] = {-7};
  int8_t i8[3] = {-128, 0, 127};
  int16_t i16[2] = {-300, 300};
  uint8_t u8empty[1] = {0};
  int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3}, s5[1] = {5}, s2[1] = {2}, s1[1] = {1};
  int64_t s111[6] = {1, 1, 1, 1, 1, 1}, s0[2] = {0, 7};
  h3_st_write_item items[] = {
      {"model.f32", h3_tensor_make(f32, H3_DT_F32, 2, s23)},
      {"model.bf16", h3_tensor_make(bf16, H3_DT_BF16, 1, s4)},
      {"model.f16", h3_tensor_make(f16, H3_DT_F16, 1, s3)},
      {"model.e4m3", h3_tensor_make(e4, H3_DT_F8E4M3, 1, s5)},
      {"model.e5m2", h3_tensor_make(e5, H3_DT_F8E5M2, 1, s2)},
      {"model.empty", h3_tensor_make(u8empty, H3_DT_U8, 2, s0)},
      {"model.i64", h3_tensor_make(i64, H3_DT_I64, 1, s2)},
      {"model.f64", h3_tensor_make(f64, H3_DT_F64, 1, s1)},
      {"model.scalar_bool", h3_tensor_make(bl, H3_DT_BOOL, 0, NULL)},
      {"model.i32_6d", h3_tensor_make(i32, H3_DT_I32, 6, s111)},
      {"model.i8", h3_tensor_make(i8, H3_DT_I8, 1, s3)},
      {"model.i16", h3_tensor_make(i16, H3_DT_I16, 1, s2)},
  };
  size_t n = sizeof items / sizeof items[0];
  const char *meta[] = {"format", "pt", "config", "{\"transformer\": {\"num_layers\": 50}}"};
  const char *path = tpath("rt.safetensors");
  h3_status st = h3_st_write(path, items, n, meta, 2);
  CHECK_MSG(st == H3_OK, "write: %s", h3_last_error());

  /* header length padded to a multiple of 8, padding is spaces */
  FILE *fp = fopen(path, "rb");
  uint8_t l[8] = {0};
  CHECK(fp && fread(l, 1, 8, fp) == 8);
  uint64_t hn = 0;
  for (int i = 7; i >= 0; i--) hn = (hn << 8) | l[i];
  CHECK(hn % 8 == 0 && hn >= 2);
  char *hdr = calloc(1, hn + 1);
  CHECK(fp && fread(hdr, 1, hn, fp) == hn);
  CHECK(hdr[0] == '{');
  CHECK(strstr(hdr, "\"__metadata__\"") != NULL);
  free(hdr);
  if (fp) fclose(fp);

  h3_st_file *f = NULL;
  st = h3_st_open(path, &f);
  CHECK_MSG(st == H3_OK, "open: %s", h3_last_error());
  if (st != H3_OK) return;
  CHECK(strcmp(h3_st_path(f), path) == 0);
  CHECK(h3_st_count(f) == n);
  CHECK(h3_st_metadata(f, "format") && strcmp(h3_st_metadata(f, "format"), "pt") == 0);
  CHECK(h3_st_metadata(f, "config") && strstr(h3_st_metadata(f, "config"), "num_layers") != NULL);
  CHECK(h3_st_metadata(f, "nope") == NULL);
  CHECK(h3_st_find(f, "nope") == NULL);
  CHECK(h3_st_at(f, n) == NULL);
  /* offset order == write order, offsets consecutive */
  uint64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_at(f, i);
    size_t nb = h3_tensor_nbytes(&items[i].t);
    CHECK_MSG(e && strcmp(e->name, items[i].name) == 0, "order at %zu", i);
    if (!e) continue;
    CHECK(e->begin == off && e->end == off + nb);
    off += nb;
    CHECK(h3_st_find(f, items[i].name) == e);
    CHECK(e->file == f);
    CHECK(e->dtype == items[i].t.dtype);
    CHECK(e->ndim == items[i].t.ndim);
    for (int d = 0; d < e->ndim; d++) CHECK(e->shape[d] == items[i].t.shape[d]);
    if (nb) CHECK_MSG(memcmp(h3_st_data(e), items[i].t.data, nb) == 0, "bytes of %s", e->name);
    h3_tensor t = h3_st_tensor(e);
    CHECK(t.data == h3_st_data(e) && t.dtype == e->dtype && h3_tensor_numel(&t) == h3_tensor_numel(&items[i].t));
    CHECK(h3_tensor_is_contiguous(&t));
  }
  /* decoded values */
  const h3_st_entry *e = h3_st_find(f, "model.bf16");
  if (e) {
    float back[4];
    h3_convert_to_f32(back, h3_st_data(e), e->dtype, 4);
    for (int i = 0; i < 4; i++) CHECK(back[i] == bf_src[i]);
  }
  e = h3_st_find(f, "model.e4m3");
  if (e) {
    const uint8_t *p = h3_st_data(e);
    CHECK(h3_e4m3_to_f32(p[0]) == 448.0f && h3_e4m3_to_f32(p[1]) == -1.0f && h3_e4m3_to_f32(p[2]) == 0.125f);
    CHECK(h3_e4m3_to_f32(p[4]) != h3_e4m3_to_f32(p[4])); /* NaN code survives */
  }
  e = h3_st_find(f, "model.e5m2");
  if (e) CHECK(h3_e5m2_to_f32(((const uint8_t *)h3_st_data(e))[0]) == 57344.0f);
  e = h3_st_find(f, "model.f32");
  if (e) {
    float fv[6];
    memcpy(fv, h3_st_data(e), sizeof fv);
    CHECK(fv[5] == 1e10f);
  }
  e = h3_st_find(f, "model.i64");
  if (e) { /* mapped data need not be aligned (odd-sized tensors precede it): memcpy */
    int64_t iv[2];
    memcpy(iv, h3_st_data(e), sizeof iv);
    CHECK(iv[0] == -1 && iv[1] == ((int64_t)1 << 40));
  }
  e = h3_st_find(f, "model.empty");
  if (e) CHECK(e->begin == e->end && e->shape[0] == 0 && e->shape[1] == 7);
  e = h3_st_find(f, "model.scalar_bool");
  if (e) CHECK(e->ndim == 0 && e->end - e->begin == 1);
  h3_st_close(f);

  /* single file through the set API */
  h3_st_set *s = NULL;
  st = h3_st_set_open(path, &s);
  CHECK_MSG(st == H3_OK, "set_open file: %s", h3_last_error());
  if (st == H3_OK) {
    CHECK(h3_st_set_nfiles(s) == 1 && h3_st_set_count(s) == n);
    CHECK(strcmp(h3_st_set_path(s), path) == 0);
    CHECK(h3_st_set_find(s, "model.f16") && h3_st_set_find(s, "model.f16")->file == h3_st_set_file(s, 0));
    CHECK(h3_st_set_find(s, "zzz") == NULL);
    h3_st_set_close(s);
  }

  /* no metadata, no tensors: header "{}" padded */
  path = tpath("empty.safetensors");
  st = h3_st_write(path, NULL, 0, NULL, 0);
  CHECK_MSG(st == H3_OK, "write empty: %s", h3_last_error());
  st = h3_st_open(path, &f);
  CHECK_MSG(st == H3_OK, "open empty: %s", h3_last_error());
  if (st == H3_OK) {
    CHECK(h3_st_count(f) == 0 && h3_st_metadata(f, "format") == NULL);
    h3_st_close(f);
  }
}

static void test_corrupt(void) {
  printf("corrupt files:\n");
  const char *ok1 = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
  /* truncated: data shorter than the offsets claim */
  bad_file("truncated", ok1, -1, 12, "'w'", "past the end");
  bad_file("tiny", "", 0, 0, "too small", NULL); /* 8 bytes of length 0 */
  {
    const char *p = tpath("bad_5bytes.safetensors");
    FILE *fp = fopen(p, "wb");
    fwrite("abcde", 1, 5, fp);
    fclose(fp);
    h3_st_file *f = NULL;
    CHECK(h3_st_open(p, &f) != H3_OK && contains(h3_last_error(), p));
  }
  bad_file("hlen_past_end", ok1, 1000, 16, "header length", "past the end");
  bad_file("hlen_huge", ok1, (long long)1 << 62, 16, "header length", NULL);
  bad_file("hlen_1", "{", 1, 0, "too small", NULL);
  bad_file("hlen_0", "", 0, 16, "too small", NULL);
  bad_file("not_json", "{\"w\": nope}", -1, 0, "not valid JSON", NULL);
  bad_file("not_json2", "garbage!", -1, 0, "not valid JSON", NULL);
  bad_file("top_array", "[1,2,3]", -1, 0, "not a JSON object", NULL);
  bad_file("top_string", "\"hello\"", -1, 0, NULL, NULL);
  bad_file("offs_range", "{\"w\":{\"dtype\":\"F32\",\"shape\":[100],\"data_offsets\":[0,400]}}", -1, 16, "'w'",
           "past the end");
  bad_file("offs_reversed", "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", -1, 16, "'w'",
           "begin > end");
  bad_file("offs_negative", "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-4,0]}}", -1, 16, "'w'",
           "data_offsets");
  bad_file("offs_three", "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}", -1, 16, "'w'",
           "data_offsets");
  bad_file("offs_real", "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0.0,4]}}", -1, 16, "'w'",
           "data_offsets");
  bad_file("overlap",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
           -1, 24, "'b'", "overlap tensor 'a'");
  bad_file("same_range",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
           "\"b\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
           -1, 16, "overlap", NULL);
  bad_file("dtype_unknown", "{\"w\":{\"dtype\":\"F12\",\"shape\":[4],\"data_offsets\":[0,4]}}", -1, 16, "'w'",
           "unknown dtype 'F12'");
  bad_file("dtype_lower", "{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 16, "'w'", "f32");
  bad_file("dtype_number", "{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 16, "'w'", "dtype");
  bad_file("size_mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", -1, 16, "'w'",
           "needs 16 bytes");
  bad_file("size_bf16", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,4]}}", -1, 16, "'w'", "BF16");
  bad_file("shape_negative", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", -1, 16, "'w'",
           "shape[0]");
  bad_file("shape_real", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", -1, 16, "'w'",
           "shape[0]");
  bad_file("shape_string", "{\"w\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", -1, 16, "'w'",
           "shape");
  bad_file("shape_7d", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", -1, 16, "'w'",
           "dimensions");
  bad_file("shape_overflow",
           "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,16]}}", -1, 16, "'w'",
           "overflow");
  /* Found writing the fuzz targets: an empty tensor whose other dimensions multiply past
   * 2^63 overflowed the int64 strides of h3_tensor_make (UBSan). */
  bad_file("shape_overflow_zero_dim",
           "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,1099511627776,1099511627776],\"data_offsets\":[0,0]}}", -1, 0,
           "'w'", "zero dimension aside");
  bad_file("shape_overflow_int64", "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,2147483648,0],\"data_offsets\":[0,0]}}",
           -1, 0, "'w'", "overflow");
  good_file("zero_dim_big", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,2147483647],\"data_offsets\":[0,0]}}", 0,
            1);
  bad_file("bytes_overflow", "{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,16]}}",
           -1, 16, "'w'", "overflow");
  bad_file("no_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, 16, "'w'", "missing field 'data_offsets'");
  bad_file("no_dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 16, "'w'", "missing field 'dtype'");
  bad_file("no_shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", -1, 16, "'w'", "missing field 'shape'");
  bad_file("extra_field", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"scale\":1}}", -1, 16,
           "'w'", "unexpected field 'scale'");
  bad_file("entry_not_obj", "{\"w\":[1,2]}", -1, 16, "'w'", "not a JSON object");
  bad_file("meta_not_str", "{\"__metadata__\":{\"format\":\"pt\",\"n\":1}}", -1, 0, "__metadata__", "'n'");
  bad_file("meta_not_obj", "{\"__metadata__\":[\"pt\"]}", -1, 0, "__metadata__", NULL);
  bad_file("dup_keys",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
           -1, 8, "duplicate", NULL);
  bad_file("dup_meta_keys", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", -1, 0, "duplicate", NULL);
  bad_file("nul_in_key", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", -1, 1, NULL,
           NULL);
  bad_file("bad_utf8", "{\"\xff\xfe\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", -1, 1, NULL, NULL);
  bad_file("trailing_junk", "{} x", -1, 0, "not valid JSON", NULL);
  bad_file("header_short", "{\"w\":1}", 100, 0, "header length", NULL); /* N > file_size - 8 */

  /* Accepted edge cases: padded header, empty tensors sharing offsets, gaps. */
  good_file("padded", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}        ", 16, 1);
  good_file("zero_share",
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
            "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[16,16]},"
            "\"z\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[8,8]},"
            "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[16,20]}}",
            20, 4);
  good_file("unsorted",
            "{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
            8, 2);
  good_file("minimal", "{}", 0, 0);
}

static void test_parse_header_mem(void) {
  const char *hdr = "{\"x\":{\"dtype\":\"I16\",\"shape\":[3],\"data_offsets\":[0,6]}}";
  size_t hl = strlen(hdr);
  uint8_t buf[256] = {0};
  buf[0] = (uint8_t)hl;
  memcpy(buf + 8, hdr, hl);
  h3_st_file *f = NULL;
  h3_status st = h3_st_parse_header("mem:x", buf, 8 + hl, 8 + hl + 6, &f);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st == H3_OK) {
    const h3_st_entry *e = h3_st_find(f, "x");
    CHECK(e && e->dtype == H3_DT_I16 && e->shape[0] == 3);
    CHECK(e && h3_st_data(e) == NULL); /* no mapping */
    CHECK(strcmp(h3_st_path(f), "mem:x") == 0);
    h3_st_close(f);
  }
  st = h3_st_parse_header("mem:short", buf, 8 + hl - 1, 8 + hl + 6, &f);
  CHECK(st != H3_OK && f == NULL && contains(h3_last_error(), "mem:short") && contains(h3_last_error(), "truncated"));
  st = h3_st_parse_header("mem:data", buf, 8 + hl, 8 + hl + 5, &f); /* data section one byte short */
  CHECK(st != H3_OK && contains(h3_last_error(), "'x'"));
  st = h3_st_parse_header("mem:tiny", buf, 4, 4, &f);
  CHECK(st != H3_OK && contains(h3_last_error(), "mem:tiny"));
}

/* Tiny file of U8 tensors named in `names` (each 2 bytes). */
static void write_u8s(const char *path, const char *const *names, size_t n) {
  h3_st_write_item items[16];
  static uint8_t bytes[16][2];
  int64_t sh[1] = {2};
  for (size_t i = 0; i < n; i++) {
    bytes[i][0] = (uint8_t)i;
    bytes[i][1] = (uint8_t)(100 + i);
    items[i].name = names[i];
    items[i].t = h3_tensor_make(bytes[i], H3_DT_U8, 1, sh);
  }
  h3_status st = h3_st_write(path, items, n, NULL, 0);
  CHECK_MSG(st == H3_OK, "write %s: %s", path, h3_last_error());
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

static void expect_set_fail(const char *tag, const char *path, const char *m1, const char *m2, const char *m3) {
  h3_st_set *s = (h3_st_set *)1;
  h3_status st = h3_st_set_open(path, &s);
  const char *msg = h3_last_error();
  CHECK_MSG(st != H3_OK && s == NULL, "%s: set opened", tag);
  CHECK_MSG(contains(msg, m1) && contains(msg, m2) && contains(msg, m3), "%s: message '%s' lacks one of '%s' '%s' '%s'",
            tag, msg, m1 ? m1 : "", m2 ? m2 : "", m3 ? m3 : "");
  printf("  %-16s %s: %s\n", tag, h3_status_name(st), msg);
  if (st == H3_OK) h3_st_set_close(s);
}

static void test_sharded(void) {
  printf("sharded sets:\n");
  char dir[700];
  snprintf(dir, sizeof dir, "%s/sharded", g_dir);
  mkdir(dir, 0755);
  char p1[800], p2[800], idx[800];
  snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", dir);
  snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", dir);
  snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
  const char *n1[] = {"a.weight", "b.weight"}, *n2[] = {"c.weight"};
  write_u8s(p1, n1, 2);
  write_u8s(p2, n2, 1);
  write_text(idx, "{\"metadata\":{\"total_size\":6},\"weight_map\":{"
                  "\"c.weight\":\"model-00002-of-00002.safetensors\","
                  "\"a.weight\":\"model-00001-of-00002.safetensors\","
                  "\"b.weight\":\"model-00001-of-00002.safetensors\"}}");
  for (int mode = 0; mode < 2; mode++) { /* via the index file, via the folder */
    h3_st_set *s = NULL;
    h3_status st = h3_st_set_open(mode ? dir : idx, &s);
    CHECK_MSG(st == H3_OK, "sharded open (%s): %s", mode ? "folder" : "index", h3_last_error());
    if (st != H3_OK) continue;
    CHECK(h3_st_set_count(s) == 3 && h3_st_set_nfiles(s) == 2);
    CHECK(strcmp(h3_st_set_path(s), mode ? dir : idx) == 0);
    const h3_st_entry *c = h3_st_set_find(s, "c.weight");
    CHECK(c && strcmp(h3_st_path(c->file), p2) == 0);
    CHECK(c && ((const uint8_t *)h3_st_data(c))[1] == 100);
    const h3_st_entry *b = h3_st_set_find(s, "b.weight");
    CHECK(b && strcmp(h3_st_path(b->file), p1) == 0 && ((const uint8_t *)h3_st_data(b))[1] == 101);
    CHECK(h3_st_set_find(s, "d.weight") == NULL);
    size_t seen = 0;
    for (size_t i = 0; i < h3_st_set_count(s); i++) seen += h3_st_set_find(s, h3_st_set_at(s, i)->name) != NULL;
    CHECK(seen == 3);
    h3_st_set_close(s);
  }
  /* missing shard file */
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                  "\"b.weight\":\"model-00001-of-00002.safetensors\","
                  "\"c.weight\":\"model-00003-of-00002.safetensors\"}}");
  expect_set_fail("missing_shard", idx, idx, "model-00003-of-00002.safetensors", NULL);
  /* listed but absent from its shard */
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                  "\"b.weight\":\"model-00001-of-00002.safetensors\","
                  "\"c.weight\":\"model-00002-of-00002.safetensors\","
                  "\"d.weight\":\"model-00002-of-00002.safetensors\"}}");
  expect_set_fail("listed_absent", idx, idx, "'d.weight'", "model-00002-of-00002.safetensors");
  /* extra tensor in a shard, not in the weight_map */
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                  "\"c.weight\":\"model-00002-of-00002.safetensors\"}}");
  expect_set_fail("extra_in_shard", idx, idx, "'b.weight'", "model-00001-of-00002.safetensors");
  /* tensor mapped to the other shard (and present in both by name is impossible here) */
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                  "\"b.weight\":\"model-00002-of-00002.safetensors\","
                  "\"c.weight\":\"model-00002-of-00002.safetensors\"}}");
  expect_set_fail("wrong_shard", idx, idx, "'b.weight'", NULL);
  /* shard escaping the folder, bad index shapes */
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"../model-00001-of-00002.safetensors\"}}");
  expect_set_fail("shard_escape", idx, idx, "'a.weight'", "relative path");
  write_text(idx, "{\"weight_map\":{\"a.weight\":1}}");
  expect_set_fail("map_not_string", idx, idx, "'a.weight'", NULL);
  write_text(idx, "{\"metadata\":{}}");
  expect_set_fail("no_weight_map", idx, idx, "weight_map", NULL);
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"x\",\"a.weight\":\"y\"}}");
  expect_set_fail("index_dup_key", idx, idx, "duplicate", NULL);
  write_text(idx, "{\"weight_map\": [");
  expect_set_fail("index_bad_json", idx, idx, NULL, NULL);
  /* a corrupt shard: the error names the index and the shard file */
  write_text(idx, "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                  "\"b.weight\":\"model-00001-of-00002.safetensors\","
                  "\"c.weight\":\"model-00002-of-00002.safetensors\"}}");
  CHECK(truncate(p2, 12) == 0);
  expect_set_fail("corrupt_shard", idx, idx, p2, NULL);
  /* folder holding two index files */
  write_u8s(p2, n2, 1);
  char idx2[800];
  snprintf(idx2, sizeof idx2, "%s/model.fp16.safetensors.index.json", dir);
  write_text(idx2, "{\"weight_map\":{}}");
  expect_set_fail("two_indexes", dir, dir, "index.json", NULL);
  expect_set_fail("missing_path", tpath("does/not/exist"), tpath("does/not/exist"), NULL, NULL);
}

static void test_folder(void) {
  printf("folder mode:\n");
  char dir[700];
  snprintf(dir, sizeof dir, "%s/folder", g_dir);
  mkdir(dir, 0755);
  char pa[800], pb[800], other[800];
  snprintf(pa, sizeof pa, "%s/b.safetensors", dir);
  snprintf(pb, sizeof pb, "%s/a.safetensors", dir);
  snprintf(other, sizeof other, "%s/notes.txt", dir);
  const char *na[] = {"x", "y"}, *nb[] = {"z"};
  write_u8s(pa, na, 2);
  write_u8s(pb, nb, 1);
  write_text(other, "not a checkpoint");
  h3_st_set *s = NULL;
  h3_status st = h3_st_set_open(dir, &s);
  CHECK_MSG(st == H3_OK, "folder: %s", h3_last_error());
  if (st == H3_OK) {
    CHECK(h3_st_set_nfiles(s) == 2 && h3_st_set_count(s) == 3);
    CHECK(strcmp(h3_st_path(h3_st_set_file(s, 0)), pb) == 0); /* sorted by name: a before b */
    CHECK(strcmp(h3_st_set_at(s, 0)->name, "z") == 0);
    CHECK(h3_st_set_find(s, "y") && h3_st_set_find(s, "y")->file == h3_st_set_file(s, 1));
    h3_st_set_close(s);
  }
  /* duplicate name across files */
  const char *nd[] = {"q", "y"};
  write_u8s(pb, nd, 2);
  expect_set_fail("dup_across", dir, "'y'", pa, pb);
  /* no safetensors at all */
  char empty[700];
  snprintf(empty, sizeof empty, "%s/emptydir", g_dir);
  mkdir(empty, 0755);
  expect_set_fail("empty_folder", empty, empty, NULL, NULL);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
  if (d) closedir(d);
  return n;
}

static void test_writer(void) {
  float v[4] = {1, 2, 3, 4};
  int64_t sh[1] = {4};
  h3_st_write_item it = {"w", h3_tensor_make(v, H3_DT_F32, 1, sh)};
  /* into a missing folder: fails, names the path, creates nothing */
  char path[800];
  snprintf(path, sizeof path, "%s/no_such_dir/out.safetensors", g_dir);
  h3_status st = h3_st_write(path, &it, 1, NULL, 0);
  CHECK(st != H3_OK && contains(h3_last_error(), path));
  CHECK(access(path, F_OK) != 0);
  /* rename onto a directory fails after the temp file was written: it must be removed */
  char wdir[700];
  snprintf(wdir, sizeof wdir, "%s/wdir", g_dir);
  mkdir(wdir, 0755);
  snprintf(path, sizeof path, "%s/target.safetensors", wdir);
  mkdir(path, 0755);
  st = h3_st_write(path, &it, 1, NULL, 0);
  CHECK_MSG(st != H3_OK && contains(h3_last_error(), path), "%s", h3_last_error());
  CHECK_MSG(count_entries(wdir) == 1, "temp file left behind in %s", wdir);
  rmdir(path);
  /* overwrite an existing file atomically */
  st = h3_st_write(path, &it, 1, NULL, 0);
  CHECK(st == H3_OK);
  v[0] = 42;
  st = h3_st_write(path, &it, 1, NULL, 0);
  CHECK(st == H3_OK && count_entries(wdir) == 1);
  h3_st_file *f = NULL;
  if (h3_st_open(path, &f) == H3_OK) {
    CHECK(((const float *)h3_st_data(h3_st_find(f, "w")))[0] == 42.0f);
    h3_st_close(f);
  } else {
    CHECK_MSG(0, "%s", h3_last_error());
  }
  /* invalid inputs name the tensor */
  h3_st_write_item two[2] = {it, it};
  st = h3_st_write(path, two, 2, NULL, 0);
  CHECK(st != H3_OK && contains(h3_last_error(), "'w'") && contains(h3_last_error(), path));
  float m[6] = {0};
  h3_tensor t2 = h3_tensor_2d(m, H3_DT_F32, 2, 3);
  h3_st_write_item nc = {"strided", h3_tensor_narrow(&t2, 1, 0, 2)};
  st = h3_st_write(path, &nc, 1, NULL, 0);
  CHECK(st != H3_OK && contains(h3_last_error(), "'strided'"));
  const char *badmeta[] = {"k", "1", "k", "2"};
  st = h3_st_write(path, &it, 1, badmeta, 2);
  CHECK(st != H3_OK && contains(h3_last_error(), "'k'"));
  h3_st_write_item reserved = {"__metadata__", it.t};
  CHECK(h3_st_write(path, &reserved, 1, NULL, 0) != H3_OK);
  CHECK(count_entries(wdir) == 1);
}

static void test_many_names(void) {
  enum { N = 3000 };
  static h3_st_write_item items[N];
  static char names[N][48];
  static uint16_t vals[N];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "blocks.%d.attn.to_q.weight", i);
    vals[i] = (uint16_t)i;
    items[i].name = names[i];
    items[i].t = h3_tensor_make(&vals[i], H3_DT_BF16, 0, NULL);
  }
  const char *path = tpath("many.safetensors");
  CHECK(h3_st_write(path, items, N, NULL, 0) == H3_OK);
  h3_st_file *f = NULL;
  if (h3_st_open(path, &f) != H3_OK) {
    CHECK_MSG(0, "%s", h3_last_error());
    return;
  }
  int ok = 1;
  double t0 = now_s();
  for (int rep = 0; rep < 20; rep++)
    for (int i = 0; i < N; i++) {
      const h3_st_entry *e = h3_st_find(f, names[i]);
      if (!e || *(const uint16_t *)h3_st_data(e) != (uint16_t)i) ok = 0;
    }
  double dt = now_s() - t0;
  CHECK(ok);
  CHECK_MSG(dt < 1.0, "60000 lookups took %.3f s", dt);
  printf("many names: %d tensors, %d lookups in %.4f s\n", N, 20 * N, dt);
  h3_st_close(f);
}

/* A 62 GB sparse file: opening reads only the header. */
static void test_sparse_big(void) {
  const char *path = tpath("big.safetensors");
  /* 2 tensors: 31 GB each of BF16 */
  const char *hdr = "{\"big.a\":{\"dtype\":\"BF16\",\"shape\":[15500000000],\"data_offsets\":[0,31000000000]},"
                    "\"big.b\":{\"dtype\":\"BF16\",\"shape\":[124000,125000],\"data_offsets\":[31000000000,"
                    "62000000000]}}";
  write_raw(path, hdr, -1, 0);
  uint64_t total = 8 + strlen(hdr) + 62000000000ull;
  if (truncate(path, (off_t)total) != 0) {
    h3t_skip("sparse 62 GB file: truncate: %s (this file system has no sparse files)", strerror(errno));
    unlink(path);
    return;
  }
  double t0 = now_s();
  h3_st_file *f = NULL;
  h3_status st = h3_st_open(path, &f);
  double dt = now_s() - t0;
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  CHECK_MSG(dt < 0.5, "opening the sparse file took %.3f s", dt);
  printf("62 GB sparse file opened in %.4f s\n", dt);
  if (st == H3_OK) {
    const h3_st_entry *b = h3_st_find(f, "big.b");
    CHECK(b && b->shape[0] == 124000 && b->shape[1] == 125000);
    if (b) {
      const uint8_t *p = h3_st_data(b);
      CHECK(p[0] == 0 && p[b->end - b->begin - 1] == 0); /* lazily paged holes read as zero */
    }
    h3_st_close(f);
  }
  /* one byte short: the last tensor runs past the end */
  CHECK(truncate(path, (off_t)(total - 1)) == 0);
  st = h3_st_open(path, &f);
  CHECK(st != H3_OK && contains(h3_last_error(), "'big.b'") && contains(h3_last_error(), path));
  unlink(path);
}

/* The release's real index files: shards missing -> error naming index and
 * shard; then a stand-in checkpoint with the same names and shard layout
 * (one scalar per tensor) opens with every name found in its shard. */
static void test_real_index(const char *sub, const char *index_name) {
  char src[1024];
  snprintf(src, sizeof src, "%s/%s/%s", h3t_snapshot_dir(), sub, index_name);
  json_error_t jerr;
  json_t *root = json_load_file(src, 0, &jerr);
  CHECK_MSG(root != NULL, "release index %s (tests/data): %s", src, jerr.text);
  if (!root) return;
  h3_st_set *s = NULL;
  h3_status st = h3_st_set_open(src, &s);
  CHECK_MSG(st == H3_ERR_NOT_FOUND && contains(h3_last_error(), src) && contains(h3_last_error(), "-00001-of-"),
            "%s", h3_last_error());
  printf("  real %-12s without shards: %s\n", sub, h3_last_error());
  /* stand-in shards */
  char dir[700];
  snprintf(dir, sizeof dir, "%s/real_%s", g_dir, sub);
  mkdir(dir, 0755);
  json_t *wm = json_object_get(root, "weight_map");
  size_t nmap = json_object_size(wm);
  h3_st_write_item *items = calloc(nmap, sizeof *items);
  static uint16_t one = 0x3f80;
  const char *shard0 = NULL;
  size_t done = 0;
  while (done < nmap) { /* one shard per pass */
    size_t k = 0;
    shard0 = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
      const char *sh = json_string_value(v);
      char p[900];
      snprintf(p, sizeof p, "%s/%s", dir, sh);
      if (!shard0 && access(p, F_OK) == 0) continue; /* shard already written */
      if (!shard0) shard0 = sh;
      if (strcmp(sh, shard0) != 0) continue;
      items[k].name = key;
      items[k].t = h3_tensor_make(&one, H3_DT_BF16, 0, NULL);
      k++;
    }
    if (!shard0 || k == 0) break;
    char p[900];
    snprintf(p, sizeof p, "%s/%s", dir, shard0);
    CHECK_MSG(h3_st_write(p, items, k, NULL, 0) == H3_OK, "%s", h3_last_error());
    done += k;
  }
  CHECK(done == nmap);
  char idx[900];
  snprintf(idx, sizeof idx, "%s/%s", dir, index_name);
  CHECK(json_dump_file(root, idx, 0) == 0);
  double t0 = now_s();
  st = h3_st_set_open(dir, &s); /* folder -> its index */
  double dt = now_s() - t0;
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st == H3_OK) {
    CHECK(h3_st_set_count(s) == nmap);
    int ok = 1;
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
      const h3_st_entry *e = h3_st_set_find(s, key);
      const char *fp = e ? h3_st_path(e->file) : "";
      size_t fl = strlen(fp), sl = strlen(json_string_value(v));
      if (!e || fl < sl || strcmp(fp + fl - sl, json_string_value(v)) != 0) ok = 0;
    }
    CHECK(ok);
    printf("  real %-12s stand-in: %zu tensors in %zu shards opened in %.4f s\n", sub, h3_st_set_count(s),
           h3_st_set_nfiles(s), dt);
    h3_st_set_close(s);
  }
  free(items);
  json_decref(root);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s", h3t_tmpdir());
  test_roundtrip();
  test_corrupt();
  test_parse_header_mem();
  test_sharded();
  test_folder();
  test_writer();
  test_many_names();
  test_sparse_big();
  printf("release index files:\n");
  test_real_index("transformer", "diffusion_pytorch_model.safetensors.index.json");
  test_real_index("text_encoder", "model.safetensors.index.json");
  test_real_index("vae", "diffusion_pytorch_model.safetensors.index.json");
  return h3t_finish(MIN_CHECKS);
}
