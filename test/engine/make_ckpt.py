#!/usr/bin/env python3
"""Writes a tiny checkpoint of one architecture with transformers' own model
class (random weights, fixed seed, BF16), saved by save_pretrained with a
small max_shard_size so that an index and several shards are written: the
names, config fields and shard layout users download.

    make_ckpt.py ARCH DIR      ARCH: one of CASES below
    make_ckpt.py --into DIR ARCH ...
                               DIR/src-ARCH for each, in one process (the
                               imports cost more than a tiny model); an
                               ARCH that fails is named and left out
    make_ckpt.py --list
"""
import sys

COMMON = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64,
              vocab_size=1000, max_position_embeddings=512)

# The quantized Qwen3-MoE cases' (-fp8, -quark*): 4 experts of 256
# intermediate rows, 4 kv heads.
QWEN3_MOE_Q = dict(num_key_value_heads=4, num_experts=4, num_experts_per_tok=2,
                   moe_intermediate_size=256)

# GPTQ's and AWQ's experts (the -gptq, -gptqc, -awq MoE cases): 256
# intermediate rows, a whole group of 128 a rank at tp 2.
WNA16_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256)

# Inkling (late 2026): short convolutions beside every sublayer and on
# k and v, q/k/v and the relative-position r projection fused as qkvr,
# sliding-window layers (0, 1) with heads of their own, layer 0 dense,
# then 5 routed experts and 2 shared "sink" experts (the router's 7 rows
# padded to 8 in vLLM); a vocabulary of 1000, the head padded to 1024.
INKLING = dict(num_hidden_layers=3, swa_num_attention_heads=8, swa_num_key_value_heads=2,
               swa_head_dim=32, d_rel=8, rel_extent=64, sliding_window_size=32,
               conv_kernel_size=4, moe_intermediate_size=64, n_routed_experts=5,
               n_shared_experts=2, num_experts_per_tok=2, route_scale=2.0,
               local_layer_ids=[0, 1], dense_mlp_idx=1, bos_token_id=2, eos_token_id=1)

# Multi-head latent attention (DeepSeek-V2/V3), 4 heads.  vLLM's CPU MLA
# backend takes kv_lora_rank + qk_rope_head_dim in (320, 512, 576) only
# ("Head dimension 160 is not supported by MLA." for 128 + 32): 256 + 64.
MLA = dict(num_attention_heads=4, num_key_value_heads=4, q_lora_rank=128,
           kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=64,
           v_head_dim=64, head_dim=None)
V3 = dict(MLA, num_hidden_layers=2, n_routed_experts=8, n_shared_experts=1,
          num_experts_per_tok=2, moe_intermediate_size=256,
          first_k_dense_replace=1, n_group=4, topk_group=2,
          routed_scaling_factor=2.5, norm_topk_prob=True,
          # config.json fields DeepSeek-V3 ships that transformers' class
          # lacks (kept as extra attributes); vLLM reads them.
          topk_method="noaux_tc", scoring_func="sigmoid", moe_layer_freq=1)
# Cases with a DeepSeek MTP layer appended (num_nextn_predict_layers: 1).
MTP = ("deepseek_v3", "deepseek_v3-fp8", "deepseek_v32", "deepseek_v32-fp8", "glm4_moe")

# Qwen3-Next and Qwen3.5: Gated DeltaNet (linear attention) layers and gated
# full attention (q_proj holds q and its gate, per head) 3:1 as Qwen ships
# them; 2 key heads and 4 value heads (key_dim 128, value_dim 256) so that
# the fused projections' parts differ in size; MoE (where the class has it)
# with a gated shared expert.
QWEN3_NEXT = dict(num_hidden_layers=4,
                  layer_types=["linear_attention"] * 3 + ["full_attention"],
                  linear_num_key_heads=2, linear_num_value_heads=4,
                  linear_key_head_dim=64, linear_value_head_dim=64,
                  num_experts=4, num_experts_per_tok=2,
                  moe_intermediate_size=128,
                  shared_expert_intermediate_size=256)

# Qwen4-Exp's text model: Gated DeltaNet and QSA layers (the indexer of 2
# heads of 64, with its own kv head) alternating, hyper-connections of 4
# streams (their down projection 32 rows, with block_inject 36, padded to
# 48 in vLLM), MoE with a gated shared expert; a vocabulary of 1000.
QWEN4_EXP = dict(vocab_size=1000, hidden_size=256, num_hidden_layers=4,
                 layer_types=["linear_attention", "indexed_attention"] * 2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                 linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=64, linear_value_head_dim=64,
                 num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128,
                 shared_expert_intermediate_size=256, hc_count=4, hc_lowrank=32,
                 indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=64,
                 indexer_budget=64, indexer_compress_ratio=4,
                 output_gate_type="silu", max_position_embeddings=512,
                 bos_token_id=1, eos_token_id=2)

QWEN3_VL = {"vision_config": {"depth": 2, "hidden_size": 64,
                              "intermediate_size": 128, "num_heads": 4,
                              "patch_size": 14, "out_hidden_size": 256,
                              "num_position_embeddings": 16},
            "image_token_id": 999, "video_token_id": 998,
            "vision_start_token_id": 997, "vision_end_token_id": 996}

# Qwen2-VL and Qwen2.5-VL's text model: Qwen2's, with mrope over 64-wide
# heads; the image tokens as QWEN3_VL's.
QWEN2_VL = dict({k: v for k, v in QWEN3_VL.items() if k != "vision_config"},
                text_config={"bos_token_id": 2, "eos_token_id": 1,
                             "rope_parameters": {
                                 "rope_type": "default", "rope_theta": 1000000.0,
                                 "mrope_section": [8, 12, 12]}})
# Qwen2-VL's own tower (2 blocks), tied as the 2B ships
QWEN2_VL_TIED = dict(QWEN2_VL, tie_word_embeddings=True,
                     text_config=dict(QWEN2_VL["text_config"], tie_word_embeddings=True),
                     vision_config={"depth": 2, "embed_dim": 64, "num_heads": 4,
                                    "mlp_ratio": 2, "hidden_size": 256, "patch_size": 14})

# Qwen2-Audio's and Audio Flamingo 3's Whisper-like encoder (2 layers over
# 128 mel bins) in Audio Flamingo 3's config keys, Qwen2-Audio's named by
# QWEN2_AUDIO_KEYS; their Qwen2 text model.
AUDIO_ENCODER = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "intermediate_size": 128, "num_mel_bins": 128, "max_source_positions": 1500}
QWEN2_AUDIO_KEYS = {"hidden_size": "d_model", "num_hidden_layers": "encoder_layers",
                    "num_attention_heads": "encoder_attention_heads",
                    "intermediate_size": "encoder_ffn_dim"}
AUDIO_TEXT = {"model_type": "qwen2", "bos_token_id": 2, "eos_token_id": 1}

# LLaVA's and LLaVA-NeXT's CLIP tower: 3 layers (vLLM builds those up to
# vision_feature_layer -2), 56x56 images of 14-pixel patches.
CLIP_TOWER = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
              "num_attention_heads": 4, "image_size": 56, "patch_size": 14,
              "projection_dim": 64}

GLM4V = {"vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128,
                           "num_heads": 4, "patch_size": 14, "image_size": 56,
                           "out_hidden_size": 256},
         "image_token_id": 999, "video_token_id": 998,
         "image_start_token_id": 997, "image_end_token_id": 996,
         "video_start_token_id": 995, "video_end_token_id": 994}
# attention_bias, use_qk_norm: published configs carry them, transformers'
# classes do not write them, vLLM reads them (without, it drops the biases).
GLM4V_TEXT = {"bos_token_id": 2, "eos_token_id": 1, "partial_rotary_factor": 0.5,
              "attention_bias": True, "use_qk_norm": False,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 0.5,
                                  "mrope_section": [4, 6, 6]}}

GPT_OSS = {"intermediate_size": 256, "num_local_experts": 4,
           "num_experts_per_tok": 2, "sliding_window": 128,
           "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0,
                               "factor": 32.0, "beta_fast": 32.0,
                               "beta_slow": 1.0, "truncate": False,
                               "original_max_position_embeddings": 4096}}

LLAMA4 = dict(num_hidden_layers=4, intermediate_size=128,
              intermediate_size_mlp=256, num_local_experts=16,
              num_experts_per_tok=1, interleave_moe_layer_step=2,
              no_rope_layers=[1, 1, 1, 0], attention_chunk_size=128,
              use_qk_norm=True, tie_word_embeddings=False)

