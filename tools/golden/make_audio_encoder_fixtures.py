#!/usr/bin/env python3
"""Golden fixtures for reference AUDIO input (tests/golden/audio_encoder/), produced by the reference code.

Run on the GPU machine (PyTorch; everything is computed on the CPU in float32, one thread), from the repository
root (it reads the small media files of tests/data/audio), with the diffusers sources on PYTHONPATH:

    PYTHONPATH=.ref/dmin/src python3 tools/golden/make_audio_encoder_fixtures.py /tmp/h3aenc --tar OUT.tar

then unpack here: `tar -xf OUT.tar -C tests/golden/` (the tar holds `audio_encoder/...`, about 1.5 MB).

Three parts, each written as soon as it is done (a part that cannot run is skipped with a loud line and listed in
cases.json "skipped"; a failed self-check is a hard failure: exit 1, listed in cases.json "failures"):

1. ENCODER (needs torch + the diffusers source).  diffusers' `AutoencoderKLMiniMaxH3Audio` built from four small
   configurations with seeded random parameters (weight_g, Snake1d alpha, every bias, the LayerNorms, the causal
   attention's q / v biases; latent statistics), written as `<cfg>/model/` (config.json +
   diffusion_pytorch_model.safetensors, diffusers names, weight_g / weight_v):
     tiny  encoder_dim 4, encoder_rates (2, 2), latent_dim 32, 8 channels, 2 heads (the diffusers unit-test trunk)
     mid   encoder_dim 4, encoder_rates (5, 2, 2): the odd stride 5 with its ceil(5/2) padding
     pool  encoder_dim 4, encoder_rates (3, 2), latent_dim 36, 9 channels, 3 heads: head_dim 12 pooled to 9
           (adaptive_avg_pool1d with uneven, overlapping windows)
     wide  encoder_dim 2, encoder_rates (2, 4, 4, 5, 5) (the released strides, hop 800), latent_dim 16, 8 channels,
           4 heads: head_dim 4 pooled UP to 8
   (each with a one-stage stand-in decoder of the same hop: the decoder is not under test here).  For every case
   `<cfg>/io.safetensors` holds `case<c>.wave` [B, N] (the stereo channels as batch items, as the pipeline passes
   them), `case<c>.mean` [B, C, T] = `encode(wave[:, None]).latent_dist.mode()` and `case<c>.rows` [B * T, C], the
   condition rows of diffusers' `MiniMaxH3Ref2VAReferenceEncoderStep.__call__` (called itself, with stand-in
   components and block state; compiled from its source when the modular pipeline does not import; a replica of its
   three lines only if that fails too: cases.json "notes" says which).  Self-checks: T = ceil(N / hop); mode() is the mean; the reloaded file re-encodes bit for bit; rows
   of the step equal the replica bit for bit; outputs finite; the float32 encode within 1e-4 rel-L2 of a float64
   copy (the figure is recorded: it is the floor the C side's 1e-5 bar sits on).

2. RESAMPLER (needs torchaudio).  `torchaudio.transforms.Resample(rate, 32000)` at its defaults on deterministic
   signals (tones up to near the source's Nyquist, a chirp, uniform noise, a step; peak ~0.95) for 44.1 k, 48 k,
   16 k and 8 k, mono and stereo, plus 22.05 k, 11.025 k, 96 k, 24 k, 12 k and 32 k (identity), in
   `resample.safetensors`: `case<i>.x` [C, S], `case<i>.y` [C, S'], `case<i>.rate` [1] (float32).  Without
   torchaudio this part is skipped (the line says so) and the encoder part is still written.

3. MEDIA (decode + the pipeline's preprocessing).  Six files of tests/data/audio decoded as the reference does
   (`references.py` `_decode_audio_file` / `_decode_video_file`, needs PyAV; without PyAV only the PCM WAV files,
   read with Python's `wave` module, which for PCM is exact and equal to FFmpeg's conversion), then
   `MiniMaxH3Ref2VASetupStep._normalize_audio_condition(waveform, rate, 32000, num_frames / 24)` (the reference's own
   function: imported, or compiled from its source when the module does not import; needs torchaudio unless the rate
   is 32 kHz).  `media.safetensors`: `file<i>.decoded` [C, S], `file<i>.prepared` [2, S'], metadata `file<i>.name`,
   `file<i>.frames`, `file<i>.video` ("1": a video's soundtrack pass), `file<i>.decoder`.  A file the helpers
   cannot decode with this PyAV (an old one lacks `VideoFrame.rotation`) is skipped alone, loudly.

This file is our own code; the reference is only imported and called (or, for the two pipeline helpers when their
modules cannot be imported, their own source text compiled: nothing of it is copied here).
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import struct
import sys
import tarfile
import traceback
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_num_threads(1)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VAE_MODULE = "diffusers.models.autoencoders.autoencoder_kl_minimax_h3_audio"
ENC_MODULE = "diffusers.modular_pipelines.minimax_h3.encoders"
SETUP_MODULE = "diffusers.modular_pipelines.minimax_h3.before_encoder"
REFS_MODULE = "diffusers.modular_pipelines.minimax_h3.references"
TARGET_RATE = 32000
FPS = 24

FAILURES = []
SKIPPED = []
NOTES = {}


def log(msg):
    print(f"[audio_encoder] {msg}", flush=True)


def fail(msg):
    FAILURES.append(msg)
    print(f"[audio_encoder] SELF-CHECK FAILED: {msg}", flush=True)


def skip(msg):
    SKIPPED.append(msg)
    print(f"[audio_encoder] ***** PART SKIPPED: {msg} *****", flush=True)


def find_source(rel):
    """A diffusers source file (rel under diffusers/) on sys.path, PYTHONPATH or the usual carried folders."""
    cands = list(sys.path) + [os.path.join(ROOT, ".ref/dmin/src"), os.path.join(ROOT, ".ref/diffusers/src")]
    for p in cands:
        f = os.path.join(p or ".", "diffusers", rel)
        if os.path.isfile(f):
            return f
    return None


# ---------------------------------------------------------------------------
# The reference audio VAE: the diffusers package when it imports; otherwise the
# same source file executed with minimal stand-ins for diffusers' plumbing.
# ---------------------------------------------------------------------------


def _stub(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def load_vae_module():
    try:
        return importlib.import_module(VAE_MODULE), "diffusers package"
    except Exception as e:  # noqa: BLE001 - report and fall back
        log(f"importing {VAE_MODULE} failed ({e!r}); using its source file with stand-ins for the plumbing")
    path = find_source("models/autoencoders/autoencoder_kl_minimax_h3_audio.py")
    if path is None:
        raise SystemExit("[audio_encoder] FATAL: autoencoder_kl_minimax_h3_audio.py not found (PYTHONPATH=.ref/dmin/src?)")
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
        # diffusers' native backend: [B, S, H, D] in, SDPA over [B, H, S, D]
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

    _stub("diffusers")
    _stub("diffusers.configuration_utils", ConfigMixin=ConfigMixin, register_to_config=register_to_config)
    _stub("diffusers.utils", BaseOutput=BaseOutput)
    _stub("diffusers.utils.accelerate_utils", apply_forward_hook=lambda f: f)
    _stub("diffusers.utils.torch_utils", randn_tensor=randn_tensor)
    _stub("diffusers.models")
    _stub("diffusers.models.attention", AttentionMixin=AttentionMixin, AttentionModuleMixin=AttentionModuleMixin)
    _stub("diffusers.models.attention_dispatch", dispatch_attention_fn=dispatch_attention_fn)
    _stub("diffusers.models.modeling_utils", ModelMixin=ModelMixin, get_parameter_dtype=get_parameter_dtype)
    _stub("diffusers.models.autoencoders")
    _stub("diffusers.models.autoencoders.vae", DecoderOutput=DecoderOutput)
    spec = importlib.util.spec_from_file_location(VAE_MODULE, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "diffusers.models.autoencoders"
    sys.modules[VAE_MODULE] = mod
    spec.loader.exec_module(mod)
    return mod, "source file with stand-ins (" + path + ")"


def compile_function(rel, qualname, env):
    """The reference's own function `qualname` ("Class.method" or "func") compiled from its source file, with
    `env` as its globals (decorators dropped: staticmethod only).  None when not found."""
    path = find_source(rel)
    if path is None:
        return None
    tree = ast.parse(open(path).read(), filename=path)
    parts = qualname.split(".")
    body = tree.body
    node = None
    for i, part in enumerate(parts):
        node = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    node.decorator_list = []
    for n in ast.walk(node):  # annotations name the pipeline's classes: not needed to run the body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n.returns = None
            for a in n.args.args + n.args.kwonlyargs + n.args.posonlyargs + [n.args.vararg, n.args.kwarg]:
                if a is not None:
                    a.annotation = None
    mod = ast.Module(body=[node], type_ignores=[])
    code = compile(mod, filename=path, mode="exec")
    g = dict(env)
    exec(code, g)  # noqa: S102 - the reference's own code
    return g[parts[-1]]


# ---------------------------------------------------------------------------
# safetensors (the safetensors package when present, else a minimal writer)
# ---------------------------------------------------------------------------


def save_st(path, tensors, metadata=None):
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}  # no shared storage
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    try:
        from safetensors.torch import save_file

        save_file(tensors, path, metadata=meta or None)
        return
    except ImportError:
        pass
    names = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k]
        b = t.numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if meta:
        header["__metadata__"] = meta
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
        dt = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[v["dtype"]]
        out[k] = torch.from_numpy(np.frombuffer(data[a:b], dtype=dt).copy()).reshape(v["shape"])
    return out


def rel_l2(a, b):
    a, b = a.double(), b.double()
    d = (b.norm()).item()
    return (a - b).norm().item() / d if d else (a - b).norm().item()


def finite(t):
    return bool(torch.isfinite(t).all().item())


# ---------------------------------------------------------------------------
# 1. encoder
# ---------------------------------------------------------------------------

CONFIGS = {
    "tiny": dict(encoder_dim=4, encoder_rates=(2, 2), latent_dim=32, latent_channels=8, num_attention_heads=2),
    "mid": dict(encoder_dim=4, encoder_rates=(5, 2, 2), latent_dim=32, latent_channels=8, num_attention_heads=2),
    "pool": dict(encoder_dim=4, encoder_rates=(3, 2), latent_dim=36, latent_channels=9, num_attention_heads=3),
    "wide": dict(encoder_dim=2, encoder_rates=(2, 4, 4, 5, 5), latent_dim=16, latent_channels=8, num_attention_heads=4),
}
# (B, N) per case: N not a multiple of the hop (right pad), shorter than one hop, and long enough for the causal
# attention to span many positions.
CASES = {
    "tiny": [(2, 203), (1, 3), (2, 400)],
    "mid": [(2, 1213), (2, 7), (2, 2000)],
    "pool": [(2, 611), (1, 5), (2, 360)],
    "wide": [(2, 9637), (2, 801), (1, 100)],
}


def full_config(name, seed):
    c = dict(CONFIGS[name])
    hop = math.prod(c["encoder_rates"])
    # the stand-in decoder: one transposed-conv stage of the hop, two channels, one AMP kernel
    c.update(
        decoder_dim=4,
        decoder_rates=(hop,),
        decoder_kernel_sizes=(2 * hop,),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1,),),
        sampling_rate=TARGET_RATE,
    )
    g = torch.Generator().manual_seed(seed)
    C = c["latent_channels"]
    c["latents_mean"] = [float(x) for x in torch.randn(C, generator=g, dtype=torch.float64) * 0.3]
    c["latents_std"] = [float(x) for x in torch.rand(C, generator=g, dtype=torch.float64) * 1.5 + 0.5]
    return c


def randomize(mod, model, gen):
    """Move every parameter away from where initialisation leaves it."""

    def U(t, lo, hi):
        return (torch.rand(t.shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo).to(t.dtype)

    def N(t, s):
        return (torch.randn(t.shape, generator=gen, dtype=torch.float64) * s).to(t.dtype)

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


def test_wave(B, N, seed):
    """Deterministic [B, N] float32 waveforms: two tones, a chirp and some noise, peak below 1."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(N, dtype=torch.float64) / TARGET_RATE
    rows = []
    for b in range(B):
        f1, f2 = 220.0 * (b + 1), 3100.0 + 700.0 * b
        x = 0.4 * torch.sin(2 * math.pi * f1 * t) + 0.2 * torch.sin(2 * math.pi * f2 * t + 0.3 * b)
        x += 0.15 * torch.sin(2 * math.pi * (500.0 + 4.0e5 * t) * t)
        x += 0.1 * (torch.rand(N, generator=g, dtype=torch.float64) * 2 - 1)
        rows.append(x)
    return torch.stack(rows).to(torch.float32)


