/* Media output: MP4 (H.264 + AAC, probed and decoded back with libavformat /
 * libavcodec here), PNG frames (decoded back, lossless), float WAV (header and
 * samples), the float -> uint8 rule, atomic output and failure cleanup. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>

#include "media/media.h"
#include "media/mp4_writer.h"
#include "media/png_frames.h"
#include "media/wav_writer.h"
#include "testutil.h"

#define MIN_CHECKS 125 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

#define NF 22
#define FH 256
#define FW 256
#define RATE 32000
#define NS_MATCH 29333 /* round(22 * 32000 / 24) */

static int has(const char *needle) { return strstr(h3_last_error(), needle) != NULL; }

static bool file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

/* Number of directory entries other than . and .. */
static int count_entries(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (!prefix || strncmp(e->d_name, prefix, strlen(prefix)) == 0))
      n++;
  closedir(d);
  return n;
}

/* Moving colour gradients, saturated corners included, float (F, H, W, 3). */
static float *make_frames(void) {
  float *v = malloc(sizeof(float) * NF * FH * FW * 3);
  for (int f = 0; f < NF; f++)
    for (int y = 0; y < FH; y++)
      for (int x = 0; x < FW; x++) {
        float *p = v + (((size_t)f * FH + y) * FW + x) * 3;
        float u = (float)((x + 6 * f) % FW) / (FW - 1), w = (float)y / (FH - 1);
        p[0] = u;
        p[1] = w;
        p[2] = 0.5f + 0.5f * sinf(6.2831853f * (u + w) * 0.5f + 0.3f * (float)f);
        if (x < 32 && y < 32) { /* a saturated block: sensitive to the YUV matrix */
          p[0] = 1.0f;
          p[1] = 0.0f;
          p[2] = (f & 1) ? 1.0f : 0.0f;
        }
      }
  return v;
}

/* Stereo sines (440 Hz left, 660 Hz right), planar (2, n). */
static float *make_audio(int64_t n, int rate) {
  float *a = malloc(sizeof(float) * 2 * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    double t = (double)i / rate;
    a[i] = (float)(0.5 * sin(2 * M_PI * 440.0 * t));
    a[n + i] = (float)(0.4 * sin(2 * M_PI * 660.0 * t));
  }
  return a;
}

/* ---- decoding back with libavformat / libavcodec ---- */

typedef struct probe {
  int nb_streams;
  /* video */
  int v_codec, v_w, v_h, v_pix, v_colorspace;
  AVRational v_avg_fps, v_r_fps;
  int64_t v_nb_frames_hdr; /* stream nb_frames */
  int v_packets, v_decoded;
  int v_pts_ok;            /* decoded frame i has pts i/24 s */
  double v_mae_first, v_mae_last;
  double v_dur;
  /* audio */
  int a_codec, a_rate, a_channels, a_profile;
  int64_t a_decoded; /* samples per channel */
  double a_dur;
  int64_t a_dur_ts; /* stream duration in 1/32000 s (the edit list's exact length) */
  double fmt_dur;   /* container duration, s */
  double a_rel_err; /* ||dec - ref|| / ||ref|| over [2048, n - 2048) when ref given */
  char title[256], prompt[256], seed[64];
} probe;

static double yuv_frame_mae(const AVFrame *fr, const uint8_t *rgb) {
  double sum = 0;
  for (int y = 0; y < fr->height; y++)
    for (int x = 0; x < fr->width; x++) {
      double Y = (fr->data[0][y * fr->linesize[0] + x] - 16.0) / 219.0;
      double Cb = (fr->data[1][(y / 2) * fr->linesize[1] + x / 2] - 128.0) / 224.0;
      double Cr = (fr->data[2][(y / 2) * fr->linesize[2] + x / 2] - 128.0) / 224.0;
      double rgbd[3] = {Y + 1.5748 * Cr, Y - 0.187324 * Cb - 0.468124 * Cr, Y + 1.8556 * Cb}; /* BT.709 */
      for (int c = 0; c < 3; c++) {
        double v = rgbd[c] * 255.0;
        v = v < 0 ? 0 : (v > 255 ? 255 : v);
        sum += fabs(v - rgb[((size_t)y * fr->width + x) * 3 + c]);
      }
    }
  return sum / ((double)fr->width * fr->height * 3);
}

static void copy_tag(AVDictionary *m, const char *k, char *dst, size_t cap) {
  AVDictionaryEntry *e = av_dict_get(m, k, NULL, 0);
  snprintf(dst, cap, "%s", e ? e->value : "");
}

