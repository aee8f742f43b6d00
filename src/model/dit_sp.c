/* Ulysses sequence parallelism of the DiT forward (spec dit.md §3, §4.5).
 *
 * P ranks (one communicator, one backend and one h3_dit each, the weights
 * shared or replicated) each hold a contiguous shard of Sl = ceil(S/P) rows of
 * the packed sequence: rank r owns global rows [r*Sl, r*Sl + Sl).  Rows at or
 * past S are padding rows (only in the last shards): zero activations, the
 * (timestep 0, video) modulation row and position (0, 0, 0), i.e. the
 * reference's padding convention (§4.5).  Every row-wise op (norms,
 * modulation, Linears, SwiGLU, residuals, q/k-norm + RoPE) runs locally on the
 * Sl rows.  Around attention:
 *
 *   qkv [Sl rows, all heads] --all_to_all--> [P*Sl rows, this rank's heads]
 *   attention over the first S rows only (the P*Sl - S padding rows sit at the
 *   end of the gathered sequence and are neither queries nor keys, so they
 *   never mix with real rows)
 *   out [P*Sl rows, this rank's heads] --all_to_all--> [Sl rows, all heads]
 *   then out_proj and the rest locally.
 *
 * Heads: rank j takes heads [h0_j, h0_j + nh_j), nh_j = H/P + (j < H%P):
 * unequal counts when P does not divide H (a rank may get none when P > H).
 * All-to-all blocks are equal-sized, so each block carries hmax = ceil(H/P)
 * head slots of which the receiver's nh_j are used.
 *
 * The text refiner runs on every rank (it is small and needs no
 * communication); each rank scatters the text rows that fall in its shard.
 * Time path and AdaLN tables are computed on every rank (K rows).  The output
 * heads run on each rank's own video/audio rows; the [Sl, out] blocks are
 * all-gathered and rank 0 selects video_indices / audio_indices.
 *
 * Numerics: every row sees exactly the ops of h3_dit_forward in the same
 * order; attention of one head over the same S keys is computed by the same
 * kernel, so results match h3_dit_forward to rounding of the GEMM blocking. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "core/log.h"
#include "model/dit.h"
#include "model/dit_internal.h"

#define OPS (m->be->ops)
#define F32B(n) h3_arena_round((size_t)(n) * 4)

static h3_tensor rows_of(const h3_tensor *t, int64_t n) { return h3_tensor_narrow(t, 0, 0, n); }
static h3_tensor cols_of(const h3_tensor *t, int64_t c0, int64_t n) { return h3_tensor_narrow(t, 1, c0, n); }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* Heads of rank j out of P. */
static int heads_of(int H, int P, int j) { return H / P + (j < H % P); }
static int head0_of(int H, int P, int j) { return j * (H / P) + (j < H % P ? j : H % P); }

/* A copy of activations between strided views, never rounded. */
static h3_status copy_act(h3_dit *m, const h3_tensor *src, h3_tensor *dst) {
  return OPS->copy_convert(&m->num_f32, src, dst);
}

/* Column runs that move heads [h0, h0+nh) of a QKV row (layout lay) into a
 * comm block laid out head-interleaved [q k v]_hh (interleaved) or part-major
 * [q_0..q_{hmax-1} | k.. | v..].  Adjacent runs are merged: one run for the
 * release layout, three for [q_all; k_all; v_all]. */
typedef struct seg {
  int64_t src, dst, len;
} seg;
static int qkv_segments(const h3_qkv_layout *lay, bool interleaved, int h0, int nh, int hmax, seg *out) {
  const int64_t D = lay->head_dim;
  int n = 0;
  for (int a = 0; a < (interleaved ? nh : 3); a++)
    for (int b = 0; b < (interleaved ? 3 : nh); b++) {
      int hh = interleaved ? a : b, part = interleaved ? b : a;
      int64_t off = part == 0 ? lay->q_off : part == 1 ? lay->k_off : lay->v_off;
      int64_t src = off + (int64_t)(h0 + hh) * lay->head_stride;
      int64_t dst = interleaved ? ((int64_t)hh * 3 + part) * D : ((int64_t)part * hmax + hh) * D;
      if (n > 0 && out[n - 1].src + out[n - 1].len == src && out[n - 1].dst + out[n - 1].len == dst) {
        out[n - 1].len += D;
      } else {
        out[n++] = (seg){src, dst, D};
      }
    }
  return n;
}

