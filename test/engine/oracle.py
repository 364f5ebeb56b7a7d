#!/usr/bin/env python3
"""vLLM as the reference for wshard's output.  One engine per process: the
shell driver (test/engine/run) runs each command in its own process group and
kills the group when it ends, since vLLM's workers can outlive the LLM object.

    oracle.py ref SRC TP DUMP ANSWERS
        Loads the HuggingFace checkpoint SRC in vLLM at tensor-parallel size
        TP.  Every worker saves its model's state as ShardedStateLoader would
        load it (the state dict after _filter_subtensors, taken just before
        process_weights_after_loading repacks the weights for the CPU
        kernels) to DUMP/model-rank-R.safetensors.  Then generates greedily
        from fixed token-id prompts and writes tokens and top-5 logprobs to
        ANSWERS (JSON); for an embedding model or a classifier (POOLING,
        runner "pooling"), each prompt's embedding or class probabilities.
    oracle.py load OUT TP ANSWERS [FORMAT]
        Loads wshard's output OUT with load_format=FORMAT (sharded_state, or wshard: the plugin of lib/vllm) and writes
        the answers for the same prompts.
    oracle.py time MODEL TP FORMAT ANSWERS
        Loads MODEL with load_format=FORMAT (auto or sharded_state) and
        writes the answers with the wall time of LLM() (scripts/bench
        --engine; vLLM's own "Loading weights took" line is in the log).
    oracle.py bytes DUMP OUT TP
        Compares, for every rank, vLLM's state (DUMP) with wshard's rank files
        (OUT/model-rank-R-part-P.safetensors): the same names, dtypes, shapes
        and bytes.  Prints each difference; exits 1 if there is any.
    oracle.py answers A B
        Compares two ANSWERS files: identical tokens and logprobs, or the
        same within the rounding noise of two starts (NOISE; a token the two
        runs chose differently counts only where both saw it tied with the
        other), or exit 1.

    oracle.py serve SOCKET
        The engine server: imports torch and vLLM once, then serves ref,
        load and time requests on the Unix socket SOCKET, each in a process
        forked from it.  With WSHARD_ENGINE_SERVER=SOCKET set, oracle.py
        ref/load/time sends its command line, environment and standard
        streams there instead of importing vLLM itself: a start saves the
        imports, 9 of its 14 seconds here.

    ref and load take --mtp MODEL first: the engine runs MTP speculative
    decoding (one token) with its draft from MODEL (the checkpoint for
    ref, wshard's output of the draft for load); ref saves each worker's
    draft state too, as DUMP/draft-rank-R.safetensors, which bytes
    compares with --draft first.  --eagle3 MODEL the same with method
    eagle3, MODEL an EAGLE-3 draft's own checkpoint (for ref) or wshard's
    output of it (for load); --dflash MODEL with method dflash, MODEL a
    DFlash draft's; --dspark MODEL with method dspark, MODEL a DSpark
    draft's (on the CPU build only with WSHARD_ORACLE_DSPARK, the hook's);
    --medusa MODEL with method medusa and as many
    speculative tokens as MODEL's config.json has heads (num_heads);
    --eagle MODEL with method eagle, MODEL an EAGLE-1 draft's.
    ref, load and time take --ep PLACEMENT first (linear or round_robin):
    the engine runs with enable_expert_parallel=True and that
    expert_placement_strategy.  ref, load and bytes take --pp P first: the
    engine runs P pipeline stages (pipeline_parallel_size), each worker's
    state is DUMP/model-pp-S-tp-R.safetensors and wshard's rank files are
    OUT/model-pp-S-tp-R-part-P.safetensors.
"""
import glob
import json
import os
import struct
import sys

# (loaded as a module by scripts/learn-rules too, from another folder)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_ckpt  # noqa: E402

PROMPTS = [[1, 17, 243, 9, 88, 512, 7], [400, 3, 3, 901, 56], [64, 128, 999]]
# Embedding models and classifiers (vLLM's runner "pooling"): the answers
# are the prompts' embeddings or class probabilities, not generated tokens.
# (make_ckpt.py's classes, and the architectures config.json names for
# weights a transformers class saved: NVIDIA's bidirectional Llamas)
POOLING = set(make_ckpt.POOLING) | {"LlamaBidirectionalModel",
                                    "LlamaBidirectionalForSequenceClassification",
                                    "Qwen2ForRewardModel", "Qwen2ForProcessRewardModel",
                                    "ColModernVBertForRetrieval", "InternLM2ForRewardModel",
                                    "GteNewModel", "GteNewForSequenceClassification",
                                    "ColQwen3", "OpsColQwen3Model", "Qwen3VLNemotronEmbedModel",
                                    "ColQwen3_5",
                                    "DeepseekV3BidirectionalModel",
                                    "VoyageQwen3BidirectionalEmbedModel", "JinaForRanking",
                                    "JinaEmbeddingsV5Model",
                                    "HF_ColBERT", "ColBERTModernBertModel",
                                    "ColBERTJinaRobertaModel", "ColBERTLfm2Model",
                                    "BertSpladeSparseEmbeddingModel", "BgeM3EmbeddingModel",
                                    "LlamaNemotronVLModel",
                                    "LlamaNemotronVLForSequenceClassification",
                                    "Qwen3ASRForcedAlignerForTokenClassification"}
# Multi-vector retrievers: an embedding a token (task token_embed); the
# ColBERT late-interaction encoders (text alone)
COLBERT = ("HF_ColBERT", "ColBERTModernBertModel", "ColBERTJinaRobertaModel",
           "ColBERTLfm2Model")
RETRIEVERS = ("ColPaliForRetrieval", "ColModernVBertForRetrieval", "ColQwen3",
              "OpsColQwen3Model", "Qwen3VLNemotronEmbedModel", "ColQwen3_5") + COLBERT
# Pooling models whose answer is a vector a token (task token_classify;
# BGE-M3: its sparse head's weight a token, bos and eos left out)
TOKEN_CLASSIFY = ("BertForMaskedLM", "Qwen2ForRewardModel", "Qwen2ForProcessRewardModel",
                  "InternLM2ForRewardModel", "BgeM3EmbeddingModel")
# Multimodal models prompted with text alone: Muse Glimmer (its profiling
# image is too large here), ERNIE-4.5-VL (its processor is Baidu's remote
# code, which the test checkpoint does not ship: its tower is checked by
# bytes), MiniCPM-V 2.6 / 4.0 / 4.5 (its image processor is openbmb's
# remote code, which the test checkpoint stands in for with a stub that
# processes no image: its tower and resampler are checked by bytes),
# Step-3.7 (vLLM's Step-3 processor sizes images for the release's tower,
# 728 pixels, not the test's: its tower is checked by bytes), StepVL (the
# same processor, inherited from Step3VL; and with a 728-pixel tower
# vLLM's CPU build still fails: step_vl.py's PerceptionEncoder.forward
# hands vit_large_projector a transposed view, which the CPU gemm, oneDNN's,
# refuses: "Expected a.stride(-1) == 1"), Step-3 (the same processor; its
# test tower is 56 pixels: checked by bytes), HunYuanVL (vLLM's CPU build
# fails on an image: transformers' HunYuanVLVisionPatchMerger.forward hands
# its mlp a permuted view, which the CPU gemm, oneDNN's, refuses: "Expected
# a.stride(-1) == 1"; its tower is checked by bytes), Ultravox (its
# processor is fixie-ai's remote code, which the test checkpoint does not
# ship: its tower and projector are checked by bytes), Kanana-V (its
# processor is Kakao's remote code, which the test checkpoint stands in for
# with one that processes no image, ckpt_kanana_v.write_stub_processor: its
# tower and abstractor are checked by bytes), MiniCPM-o (the same stub
# image processor as MiniCPM-V's: its towers are checked by bytes),
# Phi-4-multimodal (its processor is Microsoft's remote code, which the
# test checkpoint stands in for with one that vLLM only needs to start,
# phi4mm_processing.py: its image and audio towers are checked by bytes),
# FunAudioChat (vLLM's processor reads a speech tokenizer from the model's
# speech_tokenizer/ folder, funaudiochat.py:527-533, which the test
# checkpoint does not ship; its towers are checked by bytes),
# VibeVoice-ASR (vLLM's CPU build fails on a second of sound: transformers'
# VibeVoice tokenizer encoder hands a linear a transposed view, which the
# CPU gemm, oneDNN's, refuses: "Expected a.stride(-1) == 1"; its encoders
# and projector are checked by bytes),
# Ling 3 VL (its processor is inclusionAI's remote code, which the test
# checkpoint stands in for with Qwen3-VL's; bytes only)
TEXT_PROMPTS_ONLY = ("MuseGlimmerForConditionalGeneration", "MuseGlimmerForCausalLM", "MiniCPMV",
                     "MiniCPMO",
                     "Ernie4_5_VLMoeForConditionalGeneration",
                     "Step3p7ForConditionalGeneration", "StepVLForConditionalGeneration",
                     "Step3VLForConditionalGeneration", "HunYuanVLForConditionalGeneration",
                     "UltravoxModel", "KananaVForConditionalGeneration", "Phi4MMForCausalLM",
                     "FunAudioChatForConditionalGeneration",
                     "VibeVoiceAsrForConditionalGeneration",
                     "BailingMoeV3VLForConditionalGeneration")
GRANITE_SPEECH = ("GraniteSpeechForConditionalGeneration",
                  "GraniteSpeechPlusForConditionalGeneration")
MAX_TOKENS = 8
MAX_MODEL_LEN = 256