/* Probe and decode `path`.  rgb_first/rgb_last: expected RGB24 of frames 0 and
 * NF-1 (may be NULL); ref_audio: planar (2, ref_n) expected audio (may be NULL). */
static bool probe_file(const char *path, probe *p, const uint8_t *rgb_first, const uint8_t *rgb_last,
                       const float *ref_audio, int64_t ref_n) {
  memset(p, 0, sizeof *p);
  p->v_mae_first = p->v_mae_last = 1e9;
  p->a_rel_err = 1e9;
  AVFormatContext *ic = NULL;
  if (avformat_open_input(&ic, path, NULL, NULL) < 0) return false;
  if (avformat_find_stream_info(ic, NULL) < 0) {
    avformat_close_input(&ic);
    return false;
  }
  p->nb_streams = (int)ic->nb_streams;
  p->fmt_dur = ic->duration / (double)AV_TIME_BASE;
  copy_tag(ic->metadata, "title", p->title, sizeof p->title);
  copy_tag(ic->metadata, "prompt", p->prompt, sizeof p->prompt);
  copy_tag(ic->metadata, "seed", p->seed, sizeof p->seed);
  int vi = av_find_best_stream(ic, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
  int ai = av_find_best_stream(ic, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0);
  AVCodecContext *vd = NULL, *ad = NULL;
  if (vi >= 0) {
    AVStream *s = ic->streams[vi];
    p->v_codec = s->codecpar->codec_id;
    p->v_w = s->codecpar->width;
    p->v_h = s->codecpar->height;
    p->v_pix = s->codecpar->format;
    p->v_colorspace = s->codecpar->color_space;
    p->v_avg_fps = s->avg_frame_rate;
    p->v_r_fps = s->r_frame_rate;
    p->v_nb_frames_hdr = s->nb_frames;
    p->v_dur = s->duration * av_q2d(s->time_base);
    vd = avcodec_alloc_context3(avcodec_find_decoder(s->codecpar->codec_id));
    avcodec_parameters_to_context(vd, s->codecpar);
    vd->pkt_timebase = s->time_base;
    avcodec_open2(vd, NULL, NULL);
  }
  if (ai >= 0) {
    AVStream *s = ic->streams[ai];
    p->a_codec = s->codecpar->codec_id;
    p->a_rate = s->codecpar->sample_rate;
    p->a_channels = s->codecpar->ch_layout.nb_channels;
    p->a_profile = s->codecpar->profile;
    p->a_dur = s->duration * av_q2d(s->time_base);
    p->a_dur_ts = av_rescale_q(s->duration, s->time_base, (AVRational){1, RATE});
    ad = avcodec_alloc_context3(avcodec_find_decoder(s->codecpar->codec_id));
    avcodec_parameters_to_context(ad, s->codecpar);
    ad->pkt_timebase = s->time_base;
    avcodec_open2(ad, NULL, NULL);
  }
  float *dec = ref_audio ? calloc(2 * (size_t)(ref_n + 8192), sizeof(float)) : NULL;
  AVPacket *pkt = av_packet_alloc();
  AVFrame *fr = av_frame_alloc();
  p->v_pts_ok = 1;
  for (int pass = 0; pass < 2; pass++) {
    /* pass 0: packets; pass 1: flush */
    for (;;) {
      int stream = -1;
      if (pass == 0) {
        if (av_read_frame(ic, pkt) < 0) break;
        stream = pkt->stream_index;
      }
      for (int which = 0; which < 2; which++) {
        AVCodecContext *c = which == 0 ? vd : ad;
        int idx = which == 0 ? vi : ai;
        if (!c || (pass == 0 && stream != idx)) continue;
        if (which == 0 && pass == 0) p->v_packets++;
        avcodec_send_packet(c, pass == 0 ? pkt : NULL);
        while (avcodec_receive_frame(c, fr) >= 0) {
          if (which == 0) {
            int i = p->v_decoded++;
            int64_t ts = av_rescale_q(fr->best_effort_timestamp, ic->streams[vi]->time_base, (AVRational){1, 24});
            if (ts != i) p->v_pts_ok = 0;
            if (i == 0 && rgb_first) p->v_mae_first = yuv_frame_mae(fr, rgb_first);
            if (i == NF - 1 && rgb_last) p->v_mae_last = yuv_frame_mae(fr, rgb_last);
          } else {
            if (dec && fr->format == AV_SAMPLE_FMT_FLTP)
              for (int k = 0; k < fr->nb_samples; k++)
                if (p->a_decoded + k < ref_n + 8192) {
                  dec[p->a_decoded + k] = ((const float *)fr->data[0])[k];
                  dec[ref_n + 8192 + p->a_decoded + k] = ((const float *)fr->data[1])[k];
                }
            p->a_decoded += fr->nb_samples;
          }
          av_frame_unref(fr);
        }
      }
      if (pass == 0)
        av_packet_unref(pkt);
      else
        break;
    }
  }
  if (dec && ref_n > 4096) {
    double num = 0, den = 0;
    for (int c = 0; c < 2; c++)
      for (int64_t i = 2048; i < ref_n - 2048; i++) {
        double r = ref_audio[c * ref_n + i], d = dec[c * (ref_n + 8192) + i];
        num += (d - r) * (d - r);
        den += r * r;
      }
    p->a_rel_err = sqrt(num / den);
  }
  free(dec);
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&vd);
  avcodec_free_context(&ad);
  avformat_close_input(&ic);
  return true;
}

