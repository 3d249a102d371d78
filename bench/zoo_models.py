"""Models beyond ../shared/models for the generalization table of docs/validation.md: torchvision's other
families and small PyTorch modules that use the ops the shared models do not (recurrences, Einsum, bilinear
upsampling, reflect padding, PixelShuffle, GroupNorm/InstanceNorm, PReLU/Mish/ELU/SELU, LogSoftmax, CumSum,
ReduceMax, gather, an encoder-decoder Transformer with padding masks). bench/export_models.py --zoo writes them.
"""
import torch

nn, F = torch.nn, torch.nn.functional


class RMSNorm(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.w = nn.Parameter(torch.ones(d))

    def forward(s, x):
        return s.w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class LlamaBlock(nn.Module):
    """Pre-norm decoder block: RMSNorm, rotary embeddings, causal attention, SwiGLU."""
    def __init__(s, d, h):
        super().__init__()
        s.h, s.n1, s.n2 = h, RMSNorm(d), RMSNorm(d)
        s.qkv, s.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        s.g, s.u, s.dn = nn.Linear(d, 4 * d, bias=False), nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    @staticmethod
    def rope(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat((-x2, x1), -1) * sin

    def forward(s, x, cos, sin):
        B, T, D = x.shape
        q, k, v = s.qkv(s.n1(x)).split(D, -1)
        q, k, v = [t.view(B, T, s.h, D // s.h).transpose(1, 2) for t in (q, k, v)]
        q, k = s.rope(q, cos, sin), s.rope(k, cos, sin)
        a = (q @ k.transpose(-1, -2)) / (D // s.h) ** 0.5
        a = a.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + s.o((a @ v).transpose(1, 2).reshape(B, T, D))
        n = s.n2(x)
        return x + s.dn(F.silu(s.g(n)) * s.u(n))


class Llama(nn.Module):
    def __init__(s, vocab=32000, d=512, h=8, layers=4):
        super().__init__()
        s.e, s.b = nn.Embedding(vocab, d), nn.ModuleList([LlamaBlock(d, h) for _ in range(layers)])
        s.n, s.head, s.hd = RMSNorm(d), nn.Linear(d, vocab, bias=False), d // h

    def forward(s, idx):
        T = idx.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, s.hd, 2).float() / s.hd))
        f = torch.outer(torch.arange(T).float(), inv)
        emb = torch.cat((f, f), -1)
        x = s.e(idx)
        for b in s.b:
            x = b(x, emb.cos(), emb.sin())
        return s.head(s.n(x))


class LSTMTagger(nn.Module):
    def __init__(s):
        super().__init__()
        s.e, s.l, s.o = nn.Embedding(1000, 128), nn.LSTM(128, 256, 2, batch_first=True), nn.Linear(256, 10)

    def forward(s, idx):
        return s.o(s.l(s.e(idx))[0])


class GRUNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.l, s.o = nn.GRU(64, 128, 1, batch_first=True, bidirectional=True), nn.Linear(256, 10)

    def forward(s, x):
        return s.o(s.l(x)[0])


class UNet(nn.Module):
    """Max and average pooling down, a transposed convolution and a bilinear upsampling up, skip concats."""
    def __init__(s, c=32):
        super().__init__()
        blk = lambda i, o: nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                         nn.Conv2d(o, o, 3, padding=1), nn.ReLU())
        s.d1, s.d2, s.d3 = blk(3, c), blk(c, 2 * c), blk(2 * c, 4 * c)
        s.u2, s.c2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2), blk(4 * c, 2 * c)
        s.u1, s.c1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), blk(2 * c + c, c)
        s.o = nn.Conv2d(c, 2, 1)

    def forward(s, x):
        a = s.d1(x)
        b = s.d2(F.max_pool2d(a, 2))
        c = s.d3(F.avg_pool2d(b, 2))
        b2 = s.c2(torch.cat([s.u2(c), b], 1))
        return s.o(s.c1(torch.cat([s.u1(b2), a], 1)))


class AudioNet(nn.Module):
    """Conv1d, GroupNorm, PReLU, Mish/ELU/SELU/Softplus/Hardtanh/SiLU/LeakyReLU, InstanceNorm, LogSoftmax."""
    def __init__(s):
        super().__init__()
        s.c1, s.gn, s.pr = nn.Conv1d(1, 32, 10, stride=5), nn.GroupNorm(4, 32), nn.PReLU(32)
        s.c2, s.inorm, s.lin = nn.Conv1d(32, 32, 3, padding=1), nn.InstanceNorm1d(32, affine=True), nn.Linear(32, 10)

    def forward(s, x):
        x = s.pr(s.gn(s.c1(x)))
        x = F.mish(x) + F.elu(x) + F.selu(x) + F.softplus(x) + F.hardtanh(x) + F.silu(x) + F.leaky_relu(x, 0.1)
        return F.log_softmax(s.lin(s.inorm(s.c2(x)).mean(-1)), -1)


