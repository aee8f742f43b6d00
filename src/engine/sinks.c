#include "engine/sinks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "engine/params_io.h"
#include "io/outfile.h"
#include "io/safetensors.h"
#include "media/mp4_writer.h"
#include "media/png_frames.h"
#include "media/wav_writer.h"

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

/* frame_NNNNN.png, the names h3_png_write_frames gives. */
static bool is_frame_name(const char *n) {
  if (strncmp(n, "frame_", 6) != 0 || !ends_with(n, ".png")) return false;
  size_t len = strlen(n);
  if (len < 6 + 1 + 4) return false;
  for (size_t i = 6; i < len - 4; i++)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

/* A frames folder: new (its parent writable), or a folder of earlier frames only. */
static h3_status check_frames_dir(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno != ENOENT) return h3_fail(H3_ERR_IO, "--frames-dir %s: %s", dir, strerror(errno));
    /* the nearest existing ancestor must take new folders */
    char *p = strdup(dir);
    if (!p) return h3_fail(H3_ERR_NOMEM, "--frames-dir");
    h3_status s = H3_OK;
    for (;;) {
      char *slash = strrchr(p, '/');
      if (!slash) {
        snprintf(p, strlen(p) + 1, ".");
      } else if (slash == p) {
        p[1] = 0;
      } else {
        *slash = 0;
      }
      if (stat(p, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) s = h3_fail(H3_ERR_IO, "--frames-dir %s: %s is not a folder", dir, p);
        else if (access(p, W_OK | X_OK) != 0)
          s = h3_fail(H3_ERR_IO, "--frames-dir %s: cannot create it in %s: %s", dir, p, strerror(errno));
        break;
      }
      if (!strcmp(p, ".") || !strcmp(p, "/")) break;
    }
    free(p);
    return s;
  }
  if (!S_ISDIR(st.st_mode)) return h3_fail(H3_ERR_IO, "--frames-dir %s: exists and is not a folder", dir);
  if (access(dir, W_OK | X_OK) != 0) return h3_fail(H3_ERR_IO, "--frames-dir %s: %s", dir, strerror(errno));
  DIR *d = opendir(dir);
  if (!d) return h3_fail(H3_ERR_IO, "--frames-dir %s: %s", dir, strerror(errno));
  struct dirent *de;
  h3_status s = H3_OK;
  while ((de = readdir(d)) && s == H3_OK)
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && !is_frame_name(de->d_name))
      s = h3_fail(H3_ERR_IO, "--frames-dir %s: holds other files than frames (%s); give a new or empty folder", dir,
                  de->d_name);
  closedir(d);
  return s;
}

/* Remove the frame_*.png files of dir (earlier frames it may hold). */
static void clear_frames(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  char p[4400];
  while ((de = readdir(d)))
    if (is_frame_name(de->d_name)) {
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      unlink(p);
    }
  closedir(d);
}

