#!/usr/bin/env python3
"""Write a full-size SPARSE MiniMax-H3 snapshot: every component `h3 generate` loads, with the real tensor
names, dtypes and shapes, each safetensors file a valid header followed by a hole (no data blocks), plus the
real configs and tokenizer files. With H3_SYNTHETIC_WEIGHTS=1 the CUDA backend generates every weight it
uploads on the GPU, so such a snapshot runs at the released size for timing without reading ~130 GB.

usage: make_sparse_snapshot.py META_DIR DST_ROOT
  META_DIR: configs + index files of the release (../shared/data/minimax-h3-snapshot, or the copy that
            tools/device/prep_real_shape.sh puts in .devsnap/meta for the device machine)

Components written (the layout the engine's locators search):
  FL2VA/transformer/  the DiT, from its index (tests/tools/make_sparse_shards.py: shapes from the config;
                      its write_sparse writes every file here)
  text_encoder/       Qwen3-VL language-model tensors from the index (the vision tower is not needed),
                      shapes from text_config, BF16
  tokenizer/          vocab.json, merges.txt, tokenizer_config.json (copied)
  vae/                the video VAE's decoder tensors + post_quant_conv, shapes from the config, F32
                      (the release's 10.4 GB index total is the F32 size)
  audio_vae/          the BigVGAN decoder as one file, names and shapes from the config
                      (tools/audio_vae_shapes.py, shared with tools/toy/make_templates.py), F32
"""
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tools"))
from audio_vae_shapes import decoder_shapes  # noqa: E402
from make_sparse_shards import main as dit_shards, write_sparse  # noqa: E402


def write_indexed(src_dir, dst_dir, index_name, tensors):
    """Shards as the release's index assigns them (only the names in `tensors`)."""
    index = json.load(open(os.path.join(src_dir, index_name)))
    shards = {}
    for name, shard in index["weight_map"].items():
        if name in tensors:
            shards.setdefault(shard, {})[name] = tensors[name]
    missing = set(tensors) - {n for s in shards.values() for n in s}
    if missing:
        raise SystemExit(f"{src_dir}: names not in the index: {sorted(missing)[:5]}")
    total = sum(write_sparse(os.path.join(dst_dir, shard), t) for shard, t in sorted(shards.items()))
    wm = {n: shard for shard, t in shards.items() for n in t}
    with open(os.path.join(dst_dir, index_name), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f)
    return total


def copy(src_dir, dst_dir, names):
    os.makedirs(dst_dir, exist_ok=True)
    for n in names:
        shutil.copy(os.path.join(src_dir, n), os.path.join(dst_dir, n))


def dit(meta, dst):
    dit_shards([os.path.join(meta, "FL2VA", "transformer"), os.path.join(dst, "FL2VA", "transformer")])


def pick(weight_map, dtype, top, block_re, block):
    """{name: (dtype, shape)} for the index names that are in `top` or match `block_re` with a suffix in
    `block` (both {name or suffix: shape}); other names are left out."""
    t = {}
    for name in weight_map:
        if name in top:
            t[name] = (dtype, top[name])
            continue
        m = re.match(block_re, name)
        if m:
            t[name] = (dtype, block[m.group(1)])
    return t


def text_encoder(meta, dst):
    src, out = os.path.join(meta, "text_encoder"), os.path.join(dst, "text_encoder")
    copy(src, out, ["config.json"])
    c = json.load(open(os.path.join(src, "config.json")))["text_config"]
    H, D, nh, kv, I, V = (c["hidden_size"], c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"],
                          c["intermediate_size"], c["vocab_size"])
    per = {"input_layernorm.weight": [H], "post_attention_layernorm.weight": [H],
           "self_attn.q_proj.weight": [nh * D, H], "self_attn.k_proj.weight": [kv * D, H],
           "self_attn.v_proj.weight": [kv * D, H], "self_attn.o_proj.weight": [H, nh * D],
           "self_attn.q_norm.weight": [D], "self_attn.k_norm.weight": [D],
           "mlp.gate_proj.weight": [I, H], "mlp.up_proj.weight": [I, H], "mlp.down_proj.weight": [H, I]}
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    top = {"model.language_model.embed_tokens.weight": [V, H], "model.language_model.norm.weight": [H]}
    t = pick(index["weight_map"], "BF16", top, r"^model\.language_model\.layers\.\d+\.(.*)$", per)
    return write_indexed(src, out, "model.safetensors.index.json", t)


