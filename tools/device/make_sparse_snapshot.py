#!/usr/bin/env python3
"""Write a full-size SPARSE MiniMax-H3 snapshot: every component `h3 generate` loads, with the real tensor
names, dtypes and shapes, each safetensors file a valid header followed by a hole (no data blocks), plus the
real configs and tokenizer files. With H3_SYNTHETIC_WEIGHTS=1 the CUDA backend generates every weight it
uploads on the GPU, so such a snapshot runs at the released size for timing without reading ~130 GB.

usage: make_sparse_snapshot.py META_DIR DST_ROOT
  META_DIR: configs + index files of the release (../shared/data/minimax-h3-snapshot, or the copy that
            tools/device/prep_real_shape.sh puts in .devsnap/meta for the device machine)

Components written (the layout the engine's locators search):
  FL2VA/transformer/  the DiT, from its index (tests/tools/make_sparse_shards.py: shapes from the config)
  text_encoder/       Qwen3-VL language-model tensors from the index (the vision tower is not needed),
                      shapes from text_config, BF16
  tokenizer/          vocab.json, merges.txt, tokenizer_config.json (copied)
  vae/                the video VAE's decoder tensors + post_quant_conv, shapes from the config, F32
                      (the release's 10.4 GB index total is the F32 size)
  audio_vae/          the BigVGAN decoder as one file, names and shapes from the config
                      (tools/audio_vae_shapes.py, shared with tools/toy/make_templates.py), F32
"""
import importlib.util
import json
import os
import re
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from audio_vae_shapes import decoder_shapes  # noqa: E402


def write_sparse(path, tensors):
    """tensors: {name: (dtype, shape)} -> one safetensors file whose data is a hole."""
    header, off = {}, 0
    for name in sorted(tensors):
        dt, shape = tensors[name]
        n = 1
        for d in shape:
            n *= d
        nbytes = n * {"F32": 4, "BF16": 2, "F16": 2}[dt]
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + off)
    return off


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
    spec = importlib.util.spec_from_file_location("mss", os.path.join(HERE, "..", "..", "tests", "tools",
                                                                      "make_sparse_shards.py"))
    mss = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mss)
    argv = sys.argv
    sys.argv = ["make_sparse_shards.py", os.path.join(meta, "FL2VA", "transformer"),
                os.path.join(dst, "FL2VA", "transformer")]
    try:
        mss.main()
    finally:
        sys.argv = argv


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
    t = {}
    for name in index["weight_map"]:
        if name == "model.language_model.embed_tokens.weight":
            t[name] = ("BF16", [V, H])
        elif name == "model.language_model.norm.weight":
            t[name] = ("BF16", [H])
        else:
            m = re.match(r"^model\.language_model\.layers\.\d+\.(.*)$", name)
            if m:
                t[name] = ("BF16", per[m.group(1)])
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
    t = {}
    for name in index["weight_map"]:
        if name in top:
            t[name] = ("F32", top[name])
            continue
        m = re.match(r"^decoder\.transformer_blocks\.\d+\.(.*)$", name)
        if m:
            t[name] = ("F32", blk[m.group(1)])
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