# DeepSeek-V4: the four kinds of layer (sliding-window attention, then the
# compressed sparse (ratio 4, with the indexer) and heavily compressed
# (ratio 128) attentions), hash-routed MoE in the first two layers, 8 routed
# experts and a shared one.  vLLM's CPU compressor takes head_dim 512 and an
# indexer head_dim of 128 only ("unsupported compressor head_dim").
DSV4 = dict(num_hidden_layers=4, num_attention_heads=4, head_dim=512,
            q_lora_rank=128, o_groups=2, o_lora_rank=64, n_routed_experts=8,
            n_shared_experts=1, num_experts_per_tok=2,
            moe_intermediate_size=128, index_n_heads=4, index_head_dim=128,
            index_topk=64, sliding_window=128, max_position_embeddings=4096,
            num_key_value_heads=1, intermediate_size=128,
            layer_types=["sliding_attention", "compressed_sparse_attention",
                         "heavily_compressed_attention",
                         "compressed_sparse_attention"],
            mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"])

# arch -> (config class, model class, config overrides)
# PaliGemma's tower (SigLIP, 3 layers, no pooling head) and projector.
PALIGEMMA = dict(image_token_index=999, projection_dim=256, hidden_size=256,
                 vocab_size=1000,
                 vision_config={"hidden_size": 64, "intermediate_size": 128,
                                "num_hidden_layers": 3, "num_attention_heads": 4,
                                "image_size": 56, "patch_size": 14,
                                "vision_use_head": False})

# Idefics3's and SmolVLM's tower (SigLIP-like, 3 layers) and connector.
IDEFICS3 = dict(image_token_id=999, scale_factor=2, pad_token_id=0,
                vision_config={"hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 3, "num_attention_heads": 4,
                               "image_size": 56, "patch_size": 14})

MODERNBERT = dict(pad_token_id=0, eos_token_id=1, bos_token_id=2, cls_token_id=2,
                  sep_token_id=1)

# HyperCLOVA X SEED Think's (hcx_vision_v2 below)
HCX_VISION_V2 = dict(text_config=dict(model_type="hyperclovax", bos_token_id=2, eos_token_id=1,
                                      tie_word_embeddings=False),
                     vision_config=dict(QWEN3_VL["vision_config"], depth=4, window_size=56,
                                        fullatt_block_indexes=[1, 3]),
                     image_token_id=999, video_token_id=998, tie_word_embeddings=False)

CASES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    # five layers: pipeline stages of unequal depth (--pp 2 gives 3 + 2)
    "llama-l5": ("LlamaConfig", "LlamaForCausalLM", {"num_hidden_layers": 5}),
    # Llama's tensors under the names of releases that vLLM builds as Llama
    # (internlm3-8b-instruct, IQuest-Coder-V1, TeleChat3, and old LLaMA
    # conversions): only config.json's architectures differ
    "llama-internlm3": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-iquestcoder": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-telechat3": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-legacy": ("LlamaConfig", "LlamaForCausalLM", {}),
    # Tele-FLM: Llama's tensors, logits scaled by muP (config keys only)
    "llama-teleflm": ("LlamaConfig", "LlamaForCausalLM",
                      dict(use_mup=True, mup_scale_factor=4.0, output_mult=2.0)),
    # Solar Pro: Llama's tensors; its block skip connections (bskcn_*:
    # the layers whose input is kept and mixed back in) are config only
    "llama-solar": ("LlamaConfig", "LlamaForCausalLM",
                    dict(num_hidden_layers=4, bskcn_1=[1], bskcn_2=[2], bskcn_3=[2],
                         bskcn_4=[3], bskcn_tv=[0.9, 0.8])),
    # Orion-14B: StableLM's tensors (LayerNorms with biases) with full
    # rotary and no q/k/v biases; vLLM reads rms_norm_eps for its LayerNorms
    "stablelm-orion": ("StableLmConfig", "StableLmForCausalLM",
                       dict(partial_rotary_factor=1.0, use_qkv_bias=False, rms_norm_eps=1e-5)),
    # Xiaomi MiMo-7B: Qwen2 and a multi-token-prediction layer that vLLM
    # leaves to its draft model (mimo_mtp below writes it)
    "qwen2-mimo": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM",
                   {"tie_word_embeddings": True}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    # Embedding models: the decoder without its head, saved as LlamaModel
    # and MistralModel (names without model.), served with runner pooling
    "llama_model": ("LlamaConfig", "LlamaModel", {}),
    "mistral_model": ("MistralConfig", "MistralModel", {}),
    "qwen2_model": ("Qwen2Config", "Qwen2Model", {}),
    "gemma2_model": ("Gemma2Config", "Gemma2Model", {}),
    # NVIDIA's bidirectional Llama embedders and rerankers (llama-nemotron-
    # embed, -rerank): LlamaModel's and LlamaForSequenceClassification's
    # weights, config.json naming LlamaBidirectional* with its pooling
    "llama_bidir": ("LlamaConfig", "LlamaModel", {}),
    "llama_bidir_cls": ("LlamaConfig", "LlamaForSequenceClassification", {"num_labels": 1}),
    # EmbeddingGemma's form: the Gemma 3 text model headless (names without
    # model.), with and without sentence-transformers' modules beside it
    "gemma3_model": ("Gemma3TextConfig", "Gemma3TextModel",
                     {"layer_types": ["sliding_attention", "full_attention"],
                      "sliding_window": 8}),
    "gemma3_model-st": ("Gemma3TextConfig", "Gemma3TextModel", None),
    # encoder-only embedding models (BGE, E5, bge-m3): BERT and XLM-R
    "bert_model": ("BertConfig", "BertModel", {}),
    # as sentence-transformers saves it: mean pooling (1_Pooling), where
    # vLLM's default for BERT is CLS, and a Dense projection (2_Dense)
    "bert_model-st": ("BertConfig", "BertModel", None),
    # Qwen3-Embedding's form: the causal model saved whole, with
    # sentence-transformers' last-token pooling beside it, from which vLLM
    # picks the pooling runner itself
    "qwen3-st": ("Qwen3Config", "Qwen3ForCausalLM", None),
    # VoyageQwen3BidirectionalEmbedModel: a Qwen3Model under model. and its
    # embedding head linear.weight [num_labels, hidden] (added below)
    "voyage_qwen3": ("Qwen3Config", "Qwen3Model", {"num_labels": 64}),
    # JinaForRanking (jina-reranker-v3): Qwen3 with its LM head (which vLLM
    # drops) and a projector to 512 (added below); the vocabulary reaches
    # the doc and query tokens (151670, 151671) vLLM's pooler looks for
    "jina_ranking": ("Qwen3Config", "Qwen3ForCausalLM",
                     {"vocab_size": 151680, "hidden_size": 128, "intermediate_size": 256,
                      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                      "tie_word_embeddings": False}),
    # gte-Qwen2's form: an untied LM head in the checkpoint, left out
    "qwen2-st": ("Qwen2Config", "Qwen2ForCausalLM", None),
    # (config.json of bge-m3 and kin says position_embedding_type, which
    # vLLM reads and transformers 5 no longer writes)
    "xlmr_model": ("XLMRobertaConfig", "XLMRobertaModel",
                   {"position_embedding_type": "absolute"}),
    # RoBERTa saved with its MLM head, served as an embedding model
    "roberta_mlm": ("RobertaConfig", "RobertaForMaskedLM",
                    {"position_embedding_type": "absolute"}),
    # CLIP as an embedding model: a text tower (77 positions: the position
    # embedding padded as a vocabulary) and a tiny vision tower; the text
    # embeddings are padded to projection_dim, which must hold them (vLLM's
    # runner sizes them by text_config's, as released configs repeat it)
    "clip": ("CLIPConfig", "CLIPModel",
             {"text_config": {"max_position_embeddings": 77, "pad_token_id": 1,
                              "projection_dim": 256,
                              "bos_token_id": 2, "eos_token_id": 3},
              "vision_config": CLIP_TOWER, "projection_dim": 256}),
    # SigLIP as an embedding model: both towers as wide as the text head
    # (vLLM pads text embeddings to projection_size, images fill it); text
    # heads of 64 (vLLM's CPU attention takes no 16)
    "siglip": ("SiglipConfig", "SiglipModel",
               {"text_config": {"hidden_size": 128, "intermediate_size": 256,
                                "num_attention_heads": 2, "max_position_embeddings": 64,
                                "projection_size": 128, "pad_token_id": 1,
                                "bos_token_id": 2, "eos_token_id": 3},
                "vision_config": {"hidden_size": 128, "intermediate_size": 256,
                                  "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "image_size": 56, "patch_size": 14}}),
    # Classifiers and reward models: a score head in place of the LM head
    # (one label: a reward model; three: a classifier)
    "llama_cls": ("LlamaConfig", "LlamaForSequenceClassification", {"num_labels": 1}),
    "mistral_cls": ("MistralConfig", "MistralForSequenceClassification", {"num_labels": 3}),
    "qwen2_cls": ("Qwen2Config", "Qwen2ForSequenceClassification", {"num_labels": 3}),
    # Qwen2.5-Math-RM (qwen2_rm below): the decoder and Qwen's two-layer
    # score head
    "qwen2_rm": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3_cls": ("Qwen3Config", "Qwen3ForSequenceClassification", {"num_labels": 3}),
    # the same, config.json's head_dtype "model": vLLM keeps the score in
    # the model's dtype then (ModelConfig.head_dtype)
    "qwen3_cls-hdm": ("Qwen3Config", "Qwen3ForSequenceClassification",
                      {"num_labels": 3, "head_dtype": "model"}),
    # Classifiers of families whose rules are the causal model's made a
    # classifier's (rules_load.c derive_classifier): Gemma 2 as
    # Skywork-Reward-Gemma-2 ships it (one label, tied embedding,
    # soft-capping), an MoE, and Phi-3's fused q/k/v and gate/up.
    "gemma2_cls": ("Gemma2Config", "Gemma2ForSequenceClassification", {"num_labels": 1}),
    # a decoder's token classifier (a label a token): vLLM serves it as the
    # sequence classifier, score.bias (transformers' default) included
    "qwen3_tok": ("Qwen3Config", "Qwen3ForTokenClassification", {"num_labels": 3}),
    "qwen3_moe_cls": ("Qwen3MoeConfig", "Qwen3MoeForSequenceClassification",
                      {"num_experts": 8, "num_experts_per_tok": 2,
                       "moe_intermediate_size": 128, "num_labels": 3}),
    "phi3_cls": ("Phi3Config", "Phi3ForSequenceClassification",
                 {"pad_token_id": 0, "num_labels": 2}),
    # token classifiers (NER and PII taggers): a label a token
    "bert_tok": ("BertConfig", "BertForTokenClassification", {"num_labels": 5}),
    # BERT with its masked-LM head (google-bert/bert-base-uncased's form):
    # tied as transformers saves it (no decoder weight: vLLM copies the
    # embedding, which it can do at tp 1 alone), and untied
    "bert_mlm": ("BertConfig", "BertForMaskedLM", {}),
    "bert_mlm-untied": ("BertConfig", "BertForMaskedLM", {"tie_word_embeddings": False}),
    # nomic-embed-text-v1.5's form: rotary BERT, fused Wqkv, SwiGLU (fc11
    # up, fc12 gate), no biases, with the GPT-2-style config keys its
    # release has and vLLM reads (transformers' config writes none)
    "nomic_bert": ("NomicBertConfig", "NomicBertModel", dict(
        num_key_value_heads=4, activation_function="swiglu", qkv_proj_bias=False,
        mlp_fc1_bias=False, mlp_fc2_bias=False, rotary_emb_scale_base=None,
        rotary_emb_interleaved=False, rotary_emb_fraction=1.0, rotary_emb_base=1000,
        layer_norm_epsilon=1e-12, n_embd=256, n_layer=2, n_head=4, n_inner=512,
        n_positions=512, max_trained_positions=512, prenorm=False)),
    # Snowflake's arctic-embed v2.0 (GteModel): rotary BERT, fused
    # qkv_proj, up_gate_proj up rows first; the key vLLM reads that
    # transformers' config lacks
    "gte_model": ("GteConfig", "GteModel", {"num_key_value_heads": 4,
                                          "position_embedding_type": "rope"}),
    # nomic-embed-text-v2-moe's form (nomic_moe below): GELU, biases, layer 1
    # a MoE of 4 experts
    "nomic_bert-moe": ("NomicBertConfig", "NomicBertModel", None),
    "xlmr_tok": ("XLMRobertaConfig", "XLMRobertaForTokenClassification",
                 {"num_labels": 5, "position_embedding_type": "absolute"}),
    # ModernBERT: embeddings, rerankers, taggers (its config's special
    # tokens must fall in the small vocabulary)
    "modernbert": ("ModernBertConfig", "ModernBertModel", MODERNBERT),
    "modernbert_cls": ("ModernBertConfig", "ModernBertForSequenceClassification",
                       dict(MODERNBERT, num_labels=3)),
    "modernbert_tok": ("ModernBertConfig", "ModernBertForTokenClassification",
                       dict(MODERNBERT, num_labels=5)),
    # GPT-2 with a score head (COMMON's 2 kv heads would be config keys
    # GPT-2's configs lack: its heads are all kv heads)
    "gpt2_cls": ("GPT2Config", "GPT2ForSequenceClassification",
                 {"num_labels": 3, "num_key_value_heads": 4, "pad_token_id": 0}),
    # cross-encoders and rerankers (ms-marco-MiniLM, bge-reranker-v2-m3)
    "bert_cls": ("BertConfig", "BertForSequenceClassification", {"num_labels": 1}),
    "xlmr_cls": ("XLMRobertaConfig", "XLMRobertaForSequenceClassification",
                 {"num_labels": 3, "position_embedding_type": "absolute"}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              {"tie_word_embeddings": False}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              {"tie_word_embeddings": True}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM",
              {"num_key_value_heads": 1}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {}),
    # Gemma 3 (text): q/k norms, a sliding layer then a global one (each
    # with its own rope), a window short enough for the prompts to pass it.
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               {"layer_types": ["sliding_attention", "full_attention"],
                "sliding_window": 8}),
    # Gemma 3 with its SigLIP vision tower (Gemma3ForConditionalGeneration):
    # the text model above under text_config; a tiny tower (4 heads of 16,
    # 28x28 images of 14x14 patches: 2x2 patches, pooled to
    # mm_tokens_per_image 4); image tokens inside the tiny vocabulary.
    "gemma3_mm": ("Gemma3Config", "Gemma3ForConditionalGeneration",
                  {"text_config": {"layer_types": ["sliding_attention",
                                                   "full_attention"],
                                   "sliding_window": 8},
                   "vision_config": {"hidden_size": 64,
                                     "intermediate_size": 128,
                                     "num_hidden_layers": 2,
                                     "num_attention_heads": 4,
                                     "patch_size": 14, "image_size": 28,
                                     "vision_use_head": False},
                   "mm_tokens_per_image": 4, "boi_token_index": 997,
                   "eoi_token_index": 998, "image_token_index": 999}),
    # Gemma 4 as released (Gemma4ForConditionalGeneration): the gemma4
    # case's text model (sliding and full layers, k as v, two kv-shared
    # layers) under text_config, with its vision tower (2 layers, 4 heads
    # of 32, 16x16 patches pooled 3x3, clipped linears and standardized
    # outputs: their bounds and buffers in the checkpoint); no audio tower
    # (E2B's and E4B's); image and video tokens inside the tiny vocabulary.
    "gemma4_mm": ("Gemma4Config", "Gemma4ForConditionalGeneration",
                  {"text_config": {"num_hidden_layers": 4, "attention_k_eq_v": True,
                                   "layer_types": ["sliding_attention", "full_attention",
                                                   "sliding_attention", "full_attention"],
                                   "num_global_key_value_heads": 1,
                                   "num_kv_shared_layers": 2, "global_head_dim": 128,
                                   "hidden_size_per_layer_input": 64,
                                   "vocab_size_per_layer_input": 1000,
                                   "num_experts": None, "top_k_experts": None,
                                   "moe_intermediate_size": None},
                   "vision_config": {"hidden_size": 128, "intermediate_size": 256,
                                     "num_hidden_layers": 2, "num_attention_heads": 4,
                                     "num_key_value_heads": 4, "head_dim": 32,
                                     "patch_size": 16, "position_embedding_size": 1024,
                                     "pooling_kernel_size": 3,
                                     "default_output_length": 70,
                                     "use_clipped_linears": True, "standardize": True},
                   "audio_config": None,
                   "boi_token_id": 990, "eoi_token_id": 991, "image_token_id": 992,
                   "video_token_id": 993, "boa_token_id": 994, "eoa_token_index": 995,
                   "audio_token_id": 996}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             {"pad_token_id": 0}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  {"num_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 128,
                   "shared_expert_intermediate_size": 256,
                   "mlp_only_layers": [1], "tie_word_embeddings": False}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"num_experts": 8, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 128}),
    # 5 experts at tp 2 under expert parallelism: rank 0 holds 3, rank 1 2.
    "qwen3_moe-e5": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                     {"num_experts": 5, "num_experts_per_tok": 2,
                      "moe_intermediate_size": 128}),
    # FP8 with 128x128 block scales, as DeepSeek ships it: every split at
    # tp 2 falls on whole blocks (4 kv heads of 64: 128 rows a rank).
    "llama-fp8": ("LlamaConfig", "LlamaForCausalLM",
                  {"num_key_value_heads": 4}),
    # FP8 with one scale per tensor and static activation scales.
    "llama-fp8t": ("LlamaConfig", "LlamaForCausalLM", {}),
    # compressed-tensors pack-quantized W4A16 (compressed-tensors' own
    # compressor): groups of 128 input columns, symmetric (-w4a16) or with
    # zero points (-w4a16a); one scale per output channel (-w4a16c).
    "llama-w4a16": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-w4a16a": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-w4a16c": ("LlamaConfig", "LlamaForCausalLM", {}),
    # compressed-tensors W8A8 INT8 and FP8 (int- and float-quantized):
    # weights per channel, activations dynamic per token.
    "llama-w8a8": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-fp8dyn": ("LlamaConfig", "LlamaForCausalLM", {}),
    # compressed-tensors NVFP4 (nvfp4-pack-quantized: FP4 weights two a
    # byte, F8_E4M3 scales per 16 columns under a global scale), with FP4
    # activations (-nvfp4) or weight-only (-nvfp4a16).  vLLM's CPU build
    # has no NVFP4 kernel: the hook gives it vLLM's emulation
    # (WSHARD_ORACLE_NVFP4).
    "llama-nvfp4": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-nvfp4a16": ("LlamaConfig", "LlamaForCausalLM", {}),
    # ModelOpt's NVFP4 (NVIDIA's -FP4 checkpoints): -nvfp4's quantization
    # in ModelOpt's names and config (ckpt_io.py, modelopt_nvfp4).
    "llama-nvfp4mo": ("LlamaConfig", "LlamaForCausalLM", {}),
    # compressed-tensors' MXFP4 (mxfp4-pack-quantized: FP4 weights two a
    # byte, an E8M0 scale per 32 input columns, no global scale).
    "llama-mxfp4a16": ("LlamaConfig", "LlamaForCausalLM", {}),
    # NVFP4 experts, compressed-tensors' (-nvfp4) and ModelOpt's (-nvfp4mo):
    # vLLM's CPU build builds such a layer only with the hook
    # (WSHARD_ORACLE_NVFP4_MOE: load and save only).
    "qwen3_moe-nvfp4": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", WNA16_MOE),
    "qwen3_moe-nvfp4mo": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", WNA16_MOE),
    "qwen3_moe-mxfp4a16": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", WNA16_MOE),
    # ModelOpt's FP8 (per tensor), in config.json or (-fp8moh) in
    # hf_quant_config.json alone.
    "llama-fp8mo": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-fp8moh": ("LlamaConfig", "LlamaForCausalLM", {}),
    # Meta's fbgemm_fp8 (weights per channel, some modules left BF16) and
    # AMD's Quark FP8 per tensor with KV-cache scales: ckpt_fp8x.py.
    "llama-fbgemm": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-quark": ("LlamaConfig", "LlamaForCausalLM", {}),
    # Quark's FP8 per channel, activations per token (PTPC), and its MXFP4:
    # ckpt_fp8x.py.
    "llama-quark_ptpc": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-quark_mxfp4": ("LlamaConfig", "LlamaForCausalLM", {}),
    # Quark's FP8 in 128x128 blocks (ckpt_fp8x.quark_block): 4 kv heads of
    # 64, every split at tp 2 on whole blocks, as llama-fp8.
    "llama-quark_block": ("LlamaConfig", "LlamaForCausalLM", {"num_key_value_heads": 4}),
    # Quark's MXFP8 and MXFP6 (ckpt_fp8x.quark_mxfp8, quark_mxfp6).
    "llama-quark_mxfp8": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-quark_mxfp6": ("LlamaConfig", "LlamaForCausalLM", {}),
    # Quark's W8A8 INT8 per tensor with static activations, and per channel
    # with activations per token: ckpt_fp8x.quark_int8, quark_int8c.
    "llama-quark_int8": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-quark_int8c": ("LlamaConfig", "LlamaForCausalLM", {}),
    # Quark's W4A16 (uint4 in groups of 128, zero points, pack_method
    # "order"; symmetric int4, "reorder"): ckpt_fp8x.quark_w4a16, -s.
    "llama-quark_w4a16": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-quark_w4a16s": ("LlamaConfig", "LlamaForCausalLM", {}),
    # GPTQ (4-bit in groups of 128, per channel) and AWQ (4-bit, groups
    # of 128, zero points): ckpt_gptq.py.  (vLLM's CPU build refuses 8-bit
    # GPTQ: "Marlin does not support weight_bits = uint8b128".)
    "llama-gptq": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-gptqc": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-awq": ("LlamaConfig", "LlamaForCausalLM", {}),

    # GPTQ and AWQ experts as vLLM's AutoGPTQMoEMethod and AutoAWQMoEMethod
    # hold them: each expert's I/tp a whole number of groups of 128 at tp 2
    # (-gptqc: one scale per channel).  vLLM's CPU build has its 4-bit MoE
    # kernel for CPUs with AMX tiles only (run: WSHARD_ORACLE_INT4).
    "qwen3_moe-gptq": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", WNA16_MOE),
    "qwen3_moe-gptqc": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", WNA16_MOE),
    "qwen3_moe-awq": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", WNA16_MOE),
    "mixtral-gptq": ("MixtralConfig", "MixtralForCausalLM", None),
    # a shared expert (a dense GPTQ MLP) beside the experts
    "qwen2_moe-gptq": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                       dict(WNA16_MOE, shared_expert_intermediate_size=256,
                            tie_word_embeddings=False)),
    "qwen3_moe-fp8": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    # AMD Quark's FP8 per tensor on experts (vLLM's QuarkW8A8Fp8MoEMethod),
    # its KV-cache scales and excluded routers: ckpt_fp8x.quark.
    "qwen3_moe-quark": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    "qwen3_moe-quark_ptpc": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    "qwen3_moe-quark_mxfp4": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    "qwen3_moe-quark_block": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    # Quark's W8A8 INT8 experts per tensor, static activations
    # (ckpt_fp8x.quark_int8: vLLM's QuarkW8A8Int8MoEMethod).
    "qwen3_moe-quark_int8": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    # Quark's W8A8 INT8 experts per channel, dynamic activations per token
    # (ckpt_fp8x.quark_int8c): no input scales or zero points, vLLM's
    # QuarkW8A8Int8MoEMethod holding its input zero points as zeros.
    "qwen3_moe-quark_int8c": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    # Quark's W4A16 INT4 experts (ckpt_fp8x.quark_w4a16: uint4 in groups of
    # 128, pack_method "order"; -s: symmetric int4, "reorder"): vLLM's
    # QuarkW4A16Int4MoEMethod, which repacks them as it loads them.
    "qwen3_moe-quark_w4a16": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    "qwen3_moe-quark_w4a16s": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_Q),
    # -h: 384 intermediate rows, 192 a rank at tp 2, no multiple of the
    # group of 128: vLLM's create_weights halves it (group_size_div_factor
    # 2), repeating each scale and zero point; w2's 3 groups become 6, 3 a
    # rank, rank 1's starting with group 1's second copy.
    "qwen3_moe-quark_w4a16h": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                               dict(QWEN3_MOE_Q, moe_intermediate_size=384)),
    # -q: the same at tp 4 (8 heads: o_proj's 128 inputs a rank, a whole
    # group): 96 rows a rank, groups halved twice (factor 4), w2's 12
    # repeated groups 3 a rank, rank 1 keeping group 0's last copy and two
    # of group 1's.
    "qwen3_moe-quark_w4a16q": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                               dict(QWEN3_MOE_Q, moe_intermediate_size=384,
                                    num_attention_heads=8)),
    # DeepSeek-V2-Lite: MLA without a query LoRA (q_proj), the first layer
    # dense, 2 shared experts, greedy top-k routing (softmax).
    "deepseek_v2_lite": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                         dict(MLA, q_lora_rank=None, qk_nope_head_dim=128,
                              v_head_dim=128,
                              n_routed_experts=8, n_shared_experts=2,
                              num_experts_per_tok=2, moe_intermediate_size=128,
                              first_k_dense_replace=1,
                              # as DeepSeek-V2-Lite ships them; vLLM's CPU
                              # router asserts topk_group is not None
                              n_group=1, topk_group=1)),
    # DeepSeek-V2: the query LoRA (q_a_proj, q_a_layernorm, q_b_proj) and
    # group-limited routing.
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                    dict(MLA, qk_nope_head_dim=128, v_head_dim=128,
                         q_lora_rank=192, n_routed_experts=8,
                         n_shared_experts=2, num_experts_per_tok=2,
                         moe_intermediate_size=128, first_k_dense_replace=1,
                         topk_method="group_limited_greedy", n_group=2,
                         topk_group=1)),
    # DeepSeek-V3 with one MTP layer (model.layers.{L}), as DeepSeek ships it;
    # every quantized dimension a multiple of 128 for the -fp8 variant, and
    # every split at tp 2 on whole blocks; kv_a_proj_with_mqa has
    # kv_lora_rank + qk_rope_head_dim = 320 rows (2.5 blocks, replicated)
    # like DeepSeek's 576.
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", V3),
    "deepseek_v3-fp8": ("DeepseekV3Config", "DeepseekV3ForCausalLM", V3),
    # DeepSeek-V3 with an MTP layer that ships no embed_tokens or
    # shared_head.head (add_mtp_layer own_head=False)
    "deepseek_v3-nohead": ("DeepseekV3Config", "DeepseekV3ForCausalLM", V3),
    # ... with two such MTP layers (add_mtp_layer nextn=2)
    "deepseek_v3-nohead2": ("DeepseekV3Config", "DeepseekV3ForCausalLM", V3),
    # DeepseekV3BidirectionalModel (Giga-Embeddings-instruct-10B-A1.8B): V3's
    # decoder without its head, is_causal false (vLLM: no MLA, encoder-only
    # attention), served with runner pooling; config.json's architectures
    # set below.
    "deepseek_v3_bidir": ("DeepseekV3Config", "DeepseekV3Model", dict(V3, is_causal=False)),
    # DeepSeek-V3.2: V3 plus the sparse-attention indexer (DSA), with one
    # MTP layer (indexer included) as DeepSeek ships it.  vLLM 0.32's CPU
    # build constructs it only with the hook's MLA backend in place of
    # sparse attention (run: WSHARD_ORACLE_SPARSE).
    "deepseek_v32": ("DeepseekV32Config", "DeepseekV32ForCausalLM",
                     dict(V3, head_dim=64, index_n_heads=4, index_head_dim=128,
                          index_topk=64)),
    # DeepSeek-V3.2's FP8 release (deepseek_v32_fp8 below)
    "deepseek_v32-fp8": ("DeepseekV32Config", "DeepseekV32ForCausalLM",
                         dict(V3, head_dim=64, index_n_heads=4, index_head_dim=128,
                              index_topk=64)),
    # GLM-5: MLA with the same indexer and GLM's MoE (sigmoid routing,
    # correction bias), the first layer dense, one MTP layer as released
    # (no embed_tokens or shared_head.head: add_mtp_layer own_head=False).
    "glm_moe_dsa": ("GlmMoeDsaConfig", "GlmMoeDsaForCausalLM",
                    dict(V3, head_dim=64, index_n_heads=4, index_head_dim=128,
                         index_topk=64, intermediate_size=512)),
    # Qwen3-Next: Gated DeltaNet (linear attention) layers and gated full
    # attention (q_proj holds q and its gate, per head) 3:1 as Qwen ships
    # them; 2 key heads and 4 value heads (key_dim 128, value_dim 256) so
    # that the fused projections' parts differ in size; MoE in every layer
    # with a gated shared expert.
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM", QWEN3_NEXT),
    # with layer_scale: every decoder layer's attn_layer_scale and
    # ffn_layer_scale (layer_scales below)
    "qwen3_next-layer_scale": ("Qwen3NextConfig", "Qwen3NextForCausalLM", None),
    # Phi-3.5-MoE: Mixtral's experts (w1, w2, w3) under Phi's LayerNorms
    # (with biases), q/k/v/o and lm_head biases as the release has them
    # (vLLM builds them always), named PhiMoEForCausalLM as released.
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM",
               dict(num_local_experts=4, num_experts_per_tok=2,
                    attention_bias=True, lm_head_bias=True)),
    # OLMo Hybrid: Gated DeltaNet layers (q/k/v/gate projections, three
    # short convolutions, a and b projections) and OLMo's full attention
    # (q/k norms over all heads) 3:1; 2 key heads and 4 value heads of
    # different widths so that the fused parts differ in size.
    "olmo_hybrid": ("OlmoHybridConfig", "OlmoHybridForCausalLM",
                    dict(num_hidden_layers=4,
                         layer_types=["linear_attention"] * 3 + ["full_attention"],
                         num_attention_heads=4, num_key_value_heads=2,
                         linear_num_key_heads=2, linear_num_value_heads=4,
                         linear_key_head_dim=32, linear_value_head_dim=64,
                         pad_token_id=0, eos_token_id=2)),
    # DeepSeek-V4 as DeepSeek ships it (ckpt_dsv4.py: deepseek_v4_native).
    "deepseek_v4": ("DeepseekV4Config", "DeepseekV4ForCausalLM", DSV4),
    # DeepSeek-V4 with its vision tower, as DeepSeek-V4-Flash-Vision-Exp
    # ships it (ckpt_dsv4.py: deepseek_v4_vision): config.json still names
    # DeepseekV4ForCausalLM; vLLM builds DeepseekV4ForConditionalGeneration.
    "deepseek_v4_vl": ("DeepseekV4Config", "DeepseekV4ForCausalLM", DSV4),
    # ... with 3 vision heads (48 wide), which tp 2 does not divide: vLLM
    # keeps the tower and the aligner whole on every rank
    "deepseek_v4_vl-h3": ("DeepseekV4Config", "DeepseekV4ForCausalLM", DSV4),
    # DeepSeek-V4 with DSpark draft stages as its mtp.* (ckpt_dsv4.py:
    # deepseek_v4_dspark): the target and, converted with --architecture
    # DSparkDraftModel, its draft (deepseek_v4-dspark:TP:bytes:dspark)
    "deepseek_v4-dspark": ("DeepseekV4Config", "DeepseekV4ForCausalLM", DSV4),
    # DeepSeek-V4 with FP8 128x128 blocks as V4-Flash-Base ships them
    # (expert_dtype "fp8": F32 scales named X.scale), every split at tp 2
    # on whole blocks: 256 wo_a rows and expert rows.
    "deepseek_v4-fp8": ("DeepseekV4Config", "DeepseekV4ForCausalLM",
                        dict(DSV4, o_lora_rank=128, moe_intermediate_size=256,
                             intermediate_size=256)),
    # As V4-Flash ships it: FP4 (MXFP4) routed experts with E8M0 scales per
    # 32 values, FP8 blocks elsewhere with E8M0 (power-of-two) scales.
    "deepseek_v4-fp4": ("DeepseekV4Config", "DeepseekV4ForCausalLM",
                        dict(DSV4, o_lora_rank=128, moe_intermediate_size=256,
                             intermediate_size=256)),
    # Qwen3.5 (text): Qwen3-Next's layers with the Gated DeltaNet's
    # projections shipped apart (in_proj_qkv, in_proj_z, in_proj_b,
    # in_proj_a); a dense MLP in every layer, or MoE (qwen3_5_moe).
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
                dict(QWEN3_NEXT, tie_word_embeddings=True)),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM",
                    QWEN3_NEXT),
    # Qwen3.5 with its vision tower (Qwen3_5ForConditionalGeneration):
    # the text model above under text_config; a tiny Qwen3-VL tower (4 heads
    # of 16, 14x14 patches, 2x2 merged; a 56x56 image is 4 image tokens),
    # the vision tokens inside the tiny vocabulary.
    "qwen3_5_vl": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration",
                   dict(QWEN3_VL, tie_word_embeddings=True,
                        text_config=dict(QWEN3_NEXT,
                                         tie_word_embeddings=True))),
    # Qwen3.5's, with layer_scale (layer_scales below)
    "qwen3_5_vl-layer_scale": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration", None),
    "qwen3_5_vl_moe": ("Qwen3_5MoeConfig", "Qwen3_5MoeForConditionalGeneration",
                       dict(QWEN3_VL, text_config=QWEN3_NEXT)),
    # Qwen4-Exp with the Qwen3-VL tower: transformers' has no deepstack
    # mergers, vLLM's reads deepstack_visual_indexes (none)
    "qwen4_exp_vl": ("Qwen4ExpConfig", "Qwen4ExpForConditionalGeneration",
                     dict(QWEN3_VL, text_config=QWEN4_EXP,
                          vision_config=dict(QWEN3_VL["vision_config"],
                                             deepstack_visual_indexes=[]))),
    # ... its text model with an n-gram PLE layer, the embedding in 3 pieces
    "qwen4_exp_vl-ple": ("Qwen4ExpConfig", "Qwen4ExpForConditionalGeneration",
                         dict(QWEN3_VL,
                              text_config=dict(QWEN4_EXP, ple_layer_ids=[3],
                                               ngram_vocab_size_base=1000,
                                               split_ngram_parts=3, heads_per_ngram=2),
                              vision_config=dict(QWEN3_VL["vision_config"],
                                                 deepstack_visual_indexes=[]))),
    # LFM2-VL: an LFM2 text model (a short-convolution layer, then an
    # attention one; block_dim and conv_dim as Liquid AI's configs carry
    # them, which transformers keeps) and a tiny SigLIP2 (NaFlex) tower of 16-pixel patches,
    # 64 positions; the projector with its layer norm and biases
    "lfm2_vl": ("Lfm2VlConfig", "Lfm2VlForConditionalGeneration",
                dict(image_token_id=999, projector_hidden_size=128, downsample_factor=2,
                     text_config={"model_type": "lfm2", "layer_types": ["conv", "full_attention"],
                                  "block_dim": 256, "conv_dim": 256, "pad_token_id": 0,
                                  "bos_token_id": 1, "eos_token_id": 2},
                     vision_config={"model_type": "siglip2_vision_model", "hidden_size": 64,
                                    "intermediate_size": 128, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "patch_size": 16,
                                    "num_patches": 64, "vision_use_head": False})),
    # Qwen3-VL: a Qwen3 text model (dense, or MoE with its experts stored
    # fused as transformers writes them) with the same tower, which has
    # deepstack mergers (taps after blocks 0 and 1).
    "qwen3_vl": ("Qwen3VLConfig", "Qwen3VLForConditionalGeneration",
                 dict(QWEN3_VL, vision_config=dict(QWEN3_VL["vision_config"],
                                                   deepstack_visual_indexes=[0, 1]),
                      text_config={"rope_parameters": {
                          "rope_type": "default", "rope_theta": 1000000.0,
                          "mrope_section": [8, 12, 12], "mrope_interleaved": True}})),
    # Qwen2.5-VL: a Qwen2 text model (qkv biases, mrope) and a tower of
    # RMS-normed blocks with gated MLPs, windowed attention but in the
    # fullatt_block_indexes; Qwen2-VL: LayerNorm blocks with fc1/fc2 MLPs.
    "qwen2_5_vl": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration",
                   dict(QWEN2_VL, vision_config=dict(
                       QWEN3_VL["vision_config"], depth=4, window_size=56,
                       fullatt_block_indexes=[1, 3])),),
    # HyperCLOVA X SEED Think (HCXVisionV2ForCausalLM): a HyperCLOVA X text
    # model (peri-norms post_norm1/2) and Qwen2.5-VL's tower as qwen2_5_vl's,
    # a linear projector; renamed and configured as released
    # (released_hcx_vision_v2).
    "hcx_vision_v2": ("HyperCLOVAXVisionV2Config", "HyperCLOVAXVisionV2ForConditionalGeneration",
                      HCX_VISION_V2),
    # the same, its head tied to the embedding (text_config's
    # tie_word_embeddings, which vLLM reads, and the top's, which
    # transformers does)
    "hcx_vision_v2-tied": ("HyperCLOVAXVisionV2Config",
                           "HyperCLOVAXVisionV2ForConditionalGeneration",
                           dict(HCX_VISION_V2, tie_word_embeddings=True, text_config=dict(
                               HCX_VISION_V2["text_config"], tie_word_embeddings=True))),
    # OpenCUA (OpenCUAForConditionalGeneration): Qwen2.5-VL's tower and a
    # Qwen2 text model with 1-D RoPE, named and configured as xlangai
    # releases it (released_opencua)
    "opencua": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration",
                dict(QWEN2_VL, vision_config=dict(
                    QWEN3_VL["vision_config"], depth=4, window_size=56,
                    fullatt_block_indexes=[1, 3]))),
    # EXAONE 4.5: an EXAONE 4 text model (mrope) and Qwen2.5-VL's tower
    # with grouped kv heads (4 heads, 2 kv heads), the image pad between
    # <vision> and </vision>
    "exaone4_5": ("Exaone4_5_Config", "Exaone4_5_ForConditionalGeneration",
                  dict(image_token_id=999, video_token_id=998,
                       vision_config=dict(QWEN3_VL["vision_config"], depth=4,
                                          window_size=56, fullatt_block_indexes=[1, 3],
                                          num_key_value_heads=2),
                       text_config=dict(QWEN2_VL["text_config"], model_type="exaone4"))),
    "qwen2_vl": ("Qwen2VLConfig", "Qwen2VLForConditionalGeneration", QWEN2_VL_TIED),
    # jina-reranker-m0 (JinaVLForRanking): Qwen2-VL under the names its
    # release has (model.*, visual.*) and a two-layer score head (score.0,
    # score.2: one label), made from qwen2_vl's (jina_vl_release)
    "jina_vl": ("Qwen2VLConfig", "Qwen2VLForConditionalGeneration", QWEN2_VL_TIED),
    # Mistral 3 (Mistral Small 3.1): a Mistral text model, a Pixtral
    # vision tower (2D rope, gated MLP; 3 layers, the text model 2) and a
    # patch-merging projector; 56x56 images of 14-pixel patches, merged 2x2
    # (image tokens 10-12).
    "mistral3": ("Mistral3Config", "Mistral3ForConditionalGeneration",
                 dict(image_token_index=10, spatial_merge_size=2,
                      tie_word_embeddings=False,
                      vision_config={"hidden_size": 64, "intermediate_size": 128,
                                     "num_hidden_layers": 3,
                                     "num_attention_heads": 4, "head_dim": 16,
                                     "image_size": 56, "patch_size": 14},
                      text_config={"model_type": "mistral"})),
    # GLM-4.1V and GLM-4.5V: a GLM-4 text model (dense, or GLM-4.5's MoE;
    # mrope over half of each head; the MoE one a dense layer, then two, so
    # that two pipeline stages each have an MoE layer, as vLLM requires) and
    # a tower of RMS-normed blocks, the merger a gated MLP after a
    # downsampling convolution.
    "glm4v": ("Glm4vConfig", "Glm4vForConditionalGeneration",
              dict(GLM4V, text_config=GLM4V_TEXT)),
    "glm4v_moe": ("Glm4vMoeConfig", "Glm4vMoeForConditionalGeneration",
                  dict(GLM4V, text_config=dict(
                      GLM4V_TEXT, num_hidden_layers=3,
                      n_routed_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=128, n_shared_experts=1,
                      first_k_dense_replace=1))),
    # GLM-OCR: GLM-4.1V's layout with a GLM text model without q/k/v
    # biases (and an MTP layer after its last), a tower with q/k norms and
    # biased MLPs, no position embedding;
    # transformers sizes the merger out_hidden_size * in_channels wide, vLLM
    # as the text MLP: both 768, as in the release (1536 * 3 = 4608)
    "glm_ocr": ("GlmOcrConfig", "GlmOcrForConditionalGeneration",
                dict(GLM4V, text_config=dict(GLM4V_TEXT, intermediate_size=768,
                                             attention_bias=False))),
    # Muse Glimmer: layers 0-2 sliding-window with rope, 3 full without
    # (transformers' default pattern), each with a sigmoid output gate
    # (self_attn.gate_proj), four norms a layer; a tower of 2 layers of 2
    # heads (cut at tp 2, whole at tp 4, where vLLM keeps it data
    # parallel), window and full attention, merged 2x2 into 256.
    "muse_glimmer": ("MuseGlimmerConfig", "MuseGlimmerForConditionalGeneration", dict(
        text_config=dict(num_hidden_layers=4, sliding_window=64, bos_token_id=2,
                         eos_token_id=1, pad_token_id=0),
        vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=2, patch_size=14, pos_emb_height=4,
                           pos_emb_width=4, patch_temporal=2, merge_size=2,
                           max_position_embeddings=16),
        image_token_id=999, video_token_id=998, out_hidden_size=256,
        projector_hidden_size=128)),
    # Muse Glimmer's text model alone (MuseGlimmerForCausalLM): muse_glimmer's
    # checkpoint without the tower, as a text-only release names it
    # (text_release)
    "muse_glimmer-text": ("MuseGlimmerConfig", "MuseGlimmerForConditionalGeneration", None),
    # MiniMax-M3: full attention (layers 0, 2) and MiniMax's sparse
    # attention (1, 3: q, k, v and the indexer's q (by kv heads) and k
    # (whole) fused in qkv_proj), dense MLPs (0, 1) then 8 experts with a
    # shared one; 8 heads of 128 (vLLM's fused kernel's), 2 kv heads; a
    # SigLIP-like tower (2 layers, 4 heads) with its two projectors;
    # renamed and configured as released (ckpt_minimax_m3.py).
    "minimax_m3": ("MiniMaxM3VLConfig", "MiniMaxM3SparseForConditionalGeneration", dict(
        text_config=dict(
            num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
            head_dim=128, rotary_dim=64, intermediate_size=64, shared_intermediate_size=64,
            dense_intermediate_size=128, num_local_experts=8, num_experts_per_tok=2,
            index_n_heads=2, index_head_dim=128, index_block_size=128,
            index_topk_blocks=16, index_local_blocks=1,
            layer_types=["full_attention", "minimax_m3_sparse",
                         "full_attention", "minimax_m3_sparse"],
            mlp_layer_types=["dense", "dense", "sparse", "sparse"],
            max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
            tie_word_embeddings=False),
        vision_config=dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                           num_attention_heads=4, num_channels=3, patch_size=14,
                           temporal_patch_size=2, spatial_merge_size=2, image_size=224),
        projector_hidden_size=256, image_token_index=998, video_token_index=999,
        tie_word_embeddings=False)),
    # MiniMax-M3's text model alone (MiniMaxM3SparseForCausalLM): minimax_m3's
    # checkpoint with its MTP layer, without the tower and projectors, under
    # the text model's names (text_release; the multimodal config)
    "minimax_m3-text": ("MiniMaxM3VLConfig", "MiniMaxM3SparseForConditionalGeneration", None),
    # GLM-5-Next: KDA linear attention (layers 0, 2) beside GLM-5's MLA
    # with its indexer (1, 3), dense MLPs (0, 1) and MoE (2, 3): each
    # attention with each MLP; mHC in every layer; an MTP layer 4 (MLA and
    # MoE, as the last layer's: glm5_next_mtp); GLM-OCR's tower (2 blocks)
    # with its merger.  The text
    # config carries the keys vLLM reads that transformers' config lacks.
    "glm5_next": ("Glm5NextConfig", "Glm5NextForConditionalGeneration", dict(
        text_config=dict(
            intermediate_size=320, moe_intermediate_size=128, num_hidden_layers=4,
            layer_types=["linear_attention", "indexed_attention",
                         "linear_attention", "indexed_attention"],
            mlp_layer_types=["dense", "dense", "sparse", "sparse"],
            indexer_types=["full"] * 4, num_attention_heads=4, num_key_value_heads=4,
            q_lora_rank=128, kv_lora_rank=512, qk_rope_head_dim=0,
            qk_nope_head_dim=64, v_head_dim=64, index_n_heads=4, index_head_dim=128,
            index_topk=64, index_kpool=16, index_kpool_always_select_tail=True,
            linear_num_heads=4, linear_head_dim=128, linear_conv_kernel_dim=4,
            n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
            n_group=1, topk_group=1, hc_mult=4, attention_bias=False,
            pad_token_id=0, bos_token_id=2, eos_token_id=1, tie_word_embeddings=False,
            mhc=True, topk_method="noaux_tc", scoring_func="sigmoid", mla_use_nope=True,
            indexer_rope_interleave=False, num_nextn_predict_layers=0),
        vision_config=dict(depth=2, hidden_size=64, num_heads=4, intermediate_size=128,
                           out_hidden_size=256, projection_intermediate_size=384,
                           patch_size=14, temporal_patch_size=2, spatial_merge_size=2,
                           in_channels=3, image_size=56, attention_bias=True),
        image_token_id=999, video_token_id=998, image_start_token_id=997,
        image_end_token_id=996, video_start_token_id=995, video_end_token_id=994,
        tie_word_embeddings=False)),
    # GLM-5-Next's text model alone (Glm5NextForCausalLM): glm5_next's
    # checkpoint with its MTP layer, without the tower, as a text-only
    # release names it (text_release)
    "glm5_next-text": ("Glm5NextConfig", "Glm5NextForConditionalGeneration", None),
    # LLaVA 1.5: a Llama text model, a CLIP tower (3 layers; vLLM builds
    # those up to vision_feature_layer -2, so the last is left out) and a
    # two-layer projector; 56x56 images, 16 image tokens.
    "llava": ("LlavaConfig", "LlavaForConditionalGeneration",
              dict(image_token_index=999, image_seq_length=16,
                   vision_config=CLIP_TOWER,
                   text_config={"model_type": "llama"})),
    # LLaVA-Interleave (llava-hf/llava-interleave-qwen-*): a Qwen2 text
    # model, a SigLIP tower (3 layers, all of them used: vision_feature_layer
    # -1, "full" features) and LLaVA's projector; 56x56 images, 16 tokens.
    "llava-siglip": ("LlavaConfig", "LlavaForConditionalGeneration",
                     dict(image_token_index=999, vision_feature_layer=-1,
                          vision_feature_select_strategy="full",
                          vision_config={"model_type": "siglip_vision_model",
                                         "hidden_size": 64, "intermediate_size": 128,
                                         "num_hidden_layers": 3, "num_attention_heads": 4,
                                         "image_size": 56, "patch_size": 14},
                          text_config={"model_type": "qwen2"})),
    # PaliGemma (google/paligemma-3b-*): a Gemma text model, a SigLIP tower
    # (3 layers, all used, with its last norm) and one linear projector;
    # 56x56 images, 16 image tokens before the prompt.  -gemma2:
    # PaliGemma 2's Gemma 2 text model.
    "paligemma": ("PaliGemmaConfig", "PaliGemmaForConditionalGeneration",
                  dict(PALIGEMMA, text_config={"model_type": "gemma"})),
    # ColPali (vidore/colpali-v1.3-hf): PaliGemma under vlm. with a
    # projection to 128 a token, served by vLLM as a multi-vector retriever
    "colpali": ("ColPaliConfig", "ColPaliForRetrieval",
                {"embedding_dim": 128,
                 "vlm_config": dict(PALIGEMMA, model_type="paligemma",
                                    text_config={"model_type": "gemma"})}),
    "paligemma-gemma2": ("PaliGemmaConfig", "PaliGemmaForConditionalGeneration",
                         dict(PALIGEMMA, text_config={"model_type": "gemma2",
                                                      "query_pre_attn_scalar": 64,
                                                      "sliding_window": 64})),
    # Idefics3 (HuggingFaceM4/Idefics3-8B-Llama3): a Llama text model, a
    # SigLIP-like tower (3 layers, all used, with its last norm) and a
    # pixel-shuffling connector; 56x56 images, one tile, 4 image tokens.
    # A head of its own, as the 8B's config says at both levels (vLLM ties
    # by the text config's alone)
    "idefics3": ("Idefics3Config", "Idefics3ForConditionalGeneration",
                 dict(IDEFICS3, tie_word_embeddings=False,
                      text_config={"model_type": "llama", "pad_token_id": 0,
                                   "tie_word_embeddings": False})),
    # Aria (rhymes-ai/Aria): a Llama text model whose MLP is MoE (experts
    # stacked and transposed in fc1/fc2, a shared expert, router_weight),
    # an Idefics3 tower without its last norm, and a projector (queries,
    # cross attention, an MLP vLLM splits); images resized to 980x980
    # (its processor takes 490 or 980): 4900 patches, 256 queries.
    "aria": ("AriaConfig", "AriaForConditionalGeneration",
             dict(image_token_index=999,
                  vision_config={"hidden_size": 64, "intermediate_size": 128,
                                 "num_hidden_layers": 2, "num_attention_heads": 4,
                                 "image_size": 490, "patch_size": 14},
                  text_config={"model_type": "aria_text", "moe_num_experts": 4,
                               "moe_topk": 2, "moe_num_shared_experts": 1,
                               "pad_token_id": 0})),
    # SmolVLM (HuggingFaceTB/SmolVLM-*, SmolVLM2): Idefics3's layout under
    # its own classes and processor.  Its text config ties the head, its
    # own does not (transformers then saves a head of its own): vLLM ties
    # by the text config's, dropping that head
    "smolvlm": ("SmolVLMConfig", "SmolVLMForConditionalGeneration",
                dict(IDEFICS3, text_config={"model_type": "llama", "pad_token_id": 0,
                                            "tie_word_embeddings": True})),
    # InternVL 3 in transformers' format (OpenGVLab's -hf checkpoints): a
    # Qwen2 text model, an InternViT-300M-like tower (q/k/v biases, layer
    # scales; 3 layers) and a pixel-shuffling projector; 56x56 images, 4
    # image tokens.
    "internvl": ("InternVLConfig", "InternVLForConditionalGeneration",
                 dict(image_token_id=999, image_seq_length=4,
                      tie_word_embeddings=False,
                      vision_config={"hidden_size": 64, "intermediate_size": 128,
                                     "num_hidden_layers": 3, "num_attention_heads": 4,
                                     "attention_bias": True,
                                     "image_size": [56, 56], "patch_size": [14, 14]},
                      text_config={"model_type": "qwen2", "tie_word_embeddings": False})),
    # Qianfan-OCR: InternVL's original layout (vision_model., mlp1.,
    # language_model.; vLLM's InternVLChatModel) with a Qwen3 text model,
    # an InternViT tower of 3 layers and the pixel-shuffling projector;
    # the released config's InternVL keys beside transformers' (vLLM reads
    # those).  One 56x56 tile an image, 4 image tokens.
    "qianfan_ocr": ("QianfanOCRConfig", "QianfanOCRForConditionalGeneration",
                    dict(image_token_id=999, image_seq_length=4, tie_word_embeddings=False,
                         select_layer=-1, force_image_size=56, ps_version="v2",
                         downsample_ratio=0.5, min_dynamic_patch=1, max_dynamic_patch=1,
                         dynamic_image_size=False, use_thumbnail=False,
                         vision_config={"hidden_size": 64, "intermediate_size": 128,
                                        "num_hidden_layers": 3, "num_attention_heads": 4,
                                        "image_size": 56, "patch_size": 14,
                                        "qkv_bias": True, "qk_normalization": False,
                                        "norm_type": "layer_norm", "initializer_factor": 0.1},
                         text_config={"model_type": "qwen3", "tie_word_embeddings": False})),
    # BLIP-2: an OPT text model, a BLIP vision tower (2 layers; 56x56
    # images of 14-pixel patches), the Q-Former (2 layers, cross-attention
    # in each) and its 4 query tokens
    "blip2": ("Blip2Config", "Blip2ForConditionalGeneration",
              dict(num_query_tokens=4, image_token_index=999,
                   vision_config={"hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "image_size": 56, "patch_size": 14},
                   qformer_config={"hidden_size": 64, "intermediate_size": 128,
                                   "num_hidden_layers": 2, "num_attention_heads": 4,
                                   "encoder_hidden_size": 64, "cross_attention_frequency": 1},
                   text_config={"model_type": "opt", "hidden_size": 256, "ffn_dim": 512,
                                "num_hidden_layers": 2, "num_attention_heads": 4,
                                "word_embed_proj_dim": 256, "vocab_size": 1000,
                                "max_position_embeddings": 512,
                                "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0})),
    # Qwen2-Audio: a Qwen2 text model and a Whisper-like audio encoder of
    # 2 layers over 128 mel bins, its projector one linear layer
    "qwen2_audio": ("Qwen2AudioConfig", "Qwen2AudioForConditionalGeneration",
                    dict(audio_token_index=999, text_config=AUDIO_TEXT,
                         audio_config={QWEN2_AUDIO_KEYS.get(k, k): v
                                       for k, v in AUDIO_ENCODER.items()})),
    # PaddleOCR-VL: an ERNIE 4.5 text model (tied), a SigLIP-like NaViT
    # tower of 2 layers (14-pixel patches, merged 2x2) and its projector
    # (mlp_AR); 56x56 images, 4 image tokens between the vision start and
    # end tokens
    "paddleocr_vl": ("PaddleOCRVLConfig", "PaddleOCRVLForConditionalGeneration",
                     dict(image_token_id=999, video_token_id=998,
                          vision_start_token_id=997, vision_end_token_id=996,
                          vision_config={"hidden_size": 64, "intermediate_size": 128,
                                         "num_hidden_layers": 2, "num_attention_heads": 4,
                                         "image_size": 56, "patch_size": 14},
                          text_config={"hidden_size": 256, "intermediate_size": 512,
                                       "num_hidden_layers": 2, "num_attention_heads": 4,
                                       "num_key_value_heads": 2, "head_dim": 64,
                                       "vocab_size": 1000, "bos_token_id": 2,
                                       "eos_token_id": 1, "pad_token_id": 0,
                                       "rope_parameters": {"rope_type": "default",
                                                           "rope_theta": 500000.0,
                                                           "mrope_section": [8, 12, 12]}})),
    # Audio Flamingo 3: Qwen2-Audio's encoder (2 layers, 128 mel bins),
    # a two-layer projector and a Qwen2 text model
    # Qwen3-ASR: a Qwen3 text model (untied) and Qwen3-Omni's audio encoder
    # (3 stride-2 convolutions over 128 mel bins, 2 layers of 6 heads: cut
    # at tp 2, whole at tp 4), its projector inside; as Qwen releases it
    # (thinker.*, thinker_config), -hf as transformers saves it (tied)
    "qwen3_asr": ("Qwen3ASRConfig", "Qwen3ASRForConditionalGeneration",
                  dict(audio_token_id=999, pad_token_id=0, eos_token_id=1,
                       tie_word_embeddings=False,
                       audio_config={"d_model": 96, "encoder_layers": 2,
                                     "encoder_attention_heads": 6, "encoder_ffn_dim": 128,
                                     "num_mel_bins": 128, "output_dim": 256,
                                     "downsample_hidden_size": 32},
                       text_config={"tie_word_embeddings": False})),
    "audioflamingo3": ("AudioFlamingo3Config", "AudioFlamingo3ForConditionalGeneration",
                       dict(audio_token_id=999, audio_config=AUDIO_ENCODER,
                            text_config=AUDIO_TEXT)),
    # LLaVA-NeXT: LLaVA 1.5's CLIP tower and projector, a Mistral text
    # model and the image_newline row; one 56x56 grid cell (anyres).
    "llava_next": ("LlavaNextConfig", "LlavaNextForConditionalGeneration",
                   dict(image_token_index=999, image_grid_pinpoints=[[56, 56]],
                        vision_config=CLIP_TOWER,
                        text_config={"model_type": "mistral"})),
    # LLaVA-NeXT-Video: LLaVA-NeXT's model for videos (vLLM's takes no
    # images: it drops image_newline), frames pooled by 2; 7-pixel patches
    # (vLLM's pooler divides by image_size // patch_size ** 2, 0 for 14)
    "llava_next_video": ("LlavaNextVideoConfig", "LlavaNextVideoForConditionalGeneration",
                         dict(image_token_index=999, video_token_index=998,
                              image_grid_pinpoints=[[56, 56]], spatial_pool_stride=2,
                              vision_config=dict(CLIP_TOWER, patch_size=7),
                              text_config={"model_type": "mistral"})),
    # LLaVA-OneVision: a Qwen2 text model, a SigLIP tower (without its
    # pooling head), LLaVA's projector and image_newline; one 56x56 grid
    # cell (anyres), 16 image tokens a cell.
    "llava_onevision": ("LlavaOnevisionConfig", "LlavaOnevisionForConditionalGeneration",
                        dict(image_token_index=999, video_token_index=998,
                             image_grid_pinpoints=[[56, 56]],
                             vision_config={"hidden_size": 64, "intermediate_size": 128,
                                            "num_hidden_layers": 2,
                                            "num_attention_heads": 4,
                                            "image_size": 56, "patch_size": 14,
                                            "vision_use_head": False},
                             text_config={"model_type": "qwen2"})),
    # Bee (BeeForConditionalGeneration, Open-Bee's Bee-8B): LLaVA-OneVision
    # with a Qwen3 text model and Bee's projector (pre_norm, a 4H-wide
    # linear_1), named and configured as released (released_bee)
    "bee": ("LlavaOnevisionConfig", "LlavaOnevisionForConditionalGeneration",
            dict(image_token_index=999, video_token_index=998,
                 image_grid_pinpoints=[[56, 56]],
                 vision_config={"hidden_size": 64, "intermediate_size": 128,
                                "num_hidden_layers": 2, "num_attention_heads": 4,
                                "image_size": 56, "patch_size": 14,
                                "vision_use_head": False},
                 text_config={"model_type": "qwen3", "head_dim": 64})),
    # Command A Vision: a Cohere2 text model, a SigLIP tower and a
    # pixel-shuffling SwiGLU projector; 64x64 images of 16-pixel patches,
    # downsampled 2x2 (4 image tokens).
    "cohere2_vision": ("Cohere2VisionConfig", "Cohere2VisionForConditionalGeneration",
                       dict(image_token_id=999, alignment_intermediate_size=256,
                            tie_word_embeddings=True,
                            vision_config={"hidden_size": 64, "intermediate_size": 128,
                                           "num_hidden_layers": 2,
                                           "num_attention_heads": 4,
                                           "image_size": 64, "patch_size": 16,
                                           "vision_use_head": False},
                            text_config={"model_type": "cohere2",
                                         "tie_word_embeddings": True})),
    # The names transformers 4.52 to 4.57 save these under (fine-tunes of
    # Qwen's, llava-hf's and Google's releases): model.language_model., model.visual.,
    # model.vision_tower., model.multi_modal_projector., lm_head.
    "qwen2_5_vl-tf452": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", None),
    "llava-tf452": ("LlavaConfig", "LlavaForConditionalGeneration", None),
    "gemma3_mm-tf452": ("Gemma3Config", "Gemma3ForConditionalGeneration", None),
    # Pixtral 12B as mistral-community ships it: LLaVA with a Pixtral tower
    # (Mistral 3's, 3 layers; vision_feature_layer -1) and a Mistral text model.
    "llava-pixtral": ("LlavaConfig", "LlavaForConditionalGeneration",
                      dict(image_token_index=10, vision_feature_layer=-1,
                           vision_feature_select_strategy="full",
                           vision_config={"model_type": "pixtral", "hidden_size": 64,
                                          "intermediate_size": 128, "num_hidden_layers": 3,
                                          "num_attention_heads": 4, "head_dim": 16,
                                          "image_size": 56, "patch_size": 14},
                           text_config={"model_type": "mistral"})),
    # three layers: pipeline stages (vLLM wants the deepstack layers, 2,
    # on the first stage: --pp 2 gives 2 + 1)
    "qwen3_vl-l3": ("Qwen3VLConfig", "Qwen3VLForConditionalGeneration",
                    dict(QWEN3_VL, vision_config=dict(QWEN3_VL["vision_config"],
                                                      deepstack_visual_indexes=[0, 1]),
                         text_config={"num_hidden_layers": 3, "rope_parameters": {
                             "rope_type": "default", "rope_theta": 1000000.0,
                             "mrope_section": [8, 12, 12], "mrope_interleaved": True}})),
    "qwen3_vl_moe": ("Qwen3VLMoeConfig", "Qwen3VLMoeForConditionalGeneration",
                     dict(QWEN3_VL, vision_config=dict(QWEN3_VL["vision_config"],
                                                       deepstack_visual_indexes=[0, 1]),
                          # norm_topk_prob: published configs carry it,
                          # transformers' class does not write it, vLLM reads it
                          text_config={"num_experts": 4, "num_experts_per_tok": 2,
                                       "moe_intermediate_size": 64,
                                       "norm_topk_prob": True,
                                       "rope_parameters": {
                                           "rope_type": "default", "rope_theta": 1000000.0,
                                           "mrope_section": [8, 12, 12],
                                           "mrope_interleaved": True}})),
    # MiniMax-M2: q/k RMSNorm over all heads together (vLLM splits its
    # weight by rank; k_norm by kv head, whole here: one kv head, at tp 2
    # on both ranks), sigmoid routing with a correction bias, 8 experts;
    # config.json keys MiniMax ships that transformers' class does not
    # write but vLLM reads (rotary_dim: half of each head rotated).
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM",
                   {"num_local_experts": 8, "num_experts_per_tok": 2,
                    "num_key_value_heads": 1,
                    "intermediate_size": 128, "rotary_dim": 32,
                    "scoring_func": "sigmoid", "use_routing_bias": True,
                    "use_qk_norm": True, "qk_norm_type": "per_layer"}),
    # LongCat-Flash: MLA (as the DeepSeek cases), two attention blocks a
    # layer, 8 routed experts and 4 zero-computation (identity) experts;
    # config.json keys Meituan ships that transformers' class does not
    # write but vLLM reads (mla_scale_q_lora, mla_scale_kv_lora,
    # zero_expert_type).
    "longcat_flash": ("LongcatFlashConfig", "LongcatFlashForCausalLM",
                      dict(MLA, num_hidden_layers=4, head_dim=64,
                           n_routed_experts=8, moe_topk=2, zero_expert_num=4,
                           ffn_hidden_size=256, expert_ffn_hidden_size=128,
                           routed_scaling_factor=2.0, mla_scale_q_lora=True,
                           mla_scale_kv_lora=True, zero_expert_type="identity")),
    # GLM-4.5: GQA with biases on q/k/v, partial rotary, QK norm, the first
    # layer dense, sigmoid routing with e_score_correction_bias.
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                 {"num_hidden_layers": 3, "head_dim": 64,
                  "num_attention_heads": 4, "num_key_value_heads": 2,
                  "attention_bias": True, "use_qk_norm": True,
                  "partial_rotary_factor": 0.5, "n_routed_experts": 16,
                  "n_shared_experts": 1, "num_experts_per_tok": 4,
                  "moe_intermediate_size": 128, "first_k_dense_replace": 1,
                  "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
                  "norm_topk_prob": True}),
    # GPT-OSS: attention sinks, biases on q/k/v/o, a router with a bias,
    # experts fused by transformers into 3-D tensors (gate_up_proj
    # [E, H, 2I] with gate and up interleaved, down_proj [E, I, H], and
    # their biases); sliding and full attention layers alternate.
    # intermediate_size 256: 128 a rank at tp 2, four MXFP4 blocks.
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", GPT_OSS),
    # The same, its experts in MXFP4 as OpenAI ships GPT-OSS (see mxfp4()).
    "gpt_oss-mxfp4": ("GptOssConfig", "GptOssForCausalLM", GPT_OSS),
    # OpenAI Privacy Filter: GPT-OSS's layers as a bidirectional token
    # classifier (a score head with a bias, 5 labels); transformers stores
    # its experts' gate_up_proj [E, H, 2I] and bias as [gate | up] halves,
    # which vLLM interleaves (openai_privacy_filter.py); 4 experts of 256.
    "openai_privacy_filter": ("OpenAIPrivacyFilterConfig",
                              "OpenAIPrivacyFilterForTokenClassification",
                              {"intermediate_size": 256, "num_local_experts": 4,
                               "num_experts_per_tok": 2, "sliding_window": 16,
                               "num_labels": 5, "pad_token_id": 0, "eos_token_id": 1}),
    # Llama 4 (text): MoE every second layer (16 routed experts, one shared,
    # transformers' fused [E, H, 2I] gate_up_proj and [E, I, H] down_proj),
    # a dense MLP of intermediate_size_mlp between; chunked local attention
    # with rope, every 4th layer global without rope (no_rope_layers), the
    # chunk 128 (vLLM CPU: a multiple of its 128-token KV block); q/k norm.
    "llama4": ("Llama4TextConfig", "Llama4ForCausalLM", LLAMA4),
    # 5 experts at tp 2 under expert parallelism: rank 0 holds 3, rank 1 2.
    "llama4-e5": ("Llama4TextConfig", "Llama4ForCausalLM",
                  dict(LLAMA4, num_local_experts=5)),
    # Llama 4 with its vision tower (Llama4ForConditionalGeneration): the
    # text model above under text_config; a tiny tower (4 heads of 16,
    # 56x56 tiles of 14x14 patches, pixel shuffle 0.5: 4 tokens a tile);
    # its special tokens inside the tiny vocabulary (llama4_processor).
    # Kimi-K2.5: the DeepSeek-V3 text model above under language_model.
    # with MoonViT (4 heads of 16, 14x14 patches, fused wqkv) and its
    # patch-merging projector, renamed to Moonshot's published names
    # (released_kimi_k25).
    "kimi_k25": ("Kimi_K25Config", "Kimi_K25ForConditionalGeneration",
                 dict(text_config=dict(V3, model_type="deepseek_v3"),
                      vision_config={"num_attention_heads": 4,
                                     "num_hidden_layers": 2, "hidden_size": 64,
                                     "intermediate_size": 128, "patch_size": 14,
                                     "pos_emb_height": 4, "pos_emb_width": 4},
                      projection_hidden_size=64, tie_word_embeddings=False,
                      image_token_id=999, video_token_id=998,
                      vision_start_token_id=997, vision_end_token_id=996)),
    # As Moonshot ships it: the routed experts INT4 (int4_experts).
    "kimi_k25-int4": ("Kimi_K25Config", "Kimi_K25ForConditionalGeneration", None),
    # Inkling (INKLING above), renamed as released (ckpt_inkling.py).
    "inkling": ("InklingTextConfig", "InklingForCausalLM", INKLING),
    # Inkling with its towers (InklingForConditionalGeneration), as
    # transformers saves it: an HMLP patch encoder of 3 linears over 4x4
    # patches of 2 frames, and a dMel audio embedding (8 bins of 16
    # levels).  Fewer layers than scales (base, 2x2, 4x4, 2 frames) make
    # both pick each scale once (transformers by scipy's
    # linear_sum_assignment): the temporal scale is then the last layer's
    # end alone, whose width is the text model's.  Where it is a layer's
    # width, transformers 5.19 makes it 64 times vLLM's (ceil(x) * 64 for
    # vLLM's ceil(x / 64) * 64) and the release cannot load in it.
    "inkling_mm": ("InklingConfig", "InklingForConditionalGeneration", dict(
        text_config=INKLING,
        vision_config=dict(hidden_size=64, num_hidden_layers=3, patch_size=4,
                           temporal_patch_size=2),
        audio_config=dict(n_mel_bins=8, mel_vocab_size=16))),
    "llama4_mm": ("Llama4Config", "Llama4ForConditionalGeneration",
                  {"text_config": LLAMA4,
                   "vision_config": {"hidden_size": 64,
                                     "intermediate_size": 128,
                                     "num_hidden_layers": 2,
                                     "num_attention_heads": 4,
                                     "image_size": 56, "patch_size": 14,
                                     "vision_output_dim": 128,
                                     "projector_input_dim": 128,
                                     "projector_output_dim": 128,
                                     "pixel_shuffle_ratio": 0.5},
                   "image_token_index": 999, "boi_token_index": 997,
                   "eoi_token_index": 998}),
}
# Gemma 4 E2B and E4B: gemma4_mm with an audio tower (2 conformer layers of
# 64, 4 heads, clipped linears as released), projected from
# output_proj_dims.
# Qwen3-Omni: its thinker (a Qwen3-MoE text model of 4 experts, Qwen3-ASR's
# audio encoder, a Qwen3-VL-like tower of 2 blocks with one deepstack
# merger); transformers writes no talker where enable_audio_output is off
# Gemma 3 with attention biases (attention_bias: no release has them, the
# config key and both vLLM's and transformers' layers do): q/k/v biases
# fused, o_proj's whole.
# GLM-4.6's and GLM-4.7's layout: the MTP layer without an embedding or
# head of its own
CASES["glm4_moe-46"] = ("Glm4MoeConfig", "Glm4MoeForCausalLM", None)
CASES["gemma3-bias"] = ("Gemma3TextConfig", "Gemma3ForCausalLM",
                        dict(CASES["gemma3"][2], attention_bias=True))
CASES["qwen3_omni_moe"] = ("Qwen3OmniMoeConfig", "Qwen3OmniMoeForConditionalGeneration", dict(
    enable_audio_output=False, thinker_config=dict(
        audio_token_id=999, image_token_id=998, video_token_id=997,
        vision_start_token_id=996, vision_end_token_id=995,
        audio_start_token_id=994, audio_end_token_id=993,
        audio_config=CASES["qwen3_asr"][2]["audio_config"],
        vision_config={"depth": 2, "hidden_size": 64, "intermediate_size": 128,
                       "num_heads": 4, "patch_size": 14, "out_hidden_size": 256,
                       "deepstack_visual_indexes": [0], "num_position_embeddings": 16,
                       "spatial_merge_size": 2, "temporal_patch_size": 2},
        text_config=dict(COMMON, num_experts=4, num_experts_per_tok=2,
                         moe_intermediate_size=128, bos_token_id=2, eos_token_id=1,
                         pad_token_id=0, tie_word_embeddings=False,
                         rope_scaling={"rope_type": "default", "mrope_section": [8, 12, 12],
                                       "interleaved": True}))))
# Clef-Omni: Qwen3-Omni's thinker with a joint schema head (clef_head below)
CASES["clef_omni"] = CASES["qwen3_omni_moe"]
# clef_omni-f32head: its joint_head.safetensors in F32, which vLLM casts
# into the model's BF16 parameters (default_weight_loader's copy_)
CASES["clef_omni-f32head"] = CASES["qwen3_omni_moe"]
# R-4B (RForConditionalGeneration): Bee's LLaVA-OneVision with a Qwen3 text
# model, R's projector (pre_norm, linear_1 to H, linear_2) in place of
# Bee's, named and configured as released (ckpt_rvl.py)
CASES["rvl"] = CASES["bee"]
# Qwen2.5-Omni: its thinker (a Qwen2 text model, untied as the 7B's, a
# Whisper-like audio encoder of 2 layers, a Qwen2.5-VL tower of 2 blocks,
# the second full attention)
CASES["qwen2_5_omni"] = ("Qwen2_5OmniConfig", "Qwen2_5OmniForConditionalGeneration", dict(
    enable_audio_output=False, thinker_config=dict(
        audio_token_index=999, image_token_index=998, video_token_index=997,
        vision_start_token_id=996, vision_end_token_id=995,
        audio_start_token_id=994, audio_end_token_id=993,
        audio_config={"d_model": 64, "encoder_layers": 2, "encoder_attention_heads": 4,
                      "encoder_ffn_dim": 128, "num_mel_bins": 128, "output_dim": 256},
        vision_config={"depth": 2, "hidden_size": 64, "intermediate_size": 128,
                       "num_heads": 4, "patch_size": 14, "out_hidden_size": 256,
                       "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "fullatt_block_indexes": [1], "window_size": 112},
        text_config=dict(COMMON, bos_token_id=2, eos_token_id=1, pad_token_id=0,
                         tie_word_embeddings=False,
                         rope_scaling={"rope_type": "default", "mrope_section": [8, 12, 12]}))))
# MiniCPM-V 4.6: a Qwen3.5 text model (Gated DeltaNet and full attention,
# dense MLP), an Idefics2 tower of 3 layers (56x56 images of 14-pixel
# patches), its window-attention vit_merger and one merger MLP
CASES["minicpmv4_6"] = ("MiniCPMV4_6Config", "MiniCPMV4_6ForConditionalGeneration", dict(
    image_token_id=999, video_token_id=998, image_size=56,
    vision_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
                   "num_attention_heads": 4, "image_size": 56, "patch_size": 14},
    text_config=dict(COMMON, model_type="qwen3_5_text", bos_token_id=2, eos_token_id=1,
                     pad_token_id=0, **{k: v for k, v in QWEN3_NEXT.items()
                                        if "expert" not in k and k != "moe_intermediate_size"})))
# ... as released with drop_vision_last_layer: vLLM builds 2 tower layers
CASES["minicpmv4_6-drop"] = ("MiniCPMV4_6Config", "MiniCPMV4_6ForConditionalGeneration", dict(
    CASES["minicpmv4_6"][2], drop_vision_last_layer=True))
# MiniCPM-V 4.7: 4.6's model under its own config (no drop_vision_last_layer)
CASES["minicpmv4_7"] = ("MiniCPMV4_7Config", "MiniCPMV4_7ForConditionalGeneration",
                        CASES["minicpmv4_6"][2])
# Gemma 4 Unified: gemma4_mm's text model (without per-layer inputs), no
# towers: the encoder-free vision embedder (48-pixel model patches) and the
# audio embedder
CASES["gemma4_unified"] = ("Gemma4UnifiedConfig", "Gemma4UnifiedForConditionalGeneration", dict(
    {k: v for k, v in CASES["gemma4_mm"][2].items() if not k.endswith("_config")},
    text_config={k: v for k, v in CASES["gemma4_mm"][2]["text_config"].items()
                 if not k.endswith("per_layer_input")},
    vision_config={"patch_size": 16, "pooling_kernel_size": 3, "mm_embed_dim": 128,
                   "mm_posemb_size": 64, "output_proj_dims": 128},
    audio_config={"audio_embed_dim": 64}))
# GLM-ASR: a Llama text model (tied), the rotary Whisper-like encoder (2
# layers over 128 mel bins; no k_proj bias, num_key_value_heads null as
# released) and its two-layer projector
CASES["glmasr"] = ("GlmAsrConfig", "GlmAsrForConditionalGeneration", dict(
    audio_token_id=999,
    audio_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_mel_bins": 128},
    text_config={"model_type": "llama", "bos_token_id": 2, "eos_token_id": 1,
                 "pad_token_id": 0}))
# Whisper: encoder and decoder of 2 layers each (4 heads of 64: vLLM's CPU
# attention takes no head of 16), 80 mel bins
CASES["whisper"] = ("WhisperConfig", "WhisperForConditionalGeneration", dict(
    vocab_size=1000, num_mel_bins=80, encoder_layers=2, encoder_attention_heads=4,
    decoder_layers=2, decoder_attention_heads=4, d_model=256, encoder_ffn_dim=512,
    decoder_ffn_dim=512, max_source_positions=1500, max_target_positions=448,
    decoder_start_token_id=2, pad_token_id=0, bos_token_id=2, eos_token_id=1,
    begin_suppress_tokens=None, suppress_tokens=None))
# Granite Speech: a Granite text model (tied, as text_config of the release
# says), the conformer CTC encoder (2 blocks of 4 heads over 160 input
# features; its CTC head of 42 outputs: cut at tp 2) and the Q-Former
# projector (2 layers, cross-attention in each, 3 queries a window of 15);
# -plus Granite Speech Plus's, its encoder's input and layer 1 beside the
# last (the projector 3 times as wide in)
GRANITE_SPEECH = dict(
    audio_token_index=999, downsample_rate=5, window_size=15,
    encoder_config={"input_dim": 160, "num_layers": 2, "hidden_dim": 64, "feedforward_mult": 2,
                    "num_heads": 4, "dim_head": 16, "output_dim": 42, "context_size": 200,
                    "max_pos_emb": 512},
    projector_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "encoder_hidden_size": 64,
                      "cross_attention_frequency": 1},
    text_config={"model_type": "granite", "tie_word_embeddings": True, "bos_token_id": 2,
                 "eos_token_id": 1, "pad_token_id": 0})