class SRNet(nn.Module):
    """Reflect padding, PixelShuffle (DepthToSpace), nearest upsampling."""
    def __init__(s):
        super().__init__()
        s.c1, s.ps = nn.Conv2d(3, 48, 3, padding=1, padding_mode="reflect"), nn.PixelShuffle(2)
        s.c2, s.up = nn.Conv2d(12, 3, 3, padding=1), nn.Upsample(scale_factor=2, mode="nearest")

    def forward(s, x):
        return torch.sigmoid(s.c2(s.ps(torch.relu(s.c1(x))))) + s.up(x)


class Seq2Seq(nn.Module):
    """nn.Transformer (encoder-decoder) with a causal mask and key padding masks."""
    def __init__(s, vocab=1000, d=128):
        super().__init__()
        s.e, s.o = nn.Embedding(vocab, d), nn.Linear(d, vocab)
        s.t = nn.Transformer(d, 4, 2, 2, 256, dropout=0.1, batch_first=True)

    def forward(s, src):
        tgt, T = src.flip(1), src.shape[1]
        pad = src == 0
        h = s.t(s.e(src), s.e(tgt), tgt_mask=torch.triu(torch.full((T, T), float("-inf")), 1),
                src_key_padding_mask=pad, memory_key_padding_mask=pad)
        return s.o(h)


class Misc(nn.Module):
    """CumSum, Where, index_select, attention by hand, max / amax / std."""
    def __init__(s):
        super().__init__()
        s.l1, s.ln, s.l2 = nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 64)

    def forward(s, x):
        h = torch.cumsum(s.ln(s.l1(x)), 1)
        h = torch.where(h > 0, h, h * 0.5).index_select(1, torch.arange(h.shape[1] - 1, -1, -1))
        a = torch.softmax(h @ h.transpose(1, 2) / 8.0, -1) @ h
        return s.l2(a).max(-1).values + s.l2(a).amax(-1) + s.l2(torch.tanh(a)).std(-1)


def zoo(M, no_drop_path):
    """name -> (constructor, example input shape; ("tokens", B, T) for token ids), and memplan's options."""
    image = (1, 3, 224, 224)
    return {
        "efficientnet_b0": (lambda: no_drop_path(M.efficientnet_b0()), image, "--batch 8"),
        "convnext_tiny": (lambda: no_drop_path(M.convnext_tiny()), image, "--batch 8"),
        "densenet121": (lambda: M.densenet121(), image, "--batch 8"),
        "regnet_y_400mf": (lambda: M.regnet_y_400mf(), image, "--batch 8"),
        "shufflenet_v2_x1_0": (lambda: M.shufflenet_v2_x1_0(), image, "--batch 8"),
        "squeezenet1_1": (lambda: M.squeezenet1_1(), image, "--batch 8"),
        "googlenet": (lambda: M.googlenet(aux_logits=False, init_weights=True), image, "--batch 8"),
        "mnasnet0_5": (lambda: M.mnasnet0_5(), image, "--batch 8"),
        "resnext50_32x4d": (lambda: M.resnext50_32x4d(), image, "--batch 8"),
        "maxvit_t": (lambda: no_drop_path(M.maxvit_t()), image, "--batch 2"),
        "r3d_18": (lambda: M.video.r3d_18(), (1, 3, 8, 112, 112), "--batch 2"),
        "llama_like": (lambda: Llama(), ("tokens", 1, 256), "--batch 4 --dim sequence=256"),
        "lstm_tagger": (lambda: LSTMTagger(), ("tokens", 1, 32), "--batch 8 --dim sequence=32"),
        "gru_bi": (lambda: GRUNet(), (1, 32, 64), "--batch 8"),
        "unet_small": (lambda: UNet(), (1, 3, 128, 128), "--batch 4"),
        "audionet": (lambda: AudioNet(), (1, 1, 16000), "--batch 8"),
        "srnet": (lambda: SRNet(), (1, 3, 64, 64), "--batch 8"),
        "seq2seq": (lambda: Seq2Seq(), ("tokens", 1, 24), "--batch 16 --dim sequence=24"),
        "misc": (lambda: Misc(), (1, 8, 64), "--batch 16"),
    }
