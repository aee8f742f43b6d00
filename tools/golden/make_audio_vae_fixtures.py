#!/usr/bin/env python3
"""Golden fixtures for the audio VAE decoder (tests/golden/audio_vae/).

Runs where PyTorch is (the device machine), with the public diffusers source on
PYTHONPATH (.ref/diffusers/src):

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_audio_vae_fixtures.py OUTDIR

Builds diffusers' AutoencoderKLMiniMaxH3Audio from two small configurations,
randomizes every parameter a fixture must pin down (weight_g, SnakeBeta
alpha/beta, Snake1d alpha, biases, LayerNorms; spec audio-vae.md §11.16),
and writes the weights in every convention the loader reads:

  tiny/  the diffusers unit-test config (spec §2.4): hop 4, 8 latent channels
         diffusers/            config.json + diffusion_pytorch_model.safetensors
         comfy_nofilters.safetensors  folded weights + latents_mean/std, no filter buffers
  mid/   the released geometry at small width: rates (5, 2, 2), kernels (9, 4, 4),
         AMP kernels (3, 7, 11) x dilations (1, 3, 5); hop 20, 8 latent channels
         diffusers/            as above
         original/             config.json (MiniMaxH3AudioVAE) + metadata.json + config.yaml
                               + model.safetensors (weight_g / weight_v)
         comfy.safetensors     folded weights + filters + latents_mean/std
         param_prefixed.safetensors  parametrizations.weight.original0/1 spelling under
                               a "vae." prefix, no config and no latent statistics

Each io.safetensors holds, for T latents and for T = 1:
  audio_latents        [2, C, T]  normalized latents (what the sampler leaves)
  audio_latents_denorm [2, C, T]  z * latents_std + latents_mean (float32, as the pipeline)
  audio                [1, 2, hop*T]  the reference waveform: MiniMaxH3AudioDecodeStep's
                                   denormalize -> decode -> permute(1, 0, 2)
(suffix _t1 for T = 1).  The reference runs on the CPU in float32 (no TF32).
"""

import functools
import importlib
import importlib.util
import inspect
import json
import math
import os
import struct
import sys
import tarfile
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))

MODULE = "diffusers.models.autoencoders.autoencoder_kl_minimax_h3_audio"


# ---------------------------------------------------------------------------
# The reference module: the diffusers package when it imports; otherwise the
# same source file executed with minimal stand-ins for diffusers' plumbing
# (config registration, output dataclasses, mixins).  The network code that
# runs is the reference file either way.
# ---------------------------------------------------------------------------


def _stub_module(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def load_reference():
    try:
        mod = importlib.import_module(MODULE)
        return mod, "diffusers package"
    except Exception as e:  # noqa: BLE001 - report and fall back
        print(f"[fixtures] importing {MODULE} failed ({e!r}); using the source file with stubs")

    src_root = None
    for p in sys.path + [os.path.join(os.getcwd(), ".ref/diffusers/src")]:
        cand = os.path.join(p, "diffusers/models/autoencoders/autoencoder_kl_minimax_h3_audio.py")
        if os.path.isfile(cand):
            src_root = cand
            break
    if src_root is None:
        raise SystemExit("autoencoder_kl_minimax_h3_audio.py not found on PYTHONPATH")
    for k in list(sys.modules):
        if k == "diffusers" or k.startswith("diffusers."):
            del sys.modules[k]

    def register_to_config(init):
        @functools.wraps(init)
        def wrapper(self, *args, **kwargs):
            init(self, *args, **kwargs)
            bound = inspect.signature(init).bind(self, *args, **kwargs)
            bound.apply_defaults()
            cfg = dict(bound.arguments)
            cfg.pop("self")
            self.config = types.SimpleNamespace(**cfg)

        return wrapper

    class ConfigMixin:
        pass

    class BaseOutput:
        pass

    class AttentionMixin:
        pass

    class AttentionModuleMixin:
        def set_processor(self, processor):
            self.processor = processor

    class ModelMixin(nn.Module):
        pass

    def get_parameter_dtype(module):
        return next(module.parameters()).dtype

    def dispatch_attention_fn(q, k, v, attn_mask=None, is_causal=False, backend=None, parallel_config=None):
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=attn_mask, is_causal=is_causal
        )
        return out.transpose(1, 2)

    def randn_tensor(shape, generator=None, device=None, dtype=None):
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)

    from dataclasses import dataclass

    @dataclass
    class DecoderOutput:
        sample: torch.Tensor = None

    _stub_module("diffusers")
    _stub_module("diffusers.configuration_utils", ConfigMixin=ConfigMixin, register_to_config=register_to_config)
    _stub_module("diffusers.utils", BaseOutput=BaseOutput)
    _stub_module("diffusers.utils.accelerate_utils", apply_forward_hook=lambda f: f)
    _stub_module("diffusers.utils.torch_utils", randn_tensor=randn_tensor)
    _stub_module("diffusers.models")
    _stub_module("diffusers.models.attention", AttentionMixin=AttentionMixin, AttentionModuleMixin=AttentionModuleMixin)
    _stub_module("diffusers.models.attention_dispatch", dispatch_attention_fn=dispatch_attention_fn)
    _stub_module("diffusers.models.modeling_utils", ModelMixin=ModelMixin, get_parameter_dtype=get_parameter_dtype)
    _stub_module("diffusers.models.autoencoders")
    _stub_module("diffusers.models.autoencoders.vae", DecoderOutput=DecoderOutput)
    spec = importlib.util.spec_from_file_location(MODULE, src_root)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "diffusers.models.autoencoders"
    sys.modules[MODULE] = mod
    spec.loader.exec_module(mod)
    return mod, "source file with stubs"


