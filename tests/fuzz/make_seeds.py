#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

The seeds are small valid inputs (and a few near-misses) so that the fuzzers
start deep inside each parser:
  - tiny synthetic checkpoints with the real tensor names (DiT, text encoder,
    video VAE in its three namings, audio VAE), every safetensors dtype, a
    sharded index with its shards;
  - configs of the MiniMax-H3 release (from the snapshot given with
    --snapshot, trimmed where they are long) and of tests/golden;
  - tiny tokenizers (tokenizer.json, vocab.json + merges.txt) and texts from
    tests/golden/tokenizer/strings.jsonl.
Multi-file seeds join their files with the separator of tests/fuzz/fuzz_util.h.

  usage: tests/fuzz/make_seeds.py [--snapshot DIR]   (run from anywhere)
Only the folders this script owns are rewritten; corpus/safetensors_header/
(hand-made) and any regression inputs (names starting with "regress-") are kept.
"""
import argparse
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "tests", "golden")
SEP = b"\n--8<--\n"

# ---------------------------------------------------------------- safetensors

DT = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
      "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def encode(dtype, values):
    """Values (floats or ints) in a dtype; bf16 by truncation of f32 (exact for the values used)."""
    out = bytearray()
    for v in values:
        if dtype == "F64":
            out += struct.pack("<d", v)
        elif dtype == "F32":
            out += struct.pack("<f", v)
        elif dtype == "F16":
            out += struct.pack("<e", v)
        elif dtype == "BF16":
            out += struct.pack("<H", f32_bits(v) >> 16)
        elif dtype in ("F8_E4M3", "F8_E5M2", "U8", "BOOL"):
            out += struct.pack("<B", int(v) & 0xFF)
        elif dtype == "I8":
            out += struct.pack("<b", int(v))
        elif dtype == "I16":
            out += struct.pack("<h", int(v))
        elif dtype == "I32":
            out += struct.pack("<i", int(v))
        elif dtype == "I64":
            out += struct.pack("<q", int(v))
        else:
            raise ValueError(dtype)
    return bytes(out)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def values(n, seed):
    """Deterministic small floats exactly representable in bf16/f16."""
    return [((i * 7 + seed * 3) % 17 - 8) / 8.0 for i in range(n)]


def st_file(tensors, metadata=None):
    """tensors: list of (name, dtype, shape[, raw bytes]); returns the file bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = bytearray()
    for k, t in enumerate(tensors):
        name, dtype, shape = t[0], t[1], t[2]
        raw = t[3] if len(t) > 3 else encode(dtype, values(numel(shape), k))
        assert len(raw) == numel(shape) * DT[dtype], name
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + bytes(data)


def header_only_shapes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))

# ---------------------------------------------------------------- checkpoints


def dit_comfy(curve=False):
    H, hd, heads, ffn, T = 6, 6, 1, 4, 2
    t = [("video_patch_proj.weight", "BF16", [H, 4]), ("video_patch_proj.bias", "BF16", [H]),
         ("audio_patch_proj.weight", "BF16", [H, 1]), ("audio_patch_proj.bias", "BF16", [H]),
         ("final_layer.audio_out.weight", "BF16", [1, H]),
         ("condition_proj.weight", "BF16", [H, 2]),
         ("blocks.0.norm1.weight", "BF16", [H]),
         ("blocks.0.attn.q_norm.weight", "BF16", [hd]),
         ("blocks.0.attn.qkv_proj.weight", "BF16", [3 * heads * hd, H]),
         ("blocks.0.mlp.fc1.weight", "BF16", [2 * ffn, H]),
         ("rope.inv_freq", "F32", [1])]
    if curve:
        t.append(("adaln_t_table", "BF16", [3, T]))
    else:
        t += [("time_embedder.proj_in.weight", "BF16", [2, 2]), ("time_embedder.proj_out.weight", "BF16", [T, 2])]
    meta = {"config": json.dumps({"transformer": {"rope_theta": 10000.0, "norm_eps": 1e-5}})}
    return st_file(t, meta)


