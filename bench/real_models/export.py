#!/usr/bin/env python3
"""Exports the real-model suite: models as users export them with torch.onnx.export.

Run through bench/real_models/suite.sh, which makes the isolated virtual environment (torch,
torchvision, transformers, pinned) and calls this script inside it:

  bench/real_models/suite.sh export [--out-dir DIR] [--only NAME,...] [--exporter dynamo|torchscript]
  bench/real_models/suite.sh list

Weights are the architectures' own initialisation, seeded (no download: nothing outside PyPI is
reachable); inputs are at the sizes applications use. Each model lands in
DIR/<name>.onnx (default ~/.cache/peregrine/real-models), with DIR/<name>.json saying which
exporter produced it, the opset, the input shapes and the export time. A model already exported
with the same recipe is kept. The default exporter is dynamo (torch.onnx.export(dynamo=True));
where it fails the TorchScript-based exporter is tried and the JSON says so.
"""

import argparse
import json
import os
import sys
import time
import traceback

import torch

DEFAULT_OUT = os.path.expanduser("~/.cache/peregrine/real-models")
OPSET = 18  # the newest opset Peregrine's pinned onnx (1.17) checks; exporters' default is 18


def tv(name, size=224, **kw):
    """A torchvision model builder and its NCHW input."""
    def build():
        import torchvision
        m = torchvision.models.get_model(name, weights=None, **kw)
        return m, (torch.randn(1, 3, size, size),), ["input"]
    return build


def tv_seg(name, size=512):
    def build():
        import torchvision

        class Out(torch.nn.Module):  # the "out" head only: dict outputs are not ONNX
            def __init__(self):
                super().__init__()
                self.m = torchvision.models.get_model(name, weights=None, weights_backbone=None,
                                                      aux_loss=None)

            def forward(self, x):
                return self.m(x)["out"]
        return Out(), (torch.randn(1, 3, size, size),), ["input"]
    return build


def tv_video(name):
    def build():
        import torchvision
        m = torchvision.models.get_model(name, weights=None)
        return m, (torch.randn(1, 3, 16, 112, 112),), ["input"]
    return build


def raft_small():
    import torchvision

    class Flow(torch.nn.Module):  # the final flow field only
        def __init__(self):
            super().__init__()
            self.m = torchvision.models.optical_flow.raft_small(weights=None)

        def forward(self, a, b):
            return self.m(a, b, num_flow_updates=6)[-1]
    return Flow(), (torch.randn(1, 3, 368, 496), torch.randn(1, 3, 368, 496)), ["image1", "image2"]


def ssdlite_backbone_head():
    """SSDlite320-MobileNetV3: backbone and head (box decoding and NMS stay in Python, as
    deployments export it)."""
    import torchvision

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
                weights=None, weights_backbone=None)
            self.backbone, self.head = m.backbone, m.head

        def forward(self, x):
            feats = list(self.backbone(x).values())
            out = self.head(feats)
            return out["bbox_regression"], out["cls_logits"]
    return Heads(), (torch.randn(1, 3, 320, 320),), ["input"]


def fcos_backbone_head():
    """FCOS-ResNet50-FPN at 512x512: backbone + FPN + head."""
    import torchvision

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            m = torchvision.models.detection.fcos_resnet50_fpn(weights=None,
                                                               weights_backbone=None)
            self.backbone, self.head = m.backbone, m.head

        def forward(self, x):
            feats = list(self.backbone(x).values())
            out = self.head(feats)
            return out["cls_logits"], out["bbox_regression"], out["bbox_ctrness"]
    return Heads(), (torch.randn(1, 3, 512, 512),), ["input"]