def engine_env():
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    # The engine core in this process and, at tp 1, the worker too: each
    # process start costs seconds of imports.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The hook (hook/sitecustomize.py) in every engine process: this one,
    # and through PYTHONPATH those vLLM starts.
    hook = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hook")
    os.environ["PYTHONPATH"] = hook + os.pathsep + os.environ.get("PYTHONPATH", "")
    import runpy
    runpy.run_path(os.path.join(hook, "sitecustomize.py"))


def eager():
    """vLLM 0.32 compiles its sampler's logprobs gather with torch.compile
    (v1/sample/sampler.py, gather_logprobs): dynamo and inductor take 5 s of
    each start's first step, on a model whose whole generation takes a
    tenth of a second.  The oracle's runs take it eagerly, the reference
    and wshard's output alike (answers checked equal both ways)."""
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    import torch._dynamo
    torch._dynamo.config.disable = True


def image_prompt(model):
    """A prompt with one image (fixed pseudo-random pixels, the size of the
    vision config), for a multimodal checkpoint: its answers depend on every
    tensor of the vision tower and the projector.  The image stands where
    the config's boi_token_index is; vLLM expands it."""
    import numpy as np
    from PIL import Image
    if not os.path.exists(os.path.join(model, "config.json")):
        # Mistral's own format with a vision encoder (params.json's
        # vision_encoder: PixtralForConditionalGeneration): vLLM's processor
        # expands nothing, only checks the image's tokens as Mistral's
        # tokenizer writes them, rows of [IMG] each ended by [IMG_BREAK],
        # the last by [IMG_END] (ckpt_mistral.py: a 56x56 image of 14-pixel
        # patches merged 2x2, two rows of two)
        v = json.load(open(os.path.join(model, "params.json")))["vision_encoder"]
        size = v["max_image_size"]
        side = size // v["patch_size"] // v["spatial_merge_size"]
        image = ([v["image_token_id"]] * side + [v["image_break_token_id"]]) * side
        image[-1] = v["image_end_token_id"]
        px = np.random.default_rng(7).integers(0, 256, (size, size, 3), dtype=np.uint8)
        return {"prompt_token_ids": [2, 17] + image + [243, 9],
                "multi_modal_data": {"image": Image.fromarray(px)}}
    cfg = json.load(open(os.path.join(model, "config.json")))
    if cfg["architectures"][0] == "FireRedASR2ForConditionalGeneration":
        # FireRedASR2: a second of sound at <|AUDIO|> alone (ckpt_fireredasr2.py:
        # 999), which vLLM expands to the feature extractor's count
        wav = np.random.default_rng(7).uniform(-0.5, 0.5, 16000).astype(np.float32)
        return {"prompt_token_ids": [2, 17, 999, 243, 9],
                "multi_modal_data": {"audio": (wav, 16000)}}
    if any(a in cfg["architectures"][0] for a in ("Qwen2Audio", "AudioFlamingo3", "Qwen3ASR",
                                                  "GlmAsr", "GraniteSpeech", "MiDashengLM",
                                                  "FunASR", "MossTranscribeDiarize", "MossAudio")):
        # one second of fixed pseudo-random sound at 16 kHz at the audio
        # token, which vLLM expands: Qwen2-Audio's <|AUDIO|> between
        # <|audio_bos|> and <|audio_eos|> (make_ckpt.py: 997, 996), Qwen3-ASR's
        # <|audio_pad|> between <|audio_start|> and <|audio_end|>, GLM-ASR's
        # <|pad|> between <|begin_of_audio|> and <|end_of_audio|> and
        # MiDashengLM's <|AUDIO|> between <|audio_bos|> and <|audio_eos|>
        # (ckpt_midashenglm.py; the same ids), MOSS-Transcribe-Diarize's
        # <|audio_pad|> between <|audio_start|> and <|audio_end|>
        # (ckpt_moss_td.py; the same ids), MOSS-Audio's <|AUDIO|> between
        # <|audio_bos|> and <|audio_eos|> (ckpt_moss_audio.py: its
        # processor_config.json's ids; vLLM's default ids are the
        # release's, past the tiny vocabulary), Audio Flamingo 3's <sound>,
        # Granite Speech's <|audio|> and FunASR's <|AUDIO|> (ckpt_funasr.py:
        # 999) alone
        wav = np.random.default_rng(7).uniform(-0.5, 0.5, 16000).astype(np.float32)
        tc = cfg.get("thinker_config", cfg)
        audio = ([cfg["audio_token_index"]] if cfg["architectures"][0] in GRANITE_SPEECH
                 else [997, 999, 996] if cfg["architectures"][0] == "MossAudioModel"
                 else [997, cfg["audio_token_index"], 996] if "audio_token_index" in cfg
                 else [997, tc["audio_token_id"], 996] if any(
                     a in cfg["architectures"][0] for a in ("Qwen3ASR", "GlmAsr", "MiDashengLM",
                                                            "MossTranscribeDiarize"))
                 else [999] if cfg["architectures"][0] == "FunASRForConditionalGeneration"
                 else [cfg["audio_token_id"]])
        return {"prompt_token_ids": [2, 17] + audio + [243, 9],
                "multi_modal_data": {"audio": (wav, 16000)}}
    if any(a in cfg["architectures"][0] for a in ("Qwen3OmniMoe", "Qwen2_5Omni")):
        # Qwen3-Omni and Qwen2.5-Omni: a 56x56 image between the vision
        # start and end tokens and a second of sound between the audio
        # start and end tokens (make_ckpt.py), each pad expanded by vLLM
        tc = cfg["thinker_config"]
        px = np.random.default_rng(7).integers(0, 256, (56, 56, 3), dtype=np.uint8)
        wav = np.random.default_rng(7).uniform(-0.5, 0.5, 16000).astype(np.float32)
        image = tc.get("image_token_id", tc.get("image_token_index"))
        audio = tc.get("audio_token_id", tc.get("audio_token_index"))
        return {"prompt_token_ids": [2, 17, tc["vision_start_token_id"], image,
                                     tc["vision_end_token_id"], tc["audio_start_token_id"],
                                     audio, tc["audio_end_token_id"], 243, 9],
                "multi_modal_data": {"image": Image.fromarray(px), "audio": (wav, 16000)}}
    if cfg["architectures"][0] == "MoonshotKimiaForCausalLM":
        # Kimi-Audio: a second of sound at <|im_kimia_text_blank|> between
        # <|im_media_begin|> and <|im_media_end|> (the ids vLLM's
        # KimiAudioProcessor has; ckpt_kimi_audio.py), which vLLM expands
        wav = np.random.default_rng(7).uniform(-0.5, 0.5, 16000).astype(np.float32)
        return {"prompt_token_ids": [2, 17, 151661, 151666, 151663, 243, 9],
                "multi_modal_data": {"audio": (wav, 16000)}}
    if cfg["architectures"][0] == "Gemma3nForConditionalGeneration":
        # Gemma 3n: an image (768x768, its processor's size) at its image
        # token and a second of sound at its audio token, each expanded by
        # vLLM (ckpt_gemma3n.py)
        px = np.random.default_rng(7).integers(0, 256, (768, 768, 3), dtype=np.uint8)
        wav = np.random.default_rng(7).uniform(-0.5, 0.5, 16000).astype(np.float32)
        return {"prompt_token_ids": [2, 17, cfg["image_token_id"], 243,
                                     cfg["audio_token_id"], 9],
                "multi_modal_data": {"image": Image.fromarray(px), "audio": (wav, 16000)}}
    if cfg["architectures"][0] in ("CLIPModel", "SiglipModel"):
        # CLIP and SigLIP embed an image alone: no tokens (vLLM refuses text
        # beside it)
        size = cfg["vision_config"]["image_size"]
        px = np.random.default_rng(7).integers(0, 256, (size, size, 3), dtype=np.uint8)
        return {"prompt_token_ids": [], "multi_modal_data": {"image": Image.fromarray(px)}}
    if "LlavaNextVideo" in cfg["architectures"][0]:
        # LLaVA-NeXT-Video takes videos only: four 56x56 frames at its
        # video token, which vLLM expands
        px = np.random.default_rng(7).integers(0, 256, (4, 56, 56, 3), dtype=np.uint8)
        return {"prompt_token_ids": [2, 17, cfg["video_token_index"], 243, 9],
                "multi_modal_data": {"video": px}}
    if "Llama4" in cfg["architectures"][0]:
        # Llama 4 expands its image token
        size = cfg["vision_config"]["image_size"]
        image = [cfg["image_token_index"]]
    elif cfg["architectures"][0] == "Phi4ForCausalLMV":
        # Phi-4-reasoning-vision: <image> (ckpt_phi4_siglip.py's tokenizer:
        # 999), which vLLM replaces by its image token 100256, one a patch
        # (the NaFlex processor makes any image 256 patches of 16 pixels)
        size = 64
        image = [999]
    elif any(a in cfg["architectures"][0] for a in ("KimiVL", "OpenCUA")):
        # Kimi-VL and OpenCUA: the media pad (media_placeholder_token_id),
        # which vLLM expands (56x56, 4x4 patches of 14 merged 2x2 into 4
        # tokens)
        size = 56
        image = [cfg["media_placeholder_token_id"]]
    elif cfg["architectures"][0] == "LlavaOnevision2ForConditionalGeneration":
        # LLaVA-OneVision-2: the image pad between the vision start and end
        # tokens, as its chat template writes it (ckpt_llava_onevision2.py:
        # 997, 999, 996); vLLM expands the pad (56x56: 4 tokens)
        size = 56
        image = [cfg["vision_start_token_id"], cfg["image_token_id"],
                 cfg["vision_end_token_id"]]
    elif cfg["architectures"][0] == "RForConditionalGeneration" or any(
            a in cfg["architectures"][0] for a in ("Mistral3", "LightOnOCR", "Llava", "Bee", "InternVL",
                                                    "InternS1",
                                                    "QianfanOCR",
                                                    "Cohere2Vision", "Idefics3", "SmolVLM",
                                                    "Lfm2Vl", "Granite4Vision", "H2OVLChatModel",
                                                    "NVLM_D", "SkyworkR1VChatModel",
                                                    "Eagle2_5_VL", "LlamaNemotronVL")):
        # one image token, which vLLM expands (Mistral 3 into rows of
        # [IMG], InternVL between <img> and </img>, Idefics3 between
        # <fake_token_around_image>s, LFM2-VL between <|image_start|> and
        # <|image_end|>); 56x56, Command A Vision's and LFM2-VL's 64x64
        # (make_ckpt.py)
        size = cfg["vision_config"]["image_size"] if "Cohere2Vision" in \
            cfg["architectures"][0] else 64 if "Lfm2Vl" in cfg["architectures"][0] else 56
        image = [cfg.get("image_token_index", cfg.get("image_token_id"))]
        if cfg["architectures"][0] in ("QianfanOCRForConditionalGeneration",
                                       "InternVLChatModel", "H2OVLChatModel", "NVLM_D",
                                       "SkyworkR1VChatModel",
                                       "Eagle2_5_VLForConditionalGeneration",
                                       "LlamaNemotronVLModel",
                                       "LlamaNemotronVLForSequenceClassification"):
            # InternVL's original layout, Eagle 2.5 and Llama Nemotron VL
            # (vLLM's InternVL processor): vLLM replaces an <image> token
            # (make_ckpt.py's tokenizer: 994)
            image = [994]
    elif "DeepseekVLV2" in cfg["architectures"][0]:
        # DeepSeek-VL2: its <image> token (ckpt_deepseek_vl2.py's tokenizer:
        # 994), which vLLM expands into a global and a local 384x384 view
        size = 384
        image = [994]
    elif cfg["architectures"][0] in ("DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM",
                                     "UnlimitedOCRForCausalLM"):
        # DeepSeek-OCR: its <image> token (ckpt_deepseek_ocr.py's tokenizer:
        # 994); an image no larger than 640 pixels is one global view, padded
        # to 1024 (SAM at 64x64 patches, then CLIP): 16 rows of 16 tokens and
        # a newline each, and a separator, 273 tokens (DeepSeek-OCR-2: SAM,
        # then the Qwen2 encoder, 256 tokens and the separator)
        size = 256
        image = [994]
    elif "ColPali" in cfg["architectures"][0]:
        # ColPali: PaliGemma's prompt under vlm_config (an image, then text)
        size = cfg["vlm_config"]["vision_config"]["image_size"]
        image = []
    elif "ColModernVBert" in cfg["architectures"][0]:
        # ColModernVBERT: vLLM puts the image's tokens before the prompt
        size = cfg["vision_config"]["image_size"]
        image = []
    elif any(a in cfg["architectures"][0] for a in ("PaliGemma", "Blip2")):
        # PaliGemma: no image token in the prompt; vLLM inserts the image's
        # tokens and a bos after the prompt's bos (BLIP-2: its query
        # tokens' places before the prompt)
        size = cfg["vision_config"]["image_size"]
        image = []
    elif "Aria" in cfg["architectures"][0]:
        # Aria: its image token between <|fim_prefix|> and <|fim_suffix|>
        # (make_ckpt.py: 997, 996), expanded by vLLM; 490x490
        size = 490
        image = [997, cfg["image_token_index"], 996]
    elif "MiniCPMV4" in cfg["architectures"][0]:
        # MiniCPM-V 4.6: its image pad, which vLLM expands between <image>
        # and </image> (make_ckpt.py: one 56x56 slice)
        size = 56
        image = [cfg["image_token_id"]]
    elif "Exaone4_5" in cfg["architectures"][0]:
        # EXAONE 4.5: the image pad between <vision> and </vision>
        # (make_ckpt.py's tokenizer: 997, 996)
        size = 56
        image = [997, cfg["image_token_id"], 996]
    elif cfg["architectures"][0] == "Phi3VForCausalLM":
        # Phi-3-V: its <|image_1|> tag (ckpt_phi3v.py's tokenizer: 32045),
        # which vLLM expands into its fixed placeholder id 32044
        size = 336
        image = [32045]
    elif cfg["architectures"][0] == "GLM4VForCausalLM":
        # GLM-4V (glm-4v-9b): its image pad (pad_token_id) between
        # <|begin_of_image|> and <|end_of_image|>, which vLLM expands; the
        # tower takes vision_config's image_size
        size = cfg["vision_config"]["image_size"]
        image = [cfg["boi_token_id"], cfg["pad_token_id"], cfg["eoi_token_id"]]
    elif any(a in cfg["architectures"][0] for a in ("Glm4v", "GlmOcr")):
        # GLM-4.1V and GLM-OCR: the image pad between its begin and end tokens
        size = 56
        image = [cfg["image_start_token_id"], cfg["image_token_id"],
                 cfg["image_end_token_id"]]
    elif "DotsOCR" in cfg["architectures"][0]:
        # dots.ocr: its <|imgpad|> between <|img|> and <|endofimg|>
        # (ckpt_dots_ocr.py: 997, 996), which vLLM expands; 56x56
        size = 56
        image = [997, cfg["image_token_id"], 996]
    elif "boi_token_index" in cfg:
        # Gemma 3 expands its boi token
        size = cfg["vision_config"]["image_size"]
        image = [cfg["boi_token_index"]]
    elif "Gemma4" in cfg["architectures"][0]:
        # Gemma 4 expands its image token; its processor resizes the image
        # to whole 3x3 blocks of 16-pixel patches (make_ckpt.py)
        size = 96
        image = [cfg["image_token_id"]]
    elif "KimiK25" in cfg["architectures"][0]:
        # Kimi-K2.5: one "vision chunk" (an image), its pad token between
        # the media begin/content and end tokens (make_ckpt.py: 995 is
        # <|media_content|>); vLLM expands the pad.
        px = np.random.default_rng(7).integers(0, 256, (56, 56, 3), dtype=np.uint8)
        return {"prompt_token_ids": [2, 17, cfg["vision_start_token_id"], 995,
                                     cfg["image_token_id"],
                                     cfg["vision_end_token_id"], 243, 9],
                "multi_modal_data": {"vision_chunk": {
                    "type": "image", "image": Image.fromarray(px), "uuid": None}}}
    elif cfg["architectures"][0] in ("Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM"):
        # Ovis2.5: <image> (ckpt_ovis2_5.py's tokenizer: 151669), which vLLM
        # replaces by image pads between two indicators; its processor makes
        # any image at least 448x448 (784 patches, 196 pads)
        size = 56
        image = [151669]
    elif cfg["architectures"][0] == "Ovis":
        # Ovis2: <image> (ckpt_ovis.py's tokenizer: 151665), which vLLM
        # replaces by image pads (a 56x56 image: one crop of 4x4 patches
        # merged 2x2, 7 pads with its indicators)
        size = 56
        image = [151665]
    elif cfg["architectures"][0] == "Emu3ForConditionalGeneration":
        # Emu3: its <image> (make_ckpt.py: 999), which vLLM expands into
        # the VQ-VAE's tokens of a 32x32 image (4 rows of 4, each with its
        # row end)
        size = 32
        image = [cfg["vocabulary_map"]["<image>"]]
    elif cfg["architectures"][0] == "Llama_Nemotron_Nano_VL":
        # Llama-3.1-Nemotron-Nano-VL: <image> (ckpt_llama_nemotron_vl.py:
        # 994), which vLLM replaces by <img>, <image> x 4 and </img>; one
        # 64x64 tile of 16-pixel patches through the stand-in C-RADIO
        size = 64
        image = [994]
    elif cfg["architectures"][0].startswith("NemotronH_"):
        # Nemotron-H VL and omni: <image> (ckpt_nano_nemotron_vl.py: 994),
        # which vLLM replaces by <img>, the image's context tokens and
        # </img>; one 64x64 tile of 16-pixel patches
        size = 64
        image = [994]
    elif cfg["architectures"][0] == "IsaacForConditionalGeneration":
        # Isaac: <image> (ckpt_isaac.py: 997), which vLLM's processor
        # replaces by <|image_pad|>, one a 2x2 block of 16-pixel patches; its
        # processor scales the image up to 256 patches at least (64 tokens)
        size = 56
        image = [997]
    elif cfg["architectures"][0] in ("HfMoondream", "Moondream3ForCausalLM"):
        # Moondream 3: its bos and <image> (ckpt_moondream3.py's tokenizer:
        # 0, 994), which vLLM replaces by the bos and 729 image tokens, the
        # embeddings of the 27x27 global crop (any image up to 378 pixels
        # is one crop of 378, and one local crop)
        size = 56
        image = [0, 994]
    elif cfg["architectures"][0] == "MolmoForCausalLM":
        # Molmo: vLLM inserts the image's tokens after the <|endoftext|>
        # its processor puts first (ckpt_molmo.py's stand-in: a 336x336
        # image is a global crop and one tile, 144 tokens each with their
        # rows' ends)
        px = np.random.default_rng(7).integers(0, 256, (336, 336, 3), dtype=np.uint8)
        return {"prompt_token_ids": [17, 243, 9],
                "multi_modal_data": {"image": Image.fromarray(px)}}
    elif cfg["architectures"][0] == "OpenVLAForActionPrediction":
        # OpenVLA: vLLM inserts the image's 256 tokens after the bos
        # (openvla.py:363-370); its own processor makes any image 224x224
        px = np.random.default_rng(7).integers(0, 256, (224, 224, 3), dtype=np.uint8)
        return {"prompt_token_ids": [2, 17, 243, 9],
                "multi_modal_data": {"image": Image.fromarray(px)}}
    elif cfg["architectures"][0] == "BagelForConditionalGeneration":
        # BAGEL: <|image_pad|> (ckpt_bagel.py's tokenizer: 999), which vLLM
        # replaces by vit_max_num_patch_per_side**2 tokens (16: a 56x56
        # image of 14-pixel patches)
        size = 56
        image = [999]
    elif cfg["architectures"][0] == "Molmo2ForConditionalGeneration":
        # Molmo2: <|image|> (ckpt_molmo2.py's tokenizer: 994), which vLLM
        # replaces by the global crop's pooled rows and the tiling's; a
        # 56x84 image is a global crop and two overlapping 56x56 crops
        # (ckpt_molmo2.py's stand-in processor)
        px = np.random.default_rng(7).integers(0, 256, (56, 84, 3), dtype=np.uint8)
        return {"prompt_token_ids": [2, 17, 994, 243, 9],
                "multi_modal_data": {"image": Image.fromarray(px)}}
    elif cfg["architectures"][0] == "HCXVisionV2ForCausalLM":
        # HyperCLOVA X SEED Think: the image pad between <|image_start|>
        # and <|image_end|> (make_ckpt.py: 997, 996), its processor
        # Qwen2-VL's (56x56)
        size = 56
        image = [997, cfg["image_token_id"], 996]
    else:
        # Qwen3-VL style: the image pad between the vision start and end
        # tokens; its processor sizes the image (make_ckpt.py: 56x56; Keye-VL
        # and Keye-VL 1.5 the same, ckpt_keye.py).
        size = 56
        image = [cfg["vision_start_token_id"], cfg["image_token_id"],
                 cfg["vision_end_token_id"]]
    px = np.random.default_rng(7).integers(0, 256, (size, size, 3), dtype=np.uint8)
    return {"prompt_token_ids": [2, 17] + image + [243, 9],
            "multi_modal_data": {"image": Image.fromarray(px)}}


