"""A stand-in for fixie-ai's UltravoxProcessor (the releases'
ultravox_processing.py, remote code), enough for vLLM 0.32's Ultravox
processor: a WhisperFeatureExtractor as audio_processor (its data parser
reads the sampling rate from it, ultravox.py:136-161) beside the tokenizer,
and its outputs for sound (vLLM sizes its encoder budget with a dummy
one): each sound cut in chunks of the feature extractor's chunk_length
(2 seconds in the test checkpoint, 30 in the releases), each chunk's mel features
(audio_values), frames (audio_lens) and tokens (audio_token_len: the
encoder halves the frames, the projector stacks stack_factor of them), the
chunks of each sound (audio_num_chunks), its <|audio|> repeated that many
tokens.  Written into the test checkpoint of Ultravox and named by its
processor_config.json's auto_map (ckpt_ultravox.py); the engine cases'
prompts are text."""
import math

import numpy as np
from transformers import BatchFeature, ProcessorMixin


class UltravoxProcessor(ProcessorMixin):
    def __init__(self, audio_processor=None, tokenizer=None, stack_factor=8, **kwargs):
        self.stack_factor = stack_factor
        super().__init__(audio_processor, tokenizer)

    def __call__(self, text=None, audios=None, sampling_rate=16000,
                 include_audio_num_chunks=False, return_tensors=None, **kwargs):
        if isinstance(text, (list, tuple)):
            text = text[0]
        data = {}
        if audios is not None:
            chunk = self.audio_processor.chunk_length * sampling_rate
            values, lens, toks, nchunks = [], [], [], []
            for a in audios:
                a = np.asarray(a, dtype=np.float32)
                pieces = [a[i:i + chunk] for i in range(0, max(len(a), 1), chunk)]
                nchunks.append(len(pieces))
                n_tok = 0
                for p in pieces:
                    f = self.audio_processor(p, sampling_rate=sampling_rate,
                                             padding="max_length", return_attention_mask=True,
                                             return_tensors="np")
                    values.append(f["input_features"][0])
                    frames = int(f["attention_mask"][0].sum())
                    lens.append(frames)
                    toks.append(math.ceil(math.ceil(frames / 2) / self.stack_factor))
                    n_tok += toks[-1]
                head, sep, tail = text.partition("<|audio|>")
                text = head + "\0" * n_tok + tail if sep else text
            text = text.replace("\0", "<|audio|>")
            data = {"audio_values": np.stack(values), "audio_lens": np.array(lens),
                    "audio_token_len": np.array(toks)}
            if include_audio_num_chunks:
                data["audio_num_chunks"] = np.array(nchunks)
        data.update(self.tokenizer([text], add_special_tokens=False))
        return BatchFeature(data, tensor_type=return_tensors)
