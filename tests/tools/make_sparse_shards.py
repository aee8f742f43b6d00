#!/usr/bin/env python3
"""Write sparse safetensors shards carrying the real MiniMax-H3 transformer names and shapes.

Reads a release index (`*.safetensors.index.json`) and its config.json, derives every tensor's shape
from the config (written here from the spec tables, independently of the C engine), and writes each
shard as a valid safetensors header followed by a sparse hole of the right size (no data blocks).
Used to check that `h3 info` counts a full-size 62 GB checkpoint without reading tensor data.

usage: make_sparse_shards.py SRC_COMPONENT_DIR DST_DIR
"""
import json
import os
import re
import shutil
import struct
import sys

FP32_PREFIXES = ("video_patch_proj.", "audio_patch_proj.", "time_embedder.", "final_layer.video_out.",
                 "final_layer.audio_out.", "rope.", "proj_in.", "audio_proj_in.", "proj_out.", "audio_proj_out.")


def shapes_from_config(cfg):
    g = lambda d, o: cfg[d] if d in cfg else cfg[o]
    H = cfg["hidden_size"]
    heads, D = cfg["num_attention_heads"], cfg["attention_head_dim"]
    I = heads * D
    F = g("ffn_dim", "ffn_hidden_size")
    C = g("in_channels", "latents_dim")
    A = g("audio_in_channels", "audio_latents_dim")
    P = C * cfg["patch_size"][0] * cfg["patch_size"][1] * cfg["patch_size"][2]
    T = cfg["time_embed_dim"]
    TH = g("time_embed_hidden_dim", "time_embed_hidden_size")
    FQ = g("freq_dim", "timestep_input_dim")
    R = g("rope_freq_dim", "rope_inv_freq_len")
    TD = cfg["text_dim"]
    top = {
        "video_patch_proj.weight": [H, P], "video_patch_proj.bias": [H],
        "audio_patch_proj.weight": [H, A], "audio_patch_proj.bias": [H],
        "condition_proj.weight": [H, TD], "condition_proj.bias": [H],
        "time_embedder.proj_in.weight": [TH, FQ], "time_embedder.proj_in.bias": [TH],
        "time_embedder.proj_out.weight": [T, TH], "time_embedder.proj_out.bias": [T],
        "rope.inv_freq": [R], "token_refiner.final_norm.weight": [H],
        "final_layer.norm.weight": [H], "final_layer.adaln_proj.linear.weight": [2 * H, T],
        "final_layer.adaln_proj.linear.bias": [2 * H],
        "final_layer.video_out.weight": [P, H], "final_layer.video_out.bias": [P],
        "final_layer.audio_out.weight": [A, H], "final_layer.audio_out.bias": [A],
        # diffusers spellings
        "proj_in.weight": [H, P], "proj_in.bias": [H], "audio_proj_in.weight": [H, A], "audio_proj_in.bias": [H],
        "context_embedder.weight": [H, TD], "context_embedder.bias": [H],
        "time_embedder.linear_1.weight": [TH, FQ], "time_embedder.linear_1.bias": [TH],
        "time_embedder.linear_2.weight": [T, TH], "time_embedder.linear_2.bias": [T],
        "norm_out.norm.weight": [H], "norm_out.linear.weight": [2 * H, T], "norm_out.linear.bias": [2 * H],
        "proj_out.weight": [P, H], "proj_out.bias": [P], "audio_proj_out.weight": [A, H], "audio_proj_out.bias": [A],
    }
    block = {
        "norm1.weight": [H], "norm2.weight": [H],
        "attn.qkv_proj.weight": [3 * I, H], "attn.q_norm.weight": [D], "attn.k_norm.weight": [D],
        "attn.out_proj.weight": [H, I], "mlp.fc1.weight": [2 * F, H], "mlp.fc2.weight": [H, F],
        "adaln_proj.linear.weight": [18 * H, T], "adaln_proj.linear.bias": [18 * H],
        "attn.to_q.weight": [I, H], "attn.to_k.weight": [I, H], "attn.to_v.weight": [I, H],
        "attn.norm_q.weight": [D], "attn.norm_k.weight": [D], "attn.to_out.0.weight": [H, I],
        "ff.net.0.proj.weight": [2 * F, H], "ff.net.2.weight": [H, F],
    }

    def shape(name):
        if name in top:
            return top[name]
        m = re.match(r"^(?:blocks|transformer_blocks|token_refiner\.blocks|token_refiner\.refiner_blocks)\.\d+\.(.*)$",
                     name)
        if m and m.group(1) in block:
            return block[m.group(1)]
        raise KeyError(name)
    return shape


def write_sparse(path, tensors):
    """tensors: {name: (dtype, shape)} -> one safetensors file (names sorted) whose data is a hole of the right
    size (no data blocks written); returns the data bytes."""
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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    src, dst = argv[0], argv[1]
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    shutil.copy(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
    index_name = [f for f in os.listdir(src) if f.endswith(".safetensors.index.json")][0]
    index = json.load(open(os.path.join(src, index_name)))
    shape = shapes_from_config(cfg)
    shards = {}
    for name, shard in index["weight_map"].items():
        shards.setdefault(shard, []).append(name)
    total = 0
    for shard, names in sorted(shards.items()):
        tensors = {n: ("F32" if n.startswith(FP32_PREFIXES) else "BF16", shape(n)) for n in names}
        total += write_sparse(os.path.join(dst, shard), tensors)
    with open(os.path.join(dst, index_name), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": index["weight_map"]}, f)
    print(f"{len(shards)} shards, {total} data bytes")


if __name__ == "__main__":
    main()