def read_config(model):
    """MODEL's config.json, {} where it has none (Mistral's own format:
    params.json)."""
    try:
        with open(os.path.join(model, "config.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def is_whisper(model):
    """Whisper, and Cohere Transcribe, an encoder-decoder prompted alike
    (vLLM makes its encoder prompt of the sound: cohere_asr.py:1970-1976)."""
    cfg = read_config(model)
    return cfg.get("architectures", [""])[0] in ("WhisperForConditionalGeneration",
                                                 "CohereAsrForConditionalGeneration")


def whisper_prompts():
    """Whisper generates only from sound: each prompt's tokens are the
    decoder's, a second of fixed pseudo-random sound (another for each) the
    encoder's, so every answer runs through both."""
    import numpy as np
    out = []
    for i, p in enumerate(PROMPTS):
        wav = np.random.default_rng(7 + i).uniform(-0.5, 0.5, 16000).astype(np.float32)
        out.append({"encoder_prompt": {"prompt": "", "multi_modal_data": {"audio": (wav, 16000)}},
                    "decoder_prompt": {"prompt_token_ids": p}})
    return out


def is_nemotron_parse(model):
    cfg = read_config(model)
    return cfg.get("architectures", [""])[0] == "NemotronParseForConditionalGeneration"


def nemotron_parse_prompts():
    """Nemotron-Parse's encoder takes an image alone (vLLM makes its
    encoder prompt); each prompt's tokens are the decoder's, a fixed
    pseudo-random 64x64 image (another for each) the encoder's
    (ckpt_nemotron_parse.py: the image_size)."""
    import numpy as np
    from PIL import Image
    out = []
    for i, p in enumerate(PROMPTS):
        px = np.random.default_rng(7 + i).integers(0, 256, (64, 64, 3), dtype=np.uint8)
        out.append({"encoder_prompt": {"prompt": "",
                                       "multi_modal_data": {"image": Image.fromarray(px)}},
                    "decoder_prompt": {"prompt_token_ids": p}})
    return out


def fork_workers():
    """vLLM's CPU platform starts its workers with spawn
    (CpuPlatform.check_and_update_config sets VLLM_WORKER_MULTIPROC_METHOD),
    so each worker imports torch and vLLM again: 12 of a tp 2 start's 40
    seconds here.  Forked, they inherit this process's imports.  The
    engine core has run no OpenMP region before the fork (it runs in this
    process, VLLM_ENABLE_V1_MULTIPROCESSING=0, and computes nothing until
    the workers exist), which is what makes fork unsafe with libgomp.
    WSHARD_ENGINE_FORK=0 keeps vLLM's spawn."""
    from vllm.platforms import cpu
    orig = cpu.CpuPlatform.check_and_update_config.__func__

    def check_and_update_config(cls, vllm_config):
        orig(cls, vllm_config)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"
    cpu.CpuPlatform.check_and_update_config = classmethod(check_and_update_config)


def architecture(model):
    try:
        return json.load(open(os.path.join(model, "config.json")))["architectures"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def clef_omni(model):
    """True for Clef-Omni: a Qwen3-Omni config.json with
    joint_head_config.json beside, which vLLM builds as
    ClefOmniForJointSchema (model_arch_config_convertor.py:650-670), a
    pooling model (task token_classify) whose answers need a joint schema
    (CLEF_SCHEMA); without one it answers nothing (clef_omni.py:297-300)."""
    return architecture(model) == "Qwen3OmniMoeForConditionalGeneration" and \
        os.path.exists(os.path.join(model, "joint_head_config.json"))


# One question of two options on each prompt's last three tokens (spans
# count from the prompt's end: clef_omni.py:9-20)
CLEF_SCHEMA = {"question_types": [1], "question_spans": [[-3, -2]],
               "option_spans": [[-2, -1], [-1, 0]], "option_counts": [2]}


def mistral_audio(model):
    """True for Mistral's own format with an audio encoder (params.json's
    multimodal.whisper_model_args: Voxtral).  vLLM's Voxtral processor
    reads every sound through mistral_common's Audio, which needs the
    soundfile package, absent from the engine's environment: its
    prompts are text alone and its profiling sound is not made."""
    if architecture(model) is not None:
        return False
    try:
        p = json.load(open(os.path.join(model, "params.json")))
    except (OSError, ValueError):
        return False
    return bool((p.get("multimodal") or {}).get("whisper_model_args"))


def vision_layers(model):
    """config.json's vision_n_layers (DeepSeek-V4's vision tower), 0 where
    it has none."""
    try:
        return int(json.load(open(os.path.join(model, "config.json"))).get(
            "vision_n_layers") or 0)
    except (OSError, ValueError, TypeError):
        return 0


def step3p7_overrides(model):
    """Step-3.7's config.json keys that transformers' Step3p7Config drops or
    renames as it reads them and vLLM 0.32 reads under their release names
    (step_vl.py's PerceptionEncoder: the tower's width, heads, layers and
    ls_init_value; step3p5.py: rope_theta, partial_rotary_factors,
    attention_other_setting, moe_layers_enum), as --hf-overrides gives them
    back; rope_scaling as the release has it, where transformers' alias
    gives its per-layer-type rope_parameters, which vLLM's rotary cache
    cannot take."""
    cfg = json.load(open(os.path.join(model, "config.json")))
    tc, vc = cfg.get("text_config", {}), cfg.get("vision_config", {})
    text = {k: tc[k] for k in ("rope_theta", "partial_rotary_factors", "attention_other_setting",
                                "moe_layers_enum", "rope_scaling") if k in tc}
    # (its sliding-window layers' other head count makes num_attention_heads
    # a per-layer attribute, which transformers refuses to read globally
    # unless told; vLLM reads it so, and takes the other from
    # attention_other_setting)
    text["allow_global_per_layer_attribute_access"] = True
    vision = {k: vc[k] for k in ("width", "heads", "layers", "ls_init_value") if k in vc}
    return {"text_config": text, "vision_config": vision}


def arch_settings(model, kw):
    """What an architecture needs of the engine's settings, as its users
    would pass them.  Kimi Linear (KDA beside MLA): vLLM 0.32's CPU platform
    turns prefix caching off for MLA after its hybrid config has sized the
    Mamba blocks for it, and then refuses its own setting ("--mamba-block-size
    can only be set with --enable-prefix-caching"): the size is given as the
    one it takes without prefix caching, max_model_len.  Its Kimi-K3 model
    code also imports the CUTLASS GEMM-AR kernel unless
    VLLM_KIMI_K3_GEMM_AR=0, which a CPU cannot use."""
    arch = architecture(model)
    # (vLLM picks the pooling runner itself where sentence-transformers'
    # modules.json is beside the model; the answers are then embeddings)
    if arch in POOLING or os.path.exists(os.path.join(model, "modules.json")) or \
            clef_omni(model):
        kw.setdefault("runner", "pooling")
    if arch == "BgeM3EmbeddingModel":
        # BGE-M3's answers are its sparse head's (one task an engine: dense
        # embeddings by default)
        from vllm.config import PoolerConfig
        kw.setdefault("pooler_config", PoolerConfig(task="token_classify"))
    if arch in ("KimiLinearForCausalLM", "Glm5NextForConditionalGeneration",
                "Glm5NextForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV3ForCausalLM",
                "BailingMoeV3VLForConditionalGeneration", "BailingMoeV2_5ForCausalLM"):
        # (GLM-5-Next's and Ling 3's KDA beside MLA, its VL model's too,
        # Ling 2.5's lightning attention beside MLA: the same)
        kw.setdefault("mamba_block_size", MAX_MODEL_LEN)
        os.environ.setdefault("VLLM_KIMI_K3_GEMM_AR", "0")
    if arch is None and os.path.exists(os.path.join(model, "params.json")):
        # Mistral's own format (params.json, no config.json): vLLM finds it
        # by consolidated*.safetensors beside params.json, which wshard's
        # output (its rank files, params.json copied) does not have; its
        # users name the format as Mistral's model cards say
        # (--config-format mistral, --tokenizer-mode mistral where
        # tekken.json is there: the test's prompts are token ids)
        kw.setdefault("config_format", "mistral")
        if os.path.exists(os.path.join(model, "tekken.json")):
            kw.setdefault("tokenizer_mode", "mistral")
        if mistral_audio(model):
            kw.setdefault("skip_mm_profiling", True)
    if arch in ("InklingForCausalLM", "InklingForConditionalGeneration"):
        # vLLM's Inkling renderer needs Inkling's tokenizer and its special
        # tokens; the test's prompts are token ids and it has none
        kw.setdefault("tokenizer_mode", "hf")
    if arch in ("MuseGlimmerForConditionalGeneration", "MuseGlimmerForCausalLM", "MiniCPMV",
                "MiniCPMO"):
        # its profiling image is 4096 tokens (16384 patches through the
        # tower): not profiled; its prompts are text alone (MiniCPM-V's
        # and MiniCPM-o's test checkpoints: their stub image processor
        # processes no image)
        kw.setdefault("skip_mm_profiling", True)
    if arch == "DeepseekV4ForCausalLM" and vision_layers(model) > 0:
        # DeepSeek-V4 with its vision tower (vLLM builds
        # DeepseekV4ForConditionalGeneration): its profiling image takes
        # sentinel ids past the test checkpoint's vocabulary; not profiled
        kw.setdefault("skip_mm_profiling", True)
    if arch == "DeepseekV41ForCausalLM" and "vision_config" not in read_config(model):
        # DeepSeek-V4.1 without a vision tower (ckpt_dsv41.make_text): vLLM
        # 0.32 builds the wrapper's tower all the same and loads the model
        # only where the image limit is 0, the tower then a
        # StageMissingLayer (nvidia/vl_model.py:155-170; else "Following
        # weights were not initialized from checkpoint",
        # default_loader.py:562-566), as its users must run it
        kw.setdefault("limit_mm_per_prompt", {"image": 0})
    if arch == "UltravoxModel":
        # its processor is a stand-in named by auto_map (ckpt_ultravox.py,
        # ultravox_processing.py): not profiled
        kw.setdefault("skip_mm_profiling", True)
        kw.setdefault("trust_remote_code", True)
    if arch == "MiDashengLMModel":
        # its processor is a stand-in named by auto_map (ckpt_midashenglm.py,
        # midashenglm_processing.py)
        kw.setdefault("trust_remote_code", True)
    if arch in ("MiDashengLMModel", "CohereAsrForConditionalGeneration",
                "FunASRForConditionalGeneration"):
        # vLLM's MiDashengLM model file imports torchaudio, Cohere
        # Transcribe's feature extractor (vLLM's own) its melscale_fbanks,
        # FunASR's torchaudio.compliance.kaldi, which the engine's venv
        # lacks: a torch-only stand-in (torchaudio_stub) for this run, its
        # workers and vLLM's registry subprocess; not profiled (vLLM's
        # dummies are ten or thirty seconds of sound)
        kw.setdefault("skip_mm_profiling", True)
        import importlib.util
        if importlib.util.find_spec("torchaudio") is None:
            stub = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchaudio_stub")
            sys.path.insert(0, stub)
            os.environ["PYTHONPATH"] = stub + os.pathsep + os.environ.get("PYTHONPATH", "")
    if arch == "MoonshotKimiaForCausalLM":
        # Kimi-Audio: vLLM's profiling sound is a whole chunk
        # (preprocessor_config.json's, ckpt_kimi_audio.py: 2 s): not
        # profiled; the audio prompt runs the encoder
        kw.setdefault("skip_mm_profiling", True)
    if arch == "FireRedASR2ForConditionalGeneration":
        # its processor is vLLM's own (ckpt_fireredasr2.py), whose feature
        # extractor calls kaldi_native_fbank, which the engine's venv lacks:
        # a numpy-only stand-in (kaldi_native_fbank_stub) for this run, its
        # workers and vLLM's registry subprocess; not profiled (vLLM's
        # dummy is thirty seconds of sound)
        kw.setdefault("skip_mm_profiling", True)
        import importlib.util
        if importlib.util.find_spec("kaldi_native_fbank") is None:
            stub = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "kaldi_native_fbank_stub")
            sys.path.insert(0, stub)
            os.environ["PYTHONPATH"] = stub + os.pathsep + os.environ.get("PYTHONPATH", "")
    if arch == "FunAudioChatForConditionalGeneration":
        # its profiling dummy is max_source_positions x group_size frames of
        # sound through the speech tokenizer (funaudiochat.py:579-607),
        # which the test checkpoint does not ship: not profiled
        kw.setdefault("skip_mm_profiling", True)
    if arch == "MossTranscribeDiarizeForConditionalGeneration":
        # its processor is a stand-in named by auto_map (ckpt_moss_td.py,
        # moss_td_processing.py); not profiled (vLLM's dummy is 90 minutes
        # of sound, moss_transcribe_diarize.py:74)
        kw.setdefault("trust_remote_code", True)
        kw.setdefault("skip_mm_profiling", True)
    if arch == "MossAudioModel":
        # its config class is the release's remote code: a stand-in named
        # by auto_map (ckpt_moss_audio.py, moss_audio_config.py)
        kw.setdefault("trust_remote_code", True)
    if arch == "VibeVoiceAsrForConditionalGeneration":
        # not profiled: profiling would run the tokenizer encoders over a
        # dummy sound, which vLLM's CPU build fails on as on the audio
        # prompt (TEXT_PROMPTS_ONLY above)
        kw.setdefault("skip_mm_profiling", True)
    if arch in GRANITE_SPEECH:
        # the test checkpoint's feature extractor is a stand-in named by
        # auto_map (make_ckpt.py, granite_speech_features.py)
        kw.setdefault("trust_remote_code", True)
    if arch == "InklingForConditionalGeneration":
        # its processor's token ids are the release's (200005 and up), past
        # the tiny vocabulary: no multimodal profiling (the towers are built
        # all the same; vLLM's CPU build cannot run Inkling: bytes only)
        kw.setdefault("limit_mm_per_prompt", {"image": 0, "audio": 0})
    if arch == "KananaVForConditionalGeneration":
        # its processor is Kakao's remote code, which the test checkpoint
        # stands in for with one that processes no image: no multimodal
        # profiling (the towers are built all the same, unlike with
        # limit_mm_per_prompt 0; the prompts are text alone)
        kw.setdefault("skip_mm_profiling", True)
    if arch == "BailingMoeV3VLForConditionalGeneration":
        # its processor is the release's remote code, which the test
        # checkpoint stands in for with Qwen3-VL's: no multimodal profiling
        # (the tower and projector are built all the same and checked by
        # bytes; vLLM's CPU build runs no Ling 3)
        kw.setdefault("skip_mm_profiling", True)
    if arch == "OpenVLAForActionPrediction":
        # its towers are the release's (timm's DINOv2 ViT-L and SigLIP
        # So400m): no multimodal profiling, which would run them over the
        # dummy image; an image is 256 tokens (ckpt_openvla.py)
        kw.setdefault("skip_mm_profiling", True)
        kw.setdefault("max_model_len", 2 * MAX_MODEL_LEN)
    if arch == "MolmoForCausalLM":
        # its backbone is the release's (23 layers of 1024 over 577
        # positions a crop): no multimodal profiling, which would run it
        # over the dummy image; an image is a global crop and a tile of 144
        # tokens each with their rows' ends, 316 tokens (ckpt_molmo.py's
        # stand-in processor)
        kw.setdefault("skip_mm_profiling", True)
        kw.setdefault("max_model_len", 2 * MAX_MODEL_LEN)
    if arch == "Phi4MMForCausalLM":
        # its config is remote code (model type phi4mm); its processor is
        # the release's remote code, which the test checkpoint stands in
        # for (ckpt_phi4mm.py, phi4mm_processing.py): not profiled (the
        # prompts are text alone); its dummy image is 545 tokens
        kw.setdefault("trust_remote_code", True)
        kw.setdefault("skip_mm_profiling", True)
        kw.setdefault("max_model_len", 4 * MAX_MODEL_LEN)
    if arch == "Phi3VForCausalLM":
        # its HD transform makes any image up to 16 crops of 336 pixels:
        # about 2500 tokens (ckpt_phi3v.py's stand-in processor)
        kw.setdefault("max_model_len", 4096)
    if arch in ("CLIPModel", "SiglipModel"):
        # the text tower's absolute positions bound the length (77, 64)
        cfg = json.load(open(os.path.join(model, "config.json")))
        kw.setdefault("max_model_len", cfg["text_config"]["max_position_embeddings"])
    if arch == "Gemma3nForConditionalGeneration":
        # an image is 256 tokens and a second of sound 188
        kw.setdefault("max_model_len", 2 * MAX_MODEL_LEN)
    if arch in ("DeciLMForCausalLM", "InternLM2ForCausalLM", "InternLM2ForRewardModel",
                "MiniCPMForCausalLM", "ExaoneForCausalLM",
                "Ernie4_5_VLMoeForConditionalGeneration", "BailingMoeForCausalLM",
                "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM", "InternVLChatModel", "H2OVLChatModel", "NVLM_D",
                "SkyworkR1VChatModel", "TeleChat2ForCausalLM",
                "DeepseekForCausalLM", "IQuestLoopCoderForCausalLM", "SarvamMoEForCausalLM",
                "GteNewModel", "PanguEmbeddedForCausalLM", "PanguUltraMoEForCausalLM",
                "PanguProMoEV2ForCausalLM", "Param2MoEForCausalLM", "SarvamMLAForCausalLM",
                "GteNewForSequenceClassification", "K2HorizonForCausalLM",
                "Plamo3ForCausalLM", "InternS1ForConditionalGeneration",
                "InternS1ProForConditionalGeneration", "OpenPanguVLForConditionalGeneration",
                "KimiVLForConditionalGeneration", "OpenCUAForConditionalGeneration",
                "BeeForConditionalGeneration", "RForConditionalGeneration", "Phi4ForCausalLMV",
                "Eagle2_5_VLForConditionalGeneration",
                "MiniCPMV", "MiniCPMO", "Phi3VForCausalLM",
                "DotsOCRForCausalLM", "NemotronHPuzzleForCausalLM",
                "BailingMoeV3ForCausalLM", "JinaEmbeddingsV5Model", "Step1ForCausalLM",
                "StepVLForConditionalGeneration", "KeyeForConditionalGeneration",
                "KeyeVL1_5ForConditionalGeneration", "Ovis2_5", "Ovis2_6ForCausalLM",
                "Ovis2_6_MoeForCausalLM", "ColBERTJinaRobertaModel",
                "InternS2PreviewForConditionalGeneration",
                "InternS2MobiusForConditionalGeneration",
                "KananaVForConditionalGeneration", "LlavaOnevision2ForConditionalGeneration",
                "Molmo2ForConditionalGeneration", "MolmoForCausalLM",
                "NemotronH_Nano_VL_V2",
                "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
                "NemotronH_Super_Omni_Reasoning_V3", "LlamaNemotronVLModel",
                "Llama_Nemotron_Nano_VL",
                "LlamaNemotronVLForSequenceClassification",
                "NemotronParseForConditionalGeneration", "NanbeigeForCausalLM"):
        # their configs are remote code (transformers has no such model
        # type; Nemotron-NAS's block_configs are read as objects): the
        # releases load only so
        kw.setdefault("trust_remote_code", True)
    if arch in ("HfMoondream", "Moondream3ForCausalLM"):
        # an image is 730 tokens, whatever its size (moondream3.py)
        kw.setdefault("max_model_len", 1024)
    if arch == "Phi4ForCausalLMV":
        # an image is 256 tokens (ckpt_phi4_siglip.py)
        kw.setdefault("max_model_len", 2 * MAX_MODEL_LEN)
    if arch in ("Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM"):
        # an image is 198 tokens (ckpt_ovis2_5.py); its profiling image,
        # 1792 pixels, is 12544 patches through the tower and 3138 tokens:
        # not profiled
        kw.setdefault("max_model_len", 2 * MAX_MODEL_LEN)
        kw.setdefault("skip_mm_profiling", True)
    if arch == "DeepseekVLV2ForCausalLM":
        # an image is a global and a local view of 14x15 tokens and a
        # separator: 421 tokens; not profiled (the full-size SigLIP tower
        # on the profiler's largest tiling costs a CPU half a minute, and
        # the prompts' image runs through it anyway)
        kw.setdefault("max_model_len", 4 * MAX_MODEL_LEN)
        kw.setdefault("skip_mm_profiling", True)
    if arch in ("DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM", "UnlimitedOCRForCausalLM"):
        # an image is 273 tokens (a global view), its profiling image (four
        # 640-pixel tiles beside the global view through SAM ViT-B and
        # CLIP-L at full size) 1093: not profiled, a CPU's minutes
        # (DeepSeek-OCR-2: 257, and four 768-pixel tiles beside it;
        # Unlimited-OCR: 32 tiles)
        kw.setdefault("max_model_len", 8 * MAX_MODEL_LEN)
        kw.setdefault("skip_mm_profiling", True)
    if "speculative_config" in kw and arch in (
            "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
            "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
            "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration"):
        # MTP beside Gated DeltaNet: with prefix caching (vLLM's default)
        # the Mamba cache mode is "align", whose state copy before each
        # step is a Triton kernel the CPU build lacks; without it, "none"
        kw.setdefault("enable_prefix_caching", False)
    if arch == "Step3p7ForConditionalGeneration":
        kw.setdefault("hf_overrides", step3p7_overrides(model))
        # vLLM's Step-3 VL processor makes any image 728 pixels (and 504-pixel
        # crops) for the release's tower: the test's tiny tower is not
        # profiled with images, and its prompts are text alone (vLLM's CPU
        # build routes the release's sigmoid scores on a GPU only: bytes)
        kw.setdefault("skip_mm_profiling", True)
    if arch in ("StepVLForConditionalGeneration", "Step3VLForConditionalGeneration"):
        # the same Step-3 VL processor (step_vl.py inherits it), the same
        # tiny tower: not profiled with images, text prompts
        kw.setdefault("skip_mm_profiling", True)
    if arch == "LlavaOnevision2ForConditionalGeneration":
        # its processor is lmms-lab's remote code, which the test checkpoint
        # stands in for with one that takes still images alone
        # (ckpt_llava_onevision2.py): no video in a prompt, none profiled
        kw.setdefault("limit_mm_per_prompt", {"image": 1, "video": 0})
    if arch in ("KeyeForConditionalGeneration", "KeyeVL1_5ForConditionalGeneration"):
        # the test checkpoint's stand-in processor (keye_processing.py)
        # takes images alone: no video in a prompt, none profiled
        kw.setdefault("limit_mm_per_prompt", {"image": 1, "video": 0})
    method = (read_config(model).get("quantization_config") or {}).get("quant_method")
    if method == "fbgemm_fp8":
        # vLLM 0.32 lists fbgemm_fp8 as deprecated and loads it only so
        kw.setdefault("allow_deprecated_quantization", True)
    if arch == "AriaForConditionalGeneration":
        # its processor takes images of 490 or 980 pixels only: the test's
        # is 256 tokens, past the default length
        kw.setdefault("max_model_len", 2 * MAX_MODEL_LEN)


def answers(model, tp, out, **kw):
    import time
    arch_settings(model, kw)
    if tp * kw.get("pipeline_parallel_size", 1) > 1:
        # vLLM's automatic binding wants a NUMA node per worker; on a small
        # machine let the workers share the cores instead.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        if "torch" in sys.modules:
            # the engine server loaded OpenMP before this request's setting
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from vllm import LLM, SamplingParams
    if tp * kw.get("pipeline_parallel_size", 1) > 1 and \
            os.environ.get("WSHARD_ENGINE_FORK", "1") == "1":
        fork_workers()
    t0 = time.perf_counter()
    # A multimodal checkpoint ships a tokenizer: vLLM's processor for its
    # images needs one (the prompts stay token ids); in Mistral's own
    # format, tekken.json (ckpt_mistral.py's Pixtral).
    tok = os.path.exists(os.path.join(model, "tokenizer.json")) or (
        architecture(model) is None and os.path.exists(os.path.join(model, "tekken.json"))) or (
        architecture(model) == "MoonshotKimiaForCausalLM" and
        os.path.exists(os.path.join(model, "tiktoken.model")))
    if "speculative_config" in kw:
        # the draft's counts (spec_counts below) come from the engine's stats
        kw.setdefault("disable_log_stats", False)
    llm = LLM(model=model, tensor_parallel_size=tp, enforce_eager=True,
              skip_tokenizer_init=not tok, dtype="bfloat16",
              max_model_len=kw.pop("max_model_len", MAX_MODEL_LEN),
              seed=0, distributed_executor_backend="uni"
              if tp * kw.get("pipeline_parallel_size", 1) == 1 else "mp",
              **kw)
    t1 = time.perf_counter()
    sp = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, logprobs=5,
                        detokenize=False)
    prompts = [{"prompt_token_ids": p} for p in PROMPTS]
    if is_whisper(model):
        prompts = whisper_prompts()
    elif is_nemotron_parse(model):
        prompts = nemotron_parse_prompts()
    elif tok and architecture(model) not in TEXT_PROMPTS_ONLY and not mistral_audio(model) and (
            kw.get("runner") != "pooling" or
            architecture(model) in ("CLIPModel", "SiglipModel", "JinaVLForRanking",
                                    "LlamaNemotronVLModel",
                                    "LlamaNemotronVLForSequenceClassification",
                                    "Qwen3ASRForcedAlignerForTokenClassification")
            + RETRIEVERS) and (
            architecture(model) not in COLBERT):
        prompts.append(image_prompt(model))
    got = []
    if architecture(model) == "JinaForRanking":
        # jina-reranker-v3: vLLM formats text prompts (docs, then the query
        # last) into one, each marked with its token; the pooler projects
        # the hidden states of those tokens alone
        docs = ["t17 t243 t9 t88", "t400 t3 t901 t56", "t64 t128 t999"]
        for r in llm.encode(docs + ["t512 t7 t3"], pooling_task="token_embed",
                            use_tqdm=False):
            got.append({"pooled": [round(x, 6) for x in r.outputs.data.flatten().tolist()]})
        res = []
    elif kw.get("runner") == "pooling" and architecture(model) in RETRIEVERS:
        # a multi-vector retriever: an embedding a token, the tokens in turn
        for r in llm.encode(prompts, pooling_task="token_embed", use_tqdm=False):
            got.append({"pooled": [round(x, 6) for x in r.outputs.data.flatten().tolist()]})
        res = []
    elif kw.get("runner") == "pooling" and clef_omni(model):
        # Clef-Omni's head: each option's probability within its question
        from vllm import PoolingParams
        pp = PoolingParams(extra_kwargs={"joint_schema": CLEF_SCHEMA})
        for r in llm.encode(prompts, pp, pooling_task="token_classify", use_tqdm=False):
            got.append({"pooled": [round(x, 6) for x in r.outputs.data.flatten().tolist()]})
        res = []
    elif kw.get("runner") == "pooling" and (architecture(model).endswith("TokenClassification")
                                            or architecture(model) in TOKEN_CLASSIFY):
        # a label's probabilities a token, the tokens one after another (the
        # MLM head: the vocabulary's logits a token; a reward model: its
        # rewards)
        for r in llm.encode(prompts, pooling_task="token_classify", use_tqdm=False):
            got.append({"pooled": [round(x, 6) for x in r.outputs.data.flatten().tolist()]})
        res = []
    elif kw.get("runner") == "pooling" and (architecture(model).endswith("Classification")
                                            or architecture(model) == "JinaVLForRanking"):
        # (jina-reranker-m0: a score a prompt, its image's too)
        for r in llm.classify(prompts, use_tqdm=False):
            got.append({"pooled": [round(x, 6) for x in r.outputs.probs]})
        res = []
    elif kw.get("runner") == "pooling":
        for r in llm.embed(prompts, use_tqdm=False):
            got.append({"pooled": [round(x, 6) for x in r.outputs.embedding]})
        res = []
    else:
        res = llm.generate(prompts, sp, use_tqdm=False)
    for r in res:
        c = r.outputs[0]
        lps = [{str(t): round(lp.logprob, 6) for t, lp in sorted(d.items())}
               for d in c.logprobs]
        got.append({"tokens": list(c.token_ids), "logprobs": lps})
    res = {"llm_init_s": t1 - t0, "answers": got}
    if "speculative_config" in kw:
        res["spec"] = spec_counts(llm)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    os._exit(0)  # the engine's atexit hooks may hang; the driver reaps it


def spec_counts(llm):
    """The speculative decoding counters of llm (vllm:spec_decode_*: drafts,
    draft tokens, accepted tokens, each position's): greedy answers are the
    target's whatever the draft proposes, these are the draft's."""
    got = {}
    for m in llm.get_metrics():
        if m.name.startswith("vllm:spec_decode") and hasattr(m, "value"):
            got[m.name] = m.value
        elif m.name.startswith("vllm:spec_decode") and hasattr(m, "values"):
            got[m.name] = list(m.values)
    return got


def rank_name(pp, stage, rank, kind="model"):
    """A worker's file name: kind "model" for the target, "draft" for a
    speculative draft's state (the hook's DUMP/draft-rank-R)."""
    return f"{kind}-pp-{stage}-tp-{rank}" if pp > 1 else f"{kind}-rank-{rank}"


def rank_files(out, rank, pp=1, stage=0):
    return sorted(glob.glob(os.path.join(
        out, rank_name(pp, stage, rank) + "-part-*.safetensors")))


def read_all(paths):
    """{name: (dtype, shape, bytes)} of safetensors files, read by hand:
    the comparison needs only bytes, and importing torch would cost each
    case seconds."""
    import struct
    t = {}
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        (n,) = struct.unpack_from("<Q", data, 0)
        head = json.loads(data[8:8 + n])
        for k, v in head.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            t[k] = (v["dtype"], v["shape"], data[8 + n + a:8 + n + b])
    return t


def meta_names(path):
    """The tensors of a dump (hook/sitecustomize.py) that were on vLLM's
    meta device, without data: its metadata's wshard_meta."""
    import struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        head = json.loads(f.read(n))
    return set(filter(None, head.get("__metadata__", {}).get("wshard_meta", "").split(",")))


def manifest(out):
    """wshard's manifest in OUT (wshard.json, a dict), {} where there is
    none or it does not parse."""
    try:
        return json.load(open(os.path.join(out, "wshard.json")))
    except (OSError, ValueError):
        return {}


def approx_names(m):
    """The output tensors the manifest m (manifest's) says are computed
    in a way vLLM's CPU build does not round alike, with the units in the
    last place they may differ by: -exp of their source (a rule's
    "neg_exp", vLLM's Mamba A: torch.exp is not rounded correctly,
    wshard's -exp is) 2, an offset added ("plus", PLaMo 3's norms: wshard
    adds the F32 offset as CUDA does, vLLM's CPU build rounds it to the
    parameter's dtype first) 1."""
    return {t["name"]: 2 if any(s.get("neg_exp") for s in t["sources"]) else 1
            for rk in m.get("ranks", []) for t in rk.get("tensors", [])
            if any(s.get("neg_exp") or "plus" in s for s in t.get("sources", []))}


def sinusoid_names(m):
    """The output tensors the manifest m (manifest's) says are a
    "sinusoid" extra (Whisper's position table, {"sinusoid": [N, C]}),
    with the absolute difference their elements may have from vLLM's:
    (N + 1) * 2^-22.
    wshard rounds each F32 step of transformers' sinusoids correctly;
    torch's own exp, sin and cos are not (MKL or SLEEF on a CPU, another
    on a GPU, so vLLM's table is not one set of bytes), within an ulp:
    an ulp of w_k moves t * w_k (t < N, w_k <= 1) by up to N * 2^-23, its
    rounding on either side by N * 2^-24 each, the sine's or cosine's (a
    1-Lipschitz function) last bit 2^-23 on either side."""
    return {t["name"]: (s["sinusoid"][0] + 1) * 2.0 ** -22
            for rk in m.get("ranks", []) for t in rk.get("tensors", [])
            for s in t.get("sources", []) if "sinusoid" in s}


def within_abs(a, b, tol):
    """F32 bytes a and b within tol of each other, element by element."""
    if len(a) != len(b) or len(a) % 4:
        return False
    x = struct.unpack(f"<{len(a) // 4}f", a)
    y = struct.unpack(f"<{len(b) // 4}f", b)
    return all(abs(u - v) <= tol for u, v in zip(x, y))


def within_ulps(a, b, dtype, n):
    """Bytes a and b of dtype (F32, F16 or BF16) within n units in the last
    place, element by element."""
    w = 4 if dtype == "F32" else 2
    if dtype not in ("F32", "F16", "BF16") or len(a) != len(b) or len(a) % w:
        return False
    f = "i" if w == 4 else "h"
    x = struct.unpack(f"<{len(a) // w}{f}", a)
    y = struct.unpack(f"<{len(b) // w}{f}", b)
    return all(abs(u - v) <= n for u, v in zip(x, y))


def compare_bytes(dump, out, tp, pp=1, kind="model"):
    bad = 0
    m = manifest(out)
    approx = approx_names(m)
    sinus = sinusoid_names(m)
    for s, r in [(s, r) for s in range(pp) for r in range(tp)]:
        ref = read_all([os.path.join(dump, rank_name(pp, s, r, kind) + ".safetensors")])
        meta = meta_names(os.path.join(dump, rank_name(pp, s, r, kind) + ".safetensors"))
        got = read_all(rank_files(out, r, pp, s))
        if pp > 1:
            r = f"{r} of stage {s}"
        for k in sorted(set(ref) | set(got)):
            if k not in got:
                print(f"rank {r}: {k}: missing from wshard's output "
                      f"(vLLM: {ref[k][0]} {ref[k][1]})")
                bad += 1
            elif k not in ref:
                print(f"rank {r}: {k}: not in vLLM's state "
                      f"(wshard: {got[k][0]} {got[k][1]})")
                bad += 1
            elif ref[k][:2] != got[k][:2]:
                print(f"rank {r}: {k}: vLLM {ref[k][0]} {ref[k][1]}"
                      f", wshard {got[k][0]} {got[k][1]}")
                bad += 1
            elif k in meta:
                pass  # no data in vLLM's state: dtype and shape alone
            elif ref[k][2] != got[k][2] and not (
                    k in approx and within_ulps(ref[k][2], got[k][2], ref[k][0], approx[k])) and \
                    not (k in sinus and ref[k][0] == "F32" and
                         within_abs(ref[k][2], got[k][2], sinus[k])):
                a, b = ref[k][2], got[k][2]
                n = sum(x != y for x, y in zip(a, b))
                print(f"rank {r}: {k}: {n} of {len(a)} bytes differ")
                bad += 1
        print(f"rank {r}: {len(ref)} tensors in vLLM's state, "
              f"{len(got)} in wshard's output")
    return 1 if bad else 0


# How far two runs of the same weights may put one logprob apart: vLLM's CPU
# kernels do not always sum in the same order from one start to the next,
# and a bf16 logit near 8 moves by 0.0625 when its last bit does.
NOISE = 0.07
# a pooled output's elements (an embedding, normalised; class probabilities):
# two starts' rounding
EMBED_NOISE = 0.002


def near(p, q):
    """True when two top-5 logprob dicts put each token they share within
    NOISE, and a token only one of them lists within NOISE of the other's
    last (the two fifths can trade places)."""
    for x, y in ((p, q), (q, p)):
        for t, v in x.items():
            w = y.get(t, min(y.values()))
            if abs(v - w) > NOISE:
                return False
    return True


def tie(lp, a, b):
    """True when both tokens are in the top-5 dict lp, within NOISE."""
    return a in lp and b in lp and abs(lp[a] - lp[b]) <= NOISE


def compare_prompt(p, q):
    """None where prompt answers p and q agree: the same tokens with
    logprobs within NOISE, or the same up to a token where both runs saw
    the two choices tied within NOISE (greedy decoding then follows either;
    what comes after is not compared).  Else the reason, one line."""
    notes = []
    for j, (s, t) in enumerate(zip(p["tokens"], q["tokens"])):
        lp, lq = p["logprobs"][j], q["logprobs"][j]
        if s != t:
            a, b = str(s), str(t)
            if tie(lp, a, b) and tie(lq, a, b):
                return None, f"token {j}: {s} or {t}, tied within {NOISE} in both runs"
            return f"token {j}: {s} or {t}", None
        if not near(lp, lq):
            return f"token {j}: top-5 logprobs {lp} or {lq}", None
        if lp != lq:
            notes.append(j)
    if len(p["tokens"]) != len(q["tokens"]):
        return "lengths differ", None
    return None, notes and f"logprobs within {NOISE} at tokens {notes}"


def compare_answers(a, b):
    x = json.load(open(a)).get("spec")
    y = json.load(open(b)).get("spec")
    spec = 0
    if x is not None or y is not None:
        # the draft's proposals: the same counts of drafts and of accepted
        # tokens (each position's) from both
        short = {k.replace("vllm:spec_decode_", ""): v for k, v in (x or {}).items()}
        if x != y:
            spec = 1
            print(f"speculative decoding differs: {a}: {x}; {b}: {y}")
        else:
            print("draft: the same counts "
                  + ", ".join(f"{k} {v}" for k, v in sorted(short.items())))
    return compare_answer_lists(a, b) or spec


def compare_answer_lists(a, b):
    x = json.load(open(a))["answers"]
    y = json.load(open(b))["answers"]
    if any("pooled" in p and not p["pooled"] for p in x + y):
        print("a prompt's pooled output is empty")
        return 1
    if x == y:
        what = "pooled outputs" if x and "pooled" in x[0] else f"x {MAX_TOKENS} tokens"
        print(f"answers identical ({len(x)} prompts {what})")
        return 0
    bad = len(x) != len(y)
    for i, (p, q) in enumerate(zip(x, y)):
        if p == q:
            continue
        if "pooled" in p:
            d = max((abs(s - t) for s, t in zip(p["pooled"], q["pooled"])), default=1)
            if len(p["pooled"]) != len(q["pooled"]) or d > EMBED_NOISE:
                bad = True
                print(f"prompt {i}: pooled outputs differ by up to {d}")
            else:
                print(f"prompt {i}: pooled output the same but for rounding (within {d})")
            continue
        why, note = compare_prompt(p, q)
        if why:
            bad = True
            print(f"prompt {i}: {why}; {a}: {p['tokens']}; {b}: {q['tokens']}")
        elif note:
            print(f"prompt {i}: same but for rounding ({note})")
    if not bad:
        print(f"answers the same within rounding ({len(x)} prompts x {MAX_TOKENS} tokens)")
    return 1 if bad else 0


# The engine server.  Its requests: an 8-byte length, then that many bytes
# of JSON (argv, env, cwd), sent with the client's fds 0, 1 and 2; its
# answer: the request's exit status as text.
def serve(path):
    import signal
    import socket
    import ctypes
    ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: see reap()
    engine_env()
    import torch  # noqa: F401  (the imports every request shares)
    from vllm import LLM, SamplingParams  # noqa: F401
    import importlib
    # what every start imports past vllm.LLM (its engine core, executors,
    # CPU worker, loaders and sampler): 3 s a start, once here
    for m in ("vllm.v1.engine.core", "vllm.v1.engine.llm_engine",
              "vllm.v1.executor.uniproc_executor", "vllm.v1.executor.multiproc_executor",
              "vllm.v1.worker.cpu_worker", "vllm.v1.worker.cpu_model_runner",
              "vllm.model_executor.model_loader", "vllm.model_executor.layers.fused_moe",
              "vllm.model_executor.models.registry", "vllm.v1.sample.sampler"):
        try:
            importlib.import_module(m)
        except ImportError:
            pass  # another vLLM: its starts import what it has
    import gc
    # what is imported by now lives as long as the server: out of the
    # collector's sight, the collections vLLM runs in each start (five,
    # 1.5 s in all) no longer walk it
    gc.collect()
    gc.freeze()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path + ".tmp")
    srv.listen(1)
    os.replace(path + ".tmp", path)  # the client finds it ready or absent
    while True:
        conn, _ = srv.accept()
        try:
            msg, fds, _, _ = socket.recv_fds(conn, 8, 3)
            (n,) = struct.unpack("<Q", msg)
            body = b""
            while len(body) < n:
                part = conn.recv(n - len(body))
                if not part:
                    raise OSError("request cut short")
                body += part
            req = json.loads(body)
        except (OSError, ValueError, struct.error):
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            srv.close()
            conn.close()
            os.setsid()
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
                os.close(fd)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            os.environ.pop("WSHARD_ENGINE_SERVER", None)
            rc = 1
            try:
                rc = main(req["argv"]) or 0
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        for fd in fds:
            os.close(fd)
        status = reap(pid, conn)
        try:
            conn.sendall(str(status).encode())
        except OSError:
            pass
        conn.close()