CASES["granite_speech"] = ("GraniteSpeechConfig", "GraniteSpeechForConditionalGeneration",
                           GRANITE_SPEECH)
CASES["granite_speech_plus"] = ("GraniteSpeechPlusConfig", "GraniteSpeechPlusForConditionalGeneration", dict(
    GRANITE_SPEECH, encoder_config=dict(GRANITE_SPEECH["encoder_config"], cat_hidden_layers=[0, 1]),
    projector_config=dict(GRANITE_SPEECH["projector_config"], encoder_hidden_size=192)))
# Granite 4 Vision: a Granite text model of 4 layers, a SigLIP tower of 4
# layers (56x56 images, one grid cell), two deepstack and four spatial
# window Q-Former projectors, downsampled by 2; each Q-Former as vLLM builds
# it whatever the config says (1 layer, heads of 64, 3072 wide)
CASES["granite4_vision"] = ("Granite4VisionConfig", "Granite4VisionForConditionalGeneration", dict(
    image_token_index=999, image_grid_pinpoints=[[56, 56]], downsample_rate="1/2",
    vision_feature_select_strategy="full",
    vision_feature_layer=-1, deepstack_layer_map=[[-3, 1], [-1, 2]], spatial_vision_layer=-1,
    spatial_target_layers=[0, 1, 2, 3],
    vision_config={"model_type": "siglip_vision_model", "hidden_size": 64,
                   "intermediate_size": 128, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "image_size": 56, "patch_size": 14},
    qformer_config={"num_hidden_layers": 1, "intermediate_size": 3072,
                    "cross_attention_frequency": 1, "max_position_embeddings": 2048,
                    "use_qformer_text_input": False, "hidden_size": 64,
                    "num_attention_heads": 1, "encoder_hidden_size": 64},
    text_config={"num_hidden_layers": 4, "bos_token_id": 2, "eos_token_id": 1,
                 "pad_token_id": 0}))
# InternVL 3.5: InternVL 3's tower and projector with a Qwen3 text model
CASES["internvl-qwen3"] = ("InternVLConfig", "InternVLForConditionalGeneration", dict(
    CASES["internvl"][2], text_config={"model_type": "qwen3", "tie_word_embeddings": False}))
# InternVL 3.5's MoE sizes (InternVL3_5-30B-A3B-HF): a Qwen3-MoE text model
CASES["internvl-qwen3moe"] = ("InternVLConfig", "InternVLForConditionalGeneration", dict(
    CASES["internvl"][2], text_config={"model_type": "qwen3_moe", "tie_word_embeddings": False,
                                       "num_experts": 8, "num_experts_per_tok": 2,
                                       "moe_intermediate_size": 128}))
# Qwen3-ASR as transformers saves it (the -hf repositories): tied, the
# projector beside the encoder
CASES["qwen3_asr-hf"] = ("Qwen3ASRConfig", "Qwen3ASRForConditionalGeneration", dict(
    CASES["qwen3_asr"][2], tie_word_embeddings=True, text_config={"tie_word_embeddings": True}))
# Cohere's vision model (North/Compass): a Cohere text model (a sliding and
# a NoPE full layer, M-RoPE) tied to its embedding, as vLLM asserts, and a
# Qwen3-VL-like tower of 4 blocks (deepstack from 1 and 2); 64x64 images
CASES["cohere_compass"] = ("CohereCompassConfig", "CohereCompassForConditionalGeneration", dict(
    tie_word_embeddings=True, image_token_id=999, video_token_id=998,
    vision_start_token_id=997, vision_end_token_id=996,
    text_config=dict(layer_types=["sliding_attention", "full_attention"], sliding_window=512,
                     rope_parameters={"sliding_attention": {
                         "rope_type": "default", "rope_theta": 10000.0,
                         "mrope_section": [12, 12, 8]}, "full_attention": None},
                     pad_token_id=0, bos_token_id=2, eos_token_id=1, tie_word_embeddings=True),
    vision_config=dict(depth=4, hidden_size=64, intermediate_size=128, num_heads=4,
                       patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                       out_hidden_size=256, num_position_embeddings=64,
                       deepstack_visual_indexes=[1, 2])))
# ... with 4 layers: its pipeline stages (the first holds the deepstack's 2)
CASES["cohere_compass-l4"] = ("CohereCompassConfig", "CohereCompassForConditionalGeneration", dict(
    CASES["cohere_compass"][2], text_config=dict(
        CASES["cohere_compass"][2]["text_config"], num_hidden_layers=4,
        layer_types=["sliding_attention", "full_attention"] * 2)))
# EmbeddingGemma 2: bidirectional Gemma 4 layers (sliding, then full with
# one kv head of 128), a per-layer-embedding block and a 128-wide
# projection, with Gemma 4's vision and audio towers (gemma4_mm-audio's)
CASES["embedding_gemma2"] = ("EmbeddingGemma2Config", "EmbeddingGemma2Model", dict(
    boi_token_id=990, eoi_token_id=991, image_token_id=992, video_token_id=993,
    boa_token_id=994, eoa_token_index=995, audio_token_id=996,
    text_config=dict(layer_types=["sliding_attention", "full_attention"], sliding_window=8,
                     global_head_dim=128, num_global_key_value_heads=1,
                     hidden_size_per_layer_input=64, embedding_dim=128,
                     pad_token_id=0, eos_token_id=1, bos_token_id=2),
    vision_config=CASES["gemma4_mm"][2]["vision_config"],
    audio_config={"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "subsampling_conv_channels": [16, 8], "output_proj_dims": 96,
                  "use_clipped_linears": True}))
CASES["gemma4_mm-audio"] = ("Gemma4Config", "Gemma4ForConditionalGeneration", dict(
    CASES["gemma4_mm"][2], audio_config={
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "subsampling_conv_channels": [16, 8], "output_proj_dims": 96,
        "use_clipped_linears": True}))

# HunYuanVL (tencent/HunyuanOCR): a HunYuan dense text model (q and k
# norms a head) and its tower (2 layers, 16-pixel patches, positions for
# 64-pixel images, the patch merger's two convolutions); vLLM runs it
# through its Transformers backend.
CASES["hunyuan_vl"] = ("HunYuanVLConfig", "HunYuanVLForConditionalGeneration", dict(
    image_token_id=999, im_start_id=997, im_end_id=996, im_newline_id=998,
    tie_word_embeddings=False,
    text_config=dict(pad_token_id=0, eos_token_id=1, bos_token_id=2, eod_token_id=3,
                     sep_token_id=4, tie_word_embeddings=False,
                     # the release's XD-RoPE (four axes: position, width,
                     # height, image), which transformers' rotary embedding
                     # always takes
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                      "mrope_section": [8, 8, 8, 8]}),
    vision_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "patch_size": 16, "max_image_size": 64,
                   "min_image_size": 32, "spatial_merge_size": 2}))