# ---------------------------------------------------------------------------
# safetensors writing (the safetensors package when present)
# ---------------------------------------------------------------------------


def save_st(path, tensors, metadata=None):
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    try:
        from safetensors.torch import save_file

        save_file(tensors, path, metadata=metadata)
        return
    except ImportError:
        pass
    names = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.int64: "I64"}
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k]
        b = t.numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_st(path):
    try:
        from safetensors.torch import load_file

        return load_file(path)
    except ImportError:
        pass
    import numpy as np

    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64}[v["dtype"]]
        out[k] = torch.from_numpy(np.frombuffer(data[a:b], dtype=dt).copy()).reshape(v["shape"])
    return out


# ---------------------------------------------------------------------------


def randomize(mod, model, gen):
    """Move every parameter away from the values initialisation leaves (spec §11.16)."""

    def U(t, lo, hi):
        return torch.rand(t.shape, generator=gen, dtype=torch.float64).mul(hi - lo).add(lo).to(t.dtype)

    def N(t, s):
        return torch.randn(t.shape, generator=gen, dtype=torch.float64).mul(s).to(t.dtype)

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(U(m.weight, 0.5, 1.5))
                m.bias.copy_(N(m.bias, 0.1))
            elif isinstance(m, mod.MiniMaxH3AudioSnake1d):
                m.alpha.copy_(U(m.alpha, 0.5, 2.0))
            elif isinstance(m, mod.MiniMaxH3AudioSnakeBeta):
                m.alpha.copy_(N(m.alpha, 0.5))
                m.beta.copy_(N(m.beta, 0.5))
            elif isinstance(m, mod.MiniMaxH3AudioCausalAttention):
                m.q_bias.copy_(N(m.q_bias, 0.1))
                m.v_bias.copy_(N(m.v_bias, 0.1))
            if hasattr(m, "weight_g") and hasattr(m, "weight_v"):
                v = m.weight_v
                norm = v.pow(2).sum(dim=tuple(range(1, v.dim())), keepdim=True).sqrt()
                m.weight_g.copy_(norm * U(m.weight_g, 0.5, 1.5))
            if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d, nn.Linear)) and m.bias is not None:
                m.bias.copy_(N(m.bias, 0.1))


def clone(mod, cfg, model):
    """A fresh module with the same state (deepcopy fails on legacy weight_norm modules)."""
    m2 = mod.AutoencoderKLMiniMaxH3Audio(**cfg).eval()
    m2.load_state_dict(model.state_dict(), strict=True)
    return m2


def fold_copy(mod, cfg, model):
    """A copy with weight norm removed (plain .weight), as the Comfy-Org repack stores it."""
    m2 = clone(mod, cfg, model)
    for m in m2.modules():
        if hasattr(m, "weight_g") and hasattr(m, "weight_v"):
            torch.nn.utils.remove_weight_norm(m)
    return m2


