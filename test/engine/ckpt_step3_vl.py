"""StepFun's Step-3 (Step3VLForConditionalGeneration, stepfun-ai/step3,
model_type step3_vl; vLLM's own Step3VLConfig, no remote code), tiny, as
vLLM 0.32 reads it (model_executor/models/step3_vl.py, step3_text.py).

The text model is ckpt_step3_text.py's (Step-3's MFA attention, MoE layers
1 and 2) under the release's model.* and lm_head.* names (vLLM's mapper puts
them under language_model.); its config under text_config.  The tower has
no transformers class: its tensors are made by hand, seeded, in the
release's names (step3_vl.py's modules, loaded by AutoWeightsLoader as
named):

    vision_model.embeddings.class_embedding [1, D]
    vision_model.embeddings.patch_embedding.weight [D, 3, 14, 14], .bias [D]
    vision_model.embeddings.position_embedding.weight [(56/14)^2 + 1, D]
    vision_model.transformer.layers.N.self_attn.qkv_proj.weight [3D, D]
        (q, k, v rows), .bias [3D]; self_attn.out_proj; layer_norm1;
        layer_norm2; mlp.fc1 [Iv, D]; mlp.fc2 [D, Iv] (with biases)
    vit_downsampler.weight [O, D, 2, 2], .bias [O]
    vit_downsampler2.weight [2O, O, 3, 3], .bias [2O]
    vit_large_projector.weight [H, 2O], .bias [H] (projector_bias)

D 64 (4 heads), Iv 128, 2 layers, O (output_hidden_size) 96.  A word-level
tokenizer with the Step-3 VL processor's image tokens; prompts are text
alone (the processor sizes images for the release's 728-pixel tower).
"""
import json
import os

D, VH, VL, IV, O, IMG, P = 64, 4, 2, 128, 96, 56, 14


def make(out):
    import torch
    from ckpt_io import noise, save_shards, written_tensors
    from ckpt_step3p7 import step3_tokenizer
    import ckpt_step3_text
    sd, text = written_tensors(ckpt_step3_text.make)
    H, V = text["hidden_size"], text["vocab_size"]
    g = torch.Generator().manual_seed(2024)
    r = noise(g, s=0.02, dtype=torch.bfloat16)
    vis = {"vision_model.embeddings.class_embedding": r(1, D),
           "vision_model.embeddings.patch_embedding.weight": r(D, 3, P, P),
           "vision_model.embeddings.patch_embedding.bias": r(D),
           "vision_model.embeddings.position_embedding.weight": r((IMG // P) ** 2 + 1, D)}
    for n in range(VL):
        p = "vision_model.transformer.layers.%d." % n
        vis.update({p + "self_attn.qkv_proj.weight": r(3 * D, D),
                    p + "self_attn.qkv_proj.bias": r(3 * D),
                    p + "self_attn.out_proj.weight": r(D, D),
                    p + "self_attn.out_proj.bias": r(D),
                    p + "layer_norm1.weight": r(D, base=1.0), p + "layer_norm1.bias": r(D),
                    p + "layer_norm2.weight": r(D, base=1.0), p + "layer_norm2.bias": r(D),
                    p + "mlp.fc1.weight": r(IV, D), p + "mlp.fc1.bias": r(IV),
                    p + "mlp.fc2.weight": r(D, IV), p + "mlp.fc2.bias": r(D)})
    vis.update({"vit_downsampler.weight": r(O, D, 2, 2), "vit_downsampler.bias": r(O),
                "vit_downsampler2.weight": r(2 * O, O, 3, 3), "vit_downsampler2.bias": r(2 * O),
                "vit_large_projector.weight": r(H, 2 * O), "vit_large_projector.bias": r(H)})
    groups = [sorted(vis), sorted(k for k in sd if not k.startswith("model.layers.")),
              sorted(k for k in sd if k.startswith("model.layers."))]
    sd.update(vis)
    os.makedirs(out, exist_ok=True)
    save_shards(out, sd, groups)
    image_token = V - 1
    text.pop("torch_dtype", None)
    text["tie_word_embeddings"] = False
    c = {"architectures": ["Step3VLForConditionalGeneration"], "model_type": "step3_vl",
         "understand_projector_stride": 2, "projector_bias": True,
         "image_token_id": image_token, "text_config": text,
         "vision_config": {"model_type": "step3_vision_encoder", "hidden_size": D,
                           "intermediate_size": IV, "output_hidden_size": O,
                           "num_hidden_layers": VL, "num_attention_heads": VH,
                           "num_channels": 3, "image_size": IMG, "patch_size": P,
                           "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5},
         "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    step3_tokenizer(out, V, image_token, {"<pad>": 2, "<eos>": 1, "<bos>": 0, "<unk>": 3})


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
