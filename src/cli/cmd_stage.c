/* h3 stage NAME --model PATH --in IN.safetensors --out OUT.safetensors
 * Dispatch table of the per-network stages (docs/STAGES.md). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const h3_cli_command k_stages[] = {
    {"tokenize", "prompt text (JSON string per line) -> Qwen2 token ids (JSON array per line)", h3_stage_tokenize},
    {"text-encode", "prompt (+ fl2va keyframes) -> Qwen3-VL hidden state at the tap (encoder_hidden_states + text_token_tags)", h3_stage_text_encode},
    {"vision-encode", "keyframe images -> Qwen3-VL pixel_values, vision tower features + deepstack levels", h3_stage_vision_encode},
    {"dit", "one DiT forward: packed latents + text states -> video/audio velocity", h3_stage_dit},
    {"video-encode", "video VAE encode: pixels -> posterior -> seed-42 sample -> normalized latents", h3_stage_video_encode},
    {"video-decode", "video VAE decode: normalized latents -> RGB frames in [0,1]", h3_stage_video_decode},
    {"audio-encode", "audio VAE encoder: a reference soundtrack (waveform or file) -> posterior mean -> normalized condition rows", h3_stage_audio_encode},
    {"ref-video", "a ref2va video reference: decode, 24 fps, own-aspect canvas -> VAE latents, Qwen3-VL video features + timestamps, 32 kHz soundtrack", h3_stage_ref_video},
    {"audio-decode", "audio VAE decoder: normalized audio latents -> stereo 32 kHz waveform", h3_stage_audio_decode},
};

int h3_cmd_stage(int argc, char **argv) {
  if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
    FILE *f = argc < 1 ? stderr : stdout;
    fprintf(f, "usage: h3 stage NAME --model PATH --in IN.safetensors --out OUT.safetensors [options]\n\nstages:\n");
    for (size_t i = 0; i < sizeof k_stages / sizeof k_stages[0]; i++)
      fprintf(f, "  %-14s %s\n", k_stages[i].name, k_stages[i].summary);
    fprintf(f, "\nTensor names and shapes of every stage: docs/STAGES.md\n");
    return argc < 1 ? 2 : 0;
  }
  for (size_t i = 0; i < sizeof k_stages / sizeof k_stages[0]; i++)
    if (!strcmp(argv[0], k_stages[i].name)) return k_stages[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "h3: error: unknown stage '%s' (see h3 stage --help)\n", argv[0]);
  return 2;
}