# tied, as transformers' HunYuanVLConfig defaults (no lm_head written)
CASES["hunyuan_vl-tied"] = ("HunYuanVLConfig", "HunYuanVLForConditionalGeneration", dict(
    CASES["hunyuan_vl"][2], tie_word_embeddings=True,
    text_config=dict(CASES["hunyuan_vl"][2]["text_config"], tie_word_embeddings=True)))

# Emu3 (BAAI/Emu3-Chat-hf): a Llama-like text model beside the VQ-VAE that
# turns images into tokens, as the release's (four levels, 8-pixel tokens,
# attention in the last, time convolutions for a temporal factor of 4) but
# 32 and 64 channels and a 64-entry codebook; vLLM runs it through its
# Transformers backend.
CASES["emu3"] = ("Emu3Config", "Emu3ForConditionalGeneration", dict(
    vocabulary_map=dict({"<|image token|>": 900, "<|extra_200|>": 901, "<image>": 999,
                         "<|image start|>": 997, "<|image end|>": 996, "<|extra_201|>": 995},
                        **{f"<|visual token {i:06d}|>": 902 + i for i in range(64)}),
    text_config=dict(pad_token_id=0, eos_token_id=1, bos_token_id=2, attention_dropout=0.0),
    vq_config={"codebook_size": 64, "embed_dim": 4, "latent_channels": 4,
               "base_channels": 32, "channel_multiplier": [1, 1, 2, 2], "num_res_blocks": 1,
               "attn_resolutions": [3], "temporal_downsample_factor": 4, "hidden_size": 64}))

# VibeVoice-ASR (microsoft/VibeVoice-ASR-HF): a Qwen2 text model beside
# two VibeVoice tokenizer encoders (acoustic and semantic: causal
# convolutions and ConvNeXt blocks, as the release's six downsampling
# stages of 2, 2, 4, 5, 5, 8 samples) at 4 filters and one block a stage,
# and their projector; vLLM runs it through its Transformers backend.
CASES["vibevoice_asr"] = ("VibeVoiceAsrConfig", "VibeVoiceAsrForConditionalGeneration", dict(
    audio_token_id=999, audio_bos_token_id=997, audio_eos_token_id=996,
    text_config=dict(model_type="qwen2", pad_token_id=0, eos_token_id=1, bos_token_id=2,
                     tie_word_embeddings=False),
    acoustic_tokenizer_encoder_config={"hidden_size": 16, "num_filters": 4,
                                       "depths": [1, 1, 1, 1, 1, 1, 1]},
    semantic_tokenizer_encoder_config={"hidden_size": 32, "num_filters": 4,
                                       "depths": [1, 1, 1, 1, 1, 1, 1]}))

# Linear weights the FP8 variants quantize (the rest stays BF16).
FP8_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
              "down_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
              "kv_b_proj")
BLOCK = 128


# compressed-tensors' schemes for the -w4a16* variants: (preset, strategy)
CT_SCHEMES = {"w4a16": ("W4A16", None, "pack-quantized"),
              "w4a16a": ("W4A16_ASYM", None, "pack-quantized"),
              "w4a16c": ("W4A16", "channel", "pack-quantized"),
              "w8a8": ("W8A8", None, "int-quantized"),
              "fp8dyn": ("FP8_DYNAMIC", None, "float-quantized"),
              "nvfp4": ("NVFP4", None, "nvfp4-pack-quantized"),
              "nvfp4a16": ("NVFP4A16", None, "nvfp4-pack-quantized"),
              "nvfp4mo": ("NVFP4", None, "nvfp4-pack-quantized"),
              "mxfp4a16": ("MXFP4A16", None, "mxfp4-pack-quantized")}


def quantize_ct(model, variant):
    """Quantizes model's linear layers in memory with compressed-tensors
    (every Linear but lm_head, as llm-compressor's recipes leave it),
    weight scales and zero points from each weight's own
    range (what llm-compressor's RTN / minmax observer computes), and
    returns the ModelCompressor that packs them: save_pretrained then
    writes pack-quantized tensors, update_config the quantization_config."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationConfig, apply_quantization_config, preset_name_to_scheme)
    preset, strategy, fmt = CT_SCHEMES[variant]
    scheme = preset_name_to_scheme(preset, ["Linear"])
    if strategy == "channel":
        scheme.weights.strategy = "channel"
        scheme.weights.group_size = None
    ignore = ["lm_head"]
    apply_quantization_config(model, QuantizationConfig(
        config_groups={"group_0": scheme}, ignore=ignore))
    calibrate_ct(model)
    mc = ModelCompressor.from_pretrained_model(
        model, quantization_format=fmt)
    mc.compress_model(model)
    return mc


def calibrate_ct(model, salt=""):
    """Sets the scales (and zero points, global scales) of every module
    compressed-tensors' apply_quantization_config prepared in model.
    NVFP4's activation global scale, which llm-compressor calibrates, is
    taken from a fixed range that differs from module to module (by its
    name after salt), so that a part's scale put in another's place
    shows."""
    import zlib
    import torch
    from compressed_tensors.quantization import QuantizationStatus
    from compressed_tensors.quantization.utils import (
        compute_dynamic_scales_and_zp, generate_gparam)
    with torch.no_grad():
        for n, m in model.named_modules():
            s = getattr(m, "quantization_scheme", None)
            if s is None or s.weights is None:
                continue
            if s.weights.strategy == "channel":
                w = m.weight.float()
                lo = w.amin(dim=1, keepdim=True)
                hi = w.amax(dim=1, keepdim=True)
                from compressed_tensors.quantization.utils import (
                    calculate_qparams)
                sc, zp = calculate_qparams(lo, hi, s.weights)
            elif s.weights.strategy == "tensor_group":
                # NVFP4: the group scales under one global scale from the
                # weight's range
                w = m.weight.float()
                gs = generate_gparam(w.min(), w.max())
                m.weight_global_scale.copy_(gs.reshape(m.weight_global_scale.shape))
                sc, zp = compute_dynamic_scales_and_zp(m.weight, s.weights, m,
                                                       global_scale=gs)
                if hasattr(m, "input_global_scale"):
                    r = 2.0 + zlib.crc32((salt + n).encode()) % 7
                    m.input_global_scale.copy_(generate_gparam(
                        torch.tensor(-r), torch.tensor(r)).reshape(
                            m.input_global_scale.shape))
            else:
                sc, zp = compute_dynamic_scales_and_zp(m.weight, s.weights, m)
            m.weight_scale.copy_(sc.reshape(m.weight_scale.shape))
            if hasattr(m, "weight_zero_point"):
                m.weight_zero_point.copy_(zp.reshape(m.weight_zero_point.shape))
            m.quantization_status = QuantizationStatus.FROZEN


def ct_experts(out, variant):
    """transformers 5 holds a MoE's experts in fused parameters, which
    compressed-tensors' "Linear" target does not reach: each expert's
    gate, up and down weight of the checkpoint in OUT is quantized as its
    own Linear by the variant's scheme (CT_SCHEMES: NVFP4 or MXFP4), with
    compressed-tensors' own compressor, into X.weight_packed,
    X.weight_scale and, for NVFP4, X.weight_global_scale and
    X.input_global_scale.  The routers stay unquantized, as
    llm-compressor's MoE recipes leave them (ignore "re:.*mlp.gate$")."""
    import re
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationConfig, apply_quantization_config, preset_name_to_scheme)
    from ckpt_io import rewrite_shards, update_config
    preset, _, fmt = CT_SCHEMES[variant]
    update_config(out, lambda cfg: cfg["quantization_config"]["ignore"].append(
        "re:.*mlp.gate$"))

    def shard(tensors):
        names = [n for n in tensors
                 if re.search(r"\.experts\.\d+\.(gate|up|down)_proj\.weight$", n)]
        for name in names:
            w = tensors.pop(name)
            lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
            lin.weight.data.copy_(w)
            box = torch.nn.Module()
            box.lin = lin
            apply_quantization_config(box, QuantizationConfig(config_groups={
                "group_0": preset_name_to_scheme(preset, ["Linear"])}))
            calibrate_ct(box, salt=name)
            ModelCompressor.from_pretrained_model(
                box, quantization_format=fmt).compress_model(box)
            for k, v in box.state_dict().items():
                tensors[name[:-len("weight")] + k[len("lin."):]] = v.detach().clone()
    rewrite_shards(out, shard)


def deepseek_v32_fp8(out):
    """DeepSeek-V3.2's FP8 release as deepseek-ai ships it (its shards'
    headers): the linear weights F8_E4M3 with F32 scales per 128x128 block,
    the sparse-attention indexer's wq_b and wk among them (weights_proj
    BF16), eh_proj BF16, and every RMSNorm and the indexer's k_norm in F32
    in a BF16 model."""
    from ckpt_io import rewrite_shards
    quantize_fp8(out, pick=lambda n: n.endswith(".weight") and
                 n.split(".")[-2] in FP8_LINEAR + ("wq_b", "wk"))

    def f32_norms(tensors):
        for name, t in tensors.items():
            if name.endswith(("norm.weight", "k_norm.bias")):
                tensors[name] = t.float()
    rewrite_shards(out, f32_norms)


def quantize_fp8(out, per_tensor=False, pick=None, ue8m0=False):
    """Rewrites the BF16 checkpoint in OUT with its linear weights in
    float8_e4m3fn and a float32 weight_scale_inv per 128x128 block (or,
    per_tensor, one weight_scale and one input_scale each, as static
    FP8 checkpoints carry them), shard by shard, and adds
    quantization_config to config.json.  pick(name): which weights, by
    default those whose module is in FP8_LINEAR.  ue8m0: each block scale
    a power of two, stored as float8_e8m0fnu (DeepSeek's scale_fmt)."""
    import json
    import os
    import zlib
    import torch
    from safetensors.torch import load_file, save_file
    from ckpt_io import fp8_blocks
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    fmax = torch.finfo(torch.float8_e4m3fn).max
    for fname in sorted(set(idx["weight_map"].values())):
        path = os.path.join(out, fname)
        tensors = load_file(path)
        for name in list(tensors):
            if pick is not None and not pick(name):
                continue
            if pick is None and not (name.endswith(".weight") and
                                     name.split(".")[-2] in FP8_LINEAR):
                continue
            w = tensors[name].float()
            if per_tensor:
                s = w.abs().max().clamp(min=1e-12) / fmax
                tensors[name] = (w / s).to(torch.float8_e4m3fn)
                base = name[:-len("weight")]
                tensors[base + "weight_scale"] = s.reshape([]).float()
                # a fixed activation scale, distinct per layer and part
                tensors[base + "input_scale"] = torch.tensor(
                    0.01 + 0.001 * (zlib.crc32(base.encode()) % 7), dtype=torch.float32)
                idx["weight_map"][base + "weight_scale"] = fname
                idx["weight_map"][base + "input_scale"] = fname
                continue
            q, scale = fp8_blocks(w, BLOCK, ue8m0)
            tensors[name] = q
            sname = name[:-len("weight")] + "weight_scale_inv"
            tensors[sname] = scale.to(torch.float8_e8m0fnu) if ue8m0 else scale
            idx["weight_map"][sname] = fname
        save_file(tensors, path, metadata={"format": "pt"})
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    if per_tensor:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "static"}
    else:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "dynamic",
                                      "weight_block_size": [BLOCK, BLOCK]}
    # Routers stay BF16; as in Qwen's FP8 checkpoints, the config says so.
    gates = sorted(n[:-len(".weight")] for n in idx["weight_map"]
                   if n.endswith(".mlp.gate.weight"))
    if gates:
        cfg["quantization_config"]["modules_to_not_convert"] = ["lm_head"] + gates
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


# FP4 (e2m1) values, by code 0-15: the low nibble of a byte holds the even
# element, the high nibble the odd one (OpenAI's and vLLM's order).
FP4 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
MX = 32


def pack_mxfp4(w):
    """w [..., K] (float, K a multiple of 32) as OpenAI's GPT-OSS stores
    it: blocks [..., K/32, 16] U8 (two FP4 values a byte) and scales
    [..., K/32] U8 (E8M0: the power of two, biased by 127)."""
    import torch
    w = w.float().reshape(*w.shape[:-1], w.shape[-1] // MX, MX)
    amax = w.abs().amax(-1, keepdim=True).clamp(min=2.0 ** -100)
    e = torch.floor(torch.log2(amax)) - 2      # 6.0 = 1.5 * 2^2
    q = w / torch.exp2(e)
    lut = torch.tensor(FP4)
    code = (q.unsqueeze(-1) - lut).abs().argmin(-1).to(torch.uint8)
    blocks = code[..., 0::2] | (code[..., 1::2] << 4)
    scales = (e.squeeze(-1) + 127).clamp(0, 255).to(torch.uint8)
    return blocks.contiguous(), scales.contiguous()


def mxfp4(out):
    """Rewrites the BF16 GPT-OSS checkpoint in OUT as OpenAI ships it: each
    layer's experts.gate_up_proj [E, H, 2I] becomes gate_up_proj_blocks
    [E, 2I, H/32, 16] and gate_up_proj_scales [E, 2I, H/32] (output rows
    first: the transpose of transformers' layout), down_proj [E, I, H]
    becomes down_proj_blocks [E, H, I/32, 16] and down_proj_scales
    [E, H, I/32]; the biases stay BF16.  config.json gains OpenAI's
    quantization_config."""
    import json
    import os
    from ckpt_io import rewrite_shards

    def shard(tensors):
        for name in list(tensors):
            if not name.endswith((".experts.gate_up_proj", ".experts.down_proj")):
                continue
            blocks, scales = pack_mxfp4(tensors.pop(name).transpose(1, 2))
            tensors[name + "_blocks"] = blocks
            tensors[name + "_scales"] = scales
    rewrite_shards(out, shard)
    cfg_path = os.path.join(out, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn",
                                   "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"]}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


def add_mtp_layer(out, model="model.", f32_router_bias=True, own_head=True, hy_v3=False,
                  nextn=1):
    """Appends DeepSeek's multi-token-prediction layer model.layers.{L}
    (L = num_hidden_layers), which transformers' class neither builds nor
    writes: a full decoder layer (a copy of the last, perturbed) plus
    embed_tokens, enorm, hnorm, eh_proj and shared_head.{norm,head}, the
    names DeepSeek-V3's checkpoint uses, in a shard of its own listed in the
    index; config.json gains num_nextn_predict_layers: 1.  The routers'
    e_score_correction_bias become F32, as in DeepSeek's checkpoint (unless
    f32_router_bias is False: a checkpoint the rules were learned on).  With
    model "model.language_model." the text model's (GLM-OCR's layer 16),
    the key in config.json's text_config.  Without own_head the layer has
    no embed_tokens or shared_head.head, as GLM-4.6's and GLM-4.7's
    releases (vLLM's draft then loads the target's).  With hy_v3, Hunyuan
    3's names: no embed_tokens or shared_head, the norm after the decoder
    layer final_layernorm (hy_v3_mtp.py).  With nextn, that many MTP
    layers (L to L+nextn-1, each its own values) and
    num_nextn_predict_layers nextn."""
    import json
    import os
    import torch
    from safetensors.torch import load_file, save_file
    from ckpt_io import add_shard
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    cfg_path = os.path.join(out, "config.json")
    top = json.load(open(cfg_path))
    cfg = top.get("text_config", top) if model != "model." else top
    n, h, v = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["vocab_size"]
    src = {}
    for fname in sorted(set(idx["weight_map"].values())):
        src.update(load_file(os.path.join(out, fname)))
    g = torch.Generator().manual_seed(4321)

    def rnd(shape, like):
        return like + (torch.randn(shape, generator=g) * 0.02).to(like.dtype)

    # DeepSeek ships the routers' e_score_correction_bias in F32
    # (transformers writes the model dtype).
    for fname in sorted(set(idx["weight_map"].values())) if f32_router_bias else []:
        path = os.path.join(out, fname)
        t = load_file(path)
        if any(k.endswith(".e_score_correction_bias") for k in t):
            t = {k: v.float() if k.endswith(".e_score_correction_bias") else v
                 for k, v in t.items()}
            save_file(t, path, metadata={"format": "pt"})
            src.update(t)
    new = {}
    last = f"{model}layers.{n - 1}."
    for k in range(nextn):
        for name, t in src.items():
            if name.startswith(last):
                new[f"{model}layers.{n + k}." + name[len(last):]] = rnd(t.shape, t)
        pre = f"{model}layers.{n + k}."
        emb = src[f"{model}embed_tokens.weight"]
        one = torch.ones(h, dtype=emb.dtype)
        new[pre + "embed_tokens.weight"] = rnd(emb.shape, emb)
        new[pre + "enorm.weight"] = rnd([h], one)
        new[pre + "hnorm.weight"] = rnd([h], one)
        new[pre + "eh_proj.weight"] = rnd([h, 2 * h], torch.zeros(h, 2 * h, dtype=emb.dtype))
        new[pre + "shared_head.norm.weight"] = rnd([h], one)
        new[pre + "shared_head.head.weight"] = rnd([v, h], torch.zeros(v, h, dtype=emb.dtype))
        if not own_head or hy_v3:
            del new[pre + "embed_tokens.weight"], new[pre + "shared_head.head.weight"]
        if hy_v3:
            new[pre + "final_layernorm.weight"] = new.pop(pre + "shared_head.norm.weight")
    add_shard(out, "model-mtp.safetensors", {k: t.contiguous() for k, t in new.items()})
    cfg["num_nextn_predict_layers"] = nextn
    with open(cfg_path, "w") as f:
        json.dump(top, f, indent=2)


def glm5_next_mtp(out):
    """GLM-5-Next's multi-token-prediction layer as the text model's layer
    num_hidden_layers (transformers' Glm5Next ignores layers.45., the
    release's, and any shared_head): add_mtp_layer's layer, the last
    decoder layer's copy (MLA with its indexer, the MoE), without the mHC
    tensors (vLLM's MTP layer has none: is_mtp_layer), without
    shared_head.head (vLLM's Glm5NextMTP builds none, defer_lm_head, and
    fails on one) and without embed_tokens, as the release
    (GLM-5.3-Flash: layers.45. has neither; vLLM's draft then holds the
    target's embedding, _maybe_share_embeddings)."""
    import os
    from safetensors.torch import load_file, save_file
    add_mtp_layer(out, "model.language_model.", f32_router_bias=False, own_head=False)
    path = os.path.join(out, "model-mtp.safetensors")
    t = load_file(path)
    drop = [k for k in t if ".hc_" in k]
    for k in drop:
        del t[k]
    save_file(t, path, metadata={"format": "pt"})
    import json
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    for k in drop:
        del idx["weight_map"][k]
    with open(idx_path, "w") as f:
        json.dump(idx, f, indent=2)


def mimo_mtp(out):
    """Adds MiMo-7B's multi-token-prediction layer model.mtp_layers.0 (a
    decoder layer copied from the last, with token_layernorm,
    hidden_layernorm, input_proj and final_layernorm), the names
    XiaomiMiMo/MiMo-7B-RL ships, and config.json's
    num_nextn_predict_layers: 1."""
    import torch
    from ckpt_io import (add_to_first_shard, perturbed_copy, perturber, read_tensors,
                         update_config)
    src = read_tensors(out)
    n = max(int(k.split(".")[2]) for k in src if k.startswith("model.layers."))
    rnd = perturber(4321)
    new = perturbed_copy(src, f"model.layers.{n}.", "model.mtp_layers.0.", rnd)
    h = src["model.norm.weight"].shape[0]
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        new[f"model.mtp_layers.0.{norm}.weight"] = torch.ones(h, dtype=torch.bfloat16)
    new["model.mtp_layers.0.input_proj.weight"] = (
        torch.randn(h, 2 * h, generator=rnd.g) * 0.02).to(torch.bfloat16)
    add_to_first_shard(out, new)
    update_config(out, lambda c: c.update(num_nextn_predict_layers=1))


def qwen_next_mtp(out, model="model.", config=None):
    """Adds the multi-token-prediction block Qwen ships with Qwen3-Next and
    Qwen3.5 (mtp.*, which transformers' classes neither build nor write):
    mtp.layers.0, a copy of the last full-attention decoder layer
    perturbed, mtp.fc (2*hidden to hidden), mtp.pre_fc_norm_embedding,
    mtp.pre_fc_norm_hidden and mtp.norm; config.json (its text_config
    where it has one) gains mtp_num_hidden_layers: 1 and
    mtp_use_dedicated_embeddings: false, as Qwen3-Next-80B-A3B's and
    Qwen3.5's config.json have them.  model is the text model's prefix
    (model.language_model. in Qwen3_5ForConditionalGeneration); config,
    where given, edits config.json instead (EXAONE 4.5 ships the same
    block, its config.json's num_nextn_predict_layers 1)."""
    import torch
    from ckpt_io import (add_to_first_shard, last_attention_layer, perturbed_copy, perturber,
                         read_tensors, update_config)
    src = read_tensors(out)
    last = last_attention_layer(src, model)
    rnd = perturber(4321)
    g = rnd.g
    new = perturbed_copy(src, last, "mtp.layers.0.", rnd)
    norm = src[model + "norm.weight"]
    h = norm.shape[0]
    for k in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        new[f"mtp.{k}.weight"] = rnd(norm)
    new["mtp.fc.weight"] = (torch.randn(h, 2 * h, generator=g) * 0.05).to(norm.dtype)
    add_to_first_shard(out, {k: t.contiguous() for k, t in new.items()})

    def cfg(c):
        c.get("text_config", c).update(mtp_num_hidden_layers=1,
                                       mtp_use_dedicated_embeddings=False)
    update_config(out, config or cfg)


def layer_scales(out, model="model."):
    """Adds, as a checkpoint whose config sets layer_scale would hold them
    (transformers' classes neither build nor write them), each decoder
    layer's attn_layer_scale and ffn_layer_scale, [1, 1, hidden] in the
    checkpoint's dtype and far from vLLM's zeros (a scale of 1 + s:
    Qwen3NextDecoderLayer.forward, qwen3_next.py:587-627), and sets
    layer_scale in config.json (its text_config where it has one).  Before
    qwen_next_mtp, whose copy of the last attention layer takes them too
    (Qwen3_5DecoderLayer and Qwen3NextDecoderLayer build them in the
    draft as well)."""
    import torch
    from ckpt_io import add_to_first_shard, read_tensors, update_config
    src = read_tensors(out)
    norm = src[model + "norm.weight"]
    layers = sorted({int(k[len(model):].split(".")[1]) for k in src
                     if k.startswith(model + "layers.")})
    g = torch.Generator().manual_seed(77)
    add_to_first_shard(out, {
        f"{model}layers.{n}.{s}": (torch.randn(1, 1, norm.shape[0], generator=g) * 0.1).to(
            norm.dtype) for n in layers for s in ("attn_layer_scale", "ffn_layer_scale")})
    update_config(out, lambda c: c.get("text_config", c).update(layer_scale=True))


def qwen4_exp_mtp(out, model="model."):
    """Adds the multi-token-prediction block of Qwen4-Exp (mtp.*, which
    transformers' classes neither build nor write: _keys_to_ignore_on_load_
    unexpected ^mtp.*), with the names vLLM 0.32's draft Qwen4ExpMTP reads
    (models/qwen4_exp/nvidia/mtp.py, _remap_mtp_weight_name: mtp.X as
    model.X): mtp.layers.0, a copy of the last QSA decoder layer (its
    hyper-connections included, any PLE left out) perturbed, mtp.fc_embedding
    and mtp.fc_hidden (hidden to hidden), mtp.pre_fc_norm_embedding (hidden),
    mtp.pre_fc_norm_hidden (hc_count*hidden) and the final hyper-connection
    mixer mtp.hyper_connection_mixer (hc_norm, input_mix_weight_down and _up,
    the target's perturbed); config.json (its text_config where it has one)
    gains mtp_num_hidden_layers: 1.  model is the text model's prefix
    (model.language_model. in Qwen4ExpForConditionalGeneration)."""
    import torch
    from ckpt_io import (add_to_first_shard, last_attention_layer, perturbed_copy, perturber,
                         read_tensors, update_config)
    src = read_tensors(out)
    last = last_attention_layer(src, model)
    rnd = perturber(4322)
    g = rnd.g
    new = perturbed_copy(src, last, "mtp.layers.0.", rnd, lambda rest: not rest.startswith("ple."))
    mixer = model + "hyper_connection_mixer."
    new.update(perturbed_copy(src, mixer, "mtp.hyper_connection_mixer.", rnd))
    norm = src[mixer + "hc_norm.weight"]
    emb = src[model + "embed_tokens.weight"]
    h = emb.shape[1]
    new["mtp.pre_fc_norm_hidden.weight"] = rnd(norm)
    new["mtp.pre_fc_norm_embedding.weight"] = rnd(torch.ones(h, dtype=norm.dtype))
    for k in ("fc_embedding", "fc_hidden"):
        new[f"mtp.{k}.weight"] = (torch.randn(h, h, generator=g) * 0.05).to(norm.dtype)
    add_to_first_shard(out, {k: t.contiguous() for k, t in new.items()})
    update_config(out, lambda c: c.get("text_config", c).update(mtp_num_hidden_layers=1))


def hyv4_mtp(out):
    """Adds the multi-token-prediction layer Tencent's Hunyuan 4 releases
    ship under model.mtp_layers.0 (transformers' class ignores
    model.mtp_layers.*; vLLM 0.32's draft HYV4MTP reads it as layer
    num_hidden_layers, models/hy_v4/nvidia/mtp.py): enorm, hnorm,
    eh_proj (2*hidden to hidden) and final_layernorm, and a decoder layer
    copied from the last one, perturbed, without its hyper-connections
    (hc_attn_layer, hc_mlp_layer: the release's MTP layers carry none and
    vLLM builds them with enable_ihc off), with the last full indexer's
    copy where that layer shares another's; config.json gains
    num_nextn_predict_layers: 1."""
    import torch
    from ckpt_io import (add_to_first_shard, perturbed_copy, perturber, read_tensors,
                         update_config)
    src = read_tensors(out)
    n = max(int(k.split(".")[2]) for k in src if k.startswith("model.layers."))
    last = f"model.layers.{n}."
    rnd = perturber(4323)
    g = rnd.g
    new = perturbed_copy(src, last, "model.mtp_layers.0.", rnd,
                         lambda rest: not rest.startswith(("hc_attn_layer.", "hc_mlp_layer.")))
    # an MTP layer of a sparse model always has an indexer of its own
    # (attention.py: is_mtp_layer), the last layer perhaps none (shared)
    idx = sorted({int(k.split(".")[2]) for k in src if ".self_attn.indexer." in k})
    if idx and not any(".self_attn.indexer." in k for k in new):
        pre = f"model.layers.{idx[-1]}.self_attn.indexer."
        new.update(perturbed_copy(src, pre, "model.mtp_layers.0.self_attn.indexer.", rnd))
    norm = src["model.norm.weight"]
    h = norm.shape[0]
    for k in ("enorm", "hnorm", "final_layernorm"):
        new[f"model.mtp_layers.0.{k}.weight"] = rnd(norm)
    new["model.mtp_layers.0.eh_proj.weight"] = (
        torch.randn(h, 2 * h, generator=g) * 0.05).to(norm.dtype)
    add_to_first_shard(out, {k: t.contiguous() for k, t in new.items()})
    update_config(out, lambda c: c.update(num_nextn_predict_layers=1))


def released_vision_names(out, tower="vision_tower."):
    """Renames transformers 5.19's vision tower tensors (vision_tower.X, as
    its save_pretrained writes them) to the names Google's Gemma 3,
    llava-hf's LLaVA, Cohere's Command A Vision and Liquid AI's LFM2-VL
    (under model.) checkpoints carry (vision_tower.vision_model.X): vLLM 0.32 loads only
    those ("There is no module or parameter named 'vision_tower.embeddings'
    in Gemma3ForConditionalGeneration")."""
    from ckpt_io import rename_tensors

    def rename(n):
        if n.startswith(tower) and not n.startswith(tower + "vision_model."):
            return tower + "vision_model." + n[len(tower):]
        return n
    rename_tensors(out, rename)


def released_fused_experts(out):
    """Writes the fused experts as Qwen's Qwen3-VL-MoE checkpoints carry
    them, gate_up_proj [E, H, 2I] and down_proj [E, I, H]: transformers
    5.19's save_pretrained writes its own [E, 2I, H] and [E, H, I], which
    vLLM 0.32 (is_fused_checkpoint_transposed) does not load ("The size of
    tensor a (32) must match the size of tensor b (128)")."""
    from ckpt_io import rewrite_shards

    def shard(t):
        for k in t:
            if k.endswith((".experts.gate_up_proj", ".experts.down_proj")):
                t[k] = t[k].transpose(-1, -2).contiguous()
    rewrite_shards(out, shard)


def released_zero_experts(out, routed):
    """Drops the weights transformers 5.19's LongcatFlash class gives its
    zero-computation experts (mlp.experts.E for E >= n_routed_experts):
    Meituan's checkpoints have none, and vLLM 0.32 has no parameter for
    them (KeyError 'layers.0.mlp.experts.10.gate_proj.weight')."""
    import re
    from ckpt_io import rewrite_shards

    def shard(t):
        for k in list(t):
            m = re.search(r"\.mlp\.experts\.(\d+)\.", k)
            if m and int(m.group(1)) >= routed:
                del t[k]
    rewrite_shards(out, shard)


def released_longcat_mtp(out):
    """Adds LongCat-Flash's multi-token-prediction layer under the names
    Meituan's release ships (model.mtp.*, which transformers' class
    neither builds nor writes; vLLM 0.32's longcat_flash_mtp.py lists them
    in load_weights): model.mtp.embed_tokens, model.mtp.norm, and
    model.mtp.layers.0's eh_proj, enorm.m, hnorm.m, the two norms, one MLA
    block (self_attn.*, a copy of the last layer's self_attn.0 perturbed)
    and one dense MLP (transformer_layer.mlp.*, a copy of its mlps.0)."""
    import torch
    from ckpt_io import add_to_first_shard, perturber, read_tensors
    src = read_tensors(out)
    n = max(int(k.split(".")[2]) for k in src if k.startswith("model.layers."))
    rnd = perturber(4321)
    emb = src["model.embed_tokens.weight"]
    h = emb.shape[1]
    one = torch.ones(h, dtype=emb.dtype)
    pre = "model.mtp.layers.0."
    new = {"model.mtp.embed_tokens.weight": rnd(emb), "model.mtp.norm.weight": rnd(one),
           pre + "eh_proj.weight": rnd(torch.zeros(h, 2 * h, dtype=emb.dtype)),
           pre + "enorm.m.weight": rnd(one), pre + "hnorm.m.weight": rnd(one),
           pre + "input_layernorm.weight": rnd(one),
           pre + "post_attention_layernorm.weight": rnd(one)}
    for name, t in src.items():
        for part, to in ((f"model.layers.{n}.self_attn.0.", "self_attn."),
                         (f"model.layers.{n}.mlps.0.", "transformer_layer.mlp.")):
            if name.startswith(part) and "rotary_emb" not in name:
                new[pre + to + name[len(part):]] = rnd(t)
    add_to_first_shard(out, new)


