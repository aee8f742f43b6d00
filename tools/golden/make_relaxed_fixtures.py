#!/usr/bin/env python3
"""Golden fixtures for the configs h3 once refused although the reference accepts them
(docs/RELIABILITY.md, "Configs the reference accepts"; checked by tests/unit/test_relaxed_configs.c).

Run where PyTorch, diffusers (sources on PYTHONPATH) and transformers are, from the repository root:

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_relaxed_fixtures.py OUTDIR [TAR]

then unpack here: `tar -xf TAR -C tests/golden/` (the tar holds `relaxed/...`), or copy OUTDIR to
tests/golden/relaxed/.  Everything runs on the CPU in float32 with one thread.

One folder per case, each a tiny reference model built by the reference classes with the relaxed config,
filled with seeded random values, saved in the diffusers / transformers layout (`model/`), and the
reference's output on seeded inputs (`io.safetensors`):

  audio_oddpad    AutoencoderKLMiniMaxH3Audio, upsamplers whose kernel - stride is odd (rates 4, 5;
                  kernels 7, 10): the reference pads floor((k - s) / 2), each stage one sample longer
  audio_oddch     decoder_dim 12 halved down to 6, 3, 1 channels (floor division)
  audio_zip       more decoder_kernel_sizes than decoder_rates and more resblock_dilation_sizes than
                  resblock_kernel_sizes (the reference zips them: the extras are ignored)
      io: latents [2, C, T] (de-normalized: fed to decode as is), waveform [2, 1, N] = decode(latents)
  dit_relaxed     MiniMaxH3Transformer3DModel with an odd freq_dim (33: the timestep features are padded
                  with a 0) and norm_eps = qk_norm_eps = final_norm_eps = 0
      io: the forward inputs of tests/golden/dit/tiny/t2va.in.safetensors (diffusers argument names) and
          the outputs sample [1, Nv, P], audio_sample [1, Na, C]
  te_bias         Qwen3VLForConditionalGeneration with attention_bias true (q/k/v/o biases), rms_norm_eps 0 and
                  no mrope_section (the default [24, 20, 20] is wider than its head_dim 16)
      io: input_ids [L] int64, hidden [L, hidden] = hidden_states[tap] of model.model; metadata "tap"
  vvae_ffn        AutoencoderKLMiniMaxH3 with decoder_ffn_mult 2.5 (FeedForward inner = int(64 * 2.5) = 160)
  vvae_nolayers   decoder_num_layers 0 (no transformer block)
  vvae_widerope   one head of 408 channels, rope_dim_ratio 1.0: 408 rotated channels, 68 frequencies per axis
      io: z [24, T, h, w] (de-normalized latents), out [3, T * pt, h * p, w * p] = decoder(post_quant_conv(z))
          (one decoder call: no tiling, no temporal chunking, ImageNet space unclamped)

Self-checks (exit status 1 on any failure): every reference model builds with its config (that is the point:
the reference accepts it), outputs are finite and not constant, each saved model reloads (diffusers
from_pretrained / transformers from_pretrained or a state-dict reload) and reproduces its output bit for bit.
This file is our own code; the reference classes are only imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import json
import math
import sys
import tarfile
import traceback

import torch
import torch.nn as nn

torch.set_num_threads(1)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

FAILURES = []


def log(*a):
    print("[relaxed]", *a, flush=True)


def fail(msg):
    print("[relaxed] FAIL: " + msg, flush=True)
    FAILURES.append(msg)


def own(t):
    return t.detach().contiguous().clone()


def save_st(path, tensors, metadata=None):
    from safetensors.torch import save_file

    save_file({k: own(v) for k, v in tensors.items()}, path, metadata=metadata)


def load_st(path):
    from safetensors.torch import load_file

    return load_file(path)


def check_output(name, t):
    if not torch.isfinite(t).all():
        fail(f"{name}: non-finite reference output")
        return False
    if float(t.double().std()) == 0.0:
        fail(f"{name}: constant reference output")
        return False
    return True


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


# ---------------------------------------------------------------------------------------------------------
# Audio VAE
# ---------------------------------------------------------------------------------------------------------


def audio_case(name, cfg, T, seed, out):
    from diffusers import AutoencoderKLMiniMaxH3Audio

    try:
        model = AutoencoderKLMiniMaxH3Audio(**cfg).float().eval()
    except Exception:
        traceback.print_exc()
        fail(f"{name}: the reference refuses the config {cfg}")
        return
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            # every weight-normed conv: gain around its norm, so weights are not the init's
            if hasattr(m, "weight_g") and hasattr(m, "weight_v"):
                v = m.weight_v
                norm = v.pow(2).sum(dim=tuple(range(1, v.dim())), keepdim=True).sqrt()
                m.weight_g.copy_(norm * (0.5 + torch.rand(m.weight_g.shape, generator=g)))
            if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d, nn.Linear)) and m.bias is not None:
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
        for pname, p in model.named_parameters():
            if pname.startswith("decoder.") and (pname.endswith(".alpha") or pname.endswith(".beta")):  # SnakeBeta
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
    C = cfg["latent_channels"]
    z = torch.randn((2, C, T), generator=g, dtype=torch.float32)
    # keep the waveform inside the [-1, 1] clamp: scale conv_post's gain (it has no bias)
    captured = {}
    hook = model.decoder.conv_post.register_forward_hook(lambda m, i, o: captured.__setitem__("y", o.detach()))
    with torch.no_grad():
        model.decode(z, return_dict=False)
    hook.remove()
    rms = float(captured["y"].pow(2).mean().sqrt())
    with torch.no_grad():
        model.decoder.conv_post.weight_g.mul_(0.3 / max(rms, 1e-12))
        wave = model.decode(z, return_dict=False)[0].float()
    if not check_output(name, wave):
        return
    d = os.path.join(out, name)
    mdir = os.path.join(d, "model")
    os.makedirs(mdir, exist_ok=True)
    conf = {"_class_name": "AutoencoderKLMiniMaxH3Audio", "_diffusers_version": "0.36.0.dev0"}
    for k, v in cfg.items():
        conf[k] = [list(x) if isinstance(x, (tuple, list)) else x for x in v] if isinstance(v, (tuple, list)) else v
    write_json(os.path.join(mdir, "config.json"), conf)
    save_st(os.path.join(mdir, "diffusion_pytorch_model.safetensors"), model.state_dict())
    hop = math.prod(cfg["decoder_rates"])
    save_st(os.path.join(d, "io.safetensors"), {"latents": z, "waveform": wave},
            {"producer": "tools/golden/make_relaxed_fixtures.py", "case": name, "torch": torch.__version__,
             "length": str(wave.shape[-1]), "hop_x_T": str(hop * T)})
    # reload check
    m2 = AutoencoderKLMiniMaxH3Audio(**cfg).float().eval()
    m2.load_state_dict(load_st(os.path.join(mdir, "diffusion_pytorch_model.safetensors")), strict=True)
    with torch.no_grad():
        w2 = m2.decode(z, return_dict=False)[0].float()
    if not torch.equal(w2, wave):
        fail(f"{name}: the reloaded state dict does not reproduce the waveform")
    clipped = float((wave.abs() >= 1.0).float().mean())
    log(f"{name}: latents {list(z.shape)} -> waveform {list(wave.shape)} (hop x T = {hop * T}), "
        f"rms {float(wave.pow(2).mean().sqrt()):.3f}, clipped {clipped:.4f}")


AUDIO_BASE = dict(encoder_dim=4, latent_dim=16, latent_channels=8, num_attention_heads=2, sampling_rate=32000,
                  resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]])

AUDIO_CASES = {
    "audio_oddpad": dict(AUDIO_BASE, encoder_rates=[5, 4], decoder_dim=16, decoder_rates=[4, 5],
                         decoder_kernel_sizes=[7, 10]),
    "audio_oddch": dict(AUDIO_BASE, encoder_rates=[5, 2, 2], decoder_dim=12, decoder_rates=[2, 2, 5],
                        decoder_kernel_sizes=[4, 4, 9]),
    "audio_zip": dict(AUDIO_BASE, encoder_rates=[5, 2], decoder_dim=16, decoder_rates=[2, 5],
                      decoder_kernel_sizes=[4, 9, 11], resblock_kernel_sizes=[3],
                      resblock_dilation_sizes=[[1, 3], [1, 5]]),
}


# ---------------------------------------------------------------------------------------------------------
# DiT
# ---------------------------------------------------------------------------------------------------------

DIT_INPUTS = "tests/golden/dit/tiny/t2va.in.safetensors"
DIT_CONFIG = "tests/golden/dit/tiny/diffusers/config.json"
DIT_INPUT_NAMES = ["hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep", "timestep_indices",
                   "token_tags", "position_ids", "video_indices", "audio_indices", "text_indices"]


def dit_case(name, out, seed=4242):
    from diffusers import MiniMaxH3Transformer3DModel
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with open(DIT_CONFIG) as f:
        base = json.load(f)
    cfg = {k: v for k, v in base.items() if not k.startswith("_")}
    cfg.update(freq_dim=33, norm_eps=0.0, qk_norm_eps=0.0, final_norm_eps=0.0)
    try:
        model = MiniMaxH3Transformer3DModel(**cfg).float().eval()
    except Exception:
        traceback.print_exc()
        fail(f"{name}: the reference refuses the config {cfg}")
        return
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mname, mod in model.named_modules():
            if isinstance(mod, nn.Linear):
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) / math.sqrt(mod.in_features))
                if mod.bias is not None:
                    mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
            elif isinstance(mod, nn.RMSNorm):
                mod.weight.copy_(1.0 + 0.2 * torch.randn(mod.weight.shape, generator=g))
        # AdaLN projections: modulation rms about 0.3 over t in [0, 1], so that no block saturates
        ts = torch.linspace(0.0, 1.0, 17)
        u = nn.functional.silu(model.time_embedder(model.time_proj(ts).float()))
        if u.shape[-1] != cfg["time_embed_dim"] or model.time_proj(ts).shape[-1] != 33:
            fail(f"{name}: unexpected timestep feature width {model.time_proj(ts).shape}")
        for lin in [blk.adaln_proj.linear for blk in model.transformer_blocks] + [model.norm_out.linear]:
            y = u @ lin.weight.t()
            lin.weight.mul_(0.3 / float(y.pow(2).mean().sqrt()))
    feats = model.time_proj(torch.tensor([0.3]))
    if float(feats[0, -1]) != 0.0:
        fail(f"{name}: the odd timestep feature is not the zero pad ({float(feats[0, -1])})")
    inputs = load_st(DIT_INPUTS)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        res = model(**{k: inputs[k] for k in DIT_INPUT_NAMES}, return_dict=True)
    sample, audio = res.sample.float(), res.audio_sample.float()
    if not (check_output(name + " sample", sample) and check_output(name + " audio_sample", audio)):
        return
    d = os.path.join(out, name)
    mdir = os.path.join(d, "model")
    model.save_pretrained(mdir)
    tensors = {k: inputs[k] for k in DIT_INPUT_NAMES}
    tensors.update(sample=sample, audio_sample=audio)
    save_st(os.path.join(d, "io.safetensors"), tensors,
            {"producer": "tools/golden/make_relaxed_fixtures.py", "case": name, "inputs": DIT_INPUTS,
             "torch": torch.__version__})
    m2 = MiniMaxH3Transformer3DModel.from_pretrained(mdir, torch_dtype=torch.float32).eval()
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        r2 = m2(**{k: inputs[k] for k in DIT_INPUT_NAMES}, return_dict=True)
    if not (torch.equal(r2.sample.float(), sample) and torch.equal(r2.audio_sample.float(), audio)):
        fail(f"{name}: from_pretrained does not reproduce the outputs")
    with open(os.path.join(mdir, "config.json")) as f:
        saved = json.load(f)
    if saved.get("freq_dim") != 33 or saved.get("norm_eps") != 0.0:
        fail(f"{name}: saved config lost the relaxed fields: {saved}")
    log(f"{name}: sample {list(sample.shape)}, audio_sample {list(audio.shape)}, freq_dim 33, eps 0")


# ---------------------------------------------------------------------------------------------------------
# Text encoder
# ---------------------------------------------------------------------------------------------------------

TE_TAP = 2
TE_TEXT = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=0.0,
               attention_bias=True, attention_dropout=0.0, tie_word_embeddings=False)
TE_VISION = dict(depth=1, hidden_size=32, hidden_act="gelu_pytorch_tanh", intermediate_size=64, num_heads=2,
                 in_channels=3, patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                 num_position_embeddings=64, deepstack_visual_indexes=[0])


def te_case(name, out, seed=777):
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    rope = {"rope_type": "default", "rope_theta": 5000000.0}  # no mrope_section: the default [24, 20, 20]
    try:
        try:
            cfg = Qwen3VLConfig(text_config=dict(TE_TEXT, rope_parameters=dict(rope)), vision_config=dict(TE_VISION),
                                image_token_id=500, video_token_id=501, vision_start_token_id=502,
                                vision_end_token_id=503, tie_word_embeddings=False)
        except TypeError:  # older transformers: rope_scaling + rope_theta
            cfg = Qwen3VLConfig(text_config=dict(TE_TEXT, rope_scaling={"rope_type": "default"},
                                                 rope_theta=rope["rope_theta"]),
                                vision_config=dict(TE_VISION), image_token_id=500, video_token_id=501,
                                vision_start_token_id=502, vision_end_token_id=503, tie_word_embeddings=False)
        try:
            model = Qwen3VLForConditionalGeneration._from_config(cfg, attn_implementation="eager")
        except Exception:
            model = Qwen3VLForConditionalGeneration(cfg)
        model = model.to(torch.float32).eval()
    except Exception:
        traceback.print_exc()
        fail(f"{name}: the reference refuses the config")
        return
    lm = model.model.language_model
    ms = getattr(lm.rotary_emb, "mrope_section", None)
    log(f"{name}: mrope_section in the model: {ms}")
    if lm.layers[0].self_attn.q_proj.bias is None or lm.layers[0].self_attn.o_proj.bias is None:
        fail(f"{name}: attention_bias true built no q/o biases")
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if p.ndim >= 2:
                fan_in = p[0].numel()
                v = torch.randn(p.shape, generator=g) / math.sqrt(fan_in)
            elif pname.endswith("norm.weight") or pname.endswith("layernorm.weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            else:  # biases
                v = 0.2 * torch.randn(p.shape, generator=g)
            p.copy_(v)
    ids = torch.randint(0, 500, (1, 23), generator=g, dtype=torch.long)

    def run(m):
        kw = dict(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False, output_hidden_states=True)
        with torch.no_grad():
            try:
                o = m.model(mm_token_type_ids=torch.zeros_like(ids), **kw)
            except TypeError:
                o = m.model(**kw)
        return o.hidden_states[TE_TAP][0].float()

    hidden = run(model)
    if not check_output(name, hidden):
        return
    d = os.path.join(out, name)
    mdir = os.path.join(d, "model")
    model.save_pretrained(mdir)
    for f in sorted(os.listdir(mdir)):  # configs and weights only (no generation config etc.)
        if f != "config.json" and not f.endswith(".safetensors") and not f.endswith(".index.json"):
            os.remove(os.path.join(mdir, f))
    if not any(f.endswith(".safetensors") for f in os.listdir(mdir)):
        fail(f"{name}: save_pretrained wrote no .safetensors")
    save_st(os.path.join(d, "io.safetensors"), {"input_ids": ids[0].to(torch.int64), "hidden": hidden},
            {"producer": "tools/golden/make_relaxed_fixtures.py", "case": name, "tap": str(TE_TAP),
             "torch": torch.__version__})
    with open(os.path.join(mdir, "config.json")) as f:
        saved = json.load(f)
    tc = saved.get("text_config", {})
    if not tc.get("attention_bias") or tc.get("rms_norm_eps") != 0.0:
        fail(f"{name}: saved config lost the relaxed fields: {tc}")
    re = Qwen3VLForConditionalGeneration.from_pretrained(mdir, dtype=torch.float32, attn_implementation="eager").eval()
    if not torch.equal(run(re), hidden):
        fail(f"{name}: from_pretrained does not reproduce hidden_states[{TE_TAP}]")
    log(f"{name}: {ids.shape[1]} tokens -> hidden {list(hidden.shape)} (tap {TE_TAP}), saved rope {tc.get('rope_parameters')}")


# ---------------------------------------------------------------------------------------------------------
# Video VAE
# ---------------------------------------------------------------------------------------------------------

VVAE_CONFIG = "tests/golden/video_vae/diffusers/config.json"
VVAE_CASES = {
    "vvae_ffn": dict(decoder_ffn_mult=2.5),
    "vvae_nolayers": dict(decoder_num_layers=0),
    # a narrow FFN keeps the fixture small (at the default width the 408-wide block is 11 MB of f32)
    "vvae_widerope": dict(decoder_num_attention_heads=1, decoder_attention_head_dim=408, decoder_rope_dim_ratio=1.0,
                          decoder_num_layers=1, decoder_ffn_mult=0.25),
}


def vvae_case(name, patch, out, seed=99):
    from diffusers import AutoencoderKLMiniMaxH3

    with open(VVAE_CONFIG) as f:
        base = json.load(f)
    cfg = {k: v for k, v in base.items() if not k.startswith("_")}
    cfg.update(patch)
    try:
        vae = AutoencoderKLMiniMaxH3(**cfg).float().eval()
    except Exception:
        traceback.print_exc()
        fail(f"{name}: the reference refuses the config {patch}")
        return
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in vae.named_parameters():
            if pname.endswith("scale1") or pname.endswith("scale2"):
                v = 0.6 * torch.randn(p.shape, generator=g)
            elif "register_tokens" in pname:
                v = torch.randn(p.shape, generator=g)
            elif "norm" in pname and pname.endswith("weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif pname.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif p.ndim >= 2:
                v = torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5
            else:
                v = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(v)
    if "decoder_ffn_mult" in patch:
        w2 = vae.decoder.transformer_blocks[0].ff.net[2].weight
        want = int(cfg["decoder_num_attention_heads"] * cfg["decoder_attention_head_dim"] * patch["decoder_ffn_mult"])
        if w2.shape[1] != want:
            fail(f"{name}: FFN width {w2.shape[1]}, expected int(dim * mult) = {want}")
    if len(vae.decoder.transformer_blocks) != cfg["decoder_num_layers"]:
        fail(f"{name}: {len(vae.decoder.transformer_blocks)} blocks built")
    T, h, w = 3, 2, 3
    z = torch.randn((1, cfg["latent_channels"], T, h, w), generator=g, dtype=torch.float32)
    with torch.no_grad():
        res = vae.decoder(vae.post_quant_conv(z)).float()
    if not check_output(name, res):
        return
    d = os.path.join(out, name)
    mdir = os.path.join(d, "model")
    os.makedirs(mdir, exist_ok=True)
    write_json(os.path.join(mdir, "config.json"),
               {"_class_name": "AutoencoderKLMiniMaxH3", "_diffusers_version": "0.36.0.dev0", **cfg})
    save_st(os.path.join(mdir, "diffusion_pytorch_model.safetensors"), vae.state_dict())
    save_st(os.path.join(d, "io.safetensors"), {"z": z[0], "out": res[0]},
            {"producer": "tools/golden/make_relaxed_fixtures.py", "case": name, "torch": torch.__version__})
    v2 = AutoencoderKLMiniMaxH3.from_pretrained(mdir, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        r2 = v2.decoder(v2.post_quant_conv(z)).float()
    if not torch.equal(r2, res):
        fail(f"{name}: from_pretrained does not reproduce the decoder output")
    log(f"{name}: {patch} z {list(z.shape)} -> {list(res.shape)}")


# ---------------------------------------------------------------------------------------------------------


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    for p in (DIT_INPUTS, DIT_CONFIG, VVAE_CONFIG):
        if not os.path.isfile(p):
            raise SystemExit(f"{p} not found: run from the repository root")
    os.makedirs(out, exist_ok=True)
    log(f"torch {torch.__version__}")
    steps = [(n, lambda n=n, c=c, i=i: audio_case(n, c, 12, 1000 + i, out))
             for i, (n, c) in enumerate(AUDIO_CASES.items())]
    steps.append(("dit_relaxed", lambda: dit_case("dit_relaxed", out)))
    steps.append(("te_bias", lambda: te_case("te_bias", out)))
    steps += [(n, lambda n=n, p=p: vvae_case(n, p, out)) for n, p in VVAE_CASES.items()]
    for n, fn in steps:
        try:
            fn()
        except Exception:
            traceback.print_exc()
            fail(f"{n}: exception")
    write_json(os.path.join(out, "cases.json"), {"cases": [n for n, _ in steps], "failures": FAILURES})
    if len(sys.argv) > 2 and not FAILURES:
        with tarfile.open(sys.argv[2], "w") as tf:
            tf.add(out, arcname="relaxed")
        log(f"wrote {sys.argv[2]}")
    if FAILURES:
        log(f"{len(FAILURES)} failure(s):")
        for f in FAILURES:
            log("  " + f)
        sys.exit(1)
    log("all cases written")


if __name__ == "__main__":
    main()