/* Columns [src, src+len) of the logical QKV projection of h written to dst's columns
 * [dcol, dcol+len): a GEMM against those weight rows (split where the separate q/k/v
 * weights of the diffusers naming meet, every I columns). */
static h3_status qkv_proj_cols(h3_dit *m, const h3_dit_block_weights *bw, const h3_tensor *h, int64_t I, int64_t src,
                               int64_t len, h3_tensor *dst, int64_t dcol) {
  const h3_dit_lora_block *ab = h3_dit_block_ad(m, bw);
  while (len > 0) {
    const h3_tensor *w = &bw->qkv[0];
    const h3_lora_term *lt = ab ? ab->qkv[0] : NULL;
    int64_t row = src, n = len;
    if (bw->n_qkv != 1) {
      const int64_t part = src / I;
      w = &bw->qkv[part];
      lt = ab ? ab->qkv[part] : NULL;
      row = src - part * I;
      if (row + n > I) n = I - row;
    }
    h3_tensor y = cols_of(dst, dcol, n);
    H3_TRY(h3_dit_lin_rows(m->be, lt, h, w, row, n, &y));
    src += n, dcol += n, len -= n;
  }
  return H3_OK;
}

/* parts of the block timed under H3_SP_TIMING */
enum { SPT_QKV, SPT_A2A_QKV, SPT_ATTN, SPT_A2A_O, SPT_UNPACK_OUT, SPT_REST, SPT_N };

typedef struct sp_ctx {
  h3_comm *comm;
  int P, rank, H, hmax;
  int64_t S, Sl;
  h3_dtype act;
  size_t es;
  h3_tensor qsend, qrecv, ofull, orecv; /* [P*Sl, hmax*3D] x2, [P*Sl, hmax*D] x2 */
  seg *segs;                            /* 3*hmax */
  /* H3_SP_TIMING=1: device time per part of the block (each mark syncs the stream) */
  bool timing;
  void *timer;
  double ms[SPT_N];
} sp_ctx;

static const char *const spt_names[SPT_N] = {"qkv proj (into blocks)+norm+rope", "all-to-all qkv", "attention",
                                             "all-to-all o", "unpack+out_proj", "rest (norms, MLP, residuals)"};

/* Ends the running mark (its time goes to part `done`) and starts the next. */
static void sp_tick(h3_dit *m, sp_ctx *X, int done) {
  if (!X->timing || !OPS->timer_start || !OPS->timer_stop) return;
  double ms = 0;
  if (X->timer && OPS->timer_stop(m->be, X->timer, &ms) == H3_OK) X->ms[done] += ms;
  X->timer = NULL;
  if (OPS->timer_start(m->be, &X->timer) != H3_OK) X->timer = NULL;
}

static h3_tensor block_of(const h3_tensor *t, int64_t j, int64_t Sl) {
  return h3_tensor_narrow(t, 0, j * Sl, Sl);
}