def te_detect(prefix):
    t = [(prefix + "embed_tokens.weight", "BF16", [4, 2]),
         (prefix + "layers.0.input_layernorm.weight", "BF16", [2]),
         (prefix + "layers.0.self_attn.q_norm.weight", "BF16", [128]),
         (prefix + "layers.0.self_attn.q_proj.weight", "BF16", [128, 2]),
         (prefix + "layers.0.self_attn.k_proj.weight", "BF16", [128, 2]),
         (prefix + "layers.0.mlp.gate_proj.weight", "BF16", [4, 2])]
    return st_file(t)


def vvae_tensors(naming, dtype="BF16", stats=False):
    """A one-block video VAE decoder: width 8 (1 head x 8), 2 latent channels, 1 register, FFN 8, patch 1."""
    D, C, F = 8, 2, 8
    orig = naming != "diffusers"
    t = [("decoder.x_embedder.weight" if orig else "decoder.proj_in.weight", dtype, [D, C]),
         ("decoder.x_embedder.bias" if orig else "decoder.proj_in.bias", dtype, [D]),
         ("post_quant_conv.weight", dtype, [C, C, 1, 1, 1]), ("post_quant_conv.bias", dtype, [C]),
         ("decoder.register_tokens", dtype, [1, 1, D])]
    p = "decoder.transformer_blocks.0."
    t += [(p + "norm1.weight", dtype, [D]), (p + "norm2.weight", dtype, [D]),
          (p + "scale1", dtype, [D]), (p + "scale2", dtype, [D])]
    if orig:
        t += [(p + "attn.to_qkv.weight", dtype, [3 * D, D]), (p + "attn.to_qkv.bias", dtype, [3 * D]),
              (p + "attn.to_out.weight", dtype, [D, D]), (p + "attn.to_out.bias", dtype, [D]),
              (p + "ff.w2.weight", dtype, [D, F]), (p + "ff.w2.bias", dtype, [D]),
              (p + "ff.w1.weight", dtype, [2 * F, D]), (p + "ff.w1.bias", dtype, [2 * F])]
    else:
        for q in ("to_q", "to_k", "to_v"):
            t += [(p + "attn.%s.weight" % q, dtype, [D, D]), (p + "attn.%s.bias" % q, dtype, [D])]
        t += [(p + "attn.to_out.0.weight", dtype, [D, D]), (p + "attn.to_out.0.bias", dtype, [D]),
              (p + "ff.net.2.weight", dtype, [D, F]), (p + "ff.net.2.bias", dtype, [D]),
              (p + "ff.net.0.proj.weight", dtype, [2 * F, D]), (p + "ff.net.0.proj.bias", dtype, [2 * F])]
    t += [("decoder.norm_out.weight", dtype, [D]), ("decoder.norm_out.bias", dtype, [D]),
          ("decoder.proj_out.weight", dtype, [3, D]), ("decoder.proj_out.bias", dtype, [3])]
    if stats:
        t += [("latents_mean", "F32", [C]), ("latents_std", "F32", [C], encode("F32", [1.0, 0.5]))]
    return st_file(t)


VVAE_DIFFUSERS_CFG = {
    "_class_name": "AutoencoderKLMiniMaxH3", "latent_channels": 2, "out_channels": 3,
    "spatial_downsample_factors": [1], "temporal_downsample_factors": [1], "decoder_num_layers": 1,
    "decoder_num_attention_heads": 1, "decoder_attention_head_dim": 8, "decoder_num_register_tokens": 1,
    "decoder_ffn_mult": 1, "decoder_rope_theta": 100.0, "decoder_rope_dim_ratio": 0.75, "decoder_norm_eps": 1e-5,
    "clip_length": 17, "token_drop": 3, "latents_mean": [0.5, -0.25], "latents_std": [1.5, 0.75]}
VVAE_WRAPPER_CFG = {
    "_class_name": "MiniMaxH3VideoVAE", "source_path": "source", "source_safetensors_path": "model.safetensors",
    "vae_clip_length": 17, "vae_token_drop": 3, "vae_decoder_tiling": 1, "vae_tile_size": 16,
    "vae_tile_overlap_min": 4, "latent_channels": 2, "latents_mean": [0.5, -0.25], "latents_std": [1.5, 0.75]}
