#!/usr/bin/env python3
"""Golden fixtures for the h3 text encoder (Qwen3-VL language model to the tap layer).

Runs where PyTorch + transformers are installed (the GPU machine; CPU work only):

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_text_encoder_fixtures.py \
        --tok .ref/tok --proc .ref/te_proc --work /tmp/h3te --tar "$OUT/te_fixtures.tar"

--tok   vocab.json + merges.txt + tokenizer_config.json of the MiniMax-H3 snapshot (tokenizer/)
--proc  the snapshot's processor/ files plus vocab.json + merges.txt (for Qwen3VLProcessor)

What it does:

1. builds `Qwen3VLForConditionalGeneration` from a tiny config of the Qwen3-VL family (GQA 4 q heads / 2 kv
   heads, head_dim 32 != hidden 64 / 4, q/k RMSNorm, interleaved M-RoPE with mrope_section [6, 5, 5],
   6 decoder layers, tap 4, tiny vision tower with 3 deepstack levels, the real vocabulary size 151936 and the
   real special-token ids), fills it with seeded random values (Linear weights N(0, 1/fan_in), biases
   0.1 N(0, 1), norm weights 1 + 0.2 N(0, 1), embeddings N(0, 1)) and rounds every parameter to bf16 (the
   forward runs in float32 on those bf16-representable values);
   embedding rows of ids that no fixture uses are NaN (a wrong row read shows up as NaN; the file compresses),
   lm_head is zero (never used);
2. tokenizes the fixture prompts with the real snapshot tokenizer (Qwen2TokenizerFast, add_special_tokens=False,
   as the diffusers t2va encoder step does) and computes the reference hidden state at the tap through the
   diffusers helper `get_qwen3vl_prompt_embeds` (which calls `text_encoder.model(...)` with
   output_hidden_states=True and returns hidden_states[tap]); also runs the diffusers t2va block itself
   (`MiniMaxH3TextEncoderStep`) with the tap lowered to 4 through its components object;
3. captures the raw output of every decoder layer with forward hooks (checks hidden_states[k] == raw output
   of layer k-1 for k < N, hidden_states[N] == final-normed), and an M-RoPE case with three different
   position axes through `model.model.language_model(position_ids=[3, 1, L])`;
4. records what the reference does with an empty prompt;
5. writes (into --work/text_encoder, then a tar):
   model/             save_pretrained of the bf16 model (config.json, shards gzipped, index json)
   comfy.safetensors.gz  ComfyUI-style single file: `model.embed_tokens.weight`, `model.layers.{0..tap-1}.*`,
                      `visual.*`; no final norm, no lm_head (spec text-encoder.md section 8.1 / 8.3)
   cases.safetensors  per case: <case>.input_ids i64 [L], <case>.text_token_tags i64 [L],
                      <case>.hidden f32 [L, 64] (tap 4); case `short`: short.layer{1..6} raw layer outputs;
                      mrope: mrope.position_ids i64 [3, L], mrope.hidden; inv_freq f32 [16]
   cases.json         prompts, ids, tap, versions, empty-prompt behaviour, self-check results

This file is our own code; the reference is only imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import copy
import gzip
import json
import math
import random
import shutil
import sys
import tarfile
import traceback
import types

import torch
from safetensors.torch import save_file

import transformers
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

TAP = 4
TEXT = dict(
    vocab_size=151936,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    hidden_act="silu",
    max_position_embeddings=262144,
    rms_norm_eps=1e-6,
    attention_bias=False,
    attention_dropout=0.0,
    tie_word_embeddings=False,
)
ROPE = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [6, 5, 5], "mrope_interleaved": True}
VISION = dict(
    depth=4,
    hidden_size=32,
    hidden_act="gelu_pytorch_tanh",
    intermediate_size=64,
    num_heads=2,
    in_channels=3,
    patch_size=16,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=64,
    num_position_embeddings=2304,
    deepstack_visual_indexes=[1, 2, 3],
)
SPECIAL_IDS = [151643, 151644, 151645, 151652, 151653, 151655, 151656]

SENTENCES = [
    "The camera glides slowly over a misty pine forest at sunrise.",
    "A woman in a red coat walks across a crowded city square while pigeons scatter.",
    "Waves crash against black volcanic rocks; spray glitters in the low golden light.",
    "Close-up: a violinist's fingers press the strings, the bow trembling with each note.",
    "In 1969, 3 astronauts flew 384,400 km to the Moon (Apollo 11).",
    "Rain streaks down the window of a late-night diner, neon signs reflecting in puddles.",
    "A child laughs and chases soap bubbles through a sunlit garden full of tulips.",
    "The old steam train whistles twice before it disappears into the tunnel.",
    "Snow falls silently on the rooftops of a small mountain village; smoke rises from chimneys.",
    "A chef flips vegetables in a flaming wok -- sparks, steam and sizzling sounds fill the kitchen.",
    "Wide shot, 24 fps, shallow depth of field: two friends talk on a bench by the river.",
    "Thunder rumbles in the distance as storm clouds roll over the wheat fields.",
    "Naïve café owners in Zürich serve crème brûlée to tourists from 東京 and São Paulo.",
    "The drummer counts \"1, 2, 3, 4!\" and the whole band kicks in at once.",
]


def long_prompt(n_sentences=48, seed=7):
    rng = random.Random(seed)
    return " ".join(rng.choice(SENTENCES) for _ in range(n_sentences))


PROMPTS = {
    "fox": "A cinematic shot of a red fox running through fresh snow at dawn, soft golden light.",
    "short": "Hi",
    "mixed": "  Two spaces, a tab\there and a newline\nthen <|im_start|>literal markers<|vision_start|> "
    "and <Picture 1>: text, 12345 digits, naïve café 東京 🎬!",
    "long": long_prompt(),
}


def log(*a):
    print(*a, flush=True)


def build_config():
    text = dict(TEXT)
    try:
        cfg = Qwen3VLConfig(
            text_config=dict(text, rope_parameters=dict(ROPE)),
            vision_config=dict(VISION),
            image_token_id=151655,
            video_token_id=151656,
            vision_start_token_id=151652,
            vision_end_token_id=151653,
            tie_word_embeddings=False,
        )
    except Exception:  # older transformers: rope_scaling + rope_theta
        traceback.print_exc()
        rs = {k: v for k, v in ROPE.items() if k != "rope_theta"}
        cfg = Qwen3VLConfig(
            text_config=dict(text, rope_scaling=rs, rope_theta=ROPE["rope_theta"]),
            vision_config=dict(VISION),
            tie_word_embeddings=False,
        )
    return cfg


def randomize(model, used_ids, seed=20261129):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("embed_tokens.weight"):
                v = torch.randn(p.shape, generator=g)
                mask = torch.ones(p.shape[0], dtype=torch.bool)
                mask[torch.tensor(sorted(used_ids), dtype=torch.long)] = False
                v[mask] = float("nan")
            elif name == "lm_head.weight":
                v = torch.zeros(p.shape)
            elif p.ndim >= 2:
                fan_in = 1
                for d in p.shape[1:]:
                    fan_in *= d
                v = torch.randn(p.shape, generator=g) / math.sqrt(fan_in)
            elif name.endswith(".weight"):  # RMSNorm / LayerNorm scales
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            else:  # biases
                v = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def gzip_file(path):
    with open(path, "rb") as f, gzip.GzipFile(filename=path + ".gz", mode="wb", compresslevel=9, mtime=0) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tok", required=True)
    ap.add_argument("--proc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    torch.set_num_threads(8)
    meta = {
        "python": sys.version,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tap": TAP,
        "checks": {},
        "notes": [],
    }
    out_dir = os.path.join(args.work, "text_encoder")
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)

    # ---- tokenizer / processor (the classes the diffusers encoder step declares) ----
    from transformers import Qwen2TokenizerFast

    tok = Qwen2TokenizerFast.from_pretrained(args.tok)
    meta["tokenizer_class"] = type(tok).__name__
    try:
        from transformers import Qwen3VLProcessor

        proc = Qwen3VLProcessor.from_pretrained(args.proc)
        meta["processor_class"] = type(proc).__name__
    except Exception as e:  # keep going: text-only type ids are all 0
        traceback.print_exc()
        meta["notes"].append(f"Qwen3VLProcessor.from_pretrained failed ({e!r}); text-only shim used")
        proc = types.SimpleNamespace(create_mm_token_type_ids=lambda ids: [[0] * len(x) for x in ids])
        meta["processor_class"] = "SHIM"

    ids = {name: tok(p, add_special_tokens=False)["input_ids"] for name, p in PROMPTS.items()}
    empty_ids = tok("", add_special_tokens=False)["input_ids"]
    for name, v in ids.items():
        log(f"prompt {name}: {len(v)} tokens")
    assert len(ids["long"]) > 500, len(ids["long"])
    used = set(SPECIAL_IDS)
    for v in ids.values():
        used.update(v)

    # ---- model ----
    cfg = build_config()
    try:
        model = Qwen3VLForConditionalGeneration._from_config(cfg, attn_implementation="eager")
    except Exception:
        traceback.print_exc()
        model = Qwen3VLForConditionalGeneration(cfg)
    model = model.to(torch.float32).eval()
    meta["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    lm = model.model.language_model
    meta["rope_parameters"] = getattr(cfg.text_config, "rope_parameters", None)
    ms = getattr(lm.rotary_emb, "mrope_section", None)
    meta["mrope_section_model"] = list(ms) if ms is not None else None
    if ms is not None:
        assert list(ms) == ROPE["mrope_section"], ms
    else:
        meta["notes"].append("rotary_emb has no mrope_section attribute")
    randomize(model, used)
    N = cfg.text_config.num_hidden_layers

    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3TextEncoderStep, get_qwen3vl_prompt_embeds

    tensors = {}
    cases = {}
    with torch.no_grad():
        # reference hidden state at the tap, through the diffusers helper
        for name, v in ids.items():
            h = get_qwen3vl_prompt_embeds(model, proc, v, {}, text_encoder_layer=TAP, device=torch.device("cpu"),
                                          dtype=torch.float32)
            assert h.shape == (1, len(v), TEXT["hidden_size"]), h.shape
            assert torch.isfinite(h).all(), name
            tensors[f"{name}.input_ids"] = torch.tensor(v, dtype=torch.int64)
            tensors[f"{name}.text_token_tags"] = torch.ones(len(v), dtype=torch.int64)
            tensors[f"{name}.hidden"] = h[0].contiguous().float()
            cases[name] = {"prompt": PROMPTS[name], "n_tokens": len(v), "input_ids": v}

        # the diffusers t2va block itself, tap lowered through the components object
        try:
            from diffusers.modular_pipelines.modular_pipeline import PipelineState

            step = MiniMaxH3TextEncoderStep()
            comps = types.SimpleNamespace(text_encoder=model, tokenizer=tok, processor=proc, text_encoder_layer=TAP,
                                          text_tag=1, video_tag=0, audio_tag=2,
                                          _execution_device=torch.device("cpu"))
            res = {}
            for name, p in PROMPTS.items():
                state = PipelineState()
                state.set("prompt", p)
                _, state = step(comps, state)
                pe = state.get("prompt_embeds").float()[0]
                tags = state.get("text_token_tags")
                same = bool(torch.equal(pe, tensors[f"{name}.hidden"]))
                res[name] = {"embeds_equal_helper": same, "tags": tags.tolist() == [1] * len(ids[name]),
                             "shape": list(state.get("prompt_embeds").shape)}
            meta["checks"]["diffusers_t2va_block"] = res
        except Exception as e:
            traceback.print_exc()
            meta["checks"]["diffusers_t2va_block"] = f"failed: {e!r}"

        # raw outputs of every decoder layer (hooks) vs hidden_states
        raw = []
        hooks = [layer.register_forward_hook(lambda m, i, o: raw.append((o[0] if isinstance(o, tuple) else o).clone()))
                 for layer in lm.layers]
        v = ids["short"] if len(ids["short"]) > 1 else ids["fox"]
        short_name = "short" if len(ids["short"]) > 1 else "fox"
        inp = torch.tensor([v], dtype=torch.long)
        out = model.model(input_ids=inp, attention_mask=torch.ones_like(inp),
                          mm_token_type_ids=torch.zeros_like(inp), use_cache=False, output_hidden_states=True)
        for hk in hooks:
            hk.remove()
        hs = out.hidden_states
        assert len(hs) == N + 1 and len(raw) == N, (len(hs), len(raw))
        eq = [bool(torch.equal(hs[k], raw[k - 1])) for k in range(1, N)]
        normed = lm.norm(raw[N - 1])
        meta["checks"]["hidden_states_k_is_raw_layer_k-1"] = eq
        meta["checks"]["hidden_states_N_is_normed"] = bool(torch.allclose(hs[N], normed, rtol=0, atol=0))
        meta["checks"]["hidden_states_0_is_embedding"] = bool(torch.equal(hs[0][0], lm.embed_tokens.weight[inp[0]]))
        for k in range(1, N + 1):
            tensors[f"{short_name}.layer{k}"] = raw[k - 1][0].contiguous().float()
        meta["layer_case"] = short_name

        # M-RoPE with three different position axes (T monotonic = the text position for the causal mask)
        mv = ids["long"][:150]
        L = len(mv)
        t = torch.arange(L)
        hpos = t + (t % 7) * 3
        wpos = (t * 5) % 41 + t // 2
        pos = torch.stack([t, hpos, wpos]).to(torch.int64)
        minp = torch.tensor([mv], dtype=torch.long)
        mo = lm(input_ids=minp, attention_mask=torch.ones_like(minp), position_ids=pos[:, None, :], use_cache=False,
                output_hidden_states=True)
        tensors["mrope.input_ids"] = torch.tensor(mv, dtype=torch.int64)
        tensors["mrope.position_ids"] = pos.contiguous()
        tensors["mrope.hidden"] = mo.hidden_states[TAP][0].contiguous().float()
        # and the same ids with default positions must differ (the axes matter)
        do = lm(input_ids=minp, attention_mask=torch.ones_like(minp), use_cache=False, output_hidden_states=True)
        meta["checks"]["mrope_positions_change_output"] = not bool(torch.equal(do.hidden_states[TAP],
                                                                                mo.hidden_states[TAP]))
        meta["checks"]["default_positions_equal_long_prefix_ref"] = float(
            (do.hidden_states[TAP][0] - tensors["long.hidden"][:L]).norm() / tensors["long.hidden"][:L].norm())
        tensors["inv_freq"] = lm.rotary_emb.inv_freq.detach().float().contiguous()

        # empty prompt
        emp = {"tokenizer_ids": empty_ids}
        try:
            h = get_qwen3vl_prompt_embeds(model, proc, empty_ids, {}, text_encoder_layer=TAP,
                                          device=torch.device("cpu"), dtype=torch.float32)
            emp["helper"] = {"ok": True, "shape": list(h.shape)}
        except Exception as e:
            emp["helper"] = {"ok": False, "error": repr(e)[:2000]}
        try:
            from diffusers.modular_pipelines.modular_pipeline import PipelineState

            state = PipelineState()
            state.set("prompt", "")
            _, state = MiniMaxH3TextEncoderStep()(comps, state)
            emp["block"] = {"ok": True, "shape": list(state.get("prompt_embeds").shape),
                            "tags": state.get("text_token_tags").tolist()}
        except Exception as e:
            emp["block"] = {"ok": False, "error": repr(e)[:2000]}
        meta["empty_prompt"] = emp
        log("empty prompt:", json.dumps(emp))

    # the same model in bfloat16, as the diffusers pipeline runs the conditioner (for a future bf16 mode)
    try:
        bfm = copy.deepcopy(model).to(torch.bfloat16)
        with torch.no_grad():
            for name in ("fox", "long"):
                h = get_qwen3vl_prompt_embeds(bfm, proc, ids[name], {}, text_encoder_layer=TAP,
                                              device=torch.device("cpu"), dtype=torch.float32)
                tensors[f"{name}.hidden_bf16"] = h[0].float()
        meta["bf16_reference"] = "fox/long .hidden_bf16: same weights run in bfloat16 (eager attention, CPU)"
        del bfm
    except Exception as e:
        traceback.print_exc()
        meta["bf16_reference"] = f"failed: {e!r}"

    # ---- write the checkpoints ----
    mdir = os.path.join(out_dir, "model")
    bf = copy.deepcopy(model).to(torch.bfloat16)
    bf.save_pretrained(mdir, max_shard_size="20MB")
    for f in sorted(os.listdir(mdir)):
        if f not in ("config.json",) and not f.endswith(".safetensors") and not f.endswith(".index.json"):
            os.remove(os.path.join(mdir, f))
    meta["model_files"] = sorted(os.listdir(mdir))

    # self-check: reload the saved folder in float32, same hidden state
    try:
        re = Qwen3VLForConditionalGeneration.from_pretrained(mdir, dtype=torch.float32,
                                                             attn_implementation="eager").eval()
        with torch.no_grad():
            h = get_qwen3vl_prompt_embeds(re, proc, ids["fox"], {}, text_encoder_layer=TAP,
                                          device=torch.device("cpu"), dtype=torch.float32)
        meta["checks"]["reload_equal"] = bool(torch.equal(h[0], tensors["fox.hidden"]))
    except Exception as e:
        traceback.print_exc()
        meta["checks"]["reload_equal"] = f"failed: {e!r}"

    sd = bf.state_dict()
    comfy = {}
    for k, v in sd.items():
        if k.startswith("model.language_model."):
            rest = k[len("model.language_model."):]
            if rest.startswith("layers."):
                if int(rest.split(".")[1]) >= TAP:
                    continue
            elif rest != "embed_tokens.weight":
                continue  # final norm: not in the repack
            comfy["model." + rest] = v.contiguous()
        elif k.startswith("model.visual."):
            comfy["visual." + k[len("model.visual."):]] = v.contiguous()
    meta["comfy_tensors"] = len(comfy)
    cpath = os.path.join(out_dir, "comfy.safetensors")
    save_file({k: v.detach().clone().contiguous() for k, v in comfy.items()}, cpath, metadata={"format": "pt"})
    for f in sorted(os.listdir(mdir)):
        if f.endswith(".safetensors"):
            gzip_file(os.path.join(mdir, f))
    gzip_file(cpath)

    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()},
              os.path.join(out_dir, "cases.safetensors"))
    meta["cases"] = cases
    with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False, default=str)
    log(json.dumps(meta["checks"], indent=1, default=str))
    with tarfile.open(args.tar, "w") as tf:
        tf.add(out_dir, arcname="text_encoder")
    total = 0
    for root, _, files in os.walk(out_dir):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
            log(f"{os.path.relpath(os.path.join(root, f), out_dir)}: {os.path.getsize(os.path.join(root, f))}")
    log("total bytes:", total)


if __name__ == "__main__":
    main()