/* ---- tests ---- */

static void test_pixel_rule(void) {
  CHECK(h3_pixel_to_u8(0.0f) == 0);
  CHECK(h3_pixel_to_u8(1.0f) == 255);
  CHECK(h3_pixel_to_u8(-0.25f) == 0);
  CHECK(h3_pixel_to_u8(1.5f) == 255);
  CHECK(h3_pixel_to_u8(NAN) == 0);
  CHECK(h3_pixel_to_u8(0.999f) == 255); /* 254.745 rounds up (not truncated) */
  CHECK(h3_pixel_to_u8(0.5f) == 128);   /* 127.5 exactly: half to even -> 128 */
  /* Exact ties k + 0.5 in float32 must go to the even neighbour (numpy round). */
  int ties = 0, ok = 0;
  for (int k = 0; k < 255; k++) {
    float x = ((float)k + 0.5f) / 255.0f;
    float y = x * 255.0f;
    if (y != (float)k + 0.5f) continue;
    ties++;
    int even = (k % 2 == 0) ? k : k + 1;
    ok += h3_pixel_to_u8(x) == even;
  }
  CHECK_MSG(ties > 10 && ok == ties, "ties %d, correct %d", ties, ok);
  /* Non-ties: nearest integer of the float32 product. */
  int bad = 0;
  for (int i = 0; i <= 10000; i++) {
    float x = (float)i / 10000.0f;
    float y = x * 255.0f;
    double fl = floor((double)y), fr = (double)y - fl;
    int want = fr < 0.5 ? (int)fl : (fr > 0.5 ? (int)fl + 1 : (((int)fl % 2 == 0) ? (int)fl : (int)fl + 1));
    bad += h3_pixel_to_u8(x) != want;
  }
  CHECK_MSG(bad == 0, "%d values rounded differently from round-half-even of x*255f", bad);
}

static void test_layouts(const float *fhwc) {
  /* The same frames in (F,H,W,3), (F,3,H,W), (3,F,H,W) and uint8 convert identically. */
  size_t n = (size_t)NF * FH * FW * 3;
  float *fchw = malloc(n * sizeof(float)), *cfhw = malloc(n * sizeof(float));
  uint8_t *u8 = malloc(n);
  for (int f = 0; f < NF; f++)
    for (int y = 0; y < FH; y++)
      for (int x = 0; x < FW; x++)
        for (int c = 0; c < 3; c++) {
          float v = fhwc[(((size_t)f * FH + y) * FW + x) * 3 + c];
          fchw[(((size_t)f * 3 + c) * FH + y) * FW + x] = v;
          cfhw[(((size_t)c * NF + f) * FH + y) * FW + x] = v;
          u8[(((size_t)f * FH + y) * FW + x) * 3 + c] = h3_pixel_to_u8(v);
        }
  h3_video_frames a = h3_frames_fhwc(fhwc, H3_PIXEL_F32, NF, FH, FW);
  h3_video_frames b = h3_frames_fchw(fchw, H3_PIXEL_F32, NF, FH, FW);
  h3_video_frames c = h3_frames_cfhw(cfhw, H3_PIXEL_F32, NF, FH, FW);
  h3_video_frames d = h3_frames_fhwc(u8, H3_PIXEL_U8, NF, FH, FW);
  size_t fb = (size_t)FH * FW * 3;
  uint8_t *ra = malloc(fb), *rb = malloc(fb), *rc = malloc(fb), *rd = malloc(fb);
  int same = 1;
  for (int f = 0; f < NF; f += 7) {
    h3_video_frames sa = h3_frames_slice(&a, f, 1), sc = h3_frames_slice(&c, f, 1);
    h3_frames_to_rgb24(&sa, 0, ra, FW * 3);
    h3_frames_to_rgb24(&b, f, rb, FW * 3);
    h3_frames_to_rgb24(&sc, 0, rc, FW * 3);
    h3_frames_to_rgb24(&d, f, rd, FW * 3);
    same &= !memcmp(ra, rb, fb) && !memcmp(ra, rc, fb) && !memcmp(ra, rd, fb);
  }
  CHECK(same);
  CHECK(ra[0] == 255 && ra[1] == 0); /* saturated block, frame 21 */
  h3_video_frames s = h3_frames_slice(&a, 20, 10);
  CHECK(s.num_frames == 2);
  free(ra); free(rb); free(rc); free(rd);
  free(fchw); free(cfhw); free(u8);
}