VVAE_SOURCE_CFG = {
    "_class_name": "AutoencoderKLLegacy", "causal_decoder": False, "embed_dim": 2, "z_channels": 2, "out_ch": 3,
    "pixel_norm_type": "imagenet", "space_down": [1], "time_down": [1], "vae_ratio": 1, "vae_ratio_t": 1,
    "use_vit_decoder": True,
    "vit_decoder_kwargs": {"dim_head": 8, "ffn_activation_fn": "silu", "ffn_use_gated": True, "heads": 1,
                           "norm_affine": True, "norm_type": "rms_norm", "num_layers": 1, "qk_norm_affine": False,
                           "qk_norm_type": "rms_norm", "rope_dim_ratio": 0.75, "rope_theta": 100.0,
                           "num_register_tokens": 1, "ffn_mult": 1}}


def conv(name, shape, wn, bias=True, dtype="F32"):
    out = []
    if wn:
        out += [(name + ".weight_v", dtype, shape), (name + ".weight_g", dtype, [shape[0], 1, 1])]
    else:
        out += [(name + ".weight", dtype, shape)]
    if bias:
        out += [(name + ".bias", dtype, [shape[1] if name.startswith("decoder.ups") else shape[0]])]
    return out


def act(name, C, filters, dtype="F32"):
    out = [(name + ".act.alpha", dtype, [C]), (name + ".act.beta", dtype, [C])]
    if filters:
        out += [(name + ".upsample.filter", dtype, [1, 1, 12]), (name + ".downsample.lowpass.filter", dtype, [1, 1, 12])]
    return out


def avae_tensors(wn=True, filters=False, stats=False, dtype="F32"):
    """A one-stage BigVGAN decoder: 2 latents -> dim 2 -> conv_pre 4 -> ups (rate 2, kernel 4) -> 2 -> 1 AMP block."""
    t = conv("dec_in_proj", [2, 2, 1], False, dtype=dtype) + conv("decoder.conv_pre", [4, 2, 7], wn, dtype=dtype)
    t += conv("decoder.ups.0.0", [4, 2, 4], wn, dtype=dtype)
    t += conv("decoder.resblocks.0.convs1.0", [2, 2, 3], wn, dtype=dtype)
    t += conv("decoder.resblocks.0.convs2.0", [2, 2, 3], wn, dtype=dtype)
    t += act("decoder.resblocks.0.activations.0", 2, filters, dtype) + act("decoder.resblocks.0.activations.1", 2,
                                                                            filters, dtype)
    t += act("decoder.activation_post", 2, filters, dtype)
    t += conv("decoder.conv_post", [1, 2, 7], wn, bias=False, dtype=dtype)
    if stats:
        t += [("latents_mean", "F32", [2]), ("latents_std", "F32", [2], encode("F32", [1.0, 2.0]))]
    return st_file(t)


AVAE_DIFFUSERS_CFG = {
    "_class_name": "AutoencoderKLMiniMaxH3Audio", "latent_dim": 2, "latent_channels": 2, "decoder_dim": 4,
    "decoder_rates": [2], "decoder_kernel_sizes": [4], "resblock_kernel_sizes": [3],
    "resblock_dilation_sizes": [[1]], "sampling_rate": 32000, "latents_mean": [0.25, -0.5], "latents_std": [1.0, 2.0]}
AVAE_ORIGINAL_CFG = {
    "_class_name": "MiniMaxH3AudioVAE", "sample_rate": 32000, "source_safetensors_path": "model.safetensors",
    "source_metadata_path": "metadata.json", "latent_channels": 2, "latents_mean": [0.25, -0.5],
    "latents_std": [1.0, 2.0]}
AVAE_ORIGINAL_META = {"metadata": {"kwargs": {"decoder_dim": 4, "decoder_rates": [2], "decoder_type": "bigvgan",
                                              "latent_dim": 2, "sample_rate": 32000, "vae_latent_channels": 2}}}

# ---------------------------------------------------------------- tokenizers


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tiny_vocab():
    a = byte_alphabet()
    vocab = {a[b]: b for b in range(256)}
    merges = []
    for x, y in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("\u0120", "w"), ("o", "r"), ("\u0120w", "or"),
                 ("\u0120wor", "l"), ("\u0120worl", "d"), ("1", "2")]:
        vocab[x + y] = len(vocab)
        merges.append((x, y))
    return vocab, merges


QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                 r"|\s+(?!\S)|\s+")


def tiny_tokenizer_json(pairs=True, pre="split", normalizer=True):
    vocab, merges = tiny_vocab()
    n = len(vocab)
    added = [{"id": n, "content": "<|im_start|>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True},
             {"id": n + 1, "content": "<|im_end|>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True},
             {"id": n + 2, "content": "caf\u00e9", "normalized": True, "special": False}]
    if pre == "split":
        pt = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    elif pre == "string":
        pt = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    else:
        pt = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
         "normalizer": {"type": "NFC"} if normalizer else None, "pre_tokenizer": pt,
         "post_processor": None, "decoder": {"type": "ByteLevel"},
         "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                   "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                   "vocab": vocab,
                   "merges": [[x, y] for x, y in merges] if pairs else ["%s %s" % m for m in merges]}}
    return json.dumps(j, ensure_ascii=False).encode()


def tiny_vocab_files():
    vocab, merges = tiny_vocab()
    return (json.dumps(vocab, ensure_ascii=False).encode(),
            ("#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)).encode())


def trimmed_tokenizer_config(snapshot):
    path = os.path.join(snapshot, "tokenizer", "tokenizer_config.json") if snapshot else None
    if path and os.path.isfile(path):
        c = json.load(open(path, encoding="utf-8"))
        c.pop("chat_template", None)  # long and not read by the tokenizer
        dec = c.get("added_tokens_decoder", {})
        c["added_tokens_decoder"] = dict(list(dec.items())[:4])
        c["additional_special_tokens"] = c.get("additional_special_tokens", [])[:3]
    else:
        c = {"added_tokens_decoder": {"266": {"content": "<|endoftext|>", "special": True, "normalized": False}},
             "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "tokenizer_class": "Qwen2Tokenizer",
             "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
    return json.dumps(c, indent=1, ensure_ascii=False).encode()

# ---------------------------------------------------------------- writing


def reset(target):
    d = os.path.join(HERE, "corpus", target)
    if os.path.isdir(d):
        for f in os.listdir(d):
            if not f.startswith("regress-"):
                os.remove(os.path.join(d, f))
    os.makedirs(d, exist_ok=True)
    return d


def put(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    print("  %-40s %6d bytes" % (os.path.relpath(os.path.join(d, name), HERE), len(data)))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def snap(snapshot, rel):
    if not snapshot:
        return None
    p = os.path.join(snapshot, rel)
    return read(p) if os.path.isfile(p) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--snapshot", default=os.path.join(ROOT, "..", "shared", "data", "minimax-h3-snapshot"),
                    help="the release snapshot (configs only); seeds from it are skipped when absent")
    args = ap.parse_args()
    snapshot = args.snapshot if os.path.isdir(args.snapshot) else None
    if not snapshot:
        print("note: no snapshot at %s: release configs are not included" % args.snapshot)

    # safetensors_file: every dtype, metadata, edge shapes, real small files, detectable checkpoints
    d = reset("safetensors_file")
    special_f32 = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4e38]
    put(d, "dtypes.safetensors", st_file(
        [("f64", "F64", [3], encode("F64", [1e300, -1e-300, float("nan")])),
         ("f32", "F32", [9], encode("F32", special_f32)),
         ("f16", "F16", [4], encode("F16", [0.0, 65504.0, float("inf"), 6e-8])),
         ("bf16", "BF16", [2, 2]),
         ("e4m3", "F8_E4M3", [4], bytes([0x00, 0x7f, 0x80, 0x7e])),
         ("e5m2", "F8_E5M2", [4], bytes([0x00, 0x7c, 0x7d, 0xfb])),
         ("i64", "I64", [2], encode("I64", [-(1 << 63), (1 << 63) - 1])),
         ("i32", "I32", [2], encode("I32", [-5, 7])), ("i16", "I16", [1], encode("I16", [-300])),
         ("i8", "I8", [2], encode("I8", [-128, 127])), ("u8", "U8", [2], bytes([0, 255])),
         ("bool", "BOOL", [3], bytes([0, 1, 2])), ("scalar", "F32", []), ("empty", "F32", [0, 3])],
        {"format": "pt", "note": "fuzz seed"}))
    put(d, "dit_comfy.safetensors", dit_comfy())
    put(d, "dit_comfy_curve.safetensors", dit_comfy(curve=True))
    put(d, "te_detect.safetensors", te_detect("model.language_model."))
    put(d, "te_detect_bare.safetensors", te_detect(""))
    for rel in ("dit/unit/t2va.layout.safetensors", "audio_vae/tiny/io.safetensors"):
        put(d, "golden-" + os.path.basename(os.path.dirname(rel)) + "-" + os.path.basename(rel),
            read(os.path.join(GOLDEN, rel)))

    # safetensors_index: index + shards
    d = reset("safetensors_index")
    a = st_file([("x.weight", "F32", [2]), ("y.weight", "BF16", [1, 2])])
    b = st_file([("z.bias", "F16", [3])], {"format": "pt"})
    idx = {"metadata": {"total_size": 18}, "weight_map": {"x.weight": "a.safetensors", "y.weight": "a.safetensors",
                                                          "z.bias": "b.safetensors"}}
    put(d, "two_shards", json.dumps(idx, indent=2).encode() + SEP + a + SEP + b)
    idx1 = {"weight_map": {"x.weight": "a.safetensors", "y.weight": "a.safetensors"}}
    put(d, "one_shard", json.dumps(idx1).encode() + SEP + a)
    put(d, "no_index", SEP + a + SEP + b)
    idx_bad = {"weight_map": {"x.weight": "b.safetensors", "y.weight": "a.safetensors", "z.bias": "../b.safetensors"}}
    put(d, "bad_shard_names", json.dumps(idx_bad).encode() + SEP + a + SEP + b)
    dup = st_file([("x.weight", "F32", [2])])
    put(d, "dup_across_shards", SEP + a + SEP + dup)
    real = os.path.join(GOLDEN, "dit", "unit", "diffusers", "diffusion_pytorch_model.safetensors.index.json")
    j = json.load(open(real))
    wm = dict(list(j["weight_map"].items())[:6])
    put(d, "golden_index_head", json.dumps({"metadata": j.get("metadata", {}), "weight_map": wm}, indent=2).encode())

    # json_config, dit_config, text_encoder_config: configs
    d = reset("json_config")
    for rel in ("model_index.json", "scheduler/scheduler_config.json", "audio_scheduler/scheduler_config.json",
                "FL2VA/model_index.json", "FL2VA/audio_vae/metadata.json", "transformer/config.json"):
        b = snap(snapshot, rel)
        if b:
            put(d, "release-" + rel.replace("/", "-"), b)
    put(d, "numbers.json", b'{"i": 3, "r": 3.0, "big": 9223372036854775807, "neg": -9223372036854775808, '
                           b'"f": 1.5e300, "e": -0.0, "arr": [1, 2.0, 3], "arr4": [1, 2, 3, 4], "s": "x", '
                           b'"b": true, "n": null, "o": {"k": [1e19, -1], "p": {"q": false}}}')
    d = reset("dit_config")
    for rel in ("transformer/config.json", "FL2VA/transformer/config.json"):
        b = snap(snapshot, rel)
        if b:
            put(d, "release-" + rel.replace("/", "-"), b)
    for rel in ("dit/tiny/diffusers/config.json", "dit/tiny/original/config.json", "dit/unit/diffusers/config.json"):
        put(d, "golden-" + rel.replace("/", "-"), read(os.path.join(GOLDEN, rel)))
    d = reset("text_encoder_config")
    b = snap(snapshot, "text_encoder/config.json")
    if b:
        put(d, "release-text_encoder-config.json", b)
    put(d, "golden-text_encoder-config.json", read(os.path.join(GOLDEN, "text_encoder", "model", "config.json")))
    put(d, "bare_rope_parameters.json", json.dumps({
        "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "intermediate_size": 16, "vocab_size": 32, "head_dim": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [1, 1, 0]}}).encode())

    # video_vae_config: config.json / source/config.json / weights
    d = reset("video_vae_config")
    dj = lambda o: json.dumps(o, indent=1).encode()
    put(d, "diffusers_tiny", dj(VVAE_DIFFUSERS_CFG) + SEP + SEP + vvae_tensors("diffusers"))
    put(d, "original_tiny", dj(VVAE_WRAPPER_CFG) + SEP + dj(VVAE_SOURCE_CFG) + SEP + vvae_tensors("original"))
    arch = dict(VVAE_DIFFUSERS_CFG)
    for k in ("latents_mean", "latents_std"):
        arch.pop(k)  # Comfy's statistics are tensors
    put(d, "comfy_tiny", dj(arch) + SEP + SEP + vvae_tensors("original", "F16", stats=True))
    for rel, name in (("vae/config.json", "release-vae"), ("FL2VA/video_vae/config.json", "release-wrapper")):
        b = snap(snapshot, rel)
        if b:
            src = snap(snapshot, "FL2VA/video_vae/source/config.json") if "wrapper" in name else b""
            put(d, name, b + SEP + (src or b""))
    put(d, "golden-diffusers-config", read(os.path.join(GOLDEN, "video_vae", "diffusers", "config.json")))

    # audio_vae_config: config.json / metadata.json / weights
    d = reset("audio_vae_config")
    put(d, "diffusers_tiny", dj(AVAE_DIFFUSERS_CFG) + SEP + SEP + avae_tensors(wn=True))
    put(d, "original_tiny", dj(AVAE_ORIGINAL_CFG) + SEP + dj(AVAE_ORIGINAL_META) + SEP + avae_tensors(wn=True, filters=True))
    put(d, "comfy_tiny", SEP + SEP + avae_tensors(wn=False, stats=True, dtype="BF16"))
    for rel, meta in (("audio_vae/config.json", None), ("FL2VA/audio_vae/config.json", "FL2VA/audio_vae/metadata.json")):
        b = snap(snapshot, rel)
        if b:
            put(d, "release-" + rel.replace("/", "-"), b + SEP + (snap(snapshot, meta) or b"" if meta else b""))
    put(d, "golden-tiny-diffusers-config", read(os.path.join(GOLDEN, "audio_vae", "tiny", "diffusers", "config.json")))

    # tokenizer_load: tokenizer.json / tokenizer_config.json / vocab.json / merges.txt / text
    d = reset("tokenizer_load")
    cfg = trimmed_tokenizer_config(snapshot)
    vj, mt = tiny_vocab_files()
    text = "hello world 12 <|im_start|>caf\u00e9\u0301 \U0001F600".encode()
    put(d, "json_pairs", tiny_tokenizer_json(True) + SEP + SEP + SEP + SEP + text)
    put(d, "json_strings_config", tiny_tokenizer_json(False) + SEP + cfg + SEP + SEP + SEP + text)
    put(d, "json_bytelevel", tiny_tokenizer_json(True, pre="bytelevel", normalizer=False) + SEP + SEP + SEP + SEP + text)
    put(d, "json_split_string", tiny_tokenizer_json(True, pre="string") + SEP + SEP + SEP + SEP + text)
    put(d, "vocab_merges", SEP + SEP + vj + SEP + mt + SEP + text)
    put(d, "vocab_merges_config", SEP + cfg + SEP + vj + SEP + mt + SEP + text)

    # tokenize: texts (and id lists after 0xFF)
    d = reset("tokenize")
    lines = [json.loads(l) for l in open(os.path.join(GOLDEN, "tokenizer", "strings.jsonl"), encoding="utf-8")]
    step = max(1, len(lines) // 40)
    for k, rec in enumerate(lines[::step][:40]):
        b = rec["text"].encode("utf-8", "surrogatepass")
        if len(b) <= 1024:
            put(d, "golden-%02d" % k, b)
    put(d, "ids", b"\xff" + struct.pack("<6i", 0, 9707, 151644, 151645, 151675, 220))
    put(d, "ids_bad", b"\xff" + struct.pack("<3i", -1, 151676, 1 << 30))
    put(d, "invalid_utf8", b"ok \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \x80")
    return 0


if __name__ == "__main__":
    sys.exit(main())
