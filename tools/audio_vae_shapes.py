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
