/* Packed layout of one request; see layout.h.  All position arithmetic is
 * float64 with one rounding per reference operation, each written as its own
 * statement (no FMA contraction). */
#include "pipeline/fp_strict.h"
#include "pipeline/layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/scheduler.h"

#define ROPE_FRAME_RESCALE (5.0 / 3.0)
#define ROPE_SPATIAL_SCALE 32.0
static const int kFramesPerLatent[5] = {1, 4, 4, 4, 4};

/* ---- numpy pairwise summation ------------------------------------------- */

/* numpy/_core/src/umath/loops_utils.h.src, DOUBLE_pairwise_sum, unit stride. */
#define PW_BLOCKSIZE 128
static double pairwise_sum(const double *a, int64_t n) {
  if (n < 8) {
    double res = 0.0;
    for (int64_t i = 0; i < n; i++)
      res += a[i];
    return res;
  }
  if (n <= PW_BLOCKSIZE) {
    double r[8];
    for (int k = 0; k < 8; k++)
      r[k] = a[k];
    int64_t i;
    for (i = 8; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; k++)
        r[k] += a[i + k];
    double s01 = r[0] + r[1];
    double s23 = r[2] + r[3];
    double s45 = r[4] + r[5];
    double s67 = r[6] + r[7];
    double s03 = s01 + s23;
    double s47 = s45 + s67;
    double res = s03 + s47;
    for (; i < n; i++)
      res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  double lo = pairwise_sum(a, n2);
  double hi = pairwise_sum(a + n2, n - n2);
  return lo + hi;
}

double h3_numpy_sum_f64(const double *a, int64_t n) {
  /* add.reduce starts from the identity 0.0 and hands the whole contiguous
   * run to the pairwise loop. */
  double acc = 0.0;
  double s = pairwise_sum(a, n);
  acc += s;
  return acc;
}

/* CPython >= 3.12 builtin sum() of floats from the default start 0: the
 * first item is 0 + a[0] (exact), the rest are added with Neumaier's
 * compensated summation, and the compensation is added once at the end
 * (Python/bltinmodule.c, builtin_sum_impl).  Python <= 3.11 summed plainly. */
double h3_python_sum_f64(const double *a, int64_t n) {
  if (n <= 0)
    return 0.0; /* sum([]) is the int 0 */
  double f = 0.0 + a[0];
  double c = 0.0;
  for (int64_t i = 1; i < n; i++) {
    double x = a[i];
    double t = f + x;
    if (fabs(f) >= fabs(x)) {
      double d = f - t;
      c += d + x;
    } else {
      double d = x - t;
      c += d + f;
    }
    f = t;
  }
  if (c != 0.0 && isfinite(c))
    f += c;
  return f;
}

/* ---- grids --------------------------------------------------------------- */

double h3_frame_span(int64_t k) { return ROPE_FRAME_RESCALE * (double)kFramesPerLatent[k % 5]; }

void h3_temporal_grid(int64_t T, double origin, double *out) {
  /* origin + cat([0], spans[:-1].cumsum()) ; torch's CPU cumsum is sequential. */
  double cum = 0.0;
  for (int64_t k = 0; k < T; k++) {
    out[k] = origin + cum;
    double span = h3_frame_span(k);
    cum = cum + span;
  }
}

h3_status h3_spatial_axis(int64_t dim, double sqrt_area, double *out) {
  if (dim < 2)
    return h3_fail(H3_ERR_INVALID, "spatial axis: latent dimension %lld is smaller than the patch", (long long)dim);
  int64_t n = dim / H3_PATCH;
  double ratio = (double)dim / sqrt_area;
  double left = (1.0 - ratio) / 2.0;
  double stop = left + ratio;
  /* np.linspace(left, stop, n, endpoint=False): delta = stop - start,
   * step = delta / n, y = arange(n) * step + start. */
  double delta = stop - left;
  double step = delta / (double)n;
  for (int64_t k = 0; k < n; k++) {
    double y = (double)k * step;
    y = y + left;
    out[k] = y * ROPE_SPATIAL_SCALE;
  }
  return H3_OK;
}

/* Frame grid of a latent lh x lw: rows (h', w') row-major -> (h, w). */
typedef struct frame_grid {
  int64_t nh, nw;
  double *h, *w;
} frame_grid;

static void frame_grid_free(frame_grid *g) {
  free(g->h);
  free(g->w);
  g->h = g->w = NULL;
}

static h3_status frame_grid_make(int64_t lh, int64_t lw, frame_grid *g) {
  memset(g, 0, sizeof *g);
  if (lh < 2 || lw < 2 || lh % 2 || lw % 2)
    return h3_fail(H3_ERR_INVALID, "layout: latent size %lldx%lld must be even and at least 2x2", (long long)lh,
                   (long long)lw);
  g->nh = lh / H3_PATCH;
  g->nw = lw / H3_PATCH;
  g->h = malloc((size_t)g->nh * sizeof(double));
  g->w = malloc((size_t)g->nw * sizeof(double));
  if (!g->h || !g->w) {
    frame_grid_free(g);
    return h3_fail(H3_ERR_NOMEM, "layout: out of memory");
  }
  double sqrt_area = sqrt((double)(lh * lw));
  h3_spatial_axis(lh, sqrt_area, g->h);
  h3_spatial_axis(lw, sqrt_area, g->w);
  return H3_OK;
}

/* ---- builders ------------------------------------------------------------ */

void h3_layout_free(h3_layout *l) {
  if (!l)
    return;
  free(l->position_ids_f64);
  free(l->position_ids);
  free(l->token_tags);
  free(l->video_indices);
  free(l->audio_indices);
  free(l->text_indices);
  free(l->row_class);
  memset(l, 0, sizeof *l);
}

static h3_status layout_alloc(h3_layout *l, int64_t S, int64_t nv, int64_t na, int64_t L) {
  size_t s = (size_t)(S > 0 ? S : 1);
  l->seq_len = S;
  l->num_text = L;
  l->num_video_rows = nv;
  l->num_audio_rows = na;
  l->position_ids_f64 = calloc(s * 3, sizeof(double));
  l->position_ids = calloc(s * 3, sizeof(float));
  l->token_tags = calloc(s, sizeof(int64_t));
  l->video_indices = calloc((size_t)(nv > 0 ? nv : 1), sizeof(int64_t));
  l->audio_indices = calloc((size_t)(na > 0 ? na : 1), sizeof(int64_t));
  l->text_indices = calloc((size_t)(L > 0 ? L : 1), sizeof(int64_t));
  l->row_class = calloc(s, 1);
  if (!l->position_ids_f64 || !l->position_ids || !l->token_tags || !l->video_indices || !l->audio_indices ||
      !l->text_indices || !l->row_class) {
    h3_layout_free(l);
    return h3_fail(H3_ERR_NOMEM, "layout: out of memory for %lld rows", (long long)S);
  }
  return H3_OK;
}

static h3_status put_text(h3_layout *l, const int64_t *tags, int64_t L) {
  for (int64_t i = 0; i < L; i++) {
    int64_t tag = tags[i];
    if (tag != H3_TAG_VIDEO && tag != H3_TAG_TEXT)
      return h3_fail(H3_ERR_INVALID, "layout: text token tag %lld at row %lld is neither 0 (vision) nor 1 (text)",
                     (long long)tag, (long long)i);
    double *p = l->position_ids_f64 + 3 * i;
    p[0] = (double)i;
    p[1] = 0.0;
    p[2] = 0.0;
    l->token_tags[i] = tag;
    l->text_indices[i] = i;
    l->row_class[i] = H3_ROW_T_VIDEO;
  }
  return H3_OK;
}

/* Rows [row0, row0 + nframes*rows_per_frame) at the given frame times. */
static void put_video_frames(h3_layout *l, int64_t row0, const double *times, int64_t nframes, const frame_grid *g,
                             uint8_t cls) {
  int64_t r = row0;
  for (int64_t f = 0; f < nframes; f++)
    for (int64_t a = 0; a < g->nh; a++)
      for (int64_t b = 0; b < g->nw; b++, r++) {
        double *p = l->position_ids_f64 + 3 * r;
        p[0] = times[f];
        p[1] = g->h[a];
        p[2] = g->w[b];
        l->token_tags[r] = H3_TAG_VIDEO;
        l->row_class[r] = cls;
      }
}

/* One channel-major audio block of A latents per channel from rotary time t0,
 * pinned to the extremes of the width axis `w` (n entries). */
static void put_audio(h3_layout *l, int64_t row0, int64_t A, double t0, const double *w, int64_t nw, uint8_t cls) {
  for (int64_t ch = 0; ch < H3_AUDIO_CHANNELS; ch++)
    for (int64_t j = 0; j < A; j++) {
      int64_t r = row0 + ch * A + j;
      double *p = l->position_ids_f64 + 3 * r;
      p[0] = t0 + (double)j;
      p[1] = 0.0;
      p[2] = ch == 0 ? w[0] : w[nw - 1];
      l->token_tags[r] = H3_TAG_AUDIO;
      l->row_class[r] = cls;
    }
}

static void finish_positions(h3_layout *l) {
  int64_t n = l->seq_len * 3;
  for (int64_t i = 0; i < n; i++)
    l->position_ids[i] = (float)l->position_ids_f64[i];
}

/* The geometry fields every builder sets last, then the f32 positions. */
static void finish_layout(h3_layout *l, int64_t cond_video_rows, int64_t cond_audio_rows, int64_t T, int64_t lh,
                          int64_t lw, int64_t A, int64_t audio_start, int64_t video_start, double origin) {
  l->num_cond_video_rows = cond_video_rows;
  l->num_cond_audio_rows = cond_audio_rows;
  l->latent_frames = T;
  l->latent_height = lh;
  l->latent_width = lw;
  l->audio_latents = A;
  l->audio_start = audio_start;
  l->video_start = video_start;
  l->target_origin = origin;
  finish_positions(l);
}

static h3_status check_common(const int64_t *tags, int64_t L, int64_t T, int64_t A) {
  if (L < 0 || T < 1 || A < 0)
    return h3_fail(H3_ERR_INVALID, "layout: bad sizes (text %lld, latent frames %lld, audio latents %lld)",
                   (long long)L, (long long)T, (long long)A);
  if (L > 0 && tags == NULL)
    return h3_fail(H3_ERR_INVALID, "layout: %lld text rows but no text tags", (long long)L);
  return H3_OK;
}

h3_status h3_layout_build_t2va(h3_layout *out, const int64_t *text_tags, int64_t L, int64_t T, int64_t lh,
                               int64_t lw, int64_t A, const h3_keyframe_anchor *anchors, int n_anchors) {
  memset(out, 0, sizeof *out);
  H3_TRY(check_common(text_tags, L, T, A));
  if (n_anchors < 0 || n_anchors > 2 || (n_anchors > 0 && anchors == NULL))
    return h3_fail(H3_ERR_INVALID, "layout: %d keyframe anchors (0 to 2 allowed)", n_anchors);
  frame_grid g;
  H3_TRY(frame_grid_make(lh, lw, &g));
  int64_t rpf = g.nh * g.nw;
  int64_t ncond = (int64_t)n_anchors * rpf;
  int64_t naudio = A * H3_AUDIO_CHANNELS;
  int64_t nvid = T * rpf;
  int64_t S = L + ncond + naudio + nvid;
  h3_status st = layout_alloc(out, S, ncond + nvid, naudio, L);
  double *times = NULL;
  double *spans = NULL;
  if (st != H3_OK)
    goto done;
  st = put_text(out, text_tags, L);
  if (st != H3_OK)
    goto done;
  times = malloc((size_t)T * sizeof *times);
  spans = malloc((size_t)T * sizeof *spans);
  if (!times || !spans) {
    st = h3_fail(H3_ERR_NOMEM, "layout: out of memory");
    goto done;
  }
  const int64_t cond_start = L;
  const int64_t audio_start = cond_start + ncond;
  const int64_t video_start = audio_start + naudio;
  const double origin = (double)L;

  for (int i = 0; i < n_anchors; i++) {
    double anchor_time;
    if (anchors[i] == H3_ANCHOR_FIRST) {
      anchor_time = origin;
    } else if (anchors[i] == H3_ANCHOR_LAST) {
      /* float(L) + float(np.sum(spans)) - 5/3, numpy pairwise summation. */
      for (int64_t k = 0; k < T; k++)
        spans[k] = h3_frame_span(k);
      double total = h3_numpy_sum_f64(spans, T);
      double t = origin + total;
      anchor_time = t - ROPE_FRAME_RESCALE;
    } else {
      st = h3_fail(H3_ERR_INVALID, "A keyframe anchor must be 'first' or 'last', got %d.", (int)anchors[i]);
      goto done;
    }
    put_video_frames(out, cond_start + (int64_t)i * rpf, &anchor_time, 1, &g, H3_ROW_COND_VIDEO);
  }
  put_audio(out, audio_start, A, origin, g.w, g.nw, H3_ROW_T_AUDIO);
  h3_temporal_grid(T, origin, times);
  put_video_frames(out, video_start, times, T, &g, H3_ROW_T_VIDEO);

  int64_t v = 0;
  for (int64_t r = cond_start; r < audio_start; r++)
    out->video_indices[v++] = r;
  for (int64_t r = video_start; r < S; r++)
    out->video_indices[v++] = r;
  for (int64_t r = audio_start; r < video_start; r++)
    out->audio_indices[r - audio_start] = r;

  finish_layout(out, ncond, 0, T, lh, lw, A, audio_start, video_start, origin);
done:
  free(times);
  free(spans);
  frame_grid_free(&g);
  if (st != H3_OK)
    h3_layout_free(out);
  return st;
}

h3_status h3_layout_build_ref2va(h3_layout *out, const int64_t *text_tags, int64_t L, const h3_layout_ref *refs,
                                 int64_t num_refs, int64_t T, int64_t lh, int64_t lw, int64_t A) {
  memset(out, 0, sizeof *out);
  H3_TRY(check_common(text_tags, L, T, A));
  if (num_refs < 0 || (num_refs > 0 && refs == NULL))
    return h3_fail(H3_ERR_INVALID, "layout: bad reference list");

  /* Sizes first. */
  int64_t ref_video_rows = 0, ref_audio_rows = 0, max_frames = T;
  for (int64_t i = 0; i < num_refs; i++) {
    const h3_layout_ref *r = &refs[i];
    if (r->kind == H3_REF_IMAGE || r->kind == H3_REF_VIDEO) {
      if (r->latent_height < 2 || r->latent_width < 2 || r->latent_height % 2 || r->latent_width % 2 ||
          r->latent_frames < 1)
        return h3_fail(H3_ERR_INVALID, "layout: reference %lld has latent geometry %lldx%lldx%lld", (long long)i,
                       (long long)r->latent_frames, (long long)r->latent_height, (long long)r->latent_width);
      if (r->kind == H3_REF_IMAGE && r->latent_frames != 1)
        return h3_fail(H3_ERR_INVALID, "layout: image reference %lld has %lld latent frames (must be 1)",
                       (long long)i, (long long)r->latent_frames);
      ref_video_rows += r->latent_frames * (r->latent_height / 2) * (r->latent_width / 2);
      if (r->latent_frames > max_frames)
        max_frames = r->latent_frames;
    } else if (r->kind != H3_REF_AUDIO) {
      return h3_fail(H3_ERR_INVALID, "A reference must be an 'image', a 'video' or an 'audio', got %d.",
                     (int)r->kind);
    }
    if (r->kind == H3_REF_AUDIO && r->audio_latents < 1)
      return h3_fail(H3_ERR_INVALID, "layout: audio reference %lld has no latents", (long long)i);
    if (r->kind != H3_REF_IMAGE) {
      if (r->audio_latents < 0)
        return h3_fail(H3_ERR_INVALID, "layout: reference %lld has a negative audio length", (long long)i);
      ref_audio_rows += r->audio_latents * H3_AUDIO_CHANNELS;
    }
  }
  frame_grid tg;
  H3_TRY(frame_grid_make(lh, lw, &tg));
  int64_t rpf = tg.nh * tg.nw;
  int64_t naudio = A * H3_AUDIO_CHANNELS;
  int64_t nvid = T * rpf;
  int64_t S = L + ref_video_rows + ref_audio_rows + naudio + nvid;
  double *times = NULL, *spans = NULL;
  h3_status st = layout_alloc(out, S, ref_video_rows + nvid, ref_audio_rows + naudio, L);
  if (st != H3_OK)
    goto done;
  st = put_text(out, text_tags, L);
  if (st != H3_OK)
    goto done;
  times = malloc((size_t)max_frames * sizeof *times);
  spans = malloc((size_t)max_frames * sizeof *spans);
  if (!times || !spans) {
    st = h3_fail(H3_ERR_NOMEM, "layout: out of memory");
    goto done;
  }

  int64_t cursor = L, nv = 0, na = 0;
  double rotary_time = (double)L;
  for (int64_t i = 0; i < num_refs && st == H3_OK; i++) {
    const h3_layout_ref *r = &refs[i];
    if (r->kind == H3_REF_IMAGE) {
      frame_grid g;
      st = frame_grid_make(r->latent_height, r->latent_width, &g);
      if (st != H3_OK)
        break;
      int64_t rows = g.nh * g.nw;
      put_video_frames(out, cursor, &rotary_time, 1, &g, H3_ROW_COND_VIDEO);
      for (int64_t k = 0; k < rows; k++)
        out->video_indices[nv++] = cursor + k;
      cursor += rows;
      frame_grid_free(&g);
      rotary_time = rotary_time + 1.0;
    } else if (r->kind == H3_REF_AUDIO) {
      int64_t rows = r->audio_latents * H3_AUDIO_CHANNELS;
      put_audio(out, cursor, r->audio_latents, rotary_time, tg.w, tg.nw, H3_ROW_COND_AUDIO);
      for (int64_t k = 0; k < rows; k++)
        out->audio_indices[na++] = cursor + k;
      cursor += rows;
      rotary_time = rotary_time + (double)r->audio_latents;
    } else {
      frame_grid g;
      st = frame_grid_make(r->latent_height, r->latent_width, &g);
      if (st != H3_OK)
        break;
      int64_t arows = r->audio_latents * H3_AUDIO_CHANNELS;
      int64_t vrows = r->latent_frames * g.nh * g.nw;
      put_audio(out, cursor, r->audio_latents, rotary_time, g.w, g.nw, H3_ROW_COND_AUDIO);
      for (int64_t k = 0; k < arows; k++)
        out->audio_indices[na++] = cursor + k;
      cursor += arows;
      h3_temporal_grid(r->latent_frames, rotary_time, times);
      put_video_frames(out, cursor, times, r->latent_frames, &g, H3_ROW_COND_VIDEO);
      for (int64_t k = 0; k < vrows; k++)
        out->video_indices[nv++] = cursor + k;
      cursor += vrows;
      frame_grid_free(&g);
      /* Python's builtin sum() of the spans (CPython >= 3.12: compensated). */
      for (int64_t k = 0; k < r->latent_frames; k++)
        spans[k] = h3_frame_span(k);
      double video_span = h3_python_sum_f64(spans, r->latent_frames);
      double audio_span = (double)r->audio_latents;
      double advance = video_span > audio_span ? video_span : audio_span;
      rotary_time = rotary_time + advance;
    }
  }
  if (st != H3_OK)
    goto done;

  const int64_t audio_start = cursor;
  const int64_t video_start = audio_start + naudio;
  put_audio(out, audio_start, A, rotary_time, tg.w, tg.nw, H3_ROW_T_AUDIO);
  for (int64_t k = 0; k < naudio; k++)
    out->audio_indices[na++] = audio_start + k;
  h3_temporal_grid(T, rotary_time, times);
  put_video_frames(out, video_start, times, T, &tg, H3_ROW_T_VIDEO);
  for (int64_t k = 0; k < nvid; k++)
    out->video_indices[nv++] = video_start + k;

  finish_layout(out, ref_video_rows, ref_audio_rows, T, lh, lw, A, audio_start, video_start, rotary_time);
done:
  free(times);
  free(spans);
  frame_grid_free(&tg);
  if (st != H3_OK)
    h3_layout_free(out);
  return st;
}

/* ---- per-step timesteps --------------------------------------------------- */

h3_status h3_layout_step_timesteps(const h3_layout *l, float t_video, float t_audio, float timestep[4],
                                   int64_t *num_timesteps, int64_t *timestep_indices) {
  float value[4];
  value[H3_ROW_T_VIDEO] = t_video;
  value[H3_ROW_T_AUDIO] = t_audio;
  value[H3_ROW_COND_VIDEO] = h3_condition_video_t(t_video);
  value[H3_ROW_COND_AUDIO] = H3_CONDITION_AUDIO_T;
  for (int c = 0; c < 4; c++)
    if (isnan(value[c]))
      return h3_fail(H3_ERR_INVALID, "layout: NaN timestep");
  int present[4] = {0, 0, 0, 0};
  for (int64_t r = 0; r < l->seq_len; r++)
    present[l->row_class[r]] = 1;
  /* distinct values of the present classes, ascending */
  int64_t k = 0;
  for (int c = 0; c < 4; c++) {
    if (!present[c])
      continue;
    int dup = 0;
    for (int64_t j = 0; j < k; j++)
      if (timestep[j] == value[c])
        dup = 1;
    if (!dup)
      timestep[k++] = value[c];
  }
  for (int64_t i = 1; i < k; i++) /* insertion sort, k <= 4 */
    for (int64_t j = i; j > 0 && timestep[j - 1] > timestep[j]; j--) {
      float tmp = timestep[j];
      timestep[j] = timestep[j - 1];
      timestep[j - 1] = tmp;
    }
  int64_t map[4] = {0, 0, 0, 0};
  for (int c = 0; c < 4; c++)
    for (int64_t j = 0; j < k; j++)
      if (timestep[j] == value[c])
        map[c] = j;
  for (int64_t r = 0; r < l->seq_len; r++)
    timestep_indices[r] = map[l->row_class[r]];
  *num_timesteps = k;
  return H3_OK;
}

/* ---- patchify / audio packing -------------------------------------------- */

h3_status h3_patchify_video(const float *lat, int64_t C, int64_t T, int64_t H, int64_t W, float *rows) {
  if (H % 2 || W % 2 || C < 1 || T < 0)
    return h3_fail(H3_ERR_SHAPE, "patchify: latents [%lld, %lld, %lld, %lld] are not divisible by the (1, 2, 2) patch",
                   (long long)C, (long long)T, (long long)H, (long long)W);
  const int64_t H2 = H / 2, W2 = W / 2, F = C * 4;
  for (int64_t t = 0; t < T; t++)
    for (int64_t a = 0; a < H2; a++)
      for (int64_t b = 0; b < W2; b++) {
        float *row = rows + ((t * H2 + a) * W2 + b) * F;
        for (int64_t c = 0; c < C; c++) {
          const float *src = lat + ((c * T + t) * H + 2 * a) * W + 2 * b;
          row[c * 4 + 0] = src[0];
          row[c * 4 + 1] = src[1];
          row[c * 4 + 2] = src[W];
          row[c * 4 + 3] = src[W + 1];
        }
      }
  return H3_OK;
}

h3_status h3_unpatchify_video(const float *rows, int64_t C, int64_t T, int64_t H, int64_t W, float *lat) {
  if (H % 2 || W % 2 || C < 1 || T < 0)
    return h3_fail(H3_ERR_SHAPE, "unpatchify: latents [%lld, %lld, %lld, %lld] are not divisible by the (1, 2, 2) "
                                 "patch",
                   (long long)C, (long long)T, (long long)H, (long long)W);
  const int64_t H2 = H / 2, W2 = W / 2, F = C * 4;
  for (int64_t t = 0; t < T; t++)
    for (int64_t a = 0; a < H2; a++)
      for (int64_t b = 0; b < W2; b++) {
        const float *row = rows + ((t * H2 + a) * W2 + b) * F;
        for (int64_t c = 0; c < C; c++) {
          float *dst = lat + ((c * T + t) * H + 2 * a) * W + 2 * b;
          dst[0] = row[c * 4 + 0];
          dst[1] = row[c * 4 + 1];
          dst[W] = row[c * 4 + 2];
          dst[W + 1] = row[c * 4 + 3];
        }
      }
  return H3_OK;
}

void h3_pack_audio(const float *lat, int64_t C, int64_t A, float *rows) {
  for (int64_t ch = 0; ch < H3_AUDIO_CHANNELS; ch++)
    for (int64_t a = 0; a < A; a++)
      for (int64_t c = 0; c < C; c++)
        rows[(ch * A + a) * C + c] = lat[(ch * C + c) * A + a];
}

void h3_unpack_audio(const float *rows, int64_t C, int64_t A, float *lat) {
  for (int64_t ch = 0; ch < H3_AUDIO_CHANNELS; ch++)
    for (int64_t a = 0; a < A; a++)
      for (int64_t c = 0; c < C; c++)
        lat[(ch * C + c) * A + a] = rows[(ch * A + a) * C + c];
}