def clone_model(mod, cfg, model):
    m2 = mod.AutoencoderKLMiniMaxH3Audio(**cfg).eval()
    m2.load_state_dict(model.state_dict(), strict=True)
    return m2


def reference_rows_via_step(step_call, model, C, wave):
    """diffusers' MiniMaxH3Ref2VAReferenceEncoderStep.__call__ on one audio reference (stand-in components and
    block state: the step's own code runs)."""
    block_state = types.SimpleNamespace(
        normalized_references=[types.SimpleNamespace(kind="audio", has_audio=True, audio=wave)]
    )
    fake_self = types.SimpleNamespace(get_block_state=lambda state: block_state, set_block_state=lambda s, b: None)
    components = types.SimpleNamespace(
        _execution_device=torch.device("cpu"), audio_vae=model, audio_latent_channels=C
    )
    step_call(fake_self, components, None)
    out = block_state.audio_condition_latents
    if len(out) != 1:
        raise RuntimeError(f"the step gave {len(out)} row blocks for one reference")
    return out[0]


def replica_rows(model, C, wave):
    """The three lines of the step (encoders.py), for when the modular pipeline does not import."""
    mean_t = torch.tensor(model.config.latents_mean).view(1, 1, -1)
    std_t = torch.tensor(model.config.latents_std).view(1, 1, -1)
    posterior = model.encode(wave[:, None], return_dict=False)[0]
    latents = posterior.mode().float().cpu().transpose(1, 2)
    return ((latents - mean_t) / std_t).reshape(-1, C)