/* Attention sub-layer of the local Sl rows in h (output before gate/residual into sc->y). */
static h3_status sp_attn_sublayer(h3_dit *m, sp_ctx *X, const h3_dit_block_weights *bw, const h3_tensor *h,
                                  const h3_tensor *cos, const h3_tensor *sin, h3_dit_scratch *sc) {
  const h3_dit_config *c = &m->w->cfg;
  const int64_t I = h3_dit_inner(c), D = c->head_dim, Sl = X->Sl;
  const h3_qkv_layout *lay = &bw->qkv_layout;
  if (h3_qkv_kv_heads(lay) != lay->heads || lay->heads != X->H || lay->head_dim != D || lay->causal)
    return h3_fail(H3_ERR_UNSUPPORTED, "sequence parallel DiT: QKV layout with %d q heads, %d k/v heads%s "
                   "(expected %d, %d, non-causal)", lay->heads, h3_qkv_kv_heads(lay), lay->causal ? ", causal" : "",
                   X->H, X->H);
  const bool inter = lay->k_off == lay->q_off + D && lay->v_off == lay->q_off + 2 * D && lay->head_stride == 3 * D;
  /* The QKV projection straight into the all-to-all blocks: block j = my Sl rows x rank j's
   * heads, each column run a GEMM against the matching weight rows (no packing copy); my own
   * block goes into its place in qrecv, so the all-to-all moves only the peers' blocks.  Then
   * q/k-norm + RoPE per block (per head, so the same as on the whole row). */
  const h3_qkv_layout blay = {.heads = 0, .head_dim = (int)D, .q_off = 0, .k_off = inter ? D : (int64_t)X->hmax * D,
                              .v_off = inter ? 2 * D : 2 * (int64_t)X->hmax * D, .head_stride = inter ? 3 * D : D};
  for (int j = 0; j < X->P; j++) {
    const int nj = heads_of(X->H, X->P, j);
    if (nj == 0) continue;
    h3_tensor blk = block_of(j == X->rank ? &X->qrecv : &X->qsend, j, Sl);
    int n = qkv_segments(lay, inter, head0_of(X->H, X->P, j), nj, X->hmax, X->segs);
    for (int k = 0; k < n; k++) H3_TRY(qkv_proj_cols(m, bw, h, I, X->segs[k].src, X->segs[k].len, &blk, X->segs[k].dst));
    h3_qkv_layout bl = blay;
    bl.heads = nj;
    H3_TRY(OPS->qk_norm_rope(m->be, &blk, &bl, &bw->q_norm, &bw->k_norm, (float)c->qk_norm_eps, cos, sin));
  }
  sp_tick(m, X, SPT_QKV);
  const size_t qbytes = (size_t)(Sl * X->hmax * 3 * D) * X->es;
  H3_TRY(h3_comm_all_to_all_peers(X->comm, X->qsend.data, X->qrecv.data, qbytes, h3_backend_stream(m->be)));
  sp_tick(m, X, SPT_A2A_QKV);
  /* attention over the S real rows, my heads */
  const int nh = heads_of(X->H, X->P, X->rank);
  if (nh > 0) {
    h3_qkv_layout g = {.heads = nh, .head_dim = (int)D, .kv_heads = 0, .causal = 0};
    g.q_off = 0;
    g.k_off = inter ? D : (int64_t)X->hmax * D;
    g.v_off = inter ? 2 * D : 2 * (int64_t)X->hmax * D;
    g.head_stride = inter ? 3 * D : D;
    h3_tensor q = rows_of(&X->qrecv, X->S), o = rows_of(&X->ofull, X->S);
    o = cols_of(&o, 0, nh * D);
    H3_TRY(OPS->attention(m->be, &q, &g, (float)(1.0 / sqrt((double)c->head_dim)), &o));
  }
  sp_tick(m, X, SPT_ATTN);
  const size_t obytes = (size_t)(Sl * X->hmax * D) * X->es;
  H3_TRY(h3_comm_all_to_all_peers(X->comm, X->ofull.data, X->orecv.data, obytes, h3_backend_stream(m->be)));
  sp_tick(m, X, SPT_A2A_O);
  /* unpack: block j = my Sl rows x rank j's heads, into concat_heads order */
  h3_tensor o = rows_of(&sc->mid, Sl);
  o = cols_of(&o, 0, I);
  for (int j = 0; j < X->P; j++) {
    const int nj = heads_of(X->H, X->P, j);
    if (nj == 0) continue;
    h3_tensor blk = block_of(j == X->rank ? &X->ofull : &X->orecv, j, Sl); /* own rows never left */
    h3_tensor s = cols_of(&blk, 0, nj * D), d = cols_of(&o, head0_of(X->H, X->P, j) * D, nj * D);
    H3_TRY(copy_act(m, &s, &d));
  }
  h3_tensor y = rows_of(&sc->y, Sl);
  const h3_dit_lora_block *ab = h3_dit_block_ad(m, bw);
  H3_TRY(h3_dit_lin(m->be, ab ? ab->out : NULL, &o, &bw->out_proj, NULL, &y));
  sp_tick(m, X, SPT_UNPACK_OUT);
  return H3_OK;
}

/* The block stack's attention callback: the time since the last mark counts as
 * "rest of the block", then the sub-layer on this rank's rows. */
static h3_status sp_attn_block(h3_dit *m, const h3_dit_stack *a, const h3_dit_block_weights *bw) {
  sp_ctx *X = a->attn_ctx;
  sp_tick(m, X, SPT_REST);
  h3_tensor h = rows_of(&a->sc->h, a->n);
  return sp_attn_sublayer(m, X, bw, &h, a->cosT, a->sinT, a->sc);
}

