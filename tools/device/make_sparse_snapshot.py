#!/usr/bin/env python3
"""Write a full-size SPARSE MiniMax-H3 snapshot: every component `h3 generate` loads, with the real tensor
names, dtypes and shapes, each safetensors file a valid header followed by a hole (no data blocks), plus the
real configs and tokenizer files. With H3_SYNTHETIC_WEIGHTS=1 the CUDA backend generates every weight it
uploads on the GPU, so such a snapshot runs at the released size for timing without reading ~130 GB.

usage: make_sparse_snapshot.py [--encoders] META_DIR DST_ROOT
  META_DIR: configs + index files of the release (the project's copy tests/data/minimax-h3-snapshot, or
            the copy that tools/device/prep_real_shape.sh puts in .devsnap/meta for the device machine)

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
  --encoders          also what keyframes need: the video VAE's encoder + quant_conv (shapes from the
                      config: conv_in, down blocks of resnets with a 1x1x1 shortcut where the width changes,
                      one downsampler conv per block, norm_out, conv_out), the Qwen3-VL vision tower (shapes
                      from vision_config) and processor/, and what image references need: the Ref2VA
                      partition's DiT (Ref2VA/transformer/, from its index), and what audio references and
                      soundtracks need: the audio VAE's encoder, pre_block and posterior heads (spec
                      audio-vae.md §8.2-8.3; tools/audio_vae_shapes.py encoder_shapes)
"""
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tools"))
from audio_vae_shapes import decoder_shapes, encoder_shapes  # noqa: E402
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
    if ENCODERS and os.path.isdir(os.path.join(meta, "Ref2VA", "transformer")):  # references: the Ref2VA partition
        dit_shards([os.path.join(meta, "Ref2VA", "transformer"), os.path.join(dst, "Ref2VA", "transformer")])


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
    if ENCODERS:
        t.update(vision_tower(json.load(open(os.path.join(src, "config.json")))["vision_config"], index["weight_map"]))
    return write_indexed(src, out, "model.safetensors.index.json", t)


def vision_tower(v, weight_map):
    """The Qwen3-VL vision tower's tensors of the index, shapes from vision_config (BF16)."""
    H, I, O, m = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"], v["spatial_merge_size"] ** 2
    M = m * H
    top = {"model.visual.patch_embed.proj.weight": [H, v["in_channels"], v["temporal_patch_size"], v["patch_size"],
                                                    v["patch_size"]],
           "model.visual.patch_embed.proj.bias": [H], "model.visual.pos_embed.weight": [v["num_position_embeddings"], H],
           "model.visual.merger.norm.weight": [H], "model.visual.merger.norm.bias": [H],
           "model.visual.merger.linear_fc1.weight": [M, M], "model.visual.merger.linear_fc1.bias": [M],
           "model.visual.merger.linear_fc2.weight": [O, M], "model.visual.merger.linear_fc2.bias": [O]}
    blk = {"attn.qkv.weight": [3 * H, H], "attn.qkv.bias": [3 * H], "attn.proj.weight": [H, H], "attn.proj.bias": [H],
           "mlp.linear_fc1.weight": [I, H], "mlp.linear_fc1.bias": [I], "mlp.linear_fc2.weight": [H, I],
           "mlp.linear_fc2.bias": [H], "norm1.weight": [H], "norm1.bias": [H], "norm2.weight": [H], "norm2.bias": [H]}
    deep = {"norm.weight": [M], "norm.bias": [M], "linear_fc1.weight": [M, M], "linear_fc1.bias": [M],
            "linear_fc2.weight": [O, M], "linear_fc2.bias": [O]}
    t = pick(weight_map, "BF16", top, r"^model\.visual\.blocks\.\d+\.(.*)$", blk)
    t.update(pick(weight_map, "BF16", {}, r"^model\.visual\.deepstack_merger_list\.\d+\.(.*)$", deep))
    return t


