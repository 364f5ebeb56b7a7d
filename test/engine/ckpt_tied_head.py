"""A Llama whose config.json says tie_word_embeddings but which ships an
lm_head.weight of its own, unlike its embedding (as a fine-tune that
trained the head apart, or a config edited afterwards, leaves it).  vLLM
0.32 then loads the head untied (ModelConfig.maybe_untie_word_embeddings)
and keeps it so, the bytes differing; wshard writes it untied and its
config.json false."""


def make(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, update_config
    from make_ckpt import COMMON
    cfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=False))
    torch.manual_seed(1234)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)

    def tie(c):
        c["tie_word_embeddings"] = True
    update_config(out, tie)