def hf(kind):
    def build():
        import transformers as T
        torch.manual_seed(0)
        if kind == "bert":
            cfg = T.BertConfig()
            m = T.BertModel(cfg)
            ids = torch.randint(0, cfg.vocab_size, (1, 128))
            return m, (ids, torch.ones(1, 128, dtype=torch.int64)), ["input_ids", "attention_mask"]
        if kind == "distilbert":
            cfg = T.DistilBertConfig()
            m = T.DistilBertModel(cfg)
            ids = torch.randint(0, cfg.vocab_size, (1, 128))
            return m, (ids, torch.ones(1, 128, dtype=torch.int64)), ["input_ids", "attention_mask"]
        if kind == "gpt2":
            cfg = T.GPT2Config(use_cache=False)
            m = T.GPT2Model(cfg)
            return m, (torch.randint(0, cfg.vocab_size, (1, 128)),), ["input_ids"]
        if kind == "t5_encoder":
            cfg = T.T5Config(d_model=512, num_layers=6, num_heads=8, d_ff=2048)
            m = T.T5EncoderModel(cfg)
            return m, (torch.randint(0, cfg.vocab_size, (1, 128)),), ["input_ids"]
        if kind == "whisper_encoder":
            cfg = T.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                  decoder_layers=4, decoder_attention_heads=6)  # whisper-tiny
            m = T.WhisperModel(cfg).encoder
            return m, (torch.randn(1, 80, 3000),), ["input_features"]
        if kind == "wav2vec2":
            cfg = T.Wav2Vec2Config(num_hidden_layers=4)

            class Audio(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = T.Wav2Vec2Model(cfg)

                def forward(self, x):
                    return self.m(x).last_hidden_state
            return Audio(), (torch.randn(1, 32000),), ["input_values"]  # 2 s at 16 kHz
        if kind == "clip_vision":
            cfg = T.CLIPVisionConfig()

            class Vision(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = T.CLIPVisionModel(cfg)

                def forward(self, x):
                    return self.m(x).last_hidden_state
            return Vision(), (torch.randn(1, 3, 224, 224),), ["pixel_values"]
        if kind == "llama_block":
            cfg = T.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=2,
                                num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                use_cache=False)
            m = T.LlamaModel(cfg)
            return m, (torch.randint(0, cfg.vocab_size, (1, 128)),), ["input_ids"]
        raise ValueError(kind)
    return build


def rnn(kind):
    def build():
        class Seq(torch.nn.Module):
            def __init__(self):
                super().__init__()
                cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
                self.rnn = cls(input_size=128, hidden_size=256, num_layers=2, batch_first=True)
                self.head = torch.nn.Linear(256, 32)

            def forward(self, x):
                y, _ = self.rnn(x)
                return self.head(y)
        return Seq(), (torch.randn(1, 64, 128),), ["input"]
    return build


def planning_head():
    """A GRU encoder over an agent's history and a transformer decoder over map tokens."""
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(8, 128, batch_first=True)
            layer = torch.nn.TransformerDecoderLayer(128, 8, 512, batch_first=True, dropout=0.0)
            self.dec = torch.nn.TransformerDecoder(layer, 3)
            self.out = torch.nn.Linear(128, 60)

        def forward(self, history, map_tokens):
            _, h = self.gru(history)
            q = h.transpose(0, 1).expand(-1, 6, -1)
            return self.out(self.dec(q, map_tokens))
    return Head(), (torch.randn(1, 20, 8), torch.randn(1, 256, 128)), ["history", "map_tokens"]


def yolo_style():
    """A YOLOv8-style detector at 640x640 written out here (no package ships one on PyPI):
    Conv-BN-SiLU blocks, C2f (Split + bottlenecks + Concat), SPPF (chained 5x5 MaxPools),
    nearest upsampling, a PAN neck and a decoupled head with a DFL Softmax over box bins."""
    nn = torch.nn

    def conv(ci, co, k=1, s=1):
        return nn.Sequential(nn.Conv2d(ci, co, k, s, k // 2, bias=False), nn.BatchNorm2d(co),
                             nn.SiLU())

    class C2f(nn.Module):
        def __init__(self, ci, co, n, shortcut=True):
            super().__init__()
            self.c = co // 2
            self.cv1, self.cv2 = conv(ci, 2 * self.c), conv((2 + n) * self.c, co)
            self.m = nn.ModuleList(nn.Sequential(conv(self.c, self.c, 3), conv(self.c, self.c, 3))
                                   for _ in range(n))
            self.shortcut = shortcut

        def forward(self, x):
            y = list(self.cv1(x).split((self.c, self.c), 1))
            for m in self.m:
                y.append(y[-1] + m(y[-1]) if self.shortcut else m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, ci, co):
            super().__init__()
            self.cv1, self.cv2 = conv(ci, ci // 2), conv(ci * 2, co)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            a = self.pool(x)
            b = self.pool(a)
            return self.cv2(torch.cat([x, a, b, self.pool(b)], 1))

    class Yolo(nn.Module):
        def __init__(self, w=(32, 64, 128, 256, 512), nc=80, reg=16):
            super().__init__()
            self.stem = nn.Sequential(conv(3, w[0], 3, 2), conv(w[0], w[1], 3, 2), C2f(w[1], w[1], 1))
            self.p3 = nn.Sequential(conv(w[1], w[2], 3, 2), C2f(w[2], w[2], 2))
            self.p4 = nn.Sequential(conv(w[2], w[3], 3, 2), C2f(w[3], w[3], 2))
            self.p5 = nn.Sequential(conv(w[3], w[4], 3, 2), C2f(w[4], w[4], 1), SPPF(w[4], w[4]))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n4, self.n3 = C2f(w[4] + w[3], w[3], 1, False), C2f(w[3] + w[2], w[2], 1, False)
            self.d3, self.d4 = conv(w[2], w[2], 3, 2), conv(w[3], w[3], 3, 2)
            self.m4, self.m5 = C2f(w[2] + w[3], w[3], 1, False), C2f(w[3] + w[4], w[4], 1, False)
            self.reg, self.nc = reg, nc
            self.box = nn.ModuleList(nn.Sequential(conv(c, 64, 3), conv(64, 64, 3),
                                                   nn.Conv2d(64, 4 * reg, 1)) for c in w[2:])
            self.cls = nn.ModuleList(nn.Sequential(conv(c, 80, 3), conv(80, 80, 3),
                                                   nn.Conv2d(80, nc, 1)) for c in w[2:])
            self.dfl = nn.Conv2d(reg, 1, 1, bias=False)
            self.dfl.weight.data[:] = torch.arange(reg, dtype=torch.float32).view(1, reg, 1, 1)

        def forward(self, x):
            p3 = self.p3(self.stem(x))
            p4 = self.p4(p3)
            p5 = self.p5(p4)
            n4 = self.n4(torch.cat([self.up(p5), p4], 1))
            n3 = self.n3(torch.cat([self.up(n4), p3], 1))
            m4 = self.m4(torch.cat([self.d3(n3), n4], 1))
            m5 = self.m5(torch.cat([self.d4(m4), p5], 1))
            outs = []
            for f, box, cls in zip((n3, m4, m5), self.box, self.cls):
                outs.append(torch.cat([box(f), cls(f)], 1).flatten(2))
            y = torch.cat(outs, 2)  # (1, 4 * reg + nc, anchors)
            b, c = y.split((4 * self.reg, self.nc), 1)
            a = b.shape[-1]
            b = self.dfl(b.view(1, 4, self.reg, a).transpose(2, 1).softmax(1)).view(1, 4, a)
            return torch.cat([b, c.sigmoid()], 1)
    return Yolo(), (torch.randn(1, 3, 640, 640),), ["images"]


def unet_groupnorm():
    """A diffusion-style UNet at 256x256: GroupNorm + SiLU residual blocks, strided-conv
    downsampling, nearest upsampling with skip concatenation, self-attention at 32x32."""
    nn = torch.nn

    class Res(nn.Module):
        def __init__(self, ci, co):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, ci), nn.Conv2d(ci, co, 3, 1, 1)
            self.n2, self.c2 = nn.GroupNorm(32, co), nn.Conv2d(co, co, 3, 1, 1)
            self.skip = nn.Conv2d(ci, co, 1) if ci != co else nn.Identity()

        def forward(self, x):
            h = self.c1(torch.nn.functional.silu(self.n1(x)))
            h = self.c2(torch.nn.functional.silu(self.n2(h)))
            return self.skip(x) + h

    class Attn(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm = nn.GroupNorm(32, c)
            self.attn = nn.MultiheadAttention(c, 4, batch_first=True)

        def forward(self, x):
            n, c, h, w = x.shape
            t = self.norm(x).flatten(2).transpose(1, 2)
            return x + self.attn(t, t, t, need_weights=False)[0].transpose(1, 2).view(n, c, h, w)

    class UNet(nn.Module):
        def __init__(self, ch=(64, 128, 256)):
            super().__init__()
            self.inp = nn.Conv2d(3, ch[0], 3, 1, 1)
            self.down = nn.ModuleList()
            c = ch[0]
            for i, co in enumerate(ch):
                self.down.append(nn.ModuleList([Res(c, co), nn.Conv2d(co, co, 3, 2, 1)]))
                c = co
            self.mid = nn.Sequential(Res(c, c), Attn(c), Res(c, c))
            self.up = nn.ModuleList()
            for co in reversed(ch):
                self.up.append(Res(c + co, co))
                c = co
            self.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 3, 3, 1, 1))

        def forward(self, x):
            h = self.inp(x)
            skips = []
            for res, down in self.down:
                h = res(h)
                skips.append(h)
                h = down(h)
            h = self.mid(h)
            for res in self.up:
                h = torch.nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
                h = res(torch.cat([h, skips.pop()], 1))
            return self.out(h)
    return UNet(), (torch.randn(1, 3, 256, 256),), ["input"]


def hf_vision(kind):
    def build():
        import transformers as T
        torch.manual_seed(0)
        if kind == "segformer":
            cfg = T.SegformerConfig()  # MiT-b0 shapes
            return (T.SegformerForSemanticSegmentation(cfg), (torch.randn(1, 3, 512, 512),),
                    ["pixel_values"])
        if kind == "mobilevit":
            cfg = T.MobileViTConfig()  # mobilevit-small shapes

            class Features(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = T.MobileViTModel(cfg)
                    # Its own init (std 0.02 convs and batch-norm scales) shrinks activations
                    # to denormals (~1e-40) by the last stage, which engines then compare as
                    # noise: He init and unit batch norms instead, as trained weights keep
                    # them O(1).
                    for mod in self.m.modules():
                        if isinstance(mod, torch.nn.Conv2d):
                            torch.nn.init.kaiming_normal_(mod.weight, mode="fan_in")
                        if isinstance(mod, torch.nn.BatchNorm2d):
                            mod.reset_parameters()

                def forward(self, x):
                    return self.m(pixel_values=x).last_hidden_state
            return Features(), (torch.randn(1, 3, 256, 256),), ["pixel_values"]
        if kind == "detr":
            cfg = T.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False,
                               backbone_config=T.ResNetConfig(out_features=["stage4"]))
            m = T.DetrForObjectDetection(cfg)

            class Out(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = m

                def forward(self, x):
                    o = self.m(pixel_values=x)
                    return o.logits, o.pred_boxes
            return Out(), (torch.randn(1, 3, 512, 512),), ["pixel_values"]
        raise ValueError(kind)
    return build


def gpt2_past():
    """One GPT-2 decoding step with a 127-token key/value cache (what a generation loop runs)."""
    import transformers as T
    cfg = T.GPT2Config()
    m = T.GPT2LMHeadModel(cfg)
    L, H, D, P = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, 127

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids, past):
            cache = T.DynamicCache()
            for i in range(L):
                cache.update(past[i, 0], past[i, 1], i)
            o = self.m(input_ids=ids, past_key_values=cache, use_cache=True)
            return o.logits
    return Step(), (torch.randint(0, cfg.vocab_size, (1, 1)), torch.randn(L, 2, 1, H, P, D)), \
        ["input_ids", "past"]


# name -> builder. Sizes: classification 224, segmentation 512, detection 320 / 512, flow 368x496.
SUITE = {
    "resnet50": tv("resnet50"),
    "mobilenet_v2": tv("mobilenet_v2"),
    "mobilenet_v3_large": tv("mobilenet_v3_large"),
    "efficientnet_b0": tv("efficientnet_b0"),
    "regnet_y_400mf": tv("regnet_y_400mf"),
    "convnext_tiny": tv("convnext_tiny"),
    "vit_b_16": tv("vit_b_16"),
    "swin_t": tv("swin_t"),
    "maxvit_t": tv("maxvit_t"),
    "deeplabv3_mobilenet_v3_large": tv_seg("deeplabv3_mobilenet_v3_large"),
    "lraspp_mobilenet_v3_large": tv_seg("lraspp_mobilenet_v3_large"),
    "fcn_resnet50": tv_seg("fcn_resnet50"),
    "ssdlite320_heads": ssdlite_backbone_head,
    "fcos_resnet50_heads": fcos_backbone_head,
    "raft_small": raft_small,
    "r3d_18": tv_video("r3d_18"),
    "bert_base": hf("bert"),
    "distilbert": hf("distilbert"),
    "gpt2": hf("gpt2"),
    "t5_encoder": hf("t5_encoder"),
    "whisper_tiny_encoder": hf("whisper_encoder"),
    "llama_2layer": hf("llama_block"),
    "lstm_2layer": rnn("lstm"),
    "gru_2layer": rnn("gru"),
    "planning_head": planning_head,
    # Architectures no kernel here was tuned on: the check that speed is general.
    "shufflenet_v2": tv("shufflenet_v2_x1_0"),
    "densenet121": tv("densenet121"),
    "inception_v3": tv("inception_v3", size=299, init_weights=True, aux_logits=False),
    "googlenet": tv("googlenet", init_weights=True, aux_logits=False),
    "squeezenet": tv("squeezenet1_1"),
    "resnext50_32x4d": tv("resnext50_32x4d"),
    "efficientnet_v2_s": tv("efficientnet_v2_s", size=384),
    "mnasnet": tv("mnasnet1_0"),
    "yolo_style_640": yolo_style,
    "unet_groupnorm_256": unet_groupnorm,
    "segformer_b0": hf_vision("segformer"),
    "mobilevit_s": hf_vision("mobilevit"),
    "detr_resnet50": hf_vision("detr"),
    "gpt2_kv_step": gpt2_past,
    "wav2vec2_4layer": hf("wav2vec2"),
    "clip_vision": hf("clip_vision"),
}


def export_one(name, out_dir, exporter):
    path = os.path.join(out_dir, name + ".onnx")
    meta_path = os.path.join(out_dir, name + ".json")
    recipe = {"name": name, "torch": torch.__version__, "opset": OPSET, "wanted": exporter}
    if os.path.exists(path) and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if all(meta.get(k) == v for k, v in recipe.items()):
            return meta
    torch.manual_seed(0)
    try:
        model, args, input_names = SUITE[name]()
    except Exception as ex:  # noqa: BLE001 - a model that cannot be built is reported, not fatal
        return dict(recipe, exporter=None, errors={"build": f"{type(ex).__name__}: {ex}"[:300]})
    model.eval()
    order = [exporter] + [e for e in ("dynamo", "torchscript") if e != exporter]
    errors = {}
    t0 = time.time()
    for e in order:
        tmp = path + ".tmp"
        try:
            with torch.no_grad():
                torch.onnx.export(model, args, tmp, input_names=input_names, opset_version=OPSET,
                                  dynamo=(e == "dynamo"), external_data=False)
            os.replace(tmp, path)
            meta = dict(recipe, exporter=e, export_s=round(time.time() - t0, 1),
                        inputs={n: list(a.shape) for n, a in zip(input_names, args)},
                        errors=errors)
            with open(meta_path, "w") as f:
                json.dump(meta, f, indent=1)
            return meta
        except Exception as ex:  # noqa: BLE001 - an exporter failure is data, try the next
            errors[e] = f"{type(ex).__name__}: {str(ex).splitlines()[0] if str(ex) else ''}"[:300]
            if os.environ.get("PEREGRINE_EXPORT_VERBOSE"):
                traceback.print_exc()
            if os.path.exists(tmp):
                os.remove(tmp)
    return dict(recipe, exporter=None, errors=errors)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=["export", "list"])
    ap.add_argument("--out-dir", default=DEFAULT_OUT)
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--exporter", choices=["dynamo", "torchscript"], default="dynamo")
    args = ap.parse_args()
    if args.command == "list":
        print("\n".join(SUITE))
        return 0
    names = [n for n in args.only.split(",") if n] or list(SUITE)
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        print(f"export.py: unknown model(s) {', '.join(unknown)}; see 'list'", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    failed = 0
    for n in names:
        meta = export_one(n, args.out_dir, args.exporter)
        if meta.get("exporter"):
            print(f"{n}: {meta['exporter']} ({meta.get('export_s', 'cached')} s) "
                  f"-> {os.path.join(args.out_dir, n + '.onnx')}", flush=True)
        else:
            failed += 1
            print(f"{n}: export failed: {meta['errors']}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