static void frame_rgb(const float *fhwc, int f, uint8_t *dst) {
  h3_video_frames v = h3_frames_fhwc(fhwc, H3_PIXEL_F32, NF, FH, FW);
  h3_frames_to_rgb24(&v, f, dst, FW * 3);
}

static void test_mp4_main(const char *dir, const float *frames) {
  char path[512];
  snprintf(path, sizeof path, "%s/clip.mp4", dir);
  float *audio = make_audio(NS_MATCH, RATE);
  h3_video_frames v = h3_frames_fhwc(frames, H3_PIXEL_F32, NF, FH, FW);
  h3_audio_track a = h3_audio_planar(audio, 2, NS_MATCH, RATE);
  const char *meta[] = {"title", "h3 media test", "comment", "synthetic", "prompt", "a red fox in the snow, ünïcödé",
                        "seed", "1234"};
  h3_mp4_options opt;
  h3_mp4_options_init(&opt);
  CHECK(opt.crf == 18 && strcmp(opt.preset, "medium") == 0 && opt.audio_bitrate == 192000);
  opt.metadata = meta;
  opt.n_metadata = 4;
  h3_status st = h3_mp4_write(path, &v, &a, &opt);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  CHECK(file_exists(path));
  CHECK(count_entries(dir, "clip.mp4") == 1); /* no temporary left */

  uint8_t *rgb0 = malloc((size_t)FH * FW * 3), *rgbL = malloc((size_t)FH * FW * 3);
  frame_rgb(frames, 0, rgb0);
  frame_rgb(frames, NF - 1, rgbL);
  probe p;
  CHECK(probe_file(path, &p, rgb0, rgbL, audio, NS_MATCH));
  CHECK(p.nb_streams == 2);
  CHECK(p.v_codec == AV_CODEC_ID_H264);
  CHECK(p.v_w == FW && p.v_h == FH && p.v_pix == AV_PIX_FMT_YUV420P);
  CHECK(p.v_colorspace == AVCOL_SPC_BT709);
  CHECK_MSG(p.v_avg_fps.num == 24 && p.v_avg_fps.den == 1, "avg_frame_rate %d/%d", p.v_avg_fps.num, p.v_avg_fps.den);
  CHECK_MSG(p.v_r_fps.num == 24 && p.v_r_fps.den == 1, "r_frame_rate %d/%d", p.v_r_fps.num, p.v_r_fps.den);
  CHECK_MSG(p.v_nb_frames_hdr == NF, "nb_frames %lld", (long long)p.v_nb_frames_hdr);
  CHECK_MSG(p.v_packets == NF && p.v_decoded == NF, "packets %d decoded %d", p.v_packets, p.v_decoded);
  CHECK(p.v_pts_ok);
  CHECK_MSG(fabs(p.v_dur - NF / 24.0) < 1e-3, "video duration %.6f", p.v_dur);
  CHECK_MSG(p.v_mae_first < 2.5 && p.v_mae_last < 2.5, "pixel MAE first %.3f last %.3f", p.v_mae_first,
            p.v_mae_last);
  CHECK(p.a_codec == AV_CODEC_ID_AAC && p.a_profile == FF_PROFILE_AAC_LOW);
  CHECK(p.a_rate == RATE && p.a_channels == 2);
  /* The track's edit list holds the exact length; FFmpeg 5.1's MP4 demuxer drops
   * the AAC priming but hands the decoder the padded last frame (< 1024 extra). */
  CHECK_MSG(p.a_dur_ts == NS_MATCH, "audio stream duration %lld samples, wrote %d", (long long)p.a_dur_ts, NS_MATCH);
  CHECK_MSG(p.a_decoded >= NS_MATCH && p.a_decoded < NS_MATCH + 1024, "decoded %lld audio samples, wrote %d",
            (long long)p.a_decoded, NS_MATCH);
  CHECK_MSG(fabs(p.fmt_dur - NF / 24.0) < 1e-4, "container duration %.6f", p.fmt_dur);
  CHECK_MSG(p.a_rel_err < 0.1, "audio relative error %.4f", p.a_rel_err);
  CHECK(strcmp(p.title, "h3 media test") == 0);
  CHECK_MSG(strcmp(p.prompt, "a red fox in the snow, ünïcödé") == 0, "prompt tag '%s'", p.prompt);
  CHECK_MSG(strcmp(p.seed, "1234") == 0, "seed tag '%s'", p.seed);
  printf("mp4: %d frames, avg %d/%d fps, MAE %.3f/%.3f, audio %lld samples, rel err %.4f\n", p.v_decoded,
         p.v_avg_fps.num, p.v_avg_fps.den, p.v_mae_first, p.v_mae_last, (long long)p.a_decoded, p.a_rel_err);
  free(rgb0);
  free(rgbL);
  free(audio);
}