def reap(pid, conn):
    """Waits for request pid, or for its client to hang up (the driver's
    time limit killed it); kills what is left of the request's process
    group (vLLM's workers can outlive it) and returns its exit status."""
    import select
    import signal
    import time
    import socket
    status = None
    while status is None:
        r, _, _ = select.select([conn], [], [], 0.2)
        if r:
            try:
                gone = not conn.recv(1, socket.MSG_PEEK)
            except OSError:
                gone = True
            if gone:
                # (the request, unreaped until below, is still its group)
                os.killpg(pid, signal.SIGKILL)
        w, st = os.waitpid(pid, os.WNOHANG)
        if w:
            status = os.waitstatus_to_exitcode(st)
    # The server is its requests' subreaper: their orphans are its
    # children, reaped here rather than left as zombies in the group.
    for _ in range(100):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            break
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return status if status >= 0 else 128 - status


def request(path, argv):
    """Runs argv in the engine server at path with this process's
    environment and standard streams; its exit status, or None where no
    server answers."""
    import socket
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(path)
    except OSError:
        return None
    body = json.dumps({"argv": argv, "env": dict(os.environ),
                       "cwd": os.getcwd()}).encode()
    socket.send_fds(c, [struct.pack("<Q", len(body))], [0, 1, 2])
    c.sendall(body)
    got = b""
    while True:
        part = c.recv(64)
        if not part:
            break
        got += part
    return int(got) if got else None


