/* CPU backend: grouped-query and causal attention (h3_qkv_layout.kv_heads /
 * .causal) and qk_norm_rope with fewer k heads than q heads, against a
 * double-precision reference.  Shapes cross the kernel's query (64) and key
 * (256) tile sizes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "testutil.h"

#define MIN_CHECKS 114 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static h3_backend *be;

/* contiguous [q_all (H*D) | k_all (KV*D) | v_all (KV*D)] starting at column base */
static h3_qkv_layout gqa_layout(int H, int KV, int D, int64_t base, int causal) {
  h3_qkv_layout L = {.heads = H, .head_dim = D, .kv_heads = KV, .causal = causal};
  int kv = KV ? KV : H;
  L.q_off = base;
  L.k_off = base + (int64_t)H * D;
  L.v_off = base + (int64_t)(H + kv) * D;
  L.head_stride = D;
  return L;
}

static void ref_attention(const float *qkv, int64_t S, int64_t ld, const h3_qkv_layout *L, double scale,
                          double *out /* [S, H*D] */) {
  const int64_t D = L->head_dim, H = L->heads, KV = L->kv_heads ? L->kv_heads : L->heads, G = H / KV;
  double *sc = malloc((size_t)S * sizeof *sc);
  for (int64_t h = 0; h < H; h++) {
    int64_t g = h / G;
    for (int64_t i = 0; i < S; i++) {
      const float *q = qkv + i * ld + L->q_off + h * L->head_stride;
      int64_t nk = L->causal ? i + 1 : S;
      double mx = -INFINITY;
      for (int64_t j = 0; j < nk; j++) {
        const float *k = qkv + j * ld + L->k_off + g * L->head_stride;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)q[d] * (double)k[d];
        sc[j] = s * scale;
        if (sc[j] > mx) mx = sc[j];
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; j++) sum += (sc[j] = exp(sc[j] - mx));
      double *o = out + i * H * D + h * D;
      for (int64_t d = 0; d < D; d++) o[d] = 0;
      for (int64_t j = 0; j < nk; j++) {
        const float *v = qkv + j * ld + L->v_off + g * L->head_stride;
        for (int64_t d = 0; d < D; d++) o[d] += sc[j] / sum * (double)v[d];
      }
    }
  }
  free(sc);
}

static double rel_err(const float *got, int64_t ldo, const double *ref, int64_t S, int64_t W) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < W; j++) {
      double d = (double)got[i * ldo + j] - ref[i * W + j];
      num += d * d;
      den += ref[i * W + j] * ref[i * W + j];
    }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void case_attention(int H, int KV, int D, int64_t S, int causal, int64_t base, int64_t pad, uint64_t seed) {
  h3_qkv_layout L = gqa_layout(H, KV, D, base, causal);
  int kv = KV ? KV : H;
  const int64_t C = base + (int64_t)(H + 2 * kv) * D + pad, HD = (int64_t)H * D, ldo = HD + 3;
  float *qkv = malloc((size_t)(S * C) * sizeof *qkv);
  float *o = calloc((size_t)(S * ldo), sizeof *o);
  double *ref = malloc((size_t)(S * HD) * sizeof *ref);
  h3t_fill_random(qkv, (size_t)(S * C), seed);
  for (int64_t i = 0; i < S * C; i++) qkv[i] *= 2.0f;
  int64_t shape[2] = {S, C};
  h3_tensor t = h3_tensor_make(qkv, H3_DT_F32, 2, shape);
  h3_tensor ot = h3_tensor_2d(o, H3_DT_F32, S, ldo);
  ot = h3_tensor_narrow(&ot, 1, 0, HD);
  float scale = (float)(1.0 / sqrt((double)D));
  h3_status rc = be->ops->attention(be, &t, &L, scale, &ot);
  CHECK_MSG(rc == H3_OK, "attention H=%d KV=%d D=%d S=%lld causal=%d: %s", H, KV, D, (long long)S, causal,
            h3_last_error());
  ref_attention(qkv, S, C, &L, scale, ref);
  double e = rel_err(o, ldo, ref, S, HD);
  CHECK_MSG(e < 2e-6, "attention H=%d KV=%d D=%d S=%lld causal=%d: rel err %.3g", H, KV, D, (long long)S, causal, e);
  /* untouched padding columns */
  int pad_ok = 1;
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = HD; j < ldo; j++) pad_ok &= o[i * ldo + j] == 0.0f;
  CHECK(pad_ok);
  if (causal) {
    /* row 0 sees only key 0: out = v[0] of its group */
    double mx = 0;
    for (int h = 0; h < H; h++)
      for (int d = 0; d < D; d++) {
        double v = qkv[L.v_off + (h / (H / kv)) * D + d];
        double dd = fabs(o[h * D + d] - v);
        mx = h3t_max_nan(mx, dd);
      }
    CHECK_MSG(mx < 1e-6, "causal row 0 differs from v[0] by %.3g", mx);
  }
  free(qkv);
  free(o);
  free(ref);
}

