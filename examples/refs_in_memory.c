/* A ref2va request whose references are arrays in memory, not files, through the public C API
 * (h3_media, h3_params_add_reference): what an application does with frames it already decoded, or with a
 * camera's.  The media here are drawn: images of different aspects (a gradient with a disc), a video of a disc
 * crossing a gradient with a stereo soundtrack, and a mono clip (a gliding tone).
 *
 *   example_refs_in_memory [MODEL_DIR] [--device D] [--images N] [--video SECONDS] [--video-size WxH]
 *                          [--video-fps F] [--clip SECONDS] [--profile] [KEY=VALUE ...]
 *
 * MODEL_DIR "" or absent: the built-in toy (it draws noise).  Defaults: 1 image, a 2 s 1280x720 video at 30 fps
 * with a 48 kHz soundtrack, a 2 s 44.1 kHz clip; --video 0 / --clip 0 leave them out.  KEY=VALUE: any request
 * option, as h3_params_set takes it (prompt=..., size=960x544, frames=124, steps=3, seed=1, output=clip.mp4,
 * output= for none).  --profile prints the per-phase table, with the reference-encoding rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h3/h3.h"

static uint8_t *draw_frames(int64_t n, int w, int h, int k) {
  uint8_t *p = malloc((size_t)n * (size_t)w * (size_t)h * 3);
  if (!p) return NULL;
  const int r = (w < h ? w : h) / (3 + k);
  for (int64_t f = 0; f < n; f++) {
    const int cx = (int)((double)w * (0.2 + 0.6 * (double)f / (double)(n > 1 ? n - 1 : 1))), cy = h / 2;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        uint8_t *q = p + (((size_t)f * (size_t)h + (size_t)y) * (size_t)w + (size_t)x) * 3;
        const int in = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r;
        q[0] = in ? 250 : (uint8_t)(x * 255 / w);
        q[1] = in ? (uint8_t)(60 + 40 * k) : (uint8_t)((y * 255 / h + 50 * k) % 256);
        q[2] = in ? 40 : 90;
      }
  }
  return p;
}

static float *draw_tone(int channels, int64_t n, int rate, double f0) {
  float *a = malloc((size_t)channels * (size_t)n * sizeof *a);
  if (!a) return NULL;
  for (int c = 0; c < channels; c++) {
    double ph = 0;
    for (int64_t i = 0; i < n; i++) {
      const double f = f0 * (1.0 + 0.5 * (double)i / (double)n) * (c ? 1.25 : 1.0);
      ph += 2 * M_PI * f / rate;
      a[(size_t)c * (size_t)n + (size_t)i] = (float)(0.25 * sin(ph));
    }
  }
  return a;
}

static void progress(void *user, const h3_progress *p) {
  (void)user;
  if (p->end) fprintf(stderr, "%-13s %.2f s\n", h3_phase_name(p->phase), p->phase_s);
}

static int usage(void) {
  fprintf(stderr, "usage: example_refs_in_memory [MODEL_DIR] [--device D] [--images N] [--video SECONDS] "
                  "[--video-size WxH] [--video-fps F] [--clip SECONDS] [--profile] [KEY=VALUE ...]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *model = NULL, *device = NULL;
  int images = 1, vw = 1280, vh = 720, profile = 0, first_kv = argc;
  double video_s = 2, clip_s = 2, fps = 30;
  int a = 1;
  if (a < argc && argv[a][0] != '-' && !strchr(argv[a], '=')) model = argv[a++];
  for (; a < argc; a++) {
    const char *s = argv[a];
    const char *v = a + 1 < argc ? argv[a + 1] : NULL;
    if (!strcmp(s, "--profile")) profile = 1;
    else if (!strcmp(s, "--device") && v) device = v, a++;
    else if (!strcmp(s, "--images") && v) images = atoi(v), a++;
    else if (!strcmp(s, "--video") && v) video_s = atof(v), a++;
    else if (!strcmp(s, "--clip") && v) clip_s = atof(v), a++;
    else if (!strcmp(s, "--video-fps") && v) fps = atof(v), a++;
    else if (!strcmp(s, "--video-size") && v && sscanf(v, "%dx%d", &vw, &vh) == 2) a++;
    else if (strchr(s, '=') && s[0] != '-') {
      first_kv = a;
      break;
    } else return usage();
  }
  if (images < 0 || images > 9 || video_s < 0 || clip_s < 0 || fps <= 0 || vw < 16 || vh < 16) return usage();

  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.model = model && *model ? model : NULL;
  if (device) cfg.device = device;
  h3_engine *engine;
  if (h3_engine_open(&cfg, &engine) != H3_OK) return fprintf(stderr, "%s\n", h3_last_error()), 1;

  /* the media: they must outlive h3_job_run (the request borrows them) */
  static const int sizes[9][2] = {{1024, 768}, {768, 1024}, {1280, 720}, {640, 640}, {1600, 900},
                                  {900, 1600}, {800, 600}, {600, 800}, {1344, 768}};
  h3_media img[9], vid = {0}, clip = {0};
  uint8_t *pix[9] = {0}, *frames = NULL;
  float *sound = NULL, *tone = NULL;
  h3_gen_params *p = h3_gen_params_new();
  h3_status s = h3_params_set(p, "prompt", "The fox of the first picture runs across the video's field, barking "
                                           "in the voice of the clip.");
  if (s == H3_OK) s = h3_params_set(p, "seed", "42");
  if (s == H3_OK) s = h3_params_set(p, "output", "refs_in_memory.mp4");
  for (int i = 0; s == H3_OK && i < images; i++) {
    const int w = sizes[i][0], h = sizes[i][1];
    pix[i] = draw_frames(1, w, h, i);
    img[i] = (h3_media){.rgb = pix[i], .n_frames = 1, .width = w, .height = h};
    char name[32];
    snprintf(name, sizeof name, "image %d", i + 1);
    s = pix[i] ? h3_params_add_reference(p, H3_REF_TYPE_IMAGE, name, &img[i]) : H3_ERR_NOMEM;
  }
  if (s == H3_OK && video_s > 0) {
    const int64_t n = (int64_t)llround(video_s * fps), S = (int64_t)llround(video_s * 48000);
    frames = draw_frames(n, vw, vh, 1);
    sound = draw_tone(2, S, 48000, 220);
    vid = (h3_media){.rgb = frames, .n_frames = n, .width = vw, .height = vh, .fps = fps,
                     .audio = sound, .channels = 2, .samples = S, .sample_rate = 48000};
    s = frames && sound ? h3_params_add_reference(p, H3_REF_TYPE_VIDEO, "drawn video", &vid) : H3_ERR_NOMEM;
  }
  if (s == H3_OK && clip_s > 0) {
    const int64_t S = (int64_t)llround(clip_s * 44100);
    tone = draw_tone(1, S, 44100, 440);
    clip = (h3_media){.audio = tone, .channels = 1, .samples = S, .sample_rate = 44100};
    s = tone ? h3_params_add_reference(p, H3_REF_TYPE_AUDIO, "drawn clip", &clip) : H3_ERR_NOMEM;
  }
  for (int i = first_kv; s == H3_OK && i < argc; i++) { /* request options: KEY=VALUE */
    char key[64];
    const char *eq = strchr(argv[i], '=');
    if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
      fprintf(stderr, "%s: expected KEY=VALUE\n", argv[i]);
      s = H3_ERR_INVALID;
      break;
    }
    memcpy(key, argv[i], (size_t)(eq - argv[i]));
    key[eq - argv[i]] = 0;
    s = h3_params_set(p, key, eq + 1);
  }

  h3_callbacks cb = {.progress = progress, .profile = profile != 0};
  h3_job_report report;
  memset(&report, 0, sizeof report);
  if (s == H3_OK) s = h3_job_run(engine, p, NULL, &cb, &report);
  if (s == H3_OK) {
    printf("%s: %lld frames at %lldx%lld, seed %llu, %d references from memory\n",
           *report.output ? report.output : "(no file)", (long long)report.frames, (long long)report.width,
           (long long)report.height, (unsigned long long)report.seed, p->n_refs);
    h3_job_report_print(&report, stdout);
    if (report.profile) fputs(report.profile, stdout);
  } else {
    fprintf(stderr, "%s\n", h3_last_error());
  }
  h3_job_report_free(&report);
  h3_gen_params_free(p);
  h3_engine_close(engine);
  for (int i = 0; i < images; i++) free(pix[i]);
  free(frames), free(sound), free(tone);
  return s == H3_OK ? 0 : 1;
}