/* Local rows of one input set: sel[k] = input row i, loc[k] = sequence row - row0, for rows in the shard. */
static int64_t select_rows(const int64_t *idx, int64_t n, int64_t row0, int64_t Sl, int64_t *sel, int64_t *loc) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (idx[i] >= row0 && idx[i] < row0 + Sl) {
      sel[k] = i;
      loc[k] = idx[i] - row0;
      k++;
    }
  return k;
}

/* Rows src[sel[k]] (each `cols` floats) uploaded into dst. */
static h3_status upload_rows(h3_dit *m, h3_tensor *dst, const float *src, int64_t cols, const int64_t *sel, int64_t n) {
  if (n == 0) return H3_OK;
  float *tmp = malloc((size_t)(n * cols) * sizeof *tmp);
  if (!tmp) return h3_fail(H3_ERR_NOMEM, "sequence-parallel input rows");
  for (int64_t k = 0; k < n; k++) memcpy(tmp + k * cols, src + sel[k] * cols, (size_t)cols * sizeof *tmp);
  h3_status s = h3_dit_upload_f32(m, dst, tmp);
  free(tmp);
  return s;
}

size_t h3_dit_sp_arena_bytes(const h3_dit_config *c, int P, int64_t S, int64_t Nv, int64_t Na, int64_t Nt,
                             int64_t K) {
  const int64_t H = c->hidden, I = h3_dit_inner(c), F = c->ffn_dim, R = h3_dit_rot_dim(c), T = c->time_embed_dim;
  const int64_t D = c->head_dim, Pd = h3_dit_patch_dim(c), A = c->audio_in_channels;
  const int64_t Sl = (S + P - 1) / P, Lr = imax(Sl, Nt), hmax = (c->num_heads + P - 1) / P;
  const int64_t nv = Nv < Sl ? Nv : Sl, na = Na < Sl ? Na : Sl, nt = Nt < Sl ? Nt : Sl;
  const int64_t wide = imax(3 * I, 2 * F), mid = imax(I, F);
  size_t b = 0;
  b += F32B(Sl * H) + 3 * F32B(Lr * H) + F32B(Lr * wide) + F32B(Lr * mid);
  b += F32B(h3_dit_stage_elems(c, nv, na, Nt, K));
  b += 2 * F32B(Sl * R) + 2 * F32B(Sl) + F32B(nv) + F32B(na) + 2 * F32B(nt) + F32B(Nv) + F32B(Na);
  b += 2 * F32B(nv * Pd) + 2 * F32B(na * A) + F32B(Nt * c->text_dim);
  b += 2 * F32B(K * T) + F32B(K * c->freq_dim) + F32B(K * c->time_hidden) + 2 * F32B(K * 18 * H) + F32B(K * 2 * H);
  b += 2 * F32B(P * Sl * hmax * 3 * D) + 2 * F32B(P * Sl * hmax * D);
  b += F32B(Sl * Pd) + F32B(P * Sl * Pd) + F32B(Nv * Pd) + F32B(Sl * A) + F32B(P * Sl * A) + F32B(Na * A);
  return b + 96 * H3_ARENA_ALIGN;
}

