/* Minimal test harness: CHECK records failures and keeps going; main returns
 * h3t_finish(min_checks): 1 when a check failed or fewer than min_checks ran,
 * 77 (ctest SKIP_RETURN_CODE) when h3t_skip() was called and nothing failed, else 0. */
#ifndef H3_TESTUTIL_H
#define H3_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int h3t_failures, h3t_checks;

#define CHECK(cond)                                                              \
  do {                                                                           \
    h3t_checks++;                                                                \
    if (!(cond)) {                                                               \
      h3t_failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                            \
  } while (0)

#define CHECK_MSG(cond, ...)                                                     \
  do {                                                                           \
    h3t_checks++;                                                                \
    if (!(cond)) {                                                               \
      h3t_failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
    }                                                                            \
  } while (0)

/* The suite's exit status.  min_checks: the checks this suite runs on every
 * backend (measured on the CPU); a run with fewer (a fixture loop that found
 * nothing, an early return) fails instead of passing with less checked. */
int h3t_finish(int min_checks);
/* Something this suite should check could not run here (the environment, not
 * the code): printed as "SKIP: ...", and the suite exits 77 (reported as
 * skipped by ctest) unless a check failed.  Parts that do not apply to a
 * backend by design are only printed ("n/a: ..."), not skipped. */
void h3t_skip(const char *fmt, ...);
/* Planted defects (tests/cli/planted_defects.sh): true when H3_TEST_PLANT
 * names `name`; the test then corrupts the data under test before its
 * comparison, and must fail.  Read by tests only, never by the library.
 * h3t_finish fails with status 3 when a requested plant was never applied. */
int h3t_planted(const char *name);
/* max(m, d) that keeps a NaN: once NaN, the result stays NaN (a plain
 * `if (d > m) m = d` drops NaN and a later `m <= tol` passes). */
double h3t_max_nan(double m, double d);
/* The backend golden tests run on: H3_TEST_DEVICE (cpu, cuda, cuda:N; default cpu). */
struct h3_backend;
int h3t_backend(struct h3_backend **out);
/* ||a - b|| / ||b|| in double. */
double h3t_rel_l2(const float *a, const float *b, size_t n);
/* The DiT's bf16 check (test_dit_golden, test_dit_sp; tests/cli/stage_dit.sh holds
 * the same figures).  rel-L2 of our bf16 output against the reference's bf16 run
 * (bv video, ba audio) and against its f32 run (fv, fa).  The f32 output itself
 * scores 5.1e-3 .. 7.1e-3 against the bf16 reference, so a bound alone cannot
 * tell a bf16 path from an f32 one: each component must also be at most
 * H3T_DIT_BF16_RATIO of its distance to the f32 reference (the f32 output: 1.6e4 .. 3.7e4
 * times it).  Bounds from the CPU figures measured on every golden case (see
 * docs/RELIABILITY.md), with a little margin. */
#define H3T_DIT_BF16_TOL 5.5e-3
#define H3T_DIT_BF16_RATIO 0.85
void h3t_dit_bf16_check(const char *what, double bv, double ba, double fv, double fa);
/* Golden comparisons shared by the end-to-end tests (fl2va, ref2va) and the
 * quantized-weight tests (quant_load, quant_te).  Every bound is written so
 * that NaN fails (!(d <= tol)). */
/* Decoded frames [F, per] (per = H * W * 3) against a fixture's stored subset:
 * K frames, frame sub_idx[k] stored as sub_px[k * per ..] = round(x * 32767).
 * n: the values compared; over: those with !(|d| <= tol); maxd (NaN kept) and
 * sumd of |d|, sumsq of d^2 and refsq of the stored values squared (for a
 * rel-L2); bad_idx: stored indexes outside [0, F), skipped; nonfinite: NaN
 * or infinite values among all F * per decoded ones. */
typedef struct h3t_frames_cmp {
  int64_t n, over, bad_idx, nonfinite;
  double maxd, sumd, sumsq, refsq;
} h3t_frames_cmp;
h3t_frames_cmp h3t_frames_vs_i16(const float *frames, int64_t F, int64_t per, const int64_t *sub_idx,
                                 const int64_t *sub_px, int64_t K, double tol);
/* rel-L2 of the compared values: sqrt(sumsq / refsq) (NaN kept; INFINITY
 * when nothing was compared or a stored index was out of range). */
double h3t_frames_rel_l2(const h3t_frames_cmp *c);
/* The share of compared values within the bound: 1 - over / n (0 when none). */
double h3t_frames_within(const h3t_frames_cmp *c);
/* One check: values were compared and at least min_frac of them are within 1/255
 * ("case NAME: only P% of frame values within 1/255"). */
void h3t_check_frames_within(const char *name, const h3t_frames_cmp *c, double min_frac);
/* Every frame's per-channel mean over its hw pixels against means[F, 3]: the
 * largest |d| (NaN kept); *worst (when not NULL): its frame, -1 when all match. */
double h3t_channel_means_maxd(const float *frames, int64_t F, int64_t hw, const float *means, int64_t *worst);
/* A run's final video latents (got: ngot values, NULL when absent) against the
 * fixture's (nwant): one check that the counts agree, then the rel-L2 printed
 * ("case NAME: final video latents rel-L2 X") and checked against tol. */
void h3t_check_video_latents(const char *name, const float *got, int64_t ngot, const float *want, int64_t nwant,
                             double tol);
/* A rerun's decoded clip against the first run's: frames (the first run's
 * count of values) and waveform bit for bit, 1 when they are the same. */
struct h3_clip;
int h3t_clip_same_outputs(const struct h3_clip *again, const struct h3_clip *first);
/* Bound BF16 weights got[m] against a dequantization expectation want[m]: adds
 * m to *n, the bit-equal ones to *exact, and to *off those that differ beyond
 * what is allowed: nothing, or with convrot (the reference sums in float32, the
 * expectation in double) one bf16 ulp (adjacent bit patterns of one sign) or,
 * where the sum cancels, amax * 2^-18 (amax: the largest |want|). */
void h3t_bf16_vs_expect(const uint16_t *got, const uint16_t *want, int64_t m, int convrot, int64_t *n,
                        int64_t *exact, int64_t *off);
/* Deterministic uniform [-1, 1) floats. */
void h3t_fill_random(float *x, size_t n, uint64_t seed);
/* A fresh temporary directory under $TMPDIR (default /tmp), h3test.XXXXXX;
 * removed with everything in it when the test exits (H3_KEEP_TMP=1 keeps it
 * and prints its path).  The returned path stays valid until then. */
const char *h3t_tmpdir(void);
/* Environment helpers with defaults. */
const char *h3t_source_dir(void);
/* The release's configs, tensor indexes and tokenizer files, inside the project:
 * <source>/tests/data/minimax-h3-snapshot (see its SOURCE.md). */
const char *h3t_snapshot_dir(void);

/* Golden-fixture helpers.  A JSON file under the source tree
 * ("tests/golden/pipeline/layout.json"), NULL with a message when it cannot be
 * read (json_decref when done); "3f800000..." hex words of `width` digits (8:
 * 32-bit, 16: 64-bit) as their bytes, *out malloc'd, the count returned; the
 * CRC-32 (zlib's) of n bytes. */
struct json_t;
struct json_t *h3t_load_json(const char *relpath);

/* A backend dressed as a device of `total` bytes with `used` in use, for the
 * memory-phasing logic (what is prefetched or dropped when): mem_stats reports
 * those figures; the optional ops prefetch, release_weights and release_weight
 * only count their calls (the weights stay where the backend reads them).
 * Install on a CPU backend, remove before destroying it; one at a time. */
typedef struct h3t_fake_mem {
  size_t total, used;
  int prefetches, releases_all, releases_one;
} h3t_fake_mem;
void h3t_fake_mem_install(struct h3_backend *be, h3t_fake_mem *state);
void h3t_fake_mem_remove(struct h3_backend *be);
size_t h3t_hex_words(const char *s, int width, void **out);
uint32_t h3t_crc32(const void *data, size_t n);

#endif