def video_vae_encoder(c, weight_map):
    """The video VAE's encoder + quant_conv tensors of the index, shapes from the config (F32)."""
    b, C, k = c["block_out_channels"], c["latent_channels"], [3, 3, 3]
    t = {"encoder.conv_in.weight": [b[0], c["in_channels"]] + k, "encoder.conv_in.bias": [b[0]],
         "encoder.norm_out.weight": [b[-1]], "encoder.norm_out.bias": [b[-1]],
         "encoder.conv_out.weight": [2 * C, b[-1]] + k, "encoder.conv_out.bias": [2 * C],
         "quant_conv.weight": [2 * C, 2 * C, 1, 1, 1], "quant_conv.bias": [2 * C]}
    for i, out in enumerate(b):
        cin = b[i - 1] if i else b[0]
        for j in range(c["layers_per_block"]):
            r, ci = f"encoder.down_blocks.{i}.resnets.{j}.", cin if j == 0 else out
            t.update({r + "norm1.weight": [ci], r + "norm1.bias": [ci], r + "conv1.weight": [out, ci] + k,
                      r + "conv1.bias": [out], r + "norm2.weight": [out], r + "norm2.bias": [out],
                      r + "conv2.weight": [out, out] + k, r + "conv2.bias": [out]})
            if ci != out:
                t.update({r + "conv_shortcut.weight": [out, ci, 1, 1, 1], r + "conv_shortcut.bias": [out]})
        d = f"encoder.down_blocks.{i}.downsamplers.0.conv."
        t.update({d + "weight": [out, out] + k, d + "bias": [out]})
    # only what the release's index names (its downsamplers and shortcuts decide), each with its shape
    names = {n for n in weight_map if n.startswith("encoder.") or n.startswith("quant_conv.")}
    missing = sorted(names - set(t))
    if missing:
        raise SystemExit(f"video VAE encoder: no shape rule for {missing[:5]}")
    return {n: ("F32", t[n]) for n in names}


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
    if ENCODERS:
        t.update(video_vae_encoder(c, index["weight_map"]))
    return write_indexed(src, out, "diffusion_pytorch_model.safetensors.index.json", t)


def audio_vae(meta, dst):
    src, out = os.path.join(meta, "audio_vae"), os.path.join(dst, "audio_vae")
    copy(src, out, ["config.json"])
    c = json.load(open(os.path.join(src, "config.json")))
    dim, lat, ch_lat = c["decoder_dim"], c["latent_dim"], c["latent_channels"]
    rates, kernels = c["decoder_rates"], c["decoder_kernel_sizes"]
    rk, rd = c["resblock_kernel_sizes"], c["resblock_dilation_sizes"]
    t = decoder_shapes(dim, lat, ch_lat, rates, kernels, rk, rd)
    if ENCODERS:  # what audio references (and a video's soundtrack) go through
        t.update(encoder_shapes(c["encoder_dim"], c["encoder_rates"], lat, ch_lat))
    return write_sparse(os.path.join(out, "diffusion_pytorch_model.safetensors"),
                        {k: ("F32", v) for k, v in t.items()})


ENCODERS = False


def main():
    global ENCODERS
    args = sys.argv[1:]
    if args and args[0] == "--encoders":
        ENCODERS, args = True, args[1:]
    if len(args) != 2:
        raise SystemExit(__doc__)
    meta, dst = args
    os.makedirs(dst, exist_ok=True)
    dit(meta, dst)
    sizes = {"text_encoder": text_encoder(meta, dst)}
    copy(os.path.join(meta, "tokenizer"), os.path.join(dst, "tokenizer"),
         ["vocab.json", "merges.txt", "tokenizer_config.json"])
    if ENCODERS:
        copy(os.path.join(meta, "processor"), os.path.join(dst, "processor"), sorted(os.listdir(os.path.join(meta, "processor"))))
    sizes["vae"] = video_vae(meta, dst)
    sizes["audio_vae"] = audio_vae(meta, dst)
    for k, v in sizes.items():
        print(f"{k}: {v / 1e9:.2f} GB (sparse)")


if __name__ == "__main__":
    main()