def video_vae(meta, dst):
    src, out = os.path.join(meta, "vae"), os.path.join(dst, "vae")
    copy(src, out, ["config.json"])
    c = json.load(open(os.path.join(src, "config.json")))
    D = c["decoder_num_attention_heads"] * c["decoder_attention_head_dim"]
    F = c["decoder_ffn_mult"] * D
    C = c["latent_channels"]
    pt = 1
    for f in c["temporal_downsample_factors"]:
        pt *= f
    ps = 1
    for f in c["spatial_downsample_factors"]:
        ps *= f
    top = {"decoder.norm_out.weight": [D], "decoder.norm_out.bias": [D], "decoder.proj_in.weight": [D, C],
           "decoder.proj_in.bias": [D], "decoder.proj_out.weight": [c["out_channels"] * pt * ps * ps, D],
           "decoder.proj_out.bias": [c["out_channels"] * pt * ps * ps],
           "decoder.register_tokens": [1, c["decoder_num_register_tokens"], D],
           "post_quant_conv.weight": [C, C, 1, 1, 1], "post_quant_conv.bias": [C]}
    blk = {"attn.to_q.weight": [D, D], "attn.to_k.weight": [D, D], "attn.to_v.weight": [D, D],
           "attn.to_out.0.weight": [D, D], "attn.to_q.bias": [D], "attn.to_k.bias": [D], "attn.to_v.bias": [D],
           "attn.to_out.0.bias": [D], "ff.net.0.proj.weight": [2 * F, D], "ff.net.0.proj.bias": [2 * F],
           "ff.net.2.weight": [D, F], "ff.net.2.bias": [D], "norm1.weight": [D], "norm2.weight": [D],
           "scale1": [D], "scale2": [D]}
    index = json.load(open(os.path.join(src, "diffusion_pytorch_model.safetensors.index.json")))
    t = pick(index["weight_map"], "F32", top, r"^decoder\.transformer_blocks\.\d+\.(.*)$", blk)
    return write_indexed(src, out, "diffusion_pytorch_model.safetensors.index.json", t)


def audio_vae(meta, dst):
    src, out = os.path.join(meta, "audio_vae"), os.path.join(dst, "audio_vae")
    copy(src, out, ["config.json"])
    c = json.load(open(os.path.join(src, "config.json")))
    dim, lat, ch_lat = c["decoder_dim"], c["latent_dim"], c["latent_channels"]
    rates, kernels = c["decoder_rates"], c["decoder_kernel_sizes"]
    rk, rd = c["resblock_kernel_sizes"], c["resblock_dilation_sizes"]
    t = decoder_shapes(dim, lat, ch_lat, rates, kernels, rk, rd)
    return write_sparse(os.path.join(out, "diffusion_pytorch_model.safetensors"),
                        {k: ("F32", v) for k, v in t.items()})


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    meta, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    dit(meta, dst)
    sizes = {"text_encoder": text_encoder(meta, dst)}
    copy(os.path.join(meta, "tokenizer"), os.path.join(dst, "tokenizer"),
         ["vocab.json", "merges.txt", "tokenizer_config.json"])
    sizes["vae"] = video_vae(meta, dst)
    sizes["audio_vae"] = audio_vae(meta, dst)
    for k, v in sizes.items():
        print(f"{k}: {v / 1e9:.2f} GB (sparse)")


if __name__ == "__main__":
    main()
