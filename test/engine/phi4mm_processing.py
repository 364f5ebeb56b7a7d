"""A stand-in for Phi-4-multimodal's processing_phi4mm.py (Phi4MMProcessor,
Microsoft's remote code, which the test cannot ship), enough for vLLM 0.32
to start (phi4mm.py sizes its dummy image and audio through it): the image
processor is transformers' Phi4MultimodalImageProcessor with dynamic_hd 1
(the release's 36 makes vLLM's dummy image 36 crops), the audio one its
Phi4MultimodalFeatureExtractor, their outputs under the release's names
(input_image_embeds, image_sizes, image_attention_mask,
input_audio_embeds, audio_embed_sizes).  Text is tokenized as is: vLLM
replaces the <|image_N|> and <|audio_N|> tags itself."""
from transformers import Phi4MultimodalFeatureExtractor, Phi4MultimodalImageProcessor
from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


class Phi4MMProcessor(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, **kwargs):
        super().__init__(tokenizer)
        self.image_processor = Phi4MultimodalImageProcessor(dynamic_hd=1)
        self.audio_processor = Phi4MultimodalFeatureExtractor()

    def __call__(self, text=None, images=None, audios=None, return_tensors=None, **kwargs):
        out = {}
        if text is not None:
            out.update(self.tokenizer(text, return_tensors=return_tensors))
        if images:
            got = self.image_processor(images, return_tensors="pt")
            out["input_image_embeds"] = got["image_pixel_values"]
            out["image_sizes"] = got["image_sizes"]
            out["image_attention_mask"] = got["image_attention_mask"]
        if audios:
            got = self.audio_processor([a for a, _ in audios], return_tensors="pt")
            out["input_audio_embeds"] = got["audio_input_features"]
            out["audio_embed_sizes"] = got["audio_embed_sizes"]
        return BatchFeature(out, tensor_type=return_tensors)