/* Audio ±266.67 samples off the video (the §2.2 table): KEEP writes both in full,
 * FIT_VIDEO trims / pads to round(F * 32000 / 24). */
static void test_mp4_durations(const char *dir, const float *frames) {
  h3_video_frames v = h3_frames_fhwc(frames, H3_PIXEL_F32, NF, FH, FW);
  const int64_t lens[2] = {NS_MATCH + 267, NS_MATCH - 267};
  for (int fit = 0; fit < 2; fit++)
    for (int li = 0; li < 2; li++) {
      int64_t n = lens[li];
      float *audio = make_audio(n, RATE);
      h3_audio_track a = h3_audio_planar(audio, 2, n, RATE);
      h3_mp4_options opt;
      h3_mp4_options_init(&opt);
      opt.preset = "ultrafast";
      opt.audio_fit = fit ? H3_MP4_AUDIO_FIT_VIDEO : H3_MP4_AUDIO_KEEP;
      char path[512];
      snprintf(path, sizeof path, "%s/dur_%d_%d.mp4", dir, fit, li);
      h3_status st = h3_mp4_write(path, &v, &a, &opt);
      CHECK_MSG(st == H3_OK, "%s", h3_last_error());
      probe p;
      CHECK(probe_file(path, &p, NULL, NULL, NULL, 0));
      int64_t want = fit ? NS_MATCH : n;
      CHECK_MSG(p.v_decoded == NF && p.v_nb_frames_hdr == NF, "fit %d len %lld: %d frames", fit, (long long)n,
                p.v_decoded);
      CHECK_MSG(p.a_dur_ts == want, "fit %d len %lld: audio stream is %lld samples, want %lld", fit, (long long)n,
                (long long)p.a_dur_ts, (long long)want);
      CHECK_MSG(p.a_decoded >= want && p.a_decoded < want + 1024, "fit %d: decoded %lld samples, want %lld", fit,
                (long long)p.a_decoded, (long long)want);
      /* the container lasts as long as the longer stream: nothing is cut */
      double longer = fmax(NF / 24.0, want / (double)RATE);
      CHECK_MSG(fabs(p.fmt_dur - longer) < 1e-4, "fit %d len %lld: container %.6f s, want %.6f", fit, (long long)n,
                p.fmt_dur, longer);
      CHECK_MSG(fabs(p.v_dur - NF / 24.0) < 1e-6, "video duration %.6f", p.v_dur);
      free(audio);
    }
}

/* Streaming: chunks of (3, F, H, W) uint8 frames and interleaved audio, audio
 * first; also mono 48 kHz input (duplicated, resampled to 32 kHz stereo). */
