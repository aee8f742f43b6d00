"""Names and shapes of the BigVGAN audio-VAE decoder's tensors (the diffusers layout of the
release's audio_vae/: weight-normalized convs, snake activations with alpha/beta), derived
from the decoder's sizes. Used by tools/toy/make_templates.py (the toy model) and
tools/device/make_sparse_snapshot.py (the full-size sparse snapshot)."""


def decoder_shapes(dim, lat, ch_lat, rates, kernels, rk, rd):
    """{name: shape}: dim = decoder_dim, lat = latent_dim, ch_lat = latent_channels, rates /
    kernels = the upsampling stages, rk / rd = resblock kernel sizes / dilation lists."""
    t = {}

    def conv(name, cout, cin, k, bias=True, transposed=False):
        t[name + ".weight_g"] = [cin if transposed else cout, 1, 1]
        t[name + ".weight_v"] = [cin, cout, k] if transposed else [cout, cin, k]
        if bias:
            t[name + ".bias"] = [cout]

    def snake(name, ch):
        t[name + ".act.alpha"] = [ch]
        t[name + ".act.beta"] = [ch]

    t["dec_in_proj.weight"] = [lat, ch_lat, 1]
    t["dec_in_proj.bias"] = [lat]
    conv("decoder.conv_pre", dim, lat, 7)
    ch = dim
    for i, (r, k) in enumerate(zip(rates, kernels)):
        conv(f"decoder.ups.{i}.0", ch // 2, ch, k, transposed=True)
        ch //= 2
        for j, (kk, dil) in enumerate(zip(rk, rd)):
            b = f"decoder.resblocks.{i * len(rk) + j}"
            for d in range(len(dil)):
                conv(f"{b}.convs1.{d}", ch, ch, kk)
                conv(f"{b}.convs2.{d}", ch, ch, kk)
            for a in range(2 * len(dil)):
                snake(f"{b}.activations.{a}", ch)
    snake("decoder.activation_post", ch)
    conv("decoder.conv_post", 1, ch, 7, bias=False)
    return t


def encoder_shapes(dim, rates, lat, ch_lat):
    """{name: shape} of the DAC-style encoder, its causal-attention projection (pre_block) and the
    posterior heads (spec audio-vae.md §8.2-8.3): dim = encoder_dim, rates = encoder_rates,
    lat = latent_dim, ch_lat = latent_channels; the pre_block MLP is GeGLU with mlp_ratio 2."""
    t = {}

    def conv(name, cout, cin, k):
        t[name + ".weight_g"] = [cout, 1, 1]
        t[name + ".weight_v"] = [cout, cin, k]
        t[name + ".bias"] = [cout]

    conv("encoder.block.0", dim, 1, 7)
    c = dim
    for b, s in enumerate(rates, start=1):
        p = f"encoder.block.{b}.block."
        for u in range(3):
            t[f"{p}{u}.block.0.alpha"] = [1, c, 1]
            conv(f"{p}{u}.block.1", c, c, 7)
            t[f"{p}{u}.block.2.alpha"] = [1, c, 1]
            conv(f"{p}{u}.block.3", c, c, 1)
        t[f"{p}3.alpha"] = [1, c, 1]
        conv(f"{p}4", 2 * c, c, 2 * s)
        c *= 2
    n = len(rates)
    t[f"encoder.block.{n + 1}.alpha"] = [1, c, 1]
    conv(f"encoder.block.{n + 2}", lat, c, 3)
    C, F = ch_lat, 2 * ch_lat
    for k in ("norm1", "norm3"):
        t[f"pre_block.{k}.weight"], t[f"pre_block.{k}.bias"] = [lat], [lat]
    t["pre_block.attn.qkv.weight"] = [3 * lat, lat]
    for k in ("q_bias", "zero_k_bias", "v_bias"):
        t[f"pre_block.attn.{k}"] = [lat]
    t["pre_block.attn.proj.weight"], t["pre_block.attn.proj.bias"] = [C, C], [C]
    t["pre_block.proj.weight"], t["pre_block.proj.bias"] = [C, lat], [C]
    for k in ("norm2", "mlp.norm"):
        t[f"pre_block.{k}.weight"], t[f"pre_block.{k}.bias"] = [C], [C]
    t["pre_block.mlp.w0.weight"], t["pre_block.mlp.w0.bias"] = [F, C], [F]
    t["pre_block.mlp.w1.weight"], t["pre_block.mlp.w1.bias"] = [F, C], [F]
    t["pre_block.mlp.w2.weight"], t["pre_block.mlp.w2.bias"] = [C, F], [C]
    for k in ("mean_proj", "logs_proj"):
        t[f"{k}.weight"], t[f"{k}.bias"] = [C, C, 1], [C]
    return t