# Embedding models and classifiers: served with vLLM's runner "pooling"
# (oracle.py reads this list)
POOLING = ("LlamaModel", "MistralModel", "Qwen2Model", "Gemma2Model", "Gemma3TextModel",
           "BertModel",
           "XLMRobertaModel", "RobertaForMaskedLM", "BertForSequenceClassification",
           "XLMRobertaForSequenceClassification", "BertForTokenClassification", "BertForMaskedLM", "NomicBertModel", "GteModel", "EmbeddingGemma2Model",
           "XLMRobertaForTokenClassification", "ModernBertModel",
           "ModernBertForSequenceClassification", "ModernBertForTokenClassification",
           "GPT2ForSequenceClassification", "CLIPModel", "SiglipModel", "ColPaliForRetrieval",
           "LlamaForSequenceClassification", "MistralForSequenceClassification",
           "Qwen2ForSequenceClassification", "Qwen3ForSequenceClassification",
           "Gemma2ForSequenceClassification", "Qwen3MoeForSequenceClassification",
           "Phi3ForSequenceClassification", "JambaForSequenceClassification",
           "OpenAIPrivacyFilterForTokenClassification", "JinaVLForRanking", "DeepseekV3Model",
           "Qwen3Model", "Qwen3ForTokenClassification")


def st_modules(out, cfg, decoder):
    """sentence-transformers' module folders beside the model: mean
    pooling, a Dense layer to half the width, normalisation (vLLM reads
    them from the model folder: modules.json, 1_Pooling/config.json,
    2_Dense/config.json and its weights); for a decoder (Qwen3-Embedding)
    last-token pooling and normalisation only."""
    import json
    import torch
    from safetensors.torch import save_file
    mods = [("", "sentence_transformers.models.Transformer"),
            ("1_Pooling", "sentence_transformers.models.Pooling"),
            ("2_Dense", "sentence_transformers.models.Dense"),
            ("3_Normalize", "sentence_transformers.models.Normalize")]
    if decoder:
        del mods[2]
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump([{"idx": i, "name": str(i), "path": p, "type": t}
                   for i, (p, t) in enumerate(mods)], f)
    for p, _ in mods[1:]:
        os.makedirs(os.path.join(out, p), exist_ok=True)
    h = cfg.hidden_size
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": h, "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": not decoder,
                   "pooling_mode_lasttoken": decoder}, f)
    if decoder:
        return
    with open(os.path.join(out, "2_Dense", "config.json"), "w") as f:
        json.dump({"in_features": h, "out_features": h // 2, "bias": True,
                   "activation_function": "torch.nn.modules.linear.Identity"}, f)
    torch.manual_seed(99)
    save_file({"linear.weight": torch.randn(h // 2, h) * 0.05,
               "linear.bias": torch.randn(h // 2) * 0.05},
              os.path.join(out, "2_Dense", "model.safetensors"))


def word_level(cfg, special):
    """A word-level tokenizer for the tiny vocabulary: the special tokens at
    their ids, every other id a word "tN"."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = dict(special)
    used = set(vocab.values())
    for i in range(cfg.get_text_config().vocab_size):
        if i not in used:
            vocab["t%d" % i] = i
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tk


def word_tokenizer(cfg, special, pad, eos, bos, unk, **kw):
    """A fast tokenizer of word_level's vocabulary whose special tokens
    other than pad, eos, bos and unk (a processor's image tokens) are added
    as special: kept whole in text."""
    import transformers
    from tokenizers import AddedToken
    tk = word_level(cfg, special)
    tk.add_special_tokens([AddedToken(t, normalized=False) for t in special
                           if t not in (pad, eos, bos, unk)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token=pad, eos_token=eos, bos_token=bos,
        unk_token=unk, **kw)


def gemma3_processor(out, cfg):
    """Writes a tokenizer and Gemma3Processor for the tiny vocabulary: vLLM's
    Gemma 3 processor needs both to build the vision tower (with
    skip_tokenizer_init it refuses: "Gemma3MultiModalProcessor requires a
    tokenizer"), and looks up the newline tokens by text.  Word-level, ids
    as the config's image tokens say."""
    import transformers
    from tokenizers import AddedToken
    tk = word_level(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                          "\n": 4, "\n\n": 5, "\n\n\n": 6, "\n\n\n\n": 7,
                          "<start_of_image>": cfg.boi_token_index,
                          "<end_of_image>": cfg.eoi_token_index,
                          "<image_soft_token>": cfg.image_token_index})
    tk.add_tokens([AddedToken(t, normalized=False)
                   for t in ("\n\n\n\n", "\n\n\n", "\n\n", "\n")])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>",
        bos_token="<bos>", unk_token="<unk>",
        extra_special_tokens={"boi_token": "<start_of_image>",
                              "eoi_token": "<end_of_image>",
                              "image_token": "<image_soft_token>"})
    size = cfg.vision_config.image_size
    ip = transformers.Gemma3ImageProcessor(size={"height": size, "width": size})
    transformers.Gemma3Processor(image_processor=ip, tokenizer=tok,
                                 image_seq_length=cfg.mm_tokens_per_image
                                 ).save_pretrained(out)


def released_gemma4_unified(out):
    """Gemma 4 Unified's released config gives its vision config
    num_soft_tokens (the image's soft tokens), which vLLM reads and
    transformers' config class does not write."""
    from ckpt_io import update_config

    def soft_tokens(cfg):
        cfg["vision_config"]["num_soft_tokens"] = 70
    update_config(out, soft_tokens)


def gemma4_processor(out, cfg):
    """Writes a tokenizer and Gemma4Processor (Gemma 4 Unified's own) for the
    tiny vocabulary: vLLM's Gemma 4 processor needs both to build the vision
    tower (the unified model's embedder), and finds the
    image, video and audio tokens by the tokenizer's names.  Word-level, ids
    as the config's tokens say; images of 70 soft tokens at most (the
    processor's smallest)."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<start_of_image>": cfg.boi_token_id, "<end_of_image>": cfg.eoi_token_id,
               "<image_soft_token>": cfg.image_token_id, "<|video|>": cfg.video_token_id,
               "<start_of_audio>": cfg.boa_token_id, "<end_of_audio>": cfg.eoa_token_index,
               "<audio_soft_token>": cfg.audio_token_id}
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=word_level(cfg, special), pad_token="<pad>", eos_token="<eos>",
        bos_token="<bos>", unk_token="<unk>",
        extra_special_tokens={"boi_token": "<start_of_image>",
                              "eoi_token": "<end_of_image>",
                              "image_token": "<image_soft_token>",
                              "boa_token": "<start_of_audio>",
                              "eoa_token": "<end_of_audio>",
                              "audio_token": "<audio_soft_token>"})
    v = cfg.vision_config
    kw = dict(patch_size=v.patch_size, max_soft_tokens=70,
              pooling_kernel_size=v.pooling_kernel_size)
    kind = {"gemma4_unified": "Gemma4Unified"}.get(cfg.model_type, "Gemma4")
    # EmbeddingGemma 2's processor takes Gemma 4's feature extractor and
    # image processor beside a video processor of its own
    video = "EmbeddingGemma2" if cfg.model_type == "embedding_gemma2" else kind
    getattr(transformers, video + "Processor")(
        feature_extractor=getattr(transformers, kind + "AudioFeatureExtractor")(),
        image_processor=getattr(transformers, kind + "ImageProcessor")(**kw),
        video_processor=getattr(transformers, video + "VideoProcessor")(**kw),
        tokenizer=tok, image_seq_length=70).save_pretrained(out)


def cohere_compass_processor(out, cfg):
    """Writes a tokenizer and CohereCompassProcessor for the tiny vocabulary:
    word-level, its vision tokens as config.json's ids; 64x64 images (4x4
    patches of 16, merged 2x2: 4 image tokens)."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|VISION_START|>": cfg.vision_start_token_id,
               "<|VISION_END|>": cfg.vision_end_token_id,
               "<|IMAGE_PAD|>": cfg.image_token_id, "<|VIDEO_PAD|>": cfg.video_token_id}
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")
    v = cfg.vision_config
    kw = dict(patch_size=v.patch_size, temporal_patch_size=v.temporal_patch_size,
              merge_size=v.spatial_merge_size,
              size={"shortest_edge": 64 * 64, "longest_edge": 64 * 64})
    transformers.CohereCompassProcessor(
        image_processor=transformers.CohereCompassImageProcessor(**kw),
        video_processor=transformers.CohereCompassVideoProcessor(**kw),
        tokenizer=tok).save_pretrained(out)


def vision_tokenizer(cfg):
    """A word-level tokenizer for a Qwen-VL-style vision checkpoint: the
    four basic tokens, and the config's vision start, end, image and video
    token ids."""
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|vision_start|>": cfg.vision_start_token_id,
               "<|vision_end|>": cfg.vision_end_token_id,
               "<|image_pad|>": cfg.image_token_id,
               "<|video_pad|>": cfg.video_token_id}
    return word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")


def qwen3_vl_processor(out, cfg, processor="Qwen3VLProcessor",
                       video="Qwen3VLVideoProcessor"):
    """Writes a tokenizer and Qwen3VLProcessor for the tiny vocabulary: vLLM's
    Qwen3-VL processor (Qwen3.5 uses it) needs both to build the vision
    tower, and finds the image by the config's token ids.  Word-level; the
    image processor's pixel bounds make every image 56x56 (4x4 patches of
    14, merged 2x2: 4 image tokens)."""
    import transformers
    tok = vision_tokenizer(cfg)
    px = 56 * 56
    ip = transformers.Qwen2VLImageProcessor(
        size={"shortest_edge": px, "longest_edge": px}, patch_size=14,
        merge_size=2, temporal_patch_size=2)
    vp = getattr(transformers, video)(
        size={"shortest_edge": px, "longest_edge": 2 * px}, patch_size=14,
        merge_size=2, temporal_patch_size=2)
    getattr(transformers, processor)(image_processor=ip, tokenizer=tok,
                                     video_processor=vp).save_pretrained(out)


def released_qwen2_audio(out):
    """transformers 5.19 saves Qwen2-Audio's (and Audio Flamingo 3's and
    GLM-ASR's) text model under language_model.model.model.; the release
    (and vLLM) has it at language_model.model."""
    from ckpt_io import rename_prefix
    rename_prefix(out, "language_model.model.model.", "language_model.model.")


def released_qwen3_asr(out):
    """Qwen's Qwen3-ASR releases hold the model as its thinker: the text
    model under thinker.model., the head thinker.lm_head, the encoder
    thinker.audio_tower. with the projector inside (proj1, proj2), and
    config.json's audio_config, text_config and audio_token_id under
    thinker_config; transformers 5.19 saves its own conversion (the -hf
    repositories)."""
    from ckpt_io import rename_tensors, update_config
    ren = {"model.language_model.": "thinker.model.",
           "model.audio_tower.": "thinker.audio_tower.",
           "model.multi_modal_projector.linear_1.": "thinker.audio_tower.proj1.",
           "model.multi_modal_projector.linear_2.": "thinker.audio_tower.proj2.",
           "lm_head.": "thinker.lm_head."}

    def rename(k):
        old = next((o for o in ren if k.startswith(o)), None)
        return ren[old] + k[len(old):] if old else k

    def thinker(cfg):
        cfg["thinker_config"] = {k: cfg.pop(k) for k in
                                 ("audio_config", "text_config", "audio_token_id")}
    rename_tensors(out, rename)
    update_config(out, thinker)


def released_qwen3_omni(out):
    """Qwen's Qwen3-Omni releases carry the talker and code2wav beside the
    thinker (one stand-in tensor each here), and the vision tower's
    image_size and apply_vit_abs_pos_embed, which vLLM's tower reads and
    transformers' config class does not write."""
    import torch
    from ckpt_io import add_to_first_shard, update_config

    def vision(cfg):
        cfg["enable_audio_output"] = True
        cfg["thinker_config"]["vision_config"].update(image_size=56, apply_vit_abs_pos_embed=True)
    add_to_first_shard(out, {
        "talker.model.layers.0.mlp.gate.weight": torch.zeros(4, 64, dtype=torch.bfloat16),
        "code2wav.pre_transformer.norm.weight": torch.ones(64, dtype=torch.bfloat16)})
    update_config(out, vision)


def clef_head(out, cfg, dtype="bfloat16"):
    """Clef-Omni's joint schema head beside a Qwen3-Omni checkpoint (whose
    shards model.safetensors.index.json lists, as vLLM's loader needs:
    default_loader.py:240-254): joint_head_config.json, JointSchemaHead's
    arguments, which makes vLLM build ClefOmniForJointSchema
    (model_arch_config_convertor.py:650-670), and joint_head.safetensors,
    the head's own names, which vLLM reads under pooler.head.
    (clef_omni.py:424-432).  Cloudflare's reference head is in no library:
    the head is vLLM's own JointSchemaHead (plain torch modules, named as
    the reference's: clef_omni.py:86-222), tiny, perturbed, in BF16
    (or dtype)."""
    import json
    import os
    import torch
    from safetensors.torch import save_file
    from vllm.model_executor.models.clef_omni import JointSchemaHead
    head_cfg = {"hidden_size": cfg.thinker_config.text_config.hidden_size, "width": 32,
                "routing_layers": 1, "layers": 1, "heads": 4, "feedforward": 64}
    assert os.path.exists(os.path.join(out, "model.safetensors.index.json"))
    torch.manual_seed(4321)
    head = JointSchemaHead(**head_cfg)
    with torch.no_grad():
        for p in head.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    save_file({k: v.to(getattr(torch, dtype)).contiguous() for k, v in head.state_dict().items()},
              os.path.join(out, "joint_head.safetensors"))
    with open(os.path.join(out, "joint_head_config.json"), "w") as f:
        json.dump(head_cfg, f, indent=2)


def released_qwen2_5_omni(out):
    """Qwen's Qwen2.5-Omni releases carry the talker and token2wav beside
    the thinker (one stand-in tensor each here), and name the architecture
    Qwen2_5OmniModel."""
    import torch
    from ckpt_io import add_to_first_shard, update_config

    def audio_output(cfg):
        cfg["enable_audio_output"] = True
        cfg["architectures"] = ["Qwen2_5OmniModel"]
    add_to_first_shard(out, {
        "talker.model.norm.weight": torch.ones(64, dtype=torch.bfloat16),
        "token2wav.code2wav_dit_model.norm_out.weight": torch.ones(64, dtype=torch.bfloat16)})
    update_config(out, audio_output)


def omni_processor(out, tc):
    """Writes a word-level tokenizer with the image, video and audio tokens
    of Qwen3-Omni or Qwen2.5-Omni (named as its processor reads them) and
    that processor: 56x56 images (4 tokens), Whisper's feature extractor
    (128 mel bins)."""
    import transformers
    q25 = tc.model_type.startswith("qwen2_5")
    pads = ("<|IMAGE|>", "<|VIDEO|>", "<|AUDIO|>") if q25 else \
        ("<|image_pad|>", "<|video_pad|>", "<|audio_pad|>")
    marks = ("<|vision_bos|>", "<|vision_eos|>", "<|audio_bos|>", "<|audio_eos|>") if q25 else \
        ("<|vision_start|>", "<|vision_end|>", "<|audio_start|>", "<|audio_end|>")
    names = {k + "_token": (pad, getattr(tc, k + ("_token_index" if q25 else "_token_id")))
             for k, pad in zip(("image", "video", "audio"), pads)}
    names.update(zip(("vision_bos_token", "vision_eos_token", "audio_bos_token",
                      "audio_eos_token"),
                     zip(marks, (tc.vision_start_token_id, tc.vision_end_token_id,
                                 tc.audio_start_token_id, tc.audio_end_token_id))))
    processor = transformers.Qwen2_5OmniProcessor if q25 else transformers.Qwen3OmniMoeProcessor
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    special.update(names.values())
    tok = word_tokenizer(tc, special, "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={k: v[0] for k, v in names.items()})
    px = 56 * 56
    ip = transformers.Qwen2VLImageProcessor(
        size={"shortest_edge": px, "longest_edge": px}, patch_size=14,
        merge_size=2, temporal_patch_size=2)
    vp = transformers.Qwen2VLVideoProcessor(
        size={"shortest_edge": px, "longest_edge": 2 * px}, patch_size=14,
        merge_size=2, temporal_patch_size=2)
    processor(
        image_processor=ip, video_processor=vp, tokenizer=tok,
        feature_extractor=transformers.WhisperFeatureExtractor(feature_size=128)
    ).save_pretrained(out)


def minicpmv_processor(out, cfg):
    """Writes a word-level tokenizer with MiniCPM-V 4.6's (and 4.7's) image
    tokens (named as its processor reads them) and its processor: one 56x56
    slice an image, no image id, merged 16x into one image token."""
    import transformers
    names = {"image_token": ("<|image_pad|>", cfg.image_token_id),
             "video_token": ("<|video_pad|>", cfg.video_token_id),
             "image_start_token": ("<image>", 997), "image_end_token": ("</image>", 996),
             "slice_start_token": ("<slice>", 995), "slice_end_token": ("</slice>", 994),
             "image_id_start_token": ("<image_id>", 993),
             "image_id_end_token": ("</image_id>", 992)}
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    special.update(names.values())
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={k: v[0] for k, v in names.items()})
    kw = dict(scale_resolution=56, slice_mode=False, use_image_id=False)
    processor = transformers.MiniCPMV4_7Processor if cfg.model_type == "minicpmv4_7" \
        else transformers.MiniCPMV4_6Processor
    processor(
        image_processor=transformers.MiniCPMV4_6ImageProcessor(**kw),
        video_processor=transformers.MiniCPMV4_6VideoProcessor(),
        tokenizer=tok).save_pretrained(out)


def audio_processor(out, cfg):
    """Writes a word-level tokenizer with the audio tokens and the
    processor (Whisper's feature extractor, 128 mel bins) of Qwen2-Audio
    (<|AUDIO|> between <|audio_bos|> and <|audio_eos|>), Qwen3-ASR
    (<|audio_pad|> between <|audio_start|> and <|audio_end|>), GLM-ASR
    (<|pad|> between <|begin_of_audio|> and <|end_of_audio|>) or Audio
    Flamingo 3 (<sound>): vLLM replaces that token by the audio's frames;
    Whisper's (80 mel bins) takes the sound as its encoder's prompt."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    extra, mel = {}, 128
    if cfg.model_type == "qwen2_audio":
        special.update({"<|audio_bos|>": 997, "<|audio_eos|>": 996,
                        "<|AUDIO|>": cfg.audio_token_index})
        processor = transformers.Qwen2AudioProcessor
    elif cfg.model_type == "whisper":
        processor, mel = transformers.WhisperProcessor, 80
    elif cfg.model_type == "glmasr":
        special.update({"<|begin_of_audio|>": 997, "<|end_of_audio|>": 996,
                        "<|pad|>": cfg.audio_token_id})
        processor = transformers.GlmAsrProcessor
    elif cfg.model_type == "qwen3_asr":
        special.update({"<|audio_start|>": 997, "<|audio_end|>": 996,
                        "<|audio_pad|>": cfg.audio_token_id})
        extra = {"extra_special_tokens": {"audio_token": "<|audio_pad|>",
                                          "audio_bos_token": "<|audio_start|>",
                                          "audio_eos_token": "<|audio_end|>"}}
        processor = transformers.Qwen3ASRProcessor
    else:
        special["<sound>"] = cfg.audio_token_id
        processor = transformers.AudioFlamingo3Processor
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>", **extra)
    processor(feature_extractor=transformers.WhisperFeatureExtractor(feature_size=mel),
              tokenizer=tok).save_pretrained(out)


def granite_speech_processor(out, cfg):
    """Writes a word-level tokenizer with Granite Speech's <|audio|> at the
    config's audio_token_index and the release's feature extractor's
    settings (80 mel bins, stacked in pairs: encoder_config.input_dim 160),
    its class a stand-in named by auto_map (granite_speech_features.py,
    copied in: transformers' needs torchaudio, which the engine's venv
    lacks); vLLM expands <|audio|> to the projector's frames."""
    import json
    import os
    import shutil
    word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                         "<|audio|>": cfg.audio_token_index},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    here = os.path.dirname(os.path.realpath(__file__))
    shutil.copy(os.path.join(here, "granite_speech_features.py"), out)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump({"auto_map": {"AutoFeatureExtractor": "granite_speech_features."
                                "GraniteSpeechFeatureExtractorStandIn"},
                   "processor_class": "GraniteSpeechProcessor", "sampling_rate": 16000,
                   "n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 80,
                   "projector_window_size": cfg.window_size,
                   "projector_downsample_rate": cfg.downsample_rate}, f, indent=2)


def paddleocr_vl_processor(out, cfg):
    """Writes a word-level tokenizer (its image token named, as
    PaddleOCRVLProcessor reads it) and PaddleOCRVLProcessor for the tiny
    vocabulary; 56x56 images (4x4 patches of 14, merged 2x2: 4 tokens)."""
    import transformers
    special = {"<pad>": 0, "</s>": 1, "<s>": 2, "<unk>": 3,
               "<|IMAGE_START|>": cfg.vision_start_token_id,
               "<|IMAGE_END|>": cfg.vision_end_token_id,
               "<|IMAGE_PLACEHOLDER|>": cfg.image_token_id,
               "<|video_pad|>": cfg.video_token_id}
    tok = word_tokenizer(cfg, special, "<pad>", "</s>", "<s>", "<unk>",
                         extra_special_tokens={"image_token": "<|IMAGE_PLACEHOLDER|>"})
    px = 56 * 56
    transformers.PaddleOCRVLProcessor(
        image_processor=transformers.PaddleOCRVLImageProcessor(
            size={"shortest_edge": px, "longest_edge": px}),
        tokenizer=tok).save_pretrained(out)


def clip_processor(out, cfg):
    """Writes a word-level tokenizer and CLIPProcessor (SiglipProcessor) for
    the tiny vocabulary; 56x56 images.  vLLM's CLIP takes token 0 for an
    image's place holder and asserts that it is no special token."""
    import transformers
    special = {"<unk>": 4, "<pad>": 1, "<|startoftext|>": 2, "<|endoftext|>": 3}
    tok = word_tokenizer(cfg.text_config, special, "<pad>", "<|endoftext|>",
                         "<|startoftext|>", "<unk>")
    v = cfg.vision_config.image_size
    if cfg.model_type == "siglip":
        transformers.SiglipProcessor(
            image_processor=transformers.SiglipImageProcessor(size={"height": v, "width": v}),
            tokenizer=tok).save_pretrained(out)
        return
    transformers.CLIPProcessor(
        image_processor=transformers.CLIPImageProcessor(
            size={"shortest_edge": v}, crop_size={"height": v, "width": v}),
        tokenizer=tok).save_pretrained(out)


def blip2_processor(out, cfg):
    """Writes a word-level tokenizer (with BLIP-2's <image> token, which
    vLLM inserts num_query_tokens times at the prompt's start) and
    Blip2Processor for the tiny vocabulary; 56x56 images."""
    import transformers
    special = {"<pad>": 0, "</s>": 1, "<s>": 2, "<unk>": 3, "<image>": cfg.image_token_index}
    tok = word_tokenizer(cfg, special, "<pad>", "</s>", "<s>", "<unk>")
    transformers.Blip2Processor(
        image_processor=transformers.BlipImageProcessor(size={"height": 56, "width": 56}),
        tokenizer=tok, num_query_tokens=cfg.num_query_tokens).save_pretrained(out)


def exaone4_5_processor(out, cfg):
    """Writes a word-level tokenizer and EXAONE 4.5's processor (Qwen2-VL's
    image and video processors) for the tiny vocabulary: vLLM replaces
    <vision><|image_pad|></vision>.  56x56 images, 4 image tokens."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<vision>": 997, "</vision>": 996,
               "<|image_pad|>": cfg.image_token_id, "<|video_pad|>": cfg.video_token_id}
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")
    transformers.Exaone4_5_Processor(tokenizer=tok, **qwen2vl_processors()).save_pretrained(out)


def hunyuan_vl_processor(out, cfg):
    """Writes a word-level tokenizer (its image tokens named as HunYuan's
    tokenizers name them) and HunYuanVL's processor for the tiny model:
    images of 32x32 to 64x64 pixels, a 64x64 one 2x2 merged patches, a
    newline a row and its begin and end: 8 tokens."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<hy_place_holder_no_997>": cfg.im_start_id,
               "<hy_place_holder_no_996>": cfg.im_end_id,
               "<hy_place_holder_no_998>": cfg.im_newline_id,
               "<hy_place_holder_no_999>": cfg.image_token_id}
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={
                             "image_token": "<hy_place_holder_no_999>",
                             "image_start_token": "<hy_place_holder_no_997>",
                             "image_end_token": "<hy_place_holder_no_996>"})
    ip = transformers.HunYuanVLImageProcessor(size={"shortest_edge": 32 * 32,
                                                    "longest_edge": 64 * 64})
    transformers.HunYuanVLProcessor(image_processor=ip, tokenizer=tok).save_pretrained(out)


def emu3_processor(out, cfg):
    """Writes a word-level tokenizer (Emu3's image tokens named as its
    tokenizer names them, the visual tokens at config.json's
    vocabulary_map ids) and Emu3's processor for the tiny model: images of
    16x16 to 32x32 pixels, 8-pixel VQ tokens."""
    import transformers
    special = dict(cfg.vocabulary_map, **{"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3})
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={
                             "image_token": "<image>", "boi_token": "<|image start|>",
                             "eoi_token": "<|image end|>",
                             "image_wrapper_token": "<|image token|>",
                             "eof_token": "<|extra_201|>"})
    ip = transformers.Emu3ImageProcessor(min_pixels=16 * 16, max_pixels=32 * 32)
    transformers.Emu3Processor(image_processor=ip, tokenizer=tok).save_pretrained(out)


def vibevoice_asr_processor(out, cfg):
    """Writes a word-level tokenizer (VibeVoice-ASR's audio tokens named as
    its Qwen2 tokenizer names them, at config.json's ids) and transformers'
    VibeVoiceAsrProcessor with its feature extractor (24 kHz samples)."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|object_ref_start|>": cfg.audio_bos_token_id,
               "<|object_ref_end|>": cfg.audio_eos_token_id,
               "<|box_start|>": cfg.audio_token_id}
    tok = word_tokenizer(cfg.text_config, special, "<pad>", "<eos>", "<bos>", "<unk>")
    fe = transformers.VibeVoiceAcousticTokenizerFeatureExtractor()
    transformers.VibeVoiceAsrProcessor(feature_extractor=fe, tokenizer=tok).save_pretrained(out)


def qwen2vl_processors():
    """Qwen2-VL's image and video processors for 56x56 images (4 image
    tokens) and videos of two such frames, as processor keywords."""
    import transformers
    px = 56 * 56
    kw = dict(patch_size=14, merge_size=2, temporal_patch_size=2)
    return dict(image_processor=transformers.Qwen2VLImageProcessor(
                    size={"shortest_edge": px, "longest_edge": px}, **kw),
                video_processor=transformers.Qwen2VLVideoProcessor(
                    size={"shortest_edge": px, "longest_edge": 2 * px}, **kw))


def glm_tokenizer(cfg):
    """A word-level tokenizer for the tiny vocabulary with GLM-4.1V's image
    and video tokens, which vLLM's GLM processors find by their names."""
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|image|>": cfg.image_token_id, "<|video|>": cfg.video_token_id,
               "<|begin_of_image|>": cfg.image_start_token_id,
               "<|end_of_image|>": cfg.image_end_token_id,
               "<|begin_of_video|>": cfg.video_start_token_id,
               "<|end_of_video|>": cfg.video_end_token_id}
    return word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")


def glm4v_processor(out, cfg):
    """Writes glm_tokenizer and Glm4vProcessor: vLLM's GLM-4.1V processor
    needs both to build the tower.  56x56 images (4x4 patches of 14,
    merged 2x2: 4 image tokens)."""
    import transformers
    px = 56 * 56
    kw = dict(size={"shortest_edge": px, "longest_edge": px}, patch_size=14,
              merge_size=2, temporal_patch_size=2)
    transformers.Glm4vProcessor(
        image_processor=transformers.Glm4vImageProcessor(**kw), tokenizer=glm_tokenizer(cfg),
        video_processor=transformers.Glm4vVideoProcessor(**kw)).save_pretrained(out)


def jina_vl_release(out, cfg):
    """jina-reranker-m0's names (saved before transformers 4.52: model.*
    for the text model, visual.* for the tower) and its score head, a
    Linear of the text model's width with a bias, ReLU, and a Linear to one
    label with a bias (score.0, score.2), in BF16; config.json names
    JinaVLForRanking and one label (vLLM reads num_labels from the text
    config)."""
    import torch
    from ckpt_io import add_to_first_shard, rename_prefix, update_config
    rename_prefix(out, "model.language_model.", "model.")
    rename_prefix(out, "model.visual.", "visual.")
    h = cfg.get_text_config().hidden_size
    g = torch.Generator().manual_seed(11)
    add_to_first_shard(out, {
        "score.0.weight": (torch.randn(h, h, generator=g) * 0.05).to(torch.bfloat16),
        "score.0.bias": (torch.randn(h, generator=g) * 0.05).to(torch.bfloat16),
        "score.2.weight": (torch.randn(1, h, generator=g) * 0.05).to(torch.bfloat16),
        "score.2.bias": (torch.randn(1, generator=g) * 0.05).to(torch.bfloat16)})
    labels = {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}

    def fix(c):
        c.update(architectures=["JinaVLForRanking"], **labels)
        c.setdefault("text_config", {}).update(labels)
    update_config(out, fix)


def qwen2_rm(out, cfg):
    """Qwen2.5-Math-RM's form, which transformers has no class for: the
    Qwen2 decoder without its LM head and Qwen's score head, score.0 [H, H]
    and score.2 [1, H] with their biases (BF16, as released); config.json
    names the reward architecture."""
    import torch
    from ckpt_io import rewrite_shards, update_config
    H = cfg.hidden_size
    gen = torch.Generator().manual_seed(6)

    def rnd(*shape):
        return (torch.randn(*shape, generator=gen) * 0.05).to(torch.bfloat16)

    def shard(tensors):
        if tensors.pop("lm_head.weight", None) is not None:
            tensors.update({"score.0.weight": rnd(H, H), "score.0.bias": rnd(H),
                            "score.2.weight": rnd(1, H), "score.2.bias": rnd(1)})
    rewrite_shards(out, shard)
    update_config(out, lambda c: c.update(architectures=["Qwen2ForRewardModel"]))


