"""Qwen3-ASR's two other vLLM 0.32 architectures, tiny, as Qwen releases
them (thinker.*, config.json's thinker_config), on make_ckpt's qwen3_asr
case (a Qwen3 text model, Qwen3-Omni's audio encoder of 2 layers of 6
heads, its projector inside as proj1 and proj2).

make_realtime: Qwen3ASRRealtimeGeneration (qwen3_asr_realtime.py:176), the
streaming endpoint's class: Qwen3ASRForConditionalGeneration's weights
under its own name, config.json's architectures the only difference.

make_aligner: Qwen3ASRForcedAlignerForTokenClassification
(qwen3_asr_forced_aligner.py:30), Qwen3-ForcedAligner: the same thinker
with a timestamp classifier, thinker.lm_head of [classify_num, hidden]
(thinker_config.classify_num), in place of the vocabulary head.  Built by
transformers' own Qwen3ASRForTokenClassification (its score head, no bias,
num_labels classes), renamed as the release names it: the text model
under thinker.model., the encoder under thinker.audio_tower. with the
projector inside, score under thinker.lm_head (vLLM's mapper reads that
form alone, qwen3_asr_forced_aligner.py:57-65)."""
import make_ckpt

# classify_num: timestamp bins (the release has 5000)
CLASSES = 48


def make_realtime(out):
    from ckpt_io import update_config
    make_ckpt.make("qwen3_asr", out)
    update_config(out, lambda c: c.update(architectures=["Qwen3ASRRealtimeGeneration"]))


def make_aligner(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rename_prefix, update_config
    over = make_ckpt.CASES["qwen3_asr"][2]
    kw = dict(over, text_config=dict(make_ckpt.COMMON, **over["text_config"]),
              num_labels=CLASSES, token_classification_bias=False)
    cfg = transformers.Qwen3ASRConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Qwen3ASRForTokenClassification(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    make_ckpt.audio_processor(out, cfg)
    rename_prefix(out, "score.", "lm_head.")
    make_ckpt.released_qwen3_asr(out)

    def release(c):
        c["architectures"] = ["Qwen3ASRForcedAlignerForTokenClassification"]
        c["thinker_config"]["classify_num"] = CLASSES
        for k in ("id2label", "label2id", "token_classification_bias"):
            c.pop(k, None)
    update_config(out, release)
