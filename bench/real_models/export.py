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