def nomic_moe(out, cfg):
    """nomic-embed-text-v2-moe as nomic's code saves it, which transformers
    has no class for: the dense model's tensors given biases (qkv, out_proj,
    fc1, fc2), its SwiGLU MLPs replaced by GELU ones (fc1, fc2) and, in the
    layers n % moe_every_n_layers == 1, a MoE: router.layer [E, H], the
    experts' w1 and w2 [E*I, H] each (w2 stored as w1 is), and their bias
    [H]; config.json as the release's."""
    import torch
    from ckpt_io import rewrite_shards, update_config
    E, H, I = 4, cfg.hidden_size, cfg.intermediate_size
    gen = torch.Generator().manual_seed(5)

    def rnd(*shape):
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    def shard(tensors):
        for name in list(tensors):
            if ".mlp." in name:
                del tensors[name]
            elif name.endswith(("attn.Wqkv.weight", "attn.out_proj.weight")):
                tensors[name[:-len("weight")] + "bias"] = rnd(tensors[name].shape[0])
            if name.endswith(".norm2.weight"):
                p = name[:-len("norm2.weight")] + "mlp."
                if int(name.split(".")[2]) % 2 == 1:
                    tensors.update({p + "router.layer.weight": rnd(E, H),
                                    p + "experts.mlp.w1": rnd(E * I, H),
                                    p + "experts.mlp.w2": rnd(E * I, H),
                                    p + "experts.bias": rnd(H)})
                else:
                    tensors.update({p + "fc1.weight": rnd(I, H), p + "fc1.bias": rnd(I),
                                    p + "fc2.weight": rnd(H, I), p + "fc2.bias": rnd(H)})
    rewrite_shards(out, shard)
    update_config(out, lambda c: c.update(
        activation_function="gelu", hidden_act="gelu", qkv_proj_bias=True, mlp_fc1_bias=True,
        mlp_fc2_bias=True, moe_every_n_layers=2, num_experts=E, moe_top_k=2))


def released_muse_glimmer(out, cfg):
    """config.json as vLLM 0.32's MuseGlimmerConfig reads the tower's
    sizes (output_dim, adapter_dim, merge_kernel_size, which transformers
    calls out_hidden_size, projector_hidden_size and merge_size), and a
    tokenizer with the image and video tokens vLLM's Muse Glimmer
    processor looks up by name."""
    from ckpt_io import update_config

    def config(c):
        c["vision_config"].update(output_dim=c["out_hidden_size"],
                                  adapter_dim=c["projector_hidden_size"],
                                  merge_kernel_size=c["vision_config"]["merge_size"])
    update_config(out, config)
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|patch|>": cfg.image_token_id, "<|video|>": cfg.video_token_id,
               "<|image|>": 997, "<|image_start|>": 996, "<|image_end|>": 995,
               "<|vid_start|>": 994, "<|vid_end|>": 993, "<|vid_frame_separator|>": 992}
    word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def released_hcx_vision_v2(out, cfg):
    """The names vLLM 0.32 reads through hf_to_vllm_mapper (its model.
    prefix dropped), as HyperCLOVA X SEED Think's remote code names them:
    the text model's own model. under model.language_model. (transformers
    5.19 drops it on loading, PrefixChange in conversion_mapping.py, and
    does not put it back on saving; it does write lm_head as
    model.language_model.lm_head), the projector model.mm_projector
    (vLLM's module; transformers writes model.vision_projector);
    architectures vLLM's name."""
    from ckpt_io import rename_tensors, update_config

    def rename(name):
        if name.startswith("model.language_model.lm_head."):
            return name
        for old, new in (("model.language_model.", "model.language_model.model."),
                         ("model.vision_projector.", "model.mm_projector.")):
            if name.startswith(old):
                return new + name[len(old):]
        return name
    rename_tensors(out, rename)
    update_config(out, lambda c: c.update(architectures=["HCXVisionV2ForCausalLM"]))
    # vLLM's processor needs a tokenizer (it encodes its image and video
    # markers by text) and transformers' processor even where no image is
    # given; the pads named as vLLM writes them (the tokenizer's
    # image_token and video_token, which the processor expands)
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|IMAGE_PAD|>": cfg.image_token_id, "<|VIDEO_PAD|>": cfg.video_token_id,
               "<|image_start|>": 997, "<|image_end|>": 996, "<|video_start|>": 995,
               "<|video_end|>": 994}
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={"image_token": "<|IMAGE_PAD|>",
                                               "video_token": "<|VIDEO_PAD|>"})
    transformers.HyperCLOVAXVisionV2Processor(tokenizer=tok, **qwen2vl_processors()).save_pretrained(out)


# configuration_opencua.py as the OpenCUA releases ship it, less what
# loading does not read: the model's two sub-configs and its image pad
OPENCUA_CONFIG_PY = """from transformers.configuration_utils import PretrainedConfig
from transformers.models.qwen2.configuration_qwen2 import Qwen2Config
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig


class OpenCUAConfig(PretrainedConfig):
    model_type = "opencua"
    sub_configs = {"text_config": Qwen2Config, "vision_config": Qwen2_5_VLVisionConfig}

    def __init__(self, vision_config=None, text_config=None, ignore_index=-100,
                 media_placeholder_token_id=151664, pad_token_id=0, **kwargs):
        if isinstance(vision_config, dict):
            vision_config = Qwen2_5_VLVisionConfig(**vision_config)
        elif vision_config is None:
            vision_config = Qwen2_5_VLVisionConfig()
        if isinstance(text_config, dict):
            text_config = Qwen2Config(**text_config)
        elif text_config is None:
            text_config = Qwen2Config()
        self.vision_config = vision_config
        self.text_config = text_config
        self.ignore_index = ignore_index
        self.media_placeholder_token_id = media_placeholder_token_id
        super().__init__(pad_token_id=pad_token_id, **kwargs)
"""


def released_opencua(out, cfg):
    """OpenCUA as xlangai releases it (remote code): the tower under
    vision_tower., the Qwen2 text model under language_model.model. and
    its head language_model.lm_head (transformers 5.19 writes Qwen2.5-VL's
    as visual., model. and lm_head); config.json
    OpenCUAConfig's, text_config a Qwen2 config with 1-D RoPE (no
    mrope_section), media_placeholder_token_id the image pad; Qwen2.5-VL's
    image processor and a tokenizer beside it, which vLLM's OpenCUA
    processor reads."""
    import json
    import os
    from ckpt_io import rename_prefixes, write_release_config
    rename_prefixes(out, (("model.visual.", "vision_tower."), ("visual.", "vision_tower."),
                          ("model.language_model.", "language_model.model."),
                          ("model.", "language_model.model."),
                          ("lm_head.", "language_model.lm_head.")))
    qwen3_vl_processor(out, cfg, "Qwen2_5_VLProcessor", "Qwen2VLVideoProcessor")
    c = json.load(open(os.path.join(out, "config.json")))
    text = dict(c["text_config"], model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    text.pop("rope_scaling", None)
    text["rope_parameters"] = {"rope_type": "default",
                               "rope_theta": text["rope_parameters"]["rope_theta"]}
    vision = {k: v for k, v in c["vision_config"].items() if k != "architectures"}
    write_release_config(out, {
        "architectures": ["OpenCUAForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_opencua.OpenCUAConfig"},
        "model_type": "opencua", "dtype": c.get("dtype", c.get("torch_dtype")),
        "media_placeholder_token_id": cfg.image_token_id,
        "tie_word_embeddings": c.get("tie_word_embeddings", False),
        "text_config": text, "vision_config": vision},
        {"configuration_opencua.py": OPENCUA_CONFIG_PY})


# configuration_bee.py as Bee's release ships it, less what loading does
# not read: LLaVA-OneVision's config under its own model type
BEE_CONFIG_PY = """from transformers import LlavaOnevisionConfig


class BeeConfig(LlavaOnevisionConfig):
    model_type = "bee"
"""


def released_bee(out, cfg):
    """Bee as Open-Bee releases it (remote code): LLaVA-OneVision's names as
    transformers 4.55 to 4.57 write them (5.19 writes the older ones,
    language_model.model., vision_tower.X, ...): model.language_model.,
    model.vision_tower.vision_model., model.multi_modal_projector.,
    model.image_newline, lm_head; Bee's projector in place of LLaVA's:
    pre_norm (a LayerNorm over the tower's width), linear_1 to four times
    the text width, GELU, linear_2 back (random, seeded); config.json
    BeeConfig's (model_type bee), LLaVA-OneVision's processor and a
    tokenizer beside it."""
    onevision_release(out, cfg, 11, 4, "BeeForConditionalGeneration", "bee",
                      "configuration_bee.BeeConfig", BEE_CONFIG_PY)


def onevision_release(out, cfg, seed, wide, architecture, model_type, config_class,
                      config_py):
    """Rewrites the LLaVA-OneVision checkpoint saved in out as a release
    of a derivative with a projector of its own (Bee, R-4B): the names
    transformers 4.52 and later write, a projector of pre_norm, linear_1
    from the tower's width to wide times the text width and linear_2 back
    (random, from seed), config.json under model_type with architecture
    and config_class (MODULE.CLASS) in auto_map, config_py its module."""
    import json
    import os

    import torch
    from ckpt_io import rename_prefixes, rewrite_shards, update_config, write_release_config
    rename_prefixes(out, (("language_model.model.", "model.language_model."),
                          ("language_model.lm_head.", "lm_head."),
                          ("vision_tower.", "model.vision_tower.vision_model."),
                          ("multi_modal_projector.", "model.multi_modal_projector."),
                          ("image_newline", "model.image_newline")))
    h, v = cfg.text_config.hidden_size, cfg.vision_config.hidden_size
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    proj = {"pre_norm.weight": (1 + rand(v)).to(torch.bfloat16), "pre_norm.bias": rand(v),
            "linear_1.weight": rand(wide * h, v), "linear_1.bias": rand(wide * h),
            "linear_2.weight": rand(h, wide * h), "linear_2.bias": rand(h)}

    def shard(tensors):
        pre = "model.multi_modal_projector."
        if any(n.startswith(pre) for n in tensors):
            for n in [n for n in tensors if n.startswith(pre)]:
                del tensors[n]
            tensors.update({pre + k: t for k, t in proj.items()})
    rewrite_shards(out, shard)
    llava_processor(out, cfg)
    update_config(out, lambda c: c.update(
        architectures=[architecture], model_type=model_type,
        auto_map={"AutoConfig": config_class}))
    write_release_config(out, json.load(open(os.path.join(out, "config.json"))),
                         {config_class.split(".")[0] + ".py": config_py})


def text_release(out, architecture, prefixes, hoist=True):
    """A multimodal checkpoint's text model as its text-only release has
    it: the tensors whose names begin with a key of prefixes, that key
    replaced by its value, and no others (the towers and projectors);
    config.json the text_config's keys at the top (hoist) or the
    multimodal config as it is, architectures [architecture]; shards left
    empty are removed."""
    import glob
    import json
    import os
    from ckpt_io import rewrite_shards

    def shard(tensors):
        for name in list(tensors):
            tensor = tensors.pop(name)
            for old, new in prefixes.items():
                if name.startswith(old):
                    tensors[new + name[len(old):]] = tensor
                    break
    rewrite_shards(out, shard)
    kept = set(json.load(open(os.path.join(out, "model.safetensors.index.json")))[
        "weight_map"].values())
    for path in glob.glob(os.path.join(out, "*.safetensors")):
        if os.path.basename(path) not in kept:
            os.remove(path)
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    if not hoist:
        c["architectures"] = [architecture]
        with open(path, "w") as f:
            json.dump(c, f, indent=2)
        return
    text = dict(c["text_config"], architectures=[architecture])
    for key in ("dtype", "transformers_version"):
        if key in c:
            text[key] = c[key]
    with open(path, "w") as f:
        json.dump(text, f, indent=2)


def glm5_next_processor(out, cfg):
    """Writes glm_tokenizer and Glm5NextProcessor (images of 56x56, 4x4
    patches of 14 merged 2x2: 4 tokens)."""
    import transformers
    kw = dict(patch_size=14, merge_size=2, temporal_patch_size=2, min_image_tokens=4,
              max_image_tokens=16)
    transformers.Glm5NextProcessor(
        image_processor=transformers.Glm5NextImageProcessor(**kw), tokenizer=glm_tokenizer(cfg),
        video_processor=transformers.Glm5NextVideoProcessor(**kw)).save_pretrained(out)


def granite4_vision_processor(out, cfg):
    """Writes a word-level tokenizer and Granite4VisionProcessor (LLaVA-NeXT's
    image processor, one 56x56 grid cell) for the tiny vocabulary."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<image>": cfg.image_token_index}
    tok = word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>")
    v = cfg.vision_config
    transformers.Granite4VisionProcessor(
        image_processor=transformers.LlavaNextImageProcessor(
            image_grid_pinpoints=cfg.image_grid_pinpoints,
            size={"shortest_edge": v.image_size},
            crop_size={"height": v.image_size, "width": v.image_size}),
        tokenizer=tok, patch_size=v.patch_size,
        vision_feature_select_strategy=cfg.vision_feature_select_strategy,
        downsample_rate=cfg.downsample_rate).save_pretrained(out)


def llava_processor(out, cfg):
    """Writes a word-level tokenizer and LlavaProcessor (LLaVA-NeXT's, with
    its grid, for llava_next) for the tiny vocabulary: vLLM's LLaVA
    processor needs both to build the tower.  The CLIP processor makes
    every image 56x56 (16 patches and the class token, which the default
    feature selection drops)."""
    import transformers
    special = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3,
               "<image>": cfg.image_token_index}
    if hasattr(cfg, "video_token_index"):
        special["<video>"] = cfg.video_token_index
    tok = word_tokenizer(cfg, special, "<pad>", "</s>", "<s>", "<unk>")
    v = cfg.vision_config
    kw = dict(size={"shortest_edge": v.image_size},
              crop_size={"height": v.image_size, "width": v.image_size})
    if cfg.model_type == "llava_next_video":
        transformers.LlavaNextVideoProcessor(
            image_processor=transformers.LlavaNextImageProcessor(
                image_grid_pinpoints=cfg.image_grid_pinpoints, **kw),
            video_processor=transformers.LlavaNextVideoVideoProcessor(**kw),
            tokenizer=tok, patch_size=v.patch_size,
            vision_feature_select_strategy=cfg.vision_feature_select_strategy,
            image_token="<image>", video_token="<video>",
            num_additional_image_tokens=1).save_pretrained(out)
        return
    if hasattr(cfg, "video_token_index"):
        kw = dict(size={"height": v.image_size, "width": v.image_size})
        transformers.LlavaOnevisionProcessor(
            image_processor=transformers.LlavaOnevisionImageProcessor(
                image_grid_pinpoints=cfg.image_grid_pinpoints, **kw),
            video_processor=transformers.LlavaOnevisionVideoProcessor(**kw),
            tokenizer=tok, num_image_tokens=(v.image_size // v.patch_size) ** 2,
            vision_feature_select_strategy=cfg.vision_feature_select_strategy,
            image_token="<image>", video_token="<video>").save_pretrained(out)
        return
    if hasattr(cfg, "image_grid_pinpoints"):
        ip = transformers.LlavaNextImageProcessor(
            image_grid_pinpoints=cfg.image_grid_pinpoints, **kw)
        proc = transformers.LlavaNextProcessor
    elif v.model_type == "siglip_vision_model":  # no class token
        ip = transformers.SiglipImageProcessor(
            size={"height": v.image_size, "width": v.image_size})
        proc = transformers.LlavaProcessor
    else:
        ip = transformers.CLIPImageProcessor(**kw)
        proc = transformers.LlavaProcessor
    proc(
        image_processor=ip, tokenizer=tok, patch_size=v.patch_size,
        vision_feature_select_strategy=cfg.vision_feature_select_strategy,
        image_token="<image>",
        num_additional_image_tokens=int(v.model_type == "clip_vision_model")
    ).save_pretrained(out)


def paligemma_processor(out, cfg):
    """Writes a word-level tokenizer (bos added, as PaliGemma's; the newline
    that ends its prompts a token) and PaliGemmaProcessor for the tiny
    vocabulary: vLLM's PaliGemma processor inserts the image tokens and a
    bos after the prompt's bos.  The
    processor adds its 1,152 location and segmentation tokens past the
    vocabulary; no prompt uses them."""
    import transformers
    tok = word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                               "\n": 4, "<image>": cfg.image_token_index},
                         "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={"image_token": "<image>"})
    tok.add_bos_token = True
    size = cfg.vision_config.image_size
    transformers.PaliGemmaProcessor(
        image_processor=transformers.SiglipImageProcessor(
            size={"height": size, "width": size}, image_seq_length=16),
        tokenizer=tok).save_pretrained(out)


def lfm2_vl_processor(out, cfg):
    """Writes a word-level tokenizer holding LFM2-VL's image tokens and
    Lfm2VlProcessor for the tiny vocabulary: images not split into tiles, at
    most 64 patches of 16 (the tower's positions), 4 to 16 image tokens."""
    import transformers
    tok = word_tokenizer(cfg, {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3,
                               "<|img_thumbnail|>": 996, "<|image_end|>": 997,
                               "<|image_start|>": 998, "<image>": cfg.image_token_id},
                         "<pad>", "<eos>", "<bos>", "<unk>")
    ip = transformers.Lfm2VlImageProcessor(
        do_image_splitting=False, min_image_tokens=4, max_image_tokens=16,
        encoder_patch_size=16, tile_size=64, size={"height": 64, "width": 64},
        downsample_factor=2)
    transformers.Lfm2VlProcessor(image_processor=ip, tokenizer=tok).save_pretrained(out)


def idefics3_processor(out, cfg, smol=False):
    """Writes a word-level tokenizer holding Idefics3's image tokens and
    Idefics3Processor (smol: SmolVLMProcessor, with its video processor)
    for the tiny vocabulary (which would add them past it otherwise): one
    56x56 tile an image, no splitting, so that vLLM expands the image token
    into <fake_token_around_image><global-img>, the image's 4 tokens and
    <fake_token_around_image>."""
    import transformers
    tok = word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                               "\n": 4, "<fake_token_around_image>": 996,
                               "<global-img>": 997, "<end_of_utterance>": 998,
                               "<image>": cfg.image_token_id},
                         "<pad>", "<eos>", "<bos>", "<unk>")
    size = {"longest_edge": cfg.vision_config.image_size}
    seq = (cfg.vision_config.image_size // cfg.vision_config.patch_size) ** 2 // \
        cfg.scale_factor ** 2
    kind = "SmolVLM" if smol else "Idefics3"
    ip = getattr(transformers, kind + "ImageProcessor")(
        size=size, max_image_size=size, do_image_splitting=False)
    more = {"video_processor": transformers.SmolVLMVideoProcessor(
        size=size, max_image_size=size)} if smol else {}
    getattr(transformers, kind + "Processor")(image_processor=ip, tokenizer=tok,
                                             image_seq_len=seq, **more).save_pretrained(out)


def aria_processor(out, cfg):
    """Writes a word-level tokenizer holding Aria's image tokens and
    AriaProcessor for the tiny vocabulary: one image, not split, resized
    to 980x980 (the processor's default wins over its image processor's),
    4900 patches and 256 image tokens, which vLLM puts at <|img|> between
    <|fim_prefix|> and <|fim_suffix|>."""
    import transformers
    tok = word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                               "<|fim_prefix|>": 997, "<|fim_suffix|>": 996,
                               "<|img|>": cfg.image_token_index},
                         "<pad>", "<eos>", "<bos>", "<unk>",
                         extra_special_tokens={"image_token": "<|img|>"})
    ip = transformers.AriaImageProcessor(max_image_size=490, min_image_size=490,
                                         split_image=False)
    transformers.AriaProcessor(image_processor=ip, tokenizer=tok,
                               size_conversion={490: 128, 980: 256}).save_pretrained(out)


def internvl_processor(out, cfg):
    """Writes a word-level tokenizer and InternVLProcessor for the tiny
    vocabulary: vLLM's InternVL processor needs both, and finds the image
    tokens by the tokenizer's named special tokens.  One 56x56 tile an
    image (no thumbnail), 4 image tokens.  The original layout's
    processor (vLLM's own, for Qianfan-OCR) replaces an <image> token."""
    import transformers
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<IMG_CONTEXT>": cfg.image_token_id,
               "<video>": 995, "<image>": 994}
    tok = word_tokenizer(
        cfg, special, "<pad>", "<eos>", "<bos>", "<unk>",
        extra_special_tokens={"start_image_token": "<img>", "end_image_token": "</img>",
                              "context_image_token": "<IMG_CONTEXT>",
                              "video_token": "<video>"})
    ip = transformers.GotOcr2ImageProcessor(
        size={"height": 56, "width": 56}, crop_to_patches=False, max_patches=1)
    vp = transformers.InternVLVideoProcessor(size={"height": 56, "width": 56})
    transformers.InternVLProcessor(image_processor=ip, tokenizer=tok, video_processor=vp,
                                   image_seq_length=cfg.image_seq_length).save_pretrained(out)


def tf452_names(out):
    """Renames a Qwen2.5-VL's, LLaVA's or Gemma 3's tensors from their releases' names
    to those transformers 4.52 to 4.57 save (vLLM reads both)."""
    from ckpt_io import rename_prefixes
    rename_prefixes(out, (("language_model.model.", "model.language_model."),
                          ("language_model.lm_head.", "lm_head."),
                          ("vision_tower.", "model.vision_tower."),
                          ("multi_modal_projector.", "model.multi_modal_projector."),
                          ("model.", "model.language_model."), ("visual.", "model.visual.")))


def released_qianfan_ocr(out):
    """transformers 5.19 saves Qianfan-OCR by reversing its conversion map,
    whose "encoder.layers." to "layers." renaming (the tower's) then also
    moves the text model's layers under language_model.model.encoder.; the
    release (and vLLM) has them at language_model.model.layers.  Its
    config writes the tower's image and patch sizes as pairs, the
    release's (which vLLM's own config class reads) as integers."""
    from ckpt_io import rename_prefix, update_config

    def integers(cfg):
        for k in ("image_size", "patch_size"):
            cfg["vision_config"][k] = cfg["vision_config"][k][0]
    rename_prefix(out, "language_model.model.encoder.layers.", "language_model.model.layers.")
    update_config(out, integers)


def cohere2_vision_processor(out, cfg):
    """Writes a word-level tokenizer and Cohere2VisionProcessor for the tiny
    vocabulary: vLLM's processor needs both, and lays out each image by the
    tokenizer's named image tokens.  One 64x64 tile an image."""
    import transformers
    special = {"<PAD>": 0, "<EOS_TOKEN>": 1, "<BOS_TOKEN>": 2, "<UNK>": 3,
               "<|START_OF_IMG|>": 997, "<|END_OF_IMG|>": 996,
               "<|IMG_PATCH|>": cfg.image_token_id, "<|IMG_LINE_BREAK|>": 995}
    tok = word_tokenizer(
        cfg, special, "<PAD>", "<EOS_TOKEN>", "<BOS_TOKEN>", "<UNK>",
        extra_special_tokens={"boi_token": "<|START_OF_IMG|>",
                              "eoi_token": "<|END_OF_IMG|>",
                              "image_token": "<|IMG_PATCH|>",
                              "img_line_break_token": "<|IMG_LINE_BREAK|>"})
    v = cfg.vision_config
    # its patch_size counts a tile's image tokens a side (vLLM: patch_size**2
    # a tile): the tower's patches, downsampled
    ip = transformers.Cohere2VisionImageProcessor(
        size={"height": v.image_size, "width": v.image_size},
        patch_size=v.image_size // v.patch_size // cfg.downsample_factor,
        crop_to_patches=False, max_patches=1)
    transformers.Cohere2VisionProcessor(image_processor=ip, tokenizer=tok).save_pretrained(out)


def pixtral_processor(out, cfg):
    """Writes a word-level tokenizer and PixtralProcessor for the tiny
    vocabulary: vLLM's Mistral 3 processor needs both to build the vision
    tower, and lays out each image as rows of [IMG] tokens ended by
    [IMG_BREAK], the last by [IMG_END] (ids 10-12, as Mistral's)."""
    import transformers
    special = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3,
               "[IMG]": cfg.image_token_index, "[IMG_BREAK]": 11, "[IMG_END]": 12}
    tok = word_tokenizer(cfg, special, "<pad>", "</s>", "<s>", "<unk>")
    v = cfg.vision_config
    ip = transformers.PixtralImageProcessor(
        size={"longest_edge": v.image_size}, patch_size=v.patch_size)
    transformers.PixtralProcessor(
        image_processor=ip, tokenizer=tok, patch_size=v.patch_size,
        spatial_merge_size=getattr(cfg, "spatial_merge_size", 1), image_token="[IMG]",
        image_break_token="[IMG_BREAK]", image_end_token="[IMG_END]").save_pretrained(out)


def llama4_processor(out, cfg):
    """Writes a word-level tokenizer and Llama4Processor for the tiny
    vocabulary: vLLM's Llama 4 processor needs both ("Mllama4MultiModalProcessor
    requires a tokenizer"), and encodes each image's patch, tile and
    start/end tokens by text.  One tile an image (max_patches 1)."""
    import transformers
    from tokenizers import AddedToken
    special = {"<pad>": 0, "<|begin_of_text|>": 1, "<|eot|>": 2, "<unk>": 3,
               "<|patch|>": 993, "<|tile_x_separator|>": 994,
               "<|tile_y_separator|>": 995,
               "<|image_start|>": cfg.boi_token_index,
               "<|image_end|>": cfg.eoi_token_index,
               "<|image|>": cfg.image_token_index}
    tk = word_level(cfg, special)
    tk.add_special_tokens([AddedToken(t, normalized=False) for t in special])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<|eot|>",
        bos_token="<|begin_of_text|>", unk_token="<unk>")
    size = cfg.vision_config.image_size
    ip = transformers.Llama4ImageProcessor(size={"height": size, "width": size},
                                           max_patches=1)
    transformers.Llama4Processor(image_processor=ip, tokenizer=tok,
                                 patch_size=cfg.vision_config.patch_size,
                                 pixel_shuffle_ratio=cfg.vision_config.pixel_shuffle_ratio
                                 ).save_pretrained(out)


def released_kimi_k25(out):
    """Renames what transformers 5.19's Kimi_K25ForConditionalGeneration
    saves to the names of Moonshot's Kimi-K2.5 checkpoint, the ones vLLM
    0.32's kimi_k25.py loads: its save_pretrained reverses the load-time
    "blocks" -> "layers" rename onto the text model too
    (language_model.model.blocks.N), and leaves the projector's norm and the
    patch embedding under transformers' own prefixes.  The architecture is
    the published KimiK25ForConditionalGeneration."""
    from ckpt_io import rewrite_shards, update_config
    renames = (("language_model.model.blocks.", "language_model.model.layers."),
               ("model.mm_projector.", "mm_projector."),
               ("vision_tower.encoder.patch_embed.", "vision_tower.patch_embed."))

    def rename(n):
        for a, b in renames:
            if n.startswith(a):
                return b + n[len(a):]
        return n

    def shard(t):
        for k in list(t):
            t[rename(k)] = t.pop(k)
    rewrite_shards(out, shard)

    def cfg(c):
        c["architectures"] = ["KimiK25ForConditionalGeneration"]
    update_config(out, cfg)


def int4_experts(out):
    """Quantizes the routed experts' weights as Moonshot ships Kimi-K2.5:
    compressed-tensors pack-quantized INT4, symmetric, one BF16 scale per
    32 input columns (each group's largest magnitude over 7.5, minmax as
    compressed-tensors computes it), eight values an I32 word, and the
    whole weight's [out, in] as I32 weight_shape; everything else stays
    BF16, as the published quantization_config's ignore list says (and
    vLLM never quantizes the tower under compressed-tensors)."""
    import torch
    from ckpt_io import rewrite_shards, update_config
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    q = {"quant_method": "compressed-tensors", "format": "pack-quantized",
         "quantization_status": "compressed", "kv_cache_scheme": None,
         "config_groups": {"group_0": {
             "targets": ["Linear"], "input_activations": None,
             "output_activations": None,
             "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                         "strategy": "group", "group_size": 32, "dynamic": False,
                         "actorder": None, "observer": "minmax",
                         "block_structure": None, "observer_kwargs": {}}}},
         "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                    "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]}

    def shard(t):
        for k in [k for k in t if ".mlp.experts." in k and k.endswith("_proj.weight")]:
            w = t.pop(k).float()
            out_, in_ = w.shape
            g = w.reshape(out_, in_ // 32, 32)
            scale = (g.abs().amax(dim=2) / 7.5).clamp(min=1e-8).to(torch.bfloat16)
            qv = torch.round(g / scale.float().unsqueeze(2)).clamp(-8, 7)
            base = k[:-len("weight")]
            t[base + "weight_packed"] = pack_to_int32(
                qv.reshape(out_, in_).to(torch.int8), 4).contiguous()
            t[base + "weight_scale"] = scale.contiguous()
            t[base + "weight_shape"] = torch.tensor([out_, in_], dtype=torch.int32)
    rewrite_shards(out, shard)

    def cfg(c):
        c["quantization_config"] = q
        c["text_config"]["quantization_config"] = q
    update_config(out, cfg)


def kimi_k25_processor(out, cfg):
    """Writes a word-level tokenizer with Kimi's media tokens and the
    preprocessor_config.json (media_proc_cfg) vLLM's Kimi-K2.5 processor
    reads: it needs both to build the vision tower.  An image is at most
    8x8 patches of 14 (4x4 merged: 16 tokens)."""
    import transformers
    from tokenizers import AddedToken
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<|media_begin|>": cfg.vision_start_token_id,
               "<|media_end|>": cfg.vision_end_token_id,
               "<|media_content|>": 995,
               "<|media_pad|>": cfg.image_token_id,
               "<|kimi_k25_video_placeholder|>": cfg.video_token_id}
    tk = word_level(cfg, special)
    tk.add_special_tokens([AddedToken(t, normalized=False)
                           for t in special if t.startswith("<|")])
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>",
        bos_token="<bos>", unk_token="<unk>").save_pretrained(out)
    kimi_media_config(out)


def kimi_media_config(out):
    """Writes OUT/preprocessor_config.json, the media_proc_cfg that vLLM's
    Kimi-K2.5 and K3 processors read (KimiK25FusedVisionProcessor): an
    image at most 8x8 patches of 14, merged 2x2."""
    import json
    import os
    media = {"patch_size": 14, "merge_kernel_size": 2,
             "temporal_merge_kernel_size": 4, "in_patch_limit": 64,
             "patch_limit_on_one_side": 8, "in_patch_limit_each_frame": 64,
             "in_patch_limit_video": None, "fixed_output_tokens": None,
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
             "sample_fps": 2.0, "timestamp_mode": "hh:mm:ss.fff"}
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump({"media_proc_cfg": media}, f, indent=2)