/* seqs: the rows are n independent sequences; each must match the reference
 * computed on its own rows (no key of another sequence is seen). */
static void case_seqs(int H, int KV, int D, int64_t L, int n, int causal) {
  h3_qkv_layout lay = gqa_layout(H, KV, D, 0, causal);
  const int kv = KV ? KV : H;
  const int64_t S = L * n, C = (int64_t)(H + 2 * kv) * D, HD = (int64_t)H * D;
  float *qkv = malloc((size_t)(S * C) * sizeof *qkv), *o = malloc((size_t)(S * HD) * sizeof *o);
  double *ref = malloc((size_t)(S * HD) * sizeof *ref);
  h3t_fill_random(qkv, (size_t)(S * C), 1234 + (uint64_t)n);
  for (int i = 0; i < n; i++) ref_attention(qkv + (size_t)(i * L * C), L, C, &lay, 0.25, ref + (size_t)(i * L * HD));
  int64_t shape[2] = {S, C};
  h3_tensor t = h3_tensor_make(qkv, H3_DT_F32, 2, shape), ot = h3_tensor_2d(o, H3_DT_F32, S, HD);
  lay.seqs = n;
  h3_status rc = be->ops->attention(be, &t, &lay, 0.25f, &ot);
  CHECK_MSG(rc == H3_OK, "attention seqs=%d: %s", n, h3_last_error());
  double e = rel_err(o, HD, ref, S, HD);
  CHECK_MSG(e < 2e-6, "attention H=%d KV=%d D=%d %d x %lld rows causal=%d: rel err %.3g", H, KV, D, n, (long long)L,
            causal, e);
  /* rows that do not split evenly, and a negative count, are refused */
  h3_tensor t1 = h3_tensor_narrow(&t, 0, 0, S - 1), o1 = h3_tensor_narrow(&ot, 0, 0, S - 1);
  if (n > 1) CHECK(be->ops->attention(be, &t1, &lay, 0.25f, &o1) == H3_ERR_SHAPE);
  lay.seqs = -1;
  CHECK(be->ops->attention(be, &t, &lay, 0.25f, &ot) == H3_ERR_INVALID);
  free(qkv);
  free(o);
  free(ref);
}

/* kv_heads == heads given explicitly equals kv_heads = 0 bit for bit. */
static void case_default_kv(void) {
  const int H = 3, D = 32;
  const int64_t S = 70, C = 3 * H * D;
  float *qkv = malloc((size_t)(S * C) * sizeof *qkv), *a = malloc((size_t)(S * H * D) * sizeof *a),
        *b = malloc((size_t)(S * H * D) * sizeof *b);
  h3t_fill_random(qkv, (size_t)(S * C), 99);
  int64_t shape[2] = {S, C};
  h3_tensor t = h3_tensor_make(qkv, H3_DT_F32, 2, shape);
  h3_tensor ta = h3_tensor_2d(a, H3_DT_F32, S, H * D), tb = h3_tensor_2d(b, H3_DT_F32, S, H * D);
  for (int causal = 0; causal < 2; causal++) {
    h3_qkv_layout L0 = gqa_layout(H, 0, D, 0, causal), L1 = gqa_layout(H, H, D, 0, causal);
    CHECK(be->ops->attention(be, &t, &L0, 0.2f, &ta) == H3_OK);
    CHECK(be->ops->attention(be, &t, &L1, 0.2f, &tb) == H3_OK);
    CHECK(memcmp(a, b, (size_t)(S * H * D) * sizeof *a) == 0);
  }
  free(qkv);
  free(a);
  free(b);
}