static void test_mp4_streaming(const char *dir, const float *frames) {
  size_t fb = (size_t)FH * FW;
  uint8_t *cfhw = malloc((size_t)NF * fb * 3);
  for (int f = 0; f < NF; f++)
    for (size_t i = 0; i < fb; i++)
      for (int c = 0; c < 3; c++) cfhw[((size_t)c * NF + f) * fb + i] = h3_pixel_to_u8(frames[((size_t)f * fb + i) * 3 + c]);
  h3_video_frames all = h3_frames_cfhw(cfhw, H3_PIXEL_U8, NF, FH, FW);
  const int in_rate = 48000;
  const int64_t n = 44000; /* 0.9167 s at 48 kHz = round(22/24 * 48000) */
  float *mono = malloc(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) mono[i] = (float)(0.5 * sin(2 * M_PI * 440.0 * (double)i / in_rate));
  char path[512];
  snprintf(path, sizeof path, "%s/stream.mp4", dir);
  h3_mp4_options opt;
  h3_mp4_options_init(&opt);
  opt.preset = "veryfast";
  opt.faststart = false;
  h3_mp4_writer *w = NULL;
  h3_status st = h3_mp4_open(&w, path, FW, FH, in_rate, &opt);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st != H3_OK) goto out;
  CHECK(!file_exists(path)); /* only the temporary exists while writing */
  for (int64_t s = 0; s < n && st == H3_OK; s += 1000) {
    h3_audio_track a = h3_audio_interleaved(mono, 1, n, in_rate);
    h3_audio_track ch = h3_audio_slice(&a, s, 1000);
    st = h3_mp4_add_audio(w, &ch);
  }
  for (int f = 0; f < NF && st == H3_OK; f += 5) {
    h3_video_frames ch = h3_frames_slice(&all, f, 5);
    st = h3_mp4_add_frames(w, &ch);
  }
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  CHECK(h3_mp4_frames_written(w) == NF && h3_mp4_audio_samples_written(w) == n);
  /* wrong frame size: rejected, writer still usable */
  h3_video_frames bad = h3_frames_fhwc(cfhw, H3_PIXEL_U8, 1, FH / 2, FW);
  CHECK(h3_mp4_add_frames(w, &bad) == H3_ERR_SHAPE && has("opened as 256x256"));
  st = h3_mp4_close(w);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  probe p;
  uint8_t *rgb0 = malloc(fb * 3);
  frame_rgb(frames, 0, rgb0);
  CHECK(probe_file(path, &p, rgb0, NULL, NULL, 0));
  CHECK(p.nb_streams == 2 && p.v_decoded == NF && p.v_pts_ok);
  CHECK_MSG(p.v_mae_first < 3.0, "MAE %.3f", p.v_mae_first);
  CHECK(p.a_rate == RATE && p.a_channels == 2);
  CHECK_MSG(llabs(p.a_dur_ts - NS_MATCH) <= 1, "resampled audio: %lld samples", (long long)p.a_dur_ts);
  free(rgb0);
out:
  free(mono);
  free(cfhw);
}

static void test_mp4_silent(const char *dir, const float *frames) {
  char path[512];
  snprintf(path, sizeof path, "%s/silent.mp4", dir);
  h3_video_frames v = h3_frames_fhwc(frames, H3_PIXEL_F32, NF, FH, FW);
  h3_status st = h3_mp4_write(path, &v, NULL, NULL);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  probe p;
  CHECK(probe_file(path, &p, NULL, NULL, NULL, 0));
  CHECK(p.nb_streams == 1 && p.v_codec == AV_CODEC_ID_H264 && p.v_decoded == NF && p.a_codec == 0);
}