LLAMA_ALIASES = {"llama-internlm3": "InternLM3ForCausalLM",
                 "llama-iquestcoder": "IQuestCoderForCausalLM",
                 "llama-telechat3": "TeleChat3ForCausalLM", "llama-legacy": "LLaMAForCausalLM",
                 "llama-teleflm": "TeleFLMForCausalLM", "qwen2-mimo": "MiMoForCausalLM",
                 "stablelm-orion": "OrionForCausalLM", "llama-solar": "SolarForCausalLM"}


# Families whose built-in rules scripts/learn-rules learned from vLLM: case
# -> architecture.  Their checkpoints are the learner's own (its small
# config of the class), the one the rules were learned and proven on.
LEARNED = {"cohere": "CohereForCausalLM", "ernie4_5": "Ernie4_5ForCausalLM",
           "exaone4": "Exaone4ForCausalLM", "glm4": "Glm4ForCausalLM",
           "hunyuan_dense": "HunYuanDenseV1ForCausalLM",
           "hunyuan_moe": "HunYuanMoEV1ForCausalLM",
           "granite": "GraniteForCausalLM", "cwm": "CwmForCausalLM",
           "ministral3": "Ministral3ForCausalLM", "smollm3": "SmolLM3ForCausalLM",
           "olmo2": "Olmo2ForCausalLM", "olmo3": "Olmo3ForCausalLM",
           "gpt_neox": "GPTNeoXForCausalLM", "granitemoe": "GraniteMoeForCausalLM",
           "nemotron": "NemotronForCausalLM", "olmoe": "OlmoeForCausalLM",
           "seed_oss": "SeedOssForCausalLM", "starcoder2": "Starcoder2ForCausalLM",
           # Phi-2 (vLLM: its Transformers backend, lm_head with a bias)
           "phi": "PhiForCausalLM",
           "cohere2": "Cohere2ForCausalLM", "ernie4_5_moe": "Ernie4_5_MoeForCausalLM",
           "glm": "GlmForCausalLM", "glm4_moe_lite": "Glm4MoeLiteForCausalLM",
           # GLM-4.7-Flash with an MTP layer that ships no embed_tokens or
           # shared_head.head (add_mtp_layer own_head=False)
           "glm4_moe_lite-nohead": "Glm4MoeLiteForCausalLM",
           # ... with two such MTP layers (add_mtp_layer nextn=2)
           "glm4_moe_lite-nohead2": "Glm4MoeLiteForCausalLM",
           "apertus": "ApertusForCausalLM", "exaone_moe": "ExaoneMoeForCausalLM",
           "afmoe": "AfmoeForCausalLM", "jais2": "Jais2ForCausalLM",
           "opt": "OPTForCausalLM", "gptj": "GPTJForCausalLM",
           "hyperclovax": "HyperCLOVAXForCausalLM", "olmo": "OlmoForCausalLM",
           "mellum": "MellumForCausalLM", "vaultgemma": "VaultGemmaForCausalLM",
           "arcee": "ArceeForCausalLM", "flex_olmo": "FlexOlmoForCausalLM",
           "nemotron_h": "NemotronHForCausalLM",
           "granitemoehybrid": "GraniteMoeHybridForCausalLM",
           "falcon_h1": "FalconH1ForCausalLM", "mamba2": "Mamba2ForCausalLM",
           "mamba": "MambaForCausalLM", "falcon_mamba": "FalconMambaForCausalLM",
           # Kimi Linear: a KDA layer with a dense MLP, then an MLA layer
           # with experts 512 wide (256 a rank at tp 2, not padded)
           "kimi_linear": ("KimiLinearForCausalLM", {"moe_intermediate_size": 512}),
           # experts 128 wide: 64 a rank at tp 2, which vLLM pads to 256
           "kimi_linear-pad": ("KimiLinearForCausalLM", {"moe_intermediate_size": 128}),
           "lfm2": "Lfm2ForCausalLM", "lfm2_moe": "Lfm2MoeForCausalLM",
           "hy_v3": "HYV3ForCausalLM",
           "minicpm3": "MiniCPM3ForCausalLM",
           # MiMo-V2-Flash with one kv head in its full-attention layer, two
           # in its sliding-window one: at tp 2 the first is whole on both
           # ranks, the second cut
           "mimo_v2_flash": ("MiMoV2FlashForCausalLM", {"num_key_value_heads": 1}),
           # q/k/v stored by kv-head group: Bloom's a group a head, Falcon-7B's
           # one group (multi_query), Falcon-40B's new decoder architecture
           # with two kv heads (at tp 2 a group a rank)
           "bloom": "BloomForCausalLM", "falcon": "FalconForCausalLM",
           # GPT-2's Conv1D weights (transposed), in the Hub's names
           "gpt2": "GPT2LMHeadModel",
           "falcon-gqa": ("FalconForCausalLM", {"new_decoder_architecture": True,
                                                "num_kv_heads": 2, "num_attention_heads": 8}),
           # Jamba: Mamba and attention layers, dense and expert
           # feed-forwards, in all four pairings (layers 0-3: Mamba dense,
           # Mamba experts, attention dense, Mamba experts)
           "jamba": ("JambaForCausalLM", {"num_hidden_layers": 4,
                                          "attn_layer_period": 4, "attn_layer_offset": 2,
                                          "expert_layer_period": 2, "expert_layer_offset": 1}),
           # Jamba's classifier (AI21's Jamba reward models): the same
           # layers and a score head of three labels, no LM head
           "jamba_cls": ("JambaForSequenceClassification", {
               "num_hidden_layers": 4, "attn_layer_period": 4, "attn_layer_offset": 2,
               "expert_layer_period": 2, "expert_layer_offset": 1, "num_labels": 3}),
           # Granite with attention sinks and sliding-window layers; its MoE
           # form with a shared MLP; Granite MoE with a shared MLP
           "granite_swa": "GraniteSWAForCausalLM",
           "granitemoe_swa": ("GraniteMoeSWAForCausalLM", {"shared_intermediate_size": 256}),
           "granitemoe_shared": "GraniteMoeSharedForCausalLM",
           # StarCoder's multi-query attention (q heads cut, k and v whole),
           # and GPTBigCode without it (vLLM keeps the attention whole)
           "gpt_bigcode": "GPTBigCodeForCausalLM",
           "gpt_bigcode-mha": ("GPTBigCodeForCausalLM", {"multi_query": False,
                                                         "num_key_value_heads": 4}),
           # Gemma 4's text model with its released layer kinds: sliding and
           # full attention, the full layers' k loaded as v too
           # (attention_k_eq_v, one global kv head: whole on both ranks at
           # tp 2), the last two layers reading others' caches (kv-shared)
           "gemma4": ("Gemma4ForCausalLM", {
               "num_hidden_layers": 4, "attention_k_eq_v": True,
               "layer_types": ["sliding_attention", "full_attention",
                               "sliding_attention", "full_attention"],
               "num_global_key_value_heads": 1, "num_kv_shared_layers": 2}),
           # Gemma 4's MoE layers (26B-A4B): each layer's router and stacked
           # experts ([E, 2I, H], [E, H, I]) beside its dense MLP, with k as v
           # in the full layers; no per-layer embeddings, no kv-shared layers
           "gemma4-moe": ("Gemma4ForCausalLM", {
               "num_hidden_layers": 4, "attention_k_eq_v": True,
               "layer_types": ["sliding_attention", "full_attention",
                               "sliding_attention", "full_attention"],
               "num_global_key_value_heads": 1, "enable_moe_block": True,
               "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 128,
               "hidden_size_per_layer_input": 0}),
           # Cohere2 MoE: a dense first layer, then layers of experts with a
           # shared expert
           "cohere2_moe": ("Cohere2MoeForCausalLM", {
               "num_hidden_layers": 3, "mlp_layer_types": ["dense", "sparse", "sparse"],
               "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
               "prefix_dense_intermediate_size": 384, "num_shared_experts": 1}),
           # A.X K1: a dense first layer, then one of experts with a shared
           # expert (the learner's RELEASED and axk1_released)
           "axk1": "AXK1ForCausalLM",
           # Gemma 3n's text model: sliding and full layers, the last two
           # kv-shared, with the k/v google ships there (the learner's
           # RELEASED and gemma3n_released)
           "gemma3n": "Gemma3nForCausalLM",
           # Hunyuan 4: MLA with DSA (an indexer every other layer), hyper-
           # connections, a dense MLP layer then experts (the learner's
           # RELEASED, with the names hyv4_released gives)
           "hy_v4": "HYV4ForCausalLM",
           # ... with dense MLA in every layer (no indexer), which vLLM's
           # CPU build runs: answers too
           "hy_v4-mla": ("HYV4ForCausalLM", {"layer_types": ["full_attention"] * 4}),
           # Qwen4-Exp: Gated DeltaNet layers and QSA ones (the indexer's
           # q/k projection fused after q/k/v), each wrapped in hyper-
           # connections (4 streams, their down projection padded to 48
           # rows), MoE with a gated shared expert; QSA in both stages of two
           "qwen4_exp": ("Qwen4ExpForCausalLM", {
               "num_hidden_layers": 4,
               "layer_types": ["linear_attention", "indexed_attention",
                               "linear_attention", "indexed_attention"],
               "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 64,
               "indexer_budget": 64, "indexer_compress_ratio": 4}),
           # ... with n-gram PLE layers (1 and 3) whose embedding is stored
           # in 3 row pieces: a rank's rows span two of them at tp 2
           "qwen4_exp-ple": ("Qwen4ExpForCausalLM", {
               "num_hidden_layers": 4,
               "layer_types": ["linear_attention", "indexed_attention",
                               "linear_attention", "indexed_attention"],
               "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 64,
               "indexer_budget": 64, "indexer_compress_ratio": 4,
               "ple_layer_ids": [1, 3], "split_ngram_parts": 3, "heads_per_ngram": 2}),
           # Zamba2: Mamba-2 layers and hybrid ones (the learner's RELEASED:
           # one shared block, two hybrid layers); -m2 two shared blocks
           # taken in turn by three hybrid layers, as Zamba2-2.7B has them
           "zamba2": "Zamba2ForCausalLM",
           "zamba2-m2": ("Zamba2ForCausalLM", {
               "num_hidden_layers": 6, "num_mem_blocks": 2,
               "layers_block_type": ["linear_attention", "hybrid", "hybrid",
                                     "linear_attention", "hybrid", "linear_attention"]}),
           # DBRX: its experts stored one after another by rows (w1, v1,
           # w2 [E*I, H]), 4 of them (the learner's RELEASED); vLLM's own
           # loader needs the hook's fix (hook/sitecustomize.py, _patch_dbrx)
           "dbrx": "DbrxForCausalLM",
           # poolside's Laguna: a dense first layer, then experts with a
           # shared expert and the routing bias; heads per layer, the second
           # layer with more (6 and 4 q heads of 2 kv heads), one sliding
           # layer.  vLLM's own loader leaves the routing bias zero: the
           # hook's fix (hook/sitecustomize.py, _patch_laguna) loads it.
           "laguna": ("LagunaForCausalLM", {
               "num_hidden_layers": 3, "mlp_layer_types": ["dense", "sparse", "sparse"],
               "layer_types": ["full_attention", "sliding_attention", "full_attention"],
               "num_attention_heads_per_layer": [4, 6, 4]}),
           # HRM-Text: two stacks of three layers (H, L) in 3 H cycles of
           # 2 L cycles (the learner's defaults are 2 and 3): vLLM's attention
           # per recurrence step, L at steps 0, 1, 3, 4, 6, 7, H at 2, 5, 8
           "hrm_text": ("HrmTextForCausalLM", {"H_cycles": 3, "L_cycles": 2,
                                               "num_hidden_layers": 3}),
           # StableLM 2's q/k/v biases
           "stablelm": ("StableLmForCausalLM", {"use_qkv_bias": True}),
           # one Mamba-2 group, which vLLM replicates on every rank
           "nemotron_h-g1": ("NemotronHForCausalLM", {"n_groups": 1}),
           # Nemotron-H's MoE variant (Nemotron 3 Nano's layer kinds): relu^2
           # routed experts and a shared expert in layer 1
           "nemotron_h-moe": ("NemotronHForCausalLM", {
               "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
               "moe_intermediate_size": 128, "moe_shared_expert_intermediate_size": 128,
               "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1}),
           # Nemotron 3 Super's latent MoE: the routed experts work in
           # moe_latent_size, between fc1_latent_proj and fc2_latent_proj
           "nemotron_h-moe-latent": ("NemotronHForCausalLM", {
               "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
               "moe_intermediate_size": 128, "moe_shared_expert_intermediate_size": 128,
               "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
               "moe_latent_size": 192})}


def learn_rules():
    """scripts/learn-rules as a module (its make_checkpoint builds the
    checkpoints of the learned families)."""
    import importlib.machinery
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "scripts", "learn-rules")
    loader = importlib.machinery.SourceFileLoader("learn_rules", path)
    spec = importlib.util.spec_from_loader("learn_rules", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def learned(arch, out):
    name, over = LEARNED[arch] if isinstance(LEARNED[arch], tuple) else (LEARNED[arch], {})
    learn_rules().make_checkpoint(name, out, over)
    if arch == "bloom":
        hub_without_transformer(out)
    if arch == "gpt2":
        hub_gpt2(out)
    if arch == "mimo_v2_flash":
        released_mimo_mtp(out)
    if arch == "ernie4_5_moe":
        released_ernie_mtp(out)
    if arch in ("glm4_moe_lite", "hy_v3", "axk1", "glm4"):
        # GLM-4.7-Flash, Hunyuan 3 and A.X K1 ship a DeepSeek-style MTP
        # layer past num_hidden_layers, which vLLM's main model skips (so
        # does its GLM-4 model, Glm4ForCausalLM: glm4.py)
        add_mtp_layer(out, f32_router_bias=False, hy_v3=arch == "hy_v3")
    if arch == "glm4_moe_lite-nohead":
        add_mtp_layer(out, f32_router_bias=False, own_head=False)
    if arch == "glm4_moe_lite-nohead2":
        add_mtp_layer(out, f32_router_bias=False, own_head=False, nextn=2)
    if arch in ("exaone_moe", "nemotron_h", "nemotron_h-moe", "nemotron_h-moe-latent"):
        released_mtp_prefix(out, arch)
    if arch == "qwen4_exp":
        qwen4_exp_mtp(out)
    if arch.startswith("hy_v4"):
        hyv4_mtp(out)


def released_mtp_prefix(out, arch):
    """The multi-token prediction block under mtp.*, as K-EXAONE
    (exaone_moe_mtp.py: mtp.fc, mtp.pre_fc_norm_embedding,
    mtp.pre_fc_norm_hidden, mtp.norm, mtp.layers.0.*) and Nemotron 3 Super
    (nemotron_h_mtp.py: mtp.layers.N, N from 0, one a character of
    mtp_hybrid_override_pattern, the first with enorm, hnorm and eh_proj,
    the last with final_layernorm) ship it; config.json's
    num_nextn_predict_layers 1.  vLLM 0.32's main models drop every "mtp."
    name.  The layer's tensors copy the last decoder layer's, perturbed
    (K-EXAONE's MLP the first dense layer's: its MTP layer is dense)."""
    import json
    import os
    import torch
    from ckpt_io import (add_to_first_shard, perturbed_copy, perturber, read_tensors,
                         update_config)
    src = read_tensors(out)
    cfg = json.load(open(os.path.join(out, "config.json")))
    h = cfg["hidden_size"]
    rnd = perturber(88)
    g = rnd.g
    layers = sorted({int(k.split(".")[2]) for k in src if ".layers." in k[:20]})
    pre = next(k[:k.index(".layers.") + 8] for k in src if ".layers." in k[:20])
    last = f"{pre}{layers[-1]}."
    # K-EXAONE's MTP layer has a dense MLP (vLLM builds it so: is_mtp in
    # exaone_moe.py): its MLP copies the first dense layer's
    dense = None
    if arch == "exaone_moe":
        dense = f"{pre}{cfg['mlp_layer_types'].index('dense')}."
    new = {}
    for name, t in src.items():
        rest = None
        if name.startswith(last) and not (dense and name[len(last):].startswith("mlp.")):
            rest = name[len(last):]
        elif dense and name.startswith(dense + "mlp."):
            rest = name[len(dense):]
        if rest is not None:
            new["mtp.layers.0." + rest] = rnd(t)
    one = (1 + torch.randn(h, generator=g) * 0.02).to(torch.bfloat16)
    proj = (torch.randn(h, 2 * h, generator=g) * 0.02).to(torch.bfloat16)
    if arch == "exaone_moe":
        new.update({"mtp.fc.weight": proj, "mtp.pre_fc_norm_embedding.weight": one,
                    "mtp.pre_fc_norm_hidden.weight": one.clone(), "mtp.norm.weight": one.clone()})
        add_to_first_shard(out, new)
        update_config(out, lambda c: c.update(num_nextn_predict_layers=1))
        return
    # Nemotron-H: the MTP step is mtp_layers_block_type's layers (the
    # config's mtp_hybrid_override_pattern; Nemotron 3 Super's "*E": an
    # attention layer, then an MoE one), numbered from 0 under mtp.layers.;
    # the first also holds enorm, hnorm and eh_proj, the last
    # final_layernorm (nemotron_h_mtp.py).  Each copies the last target
    # layer of its kind, perturbed: nemotron_h-moe's "*E" as released;
    # nemotron_h's one attention layer ("*"), its dense target having no
    # MoE layer.
    kinds = ["full_attention", "moe"] if arch.startswith("nemotron_h-moe") else ["full_attention"]
    types = cfg["layers_block_type"]
    new = {}
    for i, kind in enumerate(kinds):
        src_n = max(n for n, t in enumerate(types) if t == kind)
        new.update(perturbed_copy(src, f"{pre}{src_n}.", f"mtp.layers.{i}.", rnd))
    last_mtp = len(kinds) - 1
    new.update({"mtp.layers.0.eh_proj.weight": proj, "mtp.layers.0.enorm.weight": one,
                "mtp.layers.0.hnorm.weight": one.clone(),
                f"mtp.layers.{last_mtp}.final_layernorm.weight": one.clone()})
    add_to_first_shard(out, new)
    update_config(out, lambda c: c.update(num_nextn_predict_layers=1,
                                          mtp_layers_block_type=kinds))


def released_ernie_mtp(out):
    """ERNIE-4.5 MoE's multi-token prediction block beside the model, under
    the names Baidu's -PT releases carry (model.mtp_emb_norm.0,
    model.mtp_hidden_norm.0, model.mtp_linear_proj.0 and a dense decoder
    layer model.mtp_block.0.*: attention copied from the last layer,
    perturbed, and an MLP of intermediate_size), config.json's
    num_nextn_predict_layers 1; transformers' class has none.  vLLM 0.32's
    main model drops every "mtp" name (ernie45_moe.py); its draft ErnieMTP
    loads them (ernie_mtp.py)."""
    import json
    import os
    import torch
    from ckpt_io import (add_to_first_shard, perturbed_copy, perturber, read_tensors,
                         update_config)
    src = read_tensors(out)
    cfg = json.load(open(os.path.join(out, "config.json")))
    h, i, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    rnd = perturber(77)
    g = rnd.g
    last = f"model.layers.{n - 1}."
    new = perturbed_copy(src, last, "model.mtp_block.0.", rnd,
                         lambda rest: rest.startswith(("self_attn.", "input_layernorm",
                                                       "post_attention_layernorm")))
    for k, shape in (("gate_proj", [i, h]), ("up_proj", [i, h]), ("down_proj", [h, i])):
        new[f"model.mtp_block.0.mlp.{k}.weight"] = (
            torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
    for k in ("mtp_emb_norm", "mtp_hidden_norm"):
        new[f"model.{k}.0.weight"] = (1 + torch.randn(h, generator=g) * 0.02).to(torch.bfloat16)
    new["model.mtp_linear_proj.0.weight"] = (
        torch.randn(h, 2 * h, generator=g) * 0.02).to(torch.bfloat16)
    add_to_first_shard(out, new)
    update_config(out, lambda c: c.update(num_nextn_predict_layers=1))


def released_mimo_mtp(out):
    """A multi-token prediction layer beside the model, as Xiaomi's
    MiMo-V2-Flash checkpoints carry it (model.mtp.layers.0.*: enorm, hnorm,
    eh_proj, a sliding-window layer's attention with its sink bias, dense
    MLP, final_layernorm); transformers' class has none.  vLLM 0.32's main model skips every "mtp" name (mimo_v2.py)."""
    import json
    import os
    import torch
    from ckpt_io import add_to_first_shard
    cfg = json.load(open(os.path.join(out, "config.json")))
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    # its attention is a sliding-window layer's (vLLM's MiMoV2MTPLayer)
    nh, kv = cfg["swa_num_attention_heads"], cfg["swa_num_key_value_heads"]
    d, vd = cfg["swa_head_dim"], cfg.get("swa_v_head_dim") or cfg["swa_head_dim"]
    p = "model.mtp.layers.0."
    g = torch.Generator().manual_seed(5)
    shapes = {"enorm.weight": [h], "hnorm.weight": [h], "eh_proj.weight": [h, 2 * h],
              "input_layernorm.weight": [h], "self_attn.q_proj.weight": [nh * d, h],
              "self_attn.k_proj.weight": [kv * d, h], "self_attn.v_proj.weight": [kv * vd, h],
              "self_attn.o_proj.weight": [h, nh * vd], "pre_mlp_layernorm.weight": [h],
              "mlp.gate_proj.weight": [i, h], "mlp.up_proj.weight": [i, h],
              "mlp.down_proj.weight": [h, i], "final_layernorm.weight": [h]}
    if cfg.get("add_swa_attention_sink_bias"):
        shapes["self_attn.attention_sink_bias"] = [nh]
    add_to_first_shard(out, {p + k: (torch.randn(s, generator=g) * 0.02).to(torch.bfloat16)
                             for k, s in shapes.items()})


def hub_gpt2(out):
    """Names without "transformer.", and each layer's causal-mask buffers
    (attn.bias, F32 [1, 1, P, P], and attn.masked_bias), as OpenAI's GPT-2
    checkpoints on the Hub carry them: vLLM 0.32 adds the prefix and drops
    the buffers (gpt2.py)."""
    import json
    import os
    import torch
    from ckpt_io import add_to_first_shard
    cfg = json.load(open(os.path.join(out, "config.json")))
    p = cfg["n_positions"]
    hub_without_transformer(out)
    add_to_first_shard(out, {k: v for n in range(cfg["n_layer"]) for k, v in (
        (f"h.{n}.attn.bias", torch.tril(torch.ones(p, p)).view(1, 1, p, p)),
        (f"h.{n}.attn.masked_bias", torch.tensor(-1e4)))})


def hub_without_transformer(out):
    """Drops "transformer." from every name, as BigScience's BLOOM
    checkpoints (saved from BloomModel) and OpenAI's GPT-2 ones on the Hub
    name their tensors: vLLM 0.32 adds it back (bloom.py,
    _add_transformer_prefix; gpt2.py)."""
    from ckpt_io import rename_prefix
    rename_prefix(out, "transformer.", "")


def olmo_hybrid_released(out, cfg):
    """OLMo Hybrid as vLLM loads it: transformers 5.19 saves its norms
    under OLMo-core's names (attention_layer_norm, feedforward_layer_norm)
    and cuts its fused convolution into three equal thirds, where q and k
    are key_dim wide and v value_dim: the names vLLM's layers carry, and
    the three convolutions at their own widths."""
    import torch
    from ckpt_io import rewrite_shards
    key = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    value = cfg.linear_num_value_heads * cfg.linear_value_head_dim

    def shard(tensors):
        for name in list(tensors):
            for old, new in (("attention_layer_norm", "input_layernorm"),
                             ("feedforward_layer_norm", "post_attention_layernorm")):
                if old in name:
                    tensors[name.replace(old, new)] = tensors.pop(name)
        for name in [n for n in tensors if n.endswith(".q_conv1d.weight")]:
            p = name[:-len("q_conv1d.weight")]
            parts = [tensors.pop(p + c + "_conv1d.weight") for c in "qkv"]
            q, k, v = torch.cat(parts).split([key, key, value])
            for c, t in zip("qkv", (q, k, v)):
                tensors[p + c + "_conv1d.weight"] = t.contiguous()
    rewrite_shards(out, shard)


# Cases a module of their own writes whole (its make(out)).
# Cases whose checkpoint a module of their own makes: MODULE (its make) or
# MODULE:FUNCTION.
OWN = {"gemma3n_mm": "ckpt_gemma3n", "phi4_siglip": "ckpt_phi4_siglip", "colmodernvbert": "ckpt_colmodernvbert",
       "decilm": "ckpt_decilm", "internlm2": "ckpt_internlm2",
       "internlm2_rm": "ckpt_internlm2:make_reward", "chatglm": "ckpt_chatglm",
       "chatglm-variant": "ckpt_chatglm:make_variant", "minicpm": "ckpt_minicpm",
       "minicpm-untied": "ckpt_minicpm:make_untied", "minicpm-moe": "ckpt_minicpm:make_moe",
       "exaone": "ckpt_exaone", "exaone-untied": "ckpt_exaone:make_untied",
       "ernie45_vl": "ckpt_ernie45_vl", "ernie45_vl-untied": "ckpt_ernie45_vl:make_untied",
       "deepseek_v41": "ckpt_dsv41", "deepseek_v41-pp": "ckpt_dsv41:make_pp",
       "deepseek_v41-text": "ckpt_dsv41:make_text",
       # V4.1 with DSpark draft stages as its mtp.* (deepseek_v41-dspark:TP:bytes:dspark)
       "deepseek_v41-dspark": "ckpt_dsv41:make_dspark",
       "kimi_k3": "ckpt_kimi_k3", "kimi_k3-nohead": "ckpt_kimi_k3:make_nohead", "kimi_k3-nohead2": "ckpt_kimi_k3:make_nohead2",
       "bailing_moe": "ckpt_bailing_moe", "bailing_moe_v3": "ckpt_bailing_moe_v3",
       "bailing_moe_v3_vl": "ckpt_bailing_moe_v3_vl",
       "bailing_moe_v25": "ckpt_bailing_moe_v25",
       "bailing_moe_v25-qlora": "ckpt_bailing_moe_v25:make_qlora",
       "bailing_moe-v1": "ckpt_bailing_moe:make_v1", "internvl_chat": "ckpt_internvl_chat",
       "internvl_chat-6b": "ckpt_internvl_chat:make_6b",
       "internvl_chat-llama": "ckpt_internvl_chat:make_llama",
       "internvl_chat-qwen3moe": "ckpt_internvl_chat:make_qwen3_moe",
       "internvl_chat-internlm2": "ckpt_internvl_chat:make_internlm2",
       "h2ovl": "ckpt_internvl_derivs:make_h2ovl", "h2ovl-800m": "ckpt_internvl_derivs:make_h2ovl_800m",
       "skywork_r1v": "ckpt_internvl_derivs:make_skywork_r1v", "nvlm_d": "ckpt_internvl_derivs:make_nvlm_d",
       "nvlm_d-h4": "ckpt_internvl_derivs:make_nvlm_d_h4",
       "eagle2_5_vl": "ckpt_eagle2_5_vl", "eagle2_5_vl-sel": "ckpt_eagle2_5_vl:make_sel",
       "telechat2": "ckpt_telechat2", "telechat2-mha": "ckpt_telechat2:make_mha",
       "step3p5": "ckpt_step3p5", "step3p5-experts": "ckpt_step3p5:make_per_expert",
       "step3p5-ssp": "ckpt_step3p5:make_sqrtsoftplus", "llama-tiedhead": "ckpt_tied_head",
       "step3p7": "ckpt_step3p7", "step3p7-ssp": "ckpt_step3p7:make_sqrtsoftplus",
       "step_vl": "ckpt_step_vl", "step_vl-tied": "ckpt_step_vl:make_tied",
       "step3_vl": "ckpt_step3_vl",
       "keye": "ckpt_keye", "keye_vl1_5": "ckpt_keye:make_v1_5",
       "kanana_v": "ckpt_kanana_v", "kanana_v-tied": "ckpt_kanana_v:make_tied",
       "llava_onevision2": "ckpt_llava_onevision2",
       "llava_onevision2-tied": "ckpt_llava_onevision2:make_tied",
       "molmo2": "ckpt_molmo2", "molmo": "ckpt_molmo", "bagel": "ckpt_bagel",
       "openvla": "ckpt_openvla",
       "ovis2_5": "ckpt_ovis2_5", "ovis2_5-tied": "ckpt_ovis2_5:make_tied",
       "ovis2_5-moe": "ckpt_ovis2_5:make_moe", "ovis": "ckpt_ovis",
       "deepseek_moe": "ckpt_deepseek_moe", "deepseek_moe-freq2": "ckpt_deepseek_moe:make_freq2",
       "iquest_loopcoder": "ckpt_iquest_loopcoder", "nanbeige": "ckpt_nanbeige",
       "phi4mm": "ckpt_phi4mm",
       "iquest_loopcoder-loop3": "ckpt_iquest_loopcoder:make_loop3",
       "step3_text": "ckpt_step3_text", "bailing_moe-sarvam": "ckpt_bailing_moe:make_sarvam",
       "gte_new": "ckpt_gte_new", "openpangu": "ckpt_openpangu:make_embedded",
       "openpangu-ultra": "ckpt_openpangu:make_ultra",
       "openpangu-ultra-nohead": "ckpt_openpangu:make_ultra_nohead", "openpangu-ultra-nohead2": "ckpt_openpangu:make_ultra_nohead2",
       "openpangu-pro": "ckpt_openpangu:make_pro_v2", "param2": "ckpt_param2",
       "openpangu_vl": "ckpt_openpangu_vl",
       "moondream3": "ckpt_moondream3",
       "nemotron_parse": "ckpt_nemotron_parse",
       "param2-bf16bias": "ckpt_param2:make_bf16_bias", "sarvam_mla": "ckpt_sarvam_mla",
       "sarvam_mla-freq2": "ckpt_sarvam_mla:make_freq2",
       "sarvam_mla-tied": "ckpt_sarvam_mla:make_tied",
       "gte_new-rerank": "ckpt_gte_new:make_reranker", "k2_horizon": "ckpt_k2_horizon",
       "k2_horizon-full": "ckpt_k2_horizon:make_full",
       "k2_horizon-mova": "ckpt_k2_horizon:make_mova",
       "k2_horizon-softmax": "ckpt_k2_horizon:make_softmax", "plamo3": "ckpt_plamo3",
       "plamo3-untied": "ckpt_plamo3:make_untied", "interns1": "ckpt_interns1",
       "interns1-mini": "ckpt_interns1:make_mini", "kimi_vl": "ckpt_kimi_vl",
       "interns1_pro": "ckpt_interns1_pro",
       "interns2_preview": "ckpt_interns2:make_preview",
       "interns2_mobius": "ckpt_interns2:make_mobius",
       "rnj1": "ckpt_rnj1", "rnj1-untied": "ckpt_rnj1:make_untied",
       "step1": "ckpt_step1", "step1-untied": "ckpt_step1:make_untied",
       "step1-said": "ckpt_step1:make_said",
       "mimo_v2": "ckpt_mimo_v2", "mimo_v2-fused": "ckpt_mimo_v2:make_fused",
       "mimo_v2_omni": "ckpt_mimo_v2_omni", "mimo_v2_omni-v25": "ckpt_mimo_v2_omni:make_v25",
       "minicpmv": "ckpt_minicpmv:make_v26", "minicpmv-4_0": "ckpt_minicpmv:make_v40",
       "minicpmv-4_5": "ckpt_minicpmv:make_v45", "minicpmo": "ckpt_minicpmo",
       "isaac": "ckpt_isaac", "isaac-hf": "ckpt_isaac:make_hf",
       "deepseek_vl2": "ckpt_deepseek_vl2",
       "deepseek_vl2-mla": "ckpt_deepseek_vl2:make_mla", "deepseek_ocr": "ckpt_deepseek_ocr",
       "deepseek_ocr2": "ckpt_deepseek_ocr:make_ocr2",
       "unlimited_ocr": "ckpt_deepseek_ocr:make_unlimited",
       "lightonocr": "ckpt_lightonocr_glm4v:make_lightonocr",
       "glm4v_chatglm": "ckpt_lightonocr_glm4v:make_glm4v",
       "phi3v": "ckpt_phi3v:make_phi3v", "phi3v-wte": "ckpt_phi3v:make_phi3v_wte",
       "dots_ocr": "ckpt_dots_ocr", "dots_ocr-bias": "ckpt_dots_ocr:make_bias",
       # Cosmos 3's unified checkpoint: transformer/, vision_encoder/ (and vae/, ignored)
       "cosmos3": "ckpt_cosmos3:make",
       "cosmos3_edge": "ckpt_cosmos3_edge",
       "colqwen3": "ckpt_colqwen3:make_tomoro", "colqwen3-ops": "ckpt_colqwen3:make_ops",
       "colqwen3-nemotron": "ckpt_colqwen3:make_nemotron",
       "colqwen3-nodim": "ckpt_colqwen3:make_nodim",
       "colqwen3_5": "ckpt_colqwen3:make_colqwen3_5",
       "colbert": "ckpt_colbert:make_bert",
       "colbert-colbert_linear": "ckpt_colbert:make_bert_colbert_linear",
       "colbert_modernbert": "ckpt_colbert:make_modernbert",
       "colbert_lfm2": "ckpt_colbert:make_lfm2",
       "colbert_modernbert-st": "ckpt_colbert:make_modernbert_st",
       "colbert_lfm2-st": "ckpt_colbert:make_lfm2_st",
       "colbert-hdm": "ckpt_colbert:make_bert_hdm",
       "colbert_jina": "ckpt_colbert:make_jina",
       "bert_splade": "ckpt_sparse:make_splade",
       "bert_splade-tied": "ckpt_sparse:make_splade_tied",
       "bge_m3": "ckpt_sparse:make_bge_m3", "bge_m3-pt": "ckpt_sparse:make_bge_m3_pt",
       "bge_m3-hdm": "ckpt_sparse:make_bge_m3_hdm",
       # llama's EAGLE-3 draft (test/engine/run's ARCH:TP:eagle3 cases)
       "llama-eagle3": "ckpt_eagle3",
       "llama-eagle3_speculators": "ckpt_eagle3:make_speculators",
       # the same as a P-EAGLE (parallel drafting) draft, with mask_hidden
       "llama-eagle3_peagle": "ckpt_eagle3:make_peagle",
       # qwen3's, a Qwen3 decoder layer (Eagle3Qwen3ForCausalLM)
       "qwen3-eagle3": "ckpt_eagle3:make_qwen3",
       # qwen3_vl's, a Llama layer under the alias Eagle3Qwen3vlForCausalLM
       "qwen3_vl-eagle3": "ckpt_eagle3:make_qwen3vl",
       # qwen3's DFlash draft (test/engine/run's ARCH:TP:dflash cases)
       "qwen3-dflash": "ckpt_dflash",
       # muse_glimmer's (MuseGlimmerAssistantModel, transformers' own classes)
       "muse_glimmer-dflash": "ckpt_dflash:make_muse_glimmer",
       # qwen3's DFlash2 draft (DFlash2DraftModel: ARCH:TP:dflash2 cases)
       "qwen3-dflash2": "ckpt_dflash:make_dflash2",
       # qwen3's LiLiCorr draft (LiLiCorrDraftModel: qwen3:2:dflash_lilicorr)
       "qwen3-dflash_lilicorr": "ckpt_dflash:make_lilicorr",
       # laguna's (DFlashLagunaForCausalLM, vLLM's names: qkv_proj fused)
       "laguna-dflash": "ckpt_dflash:make_laguna",
       # qwen3's DSpark draft (Qwen3DSparkModel: ARCH:TP:dspark cases)
       "qwen3-dspark": "ckpt_dflash:make_dspark",
       # gemma4_mm's (Gemma4DSparkModel: its own embedding and head)
       "gemma4_mm-dspark": "ckpt_dflash:make_gemma4_dspark",
       # kimi_k3's (K3DSparkModel: MLA with RoPE, a dense MLP)
       "kimi_k3-dspark": "ckpt_kimi_k3:make_dspark",
       # deepseek_v3's, a DeepSeek-V3 layer (MLA, dense MLP): Eagle3DeepseekV2ForCausalLM
       "deepseek_v3-eagle3": "ckpt_eagle3:make_deepseek",
       # deepseek_v3's EAGLE draft (its MTP layer under EAGLE's names):
       # EagleDeepSeekMTPModel, method eagle (ARCH:TP:eagle_ds cases)
       "deepseek_v3-eagle_ds": "ckpt_eagle3:make_deepseek_eagle",
       # Mistral Large 3 in Mistral's own format (params.json,
       # consolidated-0000N-of-00002.safetensors and their index; -single:
       # one consolidated.safetensors, no index)
       "mistral_large_3": "ckpt_mistral:make_large3",
       "mistral_large_3-single": "ckpt_mistral:make_large3_single",
       # its EAGLE draft in Mistral's format (EagleMistralLarge3ForCausalLM,
       # method eagle: the ARCH:TP:eagle case mistral_large_3:2:eagle)
       "mistral_large_3-eagle": "ckpt_mistral:make_large3_eagle",
       # the same with tok_embeddings and output (mistral_large_3:2:eagle_embed)
       "mistral_large_3-eagle_embed": "ckpt_mistral:make_large3_eagle_embed",
       # the same in FP8 (mistral_large_3:2:eagle_fp8)
       "mistral_large_3-eagle_fp8": "ckpt_mistral:make_large3_eagle_fp8",
       # Mistral 7B's layout in Mistral's own format (MistralForCausalLM:
       # wq and wk rows interleaved for rotary, one consolidated.safetensors)
       "mistral_consolidated": "ckpt_mistral:make_dense",
       # its EAGLE-1 draft in Mistral's format (EagleMistralForCausalLM,
       # method eagle: mistral_consolidated:2:eagle)
       "mistral_consolidated-eagle": "ckpt_mistral:make_dense_eagle",
       # Mistral Small 3.1's layout in Mistral's own format
       # (PixtralForConditionalGeneration: params.json's vision_encoder, the
       # tower and projector under Mistral's names, tekken.json with its
       # image config)
       "pixtral_mistral": "ckpt_mistral:make_pixtral",
       # Pixtral 12B's (adapter biases, no patch merger, no norm before
       # the adapter)
       "pixtral_mistral-12b": "ckpt_mistral:make_pixtral_12b",
       # Voxtral Mini's layout in Mistral's own format
       # (VoxtralForConditionalGeneration: multimodal.whisper_model_args,
       # the Whisper encoder and adapter under Mistral's names, tied
       # embeddings as mm_whisper_embeddings.tok_embeddings, tekken.json
       # with its audio config)
       "voxtral": "ckpt_mistral:make_voxtral",
       # Voxtral Small's (its own output.weight)
       "voxtral-untied": "ckpt_mistral:make_voxtral_untied",
       # Voxtral Mini 4B Realtime's layout in Mistral's own format
       # (VoxtralRealtimeGeneration: a causal encoder, ada_rms_norm_t_cond
       # in the text model's layers, everything but the text model's layers
       # and norm under mm_streams_embeddings.embedding_module., tekken.json
       # with a streaming audio config)
       "voxtral_realtime": "ckpt_mistral:make_voxtral_realtime",
       # the same under mm_whisper_embeddings. (Voxtral's prefix, which
       # vLLM's load_weights takes too: voxtral.py:496-499)
       "voxtral_realtime-whisper": "ckpt_mistral:make_voxtral_realtime_whisper",
       # the FP8 releases in Mistral's format (params.json "quantization"
       # fp8_e4m3, per-tensor qscale_weight and qscale_act): Mistral Large 3
       # (two shards), Ministral 3 and Devstral 2 (MistralForCausalLM)
       "mistral_large_3-fp8": "ckpt_mistral:make_large3_fp8",
       "mistral_consolidated-fp8": "ckpt_mistral:make_dense_fp8",
       # the same with dynamic activations ("qscheme_act" "NO_SCALES")
       "mistral_consolidated-fp8dyn": "ckpt_mistral:make_dense_fp8dyn",
       # llama's Medusa draft (test/engine/run's ARCH:TP:medusa cases)
       "llama-medusa": "ckpt_medusa",
       # llama's EAGLE-1 draft (test/engine/run's ARCH:TP:eagle cases)
       "llama-eagle": "ckpt_eagle",
       "llama-eagle_noembed": "ckpt_eagle:make_noembed",
       "llama-eagle_fcbias": "ckpt_eagle:make_fcbias",
       # MiniCPM's (EagleMiniCPMForCausalLM)
       "minicpm-eagle": "ckpt_eagle:make_minicpm",
       # Llama 4's (EagleLlama4ForCausalLM)
       "llama4-eagle": "ckpt_eagle:make_llama4",
       # Cohere's (EagleCohereForCausalLM)
       "cohere2-eagle": "ckpt_eagle:make_cohere2",
       "nemotron_h-moe-puzzle": "ckpt_nemotron_puzzle",
       "nemotron_h-puzzle": "ckpt_nemotron_puzzle:make_dense",
       # Nemotron-H VL and omni (NemotronH_Nano_VL_V2 and the omni releases)
       "nano_nemotron_vl": "ckpt_nano_nemotron_vl",
       "llama_nemotron_vl_embed": "ckpt_llama_nemotron_vl",
       "llama_nemotron_vl_cls": "ckpt_llama_nemotron_vl:make_cls",
       "llama_nemotron_nano_vl": "ckpt_llama_nemotron_vl:make_nano",
       "nano_nemotron_omni": "ckpt_nano_nemotron_vl:make_omni",
       # Gemma 4's MTP assistant (test/engine/run's ARCH:TP:assistant cases)
       "gemma4-assistant": "ckpt_gemma4_assistant",
       "gemma4-assistant_ordered": "ckpt_gemma4_assistant:make_ordered",
       "jina_v5": "ckpt_jina_v5", "jina_v5-nano": "ckpt_jina_v5:make_nano",
       "jina_v5-untied": "ckpt_jina_v5:make_untied",
       "longcat_flash_ngram": "ckpt_longcat_flash_ngram",
       # dots3 NOTE: vLLM's own config (model_type dots3_note), no transformers class
       "dots3_note": "ckpt_dots3_note",
       # Ultravox: a Whisper encoder, a projector and a Llama text model
       "ultravox": "ckpt_ultravox",
       # MiDashengLM: a Dasheng encoder, a projector and a Qwen2 text model
       "midashenglm": "ckpt_midashenglm",
       # Kimi-Audio: a Qwen2 text model and a projector at the top, the
       # Whisper model in whisper-large-v3/ (weights vLLM reads too)
       "kimi_audio": "ckpt_kimi_audio",
       # with three encoder layers beside two decoder layers (its pipeline
       # stages: each stack dealt on its own)
       "kimi_audio-e3": "ckpt_kimi_audio:make_e3",
       # FireRedASR2: a Conformer encoder, an adapter and a Qwen2 text model
       "fireredasr2": "ckpt_fireredasr2",
       # Cohere Transcribe: a Conformer encoder and a Transformer decoder
       # (transformers' CohereAsrForConditionalGeneration, saved in NeMo's names)
       "cohere_asr": "ckpt_cohere_asr",
       # FunASR (Fun-ASR-Nano): a SenseVoice encoder, an adaptor and a Qwen3
       # text model
       "funasr": "ckpt_funasr",
       # FunAudioChat: vLLM's own config, two audio towers and a Qwen3 text
       # model
       "funaudiochat": "ckpt_funaudiochat",
       # MOSS-Transcribe-Diarize: a Whisper encoder, an adaptor and a Qwen3 text model
       "moss_td": "ckpt_moss_td",
       # MOSS-Audio: its own audio encoder, adapters and a Qwen3 text model
       "moss_audio": "ckpt_moss_audio",
       # Qwen3-ASR's streaming class and its forced aligner (a timestamp
       # classifier for a head), as Qwen releases them
       "qwen3_asr-realtime": "ckpt_qwen3_asr:make_realtime",
       "qwen3_asr_aligner": "ckpt_qwen3_asr:make_aligner"}


def make(arch, out):
    if arch in LEARNED:
        return learned(arch, out)
    if arch in OWN:
        import importlib
        module, _, function = OWN[arch].partition(":")
        return getattr(importlib.import_module(module), function or "make")(out)
    import torch
    import transformers
    cfg_name, model_name, over = CASES[arch]
    if over is None:
        over = CASES[arch.rsplit("-", 1)[0]][2]
    if "vlm_config" in over:
        # ColPali's: the PaliGemma config it wraps, COMMON its text model's
        vlm = over["vlm_config"]
        kw = dict(over, vlm_config=dict(vlm, text_config=dict(COMMON, **vlm["text_config"])))
    elif "thinker_config" in over or "encoder_layers" in over:
        kw = dict(over)		# Qwen's omni models', Whisper's: the case gives it whole
    elif "text_config" in over:
        # a multimodal config: COMMON is the text model's
        kw = dict(over, text_config=dict(COMMON, **over["text_config"]))
    else:
        kw = dict(COMMON)
        kw.update(over)
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = getattr(transformers, model_name)(cfg).to(torch.bfloat16)
    # Random init leaves norms at 1 and biases at 0: perturb every parameter
    # so that a misplaced or missing tensor changes the answers.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    variant = arch.rsplit("-", 1)[-1]
    compressor = quantize_ct(model, variant) if variant in CT_SCHEMES else None
    model.save_pretrained(out, max_shard_size="1MB")
    if arch in ("clip", "siglip"):
        clip_processor(out, cfg)
    elif arch.startswith("jina_ranking"):
        # vLLM formats JinaForRanking's prompts from text, marking each doc
        # and the query with these tokens, whose ids its pooler looks for
        word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
                             "<|embed_token|>": 151670, "<|rerank_token|>": 151671},
                       "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    elif model_name in POOLING or arch.endswith("-st"):
        # vLLM's pooling runner tokenizes even token-id prompts' outputs
        word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3},
                       "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    if arch.endswith("-st"):
        st_modules(out, cfg, model_name.endswith("ForCausalLM"))
    if compressor is not None:
        compressor.update_config(out)
    if arch.startswith("qwen3_moe-nvfp4") or arch.startswith("qwen3_moe-mxfp4"):
        ct_experts(out, variant)
    if arch.startswith("gemma3_mm"):
        released_vision_names(out)
        gemma3_processor(out, cfg)
    if arch.startswith(("gemma4_mm", "embedding_gemma2")):
        gemma4_processor(out, cfg)
    if arch.startswith("gemma4_unified"):
        gemma4_processor(out, cfg)
        released_gemma4_unified(out)
    if arch.startswith(("qwen3_5_vl", "qwen3_vl", "qwen4_exp_vl")):
        qwen3_vl_processor(out, cfg)
    if arch.startswith(("qwen2_5_vl", "qwen2_vl", "jina_vl")):
        qwen3_vl_processor(out, cfg, "Qwen2_5_VLProcessor" if arch.startswith(
            "qwen2_5") else "Qwen2VLProcessor", "Qwen2VLVideoProcessor")
    if arch == "jina_vl":
        jina_vl_release(out, cfg)
    if arch == "qwen3_vl_moe":
        released_fused_experts(out)
    if arch == "longcat_flash":
        released_zero_experts(out, cfg.n_routed_experts)
        released_longcat_mtp(out)
    if arch.startswith("olmo_hybrid"):
        olmo_hybrid_released(out, cfg)
    if arch.startswith("llama_bidir"):
        from ckpt_io import update_config
        update_config(out, lambda c: c.update(
            architectures=["LlamaBidirectional" + ("ForSequenceClassification"
                                                   if arch.endswith("_cls") else "Model")],
            pooling="avg"))
    if arch.startswith("deepseek_v3_bidir"):
        from ckpt_io import update_config
        update_config(out, lambda c: c.update(architectures=["DeepseekV3BidirectionalModel"]))
    if arch.startswith("jina_ranking"):
        import torch
        from ckpt_io import add_to_first_shard, update_config
        g = torch.Generator().manual_seed(7)
        h = cfg.hidden_size
        add_to_first_shard(out, {
            "projector.0.weight": (torch.randn(h // 2, h, generator=g) * 0.1).to(torch.bfloat16),
            "projector.2.weight": (torch.randn(512, h // 2, generator=g) * 0.1).to(torch.bfloat16)})
        update_config(out, lambda c: c.update(architectures=["JinaForRanking"]))
    if arch.startswith("voyage_qwen3"):
        import torch
        from ckpt_io import add_to_first_shard, rename_prefix, update_config
        rename_prefix(out, "", "model.")
        g = torch.Generator().manual_seed(7)
        add_to_first_shard(out, {"linear.weight": (torch.randn(
            cfg.num_labels, cfg.hidden_size, generator=g) * 0.05).to(torch.bfloat16)})
        update_config(out, lambda c: c.update(
            architectures=["VoyageQwen3BidirectionalEmbedModel"]))
    if arch == "phimoe":
        from ckpt_io import update_config
        update_config(out, lambda c: c.update(architectures=["PhiMoEForCausalLM"]))
    if arch == "qwen2-mimo":
        mimo_mtp(out)
    if arch == "qwen3_next-layer_scale":
        layer_scales(out)
        qwen_next_mtp(out)
    if arch == "qwen3_5_vl-layer_scale":
        layer_scales(out, "model.language_model.")
        qwen_next_mtp(out, "model.language_model.")
    if arch in ("qwen3_next", "qwen3_5", "qwen3_5_moe"):
        qwen_next_mtp(out)
    if arch in ("qwen3_5_vl", "qwen3_5_vl_moe"):
        qwen_next_mtp(out, "model.language_model.")
    if arch == "qwen4_exp_vl":
        qwen4_exp_mtp(out, "model.language_model.")
    if arch in LLAMA_ALIASES:
        from ckpt_io import update_config
        update_config(out, lambda c: c.update(architectures=[LLAMA_ALIASES[arch]]))
    if arch == "llama4_mm":
        llama4_processor(out, cfg)
    if arch.startswith("mistral3"):
        pixtral_processor(out, cfg)
    if arch.startswith(("qwen2_audio", "audioflamingo3", "glmasr")):
        released_qwen2_audio(out)
        audio_processor(out, cfg)
    if arch.startswith("granite_speech"):
        released_qwen2_audio(out)
        granite_speech_processor(out, cfg)
    if arch.startswith(("qwen3_omni_moe", "clef_omni")):
        omni_processor(out, cfg.thinker_config)
        released_qwen3_omni(out)
    if arch.startswith("clef_omni"):
        clef_head(out, cfg, "float32" if arch == "clef_omni-f32head" else "bfloat16")
    if arch.startswith("granite4_vision"):
        released_vision_names(out, "model.vision_tower.")
        granite4_vision_processor(out, cfg)
    if arch.startswith(("minicpmv4_6", "minicpmv4_7")):
        minicpmv_processor(out, cfg)
    if arch.startswith("qwen2_5_omni"):
        omni_processor(out, cfg.thinker_config)
        released_qwen2_5_omni(out)
    if arch.startswith(("qwen3_asr", "whisper")):
        audio_processor(out, cfg)
        if arch == "qwen3_asr":
            released_qwen3_asr(out)
    if arch.startswith("paddleocr_vl"):
        paddleocr_vl_processor(out, cfg)
    if arch.startswith("blip2"):
        blip2_processor(out, cfg)
    if arch.startswith("exaone4_5"):
        exaone4_5_processor(out, cfg)
        # the multi-token prediction block EXAONE 4.5 ships (mtp.fc,
        # mtp.pre_fc_norm_*, mtp.norm, an EXAONE 4 layer mtp.layers.0:
        # exaone4_5_mtp.py); as the release, num_nextn_predict_layers (with
        # _num_mtp_layers and mtp_share_layers) in text_config only and
        # vocab_size at the top too: vLLM's draft Exaone4_5_MTP reads
        # vocab_size from the top-level config and num_nextn_predict_layers
        # there with default 1 (transformers 5.19's Exaone4_5_Config keeps
        # such keys without declaring them).  The release's layer_types'
        # entries for the MTP layers are left out: transformers 5.19 refuses
        # layer_types longer than num_hidden_layers (validate_layer_type)
        def mtp_config(c):
            c["text_config"].update(num_nextn_predict_layers=1, _num_mtp_layers=1,
                                    mtp_share_layers=False)
            c.update(vocab_size=c["text_config"]["vocab_size"])
        qwen_next_mtp(out, "model.language_model.", config=mtp_config)
    if arch.startswith(("glm4v", "glm_ocr")):
        glm4v_processor(out, cfg)
    if arch.startswith("hunyuan_vl"):
        hunyuan_vl_processor(out, cfg)
    if arch.startswith("emu3"):
        emu3_processor(out, cfg)
    if arch.startswith("vibevoice_asr"):
        vibevoice_asr_processor(out, cfg)
        # the release's names (transformers' vibevoice_asr conversion
        # mapping reads language_model.model. as model.language_model.);
        # transformers 5.19 saves language_model.model.model., which
        # neither it nor vLLM reads back
        from ckpt_io import rename_prefix
        rename_prefix(out, "language_model.model.model.", "language_model.model.")
    if arch.startswith("glm5_next"):
        glm5_next_processor(out, cfg)
        # the release's spelling of the MLA layers' type (transformers
        # 5.18 renamed it indexed_attention; 5.19's Glm5NextConfig keeps
        # the old one, vLLM counts both as attention: config/model.py
        # _ATTENTION_LAYER_TYPES, and builds MLA for any but
        # linear_attention: glm5next/common/model.py _is_kda_layer)
        from ckpt_io import update_config
        update_config(out, lambda c: c["text_config"].update(layer_types=[
            "deepseek_sparse_attention" if t == "indexed_attention" else t
            for t in c["text_config"]["layer_types"]]))
    if arch == "bee":
        released_bee(out, cfg)
    if arch == "rvl":
        from ckpt_rvl import released
        released(out, cfg)
    if arch == "llava-pixtral":
        pixtral_processor(out, cfg)
    elif arch.startswith("llava"):
        released_vision_names(out)
        llava_processor(out, cfg)
    if arch.startswith("qianfan_ocr"):
        released_qianfan_ocr(out)
    if arch.startswith(("internvl", "qianfan_ocr")):
        internvl_processor(out, cfg)
    if arch.startswith("lfm2_vl"):
        released_vision_names(out, "model.vision_tower.")
        lfm2_vl_processor(out, cfg)
    if arch == "aria":
        aria_processor(out, cfg)
    if arch.startswith("idefics3") or arch.startswith("smolvlm"):
        idefics3_processor(out, cfg, arch.startswith("smolvlm"))
    if arch.startswith("paligemma"):
        released_vision_names(out)
        paligemma_processor(out, cfg)
    if arch == "colpali":
        # vidore's release: the tower under vlm.vision_tower.vision_model.
        released_vision_names(out, "vlm.vision_tower.")
        paligemma_processor(out, cfg.vlm_config)
    if arch.endswith("-tf452"):
        tf452_names(out)
    if arch.startswith("cohere_compass"):
        cohere_compass_processor(out, cfg)
    if arch.startswith("cohere2_vision"):
        released_vision_names(out, "model.vision_tower.")
        cohere2_vision_processor(out, cfg)
    if arch == "inkling":
        from ckpt_inkling import released_inkling
        released_inkling(out, cfg)
    if arch == "muse_glimmer":
        released_muse_glimmer(out, cfg)
    if arch.startswith("hcx_vision_v2"):
        released_hcx_vision_v2(out, cfg)
    if arch == "opencua":
        released_opencua(out, cfg)
    if arch == "muse_glimmer-text":
        released_muse_glimmer(out, cfg)
        text_release(out, "MuseGlimmerForCausalLM", {
            "model.language_model.": "model.", "lm_head.": "lm_head."})
    if arch == "nomic_bert-moe":
        nomic_moe(out, cfg)
    if arch.startswith("qwen2_rm"):
        qwen2_rm(out, cfg)
    if arch.startswith("minimax_m3"):
        from ckpt_minimax_m3 import released_minimax_m3
        released_minimax_m3(out, cfg)
    if arch == "minimax_m3-text":
        # the config stays the multimodal one (model_type minimax_m3_vl):
        # vLLM 0.32 registers its own config class for that type alone,
        # whose text config declares rope_theta and partial_rotary_factor,
        # which MiniMaxM3SparseForCausalLM reads and transformers 5.19's
        # MiniMaxM3VLTextConfig lacks
        text_release(out, "MiniMaxM3SparseForCausalLM", {
            "language_model.model.": "model.", "language_model.lm_head.": "lm_head."},
            hoist=False)
    if arch == "inkling_mm":
        from ckpt_inkling import released_inkling_mm
        released_inkling_mm(out, cfg)
    if arch.startswith("kimi_k25"):
        released_kimi_k25(out)
        kimi_k25_processor(out, cfg)
    if arch == "kimi_k25-int4":
        int4_experts(out)
    if arch in MTP:
        add_mtp_layer(out)
    # GLM-5's release (zai-org/GLM-5) ships its MTP layer model.layers.78
    # without embed_tokens or shared_head.head, as GLM-4.6's
    if arch in ("glm4_moe-46", "deepseek_v3-nohead", "glm_moe_dsa"):
        add_mtp_layer(out, own_head=False)
    if arch == "deepseek_v3-nohead2":
        add_mtp_layer(out, own_head=False, nextn=2)
    if arch == "glm_ocr":
        # GLM-OCR ships its MTP layer as the text model's layer 16
        add_mtp_layer(out, "model.language_model.")
    if arch.startswith("glm5_next"):
        glm5_next_mtp(out)
    if arch == "glm5_next-text":
        text_release(out, "Glm5NextForCausalLM", {
            "model.language_model.": "model.", "lm_head.": "lm_head."})
    if arch.startswith("deepseek_v4"):
        from ckpt_dsv4 import deepseek_v4_native
        deepseek_v4_native(out)
    if arch == "deepseek_v4_vl":
        from ckpt_dsv4 import deepseek_v4_vision
        deepseek_v4_vision(out)
    elif arch == "deepseek_v4_vl-h3":
        from ckpt_dsv4 import deepseek_v4_vision
        deepseek_v4_vision(out, vision_n_heads=3, vision_dim=48)
    if arch == "deepseek_v4-dspark":
        from ckpt_dsv4 import deepseek_v4_dspark
        deepseek_v4_dspark(out)
    if arch == "deepseek_v4-fp8":
        from ckpt_dsv4 import deepseek_v4_fp8
        deepseek_v4_fp8(out)
    elif arch == "deepseek_v4-fp4":
        from ckpt_dsv4 import deepseek_v4_fp4
        deepseek_v4_fp4(out)
    elif arch == "deepseek_v32-fp8":
        deepseek_v32_fp8(out)
    elif arch.endswith("-fp8"):
        quantize_fp8(out)
    elif arch.endswith("-fp8t"):
        quantize_fp8(out, per_tensor=True)
    elif arch.endswith("-fp8mo") or arch.endswith("-fp8moh"):
        # ModelOpt's FP8 (NVIDIA's -FP8 checkpoints): per-tensor weight and
        # activation scales, ModelOpt's quantization_config; -fp8moh in
        # its older form, hf_quant_config.json alone
        import json
        from ckpt_io import update_config
        quantize_fp8(out, per_tensor=True)
        q = {"quant_method": "modelopt", "quant_algo": "FP8",
             "ignore": ["lm_head"], "kv_cache_scheme": None,
             "producer": {"name": "modelopt"}}
        if arch.endswith("-fp8moh"):
            q = None
            with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
                json.dump({"producer": {"name": "modelopt"}, "quantization": {
                    "quant_algo": "FP8", "kv_cache_quant_algo": None,
                    "exclude_modules": ["lm_head"]}}, f, indent=2)
        update_config(out, lambda cfg: cfg.pop("quantization_config") if q is None
                      else cfg.update(quantization_config=q))
    elif arch.endswith("-mxfp4"):
        mxfp4(out)
    elif variant == "nvfp4mo":
        from ckpt_io import modelopt_nvfp4
        modelopt_nvfp4(out)
    elif variant in ("fbgemm", "quark", "quark_ptpc", "quark_block", "quark_mxfp4",
                     "quark_mxfp6", "quark_mxfp8", "quark_int8", "quark_int8c", "quark_w4a16",
                     "quark_w4a16s", "quark_w4a16h", "quark_w4a16q"):
        import ckpt_fp8x
        getattr(ckpt_fp8x, variant)(out)
    elif variant in ("gptq", "gptqc", "awq"):
        from ckpt_gptq import gptq_awq
        gptq_awq(out, variant)


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(list(CASES) + list(LEARNED) + list(OWN)))
    elif len(sys.argv) == 3 and (sys.argv[1] in CASES or sys.argv[1] in LEARNED or
                                 sys.argv[1] in OWN):
        make(sys.argv[1], sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--into":
        import os
        import shutil
        import traceback
        failed = []
        for arch in sys.argv[3:]:
            out = os.path.join(sys.argv[2], "src-" + arch)
            try:
                make(arch, out + ".tmp")
                os.rename(out + ".tmp", out)
            except Exception:
                traceback.print_exc()
                print(f"make_ckpt: {arch} failed", file=sys.stderr)
                shutil.rmtree(out + ".tmp", ignore_errors=True)
                failed.append(arch)
        sys.exit(1 if failed else 0)
    else:
        sys.exit(__doc__)