def part_encoder(mod, out_root):
    step_call, how = None, "replica of encoders.py MiniMaxH3Ref2VAReferenceEncoderStep (module did not import)"
    try:
        enc = importlib.import_module(ENC_MODULE)
        step_call = enc.MiniMaxH3Ref2VAReferenceEncoderStep.__call__
        how = "diffusers MiniMaxH3Ref2VAReferenceEncoderStep.__call__"
    except Exception as e:  # noqa: BLE001
        log(f"importing {ENC_MODULE} failed ({e!r}); compiling the step's __call__ from its source")
        import numpy as np

        def no_video(*a, **k):
            raise RuntimeError("encode_vae_condition: not for audio references")

        try:
            step_call = compile_function("modular_pipelines/minimax_h3/encoders.py",
                                         "MiniMaxH3Ref2VAReferenceEncoderStep.__call__",
                                         {"torch": torch, "np": np, "encode_vae_condition": no_video})
        except Exception as e2:  # noqa: BLE001
            log(f"compiling it failed too ({e2!r}): the rows come from a replica of its three lines")
            step_call = None
        if step_call is not None:
            how = "diffusers MiniMaxH3Ref2VAReferenceEncoderStep.__call__ (compiled from its source)"
    NOTES["rows_by"] = how
    log(f"rows by: {how}")
    summary = {}
    for ci, name in enumerate(CONFIGS):
        cfg = full_config(name, 100 + ci)
        gen = torch.Generator().manual_seed(2000 + ci)
        model = mod.AutoencoderKLMiniMaxH3Audio(**cfg).eval()
        randomize(mod, model, gen)
        hop = math.prod(cfg["encoder_rates"])
        C = cfg["latent_channels"]
        d = os.path.join(out_root, name)
        md = os.path.join(d, "model")
        os.makedirs(md, exist_ok=True)
        dconf = {"_class_name": "AutoencoderKLMiniMaxH3Audio", "_diffusers_version": "0.36.0.dev0"}
        for k, v in cfg.items():
            dconf[k] = [list(x) for x in v] if k == "resblock_dilation_sizes" else (list(v) if isinstance(v, tuple) else v)
        with open(os.path.join(md, "config.json"), "w") as f:
            json.dump(dconf, f, indent=2)
        wpath = os.path.join(md, "diffusion_pytorch_model.safetensors")
        save_st(wpath, dict(model.state_dict()))
        reloaded = mod.AutoencoderKLMiniMaxH3Audio(**cfg).eval()
        reloaded.load_state_dict(load_st(wpath), strict=True)
        m64 = clone_model(mod, cfg, model).double()

        tensors, cases = {}, []
        for c, (B, N) in enumerate(CASES[name]):
            wave = test_wave(B, N, 31 * ci + c)
            with torch.no_grad():
                post = model.encode(wave[:, None], return_dict=False)[0]
                mean = post.mode()
                mean2 = reloaded.encode(wave[:, None], return_dict=False)[0].mode()
                mean64 = m64.encode(wave[:, None].double(), return_dict=False)[0].mode()
                if step_call is not None:
                    rows = reference_rows_via_step(step_call, model, C, wave)
                    rrep = replica_rows(model, C, wave)
                    if not torch.equal(rows, rrep):
                        fail(f"{name} case {c}: the step's rows differ from the replica (max {(rows - rrep).abs().max().item():.3e})")
                else:
                    rows = replica_rows(model, C, wave)
            T = math.ceil(N / hop)
            tag = f"{name} case {c} (B {B}, N {N})"
            if tuple(mean.shape) != (B, C, T):
                fail(f"{tag}: mean shape {tuple(mean.shape)}, expected {(B, C, T)}")
            if tuple(rows.shape) != (B * T, C):
                fail(f"{tag}: rows shape {tuple(rows.shape)}, expected {(B * T, C)}")
            if post.mean is not mean:
                fail(f"{tag}: mode() is not the mean")
            if not torch.equal(mean, mean2):
                fail(f"{tag}: the reloaded file does not re-encode bit for bit")
            if not (finite(mean) and finite(rows)):
                fail(f"{tag}: non-finite output")
            e64 = rel_l2(mean, mean64)
            if not e64 <= 1e-4:
                fail(f"{tag}: float32 vs float64 rel-L2 {e64:.3e} (> 1e-4)")
            rms = mean.pow(2).mean().sqrt().item()
            log(f"{tag}: T {T}, mean rms {rms:.4f}, f32 vs f64 rel-L2 {e64:.3e}")
            tensors[f"case{c}.wave"] = wave
            tensors[f"case{c}.mean"] = mean.float().contiguous()
            tensors[f"case{c}.rows"] = rows.float().contiguous()
            cases.append({"B": B, "N": N, "T": T, "f32_vs_f64_rel_l2": e64, "mean_rms": rms})
        save_st(
            os.path.join(d, "io.safetensors"),
            tensors,
            {"producer": "tools/golden/make_audio_encoder_fixtures.py", "hop": hop, "torch": torch.__version__,
             "rows_by": how},
        )
        summary[name] = {"hop": hop, "latent_channels": C, "cases": cases,
                         "params": sum(p.numel() for p in model.parameters())}
        log(f"{name}: wrote {d} (hop {hop}, {len(cases)} cases)")
    return summary