def main(argv):
    saved = argv[1:]
    ep = {}
    pp = 1
    draft = False
    while len(argv) > 3 and argv[1] in ("--ep", "--pp", "--mtp", "--eagle3", "--dflash",
                                        "--dspark", "--medusa", "--eagle", "--peagle", "--draft"):
        if argv[1] == "--draft":
            draft = True
            argv = argv[:1] + argv[2:]
            continue
        if argv[1] == "--ep":
            ep["enable_expert_parallel"] = True
            ep["expert_placement_strategy"] = argv[2]
        elif argv[1] in ("--mtp", "--eagle3", "--dflash", "--dspark", "--medusa", "--eagle",
                         "--peagle"):
            ep["speculative_config"] = {"method": argv[1][2:], "model": os.path.abspath(argv[2]),
                                        "num_speculative_tokens": 1}
            if argv[1] == "--peagle":
                # P-EAGLE: EAGLE-3 drafting every token at once
                # (speculators' peagle, SpeculatorsConfig's conversion)
                ep["speculative_config"].update(method="eagle3", parallel_drafting=True,
                                                num_speculative_tokens=2)
            if argv[1] == "--medusa":
                # vLLM builds num_speculative_tokens heads (MedusaConfig's
                # num_lookahead_tokens): every head the draft has
                with open(os.path.join(argv[2], "config.json")) as f:
                    ep["speculative_config"]["num_speculative_tokens"] = \
                        json.load(f).get("num_heads", 1)
        else:
            pp = int(argv[2])
            ep["pipeline_parallel_size"] = pp
        argv = argv[:1] + argv[3:]
    cmd = argv[1] if len(argv) > 1 else ""
    server = os.environ.get("WSHARD_ENGINE_SERVER")
    if server and cmd in ("ref", "load", "time"):
        rc = request(server, [argv[0]] + saved)
        if rc is not None:
            return rc
        print(f"oracle.py: no engine server at {server}: vLLM is imported here",
              file=sys.stderr)
    if cmd == "serve" and len(argv) == 3:
        return serve(argv[2])
    if cmd == "ref" and len(argv) == 6:
        os.environ["WSHARD_ORACLE_DUMP"] = os.path.abspath(argv[4])
        engine_env()
        eager()
        answers(argv[2], int(argv[3]), argv[5], **ep)
    elif cmd == "load" and len(argv) in (5, 6):
        engine_env()
        eager()
        if len(argv) == 5 or argv[5] == "sharded_state":
            # stock vLLM: no general plugin (the wshard plugin would also
            # answer vLLM's reading of the output's headers)
            os.environ["VLLM_PLUGINS"] = ""
        answers(argv[2], int(argv[3]), argv[4],
                load_format=argv[5] if len(argv) == 6 else "sharded_state", **ep)
    elif cmd == "time" and len(argv) == 6:
        engine_env()
        answers(argv[2], int(argv[3]), argv[5], load_format=argv[4], **ep)
    elif cmd == "bytes" and len(argv) == 5:
        return compare_bytes(argv[2], argv[3], int(argv[4]), pp, "draft" if draft else "model")
    elif cmd == "answers" and len(argv) == 4:
        return compare_answers(argv[2], argv[3])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