h3_status h3_dit_forward_sp(h3_dit *m, h3_comm *comm, const h3_dit_inputs *in, float *video_out, float *audio_out) {
  const h3_dit_weights *w = m->w;
  const h3_dit_config *c = &w->cfg;
  if (!comm) return h3_fail(H3_ERR_INVALID, "sequence-parallel DiT forward without a communicator");
  H3_TRY(h3_dit_check_inputs_m(m, in));
  const int P = h3_comm_size(comm), rank = h3_comm_rank(comm);
  const int64_t S = in->seq_len, Nv = in->n_video, Na = in->n_audio, Nt = in->n_text, K = in->n_timesteps;
  const int64_t H = c->hidden, Pd = h3_dit_patch_dim(c), A = c->audio_in_channels, R = h3_dit_rot_dim(c);
  const int64_t D = c->head_dim;
  if (c->num_heads < 1 || c->num_heads > 1 << 20)
    return h3_fail(H3_ERR_INVALID, "sequence-parallel DiT: %lld heads", (long long)c->num_heads);
  const int Hh = (int)c->num_heads, hmax = (Hh + P - 1) / P;
  const int64_t Sl = (S + P - 1) / P, row0 = (int64_t)rank * Sl, Lr = imax(Sl, Nt);
  H3_TRY(h3_dit_ensure_arena(m, h3_dit_sp_arena_bytes(c, P, S, Nv, Na, Nt, K)));
  H3_TRY(h3_dit_forward_begin(m));
  const h3_dtype act = h3_dit_act_dtype(m);
  const bool f32_act = act == H3_DT_F32;

  /* host-side shard tables */
  int64_t *ibuf = malloc((size_t)(2 * Sl + 2 * Nv + 2 * Na + 2 * Nt + 1) * sizeof *ibuf);
  float *pos = malloc((size_t)(Sl * 3 + 2 * Sl * R + 1) * sizeof *pos);
  seg *segs = malloc((size_t)(3 * hmax) * sizeof *segs);
  if (!ibuf || !pos || !segs) {
    free(ibuf), free(pos), free(segs);
    return h3_fail(H3_ERR_NOMEM, "sequence-parallel tables");
  }
  int64_t *tsi = ibuf, *tags = tsi + Sl, *vsel = tags + Sl, *vloc = vsel + Nv, *asel = vloc + Nv;
  int64_t *aloc = asel + Na, *xsel = aloc + Na, *xloc = xsel + Nt;
  for (int64_t l = 0; l < Sl; l++) {
    const int64_t g = row0 + l;
    const bool real = g < S;
    tsi[l] = real ? in->timestep_indices[g] : 0;
    tags[l] = real ? in->token_tags[g] : 0;
    for (int a = 0; a < 3; a++) pos[3 * l + a] = real ? in->position_ids[3 * g + a] : 0.0f;
  }
  const int64_t nv = select_rows(in->video_indices, Nv, row0, Sl, vsel, vloc);
  const int64_t na = select_rows(in->audio_indices, Na, row0, Sl, asel, aloc);
  const int64_t nt = select_rows(in->text_indices, Nt, row0, Sl, xsel, xloc);

  sp_ctx X = {.comm = comm, .P = P, .rank = rank, .H = Hh, .hmax = hmax, .S = S, .Sl = Sl, .act = act,
              .es = h3_dtype_size(act), .segs = segs};
  X.timing = h3_settings_get()->sp_timing;
  h3_tensor x, t2, cosT, sinT, idx_ada, idx_t, vloc_t, aloc_t, xsel_t, xloc_t, vidx, aidx;
  h3_tensor vin, ain, tin, vout, aout, stage, vsend, vrecv, vfull, asend, arecv, afull;
  h3_dit_scratch sc;
  h3_status st = H3_OK;
#define T_(call)              \
  do {                        \
    st = (call);              \
    if (st != H3_OK) goto out; \
  } while (0)
  T_(h3_dit_take(m, act, Sl, H, &x));
  T_(h3_dit_take(m, act, Lr, H, &sc.h));
  T_(h3_dit_take(m, act, Lr, H, &sc.y));
  T_(h3_dit_take(m, act, Lr, H, &t2));
  T_(h3_dit_take(m, act, Lr, imax(3 * h3_dit_inner(c), 2 * c->ffn_dim), &sc.wide));
  T_(h3_dit_take(m, act, Lr, imax(h3_dit_inner(c), c->ffn_dim), &sc.mid));
  T_(h3_dit_take(m, H3_DT_F32, h3_dit_stage_elems(c, nv, na, Nt, K), 1, &stage));
  T_(h3_dit_take(m, H3_DT_F32, Sl, R, &cosT));
  T_(h3_dit_take(m, H3_DT_F32, Sl, R, &sinT));
  T_(h3_dit_take_idx(m, Sl, &idx_ada));
  T_(h3_dit_take_idx(m, Sl, &idx_t));
  T_(h3_dit_take_idx(m, nv, &vloc_t));
  T_(h3_dit_take_idx(m, na, &aloc_t));
  T_(h3_dit_take_idx(m, nt, &xsel_t));
  T_(h3_dit_take_idx(m, nt, &xloc_t));
  T_(h3_dit_take_idx(m, Nv, &vidx));
  T_(h3_dit_take_idx(m, Na, &aidx));
  T_(h3_dit_take(m, H3_DT_F32, nv, Pd, &vin));
  T_(h3_dit_take(m, H3_DT_F32, na, A, &ain));
  T_(h3_dit_take(m, H3_DT_F32, Nt, c->text_dim, &tin));
  T_(h3_dit_take(m, H3_DT_F32, nv, Pd, &vout));
  T_(h3_dit_take(m, H3_DT_F32, na, A, &aout));
  T_(h3_dit_take(m, act, P * Sl, hmax * 3 * D, &X.qsend));
  T_(h3_dit_take(m, act, P * Sl, hmax * 3 * D, &X.qrecv));
  T_(h3_dit_take(m, act, P * Sl, hmax * D, &X.ofull));
  T_(h3_dit_take(m, act, P * Sl, hmax * D, &X.orecv));
  T_(h3_dit_take(m, H3_DT_F32, Sl, Pd, &vsend));
  T_(h3_dit_take(m, H3_DT_F32, P * Sl, Pd, &vrecv));
  T_(h3_dit_take(m, H3_DT_F32, Nv, Pd, &vfull));
  T_(h3_dit_take(m, H3_DT_F32, Sl, A, &asend));
  T_(h3_dit_take(m, H3_DT_F32, P * Sl, A, &arecv));
  T_(h3_dit_take(m, H3_DT_F32, Na, A, &afull));
  /* never-written head slots and padding rows travel too: keep them zero */
  T_(OPS->zero(m->be, &X.qsend));
  T_(OPS->zero(m->be, &X.ofull));

  /* uploads */
  T_(upload_rows(m, &vin, in->hidden_states, Pd, vsel, nv));
  T_(upload_rows(m, &ain, in->audio_hidden_states, A, asel, na));
  T_(h3_dit_upload_i32(m, &idx_ada, tsi, Sl, 3, tags)); /* row 3m + tag */
  T_(h3_dit_upload_i32(m, &idx_t, tsi, Sl, 1, NULL));
  T_(h3_dit_upload_i32(m, &vloc_t, vloc, nv, 1, NULL));
  T_(h3_dit_upload_i32(m, &aloc_t, aloc, na, 1, NULL));
  T_(h3_dit_upload_i32(m, &xsel_t, xsel, nt, 1, NULL));
  T_(h3_dit_upload_i32(m, &xloc_t, xloc, nt, 1, NULL));
  T_(h3_dit_upload_i32(m, &vidx, in->video_indices, Nv, 1, NULL));
  T_(h3_dit_upload_i32(m, &aidx, in->audio_indices, Na, 1, NULL));
  {
    float *cb = pos + 3 * Sl;
    h3_dit_rope_tables(w, pos, Sl, cb, cb + Sl * R);
    T_(h3_dit_upload_f32(m, &cosT, cb));
    T_(h3_dit_upload_f32(m, &sinT, cb + Sl * R));
  }

  /* 1. text stream (every rank, all Nt rows; the request cache's when it holds them) -> this shard's text rows */
  h3_tensor tt;
  T_(h3_dit_text_rows(m, in, &tin, &stage, &t2, &sc, &tt));
  T_(OPS->zero(m->be, &x));
  if (nt > 0) {
    h3_tensor sel = rows_of(&sc.h, nt);
    T_(OPS->gather_rows(m->be, &sel, &tt, &xsel_t));
    T_(OPS->scatter_rows(m->be, &x, &xloc_t, &sel));
  }
  /* 2. patch projections of this shard's rows (fp32), cast, scattered */
  if (nv > 0) {
    h3_tensor e32 = h3_tensor_2d(stage.data, H3_DT_F32, nv, H), e = f32_act ? e32 : rows_of(&t2, nv);
    T_(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, video_in), &vin, &w->video_in_w, &w->video_in_b, &e32));
    T_(h3_dit_to_act(m, &e32, &e));
    T_(OPS->scatter_rows(m->be, &x, &vloc_t, &e));
  }
  if (na > 0) {
    h3_tensor e32 = h3_tensor_2d(stage.data, H3_DT_F32, na, H), e = f32_act ? e32 : rows_of(&t2, na);
    T_(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, audio_in), &ain, &w->audio_in_w, &w->audio_in_b, &e32));
    T_(h3_dit_to_act(m, &e32, &e));
    T_(OPS->scatter_rows(m->be, &x, &aloc_t, &e));
  }

  /* 3. time path and AdaLN tables (every rank) */
  h3_tensor u, u_act, tabs[2], ftab;
  T_(h3_dit_time_path(m, in->timestep, K, &u, &u_act));
  T_(h3_dit_take(m, act, K, 18 * H, &tabs[0]));
  T_(h3_dit_take(m, act, K, 18 * H, &tabs[1]));
  T_(h3_dit_take(m, act, K, 2 * H, &ftab));

  /* 4. the block stack on the shard, attention across ranks */
  {
    h3_dit_stack sa = {&x, tabs, &ftab, &idx_ada, &idx_t, &u, &u_act, &stage, &cosT, &sinT, &sc, Sl, K, act,
                       sp_attn_block, &X};
    T_(h3_dit_block_stack(m, &sa));
    sp_tick(m, &X, SPT_REST);
    if (X.timer) { /* the mark started by the last tick measures nothing */
      double ms;
      (void)OPS->timer_stop(m->be, X.timer, &ms);
      X.timer = NULL;
    }
  }
  /* 5b. the fp32 heads on this shard's rows; gathered, rank 0 selects */
  if (Nv > 0) {
    T_(OPS->zero(m->be, &vsend));
    if (nv > 0) {
      h3_tensor g = rows_of(&t2, nv), g32 = h3_tensor_2d(stage.data, H3_DT_F32, nv, H);
      T_(OPS->gather_rows(m->be, &g, &sc.h, &vloc_t));
      if (!f32_act) T_(OPS->copy_convert(m->be, &g, &g32));
      T_(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, video_out), f32_act ? &g : &g32, &w->video_out_w, &w->video_out_b,
                    &vout));
      T_(OPS->scatter_rows(m->be, &vsend, &vloc_t, &vout));
    }
    T_(h3_comm_all_gather(comm, vsend.data, vrecv.data, (size_t)(Sl * Pd) * sizeof(float), h3_backend_stream(m->be)));
    if (rank == 0 && video_out) {
      T_(OPS->gather_rows(m->be, &vfull, &vrecv, &vidx));
      T_(OPS->download(m->be, video_out, vfull.data, h3_tensor_nbytes(&vfull)));
    }
  }
  if (Na > 0) {
    T_(OPS->zero(m->be, &asend));
    if (na > 0) {
      h3_tensor g = rows_of(&t2, na), g32 = h3_tensor_2d(stage.data, H3_DT_F32, na, H);
      T_(OPS->gather_rows(m->be, &g, &sc.h, &aloc_t));
      if (!f32_act) T_(OPS->copy_convert(m->be, &g, &g32));
      T_(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, audio_out), f32_act ? &g : &g32, &w->audio_out_w, &w->audio_out_b,
                    &aout));
      T_(OPS->scatter_rows(m->be, &asend, &aloc_t, &aout));
    }
    T_(h3_comm_all_gather(comm, asend.data, arecv.data, (size_t)(Sl * A) * sizeof(float), h3_backend_stream(m->be)));
    if (rank == 0 && audio_out) {
      T_(OPS->gather_rows(m->be, &afull, &arecv, &aidx));
      T_(OPS->download(m->be, audio_out, afull.data, h3_tensor_nbytes(&afull)));
    }
  }
  T_(OPS->sync(m->be));
  if (X.timing) {
    double tot = 0;
    for (int k = 0; k < SPT_N; k++) tot += X.ms[k];
    for (int k = 0; k < SPT_N; k++)
      H3_LOGI("SP timing rank %d/%d: %-28s %9.1f ms (%4.1f%%)", rank, P, spt_names[k], X.ms[k],
              tot > 0 ? 100 * X.ms[k] / tot : 0.0);
  }
  H3_LOGD("DiT forward (sequence parallel, rank %d of %d): S=%lld, shard %lld rows, %d heads, arena peak %zu bytes",
          rank, P, (long long)S, (long long)Sl, heads_of(Hh, P, rank), m->arena.peak);
#undef T_
out:
  if (X.timer) {
    double ms;
    (void)OPS->timer_stop(m->be, X.timer, &ms);
  }
  free(ibuf);
  free(pos);
  free(segs);
  return st;
}