def reference_decode(model, z_norm, mean, std):
    """MiniMaxH3AudioDecodeStep: denormalize (float32) -> decode -> permute(1, 0, 2)."""
    mean_t = torch.tensor(mean).view(1, -1, 1)
    std_t = torch.tensor(std).view(1, -1, 1)
    z = z_norm * std_t + mean_t
    with torch.no_grad():
        audio = model.decode(z, return_dict=False)[0]
    return z, audio.float().permute(1, 0, 2).contiguous()


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def build(mod, name, cfg, T, seed, out_root, variants):
    gen = torch.Generator().manual_seed(seed)
    model = mod.AutoencoderKLMiniMaxH3Audio(**cfg).eval()
    randomize(mod, model, gen)
    C = cfg["latent_channels"]
    hop = math.prod(cfg["decoder_rates"])
    mean = cfg["latents_mean"]
    std = cfg["latents_std"]
    z_main = torch.randn((2, C, T), generator=gen, dtype=torch.float32)
    z_short = torch.randn((2, C, 1), generator=gen, dtype=torch.float32)

    # Keep the output mostly inside the clamp: rescale conv_post's gain (no bias).
    captured = {}
    hook = model.decoder.conv_post.register_forward_hook(lambda m, i, o: captured.__setitem__("y", o.detach()))
    reference_decode(model, z_main, mean, std)
    hook.remove()
    rms = captured["y"].pow(2).mean().sqrt().item()
    with torch.no_grad():
        model.decoder.conv_post.weight_g.mul_(0.35 / rms)

    zd_main, audio_main = reference_decode(model, z_main, mean, std)
    zd_short, audio_short = reference_decode(model, z_short, mean, std)
    assert audio_main.shape == (1, 2, hop * T), audio_main.shape
    clipped = (audio_main.abs() >= 1.0).float().mean().item()

    # float64 copy: how far float32 itself is from exact (spec §10 expects ~5e-7)
    m64 = clone(mod, cfg, model).double()
    with torch.no_grad():
        a64 = m64.decode(zd_main.double(), return_dict=False)[0].permute(1, 0, 2)
    f32_vs_f64 = rel_l2(audio_main, a64)
    folded = fold_copy(mod, cfg, model)
    _, audio_folded = reference_decode(folded, z_main, mean, std)
    folded_vs_wn = rel_l2(audio_folded, audio_main)

    sd = {k: v for k, v in model.state_dict().items()}
    dec_params = sum(
        p.numel() for n, p in folded.named_parameters() if n.startswith("decoder.") or n.startswith("dec_in_proj.")
    )
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    meta = {
        "producer": "tools/golden/make_audio_vae_fixtures.py",
        "reference": REF_KIND,
        "torch": torch.__version__,
        "hop": str(hop),
        "decoder_params_folded": str(dec_params),
        "f32_vs_f64_rel_l2": f"{f32_vs_f64:.3e}",
        "clipped_fraction": f"{clipped:.4f}",
    }
    save_st(
        os.path.join(d, "io.safetensors"),
        {
            "audio_latents": z_main,
            "audio_latents_denorm": zd_main,
            "audio": audio_main,
            "audio_latents_t1": z_short,
            "audio_latents_denorm_t1": zd_short,
            "audio_t1": audio_short,
        },
        meta,
    )

    dconf = {"_class_name": "AutoencoderKLMiniMaxH3Audio", "_diffusers_version": "0.36.0.dev0"}
    dconf.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()})
    dconf["resblock_dilation_sizes"] = [list(x) for x in cfg["resblock_dilation_sizes"]]

    if "diffusers" in variants:
        p = os.path.join(d, "diffusers")
        os.makedirs(p, exist_ok=True)
        with open(os.path.join(p, "config.json"), "w") as f:
            json.dump(dconf, f, indent=2)
        save_st(os.path.join(p, "diffusion_pytorch_model.safetensors"), sd)
        # round trip: the saved file reproduces the reference
        m2 = mod.AutoencoderKLMiniMaxH3Audio(**cfg).eval()
        m2.load_state_dict(load_st(os.path.join(p, "diffusion_pytorch_model.safetensors")), strict=True)
        _, a2 = reference_decode(m2, z_main, mean, std)
        print(f"[fixtures] {name}: reloaded diffusers file vs reference: rel_l2 {rel_l2(a2, audio_main):.3e}")

    if "original" in variants:
        p = os.path.join(d, "original")
        os.makedirs(p, exist_ok=True)
        save_st(os.path.join(p, "model.safetensors"), sd)
        oconf = {
            "_class_name": "MiniMaxH3AudioVAE",
            "_diffusers_version": "0.32.2",
            "auto_map": {"AutoModel": "minimax_h3_audio_vae.MiniMaxH3AudioVAE"},
            "output_channel": 2,
            "sample_rate": cfg["sampling_rate"],
            "source_config_path": "config.yaml",
            "source_safetensors_path": "model.safetensors",
            "source_metadata_path": "metadata.json",
            "latent_channels": C,
            "latents_mean": mean,
            "latents_std": std,
        }
        with open(os.path.join(p, "config.json"), "w") as f:
            json.dump(oconf, f, indent=2)
        kw = {
            "attn_proj": True,
            "decoder_dim": cfg["decoder_dim"],
            "decoder_rates": list(cfg["decoder_rates"]),
            "decoder_type": "bigvgan",
            "encoder_dim": cfg["encoder_dim"],
            "encoder_rates": list(cfg["encoder_rates"]),
            "latent_dim": cfg["latent_dim"],
            "sample_rate": cfg["sampling_rate"],
            "vae_latent_channels": C,
        }
        with open(os.path.join(p, "metadata.json"), "w") as f:
            json.dump({"metadata": {"kwargs": kw}}, f, indent=2)
        with open(os.path.join(p, "config.yaml"), "w") as f:
            f.write(
                f"model_config:\n  sr: {cfg['sampling_rate']}\n  decoder_dim: {cfg['decoder_dim']}\n"
                f"  audio_channel: 1\n  vae_latent_channels: {C}\n"
            )

    fsd = dict(folded.state_dict())
    fsd["latents_mean"] = torch.tensor(mean, dtype=torch.float32)
    fsd["latents_std"] = torch.tensor(std, dtype=torch.float32)
    if "comfy" in variants:
        save_st(os.path.join(d, "comfy.safetensors"), fsd)
    if "comfy_nofilters" in variants:
        save_st(os.path.join(d, "comfy_nofilters.safetensors"), {k: v for k, v in fsd.items() if not k.endswith(".filter")})
    if "param_prefixed" in variants:
        psd = {}
        for k, v in sd.items():
            k2 = k.replace(".weight_g", ".parametrizations.weight.original0").replace(
                ".weight_v", ".parametrizations.weight.original1"
            )
            psd["vae." + k2] = v
        save_st(os.path.join(d, "param_prefixed.safetensors"), psd)

    filt = model.decoder.activation_post.upsample.filter.flatten()
    bits = [struct.unpack("<I", struct.pack("<f", float(x)))[0] for x in filt[:6]]
    print(
        f"[fixtures] {name}: T={T} hop={hop} keys={len(sd)} decoder_params_folded={dec_params} "
        f"f32_vs_f64={f32_vs_f64:.3e} folded_vs_weightnorm={folded_vs_wn:.3e} clipped={clipped:.4f} "
        f"rms={audio_main.pow(2).mean().sqrt().item():.4f} filter_bits={[hex(b) for b in bits]}"
    )