static void case_rope(int H, int KV, int D, int64_t S, int rot) {
  h3_qkv_layout L = gqa_layout(H, KV, D, 0, 1);
  const int64_t C = (int64_t)(H + 2 * KV) * D;
  float *qkv = malloc((size_t)(S * C) * sizeof *qkv), *orig = malloc((size_t)(S * C) * sizeof *orig);
  float *cs = malloc((size_t)(S * rot) * sizeof *cs), *sn = malloc((size_t)(S * rot) * sizeof *sn);
  float qw[256], kw[256];
  h3t_fill_random(qkv, (size_t)(S * C), 5);
  h3t_fill_random(qw, (size_t)D, 6);
  h3t_fill_random(kw, (size_t)D, 7);
  for (int d = 0; d < D; d++) qw[d] += 1.0f, kw[d] += 1.5f;
  for (int64_t s = 0; s < S; s++)
    for (int j = 0; j < rot / 2; j++) {
      double ang = (double)s * pow(1000.0, -2.0 * j / rot);
      cs[s * rot + j] = cs[s * rot + j + rot / 2] = (float)cos(ang);
      sn[s * rot + j] = sn[s * rot + j + rot / 2] = (float)sin(ang);
    }
  memcpy(orig, qkv, (size_t)(S * C) * sizeof *qkv);
  int64_t shape[2] = {S, C}, vs[1] = {D};
  h3_tensor t = h3_tensor_make(qkv, H3_DT_F32, 2, shape);
  h3_tensor tq = h3_tensor_make(qw, H3_DT_F32, 1, vs), tk = h3_tensor_make(kw, H3_DT_F32, 1, vs);
  h3_tensor tc = h3_tensor_2d(cs, H3_DT_F32, S, rot), ts = h3_tensor_2d(sn, H3_DT_F32, S, rot);
  const float eps = 1e-6f;
  h3_status rc = be->ops->qk_norm_rope(be, &t, &L, &tq, &tk, eps, &tc, &ts);
  CHECK_MSG(rc == H3_OK, "qk_norm_rope H=%d KV=%d: %s", H, KV, h3_last_error());
  double maxe = 0;
  int v_same = 1;
  for (int64_t s = 0; s < S; s++) {
    const float *row = orig + s * C;
    for (int n = 0; n < H + KV; n++) {
      int is_q = n < H;
      int64_t off = is_q ? L.q_off + (int64_t)n * D : L.k_off + (int64_t)(n - H) * D;
      const float *w = is_q ? qw : kw;
      double ss = 0, z[256];
      for (int d = 0; d < D; d++) ss += (double)row[off + d] * row[off + d];
      double r = 1.0 / sqrt(ss / D + eps);
      for (int d = 0; d < D; d++) z[d] = row[off + d] * r * w[d];
      for (int d = 0; d < D; d++) {
        double want = z[d];
        if (d < rot) {
          int half = rot / 2;
          double partner = d < half ? -z[d + half] : z[d - half];
          want = z[d] * cs[s * rot + d] + partner * sn[s * rot + d];
        }
        double e = fabs(qkv[s * C + off + d] - want);
        maxe = h3t_max_nan(maxe, e);
      }
    }
    for (int64_t j = L.v_off; j < C; j++) v_same &= qkv[s * C + j] == row[j];
  }
  CHECK_MSG(maxe < 1e-5, "qk_norm_rope H=%d KV=%d: max err %.3g", H, KV, maxe);
  CHECK(v_same);
  free(qkv);
  free(orig);
  free(cs);
  free(sn);
}

static void case_errors(void) {
  const int64_t S = 4, C = 8 * 16;
  float *qkv = calloc((size_t)(S * C), sizeof *qkv), *o = calloc((size_t)(S * C), sizeof *o);
  int64_t shape[2] = {S, C};
  h3_tensor t = h3_tensor_make(qkv, H3_DT_F32, 2, shape);
  h3_tensor ot = h3_tensor_2d(o, H3_DT_F32, S, 4 * 16);
  h3_qkv_layout L = gqa_layout(4, 3, 16, 0, 0); /* 4 heads over 3 kv heads */
  L.v_off = 7 * 16 - 16;                         /* keep spans inside the buffer */
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &ot) == H3_ERR_INVALID);
  L = gqa_layout(2, 4, 16, 0, 0); /* more kv heads than heads */
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &ot) == H3_ERR_INVALID);
  L = gqa_layout(4, 2, 16, 0, 0);
  L.kv_heads = -1;
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &ot) == H3_ERR_INVALID);
  L = gqa_layout(4, 2, 16, 0, 0);
  L.causal = 2;
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &ot) == H3_ERR_INVALID);
  L = gqa_layout(4, 2, 16, 0, 0);
  L.v_off = C - 16; /* second v head runs past the last column */
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &ot) == H3_ERR_SHAPE);
  CHECK(be->ops->qk_norm_rope(be, &t, &L, NULL, NULL, 1e-6f, NULL, NULL) == H3_ERR_SHAPE);
  L = gqa_layout(4, 2, 16, 0, 0); /* 4+2+2 heads of 16 = 128 columns: fits */
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &ot) == H3_OK);
  CHECK(be->ops->qk_norm_rope(be, &t, &L, NULL, NULL, 1e-6f, NULL, NULL) == H3_OK);
  free(qkv);
  free(o);
}

int main(void) {
  if (h3_backend_cpu_create(&be) != H3_OK) {
    fprintf(stderr, "backend: %s\n", h3_last_error());
    return 1;
  }
  static const int64_t lens[] = {1, 7, 64, 65, 300};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    case_attention(4, 2, 32, lens[i], 1, 0, 0, 10 + i);
    case_attention(4, 2, 32, lens[i], 0, 5, 3, 20 + i);
    case_attention(8, 1, 16, lens[i], 1, 0, 1, 30 + i); /* MQA */
    case_attention(3, 3, 64, lens[i], 1, 2, 0, 40 + i); /* causal MHA */
  }
  case_attention(64 / 8, 8 / 8, 128, 520, 1, 0, 0, 77); /* release head_dim, > 2 key tiles */
  case_default_kv();
  case_seqs(2, 0, 16, 37, 3, 0);
  case_seqs(4, 2, 32, 65, 2, 1);
  case_seqs(3, 0, 8, 1, 5, 0);
  case_rope(4, 2, 32, 9, 32);
  case_rope(8, 1, 16, 5, 8);
  case_rope(6, 3, 64, 3, 64);
  case_errors();
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