h3_status h3_outputs_prepare(const h3_gen_params *p, bool audio, h3_job_outputs *o) {
  memset(o, 0, sizeof *o);
  o->audio = audio;
  o->crf = p->crf >= 0 ? p->crf : 18;
  if (!p->output) {
    if (mkdir("outputs", 0777) != 0 && errno != EEXIST)
      return h3_fail(H3_ERR_IO, "cannot create the folder outputs/: %s", strerror(errno));
    H3_TRY(h3_unique_output_path("outputs", p->prompt ? p->prompt : "text-states", ".mp4", o->main, sizeof o->main));
    H3_TRY(h3_outfile_check(o->main, "output"));
    /* reserve the name (another run choosing names skips it); the write replaces it */
    int fd = open(o->main, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return h3_fail(H3_ERR_IO, "output %s: %s", o->main, strerror(errno));
    close(fd);
    o->main_auto = true;
  } else if (*p->output) {
    if (strlen(p->output) >= sizeof o->main) return h3_fail(H3_ERR_INVALID, "--output: path too long");
    snprintf(o->main, sizeof o->main, "%s", p->output);
    H3_TRY(h3_outfile_check(o->main, "--output"));
  }
  o->main_is_clip = *o->main && ends_with(o->main, ".safetensors");
  h3_status s = H3_OK;
  if (!h3_media_writes_video() && ((*o->main && !o->main_is_clip) || p->frames_dir)) {
    s = h3_fail(H3_ERR_UNSUPPORTED, "%s: this h3 was built without FFmpeg (-DH3_MEDIA=OFF): write a .safetensors "
                                    "clip (-o clip.safetensors) or --wav instead",
                *o->main && !o->main_is_clip ? o->main : p->frames_dir);
    goto fail;
  }
  if (p->wav && (s = h3_outfile_check(p->wav, "--wav")) != H3_OK) goto fail;
  if (p->latents_out && (s = h3_outfile_check(p->latents_out, "--latents-out")) != H3_OK) goto fail;
  if (p->frames_dir && (s = check_frames_dir(p->frames_dir)) != H3_OK) goto fail;
  for (const char *a[] = {p->wav, p->latents_out}, **q = a; q < a + 2; q++)
    if (*q && *o->main && !strcmp(*q, o->main)) {
      s = h3_fail(H3_ERR_INVALID, "%s is named for two outputs", *q);
      goto fail;
    }
  o->wav = p->wav;
  o->frames_dir = p->frames_dir;
  o->latents_out = p->latents_out;
  return H3_OK;
fail:
  if (o->main_auto) unlink(o->main);
  o->main[0] = 0;
  return s;
}

bool h3_outputs_need_video(const h3_job_outputs *o) { return *o->main || o->frames_dir; }
bool h3_outputs_need_audio(const h3_job_outputs *o) { return o->audio && (*o->main || o->wav); }

static void note_written(h3_job_outputs *o, const char *path) {
  if (o->n_written >= 4 || path == o->written[o->n_written]) return;
  const size_t n = strlen(path);
  if (n >= sizeof o->written[0]) return;
  memmove(o->written[o->n_written++], path, n + 1); /* path may be o->main */
}

void h3_outputs_remove_written(h3_job_outputs *o) {
  for (int i = 0; i < o->n_written; i++) {
    struct stat st;
    if (stat(o->written[i], &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      clear_frames(o->written[i]);
      rmdir(o->written[i]); /* only when it is now empty */
    } else if (S_ISREG(st.st_mode)) {
      unlink(o->written[i]);
    }
  }
  o->n_written = 0;
  if (o->main_auto && *o->main) unlink(o->main); /* the reserved name */
}

static h3_status write_latents(const char *path, const h3_gen_result *r) {
  const h3_resolved_request *q = &r->req;
  int64_t vs[5] = {1, r->video_channels, q->latent_frames, q->latent_height, q->latent_width};
  int64_t as[3] = {2, r->audio_channels, q->audio_latents};
  h3_st_write_item items[2] = {{"latents", h3_tensor_make(r->video_latents, H3_DT_F32, 5, vs)},
                               {"audio_latents", h3_tensor_make(r->audio_latents, H3_DT_F32, 3, as)}};
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
  const char *meta[] = {"producer", "h3 generate", "seed", seed};
  return h3_st_write(path, items, 2, meta, 2);
}

static h3_status write_clip(const char *path, const h3_gen_result *r, const char *prompt, bool audio) {
  if (!r->frames) return h3_fail(H3_ERR_INVALID, "%s: no decoded frames to write", path);
  int64_t fs[4] = {r->num_frames, r->height, r->width, 3};
  int64_t as[2] = {2, r->audio_samples};
  h3_st_write_item items[2] = {{"frames", h3_tensor_make(r->frames, H3_DT_F32, 4, fs)},
                               {"audio", h3_tensor_make(r->audio, H3_DT_F32, 2, as)}};
  char seed[32], rate[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
  snprintf(rate, sizeof rate, "%lld", (long long)r->sample_rate);
  const char *meta[] = {"producer", "h3 generate", "seed", seed, "prompt", prompt ? prompt : "(text states)",
                        "fps", "24", "sample_rate", rate};
  return h3_st_write(path, items, audio && r->audio ? 2 : 1, meta, 5);
}

h3_status h3_outputs_write(h3_job_outputs *o, const h3_gen_result *r, const h3_write_ctx *w) {
  h3_status first = H3_OK;
  char first_msg[1024] = "";
#define NOTE(st_)                                                       \
  do {                                                                  \
    h3_status s_ = (st_);                                               \
    if (s_ != H3_OK && first == H3_OK) {                                \
      first = s_;                                                       \
      snprintf(first_msg, sizeof first_msg, "%s", h3_last_error());    \
    }                                                                   \
  } while (0)
  h3_video_frames vf = h3_frames_fhwc(r->frames, H3_PIXEL_F32, (int)r->num_frames, (int)r->height, (int)r->width);
  h3_audio_track at = h3_audio_planar(r->audio, 2, r->audio_samples, (int)r->sample_rate);
  if (o->latents_out) {
    h3_status s = write_latents(o->latents_out, r);
    NOTE(s);
    if (s == H3_OK) note_written(o, o->latents_out);
  }
  if (o->wav && r->audio) {
    h3_status s = h3_wav_write(o->wav, &at);
    NOTE(s);
    if (s == H3_OK) note_written(o, o->wav);
  }
  if (o->frames_dir && r->frames) {
    clear_frames(o->frames_dir);
    h3_status s = h3_png_write_frames(o->frames_dir, &vf, 0);
    NOTE(s);
    note_written(o, o->frames_dir);
  }
  if (*o->main) {
    h3_status s;
    if (o->main_is_clip) {
      s = write_clip(o->main, r, w->prompt, o->audio);
    } else {
      char seed_str[32];
      snprintf(seed_str, sizeof seed_str, "%llu", (unsigned long long)w->seed);
      const char *meta[] = {"prompt", w->prompt ? w->prompt : "(text states)", "seed", seed_str,
                            "settings", w->settings ? w->settings : "", "encoder", "h3 " H3_VERSION_STRING};
      h3_mp4_options mo;
      h3_mp4_options_init(&mo);
      mo.crf = (double)o->crf;
      mo.metadata = meta;
      mo.n_metadata = 4;
      mo.cancelled = w->cancelled;
      mo.cancel_ctx = w->cancel_ctx;
      s = h3_mp4_write(o->main, &vf, o->audio && r->audio ? &at : NULL, &mo);
    }
    NOTE(s);
    if (s == H3_OK) note_written(o, o->main);
  }
#undef NOTE
  if (first == H3_ERR_CANCELLED || (w->cancelled && w->cancelled(w->cancel_ctx))) {
    h3_outputs_remove_written(o);
    return h3_fail(H3_ERR_CANCELLED, "cancelled while writing the outputs");
  }
  if (first != H3_OK) {
    if (o->main_auto && !(o->n_written && !strcmp(o->written[o->n_written - 1], o->main))) unlink(o->main);
    return h3_fail(first, "%s", first_msg);
  }
  return H3_OK;
}