static void test_mp4_failures(const char *dir, const float *frames) {
  h3_video_frames v = h3_frames_fhwc(frames, H3_PIXEL_F32, NF, FH, FW);
  char path[512], sub[512];
  /* folder does not exist */
  snprintf(path, sizeof path, "%s/no_such_folder/out.mp4", dir);
  h3_status st = h3_mp4_write(path, &v, NULL, NULL);
  CHECK(st == H3_ERR_IO && has("cannot create the temporary file") && has("No such file or directory"));
  CHECK(!file_exists(path));
  /* parent is a regular file (made by main) */
  snprintf(path, sizeof path, "%s/plainfile/out.mp4", dir);
  st = h3_mp4_write(path, &v, NULL, NULL);
  CHECK(st == H3_ERR_IO && has("Not a directory"));
  /* read-only folder (only meaningful when not root) */
  if (geteuid() != 0) {
    snprintf(sub, sizeof sub, "%s/ro", dir);
    mkdir(sub, 0500);
    snprintf(path, sizeof path, "%s/ro/out.mp4", dir);
    st = h3_mp4_write(path, &v, NULL, NULL);
    CHECK(st == H3_ERR_IO && has("Permission denied"));
    CHECK(count_entries(sub, NULL) == 0);
    chmod(sub, 0700);
  }
  /* failures after the file was started leave nothing behind */
  snprintf(sub, sizeof sub, "%s/late", dir);
  mkdir(sub, 0700);
  snprintf(path, sizeof path, "%s/late/out.mp4", dir);
  h3_mp4_writer *w = NULL;
  st = h3_mp4_open(&w, path, FW, FH, RATE, NULL);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  CHECK(count_entries(sub, "out.mp4.tmp.") == 1);
  h3_video_frames two = h3_frames_slice(&v, 0, 2);
  CHECK(h3_mp4_add_frames(w, &two) == H3_OK);
  st = h3_mp4_close(w); /* audio declared, none added */
  CHECK(st == H3_ERR_INVALID && has("no samples were added"));
  CHECK(count_entries(sub, NULL) == 0);
  w = NULL;
  CHECK(h3_mp4_open(&w, path, FW, FH, 0, NULL) == H3_OK);
  CHECK(h3_mp4_add_frames(w, &two) == H3_OK);
  h3_mp4_abort(w);
  CHECK(count_entries(sub, NULL) == 0);
  CHECK(h3_mp4_open(&w, path, FW, FH, 0, NULL) == H3_OK);
  CHECK(h3_mp4_close(w) == H3_ERR_INVALID && has("no video frames"));
  CHECK(count_entries(sub, NULL) == 0);
  /* argument errors */
  h3_mp4_options opt;
  h3_mp4_options_init(&opt);
  opt.preset = "warp";
  CHECK(h3_mp4_open(&w, path, FW, FH, 0, &opt) == H3_ERR_INVALID && has("unknown x264 preset 'warp'") && !w);
  CHECK(h3_mp4_open(&w, path, 255, FH, 0, NULL) == H3_ERR_INVALID && has("must be even"));
  h3_mp4_options_init(&opt);
  opt.crf = 60;
  CHECK(h3_mp4_open(&w, path, FW, FH, 0, &opt) == H3_ERR_INVALID && has("crf"));
  const char *badmeta[] = {"", "x"};
  h3_mp4_options_init(&opt);
  opt.metadata = badmeta;
  opt.n_metadata = 1;
  CHECK(h3_mp4_open(&w, path, FW, FH, 0, &opt) == H3_ERR_INVALID && has("metadata"));
  CHECK(count_entries(sub, NULL) == 0);
}

static void test_png(const char *dir, const float *frames) {
  char pdir[512], path[600];
  snprintf(pdir, sizeof pdir, "%s/png/nested", dir);
  h3_video_frames v = h3_frames_fhwc(frames, H3_PIXEL_F32, NF, FH, FW);
  /* in two chunks, as a streaming decoder would */
  h3_video_frames a = h3_frames_slice(&v, 0, 10), b = h3_frames_slice(&v, 10, NF - 10);
  h3_status st = h3_png_write_frames(pdir, &a, 0);
  if (st == H3_OK) st = h3_png_write_frames(pdir, &b, 10);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  CHECK(count_entries(pdir, NULL) == NF);
  CHECK(count_entries(pdir, "frame_") == NF);
  snprintf(path, sizeof path, "%s/frame_%05d.png", pdir, NF - 1);
  CHECK(file_exists(path));
  snprintf(path, sizeof path, "%s/frame_%05d.png", pdir, NF);
  CHECK(!file_exists(path));
  /* decode frame 13 back: lossless, identical to the uint8 conversion */
  snprintf(path, sizeof path, "%s/frame_%05d.png", pdir, 13);
  uint8_t *want = malloc((size_t)FH * FW * 3);
  frame_rgb(frames, 13, want);
  AVFormatContext *ic = NULL;
  int same = 0, got = 0;
  if (avformat_open_input(&ic, path, NULL, NULL) >= 0 && avformat_find_stream_info(ic, NULL) >= 0) {
    AVCodecParameters *cp = ic->streams[0]->codecpar;
    CHECK(cp->codec_id == AV_CODEC_ID_PNG && cp->width == FW && cp->height == FH);
    AVCodecContext *c = avcodec_alloc_context3(avcodec_find_decoder(cp->codec_id));
    avcodec_parameters_to_context(c, cp);
    avcodec_open2(c, NULL, NULL);
    AVPacket *pkt = av_packet_alloc();
    AVFrame *fr = av_frame_alloc();
    if (av_read_frame(ic, pkt) >= 0 && avcodec_send_packet(c, pkt) >= 0 && avcodec_receive_frame(c, fr) >= 0) {
      got = 1;
      same = fr->format == AV_PIX_FMT_RGB24;
      for (int y = 0; y < FH && same; y++) same = !memcmp(fr->data[0] + y * fr->linesize[0], want + (size_t)y * FW * 3, FW * 3);
    }
    av_frame_free(&fr);
    av_packet_free(&pkt);
    avcodec_free_context(&c);
  }
  avformat_close_input(&ic);
  CHECK(got && same);
  free(want);
  /* cannot create the folder: parent is a file */
  snprintf(pdir, sizeof pdir, "%s/plainfile/frames", dir);
  CHECK(h3_png_write_frames(pdir, &a, 0) == H3_ERR_IO && has("cannot create folder"));
}