# ---------------------------------------------------------------------------
# 2. resampler
# ---------------------------------------------------------------------------

RESAMPLE_CASES = [  # (rate, channels, samples)
    (44100, 1, 2213), (44100, 2, 2205), (48000, 1, 2400), (48000, 2, 2411),
    (16000, 1, 803), (16000, 2, 800), (8000, 1, 401), (8000, 2, 400),
    (22050, 2, 1103), (11025, 1, 557), (96000, 2, 4807), (24000, 1, 1201), (12000, 2, 601), (32000, 2, 500),
]


def resample_signal(rate, C, S, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(S, dtype=torch.float64) / rate
    nyq = rate / 2
    rows = []
    for c in range(C):
        x = 0.35 * torch.sin(2 * math.pi * (311.0 + 97 * c) * t)
        x += 0.2 * torch.sin(2 * math.pi * (0.93 - 0.05 * c) * nyq * t)          # near the source's Nyquist
        x += 0.15 * torch.sin(2 * math.pi * (100.0 + 0.45 * nyq / (2 * t[-1].item() + 1e-9) * t) * t)  # chirp
        x += 0.15 * (torch.rand(S, generator=g, dtype=torch.float64) * 2 - 1)
        x[S // 2 + c:] += 0.1                                                   # a step
        rows.append(x)
    x = torch.stack(rows)
    return (x * (0.95 / x.abs().max())).to(torch.float32)


def part_resample(out_root):
    try:
        import torchaudio
    except Exception as e:  # noqa: BLE001
        skip(f"RESAMPLER: torchaudio is not importable here ({e!r}); resample.safetensors NOT written "
             "(test_audio_input skips its torchaudio comparison until it is)")
        return None
    NOTES["torchaudio"] = torchaudio.__version__
    tensors, cases = {}, []
    for i, (rate, C, S) in enumerate(RESAMPLE_CASES):
        x = resample_signal(rate, C, S, 700 + i)
        with torch.no_grad():
            y = torchaudio.transforms.Resample(rate, TARGET_RATE)(x)
        o, q = rate // math.gcd(rate, TARGET_RATE), TARGET_RATE // math.gcd(rate, TARGET_RATE)
        want = math.ceil(float(torch.tensor(q * S / o, dtype=torch.float32)))
        if y.shape[0] != C or y.dtype != torch.float32 or not finite(y):
            fail(f"resample case {i} ({rate} Hz): output {tuple(y.shape)} {y.dtype}")
        if rate == TARGET_RATE and not torch.equal(x, y):
            fail(f"resample case {i}: 32 kHz is not an identity")
        log(f"resample case {i}: {rate} Hz x{C} {S} -> {y.shape[1]} (float32 length rule gives {want})")
        tensors[f"case{i}.x"] = x
        tensors[f"case{i}.y"] = y.contiguous()
        tensors[f"case{i}.rate"] = torch.tensor([float(rate)], dtype=torch.float32)
        cases.append({"rate": rate, "channels": C, "samples": S, "out": int(y.shape[1]), "length_rule": want})
    save_st(os.path.join(out_root, "resample.safetensors"), tensors,
            {"producer": "tools/golden/make_audio_encoder_fixtures.py", "torchaudio": torchaudio.__version__,
             "torch": torch.__version__, "target": TARGET_RATE})
    log(f"resampler: wrote {len(cases)} cases")
    return cases


# ---------------------------------------------------------------------------
# 3. media: the reference's decode and preprocessing
# ---------------------------------------------------------------------------

MEDIA = [  # (file in tests/data/audio, num_frames, video soundtrack pass); small: the decoded clips are stored whole
    ("stereo_44k_s16.wav", 3, False),   # truncated to int(3 / 24 * 44100) = 5512, resampled
    ("mono_8k_u8.wav", 5, False),       # mono upmix, 8 kHz
    ("stereo_16k_f32.wav", 22, False),  # shorter than 22 frames: kept whole
    ("stereo_32k_s16.wav", 3, False),   # already at 32 kHz: no resampling (the one file that needs no torchaudio)
    ("stereo_44k.mp3", 3, False),       # lossy: the decoder's delay / padding handling as PyAV leaves it
    ("video_aac.mp4", 3, True),         # a video's soundtrack (the seek after the frames)
    ("stereo_44k.flac", 3, False),      # FLAC
    ("mono_48k_24.flac", 5, False),     # 24-bit FLAC, mono, 48 kHz
    ("stereo_44k.aac", 3, False),       # raw ADTS AAC
    ("stereo_44k.m4a", 3, False),       # AAC in MP4
    ("stereo_48k.opus", 3, False),      # Opus (48 kHz)
    ("mono_44k.ogg", 3, False),         # Vorbis
    ("video_opus.webm", 3, True),       # a WebM video's Opus soundtrack
]


def get_normalize():
    try:
        setup = importlib.import_module(SETUP_MODULE)
        return setup.MiniMaxH3Ref2VASetupStep._normalize_audio_condition, "diffusers (imported)"
    except Exception as e:  # noqa: BLE001
        log(f"importing {SETUP_MODULE} failed ({e!r}); compiling _normalize_audio_condition from its source")
    fn = compile_function("modular_pipelines/minimax_h3/before_encoder.py",
                          "MiniMaxH3Ref2VASetupStep._normalize_audio_condition", {"torch": torch})
    return fn, "diffusers source, compiled"


def decoded_dump_decoders(folder):
    """--decoded DIR: the reference's own decode of the test media, run where PyAV is (decode_reference_media.py):
    (decode_audio_file, decode_video_file, how) that return what the reference's functions returned there."""
    import numpy as np

    with open(os.path.join(folder, "manifest.json")) as f:
        man = json.load(f)

    def entry(path):
        e = man["files"].get(os.path.relpath(path, ROOT))
        if e is None or "npz" not in e:
            raise ValueError(f"--decoded has no decode of {path}")
        if e["sha256"] != hashlib.sha256(open(path, "rb").read()).hexdigest():
            raise ValueError(f"--decoded: {path} changed since it was decoded")
        return e

    def dec_audio(path):
        z = np.load(os.path.join(folder, entry(path)["npz"]))
        return torch.from_numpy(z["audio"]), int(z["sample_rate"])

    def dec_video(path):
        e = entry(path)
        if "as_video" not in e:
            raise ValueError(f"--decoded has no video-reference decode of {path}")
        z = np.load(os.path.join(folder, e["as_video"]["npz"]))
        return None, None, torch.from_numpy(z["audio"]), int(z["sample_rate"])

    v = man["versions"]
    return dec_audio, dec_video, f"diffusers references.py run by {man['producer']} (PyAV {v['av']}, FFmpeg libavcodec {v['ffmpeg'].get('libavcodec')})"


DECODED = None  # main(): --decoded DIR


def get_decoders():
    """(decode_audio_file, decode_video_file, how) from the reference, or (None, None, why)."""
    if DECODED:
        return decoded_dump_decoders(DECODED)
    try:
        import av  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return None, None, f"PyAV not importable ({e!r})"
    try:
        refs = importlib.import_module(REFS_MODULE)
        return refs._decode_audio_file, refs._decode_video_file, "diffusers references.py (imported) + PyAV " + av.__version__
    except Exception as e:  # noqa: BLE001
        log(f"importing {REFS_MODULE} failed ({e!r}); compiling its decode helpers from the source")
    import contextlib

    import numpy as np

    env = {"torch": torch, "np": np, "os": os, "contextlib": contextlib, "is_av_available": lambda: True}
    rel = "modular_pipelines/minimax_h3/references.py"
    names = ["_import_av", "_decode_reference_soundtrack", "_decode_audio_file", "_decode_video_file"]
    fns = {}
    for n in names:
        f = compile_function(rel, n, env)
        if f is None:
            return None, None, f"{n} not found in {rel}"
        env[n] = f
        fns[n] = f

    @contextlib.contextmanager
    def local_file(media):  # the helper's local-path branch (no download here)
        path = str(media)
        if not os.path.isfile(path):
            raise ValueError(f"{path} is not a valid path.")
        yield path

    env["_local_media_file"] = local_file
    for n in names:  # re-bind every helper's globals to the completed environment
        fns[n].__globals__.update(env)
    return fns["_decode_audio_file"], fns["_decode_video_file"], "diffusers references.py (compiled) + PyAV " + av.__version__


def wave_decode(path):
    """PCM WAV through Python's wave module as FFmpeg converts it to float: u8 (x - 128) / 128, s16 x / 2^15,
    s24 x / 2^23 (exact in float32).  None for anything else."""
    import wave

    import numpy as np

    try:
        w = wave.open(path, "rb")
    except Exception:  # noqa: BLE001 - float WAV and the like
        return None
    with w:
        ch, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        raw = w.readframes(n)
    if width == 1:
        a = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        a = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        a = v.astype(np.float32) / float(1 << 23)
    else:
        return None
    return torch.from_numpy(a.reshape(-1, ch).T.copy()), rate


def part_media(out_root):
    normalize, nhow = get_normalize()
    if normalize is None:
        skip("MEDIA: _normalize_audio_condition not found in the diffusers source")
        return None
    dec_audio, dec_video, dhow = get_decoders()
    if dec_audio is None:
        log(f"media: {dhow}: only PCM WAV files, read with Python's wave module")
    try:
        import torchaudio  # noqa: F401

        have_ta = True
    except Exception:  # noqa: BLE001
        have_ta = False
    media_dir = os.path.join(ROOT, "tests", "data", "audio")
    tensors, meta, files = {}, {"producer": "tools/golden/make_audio_encoder_fixtures.py", "normalize": nhow}, []
    i = 0
    for name, frames, video in MEDIA:
        path = os.path.join(media_dir, name)
        if not os.path.isfile(path):
            fail(f"media: {path} missing (run from the repository root)")
            continue
        try:
            if dec_audio is not None:
                if video:
                    _, _, wav, rate = dec_video(path)
                else:
                    wav, rate = dec_audio(path)
                how = dhow
            else:
                if video:
                    log(f"media: {name}: a video needs PyAV, skipped")
                    continue
                r = wave_decode(path)
                if r is None:
                    log(f"media: {name}: not PCM WAV, skipped (no PyAV)")
                    continue
                wav, rate = r
                how = "python wave module (PCM; PyAV absent)"
            if rate != TARGET_RATE and not have_ta:
                log(f"media: {name}: {rate} Hz needs torchaudio, skipped")
                continue
            prep = normalize(wav, rate, TARGET_RATE, max_duration=frames / FPS)
        except Exception:  # noqa: BLE001 - a PyAV / torchaudio version the helpers do not run on: that file only
            skip(f"MEDIA file {name}: {traceback.format_exc().strip().splitlines()[-1]}")
            continue
        if prep.ndim != 2 or prep.shape[0] != 2 or prep.dtype != torch.float32 or not finite(prep):
            fail(f"media: {name}: prepared {tuple(prep.shape)} {prep.dtype}")
            continue
        tensors[f"file{i}.decoded"] = wav.to(torch.float32).contiguous()
        tensors[f"file{i}.prepared"] = prep.contiguous()
        meta.update({f"file{i}.name": name, f"file{i}.frames": frames, f"file{i}.video": int(video),
                     f"file{i}.decoder": how, f"file{i}.rate": rate})
        log(f"media {i}: {name} ({how}): {tuple(wav.shape)} at {rate} Hz -> prepared {tuple(prep.shape)} "
            f"({frames} frames)")
        files.append({"name": name, "rate": rate, "decoded": list(wav.shape), "prepared": list(prep.shape),
                      "frames": frames, "video": video, "decoder": how})
        i += 1
    if not files:
        skip("MEDIA: no file could be decoded and prepared here (PyAV / torchaudio missing)")
        return None
    save_st(os.path.join(out_root, "media.safetensors"), tensors, meta)
    log(f"media: wrote {len(files)} files")
    return files


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", help="folder to write audio_encoder/ into")
    ap.add_argument("--tar", help="also pack audio_encoder/ into this tar")
    ap.add_argument("--decoded", help="the reference's PyAV decode of tests/data/audio made elsewhere "
                    "(tools/golden/decode_reference_media.py), where this machine has no PyAV")
    args = ap.parse_args()
    global DECODED
    DECODED = os.path.abspath(args.decoded) if args.decoded else None
    out_root = os.path.join(args.outdir, "audio_encoder")
    os.makedirs(out_root, exist_ok=True)
    log(f"torch {torch.__version__}; writing {out_root}")
    mod, how = load_vae_module()
    NOTES["vae_module"] = how
    log(f"audio VAE: {how}")

    summary = {"producer": "tools/golden/make_audio_encoder_fixtures.py", "torch": torch.__version__}
    for part, fn in (("encoder", lambda: part_encoder(mod, out_root)), ("resample", lambda: part_resample(out_root)),
                     ("media", lambda: part_media(out_root))):
        try:
            summary[part] = fn()
        except Exception:  # noqa: BLE001 - one part's crash must not lose the others
            fail(f"{part}: crashed:\n{traceback.format_exc()}")
    summary["notes"] = NOTES
    summary["skipped"] = SKIPPED
    summary["failures"] = FAILURES
    with open(os.path.join(out_root, "cases.json"), "w") as f:
        json.dump(summary, f, indent=1)
    total = 0
    for dp, _, fs in os.walk(out_root):
        total += sum(os.path.getsize(os.path.join(dp, x)) for x in fs)
    log(f"total size {total / 1e6:.2f} MB" + ("  (WARNING: above 2 MB)" if total > 2e6 else ""))
    if args.tar:
        with tarfile.open(args.tar, "w") as tf:
            tf.add(out_root, arcname="audio_encoder")
        log(f"wrote {args.tar} (unpack: tar -xf {os.path.basename(args.tar)} -C tests/golden/)")
    for s in SKIPPED:
        log(f"SKIPPED: {s}")
    if FAILURES:
        log(f"{len(FAILURES)} SELF-CHECK FAILURE(S):")
        for x in FAILURES:
            log(f"  - {x.splitlines()[0]}")
        sys.exit(1)
    log("all self-checks passed" + (" (some parts skipped, see above)" if SKIPPED else ""))


if __name__ == "__main__":
    main()