TINY = dict(
    encoder_dim=4,
    encoder_rates=(2, 2),
    latent_dim=32,
    latent_channels=8,
    num_attention_heads=2,
    decoder_dim=16,
    decoder_rates=(2, 2),
    decoder_kernel_sizes=(4, 4),
    resblock_kernel_sizes=(3, 7),
    resblock_dilation_sizes=((1, 3), (1, 3)),
    sampling_rate=32000,
)

MID = dict(
    encoder_dim=4,
    encoder_rates=(5, 2, 2),
    latent_dim=32,
    latent_channels=8,
    num_attention_heads=2,
    decoder_dim=32,
    decoder_rates=(5, 2, 2),
    decoder_kernel_sizes=(9, 4, 4),
    resblock_kernel_sizes=(3, 7, 11),
    resblock_dilation_sizes=((1, 3, 5), (1, 3, 5), (1, 3, 5)),
    sampling_rate=32000,
)


def with_stats(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    C = cfg["latent_channels"]
    c = dict(cfg)
    c["latents_mean"] = [float(x) for x in (torch.randn(C, generator=g, dtype=torch.float64) * 0.3)]
    c["latents_std"] = [float(x) for x in (torch.rand(C, generator=g, dtype=torch.float64) * 1.5 + 0.5)]
    return c


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "audio_vae_fixtures"
    mod, REF_KIND = load_reference()
    print(f"[fixtures] reference: {REF_KIND}; torch {torch.__version__}")
    os.makedirs(out, exist_ok=True)
    build(mod, "tiny", with_stats(TINY, 11), 16, 1234, out, {"diffusers", "comfy_nofilters"})
    build(mod, "mid", with_stats(MID, 12), 24, 5678, out, {"diffusers", "original", "comfy", "param_prefixed"})
    if len(sys.argv) > 2:
        with tarfile.open(sys.argv[2], "w:gz") as tf:
            tf.add(out, arcname="audio_vae")
        print(f"[fixtures] wrote {sys.argv[2]}")