static uint32_t rd32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static void test_wav(const char *dir) {
  const int64_t n = 5000;
  float *audio = make_audio(n, RATE);
  audio[7] = 1.75f; /* out of range values are written as they are */
  char path[512];
  snprintf(path, sizeof path, "%s/sound.wav", dir);
  h3_audio_track a = h3_audio_planar(audio, 2, n, RATE);
  h3_status st = h3_wav_write(path, &a);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  CHECK(count_entries(dir, "sound.wav") == 1);
  FILE *f = fopen(path, "rb");
  size_t want_size = H3_WAV_HEADER_BYTES + (size_t)n * 2 * 4;
  uint8_t *buf = malloc(want_size + 16);
  size_t got = f ? fread(buf, 1, want_size + 16, f) : 0;
  if (f) fclose(f);
  CHECK(got == want_size);
  if (got == want_size) {
    CHECK(!memcmp(buf, "RIFF", 4) && rd32(buf + 4) == want_size - 8 && !memcmp(buf + 8, "WAVE", 4));
    CHECK(!memcmp(buf + 12, "fmt ", 4) && rd32(buf + 16) == 18);
    CHECK(rd16(buf + 20) == 3 && rd16(buf + 22) == 2 && rd32(buf + 24) == RATE);
    CHECK(rd32(buf + 28) == RATE * 8 && rd16(buf + 32) == 8 && rd16(buf + 34) == 32 && rd16(buf + 36) == 0);
    CHECK(!memcmp(buf + 38, "fact", 4) && rd32(buf + 42) == 4 && rd32(buf + 46) == n);
    CHECK(!memcmp(buf + 50, "data", 4) && rd32(buf + 54) == n * 8);
    int same = 1;
    for (int64_t i = 0; i < n && same; i++)
      for (int c = 0; c < 2; c++) {
        uint32_t u = rd32(buf + H3_WAV_HEADER_BYTES + (i * 2 + c) * 4);
        float x;
        memcpy(&x, &u, 4);
        same &= memcmp(&x, &audio[c * n + i], 4) == 0;
      }
    CHECK(same);
  }
  free(buf);
  /* libavformat reads it as 32 kHz stereo pcm_f32le */
  AVFormatContext *ic = NULL;
  CHECK(avformat_open_input(&ic, path, NULL, NULL) >= 0);
  if (ic) {
    CHECK(avformat_find_stream_info(ic, NULL) >= 0);
    AVCodecParameters *cp = ic->streams[0]->codecpar;
    CHECK(cp->codec_id == AV_CODEC_ID_PCM_F32LE && cp->sample_rate == RATE && cp->ch_layout.nb_channels == 2);
    avformat_close_input(&ic);
  }
  /* mono, interleaved input */
  snprintf(path, sizeof path, "%s/mono.wav", dir);
  h3_audio_track m = h3_audio_interleaved(audio, 1, n, 0);
  CHECK(h3_wav_write(path, &m) == H3_OK);
  struct stat sb;
  CHECK(stat(path, &sb) == 0 && sb.st_size == (off_t)(H3_WAV_HEADER_BYTES + n * 4));
  /* failure leaves nothing */
  snprintf(path, sizeof path, "%s/no_such_folder/x.wav", dir);
  CHECK(h3_wav_write(path, &a) == H3_ERR_IO && has("cannot create"));
  CHECK(!file_exists(path));
  h3_audio_track bad = h3_audio_planar(audio, 3, n, RATE);
  CHECK(h3_wav_write(path, &bad) == H3_ERR_INVALID && has("1 or 2 channels"));
  free(audio);
}

int main(void) {
  const char *dir = h3t_tmpdir();
  char plain[512];
  snprintf(plain, sizeof plain, "%s/plainfile", dir);
  FILE *pf = fopen(plain, "wb");
  CHECK(pf != NULL);
  if (pf) fclose(pf);
  float *frames = make_frames();
  test_pixel_rule();
  test_layouts(frames);
  test_wav(dir);
  test_png(dir, frames);
  test_mp4_main(dir, frames);
  test_mp4_durations(dir, frames);
  test_mp4_streaming(dir, frames);
  test_mp4_silent(dir, frames);
  test_mp4_failures(dir, frames);
  free(frames);
  return h3t_finish(MIN_CHECKS);
}
